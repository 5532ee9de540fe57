"""Compile the block collectives called with their documented parameter names
as keywords, for sm_90 (no GPU needed): print ``NAME same`` where the PTX is
that of the positional call, then the typing errors of a stray positional
argument and of a misspelt keyword (``NAME message``)."""

import re
import sys

from numba import cuda, types

import numba_shmem as shmem

ARGS = (types.int64, types.float64[::1], types.float64[::1], types.int64, types.int32)


def broadcast(team, dest, source, n, root):
    shmem.broadcast_block(team, dest, source, n, root)


def broadcast_keywords(team, dest, source, n, root):
    shmem.broadcast_block(root=root, nelems=n, source=source, dest=dest, team=team)


def sum_reduce(team, dest, source, n, root):
    shmem.sum_reduce_block(team, dest, source, n)


def sum_reduce_keywords(team, dest, source, n, root):
    shmem.sum_reduce_block(team, dest, source=source, nelems=n)


def stray(team, dest, source, n, root):
    shmem.fcollect_block(team, dest, source, n, root)


def misspelt(team, dest, source, n, root):
    shmem.broadcast_block(team, dest, source, n, rooot=root)


def ptx(fn):
    code, _ = cuda.compile_ptx(fn, ARGS, cc=(9, 0))
    return re.sub(r"_Z\w+", "KERNEL", code)  # (the mangled name has the function's)


for name, positional, keywords in (("broadcast_block", broadcast, broadcast_keywords),
                                   ("sum_reduce_block", sum_reduce, sum_reduce_keywords)):
    sys.stdout.write(f"{name} {'same' if ptx(positional) == ptx(keywords) else 'different'}\n")
for name, fn in (("stray", stray), ("misspelt", misspelt)):
    try:
        ptx(fn)
    except Exception as exc:  # the typing error is the output
        sys.stdout.write(f"{name} {' '.join(str(exc).split())}\n")
    else:
        sys.stdout.write(f"{name} compiled\n")
