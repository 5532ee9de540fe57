"""Collective allocation on the symmetric heap, checked across PEs."""

import json
import operator
import weakref

import numpy as np

from .._bootstrap import check_same
from .._errors import ShmemConfigError, ShmemUsageError
from ._allocator import DEFAULT_ALIGN, OffsetAllocator


def normalize_shape(shape, what=None):
    """``shape`` as a tuple of ints >= 0, else a usage error (that names
    ``what``, the call, where given)."""
    prefix = f"{what}: " if what else ""
    try:
        shape = (operator.index(shape),)
    except TypeError:
        try:
            shape = tuple(operator.index(extent) for extent in shape)
        except TypeError:
            raise ShmemUsageError(
                f"{prefix}shape must be an int or a tuple of ints, got {shape!r}") from None
    if any(extent < 0 for extent in shape):
        raise ShmemUsageError(f"{prefix}shape must not have negative extents, got {shape}")
    return shape


def normalize_dtype(dtype, what=None):
    """``dtype`` as a numeric numpy dtype, else a usage error (that names
    ``what``, the call, where given)."""
    prefix = f"{what}: " if what else ""
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise ShmemUsageError(f"{prefix}dtype {dtype!r} is not a numpy dtype") from None
    if dtype.hasobject:
        raise ShmemUsageError(f"{prefix}dtype {dtype} holds Python objects; use a numeric dtype")
    return dtype


def sync_row(team, npes):
    """(offset, bytes) of ``team``'s row in the runtime's area: a uint64 slot
    per PE, where the members publish their epochs, then this PE's epoch."""
    return team * (npes + 1) * 8, (npes + 1) * 8


#: the largest part of each member (in bytes) that a host reduction sends in
#: lines: each uint64 word carries 4 bytes of data and a mark, so that a word
#: that is there is a word that has arrived (no flag, no barrier before it)
LINE_BYTES = 4096
#: the words of one member's part in a team's line slots
LINE_WORDS = LINE_BYTES // 4
#: the teams (handles 0 to LINE_TEAMS - 1) with line slots; a host reduction on
#: a team of a larger handle goes in the block form
LINE_TEAMS = 16


#: the most teams a PE can belong to at once (each has barrier slots on the heap)
MAX_TEAMS = 64


def _aligned(nbytes):
    return -(-nbytes // DEFAULT_ALIGN) * DEFAULT_ALIGN


def team_state(npes):
    """(offset, bytes) of the teams' state words, after every team's sync row:
    two uint64 per team handle, the number of host reductions in lines made on
    it, and whether the last of them may still be writing on some member (a
    collective that puts into members' arrays syncs the team first)."""
    return _aligned(sync_row(MAX_TEAMS, npes)[0]), MAX_TEAMS * 16


def team_words(team, npes):
    """(offset, bytes) of ``team``'s two state words (``team_state``)."""
    return team_state(npes)[0] + 16 * team, 16


def departures(npes):
    """(offset, bytes) of the departure words, right after the teams' state
    words: a uint64 per PE, which that PE sets to 1 on every PE of its node
    when it leaves without ``finalize()``. The library's waits for a member
    (device barriers, reductions in lines) look at it while they wait, and
    stop instead of waiting for ever."""
    start, size = team_state(npes)
    return start + size, 8 * npes


def line_slots(team, npes):
    """(offset, bytes) of ``team``'s line slots, after the departure words: two
    sets (a call uses the set of its number's parity), each of LINE_WORDS uint64
    words for every member, by its number in the team."""
    start, size = departures(npes)
    slots = 2 * npes * LINE_WORDS * 8
    return _aligned(start + size) + team * slots, slots


def sync_bytes(npes, lines=False):
    """Bytes the runtime keeps at heap offset 0: for each possible team, one
    uint64 barrier slot per PE and this PE's barrier epoch, then the teams'
    state words and the departure words; with ``lines``, then the line slots
    of the first LINE_TEAMS teams."""
    start, size = line_slots(LINE_TEAMS, npes) if lines else departures(npes)
    return _aligned(start if lines else start + size)


class SymmetricHeap:
    """Hands out arrays at offsets that are the same on every PE. The first
    ``sync_bytes(n_pes, lines)`` bytes are the runtime's own (device barriers,
    and in a job on one node the teams' line slots). ``complete(what)``
    completes this PE's outstanding operations (its GPU work, the proxy's
    requests) before memory is released."""

    def __init__(self, backend, bootstrap, complete):
        self.backend = backend
        self._bootstrap = bootstrap
        self._complete = complete
        # line slots only where every PE can store into every other's heap
        self.lines = len(backend.bases) == bootstrap.size
        self.reserved = sync_bytes(bootstrap.size, self.lines)
        if backend.capacity <= self.reserved:
            raise ShmemConfigError(
                "NUMBA_SHMEM_HEAP_SIZE", str(backend.capacity),
                f"more than the {self.reserved} bytes the runtime keeps for the barriers (and line "
                f"slots) of {bootstrap.size} PEs (at least "
                f"{max(4, -(-self.reserved // (1 << 20)) + 2)}M is sensible)")
        backend.ensure_mapped(self.reserved)
        backend.fill_zero(0, self.reserved)
        self.allocator = OffsetAllocator(backend.capacity, start=self.reserved)
        self._count = 0
        # id(array) -> (weak reference, offset) of what allocate() returned: numba
        # drops the pointer of a zero-size device array, so the offset is
        # remembered rather than derived (simulator arrays are not hashable)
        self._offsets = {}
        self.version = 0  # counts frees: what was checked against the heap before may be stale

    def allocate(self, shape, dtype, align=DEFAULT_ALIGN, zero=False):
        """Collective. A new symmetric array (zeroed if ``zero``)."""
        shape = normalize_shape(shape)
        dtype = normalize_dtype(dtype)
        if not (isinstance(align, int) and align > 0 and align & (align - 1) == 0):
            raise ShmemUsageError(f"align must be a power of two, got {align!r}")
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        what = "shmem.zeros" if zero else "shmem.array"
        # (the agreement, the growth and the zeroing go to the other PEs
        # together: another thread's call waits until they are done)
        with self._bootstrap.serial():
            self._count += 1
            request = [nbytes, max(align, DEFAULT_ALIGN)]
            records = self._bootstrap.allgather(json.dumps(request).encode(), what)
            check_same(f"{what} (allocation #{self._count})",
                       [json.loads(record) for record in records],
                       lambda r: f"allocated {r[0]} bytes aligned to {r[1]}")
            offset = self.allocator.alloc(nbytes, request[1])
            try:
                # the same on every PE, so growth stays collective
                self.backend.ensure_mapped(offset + self.allocator.live[offset])
                if zero:
                    self.backend.fill_zero(offset, nbytes)
                    self._bootstrap.barrier(what)
            except BaseException:
                self.allocator.free(offset)
                raise
        arr = self.backend.view(self._bootstrap.rank, offset, shape, dtype)
        key = id(arr)

        def forget(ref):
            if self._offsets.get(key, (None,))[0] is ref:
                del self._offsets[key]

        self._offsets[key] = (weakref.ref(arr, forget), offset)
        return arr

    def _allocated_offset(self, arr):
        """The offset of ``arr`` if it is a live array that allocate() returned."""
        ref, offset = self._offsets.get(id(arr), (None, None))
        return offset if ref is not None and ref() is arr else None

    def offset_of(self, arr, what):
        """The heap offset of ``arr``'s first element, or a usage error."""
        offset = self._allocated_offset(arr)
        if offset is not None:
            return offset
        return self.offset_at(self.backend.address(arr), what)

    def offset_at(self, address, what):
        """The heap offset of this process's ``address`` (of an array's first
        element), or a usage error."""
        offset = address - self.backend.base
        if not 0 <= offset < self.backend.capacity:
            raise ShmemUsageError(
                f"{what}: the array is not on the symmetric heap; allocate it with "
                "shmem.array() or shmem.zeros() (shmem.tensor() or shmem.cupy_array() for "
                "PyTorch and CuPy)")
        if offset < self.reserved:  # the runtime's own area: only the library has views of it
            return offset
        if not self.allocator.owner(offset):
            raise ShmemUsageError(
                f"{what}: the array at heap offset {offset} is not in a live allocation; was "
                "it used after shmem.free()?")
        return offset

    def leave(self, rank):
        """This PE (``rank``) leaves without ``finalize()``: set its departure
        word (``departures``) on every PE of its node, so that their waits for
        it stop. Best effort: a GPU that has failed takes no stores."""
        offset, _size = departures(self._bootstrap.size)
        self.backend.set_word_on_peers(offset + 8 * rank, 1)

    def free(self, arr):
        """Collective. Return ``arr``'s memory to the heap on every PE, once
        every PE's operations issued before the call are complete (OpenSHMEM's
        barrier on entry): nothing still in flight lands in the memory of a
        later allocation."""
        with self._bootstrap.serial():  # (two threads freeing one array: one error)
            offset = self._allocated_offset(arr)
            if offset is None:
                at = self.offset_of(arr, "shmem.free")
                raise ShmemUsageError(
                    f"shmem.free: the array at heap offset {at} is not a live allocation; "
                    "pass the array that shmem.array() returned (not a slice or a peer "
                    "view), and free it once")
            size = self.allocator.live[offset]
            self._complete("shmem.free")
            # (an allgather is a barrier: no PE frees before every PE completed)
            records = self._bootstrap.allgather(json.dumps([offset, size]).encode(),
                                                "shmem.free")
            check_same("shmem.free", [json.loads(record) for record in records],
                       lambda r: f"freed the {r[1]}-byte allocation at heap offset {r[0]}")
            self.allocator.free(offset)
            del self._offsets[id(arr)]
            self.version += 1
