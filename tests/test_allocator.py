"""The offset allocator against a plain model: aligned, disjoint, reusable."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from numba_shmem import ShmemUsageError
from numba_shmem._heap._allocator import DEFAULT_ALIGN, OffsetAllocator


def test_first_fit_reuses_freed_space():
    heap = OffsetAllocator(1 << 20)
    a, b, c = heap.alloc(100), heap.alloc(5000), heap.alloc(10)
    assert (a, b, c) == (0, 256, 256 + 5120)
    heap.free(b)
    assert heap.alloc(4000) == 256
    assert heap.live == {0: 256, 256: 4096, 256 + 5120: 256}


def test_owner_finds_the_allocation_holding_an_offset():
    heap = OffsetAllocator(1 << 20)
    a, b = heap.alloc(1000), heap.alloc(10)
    assert heap.owner(a) == (a, 1024) and heap.owner(a + 1023) == (a, 1024)
    assert heap.owner(b + 5) == (b, 256)
    assert heap.owner(b + 256) is None
    heap.free(a)
    assert heap.owner(a + 10) is None


def test_a_reserved_start_is_never_handed_out():
    heap = OffsetAllocator(4096, start=512)
    assert heap.alloc(10) == 512 and not heap.empty
    heap.free(512)
    assert heap.empty and heap.free_blocks == [(512, 3584)]


def test_exhaustion_names_sizes_and_fix():
    heap = OffsetAllocator(4096)
    heap.alloc(3000)
    with pytest.raises(ShmemUsageError, match=r"asked for 2000 bytes.*largest free block is "
                                              r"1024 of 4096.*NUMBA_SHMEM_HEAP_SIZE"):
        heap.alloc(2000)


operations = st.lists(
    st.one_of(
        st.tuples(st.just("alloc"), st.integers(0, 70000),
                  st.sampled_from([1, 256, 512, 4096, 65536])),
        st.tuples(st.just("free"), st.integers(0, 1000), st.just(0)),
    ),
    max_size=60,
)


@given(operations)
def test_random_programs_keep_blocks_aligned_disjoint_and_accounted(program):
    capacity = 1 << 20
    heap = OffsetAllocator(capacity)
    model = {}  # offset -> size, the blocks that should be live
    for op, value, align in program:
        if op == "alloc":
            try:
                offset = heap.alloc(value, align)
            except ShmemUsageError:
                continue
            assert offset % align == 0 and offset % DEFAULT_ALIGN == 0
            size = heap.live[offset]
            assert size >= max(value, 1)
            for start, span in model.items():
                assert offset + size <= start or start + span <= offset
            assert offset + size <= capacity
            model[offset] = size
        elif model:
            offset = sorted(model)[value % len(model)]
            heap.free(offset)
            del model[offset]
        assert heap.live == model
        free = sum(span for _start, span in heap.free_blocks)
        assert free + sum(model.values()) == capacity
        blocks = heap.free_blocks
        # coalesced: no two free blocks touch
        assert all(a + s < b for (a, s), (b, _t) in zip(blocks, blocks[1:]))
    for offset in list(model):
        heap.free(offset)
    assert heap.free_blocks == [(0, capacity)]


@given(st.lists(st.integers(1, 50000), max_size=30))
def test_two_pes_with_the_same_program_get_the_same_offsets(sizes):
    first, second = OffsetAllocator(1 << 22), OffsetAllocator(1 << 22)
    for size in sizes:
        try:
            a = first.alloc(size)
        except ShmemUsageError:
            with pytest.raises(ShmemUsageError):
                second.alloc(size)
            continue
        assert second.alloc(size) == a
