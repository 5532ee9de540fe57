"""Fused AllGather + GEMM.

Each PE holds a row shard of A (m x k) and a column shard of B (k x n); every
PE computes C = [A_0; A_1; ...] @ B_local. In one kernel, launched with
collective_launch, the first SLICES blocks put this PE's shard of A to every
other PE, a slice each, and add 1 to that shard's signal there with each slice
(put_signal_block with SIGNAL_ADD); the other blocks multiply the PE's own shard
straight away, then each other shard as soon as its signal reaches SLICES. The
result is checked against numpy.

    shmem-run -n 4 samples/allgather_gemm.py [--m 64] [--k 128] [--n 64]
"""

import argparse
import os
import sys

os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")

import numba_shmem as shmem  # noqa: E402
import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402


def shard_of(pe, m, k):
    return (np.arange(m * k, dtype=np.float32).reshape(m, k) % 7 - 3 + pe) / 4


def b_local_of(pe, k, n):
    return (np.arange(k * n, dtype=np.float32).reshape(k, n) % 5 - 2 + pe) / 8


TILE = 16
THREADS = TILE * TILE  # the block size both kernels need
SLICES = 8  # pieces each shard travels in, one block each


@cuda.jit(device=True)
def multiply_shard(a, a_row0, m, b, c, c_row0, first_tile, tile_step):
    """C[c_row0:c_row0 + m] = a[a_row0:a_row0 + m] @ b (``a`` holds rows of
    length k, flat), in 16 x 16 tiles through shared memory; this block takes
    tiles ``first_tile``, ``first_tile + tile_step``, ..."""
    k = b.shape[0]
    n = b.shape[1]
    tile_a = cuda.shared.array((TILE, TILE), np.float32)
    tile_b = cuda.shared.array((TILE, TILE), np.float32)
    ty = cuda.threadIdx.x // TILE
    tx = cuda.threadIdx.x % TILE
    across = (n + TILE - 1) // TILE
    tiles = (m + TILE - 1) // TILE * across
    for t in range(first_tile, tiles, tile_step):
        row = t // across * TILE + ty
        col = t % across * TILE + tx
        acc = np.float32(0)
        for x0 in range(0, k, TILE):
            tile_a[ty, tx] = a[(a_row0 + row) * k + x0 + tx] \
                if row < m and x0 + tx < k else np.float32(0)
            tile_b[ty, tx] = b[x0 + ty, col] if x0 + ty < k and col < n else np.float32(0)
            cuda.syncthreads()
            for x in range(TILE):
                acc += tile_a[ty, x] * tile_b[x, tx]
            cuda.syncthreads()
        if row < m and col < n:
            c[c_row0 + row, col] = acc


@cuda.jit
def allgather_gemm(gathered, a_shard, ready, b, c, m, slices):
    """Launch with collective_launch and THREADS threads per block. Shard ``s``
    is complete in ``gathered`` once ``ready[s]`` reaches ``slices``; this PE's
    own part of ``gathered`` is not written (its shard is read from ``a_shard``)."""
    me = shmem.my_pe()
    npes = shmem.n_pes()
    shard = m * b.shape[0]
    senders = min(slices, cuda.gridDim.x)
    # communication: on a grid no larger than `slices`, every block sends, then computes
    if cuda.blockIdx.x < senders:
        per = ((shard + slices - 1) // slices + 3) // 4 * 4  # whole 16-byte vectors
        for piece in range(cuda.blockIdx.x, slices, senders):
            lo = min(shard, piece * per)
            hi = min(shard, lo + per)
            for j in range(1, npes):
                pe = (me + j) % npes
                if lo < hi:
                    shmem.put_signal_block(gathered[me * shard + lo:me * shard + hi],
                                           a_shard[lo:hi], ready[me:me + 1], 1,
                                           shmem.SIGNAL_ADD, pe)
                elif cuda.threadIdx.x == 0:  # an empty slice still counts
                    shmem.signal_op(ready[me:me + 1], 1, shmem.SIGNAL_ADD, pe)
        if cuda.gridDim.x > senders:
            return
        worker, workers = cuda.blockIdx.x, cuda.gridDim.x
    else:
        worker, workers = cuda.blockIdx.x - senders, cuda.gridDim.x - senders
    # computation: the own shard first, then each other one once it is complete
    multiply_shard(a_shard, 0, m, b, c, me * m, worker, workers)
    for j in range(1, npes):
        s = (me + j) % npes
        if cuda.threadIdx.x == 0:
            shmem.signal_wait_until(ready[s:s + 1], shmem.CMP_EQ, slices)
        cuda.syncthreads()
        multiply_shard(gathered, s * m, m, b, c, s * m, worker, workers)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=64)
    parser.add_argument("--k", type=int, default=128)
    parser.add_argument("--n", type=int, default=64)
    args = parser.parse_args()
    m, k, n = args.m, args.k, args.n
    shmem.init()
    me, npes = shmem.my_pe(), shmem.n_pes()
    gathered = shmem.zeros(npes * m * k, np.float32)
    ready = shmem.zeros(npes, np.uint64)
    a_shard = cuda.to_device(shard_of(me, m, k).reshape(-1))
    b = cuda.to_device(b_local_of(me, k, n))
    c = cuda.device_array((npes * m, n), np.float32)
    shmem.barrier_all()
    shmem.collective_launch(allgather_gemm, 0, THREADS, gathered, a_shard, ready, b, c, m,
                            SLICES)
    cuda.synchronize()
    reference = np.concatenate([shard_of(pe, m, k) for pe in range(npes)]) @ b_local_of(me, k, n)
    error = float(np.abs(c.copy_to_host() - reference).max())
    ok = error <= 1e-3 * max(1.0, float(np.abs(reference).max()))
    sys.stdout.write(f"PE {me}: C is {npes * m}x{n}, largest difference from numpy {error:.2e}"
                     f" ({'ok' if ok else 'WRONG'})\n")
    shmem.barrier_all()
    shmem.finalize()
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
