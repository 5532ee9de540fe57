"""Print the PTX of a kernel with device barriers at every scope (sm_90, no GPU)."""

import sys

from numba import cuda, types

import numba_shmem as shmem


def kernel(x):
    shmem.barrier_all()
    shmem.sync_all_block()
    shmem.barrier_all_warp()


ptx, _ = cuda.compile_ptx(kernel, (types.int64[::1],), cc=(9, 0))
sys.stdout.write(ptx)
