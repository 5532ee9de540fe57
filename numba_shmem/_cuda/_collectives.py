"""Collectives on the GPU at thread, warp and block scope, and the team
queries."""

import textwrap


from .. import _device_api as api
from . import _proxied
from ._addressing import debug_enabled
from ._far import _far_element, _far_namespace, _far_transfer
from ._primitives import _heap_base, _load8, _store8, _team_entry
from ._source import (
    _compile_source, _copy_source, _factory, _indent, _inline, _register, _SCOPE,
    _spin_namespace, _state_offset,
)


# -- collectives (thread, warp and block scope) ----------------------------------------

def _make_collective(name, debug):
    """The implementation of a collective from the table, at the scope its name
    says (a kind alone: thread scope)."""
    from .._arrays import peer_array
    from .._current import n_pes

    barrier, sync = api.host_and_device("barrier"), api.host_and_device("sync")
    kind = api.collective_kind(name)
    setup, first, step, scope_sync, _leader = _SCOPE[name[len(kind):]]
    namespace = _far_namespace() | _spin_namespace(debug, 0)
    spans = _proxied.compiled_in()
    if spans and scope_sync:  # (as a transfer's: _copies._make_transfer)
        first, step = f"_per_call({first})", f"_per_call({step})"
    head = (f"{setup}    size = _team_entry(team, 0)\n    me = _team_entry(team, 1)\n"
            f"    start = {first}\n    stride = {step}\n")

    def far_put(shift, local_shift):
        """Source: toward member ``pe`` on another node, this thread's (or
        warp's) chunks (``_far_transfer``); in a job on one node, where
        ``_far`` is a constant false, nothing (no path to compile)."""
        if not spans:
            return "    pass\n"
        return _indent(_far_transfer(name, True, "dest", "source", "nelems * source.itemsize", 1,
                                     name[len(kind):], shift=shift, local_shift=local_shift), 1)

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
        **namespace, "_n_pes": n_pes,
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
