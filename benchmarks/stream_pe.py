"""One PE of the stream-tier benchmark (run by benchmarks/stream.py).

Prints one JSON line from PE 0: the host's time per call of every stream-tier
function at 4 KiB, beside numba's launch of an empty kernel and a bare
cuLaunchKernel of it; the GPU's time per call of the barriers, put_signal and
the host collectives at 4 KiB, beside the empty kernel's. For comparison in the
same run, two earlier forms: put_signal SET as a copy and cuStreamWriteValue64
(two driver calls, not one kernel), and the reductions with lines turned off (one
block: sync, pull from every member, barrier).
"""

import contextlib
import json
import statistics
import sys
import time

import numpy as np
from numba import cuda
from numba.cuda import types

import numba_shmem as shmem
from _timing import gpu_time
from numba_shmem._cuda._driver import cu
from numba_shmem._cuda._enqueue import Prepared
from numba_shmem._stream import _rma
from numba_shmem._stream._tier import Tier

CALLS = 200  # per round, between synchronizations
ROUNDS = 5
GPU_REPS = 200
NBYTES = 4096


@cuda.jit
def empty(x):
    if x == 12345:  # never: an empty kernel that takes one argument
        cuda.threadIdx.x


def host_us(call, stream):
    """Host microseconds per call: ROUNDS rounds of CALLS calls, the stream drained
    (and every PE at the same point) between rounds."""
    times = []
    for _ in range(ROUNDS + 1):  # the first round warms up (compiles, fills caches)
        cuda.synchronize()
        shmem.barrier_all()
        start = time.perf_counter()
        for _ in range(CALLS):
            call()
        times.append((time.perf_counter() - start) / CALLS * 1e6)
        stream.synchronize()
    return times[1:]


@contextlib.contextmanager
def _copy_then_signal():
    """put_signal as it was before small ones were one kernel."""
    saved = _rma.ONE_KERNEL_BYTES
    _rma.ONE_KERNEL_BYTES = -1
    try:
        yield
    finally:
        _rma.ONE_KERNEL_BYTES = saved


@contextlib.contextmanager
def _lines_off():
    """Reductions as they were before lines: one block (sync, pull, barrier)."""
    saved = Tier.line_slots
    launches = shmem._runtime.current().stream_tier.lines  # (made on first use, then kept)
    Tier.line_slots = lambda self, team, dtype, nelems: None
    launches.clear()
    try:
        yield
    finally:
        Tier.line_slots = saved
        launches.clear()


def main():
    shmem.init()
    if shmem._runtime.current().backend != "cuda":
        raise SystemExit("benchmarks/stream.py measures the GPU; it does not run on the simulator")
    me, npes = shmem.my_pe(), shmem.n_pes()
    peer = (me + 1) % npes
    name = cuda.get_current_device().name
    results = {"npes": npes, "device": name.decode() if isinstance(name, bytes) else str(name),
               "gpus": len(set(shmem._runtime.current().pe_gpus)), "calls": CALLS,
               "rounds": ROUNDS, "gpu_reps": GPU_REPS, "bytes": NBYTES}
    stream = cuda.stream()
    handle = int(stream.handle)
    n = NBYTES // 8
    data = shmem.zeros(n * npes, np.int64)
    dest = shmem.zeros(n * npes, np.int64)
    small = shmem.zeros(n, np.int64)  # one 4 KiB transfer (whole arrays: no slicing per call)
    small_local = cuda.to_device(np.arange(n, dtype=np.int64))
    sig = shmem.zeros(1, np.uint64)
    ready = shmem.zeros(1, np.uint64)
    ready.copy_to_device(np.ones(1, np.uint64))  # waits on it are already satisfied
    prepared = Prepared(empty, (types.int64,))
    world = shmem.TEAM_WORLD

    calls = {
        "numba launch, empty kernel": lambda: empty[1, 1, stream](0),
        "cuLaunchKernel, empty kernel": lambda: cu.cuLaunchKernel(
            prepared._function, 1, 1, 1, 1, 1, 1, 0, handle, prepared._params, 0),
        "put (device source)": lambda: shmem.put(small, small_local, peer, stream=stream),
        "get (device dest)": lambda: shmem.get(small_local, small, peer, stream=stream),
        "put_signal SET": lambda: shmem.put_signal(small, small_local, sig, 1, shmem.SIGNAL_SET,
                                                   peer, stream=stream),
        "put_signal ADD": lambda: shmem.put_signal(small, small_local, sig, 1, shmem.SIGNAL_ADD,
                                                   peer, stream=stream),
        "signal_op SET": lambda: shmem.signal_op(sig, 1, shmem.SIGNAL_SET, peer, stream=stream),
        "signal_op ADD": lambda: shmem.signal_op(sig, 1, shmem.SIGNAL_ADD, peer, stream=stream),
        "signal_wait_until EQ": lambda: shmem.signal_wait_until(ready, shmem.CMP_EQ, 1,
                                                                stream=stream),
        "signal_wait_until GE": lambda: shmem.signal_wait_until(ready, shmem.CMP_GE, 1,
                                                                stream=stream),
        "quiet": lambda: shmem.quiet(stream=stream),
        "barrier(team)": lambda: shmem.barrier(world, stream=stream),
        "barrier_all_on_stream": lambda: shmem.barrier_all_on_stream(stream),
        "fcollect": lambda: shmem.fcollect(world, dest, data, n, stream=stream),
        "alltoall": lambda: shmem.alltoall(world, dest, data, n, stream=stream),
        "broadcast": lambda: shmem.broadcast(world, dest, data, n, 0, stream=stream),
        "sum_reduce": lambda: shmem.sum_reduce(world, dest, data, n, stream=stream),
        "sum_reducescatter": lambda: shmem.sum_reducescatter(world, dest, data, n,
                                                             stream=stream),
    }
    host = {label: host_us(call, stream) for label, call in calls.items()}
    with _copy_then_signal():
        host["put_signal SET, copy + write"] = host_us(calls["put_signal SET"], stream)
    # the GPU's time per call, calls queued behind a held default stream
    on_gpu = {
        "empty kernel": lambda: prepared.launch(1, 1, 0, 0),
        "put_signal SET": lambda: shmem.put_signal(small, small_local, sig, 1, shmem.SIGNAL_SET,
                                                   peer),
        "barrier(team)": lambda: shmem.barrier(world, stream=0),
        "fcollect": lambda: shmem.fcollect(world, dest, data, n),
        "alltoall": lambda: shmem.alltoall(world, dest, data, n),
        "broadcast": lambda: shmem.broadcast(world, dest, data, n, 0),
        "sum_reduce": lambda: shmem.sum_reduce(world, dest, data, n),
        "sum_reducescatter": lambda: shmem.sum_reducescatter(world, dest, data, n),
    }
    earlier = {"put_signal SET, copy + write": (on_gpu["put_signal SET"], _copy_then_signal),
               "sum_reduce, lines off": (on_gpu["sum_reduce"], _lines_off),
               "sum_reducescatter, lines off": (on_gpu["sum_reducescatter"], _lines_off)}
    gpu = {}
    for label, (call, form) in {**{k: (v, contextlib.nullcontext) for k, v in on_gpu.items()},
                                **earlier}.items():
        rounds = []
        with form():
            for _ in range(3):
                shmem.barrier_all()
                rounds.append(gpu_time(call, GPU_REPS, shmem.sync_all) * 1e6)
        gpu[label] = rounds
    results["host_us"] = {k: [statistics.median(v), min(v), max(v)] for k, v in host.items()}
    results["gpu_us"] = {k: [statistics.median(v), min(v), max(v)] for k, v in gpu.items()}
    shmem.barrier_all()
    if me == 0:
        sys.stdout.write(json.dumps(results) + "\n")
    shmem.finalize()


if __name__ == "__main__":
    main()
