"""One PE of the residency benchmark (run by benchmarks/residency.py).

Launches, with collective_launch and griddim=0 (the grid the library says can be
resident), a kernel in which every block of every PE adds 1 to a counter on PE 0
and then waits up to WAIT_MS for the blocks of all PEs to have arrived: what
kernels that synchronize across PEs need. A block that gives up saw only the
blocks resident with it. Prints one JSON line per PE: its grid, how many of its
blocks gave up, and the fewest arrivals any of them saw.
"""

import json
import sys

import numpy as np
from numba import cuda

import numba_shmem as shmem
from numba_shmem._cuda._primitives import _now

WAIT_MS = 50
THREADS = 256


@cuda.jit
def arrive_and_wait(counter, total, seen, wait_ns):
    if cuda.threadIdx.x == 0:
        shmem.atomic_add(counter, 1, 0)
        start = _now()
        count = shmem.atomic_fetch(counter, 0)
        while count < total and _now() - start < wait_ns:
            count = shmem.atomic_fetch(counter, 0)
        seen[cuda.blockIdx.x] = count


def main():
    sharedmem = int(sys.argv[1])  # bytes of dynamic shared memory per block: fewer blocks per SM
    shmem.init()
    me = shmem.my_pe()
    counter = shmem.zeros(1, np.int64)
    kernel = arrive_and_wait.specialize(counter, 0, cuda.device_array(1, np.int64), 0)
    (overload,) = kernel.overloads.values()
    grid = overload.max_cooperative_grid_blocks(THREADS, sharedmem)
    total = sum(int(g) for g in shmem._runtime.current().bootstrap.allgather(
        str(grid).encode(), "residency grids"))
    results = []
    for _ in range(3):
        counter.copy_to_device(np.zeros(1, np.int64))
        seen = cuda.to_device(np.zeros(grid, np.int64))
        shmem.barrier_all()
        shmem.collective_launch(arrive_and_wait, 0, THREADS, counter, total, seen,
                                WAIT_MS * 10**6, sharedmem=sharedmem)
        cuda.synchronize()
        got = seen.copy_to_host()
        results.append({"gave_up": int((got < total).sum()), "fewest_seen": int(got.min())})
    sys.stdout.write(json.dumps({"pe": me, "grid": grid, "total": total,
                                 "sharedmem": sharedmem, "runs": results}) + "\n")
    sys.stdout.flush()
    shmem.barrier_all()
    shmem.finalize()


if __name__ == "__main__":
    main()
