"""One PE of the collectives benchmark (run by benchmarks/collectives.py).

Prints one JSON line from PE 0: barrier_all latency, a bare PTX ping-pong
(PEs 0 and 1) for reference, the host collectives' time against a local
device-to-device copy (cuMemcpyDtoD) of the bytes each PE moves, the block
collectives' time per call inside a kernel, and the fused
AllGather + GEMM against the same work unfused (fcollect, then the same tiled
multiplication).
"""

import json
import os
import sys

import numpy as np
from numba import cuda

import numba_shmem as shmem
from _timing import gpu_time, timed_calls
from numba_shmem._cuda._primitives import _now
from rma_pe import WARMUP, ping_pong_bare  # the same bare PTX ping-pong as the RMA benchmark

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "samples"))
from allgather_gemm import SLICES, THREADS, TILE, allgather_gemm, multiply_shard  # noqa: E402

BARRIERS = 10000
COLLECTIVE_REPS = 20
GEMM_REPS = 10
FUSED_REGISTER_CAPS = (64, 40, 32)


@cuda.jit
def barriers(stamps, rounds):
    if cuda.grid(1) == 0:
        for r in range(rounds):
            if r == WARMUP:
                stamps[0] = _now()
            shmem.barrier_all()
        stamps[1] = _now()


#: the collectives timed inside one kernel, at each scope (the threads that
#: call: a block of 256, a warp, one thread), and the float64 elements each PE
#: contributes (8 B, 4 KiB, 64 KiB); benchmarks/nvshmem/coll_block.cu does the
#: same with NVSHMEM's
BLOCK_COLLECTIVES = ("fcollect", "alltoall", "broadcast", "sum_reduce")
SCOPES = {"_block": 256, "_warp": 32, "": 1}
BLOCK_ELEMENTS = (1, 512, 8192)
BLOCK_ROUNDS = 1000


def _timed(collective):
    @cuda.jit
    def kernel(dest, source, nelems, rounds, stamps):
        # one block per PE; the rounds after WARMUP are timed
        for r in range(rounds):
            if r == WARMUP and cuda.threadIdx.x == 0:
                stamps[0] = _now()
            collective(dest, source, nelems)
        if cuda.threadIdx.x == 0:
            stamps[1] = _now()
    return kernel


def _collective(kind, scope):
    function = getattr(shmem, kind + scope)
    if kind == "broadcast":
        @cuda.jit(device=True)
        def collective(dest, source, nelems):
            function(shmem.TEAM_WORLD, dest, source, nelems, 0)
    else:
        @cuda.jit(device=True)
        def collective(dest, source, nelems):
            function(shmem.TEAM_WORLD, dest, source, nelems)
    return collective


#: (kind, scope) -> its timing kernel
SCOPED_KERNELS = {(kind, scope): _timed(_collective(kind, scope))
                  for kind in BLOCK_COLLECTIVES for scope in SCOPES}


@cuda.jit
def zero(signals):
    for i in range(cuda.threadIdx.x, signals.size, cuda.blockDim.x):
        signals[i] = 0


@cuda.jit
def gemm(gathered, b, c, m, shards):
    # the fused kernel's multiplication, on the whole gathered A at once
    for s in range(shards):
        multiply_shard(gathered, s * m, m, b, c, s * m, cuda.blockIdx.x, cuda.gridDim.x)


def main():
    max_bytes = int(sys.argv[1])
    shmem.init()
    if shmem._runtime.current().backend != "cuda":
        raise SystemExit("benchmarks/collectives.py measures the GPU; it does not run on the simulator")
    me, npes = shmem.my_pe(), shmem.n_pes()
    name = cuda.get_current_device().name
    results = {"npes": npes, "device": name.decode() if isinstance(name, bytes) else str(name)}
    results["gpus"] = len(set(shmem._runtime.current().pe_gpus))
    stamps = cuda.device_array(2, np.int64)
    for _ in range(2):  # the first run compiles
        shmem.barrier_all()
        shmem.collective_launch(barriers, 1, 32, stamps, BARRIERS)
        cuda.synchronize()
    t0, t1 = stamps.copy_to_host()
    results["barrier_all_us"] = (t1 - t0) / 1e3 / (BARRIERS - WARMUP)
    if npes >= 2:
        for _ in range(2):
            sig = shmem.zeros(1, np.uint64)
            shmem.barrier_all()
            ping_pong_bare[1, 1](sig, 20000, stamps)
            cuda.synchronize()
            shmem.barrier_all()
            shmem.free(sig)
        t0, t1 = stamps.copy_to_host()
        if me == 0:
            results["bare_ping_pong_us"] = (t1 - t0) / 1e3 / (20000 - WARMUP)
    rows = []
    size = 4096
    while size <= max_bytes:
        n = size // 4  # float32 elements per PE
        source = shmem.zeros(n * npes, np.float32)
        dest = shmem.zeros(n * npes, np.float32)
        local = cuda.device_array(n * npes, np.float32)
        row = {"bytes": size}
        for name, call in (
                ("fcollect", lambda: shmem.fcollect(shmem.TEAM_WORLD, dest, source, n)),
                ("alltoall", lambda: shmem.alltoall(shmem.TEAM_WORLD, dest, source, n)),
                ("sum_reduce", lambda: shmem.sum_reduce(shmem.TEAM_WORLD, dest, source, n))):
            shmem.barrier_all()
            # the GPU's time (bandwidth), and the host's time per call (latency)
            row[f"{name}_s"] = gpu_time(call, COLLECTIVE_REPS, shmem.sync_all)
            shmem.barrier_all()
            row[f"{name}_host_s"] = timed_calls(call, COLLECTIVE_REPS)
        # the hardware's own copy of the bytes each PE moves (npes parts)
        row["local_copy_s"] = gpu_time(lambda: local.copy_to_device(source), COLLECTIVE_REPS)
        rows.append(row)
        shmem.barrier_all()
        for arr in (dest, source):
            shmem.free(arr)
        size *= 4
    results["collectives"] = rows
    results["collective_reps"] = COLLECTIVE_REPS
    # collectives inside a kernel at each scope: us per call, the kernel's own clock
    results["block_collectives"] = []
    for nelems in BLOCK_ELEMENTS:
        source = shmem.zeros(nelems * npes, np.float64)
        dest = shmem.zeros(nelems * npes, np.float64)
        row = {"bytes": nelems * 8}
        for (kind, scope), kernel in SCOPED_KERNELS.items():
            for _ in range(2):  # the first run compiles
                shmem.barrier_all()
                shmem.collective_launch(kernel, 1, SCOPES[scope], dest, source, nelems,
                                        BLOCK_ROUNDS, stamps)
                cuda.synchronize()
            t0, t1 = stamps.copy_to_host()
            row[f"{kind}{scope}_us"] = (t1 - t0) / 1e3 / (BLOCK_ROUNDS - WARMUP)
        results["block_collectives"].append(row)
        shmem.barrier_all()
        for arr in (dest, source):
            shmem.free(arr)
    results["block_rounds"] = BLOCK_ROUNDS - WARMUP
    # fused AllGather + GEMM against fcollect, then GEMM
    m, k, n = 1024, 1024, 1024
    gathered = shmem.zeros(npes * m * k, np.float32)
    ready = shmem.zeros(npes, np.uint64)
    a_shard = cuda.to_device(np.random.default_rng(me).random(m * k, np.float32))
    b = cuda.to_device(np.random.default_rng(99).random((k, n), np.float32))
    c = cuda.device_array((npes * m, n), np.float32)

    # register caps for the fused kernel: fewer registers, more co-resident blocks
    fused_kernels = {"uncapped": allgather_gemm}
    for cap in FUSED_REGISTER_CAPS:
        fused_kernels[str(cap)] = cuda.jit(max_registers=cap)(allgather_gemm.py_func)

    def fused(kernel):
        def call():
            # each call starts from zeroed signals on every PE
            zero[1, 32](ready)
            shmem.barrier_all_on_stream()
            shmem.collective_launch(kernel, 0, THREADS, gathered, a_shard, ready, b, c, m,
                                    SLICES)
        return call

    def unfused():
        shmem.fcollect(shmem.TEAM_WORLD, gathered, a_shard, m * k)
        gemm[(m // TILE) * (n // TILE), THREADS](gathered, b, c, m, npes)

    results["fused_s"] = {cap: gpu_time(fused(kernel), GEMM_REPS, shmem.sync_all)
                          for cap, kernel in fused_kernels.items()}
    results["unfused_s"] = gpu_time(unfused, GEMM_REPS, shmem.sync_all)
    results["gemm_shape"] = [npes * m, k, n]
    results["gemm_reps"] = GEMM_REPS
    results["registers"] = {  # per thread: what limits how many blocks share an SM
        "fused": {cap: kernel.specialize(gathered, a_shard, ready, b, c, m,
                                         SLICES).get_regs_per_thread()
                  for cap, kernel in fused_kernels.items()},
        "unfused": gemm.specialize(gathered, b, c, m, npes).get_regs_per_thread()}
    shmem.barrier_all()
    if me == 0:
        sys.stdout.write(json.dumps(results) + "\n")
    shmem.finalize()


if __name__ == "__main__":
    main()
