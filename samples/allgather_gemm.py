"""Fused AllGather + GEMM.

Each PE holds a row shard of A (m x k) and a column shard of B (k x n); every
PE computes C = [A_0; A_1; ...] @ B_local. In one kernel, launched with
collective_launch, block 0 puts this PE's shard of A to every PE and raises that
shard's signal there (put_signal_block); the other blocks multiply each shard
as soon as its signal has arrived, starting with the PE's own. The result is
checked against numpy.

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


@cuda.jit
def allgather_gemm(gathered, a_shard, ready, b, c, m):
    me = shmem.my_pe()
    npes = shmem.n_pes()
    k = b.shape[0]
    n = b.shape[1]
    workers = cuda.gridDim.x - 1
    # communication: block 0 (on a one-block grid it communicates, then computes)
    if cuda.blockIdx.x == 0:
        for j in range(npes):
            pe = (me + j) % npes
            shmem.put_signal_block(gathered[me * m * k:(me + 1) * m * k], a_shard,
                                   ready[me:me + 1], 1, shmem.SIGNAL_SET, pe)
        if workers > 0:
            return
        workers = 1
    worker = cuda.blockIdx.x - 1 if cuda.gridDim.x > 1 else 0
    # computation: shard by shard, own shard first, each once its signal is in
    for j in range(npes):
        s = (me + j) % npes
        if cuda.threadIdx.x == 0:
            shmem.signal_wait_until(ready[s:s + 1], shmem.CMP_EQ, 1)
        cuda.syncthreads()
        for e in range(worker * cuda.blockDim.x + cuda.threadIdx.x, m * n,
                       workers * cuda.blockDim.x):
            row = e // n
            col = e % n
            acc = np.float32(0)
            for x in range(k):
                acc += gathered[(s * m + row) * k + x] * b[x, col]
            c[s * m + row, col] = acc


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
    shmem.collective_launch(allgather_gemm, 0, 128, gathered, a_shard, ready, b, c, m)
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
