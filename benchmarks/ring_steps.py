"""Benchmark: what the steps of a kernel's post into the proxy's ring cost on this
GPU, each timed alone in one block of 256 threads (200 of each, 3 runs): a
thread's acquire load of mapped host memory, its six stores and release store
of a descriptor there, an atomic add in device memory, the block's copy of 64
KiB within the GPU, the copy and a release, and the steps of a staged put_block
in a row (a read of the ring, an atomic, the copy, a read, an atomic, the
publish). No proxy and no MPI: the GPU alone.

    python benchmarks/ring_steps.py
"""
from _machine import require_gpu

if __name__ == "__main__":  # (before numba-shmem's CUDA backend is imported)
    require_gpu("ring_steps.py", "what a kernel's post into the proxy's ring costs")

import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402
from numba_shmem._cuda._primitives import _now, _copy16x4  # noqa: E402
from numba_shmem._cuda._proxied import _load_word, _store_word, _release_word  # noqa: E402

REPS = 200
N = 64 << 10


@cuda.jit
def probe(h, d, src, dst, counter, out):
    tid = cuda.threadIdx.x
    if tid == 0:
        t0 = _now()
        acc = 0
        for i in range(REPS):
            acc += _load_word(h + 8 * (i % 8))
        out[0] = (_now() - t0) / REPS
        t0 = _now()
        for i in range(REPS):
            for k in range(6):
                _store_word(h + 128 + 8 * k, i)
            _release_word(h + 128, i + acc)
        out[1] = (_now() - t0) / REPS
        t0 = _now()
        for i in range(REPS):
            acc += cuda.atomic.add(counter, 0, 1)
        out[2] = (_now() - t0) / REPS
        out[9] = acc
    cuda.syncthreads()
    t0 = _now()
    for i in range(REPS):
        cuda.syncthreads()
    out[3] = (_now() - t0) / REPS
    t0 = _now()
    for i in range(REPS):
        j = tid
        while j + 3 * 256 < N // 16:
            _copy16x4(d + (j << 4), src + (j << 4), 256 << 4)
            j += 1024
        cuda.syncthreads()
    out[4] = (_now() - t0) / REPS
    t0 = _now()
    for i in range(REPS):
        j = tid
        while j + 3 * 256 < N // 16:
            _copy16x4(d + (j << 4), src + (j << 4), 256 << 4)
            j += 1024
        cuda.syncthreads()
        if tid == 0:
            _release_word(h + 128, i)
        cuda.syncthreads()
    out[5] = (_now() - t0) / REPS
    # a host read then the copy then publish: the whole staged put's shape
    t0 = _now()
    for i in range(REPS):
        if tid == 0:
            v = _load_word(h + 8 * (i % 8))
            v += cuda.atomic.add(counter, 1, 1)
            out[10] = v
        cuda.syncthreads()
        j = tid
        while j + 3 * 256 < N // 16:
            _copy16x4(d + (j << 4), src + (j << 4), 256 << 4)
            j += 1024
        cuda.syncthreads()
        if tid == 0:
            v = _load_word(h + 8 * ((i + 3) % 8))
            v += cuda.atomic.add(counter, 0, 1)
            for k in range(6):
                _store_word(h + 128 + 8 * k, i)
            _release_word(h + 128, i + v)
        cuda.syncthreads()
    out[6] = (_now() - t0) / REPS


host = cuda.mapped_array(4096, np.uint8)
host[:] = 0
src = cuda.to_device(np.ones(N, np.uint8))
dst = cuda.device_array(N, np.uint8)
counter = cuda.to_device(np.zeros(4, np.int64))
out = cuda.to_device(np.zeros(16))
args = (host.device_ctypes_pointer.value if hasattr(host, "device_ctypes_pointer") else
        host.__cuda_array_interface__["data"][0],
        dst.device_ctypes_pointer.value, src.device_ctypes_pointer.value, dst, counter, out)
for _ in range(3):
    probe[1, 256](*args)
    cuda.synchronize()
    o = out.copy_to_host()
    print("us: host acquire load %.2f | 6 stores + release to host %.2f | gpu atomic %.2f | "
          "64 KiB block copy + sync %.2f | copy + release %.2f | "
          "staged-put shape (read, atomic, copy, read, atomic, publish) %.2f"
          % tuple(o[k] / 1e3 for k in (0, 1, 2, 4, 5, 6)), flush=True)
