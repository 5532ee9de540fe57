"""AllGather + matmul, overlapped on streams: the copy engine moves the shards
while cuBLAS multiplies the ones that are there.

Each PE holds a row shard A_i (m x k) of A and its own B (k x n); every PE
computes C = [A_0; A_1; ...] @ B. Fused: on a communication stream, each PE
puts its shard to every other PE in ``--chunks`` pieces with
``put_signal(stream=)`` (the copy engine, a signal after each piece); on the
compute stream it multiplies its own shard at once, then each other PE's
pieces as ``signal_wait_until(stream=)`` lets them through, one matmul per
piece. Unfused: ``fcollect`` on the stream, then one matmul of all of A. Both
end each step with ``barrier(TEAM_WORLD, stream=)`` (the next step overwrites
the shards); a signal is set to 1 and reset to 0 once waited for, so a step
can be captured into a CUDA graph and replayed. Checked against numpy; with
``--time``, PE 0 prints one JSON line with both times (enqueued step by step,
and replayed from a graph), the time of the fcollect alone (its share of the
unfused step) and, where every PE has a GPU of its own, NCCL's all-gather +
the same matmul.

    shmem-run -n 2 samples/allgather_matmul.py [--m 256 --k 256 --n 128 --chunks 2] [--time]
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numba_shmem as shmem  # noqa: E402  (first: without a GPU it picks the simulator)
import numpy as np  # noqa: E402
from _overlap import Library, time_paths  # noqa: E402


def shard_of(pe, m, k):
    return ((np.arange(m * k).reshape(m, k) * 7 + pe * 3) % 11 - 5).astype(np.float16) / 8


def b_of(pe, k, n):
    return ((np.arange(k * n).reshape(k, n) * 5 + pe) % 9 - 4).astype(np.float16) / 8


class AllGatherMatmul:
    def __init__(self, lib, m, k, n, chunks):
        if m % chunks:
            raise SystemExit(f"--m {m} must be a multiple of --chunks {chunks}")
        self.lib, self.m, self.k, self.n, self.chunks = lib, m, k, n, chunks
        self.me, self.npes = shmem.my_pe(), shmem.n_pes()
        me, npes = self.me, self.npes
        # A as uint16 on the heap (the library moves bytes), float16 for the math
        self.gathered = shmem.zeros((npes * m, k), np.uint16)
        self.signals = shmem.zeros(npes * chunks, np.uint64)
        rows = m // chunks
        # views made once: every call below reuses them (no slicing per step)
        self.pieces = [self.gathered[p * m + c * rows:p * m + (c + 1) * rows]
                       for p in range(npes) for c in range(chunks)]
        self.piece_signals = [self.signals[i:i + 1] for i in range(npes * chunks)]
        self.a = lib.view(self.gathered).view(lib.dtype("float16"))
        self.a[me * m:(me + 1) * m] = lib.asarray(shard_of(me, m, k))
        # fcollect's source (its dest may not hold it): the shard again, on the device
        self.shard = lib.asarray(shard_of(me, m, k).view(np.uint16))
        self.b = lib.asarray(b_of(me, k, n))
        self.c = lib.empty((npes * m, n), "float16")
        self.compute, self.comm = lib.stream(), lib.stream()
        lib.synchronize()
        shmem.barrier_all()

    def fused(self, _r=0):
        lib, m, chunks, me, npes = self.lib, self.m, self.chunks, self.me, self.npes
        rows = m // chunks
        lib.after(self.comm, self.compute)  # the previous step is done everywhere
        for j in range(1, npes):  # this PE's shard to every other PE, piece by piece
            peer = (me + j) % npes
            for c in range(chunks):
                piece = me * chunks + c
                shmem.put_signal(self.pieces[piece], self.pieces[piece], self.piece_signals[piece],
                                 1, shmem.SIGNAL_SET, peer, stream=self.comm)
        own = slice(me * m, (me + 1) * m)
        lib.matmul(self.a[own], self.b, self.c[own], self.compute)  # own shard first
        for j in range(1, npes):
            source = (me - j) % npes  # the order the others send in
            for c in range(chunks):
                piece = source * chunks + c
                signal = self.piece_signals[piece]
                shmem.signal_wait_until(signal, shmem.CMP_EQ, 1, stream=self.compute)
                shmem.signal_op(signal, 0, shmem.SIGNAL_SET, me, stream=self.compute)  # for next
                part = slice(source * m + c * rows, source * m + (c + 1) * rows)
                lib.matmul(self.a[part], self.b, self.c[part], self.compute)
        lib.after(self.compute, self.comm)  # (a graph capture needs the streams joined)
        shmem.barrier(shmem.TEAM_WORLD, stream=self.compute)

    def gather(self, _r=0):
        """The unfused step's communication alone."""
        m, k = self.m, self.k
        shmem.fcollect(shmem.TEAM_WORLD, self.gathered, self.shard, m * k, stream=self.compute)

    def unfused(self, _r=0):
        self.gather()
        self.lib.matmul(self.a, self.b, self.c, self.compute)
        shmem.barrier(shmem.TEAM_WORLD, stream=self.compute)

    def check(self, what):
        self.lib.synchronize()
        shmem.barrier_all()
        a = np.concatenate([shard_of(pe, self.m, self.k) for pe in range(self.npes)])
        reference = a.astype(np.float32) @ b_of(self.me, self.k, self.n).astype(np.float32)
        got = self.lib.host(self.c).astype(np.float32)
        error = float(np.abs(got - reference).max())
        ok = error <= 2e-2 * max(1.0, float(np.abs(reference).max()))
        sys.stdout.write(f"PE {self.me}: {what}: C is {got.shape[0]}x{got.shape[1]}, largest "
                         f"difference from numpy {error:.2e} ({'ok' if ok else 'WRONG'})\n")
        sys.stdout.flush()
        self.c[...] = 0  # the next path starts from nothing but this PE's own shard
        own = self.lib.copy(self.a[self.me * self.m:(self.me + 1) * self.m])
        self.a[...] = 0
        self.a[self.me * self.m:(self.me + 1) * self.m] = own
        self.lib.synchronize()
        shmem.barrier_all()
        return ok


def nccl_ms(lib, job, reps):
    """NCCL's all-gather (through CuPy), then the same matmul (every PE on a GPU of
    its own)."""
    from cupy.cuda import nccl

    runtime = shmem._runtime.current()
    uid = nccl.get_unique_id() if job.me == 0 else None
    uid = json.loads(runtime.bootstrap.allgather(json.dumps(uid).encode(), "NCCL id")[0])
    comm = nccl.NcclCommunicator(job.npes, tuple(uid), job.me)
    flat = lib.view(job.gathered)
    mine = lib.copy(flat[job.me * job.m:(job.me + 1) * job.m])

    def step(_r):
        comm.allGather(lib.pointer(mine), lib.pointer(flat), job.m * job.k, nccl.NCCL_UINT16,
                       lib.stream_handle(job.compute))
        lib.matmul(job.a, job.b, job.c, job.compute)
    return lib.time_ms(step, job.compute, reps, between=shmem.barrier_all)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=64, help="rows of each PE's shard of A")
    parser.add_argument("--k", type=int, default=64)
    parser.add_argument("--n", type=int, default=32)
    parser.add_argument("--chunks", type=int, default=2, help="pieces each shard travels in")
    parser.add_argument("--time", action="store_true", help="time both paths (GPU)")
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    shmem.init()
    lib = Library(shmem._runtime.current().backend)
    job = AllGatherMatmul(lib, args.m, args.k, args.n, args.chunks)
    job.fused()
    ok = job.check("fused")
    job.unfused()
    ok = job.check("unfused") and ok
    if args.time and lib.gpu and ok:
        times, right = time_paths(lib, job.compute, {"fused": job.fused, "unfused": job.unfused,
                                                     "fcollect": job.gather},
                                  args.reps, shmem.barrier_all, job.check)
        ok = ok and right
        gpus = len(set(shmem._runtime.current().pe_gpus))
        if gpus == job.npes:
            times["nccl"] = nccl_ms(lib, job, args.reps)
        if job.me == 0:
            sys.stdout.write("JSON " + json.dumps({
                "sample": "allgather_matmul", "npes": job.npes, "gpus": gpus,
                "shape": [job.npes * args.m, args.k, args.n], "chunks": args.chunks,
                "reps": args.reps, "ms": times}) + "\n")
    shmem.finalize()
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
