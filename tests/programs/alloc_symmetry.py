"""Allocations land at the same offsets on every PE, are aligned and disjoint,
freed space is reused, and kernels can store into every peer's copy."""

import sys

import numpy as np
from numba import cuda

import numba_shmem as shmem
from numba_shmem import _runtime

SIZES = [(1, np.int8), (7, np.float32), (1000, np.float64), ((3, 5), np.int64),
         (0, np.int32), (1 << 20, np.uint8), (33, np.complex128)]


@cuda.jit
def publish(table, row, values):
    i = cuda.grid(1)
    if i < values.size:
        for pe in range(shmem.n_pes()):
            shmem.peer_array(table, pe)[row, i] = values[i]


@cuda.jit
def send_right(data):
    i = cuda.grid(1)
    if i < data.size:
        right = (shmem.my_pe() + 1) % shmem.n_pes()
        shmem.peer_array(data, right)[i] = shmem.my_pe() * 100000 + i


def offsets_everywhere(heap, arrays, n):
    offsets = np.array([heap.offset_of(a, "test") for a in arrays], dtype=np.int64)
    table = shmem.zeros((n, offsets.size), np.int64)
    publish[1, 64](table, shmem.my_pe(), offsets)
    shmem.barrier_all()
    seen = table.copy_to_host()
    shmem.free(table)
    return offsets, seen


def main():
    shmem.init()
    me, n = shmem.my_pe(), shmem.n_pes()
    heap = _runtime.current().heap
    arrays = [shmem.array(shape, dtype) for shape, dtype in SIZES]
    offsets, seen = offsets_everywhere(heap, arrays, n)
    assert (seen == offsets).all(), f"offsets differ between PEs:\n{seen}"
    assert all(o % 256 == 0 for o in offsets), offsets
    spans = sorted((o, o + max(a.nbytes, 1)) for o, a in zip(offsets, arrays))
    assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:])), spans
    for arr, (shape, dtype) in zip(arrays, SIZES):
        assert arr.dtype == np.dtype(dtype) and arr.shape == np.empty(shape).shape

    # a kernel stores into the right neighbour's copy
    data = arrays[2]
    send_right[4, 256](data)
    shmem.barrier_all()
    left = (me - 1) % n
    expected = left * 100000 + np.arange(data.size)
    assert (data.copy_to_host() == expected).all()
    # the host sees a peer's copy too
    peer = shmem.peer_array(data, (me + 1) % n).copy_to_host()
    assert (peer == me * 100000 + np.arange(data.size)).all()

    # freed space is reused, at the same offset everywhere
    freed = heap.offset_of(arrays[2], "test")
    shmem.free(arrays.pop(2))
    again = shmem.array(1000, np.float64)
    assert heap.offset_of(again, "test") == freed
    for arr in arrays + [again]:
        shmem.free(arr)
    assert heap.allocator.live == {}, heap.allocator.live
    assert heap.allocator.empty
    shmem.finalize()
    sys.stdout.write(f"PE {me}: symmetric ok\n")


if __name__ == "__main__":
    main()
