"""The MPI bootstrap: its descriptor sockets against strangers and under a
long TMPDIR; jobs on communicators the program passes.

    mpiexec -n 2 python mpi_bootstrap.py strangers|socket_dir
    mpiexec -n 4 python mpi_bootstrap.py split

strangers: on rank 0, one process connects to rank 1's descriptor socket and
says nothing, another sends a wrong secret; then the ranks exchange
descriptors, which must arrive right.
socket_dir: the ranks exchange descriptors and say where their sockets are
(run with a TMPDIR too long for a socket's path).
"""

import os
import subprocess
import sys
import tempfile

import numba_shmem as shmem
import numpy as np
from numba import cuda
from numba_shmem import _runtime

_STRANGER = """
import json, socket, struct, sys, time
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.connect(sys.argv[1])
if sys.argv[2] == "secret":
    body = json.dumps({"secret": "0" * 32, "from": 0, "what": "x"}).encode()
    sock.sendall(struct.pack("!II", len(body), 0) + body)
print("connected", flush=True)
time.sleep(60)
"""


def say(line):
    os.write(1, (line + "\n").encode())


def exchange_files(boot):
    """What every local rank's file, passed to this rank by descriptor, says."""
    with tempfile.TemporaryFile() as f:
        f.write(b"from %d" % boot.rank)
        f.flush()
        got = boot.exchange_fds([f.fileno()], "test descriptors")
        seen = [os.pread(fds[0], 16, 0).decode() for fds in got]
        for index, fds in enumerate(got):
            if index != boot.local_rank:
                os.close(fds[0])
    return seen


def strangers():
    shmem.init()
    boot = _runtime.current().bootstrap
    me = boot.rank
    # (before: abstract sockets, open to every local user)
    paths = getattr(boot, "_paths", None) or [f"\0numba-shmem-{boot.job_id}-{r}" for r in (0, 1)]
    mode = oct(os.stat(os.path.dirname(paths[me])).st_mode & 0o777) if paths[me][0] != "\0" \
        else "abstract"
    started = []
    if me == 0:
        for kind in ("silent", "secret"):
            proc = subprocess.Popen([sys.executable, "-c", _STRANGER, paths[1], kind],
                                    stdout=subprocess.PIPE, text=True)
            assert proc.stdout.readline().strip() == "connected"
            started.append(proc)
    boot.barrier("strangers connected")
    seen = exchange_files(boot)
    for proc in started:
        proc.kill()
        proc.wait()
    say(f"PE {me}: directory mode {mode}, received {seen}")
    shmem.finalize()


def socket_dir():
    shmem.init()
    boot = _runtime.current().bootstrap
    seen = exchange_files(boot)
    shmem.barrier_all()
    say(f"PE {boot.rank}: socket {boot._paths[boot.local_rank]}, received {seen}")
    shmem.finalize()


@cuda.jit
def send_right(received):
    if cuda.grid(1) == 0:
        shmem.p(received, shmem.my_pe(), (shmem.my_pe() + 1) % shmem.n_pes())


def split():
    from mpi4py import MPI

    world = MPI.COMM_WORLD.Get_rank()
    try:
        shmem.init(comm=MPI.COMM_WORLD.py2f())
    except shmem.ShmemUsageError as exc:
        say(f"rank {world}: {exc}")
    half = MPI.COMM_WORLD.Split(world % 2, world)
    shmem.init(comm=half)
    received = shmem.zeros(1, np.int32)
    send_right[1, 32](received)
    shmem.barrier_all()
    say(f"rank {world}: PE {shmem.my_pe()} of {shmem.n_pes()} received "
        f"{int(received.copy_to_host()[0])}")
    shmem.free(received)
    shmem.finalize()
    half.Free()


if __name__ == "__main__":
    globals()[sys.argv[1]]()
