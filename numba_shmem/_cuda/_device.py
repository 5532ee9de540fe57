"""The device API on the GPU: typing and lowering of ``_device_api``'s names.

Element operations and atomics are lowered straight to inline PTX. Transfers
and waits are written in Python below (``_impl_*``) and compiled inline into
the calling kernel with ``context.compile_internal``; the primitives they call
(``_addr``, ``_remote``, ``_copy16``, ...) are intrinsics over ``_ptx``.
"""

import textwrap

from llvmlite import ir
from numba import cuda
from numba.cuda import types
from numba.cuda.extending import lower_builtin
from numba.cuda.np.numpy_support import as_dtype

from .. import _device_api as api
from . import _ptx
from . import _proxied
from ._addressing import debug_enabled, peer_address
from ._primitives import (
    _heap_base, _load_u64, _mark_cooperative, _next_epoch, _peer_of, _publish_epoch,
    _stop_for, _team_entry,
    _addr, _compare, _copy1, _copy2, _copy4, _copy8, _copy16, _copy16x2, _copy16x3,
    _copy16x4, _load_acquire,
    _load16, _store16,
    _load1, _load2, _load4, _load8, _load_relaxed, _store1, _store2, _store4, _store8,
    _nanosleep, _now, _quiet, _fence, _remote, _signal_release, _signal_update,
    _store_relaxed, _trap,
    _left, _valid_cmp,
    array_pointer, as_pe,
)
from ._typing import refuse_invalid_constants, typer_for

F = api.FUNCTIONS


# -- transfers -------------------------------------------------------------------

# numba compiles these implementations with compile_internal, where a call to
# a plain Python helper cannot be typed; shared pieces are source text instead.

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
    exec(source, scope)  # noqa: S102  (generated from the tables above)
    return scope["impl"]


#: In debug mode, a transfer that would run past the symmetric array (``dest``
#: of a put, ``source`` of a get) stops the kernel; otherwise it copies
#: ``min(dest.size, source.size)`` elements.
_OVERRUN = """    if DEBUG and {local}.size > {remote}.size:
        print('numba-shmem: shmem.{name}: PE', _my_pe(), 'asked to copy', {local}.size,
              'elements but {remote} on PE', pe, 'holds', {remote}.size,
              '; pass a {local} no larger than {remote}')
        _trap()
"""


def _make_transfer(name, scope, put, signal, debug, itemsize):
    """The implementation of put/get/put_signal at one scope: the direct copy,
    or toward a PE on another node, requests into the proxy's ring."""
    setup, start, stride, sync, leader = _SCOPE[scope]
    if put:
        params = "dest, source, sig, value, sig_op, pe" if signal else "dest, source, pe"
        ends = f"    dst = _remote(dest, pe, {name!r})\n    src = _addr(source)\n"
        check = _OVERRUN.format(name=name, local="source", remote="dest")
    else:
        params = "dest, source, pe"
        ends = f"    dst = _addr(dest)\n    src = _remote(source, pe, {name!r})\n"
        check = _OVERRUN.format(name=name, local="dest", remote="source")
    nbytes = "min(dest.size, source.size) * source.itemsize"
    ends += f"    nbytes = {nbytes}\n"
    smallest = _element_width(itemsize)
    far = (f"_proxy_check(pe, {name!r})\n"
           + _far_copy(put, "dest" if put else "source", "source" if put else "dest", nbytes,
                       smallest))
    copy = _copy_source(smallest, alone=scope == "")
    if _proxied.compiled_in():
        source = (f"def impl({params}):\n{check}{setup}    start = {start}\n"
                  f"    stride = {stride}\n    if _far(pe):\n{_indent(far, 2)}    else:\n"
                  f"{_indent(ends + copy, 1)}{sync}")
    else:  # (the addresses first: the copy is scheduled as it was before there was a proxy)
        source = (f"def impl({params}):\n{check}{setup}{ends}    start = {start}\n"
                  f"    stride = {stride}\n{copy}{sync}")
    if signal:
        # the block's or warp's data is written (synchronized above), or
        # posted: the signalling thread's release orders it before the signal
        source += (f"    if {leader}:\n"
                   "        if _far(pe):\n"
                   + _indent(_far_signal("sig", "value", "sig_op", "pe"), 3) +
                   "        else:\n"
                   f"            _signal_release(_remote(sig, pe, {name!r}), value, sig_op)\n")
    return _compile_source(source, _far_namespace() | _spin_namespace(debug, 0))


# -- spin-waits: the back-off every wait loop shares ----------------------------------

_POLLS_BEFORE_SLEEP = 64
#: a wait for a member looks at the member's departure word once every this many
#: polls (a power of two, above _POLLS_BEFORE_SLEEP: never in the first, fast ones)
_GONE_POLLS = 256
_MAX_SLEEP_NS = 256

#: One more poll of a spin-wait: after POLLS polls, sleep, doubling up to MAX_SLEEP,
#: and stop the kernel if this PE has left the job (it exits: nobody is coming).
_BACKOFF = """polls += 1
if polls > POLLS:
    _nanosleep(pause)
    pause = min(pause * 2, MAX_SLEEP)
    if _left():
        if DEBUG:
            print('numba-shmem: PE', _my_pe(), 'left the job while this kernel waited')
        _trap()"""


def _spin_namespace(debug, timeout_ns):
    """What every spin-wait's source refers to."""
    from .._current import my_pe

    return {"_now": _now, "_nanosleep": _nanosleep, "_trap": _trap, "_my_pe": my_pe,
            "_left": _left, "GONE_POLLS": _GONE_POLLS,
            "DEBUG": debug, "TIMEOUT": timeout_ns, "POLLS": _POLLS_BEFORE_SLEEP,
            "MAX_SLEEP": _MAX_SLEEP_NS, "min": min}


# -- toward PEs on other nodes: requests into the proxy's ring ---------------------
#
# A PE whose peer table entry is 0 is on another node (_proxied.py). Requests
# go into this PE's ring in mapped host memory (_transport/_ring.py), in the
# order of their tickets: the proxy sends them in that order and the target
# applies them in it, which is fence's order; quiet waits until the ring's
# COMPLETE word reaches the tickets taken.

def _spin(condition):
    """Source: wait, with the waits' back-off, while ``condition`` holds."""
    return f"polls = 0\npause = 32\nwhile {condition}:\n" + _indent(_BACKOFF, 1)


def _post(code, pe, offset, arg="0", cond="0", stage=""):
    """Source: post one request into this PE's ring, once its slot is free.
    Leaves ``t`` (its ticket), ``slot``, ``ring`` and ``stage_at`` (the slot's
    data area, which the source ``stage`` fills before the descriptor is
    published)."""
    return ("t = _ring_claim()\n"
            "slot = t & RING_MASK\n"
            "ring = _ring_base()\n"
            + _spin("_load_word(ring + RING_FREE + slot * 8) != t") +
            "stage_at = ring + RING_STAGING + slot * RING_CHUNK\n"
            + stage +
            "desc = ring + slot * 64\n"
            f"_store_word(desc + 8, {code})\n"
            f"_store_word(desc + 16, {pe})\n"
            f"_store_word(desc + 24, {offset})\n"
            f"_store_word(desc + 32, {arg})\n"
            f"_store_word(desc + 40, {cond})\n"
            "_release_word(desc, t + 1)\n")


#: Source: wait for the answer to ticket ``t``; then give its slot back
_ANSWER = _spin("_load_word(ring + RING_DONE + slot * 8) != t + 1")
_GIVE_BACK = "_release_word(ring + RING_FREE + slot * 8, t + RING_SLOTS)\n"

#: Source: wait until every request this PE has posted is complete at its target
_RING_QUIET = ("ring = _ring_base()\n"
               "if ring != 0:\n"
               "    posted = _ring_posted()\n"
               + _indent(_spin("_load_word(ring + RING_COMPLETE) < posted"), 1))


def _serial_copy(dst, src, nbytes, smallest):
    """Source: this thread copies ``nbytes`` from ``src`` to ``dst`` alone, in
    pieces of the widest width allowed, none narrower than ``smallest``."""
    widths = tuple(w for w in (8, 4, 2, 1) if w >= smallest)
    return (f"align = ({dst}) | ({src}) | ({nbytes})\n"
            + _widest(lambda w: f"    k = 0\n    while k < {nbytes}:\n"
                      f"        _copy{w}({dst} + k, {src} + k)\n        k += {w}\n", widths, 0))


def _far_copy(put, remote, local, nbytes, smallest, shift="", local_shift=""):
    """Source: this thread's part (chunks ``start, start + stride, ...``) of a
    put (``put``) or get of ``nbytes`` between the symmetric ``remote`` on PE
    ``pe`` and ``local``, through the ring; ``shift`` and ``local_shift`` add
    to the two addresses (bytes)."""
    chunk = ("at = c * RING_CHUNK\n"
             "n = min(RING_CHUNK, total - at)\n")
    if put:
        chunk += _post("RING_PUT", "pe", "far_at + at", "n",
                       stage=_serial_copy("stage_at", "near_at + at", "n", smallest))
    else:
        chunk += (_post("RING_GET", "pe", "far_at + at", "n") + _ANSWER
                  + _serial_copy("near_at + at", "stage_at", "n", smallest) + _GIVE_BACK)
    return (f"total = {nbytes}\n"
            f"far_at = _addr({remote}) - _heap_base(){shift}\n"
            f"near_at = _addr({local}){local_shift}\n"
            "c = start\n"
            "while c * RING_CHUNK < total:\n"
            + _indent(chunk, 1) +
            "    c += stride\n")


def _far_signal(sig, value, sig_op, pe):
    """Source: post a signal update (sig_op SIGNAL_SET or SIGNAL_ADD; any other
    stops the kernel, as on the direct path) to ``sig`` on PE ``pe``."""
    return (f"if {sig_op} != {api.SIGNAL_SET} and {sig_op} != {api.SIGNAL_ADD}:\n    _trap()\n"
            + _post(f"RING_SIGNAL + ({sig_op} << 16)", pe, f"_addr({sig}) - _heap_base()",
                    f"_bits({sig}, {value})"))


def _far_element(name, array, at, pe, put, value=None, result="v"):
    """Source: one element of ``array`` at address ``at`` (on this PE's heap),
    put (``value``) to or got (into ``result``) from PE ``pe``."""
    offset = f"{at} - _heap_base()"
    if put:
        return _post("RING_PUT", pe, offset, f"{array}.itemsize",
                     stage=f"_store_relaxed(stage_at, {array}, {value})\n")
    return (_post("RING_GET", pe, offset, f"{array}.itemsize") + _ANSWER
            + f"{result} = _load_relaxed({array}, stage_at)\n" + _GIVE_BACK)


def _far_namespace():
    """What the sources that may post refer to: in a job on one node, ``_far``
    is a constant false and the path to other nodes folds away
    (``_proxied.compiled_in``)."""
    return {**_proxied.namespace(), "_heap_base": _heap_base, "_addr": _addr,
            "_store_relaxed": _store_relaxed, "_load_relaxed": _load_relaxed, "_trap": _trap,
            "min": min}


# -- element operations, signals, fence and quiet --------------------------------------

#: In debug mode, an iput or iget whose strided elements reach outside dest
#: or source stops the kernel (the simulator's _check_strided says the same)
_STRIDED_OVERRUN = """    if DEBUG and nelems > 0:
        last = (nelems - 1) * {stride}
        if last < 0 or last >= {which}.size:
            print('numba-shmem: shmem.{name}: PE', _my_pe(), 'asked for', nelems,
                  'elements of {which} at stride', {stride}, ', up to element', last,
                  ', but {which} holds', {which}.size, '; pass a smaller nelems or stride')
            _trap()
"""


def _make_element_op(name):
    """p, g, iput, iget or signal_op: directly, or one request per element
    toward a PE on another node."""
    far = f"    if _far(pe):\n        _proxy_check(pe, {name!r})\n"
    if name == "p":
        source = ("def impl(dest, value, pe):\n" + far
                  + _indent(_far_element(name, "dest", "_addr(dest)", "pe", True, "value"), 2)
                  + "    else:\n        _store_relaxed(_remote(dest, pe, 'p'), dest, value)\n")
    elif name == "g":
        source = ("def impl(source, pe):\n" + far
                  + _indent(_far_element(name, "source", "_addr(source)", "pe", False), 2)
                  + "        return v\n"
                  + "    return _load_relaxed(source, _remote(source, pe, 'g'))\n")
    elif name == "signal_op":
        source = ("def impl(sig, value, sig_op, pe):\n" + far
                  + _indent(_far_signal("sig", "value", "sig_op", "pe"), 2)
                  + "    else:\n"
                  "        _signal_update(_remote(sig, pe, 'signal_op'), value, sig_op)\n")
    else:  # iput, iget: element i between dst + i * dst_stride and src + i * src_stride
        put = name == "iput"
        remote, local = ("dest", "source") if put else ("source", "dest")
        step = ("    size = {local}.itemsize\n    dst = _addr(dest)\n    src = _addr(source)\n"
                .format(local=local))
        each = ("    for i in range(nelems):\n"
                "        to = dst + i * dst_stride * size\n"
                "        at = src + i * src_stride * size\n")
        if put:
            proxied = _far_element(name, "dest", "to", "pe", True,
                                   "_load_relaxed(source, at)")
        else:
            proxied = (_far_element(name, "source", "at", "pe", False)
                       + "_store_relaxed(to, dest, v)\n")
        direct = (f"    shift = _remote({remote}, pe, {name!r}) - _addr({remote})\n"
                  + each + ("        _store_relaxed(to + shift, dest, _load_relaxed(source, at))\n"
                            if put else
                            "        _store_relaxed(to, dest, _load_relaxed(source, at + shift))\n"))
        source = ("def impl(dest, source, dst_stride, src_stride, nelems, pe):\n"
                  + _STRIDED_OVERRUN.format(name=name, which="dest", stride="dst_stride")
                  + _STRIDED_OVERRUN.format(name=name, which="source", stride="src_stride")
                  + step + far
                  + _indent(each + _indent(proxied, 2), 1) + "    else:\n"
                  + _indent(direct, 1))
    return source


def _element_factory(name):
    @_factory
    def make(sig):
        return _compile_source(_make_element_op(name), _far_namespace() | {
            "_remote": _remote, "_signal_update": _signal_update,
            **_spin_namespace(debug_enabled(), 0)})
    return make


def _impl_signal_fetch(sig):
    return _load_acquire(sig, _addr(sig))


def _impl_fence():
    _fence()


def _make_quiet(sig):
    """quiet: what went to other nodes is complete at its targets, then the
    direct path's fence.sc."""
    return _compile_source(f"def impl():\n{_indent(_RING_QUIET, 1)}    _quiet()\n",
                           _far_namespace() | {"_quiet": _quiet,
                                             **_spin_namespace(debug_enabled(), 0)})


# -- waits -------------------------------------------------------------------------

def _wait_source(name, params, result):
    """A spin-wait with back-off; in debug mode, a timeout that prints what it
    waited for and traps. A cmp that is not a CMP_* code (possible only when it
    is not a constant) stops the kernel instead of waiting for ever."""
    return (
        f"def impl({params}):\n"
        "    if not _valid_cmp(cmp):\n"
        "        if DEBUG:\n"
        f"            print('numba-shmem: shmem.{name}: PE', _my_pe(), 'got cmp =', cmp,\n"
        "                  'which is not one of shmem.CMP_EQ, CMP_NE, CMP_GT, CMP_LE, CMP_LT, "
        "CMP_GE')\n"
        "        _trap()\n"
        "    polls = 0\n"
        "    pause = 32\n"
        "    start = _now() if DEBUG else 0\n"
        "    while True:\n"
        f"{result}"
        f"{_indent(_BACKOFF, 2)}"
        "        if DEBUG and _now() - start > TIMEOUT:\n"
        f"            print('numba-shmem: PE', _my_pe(), 'timed out in {name} at address',\n"
        "                  WHERE, 'waiting for', WANT, 'last seen', SEEN)\n"
        "            _trap()\n")


def _make_wait(name, debug, timeout_ns):
    namespace = {**_spin_namespace(debug, timeout_ns), "_compare": _compare,
                 "_load_acquire": _load_acquire, "_addr": _addr, "_valid_cmp": _valid_cmp}
    scalar = name in ("signal_wait_until", "wait_until")
    if scalar:
        body = ("        seen = _load_acquire(ivar, _addr(ivar))\n"
                "        if _compare(seen, cmp, value):\n"
                f"            return {'seen' if name == 'signal_wait_until' else ''}\n")
        src = _wait_source(name, "ivar, cmp, value", body)
        src = src.replace("WHERE", "_addr(ivar)").replace("WANT", "value").replace("SEEN", "seen")
    else:
        vector = name.endswith("_vector")
        kind = name.replace("wait_until_", "").replace("_vector", "")
        params = ("ivars, indices, status, cmp, values" if kind == "some"
                  else "ivars, status, cmp, values")
        scan = _SCAN.replace("WANT", "values[i]" if vector else "values").replace(
            "RECORD", "indices[hits] = i" if kind == "some" else "pass")
        scan = "".join("    " + line + "\n" if line else "\n" for line in scan.splitlines())
        # with every element excluded (or none at all) there is nothing to wait
        # for: OpenSHMEM 1.5 returns SIZE_MAX (-1 here, an int64) and 0
        done = {"all": "        if pending == 0:\n            return\n",
                "any": "        if first >= 0:\n            return first\n"
                       "        if pending == 0:\n            return -1\n",
                "some": "        if hits > 0 or pending == 0:\n            return hits\n"}[kind]
        src = _wait_source(name, params, scan + done)
        src = src.replace("WHERE", "_addr(ivars)").replace("WANT", "cmp").replace("SEEN", "pending")
    return _compile_source(src, namespace)


def _impl_test(ivar, cmp, value):
    return 1 if _compare(_load_acquire(ivar, _addr(ivar)), cmp, value) else 0


_SCAN = """
    hits = 0
    first = -1
    pending = 0
    for i in range(ivars.size):
        if status[i] != 0:
            continue
        if _compare(_load_acquire(ivars, _addr(ivars) + i * ivars.itemsize), cmp, WANT):
            RECORD
            hits += 1
            if first < 0:
                first = i
        else:
            pending += 1
"""


def _make_test(kind):
    """test_all (kind "all"), test_any ("any") or test_some ("some")."""
    params = "ivars, indices, status, cmp, value" if kind == "some" else "ivars, status, cmp, value"
    scan = _SCAN.replace("WANT", "value").replace(
        "RECORD", "indices[hits] = i" if kind == "some" else "pass")
    result = {"all": "    return 1 if pending == 0 else 0\n", "any": "    return first\n",
              "some": "    return hits\n"}[kind]
    return _compile_source(f"def impl({params}):\n{scan}{result}",
                           {"_compare": _compare, "_load_acquire": _load_acquire})


# -- atomics, lowered straight to PTX --------------------------------------------------

_PTX_OP = {"swap": "exch", "inc": "add", "add": "add", "and": "and", "or": "or", "xor": "xor"}


def _ptx_type(op, dtype):
    bits = dtype.bitwidth
    if isinstance(dtype, types.Float):
        return f"f{bits}" if op == "add" else f"b{bits}"
    return f"u{bits}" if op == "add" else f"b{bits}"


def _far_atomic(name, op, fetching, dtype):
    """The implementation of atomic ``name`` on ``dtype`` toward a PE on another
    node: one request, and for a fetching one, a wait for the old value."""
    params = api.ATOMICS[name][0].replace(" ", ", ")
    target = params.split(",")[0]
    value = "1" if op == "inc" else "value" if "value" in params else "0"
    cond = "cond" if "cond" in params else "0"
    code = _proxied.atomic_code(op, as_dtype(dtype), fetching)
    source = (f"def impl({params}):\n    _proxy_check(pe, {name!r})\n"
              + _indent(_post(code, "pe", f"_addr({target}) - _heap_base()",
                              f"_bits({target}, {value})", f"_bits({target}, {cond})"), 1))
    if fetching:
        source += (_indent(_ANSWER, 1)
                   + f"    old = _from_bits({target}, _load_word(ring + RING_ANSWER + slot * 8))\n"
                   + _indent(_GIVE_BACK, 1) + "    return old\n")
    return _compile_source(source, _far_namespace() | _spin_namespace(debug_enabled(), 0))


def _lower_atomic(name):
    """An atomic: inline PTX on the peer's address, or toward a PE on another
    node (peer table entry 0), a request into the proxy's ring."""
    op = name.replace("atomic_", "").replace("fetch_", "")
    fetching = api.atomic_returns_old(name)
    direct = _lower_direct_atomic(name, op, fetching)

    def lower(context, builder, sig, args):
        from numba.cuda import cgutils

        if not _proxied.compiled_in():
            return direct(context, builder, sig, args)
        far = _proxied.is_far(context, builder, as_pe(context, builder, args[-1], sig.args[-1]))
        returns = sig.return_type != types.none
        result = cgutils.alloca_once(builder, context.get_value_type(sig.return_type)) \
            if returns else None
        with builder.if_else(far, likely=False) as (proxied, otherwise):
            with proxied:
                value = context.compile_internal(
                    builder, _far_atomic(name, op, fetching, sig.args[0].dtype), sig, args)
                if returns:
                    builder.store(value, result)
            with otherwise:
                value = direct(context, builder, sig, args)
                if returns:
                    builder.store(value, result)
        return builder.load(result) if returns else context.get_dummy_value()
    return lower


def _lower_direct_atomic(name, op, fetching):
    def lower(context, builder, sig, args):
        arrty = sig.args[0]
        dtype = arrty.dtype
        llty = context.get_value_type(dtype)
        address = peer_address(context, builder, array_pointer(context, builder, arrty, args[0]),
                               as_pe(context, builder, args[-1], sig.args[-1]), name)
        if op == "fetch":
            return _ptx.load(builder, address, llty, "relaxed")
        if op == "set":
            _ptx.store(builder, address, context.cast(builder, args[1], sig.args[1], dtype),
                       "relaxed")
            return context.get_dummy_value()
        is_float = isinstance(dtype, types.Float)
        bits = ir.IntType(dtype.bitwidth)
        as_bits = (lambda v: builder.bitcast(v, bits)) if is_float and op != "add" else (lambda v: v)
        from_bits = (lambda v: builder.bitcast(v, llty)) if is_float and op != "add" else (lambda v: v)
        if op == "compare_swap":
            cond = as_bits(context.cast(builder, args[1], sig.args[1], dtype))
            value = as_bits(context.cast(builder, args[2], sig.args[2], dtype))
            return from_bits(_ptx.atomic(builder, "cas", _ptx_type("cas", dtype), address, value,
                                         compare=cond))
        if op == "inc":
            value = ir.Constant(llty, 1)
        else:
            value = as_bits(context.cast(builder, args[1], sig.args[1], dtype))
        result = _ptx.atomic(builder, _PTX_OP[op], _ptx_type(_PTX_OP[op], dtype), address, value,
                             fetch=fetching)
        return from_bits(result) if fetching else context.get_dummy_value()
    return lower


# -- registration ----------------------------------------------------------------------

#: names that work on the host and in kernels, defined outside the device table
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


def _transfer_factory(name, scope, put, signal):
    @_factory
    def make(sig):
        itemsize = as_dtype(sig.args[1].dtype).itemsize  # of source, the same as dest's
        return _make_transfer(name, scope, put, signal, debug_enabled(), itemsize)
    return make


for _scope in ("", "_warp", "_block"):
    for _nbi in ("", "_nbi"):
        for _kind, _put, _signal in (("put", True, False), ("get", False, False),
                                     ("put_signal", True, True)):
            _name = f"{_kind}{_nbi}{_scope}"
            _register(_name, _inline(_transfer_factory(_name, _scope, _put, _signal)))

for _name in ("p", "g", "iput", "iget", "signal_op"):
    _register(_name, _inline(_element_factory(_name)))

for _name, _impl in (("signal_fetch", _impl_signal_fetch),
                     ("fence", _impl_fence), ("quiet", _factory(_make_quiet)),
                     ("test", _impl_test),
                     ("test_all", _make_test("all")), ("test_any", _make_test("any")),
                     ("test_some", _make_test("some"))):
    _register(_name, _inline(_impl))


# -- barriers ------------------------------------------------------------------------

#: Every member publishes its new epoch into its slot on every member, then
#: waits until its own slots of all members have reached that epoch. Each team
#: has a row of slots (one per PE and an epoch) at the start of the heap.
_SYNC = """
    _mark_cooperative()
    n = _n_pes()
    base = _heap_base() + TEAM * (n + 1) * 8
    size = _team_entry(TEAM, 0)
    me = _team_entry(TEAM, 1)
    if me < 0:
        if DEBUG:
            print('numba-shmem: PE', _my_pe(), 'called', NAME, 'on team', TEAM,
                  'which it is not a member of')
            _trap()
        return
    epoch_at = base + 8 * n
    # atomic, and published with max: barriers on one team from two streams
    # at once each get an epoch of their own, and no slot ever goes back
    epoch = _next_epoch(epoch_at)
    # one fence before the relaxed publishes (after the epoch's atomic, so
    # that the two round trips overlap): quiet also completes this PE's puts
    # (barrier); a release fence only orders them (sync)
FENCE
    for j in range(size):
        member = _team_entry(TEAM, 2 + j)
        if _far(member):  # on another node: through the proxy, after what went before
POST_EPOCH
        else:
            _publish_epoch(_peer_of(base + 8 * me, member, NAME), epoch)
    start = _now() if DEBUG else 0
    for j in range(size):
        polls = 0
        pause = 32
        while _load_u64(base + 8 * j) < epoch:
BACKOFF
            # a member that left without finalize set its departure word here;
            # looked at every GONE_POLLS polls only (the back-off's polls stay one
            # load each), and then the slot once more (it may have arrived before
            # the member left)
            if polls % GONE_POLLS == 0 and \
                    _load_u64(_heap_base() + DEPARTED + 8 * _team_entry(TEAM, 2 + j)) and \
                    _load_u64(base + 8 * j) < epoch:
                if DEBUG:
                    print('numba-shmem: PE', _my_pe(), 'waited in', NAME, 'for PE',
                          _team_entry(TEAM, 2 + j), ', which left the job')
                _stop_for(_team_entry(TEAM, 2 + j))
            if DEBUG and _now() - start > TIMEOUT:
                print('numba-shmem: PE', _my_pe(), 'timed out in', NAME, 'waiting for PE',
                      _team_entry(TEAM, 2 + j), 'to reach epoch', epoch)
                _trap()
"""


def _make_barrier(name, scope, complete, debug, timeout_ns):
    """barrier_all/sync_all (team 0) at a scope, or barrier(team)/sync(team)."""
    from .._current import n_pes

    setup, _start, _stride, sync, leader = _SCOPE[scope]
    team = "0" if name.startswith(("barrier_all", "sync_all")) else "team"
    post = _post("RING_SIGNAL_MAX", "member", "base + 8 * me - _heap_base()", "epoch")
    body = _SYNC.replace("NAME", repr(name)).replace("TEAM", team).replace(
        "DEPARTED", _departures_offset("n")).replace(
        "BACKOFF\n", _indent(_BACKOFF, 3)).replace("POST_EPOCH\n", _indent(post, 3)).replace(
        "FENCE\n", _indent(_RING_QUIET, 1) + "    _quiet()\n" if complete else "    _fence()\n")
    if team == "0":
        # the world's row of the team table is known: no loads from it (after
        # the previous barrier's acquires they would each go to L2)
        body = body.replace("_team_entry(0, 0)", "n").replace(
            "_team_entry(0, 1)", "_my_pe()").replace("_team_entry(0, 2 + j)", "j")
        assert "_team_entry" not in body
    params = "team" if team == "team" else ""
    if scope:
        # the leader's early return must not skip the scope's closing synchronization
        inner = body.replace("        return\n", "        pass\n")
        inner = "".join("    " + line + "\n" for line in inner.strip("\n").splitlines())
        source = f"def impl({params}):\n{setup}{sync}    if {leader}:\n{inner}{sync}"
    else:
        source = f"def impl({params}):\n{body}"
    return _compile_source(source, {
        **_far_namespace(), **_spin_namespace(debug, timeout_ns),
        "_mark_cooperative": _mark_cooperative,
        "_quiet": _quiet, "_fence": _fence,
        "_heap_base": _heap_base, "_n_pes": n_pes, "_load_u64": _load_u64,
        "_next_epoch": _next_epoch, "_publish_epoch": _publish_epoch, "_peer_of": _peer_of,
        "_team_entry": _team_entry, "_stop_for": _stop_for})


def _barrier_factory(name, scope, complete):
    @_factory
    def make(sig):
        debug, timeout_ns = _debug_timeout()
        return _make_barrier(name, scope, complete, debug, timeout_ns)
    return make


def _debug_timeout():
    from .. import _current

    runtime = _current.current()
    timeout = runtime.config.wait_timeout if runtime else 0.0
    return debug_enabled() and timeout > 0, int(timeout * 1e9)


def _wait_factory(name):
    @_factory
    def make(sig):
        return _make_wait(name, *_debug_timeout())
    return make


for _name in ("signal_wait_until", "wait_until", "wait_until_all", "wait_until_any",
              "wait_until_some", "wait_until_all_vector", "wait_until_any_vector",
              "wait_until_some_vector"):
    _register(_name, _inline(_wait_factory(_name)))

for _name in api.ATOMICS:
    _register(_name, _lower_atomic(_name))

for _scope in ("", "_warp", "_block"):
    for _kind, _complete in (("barrier_all", True), ("sync_all", False)):
        _register(f"{_kind}{_scope}", _inline(_barrier_factory(f"{_kind}{_scope}", _scope,
                                                                _complete)))
    for _kind, _complete in (("barrier", True), ("sync", False)):
        _register(f"{_kind}{_scope}", _inline(_barrier_factory(f"{_kind}{_scope}", _scope,
                                                                _complete)))


# -- collectives (thread, warp and block scope) ----------------------------------------

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


def _make_collective(name, debug):
    """The implementation of a collective from the table, at the scope its name
    says (a kind alone: thread scope)."""
    from .._arrays import peer_array
    from .._current import n_pes

    barrier, sync = api.host_and_device("barrier"), api.host_and_device("sync")
    kind = api.collective_kind(name)
    setup, first, step, scope_sync, _leader = _SCOPE[name[len(kind):]]
    head = (f"{setup}    size = _team_entry(team, 0)\n    me = _team_entry(team, 1)\n"
            f"    start = {first}\n    stride = {step}\n")
    def far_put(shift, local_shift):
        """Source: toward member ``pe`` on another node, this thread's chunks."""
        return _indent(f"_proxy_check(pe, {name!r})\n" + _far_copy(
            True, "dest", "source", "nelems * source.itemsize", 1, shift, local_shift), 1)

    def spread(shift):
        """Source: ``nbytes`` from ``src`` to ``dest`` (plus ``shift``) on
        every member, those on other nodes first (their requests go out while
        the direct copies run). Where each thread has at most one piece (8
        bytes, or a 16-byte vector, every end aligned to it) it loads the piece
        once and stores it to every member; else one copy per member, each
        loading the source again."""
        def each_direct(action):
            return ("for j in range(size):\n"
                    "    pe = _team_entry(team, 2 + j)\n"
                    "    if not _far(pe):\n" + _indent(action, 2))
        def once(width):
            """Source: this thread's one piece, loaded once, stored to every member."""
            return (f"    if start < (nbytes >> {width.bit_length() - 1}):\n"
                    f"        at = start * {width}\n"
                    f"        v{width} = _load{width}(src + at)\n"
                    + _indent(each_direct(f"_store{width}(_remote(dest, pe, {name!r}){shift}"
                                          f" + at, v{width})\n"), 2))
        return ("for j in range(size):\n"
                "    pe = _team_entry(team, 2 + j)\n"
                "    if _far(pe):\n" + _indent(far_put(shift, ""), 1) +
                f"align = (_addr(dest){shift}) | src | nbytes\n"
                "if nbytes <= 8 * stride and (align & 7) == 0:\n" + once(8) +
                "elif nbytes <= 16 * stride and (align & 15) == 0:\n" + once(16) +
                "else:\n" + _indent(each_direct(
                    f"dst = _remote(dest, pe, {name!r}){shift}\n"
                    + textwrap.dedent(_copy_source())), 1))

    if kind in ("broadcast", "fcollect", "alltoall"):
        # these put into members' dests: if a host reduction in lines was the
        # team's last collective, a member may still be writing there
        # (_stream/_kernels.line_reduce_kernel): sync the team first
        head += ("    if start == 0 and me >= 0:\n"
                 f"        settle = _heap_base() + {_state_offset('_n_pes()')} + team * 16 + 8\n"
                 "        if _load8(settle) != 0:\n"
                 "            sync(team)\n"
                 "            _store8(settle, 0)\n"
                 + scope_sync)
    if kind in ("broadcast", "fcollect"):
        params = "team, dest, source, nelems" + (", root" if kind == "broadcast" else "")
        shift = "" if kind == "broadcast" else " + me * nelems * dest.itemsize"
        body = ("    src = _addr(source)\n    nbytes = nelems * source.itemsize\n"
                + ("    if me == root:\n" + _indent(spread(shift), 2) if kind == "broadcast"
                   else _indent(spread(shift), 1)))
    elif kind == "alltoall":
        # Members on other nodes first (their requests go out while the direct
        # copies run). Where every member's part is whole 16-byte vectors and the
        # block has a thread for each vector of each part, thread t moves vector
        # t % count of part t // count: one load and one store each, instead of a
        # copy per member in turn (the stream tier launches enough threads);
        # else each thread takes its share of every part, member after member.
        params = "team, dest, source, nelems"
        direct = (f"dst = _remote(dest, pe, {name!r}) + me * nbytes\n"
                  "src = _addr(source) + j * nbytes\n" + textwrap.dedent(_copy_source()))
        body = ("    nbytes = nelems * source.itemsize\n"
                "    for j in range(size):\n"
                "        pe = _team_entry(team, 2 + j)\n"
                "        if _far(pe):\n"
                + _indent(far_put(" + me * nelems * dest.itemsize",
                                  " + j * nelems * source.itemsize"), 2) +
                "    count = nbytes >> 4\n"
                "    if ((_addr(dest) | _addr(source) | nbytes) & 15) == 0 and "
                "size * count <= stride:\n"
                "        if start < size * count:\n"
                "            j = start // count\n"
                "            at = (start - j * count) << 4\n"
                "            pe = _team_entry(team, 2 + j)\n"
                "            if not _far(pe):\n"
                f"                _store16(_remote(dest, pe, {name!r}) + me * nbytes + at,\n"
                "                         _load16(_addr(source) + j * nbytes + at))\n"
                "    else:\n"
                "        for j in range(size):\n"
                "            pe = _team_entry(team, 2 + j)\n"
                "            if not _far(pe):\n" + _indent(direct, 4))
    else:
        op, what = kind.split("_")
        params = "team, dest, source, nelems"

        def element(into):
            """Source: member ``pe``'s element ``offset + i`` of source."""
            at = "_addr(source) + (offset + i) * source.itemsize"
            return (f"if _far(pe):\n    _proxy_check(pe, {name!r})\n"
                    + _indent(_far_element(name, "source", at, "pe", False, result=into), 1)
                    + f"else:\n    {into} = peer_array(source, pe)[offset + i]\n")

        block = "me" if what == "reducescatter" else "0"
        combine = api.REDUCE_OPS[op]
        body = (scope_sync
                + "    if start == 0:\n"
                "        sync(team)\n"  # every member's source is ready
                + scope_sync
                + f"    offset = {block} * nelems\n"
                "    for i in range(start, nelems, stride):\n"
                "        pe = _team_entry(team, 2)\n"
                + _indent(element("a"), 2) +
                "        for j in range(1, size):\n"
                "            pe = _team_entry(team, 2 + j)\n"
                + _indent(element("b"), 3) +
                f"            a = {combine}\n"
                "        dest[i] = a\n")
    tail = (scope_sync
            + "    if start == 0:\n"
            "        barrier(team)\n"  # complete on every member; sources may be reused
            + scope_sync)
    return _compile_source(f"def impl({params}):\n{head}{body}{tail}", {
        **_far_namespace(), **_spin_namespace(debug, 0), "_n_pes": n_pes,
        "_heap_base": _heap_base, "_load8": _load8, "_store8": _store8,
        "_team_entry": _team_entry, "barrier": barrier, "sync": sync, "peer_array": peer_array,
        "min": min, "max": max})


def _collective_factory(name):
    @_factory
    def make(sig):
        return _make_collective(name, debug_enabled())
    return make


for _name in [*api.COLLECTIVES, *api.COLLECTIVE_KINDS]:  # (a kind: the thread form)
    _register(_name, _inline(_collective_factory(_name)))


def _impl_team_my_pe(team):
    return _team_entry(team, 1)


def _impl_team_n_pes(team):
    return _team_entry(team, 0)


def _impl_team_translate_pe(src_team, src_pe, dest_team):
    if src_pe < 0 or src_pe >= _team_entry(src_team, 0):
        return -1
    world = _team_entry(src_team, 2 + src_pe)
    for j in range(_team_entry(dest_team, 0)):
        if _team_entry(dest_team, 2 + j) == world:
            return j
    return -1


for _name, _impl in (("team_my_pe", _impl_team_my_pe), ("team_n_pes", _impl_team_n_pes),
                     ("team_translate_pe", _impl_team_translate_pe)):
    _register(_name, _inline(_impl))
