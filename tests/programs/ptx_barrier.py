"""Print the PTX of a kernel with device barriers at every scope (sm_90, no GPU)."""

import sys

from numba import cuda, types

import numba_shmem as shmem


def kernel(x):
    shmem.barrier_all()
    shmem.sync_all_block()
    shmem.barrier_all_warp()


def team_kernel(out, team):
    out[0] = shmem.team_my_pe(team)
    out[1] = shmem.team_n_pes(team)
    out[2] = shmem.team_translate_pe(team, 0, shmem.TEAM_WORLD)
    shmem.barrier(team)
    shmem.sync(team)


if sys.argv[1:] == ["teams"]:
    ptx, _ = cuda.compile_ptx(team_kernel, (types.int32[::1], types.int64), cc=(9, 0))
else:
    ptx, _ = cuda.compile_ptx(kernel, (types.int64[::1],), cc=(9, 0))
sys.stdout.write(ptx)
