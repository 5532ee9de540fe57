"""How a job behaves when PEs leave, fail, share threads or are imitated.

    departures.py MODE

blame      PE 2 exits 3 while the others wait in barrier_all.
team       PE 2 (not in the team of PEs 0 and 1) exits first; the team's host and
           device collectives and the others' finalize still complete.
threads    two threads of every PE make 100 sync_all calls each, at once.
timeout    PE 0 waits in barrier_all for PE 1, which sleeps past the wait time-out.
child      PE 1 starts a child process that calls init() once PE 1 has finalized.
plant      PE 0 plants entries under the job's /dev/shm prefix; the job ends well.
exception  PE 1 raises while its kernel waits for a signal that never comes.
spin       every PE's kernel polls its heap until the job is interrupted.
"""

import os
import subprocess
import sys
import threading
import time

import numpy as np

import numba_shmem as shmem
from numba import cuda


def say(line):
    os.write(1, (line + "\n").encode())  # one write: lines of several PEs do not mix


def blame():
    shmem.barrier_all()
    if shmem.my_pe() == 2:
        sys.exit(3)
    shmem.barrier_all()


@cuda.jit
def device_sum(team, dest, source):
    shmem.sum_reduce_block(team, dest, source, source.size)


def team():
    me = shmem.my_pe()
    pair = shmem.team_split_strided(shmem.TEAM_WORLD, 0, 1, 2)
    source = shmem.zeros(8, np.int64)
    dest = shmem.zeros(8, np.int64)
    source.copy_to_device(np.arange(8, dtype=np.int64) + me)
    shmem.barrier_all()
    if me == 2:
        sys.exit(0)  # leaves without finalize: a clean exit
    time.sleep(2)  # PE 2 is gone
    shmem.barrier(pair)
    shmem.sum_reduce(pair, dest, source, 8)
    cuda.synchronize()
    host = dest.copy_to_host()
    dest.copy_to_device(np.zeros(8, np.int64))
    device_sum[1, 32](pair, dest, source)
    cuda.synchronize()
    device = dest.copy_to_host()
    expected = (2 * np.arange(8) + 1).tolist()
    shmem.sync(pair)
    shmem.finalize()
    say(f"PE {me}: host {host.tolist() == expected}, device {device.tolist() == expected}")


def _leaves_while_waited_for(wait):
    """PE 1 leaves (exit 0, without finalize) while PE 0 waits for it in
    ``wait()``: the wait stops at once with the error the other forms give
    (on the GPU the kernel stops and the PE says which PE left)."""
    shmem.barrier_all()
    if shmem.my_pe() == 1:
        time.sleep(1)  # PE 0 waits by now
        sys.exit(0)
    start = time.monotonic()
    try:
        wait()
        cuda.synchronize()
        say("PE 0: the wait returned")
    except Exception as exc:  # the test reads what it says
        say(f"PE 0 after {time.monotonic() - start:.0f} s: {type(exc).__name__}: {exc}")


def member_left():
    """... in a host reduction in lines."""
    source = shmem.zeros(8, np.int64)
    dest = shmem.zeros(8, np.int64)
    _leaves_while_waited_for(lambda: shmem.sum_reduce(shmem.TEAM_WORLD, dest, source, 8))


@cuda.jit
def device_barrier():
    shmem.barrier_all()


def barrier_left():
    """... in a kernel's barrier_all (launched plainly: collective_launch would
    wait for PE 1 on the host)."""
    _leaves_while_waited_for(lambda: device_barrier[1, 1]())


def _in_two_threads(call, times):
    """``call()`` ``times`` times in each of two threads at once; then one line
    with the errors seen."""
    errors = []

    def loop():
        try:
            for _ in range(times):
                call()
        except Exception as exc:  # the test prints what went wrong
            errors.append(repr(exc))

    workers = [threading.Thread(target=loop) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    shmem.barrier_all()
    say(f"PE {shmem.my_pe()}: {len(errors)} errors {errors[:1]}")


def threads():
    _in_two_threads(shmem.sync_all, 100)


def allocations():
    """Two threads of each PE allocate at once: each call's steps (the
    agreement, the growth, the zeroing) reach the other PEs together, so the
    calls pair up whole (before: "PE 0 called shmem.array, PE 1 called
    shmem.zeros", a call nobody made)."""
    _in_two_threads(lambda: shmem.zeros(1 << 16, np.uint8), 30)


def timeout():
    if shmem.my_pe() == 1:
        time.sleep(8)
        return
    try:
        shmem.barrier_all()
    except shmem.ShmemTimeoutError as exc:
        say(f"PE 0: {exc}")
        sys.exit(7)


_CHILD = """
import sys
import numba_shmem as shmem
try:
    shmem.init()
except shmem.ShmemError as exc:
    print(f"child: {type(exc).__name__}: {exc}")
    sys.exit(0)
print(f"child: joined as PE {shmem.my_pe()}")
"""


def child():
    me = shmem.my_pe()
    shmem.barrier_all()
    if me != 1:
        shmem.finalize()
        return
    started = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1)\n" + _CHILD])
    shmem.finalize()  # the child's init() comes after this PE's bye
    started.wait(timeout=60)


def plant():
    me = shmem.my_pe()
    job = os.environ["SHMEM_RUN_JOBID"]
    if me == 0:
        print(f"PE 0: job {job}", flush=True)
        os.mkdir(f"/dev/shm/nshmem-{job}-1")  # a name a PE used, now not removable as a file
        with open(f"/dev/shm/nshmem-{job}-planted", "w"):
            pass
        mine = str(os.getpid())
        shown = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or pid == mine:
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if job.encode() in f.read():
                        shown.append(pid)
            except OSError:
                pass
        say(f"PE 0: job id on {len(shown)} command lines")
    shmem.barrier_all()
    shmem.finalize()


@cuda.jit
def wait_forever(sig):
    if cuda.grid(1) == 0:
        shmem.signal_wait_until(sig, shmem.CMP_EQ, 1)


def exception():
    sig = shmem.zeros(1, np.uint64)
    shmem.barrier_all()
    if shmem.my_pe() == 1:
        wait_forever[1, 1](sig)  # nobody will signal
        raise ValueError("a host error while the kernel waits")
    shmem.barrier_all()


@cuda.jit
def poll(flag, out):
    i = cuda.grid(1)
    while flag[0] == 0:
        out[i] += flag[0] + 1


def spin():
    flag = shmem.zeros(1, np.int64)
    out = shmem.zeros(64, np.int64)
    shmem.barrier_all()
    say(f"PE {shmem.my_pe()} spinning")
    poll[2, 32](flag, out)


if __name__ == "__main__":
    shmem.init()
    globals()[sys.argv[1]]()
