"""Pieces the device API's builders share: the source templates of each
scope, how generated source is compiled, the back-off of every spin-wait,
and how a name is registered with numba (typing, then an inline lowering)."""

from numba import cuda
from numba.cuda import types
from numba.cuda.extending import lower_builtin

from .. import _device_api as api
from ._addressing import debug_enabled
from ._primitives import (
    _addr, _copy1, _copy16, _copy16x2, _copy16x3, _copy16x4, _copy2, _copy4, _copy8, _left,
    _load1, _load16, _load2, _load4, _load8, _nanosleep, _now, _remote, _signal_release,
    _store1, _store16, _store2, _store4, _store8, _trap,
)
from ._proxied import _never_far, without_far_paths
from ._typing import refuse_invalid_constants, typer_for

F = api.FUNCTIONS


# -- scopes and generated source ------------------------------------------------

_BLOCK_RANK = ("(cuda.threadIdx.x + cuda.blockDim.x * (cuda.threadIdx.y + cuda.blockDim.y * "
               "cuda.threadIdx.z))")
_BLOCK_SIZE = "(cuda.blockDim.x * cuda.blockDim.y * cuda.blockDim.z)"

#: The lanes of this thread's warp: all 32, or fewer in a block's last warp when
#: the block is not a multiple of 32 threads. ``lanes`` threads share the work,
#: this thread is lane ``cuda.laneid`` (warps are cut from the linear thread index).
_WARP = (f"    lanes = min(32, {_BLOCK_SIZE} - ({_BLOCK_RANK} - cuda.laneid))\n"
         "    mask = -1 if lanes == 32 else (1 << lanes) - 1\n")

#: scope -> (set-up, first chunk, stride, synchronization, the thread that signals)
_SCOPE = {
    "": ("", "0", "1", "", "True"),
    "_warp": (_WARP, "cuda.laneid", "lanes", "    cuda.syncwarp(mask)\n", "cuda.laneid == 0"),
    "_block": ("", _BLOCK_RANK, _BLOCK_SIZE, "    cuda.syncthreads()\n", f"{_BLOCK_RANK} == 0"),
}

_NAMESPACE = {"cuda": cuda, "_copy16": _copy16, "_copy16x2": _copy16x2, "_copy16x3": _copy16x3,
              "_copy16x4": _copy16x4, "_copy8": _copy8,
              "_copy4": _copy4, "_copy2": _copy2, "_copy1": _copy1, "min": min,
              "_load8": _load8, "_load4": _load4, "_load2": _load2, "_load1": _load1,
              "_store8": _store8, "_store4": _store4, "_store2": _store2, "_store1": _store1,
              "_load16": _load16, "_store16": _store16,
              "_remote": _remote, "_addr": _addr, "_signal_release": _signal_release}


def _indent(text, levels):
    return "".join("    " * levels + line + "\n" if line else "\n" for line in text.splitlines())


def _compile_source(source, namespace=None):
    scope = dict(_NAMESPACE, **(namespace or {}))
    if scope.get("_far") is _never_far:  # (a job on one node: _proxied.namespace)
        source = without_far_paths(source)
    exec(source, scope)  # noqa: S102  (generated from the tables above)
    return scope["impl"]


# -- spin-waits: the back-off every wait loop shares ----------------------------------

_POLLS_BEFORE_SLEEP = 64
#: a wait that has polled this long (ns, from the poll after its first POLLS)
#: starts to sleep: a request's round trip to another node (10-20 us on an H200)
#: is seen at the poll that could see it, not at the end of a nap (a p's round
#: trip across emulated nodes, benchmarks/proxy.py on an H200: 12.3-13.2 us,
#: against 16.0 where waits slept from their 65th poll)
_SPIN_NS = 50_000
#: a wait for a member looks at the member's departure word once every this many
#: polls (a power of two, above _POLLS_BEFORE_SLEEP: never in the first, fast ones)
_GONE_POLLS = 256
_MAX_SLEEP_NS = 256

#: A spin-wait's state, before its loop (``pause`` 0: not sleeping yet)
_BACKOFF_START = "polls = 0\npause = 0\nspun_from = 0\n"


def _backoff(left="_left"):
    """Source: one more poll of a spin-wait. After POLLS polls, note the time;
    past SPIN_NS from then (looked at every 16th poll), sleep, from 32 ns
    doubling up to MAX_SLEEP; and stop the kernel if this PE has left the job
    (it exits: nobody is coming), which it looks at once every GONE_POLLS
    polls: the word is in mapped host memory, and a read over the bus (1.3 us
    on an H200) at every poll would slow each poll as much. ``left``: the name
    of the intrinsic that says so (``_far_left`` in the path to other nodes:
    _proxied.py)."""
    return f"""polls += 1
if polls > POLLS:
    if pause != 0:
        _nanosleep(pause)
        pause = min(pause * 2, MAX_SLEEP)
    elif polls == POLLS + 1:
        spun_from = _now()
    elif polls % 16 == 0 and _now() - spun_from > SPIN_NS:
        pause = 32
    if polls % GONE_POLLS == 0 and {left}():
        if DEBUG:
            print('numba-shmem: PE', _my_pe(), 'left the job while this kernel waited')
        _trap()"""


#: ``_backoff`` with ``_left``: every wait's but the path to other nodes'
_BACKOFF = _backoff()


def _spin_namespace(debug, timeout_ns):
    """What every spin-wait's source refers to."""
    from .._current import my_pe

    return {"_now": _now, "_nanosleep": _nanosleep, "_trap": _trap, "_my_pe": my_pe,
            "_left": _left, "GONE_POLLS": _GONE_POLLS,
            "DEBUG": debug, "TIMEOUT": timeout_ns, "POLLS": _POLLS_BEFORE_SLEEP,
            "SPIN_NS": _SPIN_NS,
            "MAX_SLEEP": _MAX_SLEEP_NS, "min": min}


# -- registration --------------------------------------------------------------------

def _register(name, lower):
    from numba.cuda.typing.templates import CallableTemplate, infer, infer_global

    if name in F:
        fn, params = F[name], api.TABLE[name][0]
    else:
        fn, params = api.host_and_device(name), api.HOST_AND_DEVICE[name]
    typer = typer_for(name, params)
    # literal arguments first, so that a constant cmp/sig_op can be checked
    template = type(f"{name}_CallableTemplate", (CallableTemplate,),
                    {"key": fn, "generic": lambda self: typer, "prefer_literal": True})
    infer(template)
    infer_global(fn, types.Function(template))

    def checked(context, builder, sig, args):
        refuse_invalid_constants(name, params, sig)
        return lower(context, builder, sig, args)

    lower_builtin(fn, types.VarArg(types.Any))(checked)


def _inline(impl_or_factory):
    """A lowering that compiles a Python implementation into the caller; a
    factory is called at compile time (it may read the debug setting)."""
    def lower(context, builder, sig, args):
        impl = impl_or_factory(sig) if getattr(impl_or_factory, "factory", False) \
            else impl_or_factory
        return context.compile_internal(builder, impl, sig, args)
    return lower


def _factory(fn):
    fn.factory = True
    return fn


def _debug_timeout():
    from .. import _current

    runtime = _current.current()
    timeout = runtime.config.wait_timeout if runtime else 0.0
    return debug_enabled() and timeout > 0, int(timeout * 1e9)


# -- copy loops: the source every transfer and collective shares --------------------

# numba compiles these implementations with compile_internal, where a call to
# a plain Python helper cannot be typed; shared pieces are source text instead.

def _lean_copy_source(smallest=1):
    """Source: ``_copy_source``'s copy (``nbytes`` from ``src`` to ``dst``, this
    thread ``start`` of ``stride``, no piece narrower than ``smallest``) with
    one piece in flight per thread, of the widest width both addresses and
    the length allow: for the path to other nodes, where the bus sets the
    pace of a copy into or out of the ring. ``_copy_source``'s four vectors in
    flight took registers that every kernel calling a transfer pays, toward
    the PEs of its own node too (linked as for a GPU, a block's put_block in
    a loop: 120 registers, 72 so)."""
    widths = (16,) + tuple(w for w in (8, 4, 2, 1) if w >= smallest)
    return ("align = dst | src | nbytes\n"
            + _widest(lambda w: f"    i = start * {w}\n    while i < nbytes:\n"
                      f"        _copy{w}(dst + i, src + i)\n        i += stride * {w}\n",
                      widths, 0))


def _widest(what, widths, indent):
    """Branches that run ``what(width)`` for the widest of ``widths`` that the
    bits of ``align`` allow."""
    pad = "    " * indent
    lines = []
    for k, width in enumerate(widths):
        test = f"(align & {width - 1}) == 0" if width > 1 else None
        keyword = "if" if k == 0 else "elif"
        last = k == len(widths) - 1
        lines.append(f"{pad}else:\n" if last and k else
                     f"{pad}if True:\n" if last else f"{pad}{keyword} {test}:\n")
        lines.append(what(width))
    return "".join(lines)


def _edges(widths):
    """Source: the edge thread's loads of the head (``head`` bytes at ``src``)
    and the tail (``tail`` bytes at ``src + tail_at``), and after them (a
    second string) its stores. Both are under 16 bytes; each goes in pieces of
    1, 2, 4 and 8 bytes as its length's bits say, the head's narrowest first
    and the tail's widest first, so that every piece sits at a multiple of its
    width (the vectors between them start and end on 16-byte boundaries)."""
    loads, stores = [], []
    for region, at, order in (("head", "", sorted(widths)), ("tail", " + tail_at", widths)):
        for w in order:
            # the bytes of the region before this piece: its narrower pieces
            # (head), or its wider ones (tail)
            if region == "head":
                before = f" + (head & {w - 1})" if w > min(widths) else ""
            else:
                before = f" + (tail & {16 - 2 * w})" if w < 8 else ""
            name = f"{region}{w}"
            loads.append(f"{name} = _load{w}(src{at}{before}) if {region} & {w} else 0\n")
            stores.append(f"if {region} & {w}:\n    _store{w}(dst{at}{before}, {name})\n")
    return "".join(loads), "".join(stores)


def _copy_source(smallest=1, alone=False):
    """Source: copy ``nbytes`` from ``src`` to ``dst``; this thread is ``start``
    of ``stride`` (``alone``: the only one, thread scope). No piece is
    narrower than ``smallest`` (the element's width, up to 8), and each is one
    access: an element is never split, so a peer polling it never sees it
    half written.

    - At most 8 bytes per thread, all 8-byte aligned: one 8-byte piece per
      thread, the fewest instructions per call (on an H200 this beat 16-byte
      vectors from 4 KiB to 1 MiB over 528 blocks, and an NVRTC copy kernel).
    - Both addresses at the same offset from a 16-byte boundary: the bytes
      between the first and the last boundary in 16-byte vectors, one per
      thread when there are no more vectors than threads (else four in flight
      per thread; a lone thread loads its last one to three together: on an
      H200 that made a thread-scope put of 4 MiB 13-20% faster and a block's
      0.5-2.5% slower, so blocks and warps keep the single loop). The bytes
      before them (the head) and after them (the tail) go from the group's
      last thread, both loads before both stores.
    - Otherwise pieces of the widest width the addresses and length allow: a
      bounded number per thread (no loop) for at most 8 bytes per thread, else
      a strided loop.

    Each branch is as short as it can be: every thread of the group runs the
    one taken, and a kernel that calls this needs the registers of all of
    them (on an H200, more than 64 leaves room for only three 256-thread
    blocks per SM)."""
    widths = tuple(w for w in (8, 4, 2, 1) if w >= smallest)
    loads, stores = _edges(widths)
    vectors = (
        "    count = (nbytes - head) >> 4\n"
        "    d = dst + head\n"
        "    s = src + head\n"
        "    if start == stride - 1:\n"
        "        tail_at = head + (count << 4)\n"
        "        tail = nbytes - tail_at\n"
        + _indent(loads + stores, 2) +
        "    if count <= stride:\n"
        "        if start < count:\n"
        "            _copy16(d + (start << 4), s + (start << 4))\n"
        "    else:\n"
        "        i = start\n"
        "        while i + 3 * stride < count:\n"
        "            _copy16x4(d + (i << 4), s + (i << 4), stride << 4)\n"
        "            i += stride << 2\n"
        + (  # alone: the last one to three vectors loaded together
            "        if i + 2 < count:\n"
            "            _copy16x3(d + (i << 4), s + (i << 4), 16)\n"
            "        elif i + 1 < count:\n"
            "            _copy16x2(d + (i << 4), s + (i << 4), 16)\n"
            "        elif i < count:\n"
            "            _copy16(d + (i << 4), s + (i << 4))\n" if alone else
            "        while i < count:\n"
            "            _copy16(d + (i << 4), s + (i << 4))\n"
            "            i += stride\n"))

    def bounded(w):
        # nbytes <= 8 * stride: at most 8 // w pieces for this thread
        lines, pad = [f"        count = nbytes // {w}\n        i = start\n"], "        "
        for k in range(8 // w):
            lines.append(f"{pad}if i < count:\n{pad}    _copy{w}(dst + i * {w}, src + i * {w})\n")
            pad += "    "
            if k < 8 // w - 1:
                lines.append(f"{pad}i += stride\n")
        return "".join(lines)

    def strided(w):
        return (f"        count = nbytes // {w}\n        i = start\n        while i < count:\n"
                f"            _copy{w}(dst + i * {w}, src + i * {w})\n            i += stride\n")

    narrow = widths[1:]  # (8-byte aligned copies of at most 8 bytes a thread go first)
    source = ("    align = dst | src | nbytes\n"
              "    head = (16 - (dst & 15)) & 15\n"
              "    if nbytes <= 8 * stride and (align & 7) == 0:\n"
              "        if start < (nbytes >> 3):\n"
              "            _copy8(dst + (start << 3), src + (start << 3))\n"
              "    elif ((dst ^ src) & 15) == 0 and head <= nbytes:\n" + _indent(vectors, 1))
    if narrow:
        source += "    elif nbytes <= 8 * stride:\n" + _indent(_widest(bounded, narrow, 1), 1)
    return source + "    else:\n" + _indent(_widest(strided, widths, 1), 1)


def _element_width(itemsize):
    """The widest power of two (at most 8) that divides ``itemsize``: arrays are
    aligned to it, and no copy of their elements is narrower."""
    return next(w for w in (8, 4, 2, 1) if itemsize % w == 0)


# -- where the heap keeps the runtime's words, in device code ------------------------

def _state_offset(npes):
    """Source: the heap offset of the teams' state words
    (``_heap/_symmetric.team_state``) in a job of ``npes`` (source) PEs."""
    from .._heap._allocator import DEFAULT_ALIGN
    from .._heap._symmetric import MAX_TEAMS

    align = DEFAULT_ALIGN
    return f"(({MAX_TEAMS} * ({npes} + 1) * 8 + {align - 1}) // {align} * {align})"


def _departures_offset(npes):
    """Source: the heap offset of the departure words
    (``_heap/_symmetric.departures``: right after the teams' state words)."""
    from .._heap._symmetric import MAX_TEAMS

    return f"({_state_offset(npes)} + {MAX_TEAMS * 16})"
