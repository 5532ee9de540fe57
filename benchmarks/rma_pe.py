"""One PE of the RMA benchmark (run by benchmarks/rma.py through shmem-run -n 2,
or with ``--span-nodes`` as 4 PEs in two emulated nodes under mpiexec).

PE 0 measures; PE 1 is the target (and the partner of the ping-pongs); PEs 2
and 3, where there are, only join the collective calls. Prints one JSON line
from PE 0.
"""

import json
import sys
import time

import numpy as np
from numba import cuda

import numba_shmem as shmem
from _bare import store_release, store_relaxed
from _timing import gpu_time, timed
from numba_shmem._cuda._primitives import (_addr, _load_acquire, _load_relaxed, _now, _remote,
                                           _store_relaxed)


# Each kernel repeats its copy `reps` times inside one launch, so that launch
# overhead does not count; every block (warp, thread) copies its own contiguous
# chunk.

BLOCK, WARP, THREAD = range(3)


def _chunked(transfer, unit, then_quiet=False):
    """A kernel in which every ``unit`` (BLOCK, WARP or THREAD) moves its own
    chunk with ``transfer`` (put_block, get_block, ...) ``reps`` times."""
    @cuda.jit
    def kernel(dest, source, chunk, pe, reps):
        if unit == BLOCK:
            index = cuda.blockIdx.x
        elif unit == WARP:
            index = cuda.grid(1) // 32
        else:
            index = cuda.grid(1)
        start = index * chunk
        end = min(start + chunk, min(dest.size, source.size))
        if start < end:
            for _ in range(reps):
                transfer(dest[start:end], source[start:end], pe)
        if then_quiet:
            shmem.quiet()
    return kernel


put_blocks = _chunked(shmem.put_block, BLOCK)
put_blocks_nbi = _chunked(shmem.put_nbi_block, BLOCK, then_quiet=True)
put_warps = _chunked(shmem.put_warp, WARP)
put_threads = _chunked(shmem.put, THREAD)
get_blocks = _chunked(shmem.get_block, BLOCK)


@cuda.jit
def local_copy(dest, source, chunk, reps):
    # the same shape of kernel into local memory: the baseline
    start = cuda.blockIdx.x * chunk
    end = min(start + chunk, source.size)
    for _ in range(reps):
        for i in range(start + cuda.threadIdx.x, end, cuda.blockDim.x):
            dest[i] = source[i]
        cuda.syncthreads()


# The best copy kernel we can write for the same grid, in CUDA C through
# NVRTC (CuPy): each block copies its chunk of float64s as 16-byte vectors (an
# 8-byte element first where the chunk starts off 16-byte alignment, one after
# them where it ends off it). A reference for put_block, not part of the library.
_NVRTC_COPY = r"""
extern "C" __global__ void copy_chunks(unsigned long long dst, unsigned long long src,
                                       long long count, long long chunk, int reps) {
    long long start = (long long)blockIdx.x * chunk;
    long long end = start + chunk < count ? start + chunk : count;
    if (start >= end) return;
    double *d = (double *)dst + start;
    const double *s = (const double *)src + start;
    long long n = end - start;
    long long head = ((unsigned long long)d & 15) ? 1 : 0;
    long long vectors = (n - head) / 2;
    int4 *dv = (int4 *)(d + head);
    const int4 *sv = (const int4 *)(s + head);
    for (int r = 0; r < reps; r++) {
        if (threadIdx.x == 0 && head) d[0] = s[0];
        for (long long i = threadIdx.x; i < vectors; i += blockDim.x) dv[i] = sv[i];
        if (threadIdx.x == 0 && head + 2 * vectors < n) d[n - 1] = s[n - 1];
        __syncthreads();
    }
}
"""


def nvrtc_copy():
    """A launcher of the NVRTC copy kernel on numba's default stream, or None
    without CuPy."""
    try:
        import cupy
    except ImportError:
        return None
    kernel = cupy.RawKernel(_NVRTC_COPY, "copy_chunks")

    def launch(grid, dest, source, count, chunk, reps):
        address = lambda a: a.__cuda_array_interface__["data"][0]
        with cupy.cuda.ExternalStream(0):
            kernel((grid,), (256,), (cupy.uint64(address(dest)), cupy.uint64(address(source)),
                                     cupy.int64(count), cupy.int64(chunk), cupy.int32(reps)))
    return launch


WARMUP = 100


@cuda.jit
def ping_pong_shmem(sig, iters, out):
    me = shmem.my_pe()
    other = 1 - me
    for i in range(iters):
        if i == WARMUP:
            out[0] = _now()
        if me == 0:
            shmem.signal_op(sig, i + 1, shmem.SIGNAL_SET, other)
            shmem.signal_wait_until(sig, shmem.CMP_GE, i + 1)
        else:
            shmem.signal_wait_until(sig, shmem.CMP_GE, i + 1)
            shmem.signal_op(sig, i + 1, shmem.SIGNAL_SET, other)
    out[1] = _now()


@cuda.jit
def ping_pong_put_signal(sig, data, source, iters, out):
    # put_signal carrying 8 bytes each way
    me = shmem.my_pe()
    other = 1 - me
    for i in range(iters):
        if i == WARMUP:
            out[0] = _now()
        source[0] = i
        if me == 0:
            shmem.put_signal(data, source, sig, i + 1, shmem.SIGNAL_SET, other)
            shmem.signal_wait_until(sig, shmem.CMP_GE, i + 1)
        else:
            shmem.signal_wait_until(sig, shmem.CMP_GE, i + 1)
            shmem.put_signal(data, source, sig, i + 1, shmem.SIGNAL_SET, other)
    out[1] = _now()


def _bare_ping_pong(store, load):
    """A flag ping-pong in bare PTX: ``store`` into the peer's flag, spin on
    ``load`` of one's own (between PEs 0 and 1; the collectives benchmark runs
    it on larger jobs too)."""
    @cuda.jit
    def ping_pong(sig, iters, out):
        me = shmem.my_pe()
        if me > 1:
            return
        other = 1 - me
        here = _addr(sig)
        there = _remote(sig, other, "ping_pong")
        for i in range(iters):
            if i == WARMUP:
                out[0] = _now()
            if me == 0:
                store(there, i + 1)
                while load(sig, here) < i + 1:
                    pass
            else:
                while load(sig, here) < i + 1:
                    pass
                store(there, i + 1)
        out[1] = _now()
    return ping_pong


#: st.release.sys / ld.acquire.sys
ping_pong_bare = _bare_ping_pong(store_release, _load_acquire)
#: the floor: st.relaxed.sys / ld.relaxed.sys, no ordering at all
ping_pong_relaxed = _bare_ping_pong(store_relaxed, _load_relaxed)


@cuda.jit
def ping_pong_bare_data(sig, data, iters, out):
    # bare PTX carrying 8 bytes: st.relaxed.sys of the data, then st.release.sys of the flag
    me = shmem.my_pe()
    other = 1 - me
    here = _addr(sig)
    there = _remote(sig, other, "ping_pong")
    there_data = _remote(data, other, "ping_pong")
    for i in range(iters):
        if i == WARMUP:
            out[0] = _now()
        if me == 0:
            _store_relaxed(there_data, data, i)
            store_release(there, i + 1)
            while _load_acquire(sig, here) < i + 1:
                pass
        else:
            while _load_acquire(sig, here) < i + 1:
                pass
            _store_relaxed(there_data, data, i)
            store_release(there, i + 1)
    out[1] = _now()


@cuda.jit
def p_latency(dest, iters, out):
    for i in range(iters):
        shmem.p(dest, i, 1)
        shmem.quiet()
    out[0] = 1


@cuda.jit
def fetch_add_latency(counter, iters, out):
    total = 0
    for i in range(iters):
        total += shmem.atomic_fetch_add(counter, 1, 1)
    out[0] = total


@cuda.jit
def add_throughput(counters, spread, iters):
    tid = cuda.grid(1)
    slot = tid % spread
    for i in range(iters):
        shmem.atomic_add(counters[slot:slot + 1], 1, 0)


def main():
    max_bytes = int(sys.argv[1])
    shmem.init()
    if shmem._runtime.current().backend != "cuda":
        raise SystemExit("benchmarks/rma.py measures the GPU; it does not run on the simulator")
    me = shmem.my_pe()
    name = cuda.get_current_device().name
    results = {"bandwidth": [], "device": name.decode() if isinstance(name, bytes) else str(name)}
    # which GPU each PE runs on, to tell one shared GPU from two
    results["pe_gpus"] = shmem._runtime.current().pe_gpus
    # whether every kernel carries the path to other nodes (a job that spans them)
    results["spans_nodes"] = shmem._runtime.current().proxy is not None
    n = max_bytes // 8
    dest = shmem.zeros(n, np.float64)
    own = shmem.zeros(n, np.float64)
    source = cuda.to_device(np.arange(n, dtype=np.float64))
    local = cuda.device_array(n, np.float64)
    blocks = 132 * 4
    nvrtc = nvrtc_copy()
    shmem.barrier_all()
    size = 4096
    while size <= max_bytes:
        count = size // 8
        chunk = max(1, -(-count // blocks))
        grid = -(-count // chunk)
        reps = max(3, min(1000, (1 << 28) // size))
        if me == 0:
            d, o, s_, l_ = dest[:count], own[:count], source[:count], local[:count]
            row = {"bytes": size, "reps": reps}
            for key, launch in (
                    ("put_block_s", lambda r: put_blocks[grid, 256](d, s_, chunk, 1, r)),
                    ("put_block_nbi_s", lambda r: put_blocks_nbi[grid, 256](d, s_, chunk, 1, r)),
                    ("put_block_self_s", lambda r: put_blocks[grid, 256](o, s_, chunk, 0, r)),
                    ("local_kernel_s", lambda r: local_copy[grid, 256](l_, s_, chunk, r)),
                    ("local_kernel_heap_s", lambda r: local_copy[grid, 256](o, s_, chunk, r))):
                row[key] = timed(launch, reps)
            # the other scopes, on the same grid: a chunk per warp, per thread; and
            # get_block from PE 1's copy (PE 1 holds arange from the first put)
            per_warp = max(1, -(-count // (blocks * 8)))
            per_thread = max(1, -(-count // (blocks * 256)))
            for key, launch in (
                    ("put_warp_s", lambda r: put_warps[blocks, 256](d, s_, per_warp, 1, r)),
                    ("put_thread_s", lambda r: put_threads[blocks, 256](d, s_, per_thread, 1, r)),
                    ("get_block_s", lambda r: get_blocks[grid, 256](l_, d, chunk, 1, r))):
                row[key] = timed(launch, reps)
            if nvrtc is not None:
                peer = shmem.peer_array(d, 1)
                row["nvrtc_copy_s"] = timed(lambda r: nvrtc(grid, peer, s_, count, chunk, r), reps)
            # copy-engine calls queued behind a held stream: the GPU's time, not the host's
            row["memcpy_dtod_s"] = gpu_time(lambda: l_.copy_to_device(s_), 20)
            # the copy engine moving the same bytes to the same place as put_block
            peer = shmem.peer_array(d, 1)
            row["memcpy_peer_s"] = gpu_time(lambda: peer.copy_to_device(s_), 20)
            results["bandwidth"].append(row)
        size *= 4
    shmem.barrier_all()
    if me == 1:  # PE 0 put into PE 1's copy
        assert (dest.copy_to_host() == np.arange(n)).all()
    shmem.barrier_all()

    # ping-pongs: both PEs run at once; timed inside the kernel, after a warm-up
    iters = 20000
    stamps = cuda.device_array(2, np.int64)
    data = shmem.zeros(1, np.int64)
    payload = cuda.device_array(1, np.int64)
    for name, launch in (
            ("bare_ptx", lambda sig: ping_pong_bare[1, 1](sig, iters, stamps)),
            ("bare_relaxed", lambda sig: ping_pong_relaxed[1, 1](sig, iters, stamps)),
            ("bare_ptx_data", lambda sig: ping_pong_bare_data[1, 1](sig, data, iters, stamps)),
            ("signal_op", lambda sig: ping_pong_shmem[1, 1](sig, iters, stamps)),
            ("put_signal", lambda sig: ping_pong_put_signal[1, 1](sig, data, payload, iters,
                                                                  stamps))):
        for attempt in range(2):  # the first run compiles
            sig = shmem.zeros(1, np.uint64)
            shmem.barrier_all()
            if me < 2:
                launch(sig)
                cuda.synchronize()
            shmem.barrier_all()
            shmem.free(sig)
        t0, t1 = stamps.copy_to_host()
        results[f"pingpong_{name}_us"] = (t1 - t0) / 1e3 / (iters - WARMUP)
    results["pingpong_iters"] = iters - WARMUP

    out = cuda.device_array(1, np.int64)
    target = shmem.zeros(1, np.int64)
    counters = shmem.zeros(4096, np.int64)
    shmem.barrier_all()
    if me == 0:
        results["p_quiet_us"] = timed(lambda r: p_latency[1, 1](target, 1000 * r, out), 3) * 1e6 / 1000
        results["fetch_add_us"] = timed(lambda r: fetch_add_latency[1, 1](target, 1000 * r, out), 3) * 1e6 / 1000
    shmem.barrier_all()
    threads, iters = 132 * 4 * 256, 16
    if me < 2:  # (compiled before it is timed)
        add_throughput[132 * 4, 256](counters, 1, 0)
        cuda.synchronize()
    for spread in (1, 4096):
        shmem.barrier_all()
        t0 = time.perf_counter()
        if me < 2:
            add_throughput[132 * 4, 256](counters, spread, iters)
            cuda.synchronize()
        shmem.barrier_all()
        t = time.perf_counter() - t0
        results[f"atomic_add_spread{spread}_mops"] = 2 * threads * iters / t / 1e6
    shmem.barrier_all()
    if me == 0:
        total = int(counters.copy_to_host().sum())
        results["atomic_add_total_ok"] = total == 2 * 2 * threads * iters
        sys.stdout.write(json.dumps(results) + "\n")
    shmem.finalize()


if __name__ == "__main__":
    main()
