"""matmul + ReduceScatter, overlapped on streams: each block of partial products
leaves on the copy engine while cuBLAS computes the next one.

Each PE holds a column shard A_i (M x k) of A and the matching row shard B_i
(k x n) of B; C = sum_i A_i @ B_i, and PE j ends with row block j of C (M /
n_pes rows). Fused: on the compute stream each PE multiplies the row block of
every other PE first (in the order they are sent), and after each one the
communication stream (waiting on an event) puts that partial block to its PE
with ``put_signal(stream=)``; its own block comes last, straight into place;
then, as ``signal_wait_until(stream=)`` lets each other PE's block through,
it is added in. Unfused: the whole matmul, then ``sum_reducescatter``. Both
end each step with ``barrier(TEAM_WORLD, stream=)``; signals are set to 1 and
reset once waited for, so a step can be captured into a CUDA graph. Checked
against numpy; ``--time`` prints PE 0's JSON line as ``allgather_matmul.py``
does.

    shmem-run -n 2 samples/matmul_reducescatter.py [--m 256 --k 256 --n 128] [--time]
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numba_shmem as shmem  # noqa: E402  (first: without a GPU it picks the simulator)
import numpy as np  # noqa: E402
from _overlap import Library, time_paths  # noqa: E402


def a_of(pe, m, k):
    return ((np.arange(m * k).reshape(m, k) * 3 + pe * 5) % 13 - 6).astype(np.float32) / 16


def b_of(pe, k, n):
    return ((np.arange(k * n).reshape(k, n) * 7 + pe) % 9 - 4).astype(np.float32) / 16


class MatmulReduceScatter:
    def __init__(self, lib, m, k, n):
        self.me, self.npes = shmem.my_pe(), shmem.n_pes()
        if m % self.npes:
            raise SystemExit(f"--m {m} must be a multiple of the number of PEs")
        self.lib, self.m, self.k, self.n = lib, m, k, n
        me, npes = self.me, self.npes
        rows = self.rows = m // npes
        self.a = lib.asarray(a_of(me, m, k))
        self.b = lib.asarray(b_of(me, k, n))
        # fused: slot i of ``received`` holds PE i's partial block for this PE
        self.received = shmem.zeros((npes, rows, n), np.float32)
        self.slots = [self.received[i] for i in range(npes)]
        self.slot_views = [lib.view(slot) for slot in self.slots]
        self.signals = shmem.zeros(npes, np.uint64)
        self.slot_signals = [self.signals[i:i + 1] for i in range(npes)]
        self.partials = [lib.empty((rows, n), "float32") for _ in range(npes)]  # one per peer
        self.out = lib.empty((rows, n), "float32")
        # unfused: the whole partial product on the heap, reduce-scattered into ``out``
        self.product = shmem.zeros((m, n), np.float32)
        self.product_view = lib.view(self.product)
        self.reduced = shmem.zeros((rows, n), np.float32)
        self.reduced_view = lib.view(self.reduced)
        self.compute, self.comm = lib.stream(), lib.stream()
        lib.synchronize()
        shmem.barrier_all()

    def fused(self, _r=0):
        lib, rows, me, npes = self.lib, self.rows, self.me, self.npes
        for j in range(1, npes):  # the other PEs' blocks first, each sent when done
            peer = (me + j) % npes
            lib.matmul(self.a[peer * rows:(peer + 1) * rows], self.b, self.partials[peer],
                       self.compute)
            lib.after(self.comm, self.compute)
            shmem.put_signal(self.slots[me], self.partials[peer], self.slot_signals[me], 1,
                             shmem.SIGNAL_SET, peer, stream=self.comm)
        lib.matmul(self.a[me * rows:(me + 1) * rows], self.b, self.out, self.compute)
        for j in range(1, npes):
            source = (me - j) % npes  # the order the others send in
            signal = self.slot_signals[source]
            shmem.signal_wait_until(signal, shmem.CMP_EQ, 1, stream=self.compute)
            shmem.signal_op(signal, 0, shmem.SIGNAL_SET, me, stream=self.compute)  # for next
            lib.add(self.out, self.slot_views[source], self.out, self.compute)
        lib.after(self.compute, self.comm)  # (a graph capture needs the streams joined)
        shmem.barrier(shmem.TEAM_WORLD, stream=self.compute)

    def multiply(self, _r=0):
        self.lib.matmul(self.a, self.b, self.product_view, self.compute)

    def scatter(self, _r=0):
        """The unfused step's communication alone."""
        shmem.sum_reducescatter(shmem.TEAM_WORLD, self.reduced, self.product,
                                self.rows * self.n, stream=self.compute)

    def unfused(self, _r=0):
        self.multiply()
        self.scatter()
        shmem.barrier(shmem.TEAM_WORLD, stream=self.compute)

    def check(self, what, result):
        self.lib.synchronize()
        shmem.barrier_all()
        me, rows = self.me, self.rows
        total = sum(a_of(pe, self.m, self.k) @ b_of(pe, self.k, self.n)
                    for pe in range(self.npes))
        reference = total[me * rows:(me + 1) * rows]
        got = self.lib.host(result)
        error = float(np.abs(got - reference).max())
        ok = error <= 1e-2 * max(1.0, float(np.abs(reference).max()))
        sys.stdout.write(f"PE {me}: {what}: block {me} of C is {rows}x{self.n}, largest "
                         f"difference from numpy {error:.2e} ({'ok' if ok else 'WRONG'})\n")
        sys.stdout.flush()
        result[...] = 0
        self.lib.synchronize()
        shmem.barrier_all()
        return ok


def nccl_ms(lib, job, reps):
    """The same matmul, then NCCL's reduce-scatter (through CuPy; every PE on a GPU
    of its own)."""
    from cupy.cuda import nccl

    runtime = shmem._runtime.current()
    uid = nccl.get_unique_id() if job.me == 0 else None
    uid = json.loads(runtime.bootstrap.allgather(json.dumps(uid).encode(), "NCCL id")[0])
    comm = nccl.NcclCommunicator(job.npes, tuple(uid), job.me)

    def step(_r):
        job.multiply()
        comm.reduceScatter(lib.pointer(job.product_view), lib.pointer(job.reduced_view),
                           job.rows * job.n, nccl.NCCL_FLOAT32, nccl.NCCL_SUM,
                           lib.stream_handle(job.compute))
    return lib.time_ms(step, job.compute, reps, between=shmem.barrier_all)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=64, help="rows of C (a multiple of the PEs)")
    parser.add_argument("--k", type=int, default=64, help="columns of each PE's shard of A")
    parser.add_argument("--n", type=int, default=32)
    parser.add_argument("--time", action="store_true", help="time both paths (GPU)")
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    shmem.init()
    lib = Library(shmem._runtime.current().backend)
    job = MatmulReduceScatter(lib, args.m, args.k, args.n)
    job.fused()
    ok = job.check("fused", job.out)
    job.unfused()
    ok = job.check("unfused", job.reduced_view) and ok
    if args.time and lib.gpu and ok:
        times, right = time_paths(
            lib, job.compute, {"fused": job.fused, "unfused": job.unfused,
                               "reducescatter": job.scatter},
            args.reps, shmem.barrier_all,
            lambda what: job.check(what, job.out if what.startswith("fused") else
                                   job.reduced_view))
        ok = ok and right
        gpus = len(set(shmem._runtime.current().pe_gpus))
        if gpus == job.npes:
            times["nccl"] = nccl_ms(lib, job, args.reps)
        if job.me == 0:
            sys.stdout.write("JSON " + json.dumps({
                "sample": "matmul_reducescatter", "npes": job.npes, "gpus": gpus,
                "shape": [args.m, job.npes * args.k, args.n], "reps": args.reps,
                "ms": times}) + "\n")
    shmem.finalize()
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
