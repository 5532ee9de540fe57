"""Compile every collective at block scope, and each kind at warp and thread
scope, for sm_90 (no GPU needed);
print a bitwise reduction's typing error on floats, then broadcast_block's PTX,
the PTX of the host reductions in lines (float64 sum, int32 max), then that of
sum_reduce and barrier(team) at each scope."""

import sys

import numpy as np
from numba import cuda, types

import numba_shmem as shmem
from numba_shmem._stream import _kernels


def every(team, dest, source, n):
    shmem.broadcast_block(team, dest, source, n, 0)
    shmem.fcollect_block(team, dest, source, n)
    shmem.alltoall_block(team, dest, source, n)
    shmem.sum_reduce_block(team, dest, source, n)
    shmem.prod_reducescatter_block(team, dest, source, n)
    shmem.min_reduce_block(team, dest, source, n)
    shmem.max_reducescatter_block(team, dest, source, n)
    shmem.and_reduce_block(team, dest, source, n)
    shmem.or_reducescatter_block(team, dest, source, n)
    shmem.xor_reduce_block(team, dest, source, n)


def every_warp_and_thread(team, dest, source, n):
    # each kind at warp and at thread scope (the reductions' operators share
    # their code: one of each family, and a bitwise one)
    shmem.broadcast_warp(team, dest, source, n, 0)
    shmem.fcollect_warp(team, dest, source, n)
    shmem.alltoall_warp(team, dest, source, n)
    shmem.xor_reduce_warp(team, dest, source, n)
    shmem.max_reducescatter_warp(team, dest, source, n)
    shmem.broadcast(team, dest, source, n, 0)
    shmem.fcollect(team, dest, source, n)
    shmem.alltoall(team, dest, source, n)
    shmem.and_reduce(team, dest, source, n)
    shmem.prod_reducescatter(team, dest, source, n)


def broadcast(team, dest, source, n):
    shmem.broadcast_block(team, dest, source, n, 0)


def float_and(team, dest, source, n):
    shmem.and_reduce_block(team, dest, source, n)


cuda.compile_ptx(every, (types.int64, types.int64[::1], types.int64[::1], types.int64), cc=(9, 0))
cuda.compile_ptx(every_warp_and_thread,
                 (types.int64, types.int64[::1], types.int64[::1], types.int64), cc=(9, 0))
sys.stdout.write("compiled\n")
try:
    cuda.compile_ptx(float_and, (types.int64, types.float64[::1], types.float64[::1], types.int64),
                     cc=(9, 0))
except Exception as exc:  # the typing error is the output
    sys.stdout.write(" ".join(str(exc).split()) + "\n")
ptx, _ = cuda.compile_ptx(broadcast, (types.int64, types.float64[::1], types.float64[::1],
                                      types.int64), cc=(9, 0))
sys.stdout.write("=== broadcast_block\n" + ptx)
for op, dtype in (("sum", np.float64), ("max", np.int32)):
    kernel = _kernels.line_reduce_kernel(op, np.dtype(dtype).itemsize // 4)
    ptx, _ = cuda.compile_ptx(kernel.py_func, _kernels.argtypes("lines", dtype), cc=(9, 0))
    sys.stdout.write(f"=== lines {op} {np.dtype(dtype)}\n" + ptx)

for scope in ("_block", "_warp", ""):
    reduce_fn = getattr(shmem, f"sum_reduce{scope}")
    barrier_fn = getattr(shmem, f"barrier{scope}")

    def reduce(team, dest, source, n):
        reduce_fn(team, dest, source, n)

    def team_barrier(team):
        barrier_fn(team)

    ptx, _ = cuda.compile_ptx(reduce, (types.int64, types.float32[::1], types.float32[::1],
                                       types.int64), cc=(9, 0))
    sys.stdout.write(f"=== sum_reduce{scope}\n" + ptx)
    ptx, _ = cuda.compile_ptx(team_barrier, (types.int64,), cc=(9, 0))
    sys.stdout.write(f"=== barrier{scope}\n" + ptx)
