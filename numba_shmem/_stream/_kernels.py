"""The kernels the stream tier enqueues: signals and waits that a stream
memory operation cannot do, quiet, team barriers, and the collectives.

Imported on first use, so that numba.cuda is imported only once the backend has
been chosen; ``cuda`` is a global here because the simulator replaces it in a
kernel's globals (a closure over it would escape the simulator).
"""

import functools

import numpy as np
from numba import cuda

from .. import _device_api as api
from .._arrays import peer_array
from .._barriers import barrier, sync

BROADCAST, FCOLLECT, ALLTOALL = range(3)
#: the collectives ``spread`` does, by name
SPREAD = {"broadcast": BROADCAST, "fcollect": FCOLLECT, "alltoall": ALLTOALL}
_put = api.FUNCTIONS["put_block_nbi"]
_fence = api.FUNCTIONS["fence"]
_quiet = api.FUNCTIONS["quiet"]
_signal_op = api.FUNCTIONS["signal_op"]
_signal_wait_until = api.FUNCTIONS["signal_wait_until"]
_put_signal_block = api.FUNCTIONS["put_signal_block"]


@cuda.jit
def team_sync(team):
    if cuda.grid(1) == 0:
        sync(team)


@cuda.jit
def team_barrier(team):
    if cuda.grid(1) == 0:
        barrier(team)


@cuda.jit
def signal_add(sig, value, pe):
    """SIGNAL_ADD on the stream: after the stream's earlier work (a put), so
    fenced first (the put's data is seen before the signal)."""
    if cuda.grid(1) == 0:
        _fence()
        _signal_op(sig, value, api.SIGNAL_ADD, pe)


@cuda.jit
def put_signal(dest, source, sig, value, sig_op, pe):
    """A small put_signal: one block copies the bytes, then updates the signal."""
    _put_signal_block(dest, source, sig, value, sig_op, pe)


@cuda.jit
def signal_wait(sig, cmp, value):
    if cuda.grid(1) == 0:
        _signal_wait_until(sig, cmp, value)


@cuda.jit
def quiet():
    if cuda.grid(1) == 0:
        _quiet()


# ``team`` below is the team's row of the device team table: its size, this PE's
# number in it, then its members' PE numbers.

@cuda.jit
def spread(team, dest, source, nelems, kind, root, per_block):
    """Broadcast, fcollect and alltoall: block ``b`` puts slice ``b`` of this
    member's part(s) to every member, each member starting with a different peer."""
    size = team[0]
    me = team[1]
    if kind == BROADCAST and me != root:
        return
    lo = cuda.blockIdx.x * per_block
    hi = min(nelems, lo + per_block)
    if lo >= hi:
        return
    into = 0 if kind == BROADCAST else me * nelems
    for j in range(size):
        peer = (me + j) % size
        take = peer * nelems if kind == ALLTOALL else 0
        _put(dest[into + lo:into + hi], source[take + lo:take + hi], team[2 + peer])


_REDUCE = {}


def reduce_kernel(op):
    """``op`` over members, element by element: every thread of the grid takes
    elements ``i, i + threads, ...`` and combines the members' sources in team order."""
    if op not in _REDUCE:
        source = (
            "def kernel(team, dest, source, nelems, scatter):\n"
            "    offset = team[1] * nelems if scatter else 0\n"
            "    for i in range(cuda.grid(1), nelems, cuda.gridsize(1)):\n"
            "        a = peer_array(source, team[2])[offset + i]\n"
            "        for j in range(1, team[0]):\n"
            "            b = peer_array(source, team[2 + j])[offset + i]\n"
            f"            a = {api.REDUCE_OPS[op]}\n"
            "        dest[i] = a\n")
        scope = {"cuda": cuda, "peer_array": peer_array, "min": min, "max": max}
        exec(source, scope)  # noqa: S102  (generated from REDUCE_OPS)
        _REDUCE[op] = cuda.jit(scope["kernel"])
    return _REDUCE[op]


_BLOCK = {}


def block_kernel(name):
    """One block running the block collective ``name`` (a name of
    ``api.COLLECTIVES``): a small collective in one launch, its team
    synchronization inside."""
    if name not in _BLOCK:
        params = api.TABLE[name][0].replace(" ", ", ")
        source = f"def kernel({params}):\n    collective({params})\n"
        scope = {"collective": api.FUNCTIONS[name]}
        exec(source, scope)  # noqa: S102  (one line, from the table's parameters)
        _BLOCK[name] = cuda.jit(scope["kernel"])
    return _BLOCK[name]


@functools.cache
def argtypes(kind, dtype=np.uint8):
    """The argument types (numba types) that the stream tier prepares the kernels
    of ``kind`` for; ``dtype``: the data's, for the collectives."""
    from numba.cuda import types
    from numba.cuda.np.numpy_support import from_dtype

    i64, u64 = types.int64, types.uint64
    sig = types.Array(u64, 1, "C")
    data = types.Array(from_dtype(np.dtype(dtype)), 1, "C")  # bytes, or the collective's dtype
    row = types.Array(types.int32, 1, "C")  # a team's row of the device team table
    return {"signal_add": (sig, u64, i64), "put_signal": (data, data, sig, u64, i64, i64),
            "signal_wait": (sig, i64, u64), "team": (i64,), "none": (),
            "block": (i64, data, data, i64), "block_root": (i64, data, data, i64, i64),
            "spread": (row, data, data, i64, i64, i64, i64),
            "reduce": (row, data, data, i64, i64)}[kind]
