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
from .._heap._symmetric import LINE_WORDS

BROADCAST, FCOLLECT, ALLTOALL = range(3)
#: the collectives ``spread`` does, by name
SPREAD = {"broadcast": BROADCAST, "fcollect": FCOLLECT, "alltoall": ALLTOALL}
_put = api.FUNCTIONS["put_nbi_block"]
_fence = api.FUNCTIONS["fence"]
_quiet = api.FUNCTIONS["quiet"]
_signal_op = api.FUNCTIONS["signal_op"]
_signal_wait_until = api.FUNCTIONS["signal_wait_until"]
_put_signal_block = api.FUNCTIONS["put_signal_block"]
_atomic_set = api.FUNCTIONS["atomic_set"]


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


_LINES = {}


def _line_helpers():
    """(bits, from_bits, member_wait, its extra arguments): a value's bits as an
    integer and back, and the wait for a member's word that stops when the
    member leaves, for the target numba compiles kernels for (the GPU, or its
    simulator, whose wait also takes the team's row and the call's name)."""
    from .._select import numba_is_simulator

    if not numba_is_simulator():
        from .._cuda._member_wait import member_wait
        from .._cuda._proxied import _bits, _from_bits

        return _bits, _from_bits, member_wait, ""
    from .._sim._device import bits, from_bits, member_wait

    return bits, from_bits, member_wait, ", team, NAMES[scatter]"


def line_reduce_kernel(op, halves):
    """``op`` over members in one block, for parts of at most ``LINE_WORDS * 4``
    bytes of a 4-byte (``halves`` 1) or 8-byte (``halves`` 2) dtype, crossing
    the team once. Each member stores its part for every other member into its
    own row of that member's slots (``slots``: the team's line slots on the
    heap), 4 bytes to a uint64 word beside a mark in the high half: a word that
    carries this call's mark has arrived whole. It waits for every other
    member's words and combines them in team order; a wait stops when its
    member leaves the job (``departed``: this PE's departure words, one per
    PE). Nothing synchronizes the team before or after:

    - The call's number on the team (``state[2 * handle]``, counted on every
      member) picks one of two sets of slots by its parity. A member can store
      into a set again only once it has every member's words of the call
      between, which each member sends after it has read this call's: a set is
      never overwritten before it is read.
    - A set's marks count its uses (1, 2, ... ``_CYCLE``), so a word this call
      waits for is one at least this call's mark, and an older word (of any
      earlier call, however short) is below it. After the last mark of a
      cycle, each member zeroes its set and fences before its next call's
      stores: the next cycle starts from zeros again.
    - A member can still be writing its dest when another has gone on, so the
      call leaves ``state[2 * handle + 1]`` set: the next collective that puts
      into members' arrays syncs the team first (``settle``, and the block
      collectives). OpenSHMEM's reductions promise no more: once a member's
      call is complete, its dest is written and its source may be reused."""
    key = (op, halves)
    if key not in _LINES:
        bits, from_bits, member_wait, extra = _line_helpers()
        high = ("            _atomic_set(slots[at + 1:at + 2], mark | (u >> HIGH), pe)\n"
                if halves == 2 else "")
        wait_high = ("                u |= (_member_wait(slots[at + 1:at + 2], mark, gone, pe"
                     f"{extra}) & LOW) << HIGH\n" if halves == 2 else "")
        source = (
            "def kernel(handle, team, state, slots, departed, dest, source, nelems, scatter):\n"
            "    size = team[0]\n"
            "    me = team[1]\n"
            "    calls = state[2 * handle]\n"
            "    base = int64(calls & ONE) * size * WORDS  # (uint64 * int64 would be a float)\n"
            "    count = (calls >> ONE) % CYCLE + ONE\n"
            "    mark = count << HIGH\n"
            "    for i in range(cuda.threadIdx.x, nelems, cuda.blockDim.x):\n"
            "        for j in range(1, size):\n"
            "            member = (me + j) % size\n"
            "            u = uint64(_bits(source, source[scatter * member * nelems + i]))\n"
            "            at = base + me * WORDS + i * HALVES\n"
            "            pe = team[2 + member]\n"
            "            _atomic_set(slots[at:at + 1], mark | (u & LOW), pe)\n"
            f"{high}"
            "    for i in range(cuda.threadIdx.x, nelems, cuda.blockDim.x):\n"
            "        a = _from_bits(source, ZERO)\n"
            "        for j in range(size):\n"
            "            if j == me:\n"
            "                b = source[scatter * me * nelems + i]\n"
            "            else:\n"
            "                at = base + j * WORDS + i * HALVES\n"
            "                pe = team[2 + j]\n"
            "                gone = departed[pe:pe + 1]  # set once PE pe has left the job\n"
            f"                u = _member_wait(slots[at:at + 1], mark, gone, pe{extra}) & LOW\n"
            f"{wait_high}"
            "                b = _from_bits(source, u)\n"
            "            if j == 0:\n"
            "                a = b\n"
            "            else:\n"
            f"                a = {api.REDUCE_OPS[op]}\n"
            "        dest[i] = a\n"
            "    cuda.syncthreads()\n"
            "    if count == CYCLE:  # the set's last mark: its next use starts from zeros\n"
            "        for w in range(cuda.threadIdx.x, size * WORDS, cuda.blockDim.x):\n"
            "            slots[base + w] = ZERO\n"
            "        cuda.threadfence_system()\n"
            "    if cuda.threadIdx.x == 0:\n"
            "        state[2 * handle] = calls + ONE\n"
            "        state[2 * handle + 1] = ONE\n")
        scope = {"cuda": cuda, "min": min, "max": max, "uint64": np.uint64,
                 "int64": np.int64, "_bits": bits, "_from_bits": from_bits,
                 "_atomic_set": _atomic_set, "_member_wait": member_wait,
                 "NAMES": (f"{op}_reduce", f"{op}_reducescatter"), "WORDS": LINE_WORDS,
                 "HALVES": halves,
                 "ZERO": np.uint64(0), "ONE": np.uint64(1), "CYCLE": _CYCLE,
                 "LOW": np.uint64(0xFFFF_FFFF), "HIGH": np.uint64(32)}
        exec(source, scope)  # noqa: S102  (generated from REDUCE_OPS)
        _LINES[key] = cuda.jit(scope["kernel"])
    return _LINES[key]


#: the marks of a set's uses in a cycle: 1 to 2**32 - 1 (the high half of a word)
_CYCLE = np.uint64(0xFFFF_FFFF)


@cuda.jit
def settle(team, state):
    """Before a collective that puts into members' arrays: if the team's last
    reduction in lines may still be writing on some member, sync the team."""
    if cuda.grid(1) == 0 and state[2 * team + 1] != 0:
        sync(team)
        state[2 * team + 1] = 0


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
            "reduce": (row, data, data, i64, i64),
            "lines": (i64, row, sig, sig, sig, data, data, i64, i64),
            "settle": (i64, sig)}[kind]
