"""One PE of the residency benchmark (run by benchmarks/residency.py).

Launches, with collective_launch and griddim=0 (the grid the library says can be
resident), a kernel in which every block of every PE adds 1 to a counter on PE 0
and then waits up to WAIT_MS for the blocks of all PEs to have arrived: what
kernels that synchronize across PEs need. A block that gives up saw only the
blocks resident with it. Prints one JSON line per PE: its grid, how many of its
blocks gave up, and the fewest arrivals any of them saw.
"""

import json
import os
import sys

if os.environ.get("NUMBA_SHMEM_BACKEND") == "sim":  # shmem-run found no GPU
    raise SystemExit("benchmarks/residency.py measures the GPU; it does not run on the simulator")

import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402

import numba_shmem as shmem  # noqa: E402
from numba_shmem._cuda._primitives import _now  # noqa: E402

WAIT_MS = 50
LAUNCHES = 10
THREADS = 256


@cuda.jit
def arrive_and_wait(counter, seen, wait_ns):
    if cuda.threadIdx.x == 0:
        total = cuda.gridDim.x * shmem.n_pes()  # every PE launches the same grid
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
    # what each block saw; at most 2,048 threads are resident per SM
    seen = cuda.device_array(cuda.get_current_device().MULTIPROCESSOR_COUNT * 2048 // THREADS,
                             np.int64)
    results = []
    for _ in range(LAUNCHES):
        counter.copy_to_device(np.zeros(1, np.int64))
        shmem.barrier_all()
        grid = shmem.collective_launch(arrive_and_wait, 0, THREADS, counter, seen,
                                       WAIT_MS * 10**6, sharedmem=sharedmem)
        cuda.synchronize()
        got = seen[:grid].copy_to_host()
        total = grid * shmem.n_pes()
        results.append({"gave_up": int((got < total).sum()), "fewest_seen": int(got.min())})
    sys.stdout.write(json.dumps({"pe": me, "grid": grid, "total": total,
                                 "sharedmem": sharedmem, "runs": results}) + "\n")
    sys.stdout.flush()
    shmem.barrier_all()
    shmem.finalize()


if __name__ == "__main__":
    main()
