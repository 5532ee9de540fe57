"""What the stream tier keeps for one runtime: the remembered arrays, the
prepared kernels, the scratch of in-place reductions.

Made on the first stream-tier call after ``init()`` and dropped with the
runtime; nothing in it outlives ``finalize()``.
"""

import numpy as np

from .._current import require
from .._errors import ShmemUsageError
from .._heap._symmetric import LINE_BYTES, LINE_TEAMS, departures, line_slots, team_state
from .._teams import checked_pe
from .._transport import proxy_for
from ._handles import as_stream, checked_handle, raw_handle
from ._targets import Targets


class Tier:
    def __init__(self, runtime):
        from . import _kernels

        self.runtime = runtime
        self.targets = Targets(runtime)
        self.kernels = _kernels
        self.enqueue = None  # _cuda/_enqueue.py, on the GPU
        if runtime.backend == "cuda":
            from .._cuda import _enqueue

            self.enqueue = _enqueue
        self._prepared = {}
        self._scratch = {}  # team -> device array an in-place reduction reduces into
        self._slots = {}  # team -> its line slots (_heap/_symmetric.py), as line_slots gives them
        #: (plan, team, dtype) -> a host reduction's launch in lines, or None (_collectives.py)
        self.lines = {}
        #: the teams this PE has made reductions in lines on (captured ones included): only
        #: on those can a collective that puts into members' arrays need to sync first
        self.lined = set()
        self._state = None  # the teams' state words, as state() gives them
        self._departed = None  # the departure words, as departed() gives them
        table = runtime.teams.device  # int32[MAX_TEAMS, n_pes + 2] on the GPU, else None
        self._table = None if table is None else (
            table.device_ctypes_pointer.value, table.shape[1], table.shape[1] * table.dtype.itemsize)

    def _words(self, offset, words):
        """The uint64 words at heap ``offset`` of this PE: (address, count) on
        the GPU (prepared launches take them so), an array on the simulator."""
        backend = self.runtime.heap.backend
        if self.enqueue is None:
            return backend.view(self.runtime.bootstrap.rank, offset, (words,), np.uint64)
        return backend.base + offset, words

    def state(self):
        """The teams' state words (``_heap/_symmetric.team_state``)."""
        if self._state is None:
            offset, nbytes = team_state(self.runtime.bootstrap.size)
            self._state = self._words(offset, nbytes // 8)
        return self._state

    def departed(self):
        """This PE's departure words, one per PE (``_heap/_symmetric.departures``)."""
        if self._departed is None:
            offset, nbytes = departures(self.runtime.bootstrap.size)
            self._departed = self._words(offset, nbytes // 8)
        return self._departed

    def line_slots(self, team, dtype, nelems):
        """``team``'s line slots if a reduction of ``nelems`` of ``dtype`` goes in
        lines, else None: parts of at most LINE_BYTES of 4- or 8-byte numbers,
        on one of the first LINE_TEAMS teams, in a job on one node."""
        if not (dtype.itemsize in (4, 8) and nelems * dtype.itemsize <= LINE_BYTES
                and dtype.kind in "iuf" and team < LINE_TEAMS and self.runtime.heap.lines):
            return None
        found = self._slots.get(team)
        if found is None:
            offset, nbytes = line_slots(team, self.runtime.bootstrap.size)
            found = self._slots[team] = self._words(offset, nbytes // 8)
        return found

    def team_row(self, team):
        """(address, entries) of ``team``'s row of the device team table (GPU)."""
        base, entries, row_bytes = self._table
        return base + team * row_bytes, entries

    def prepared(self, kernel, kind, dtype=np.uint8):
        """``kernel`` compiled and prepared (GPU only) for the argument types of
        ``kind`` (``_kernels.argtypes``)."""
        key = (kernel, kind, dtype)
        found = self._prepared.get(key)
        if found is None:
            found = self._prepared[key] = self.enqueue.Prepared(
                kernel, self.kernels.argtypes(kind, dtype))
        return found

    def scratch(self, team, nelems, dtype, stream, name):
        """A private device array of at least ``nelems`` elements of ``dtype``
        for ``team``, kept for the next call: made (outside graph capture) the
        first time a size is needed."""
        found = self._scratch.get(team)
        nbytes = nelems * dtype.itemsize
        if found is None or found.nbytes < nbytes:
            from numba import cuda

            if self.enqueue.capturing(stream):
                raise ShmemUsageError(
                    f"shmem.{name}: an in-place reduction of {nbytes} bytes on team {team} "
                    "needs a scratch buffer, which cannot be allocated while the stream is "
                    "captured into a graph; make the same call once before the capture, or "
                    "pass separate dest and source arrays")
            found = self._scratch[team] = cuda.device_array(max(nbytes, 1), "u1")
        return found.device_ctypes_pointer.value


def tier_of(name):
    """(the runtime, its stream tier) for ``shmem.<name>``."""
    runtime = require(name)
    found = runtime.stream_tier
    if found is None:
        found = runtime.stream_tier = Tier(runtime)
    return runtime, found


def stream_of(runtime, stream, name):
    """The CUstream handle ``stream=`` stands for on the GPU; on the simulator
    (where calls run at once) 0, once ``stream`` is known to be a stream."""
    if runtime.backend == "sim":
        return as_stream(stream, name, "sim")
    return checked_handle(raw_handle(stream, name), stream, name)


def peer_base(runtime, pe, name):
    """The address of PE ``pe``'s heap; None for a PE on another node (reached
    through the proxy); else a usage error naming ``pe``."""
    bases = runtime.heap.backend.bases
    found = bases.get(pe) if type(pe) is int else None
    if found is not None:
        return found
    if proxy_for(runtime, pe, f"shmem.{name}") is not None:
        return None
    return bases[checked_pe(runtime, pe, f"shmem.{name}")]
