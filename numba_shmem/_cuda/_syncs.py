"""Barriers and syncs on the GPU, of all PEs and of a team, at every scope."""

from ._far import _RING_QUIET, _far_namespace, _post
from ._primitives import (
    _fence, _heap_base, _load_u64, _mark_cooperative, _next_epoch, _peer_of, _publish_epoch,
    _quiet, _stop_for, _team_entry,
)
from ._source import (
    _BACKOFF, _BACKOFF_START, _compile_source, _debug_timeout, _departures_offset, _factory,
    _indent, _inline, _register, _SCOPE, _spin_namespace,
)


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
BACKOFF_START
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
    post = _post("RING_SIGNAL_MAX", "member", "base + 8 * me - _far_heap_base()", "epoch")
    body = _SYNC.replace("NAME", repr(name)).replace("TEAM", team).replace(
        "DEPARTED", _departures_offset("n")).replace(
        "BACKOFF_START\n", _indent(_BACKOFF_START, 2)).replace(
        "BACKOFF\n", _indent(_BACKOFF, 3)).replace("POST_EPOCH\n", _indent(post, 3)).replace(
        "FENCE\n", _indent(_RING_QUIET, 1) if complete else "    _fence()\n")
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


for _scope in ("", "_warp", "_block"):
    for _kind, _complete in (("barrier_all", True), ("sync_all", False)):
        _register(f"{_kind}{_scope}", _inline(_barrier_factory(f"{_kind}{_scope}", _scope,
                                                                _complete)))
    for _kind, _complete in (("barrier", True), ("sync", False)):
        _register(f"{_kind}{_scope}", _inline(_barrier_factory(f"{_kind}{_scope}", _scope,
                                                                _complete)))
