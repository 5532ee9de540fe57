"""Program order toward a PE on another node across the host and device paths:
a kernel's requests, complete as far as the kernel is concerned (it fenced,
and cuda.synchronize() returned), come before a host call made after them;
a host call comes before the requests of a kernel launched after it.

    NUMBA_SHMEM_NODE_SIZE=1 mpiexec -n 2 python cross_path.py ROUNDS

PE 0 sends to PE 1, which is on another node, ROUNDS rounds of each mode:

- ``kernel_p_then_host_put``: a kernel ``p``s A into ``x[r]`` and fences; the
  host then ``put``s B there: ``x[r]`` must end B.
- ``host_put_then_kernel_p``: the host puts A, then a kernel ``p``s B: B.
- ``kernel_put_then_host_signal``: a kernel ``put_block``s the round's data and
  fences; the host then sets the signal with ``signal_op``. PE 1's kernel
  waits for the signal and checks every element at once: none may be stale.

Prints ``PE 1: <mode> ok`` per mode, or how many rounds went wrong.
"""

import sys

import numba_shmem as shmem  # first: on a machine without a GPU it picks the simulator
import numpy as np
from numba import cuda

N = 2048  # elements of the signal mode's data: 16 KiB, more than one ring request


@cuda.jit
def p_fence(x, r, value, pe):
    if cuda.grid(1) == 0:
        shmem.p(x[r:r + 1], value, pe)
        shmem.fence()


@cuda.jit
def put_fence(data, source, pe):
    shmem.put_block(data, source, pe)
    if cuda.threadIdx.x == 0:
        shmem.fence()


@cuda.jit
def watch(sig, r, data, stamp, stale):
    """Wait for round ``r``'s signal, then count the elements not yet ``stamp``."""
    tid = cuda.threadIdx.x
    if tid == 0:
        shmem.signal_wait_until(sig, shmem.CMP_GE, r + 1)
    cuda.syncthreads()
    for i in range(tid, N, cuda.blockDim.x):
        if data[i] != stamp:
            cuda.atomic.add(stale, 0, 1)


def main():
    rounds = int(sys.argv[1])
    shmem.init()
    me = shmem.my_pe()
    assert shmem.n_pes() == 2
    x = shmem.zeros(2 * rounds, np.int64)
    data = shmem.zeros(N, np.int64)
    sig = shmem.zeros(1, np.uint64)
    source = cuda.device_array(N, np.int64)
    stale = cuda.to_device(np.zeros(1, np.int64))
    threads = 256 if shmem._runtime.current().backend == "cuda" else 32
    bad_rounds = 0
    for r in range(rounds):
        if me == 0:
            p_fence[1, 32](x, r, 1000 + r, 1)
            cuda.synchronize()
            shmem.put(x[r:r + 1], np.array([2000 + r], np.int64), 1)
            shmem.put(x[rounds + r:rounds + r + 1], np.array([3000 + r], np.int64), 1)
            p_fence[1, 32](x, rounds + r, 4000 + r, 1)
            cuda.synchronize()
        shmem.barrier_all()

        stamp = 5000 + r
        if me == 0:
            source.copy_to_device(np.full(N, stamp, np.int64))
            put_fence[1, threads](data, source, 1)
            cuda.synchronize()
            shmem.signal_op(sig, r + 1, shmem.SIGNAL_SET, 1)
        else:
            stale.copy_to_device(np.zeros(1, np.int64))
            watch[1, threads](sig, r, data, stamp, stale)
            cuda.synchronize()
            bad_rounds += int(stale.copy_to_host()[0] != 0)
        shmem.barrier_all()
    if me == 1:
        got = x.copy_to_host()
        modes = {
            "kernel_p_then_host_put": int((got[:rounds] != 2000 + np.arange(rounds)).sum()),
            "host_put_then_kernel_p": int((got[rounds:] != 4000 + np.arange(rounds)).sum()),
            "kernel_put_then_host_signal": bad_rounds,
        }
        for mode, wrong in modes.items():
            print(f"PE 1: {mode} " + ("ok" if not wrong else f"wrong in {wrong} of {rounds} "
                                      "rounds"), flush=True)
    shmem.finalize()


if __name__ == "__main__":
    main()
