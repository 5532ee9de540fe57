"""Transfers (put, get, put_signal at every scope), element operations,
signals, fence and quiet on the GPU."""

from numba.cuda.np.numpy_support import as_dtype

from . import _proxied
from ._addressing import debug_enabled
from ._far import _RING_QUIET, _far_element, _far_namespace, _far_signal, _far_transfer
from ._primitives import _addr, _fence, _load_acquire, _quiet, _remote, _signal_update
from ._source import (
    _compile_source, _copy_source, _element_width, _factory, _indent, _inline, _register,
    _SCOPE, _spin_namespace,
)


# -- transfers -------------------------------------------------------------------

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
    spans = _proxied.compiled_in()
    nbytes = "min(dest.size, source.size) * source.itemsize"
    if spans and scope:
        # a warp's or block's place in the copy and its length, computed anew
        # at each call: hoisted out of the caller's loop, they stayed live
        # through it beside the path to other nodes' values (linked as for a
        # GPU, a block's put_block in a loop: 124 registers, 72 so; a
        # get_block, 71 and 55)
        start, stride = f"_per_call({start})", f"_per_call({stride})"
        length = f"_per_call({nbytes})"
    else:
        length = nbytes
    if put:
        params = "dest, source, sig, value, sig_op, pe" if signal else "dest, source, pe"
        ends = f"    dst = _remote(dest, pe, {name!r})\n    src = _addr(source)\n"
        check = _OVERRUN.format(name=name, local="source", remote="dest")
    else:
        params = "dest, source, pe"
        ends = f"    dst = _addr(dest)\n    src = _remote(source, pe, {name!r})\n"
        check = _OVERRUN.format(name=name, local="dest", remote="source")
    ends += f"    nbytes = {length}\n"
    smallest = _element_width(itemsize)
    copy = _copy_source(smallest, alone=scope == "")
    namespace = _far_namespace() | _spin_namespace(debug, 0)
    if spans:
        remote, local = ("dest", "source") if put else ("source", "dest")
        far = _far_transfer(name, put, remote, local, nbytes, smallest, scope, "_nbi" in name)
        source = (f"def impl({params}):\n{check}{setup}    start = {start}\n"
                  f"    stride = {stride}\n    if _far(pe):\n{_indent(far, 2)}"
                  f"    else:\n{_indent(ends + copy, 1)}{sync}")
    else:  # (the addresses first: the copy is scheduled as it was before there was a proxy)
        source = (f"def impl({params}):\n{check}{setup}{ends}    start = {start}\n"
                  f"    stride = {stride}\n{copy}{sync}")
    if signal:
        # the block's or warp's data is written (synchronized above): the
        # signalling thread's release orders it before the signal; or posted
        # into the ring, on tickets before the signal's (the proxy sends in
        # ticket order)
        source += (f"    if {leader}:\n"
                   "        if _far(pe):\n"
                   + _indent(_far_signal("sig", "value", "sig_op", "pe"), 3) +
                   "        else:\n"
                   f"            _signal_release(_remote(sig, pe, {name!r}), value, sig_op)\n")
    return _compile_source(source, namespace)


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
    return _compile_source(f"def impl():\n{_indent(_RING_QUIET, 1)}",
                           _far_namespace() | {"_quiet": _quiet,
                                             **_spin_namespace(debug_enabled(), 0)})


# -- registration ----------------------------------------------------------------------

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
                     ("fence", _impl_fence), ("quiet", _factory(_make_quiet))):
    _register(_name, _inline(_impl))
