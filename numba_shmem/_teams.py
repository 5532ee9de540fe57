"""Teams: ordered subsets of the PEs, named by small integer handles that work
on the host and in kernels.

``TEAM_WORLD`` holds every PE; ``TEAM_SHARED`` the PEs of this node (they can
load and store each other's heaps). New teams come from ``team_split_strided``
and ``team_split_2d``, collective over the parent team. A handle is the same on
every member, so it can be passed into kernels as an int; each team has its own
barrier slots on the heap.
"""

import json
import operator

import numpy as np

from ._current import require
from ._errors import ShmemUsageError
from ._heap._symmetric import LINE_TEAMS, MAX_TEAMS, line_slots, sync_row, team_words

TEAM_WORLD = 0
TEAM_SHARED = 1
TEAM_INVALID = -1


def checked_pe(runtime, pe, what, direct=True):
    """``pe`` as an int, once it is a PE of the job (and, with ``direct``, one
    this PE can address directly); else a usage error that names ``what``."""
    try:
        pe = operator.index(pe)
    except TypeError:
        raise ShmemUsageError(f"{what}: pe must be an int, got {pe!r}") from None
    size = runtime.bootstrap.size
    if not 0 <= pe < size:
        raise ShmemUsageError(f"{what}: pe={pe} is out of range for {size} PEs (0..{size - 1})")
    bases = runtime.heap.backend.bases
    if direct and pe not in bases:
        raise ShmemUsageError(
            f"{what}: PE {pe} is on another node; only PEs on this node "
            f"({list(bases)}) can be addressed directly")
    return pe


def is_integer(value):
    """Whether ``value`` is an exact integer: an int or a numpy integer, never a
    bool, nor a float or a string that ``int()`` would take."""
    return type(value) is int or (isinstance(value, (int, np.integer))
                                  and not isinstance(value, bool))


def team_handle(team, what, arg="team"):
    """``team`` as an int, or a usage error naming ``what`` and the argument
    ``arg`` where it is not an exact integer (0.7 and '0' are not TEAM_WORLD,
    True is not TEAM_SHARED)."""
    if not is_integer(team):
        raise ShmemUsageError(
            f"{what}: {arg} must be a team handle (an int or numpy integer: shmem.TEAM_WORLD, "
            f"TEAM_SHARED or one team_split_* returned), got {team!r}; pass the handle itself")
    return int(team)


class TeamTable:
    """This PE's teams: handle -> sorted tuple of member PEs (world numbering)."""

    def __init__(self, bootstrap):
        self.npes = bootstrap.size
        self.me = bootstrap.rank
        self.members = {TEAM_WORLD: tuple(range(bootstrap.size)),
                        TEAM_SHARED: tuple(sorted(bootstrap.local_peers))}
        self.device = None  # filled by the CUDA runtime: int32[MAX_TEAMS, npes + 2]

    def row(self, team):
        """The device table's row of ``team``: size, this PE's index, members."""
        row = np.full(self.npes + 2, -1, np.int32)
        members = self.members.get(team)
        if members is not None:
            row[0] = len(members)
            row[1] = members.index(self.me) if self.me in members else -1
            row[2:2 + len(members)] = members
        return row

    def table(self):
        return np.stack([self.row(team) for team in range(MAX_TEAMS)])

    def get(self, team, what, arg="team"):
        """The members of ``team``; a usage error naming ``what`` and the
        argument ``arg`` where it is not a handle of one of this PE's teams."""
        members = self.members.get(team_handle(team, what, arg))
        if members is None:
            raise ShmemUsageError(f"{what}: {arg}={team!r} is not a team of this PE (destroyed, "
                                  "or this PE is not a member)")
        return members

    def add(self, bootstrap, parent_members, new_members, what):
        """Collective over ``parent_members``: agree on a handle free on every
        member of each new team (a list of member tuples, or None for none).
        Another thread's split waits: both would take the same free handle."""
        with bootstrap.serial():
            return self._add(bootstrap, parent_members, new_members, what)

    def _add(self, bootstrap, parent_members, new_members, what):
        used = sorted(self.members)
        reports = [json.loads(r) for r in bootstrap.allgather(
            json.dumps([used, new_members]).encode(), what, list(parent_members))]
        taken = {pe: set(used_there) for pe, (used_there, _) in zip(parent_members, reports)}
        handles = []
        for index, members in enumerate(new_members):
            if members is None:
                handles.append(TEAM_INVALID)
                continue
            busy = set().union(*(taken[pe] for pe in members))
            free = [h for h in range(MAX_TEAMS) if h not in busy]
            if not free:
                raise ShmemUsageError(f"{what}: no team handle is free on every member; "
                                      f"destroy teams (at most {MAX_TEAMS} per PE)")
            for pe in members:
                taken[pe].add(free[0])
            handles.append(free[0])
            if self.me in members:
                self.members[free[0]] = tuple(members)
                self._publish(free[0])
        return handles

    def remove(self, team):
        del self.members[team]
        self._publish(team)

    def _publish(self, team):
        if self.device is not None:
            self.device[team].copy_to_device(self.row(team))


def _table(what):
    return require(what).teams


def _members_or_none(team, what, arg="team"):
    """The members of ``team`` (the argument ``arg``), or None for TEAM_INVALID
    and any other handle that is not one of this PE's teams (OpenSHMEM: those
    queries return -1)."""
    return _table(what).members.get(team_handle(team, f"shmem.{what}", arg))


def team_my_pe(team):
    """Host and device. This PE's number in ``team``; -1 if it is not a member
    or ``team`` is TEAM_INVALID."""
    members = _members_or_none(team, "team_my_pe")
    me = require("team_my_pe").bootstrap.rank
    return members.index(me) if members and me in members else -1


def team_n_pes(team):
    """Host and device. The number of PEs in ``team``; -1 for TEAM_INVALID."""
    members = _members_or_none(team, "team_n_pes")
    return -1 if members is None else len(members)


def team_translate_pe(src_team, src_pe, dest_team):
    """Host and device. The number in ``dest_team`` of PE ``src_pe`` of
    ``src_team``; -1 if it is not a member of ``dest_team`` or either team is
    TEAM_INVALID."""
    source = _members_or_none(src_team, "team_translate_pe", "src_team")
    dest = _members_or_none(dest_team, "team_translate_pe", "dest_team")
    if not is_integer(src_pe):
        raise ShmemUsageError(f"shmem.team_translate_pe: src_pe must be an int or numpy integer "
                              f"(a PE number of src_team), got {src_pe!r}")
    if source is None or dest is None or not 0 <= src_pe < len(source):
        return -1
    world = source[src_pe]
    return dest.index(world) if world in dest else -1


def _parent(parent, what):
    """The runtime and the parent's members (a PE's table holds only its own teams)."""
    runtime = require(what)
    return runtime, runtime.teams.get(parent, f"shmem.{what}", "parent")


def team_split_strided(parent, start, stride, size):
    """Host. Collective over ``parent``. A new team of the parent's PEs
    ``start, start + stride, ...`` (``size`` of them); returns its handle on its
    members and TEAM_INVALID on the other PEs of the parent."""
    runtime, members = _parent(parent, "team_split_strided")
    n = len(members)
    if not (is_integer(stride) and stride >= 1 and is_integer(size) and size >= 1
            and is_integer(start) and 0 <= start and start + (size - 1) * stride < n):
        raise ShmemUsageError(
            f"shmem.team_split_strided: start={start!r}, stride={stride!r}, size={size!r} do "
            f"not pick PEs of a parent team of {n} (need ints with 0 <= start, stride >= 1, "
            f"size >= 1 and start + (size - 1) * stride < {n})")
    start, stride, size = int(start), int(stride), int(size)
    chosen = [members[start + i * stride] for i in range(size)]
    (handle,) = runtime.teams.add(runtime.bootstrap, members, [chosen],
                                  "shmem.team_split_strided")
    return handle if runtime.bootstrap.rank in chosen else TEAM_INVALID


def team_split_2d(parent, xrange):
    """Host. Collective over ``parent``. Lay the parent's PEs out in rows of
    ``xrange``; return (this PE's row team, this PE's column team)."""
    runtime, members = _parent(parent, "team_split_2d")
    n = len(members)
    if not (is_integer(xrange) and xrange >= 1):
        raise ShmemUsageError(f"shmem.team_split_2d: xrange must be an int >= 1, got {xrange!r}")
    xrange = min(int(xrange), n)
    rows = [list(members[i:i + xrange]) for i in range(0, n, xrange)]
    columns = [list(members[j::xrange]) for j in range(xrange)]
    handles = runtime.teams.add(runtime.bootstrap, members, rows + columns, "shmem.team_split_2d")
    index = members.index(runtime.bootstrap.rank)
    return handles[index // xrange], handles[len(rows) + index % xrange]


def team_destroy(team):
    """Host. Collective over ``team``. Release the handle on every member."""
    runtime = require("team_destroy")
    team = team_handle(team, "shmem.team_destroy")
    if team in (TEAM_WORLD, TEAM_SHARED):
        raise ShmemUsageError("shmem.team_destroy: TEAM_WORLD and TEAM_SHARED cannot be destroyed")
    members = runtime.teams.get(team, "shmem.team_destroy")
    with runtime.bootstrap.serial():
        _destroy(runtime, team, members)


def _destroy(runtime, team, members):
    runtime.synchronize("shmem.team_destroy")  # this PE's kernels using the team are done...
    runtime.bootstrap.barrier("shmem.team_destroy", list(members))  # ...and every member's
    runtime.teams.remove(team)
    # A device barrier waits until each member's slot reaches the epoch of its
    # own count of barriers on the handle. A later team given this handle may
    # have other members, whose counts differ: zero the row, so that every
    # handle starts from epoch 0 on every PE (a PE that never had it still has
    # the zeros of init). Nothing writes the row now: every member's last
    # barrier on the team saw every other member's store to it.
    runtime.heap.backend.fill_zero(*sync_row(team, runtime.bootstrap.size))
    # the same for the count of reductions in lines (a member waits for words
    # marked with it) and their slots: every word sent there has arrived
    npes = runtime.bootstrap.size
    runtime.heap.backend.fill_zero(*team_words(team, npes))
    if runtime.heap.lines and team < LINE_TEAMS:
        runtime.heap.backend.fill_zero(*line_slots(team, npes))
