"""Print the PTX of a kernel that uses the device-side runtime, for sm_90."""

import sys

from numba import cuda, types

import numba_shmem as shmem


def kernel(data, out):
    out[0] = shmem.my_pe()
    out[1] = shmem.n_pes()
    shmem.peer_array(data, 1)[0] = 7


ptx, _ = cuda.compile_ptx(kernel, (types.int64[:], types.int32[:]), cc=(9, 0))
sys.stdout.write(ptx)
