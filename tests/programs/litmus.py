"""Message-passing litmus tests: every way the API orders data before a flag,
checked after every wait over many rounds.

    litmus.py ROUNDS

Every PE sends to its right neighbour and receives from its left one, all at
once. Each round the sender writes the round's values into the receiver's
``data`` and raises its signal; the receiver waits for the signal, checks every
element, then acknowledges so that the sender may overwrite ``data``. A value
of an earlier round seen after the wait is an ordering failure. Prints
``PE n: <mode> ok`` per mode, or the number of stale elements seen.
"""

import sys

import numba_shmem as shmem  # first: on a machine without a GPU it picks the simulator
import numpy as np
from numba import cuda

N = 96  # elements a round: 16-byte vectors plus a tail, over three warps
THREADS = 96
MODES = ("put_signal", "put_signal_nbi", "put_signal_warp", "put_signal_block",
         "put_fence_signal_op", "p_fence_signal_op", "put_nbi_quiet_signal_op",
         "put_block_barrier_all")
#: a put and a signal_op with no fence between them: nothing orders the data
#: before the signal, so on a GPU stale elements may be seen; reported, not
#: checked (it shows that the checks see what they look for)
CONTROL = "put_nbi_signal_op_unordered"


@cuda.jit
def litmus(mode, data, source, sig, ack, rounds, stale):
    me = shmem.my_pe()
    n = shmem.n_pes()
    right = (me + 1) % n
    left = (me + n - 1) % n
    tid = cuda.threadIdx.x
    for r in range(rounds):
        stamp = (mode * rounds + r + 1) * 1000  # no two rounds of any mode alike
        for i in range(tid, N, THREADS):
            source[i] = stamp + me
        cuda.syncthreads()
        if mode == 7:
            # a barrier completes the puts before it: no signal
            shmem.put_block(data, source, right)
            shmem.barrier_all_block()
        else:
            if mode == 0 and tid == 0:
                shmem.put_signal(data, source, sig, r + 1, shmem.SIGNAL_SET, right)
            elif mode == 1 and tid == 0:
                shmem.put_signal_nbi(data, source, sig, r + 1, shmem.SIGNAL_SET, right)
            elif mode == 2 and tid < 32:
                shmem.put_signal_warp(data, source, sig, 1, shmem.SIGNAL_ADD, right)
            elif mode == 3:
                shmem.put_signal_block(data, source, sig, 1, shmem.SIGNAL_ADD, right)
            elif mode == 4 and tid == 0:
                shmem.put(data, source, right)
                shmem.fence()
                shmem.signal_op(sig, r + 1, shmem.SIGNAL_SET, right)
            elif mode == 5 and tid == 0:
                for i in range(N):
                    shmem.p(data[i:i + 1], source[i], right)
                shmem.fence()
                shmem.signal_op(sig, 1, shmem.SIGNAL_ADD, right)
            elif mode == 6 and tid == 0:
                shmem.put_nbi(data, source, right)
                shmem.quiet()
                shmem.signal_op(sig, r + 1, shmem.SIGNAL_SET, right)
            elif mode == 8 and tid == 0:
                shmem.put_nbi(data, source, right)
                shmem.signal_op(sig, r + 1, shmem.SIGNAL_SET, right)
            if tid == 0:
                shmem.signal_wait_until(sig, shmem.CMP_GE, r + 1)
            cuda.syncthreads()
        for i in range(tid, N, THREADS):
            if data[i] != stamp + left:
                cuda.atomic.add(stale, 0, 1)
        cuda.syncthreads()
        if mode == 7:
            shmem.barrier_all_block()  # everyone has read before anyone writes again
        elif tid == 0:
            shmem.signal_op(ack, 1, shmem.SIGNAL_ADD, left)
            shmem.signal_wait_until(ack, shmem.CMP_GE, r + 1)
        cuda.syncthreads()


def main():
    rounds = int(sys.argv[1])
    shmem.init()
    me = shmem.my_pe()
    data = shmem.zeros(N, np.int64)
    source = cuda.device_array(N, np.int64)
    stale = cuda.to_device(np.zeros(1, np.int64))
    for mode, name in enumerate(MODES + (CONTROL,)):
        sig = shmem.zeros(1, np.uint64)
        ack = shmem.zeros(1, np.uint64)
        shmem.barrier_all()
        shmem.collective_launch(litmus, 1, THREADS, mode, data, source, sig, ack, rounds,
                                stale)
        shmem.barrier_all()
        count = int(stale.copy_to_host()[0])
        if name == CONTROL:
            line = f"PE {me}: {name} (control) saw {count} stale elements in {rounds} rounds"
        elif count == 0:
            line = f"PE {me}: {name} ok"
        else:
            line = f"PE {me}: {name} saw {count} stale elements in {rounds} rounds"
        sys.stdout.write(line + "\n")  # one write: lines of several PEs never run together
        sys.stdout.flush()
        stale.copy_to_device(np.zeros(1, np.int64))
        shmem.free(ack)
        shmem.free(sig)
    shmem.finalize()


if __name__ == "__main__":
    main()
