"""collective_launch with a bad grid, block shape or shared memory size: prints
the error. Arguments: griddim blockdim [sharedmem]."""

import sys

import numba_shmem as shmem  # first: on a machine without a GPU it picks the simulator
import numpy as np
from numba import cuda


@cuda.jit
def kernel(x):
    x[0] = 1


def main():
    shmem.init()
    griddim = int(sys.argv[1]) if sys.argv[1].isdigit() else sys.argv[1]
    sharedmem = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    try:
        shmem.collective_launch(kernel, griddim, int(sys.argv[2]), shmem.zeros(1, np.int64),
                                sharedmem=sharedmem)
    except shmem.ShmemUsageError as exc:
        sys.stdout.write(f"EXPECTED ShmemUsageError: {exc}\n")
    shmem.finalize()


if __name__ == "__main__":
    main()
