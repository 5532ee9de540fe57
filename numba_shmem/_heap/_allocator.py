"""A deterministic first-fit allocator of heap offsets.

Every PE runs the same sequence of allocations and frees through its own copy,
so the same call returns the same offset everywhere: that is what makes the
heap symmetric.
"""

import bisect

from .._errors import ShmemUsageError

#: Default alignment of every allocation, enough for 16-byte vector accesses and
#: the same as cudaMalloc's.
DEFAULT_ALIGN = 256


def _round_up(value, align):
    return -(-value // align) * align


class OffsetAllocator:
    """First-fit over a sorted free list, coalescing on free."""

    def __init__(self, capacity, start=0):
        self.capacity = capacity
        self.start = start
        self._free = [(start, capacity - start)]  # sorted (start, size)
        self.live = {}  # start -> size

    def alloc(self, nbytes, align=DEFAULT_ALIGN):
        """Return the offset of ``nbytes`` free bytes aligned to ``align``."""
        size = _round_up(max(nbytes, 1), DEFAULT_ALIGN)
        for index, (start, span) in enumerate(self._free):
            offset = _round_up(start, align)
            if offset + size > start + span:
                continue
            del self._free[index]
            if offset > start:
                self._insert(start, offset - start)
            if start + span > offset + size:
                self._insert(offset + size, start + span - offset - size)
            self.live[offset] = size
            return offset
        largest = max((span for _start, span in self._free), default=0)
        raise ShmemUsageError(
            f"symmetric heap exhausted: asked for {nbytes} bytes (aligned to {align}), "
            f"the largest free block is {largest} of {self.capacity} bytes; free "
            "arrays with shmem.free() or raise NUMBA_SHMEM_HEAP_SIZE")

    def owner(self, offset):
        """The (start, size) of the live allocation holding ``offset``, or None."""
        starts = sorted(self.live)
        index = bisect.bisect_right(starts, offset) - 1
        if index >= 0 and offset < starts[index] + self.live[starts[index]]:
            return starts[index], self.live[starts[index]]
        return None

    def free(self, offset):
        size = self.live.pop(offset)
        self._insert(offset, size)

    def _insert(self, start, size):
        index = bisect.bisect(self._free, (start, size))
        self._free.insert(index, (start, size))
        # coalesce with the right neighbour, then with the left
        if index + 1 < len(self._free):
            nxt_start, nxt_size = self._free[index + 1]
            if start + size == nxt_start:
                self._free[index] = (start, size + nxt_size)
                del self._free[index + 1]
        if index > 0:
            prev_start, prev_size = self._free[index - 1]
            start, size = self._free[index]
            if prev_start + prev_size == start:
                self._free[index - 1] = (prev_start, prev_size + size)
                del self._free[index]

    @property
    def free_blocks(self):
        return list(self._free)

    @property
    def empty(self):
        """Whether nothing is allocated (and the free space is whole again)."""
        return self._free == [(self.start, self.capacity - self.start)]
