"""Benchmark: what a batch of atomics and signals from other nodes costs at its target
through ``serve_batches``, the resident warp (``numba_shmem/_cuda/_target.py``), as the
proxy's loop asks for it: ``FunctionTarget.apply``, then ``settled`` until it is done.
Batches of 1, 4, 32 and 256 records of one kind: p's (8-byte sets), signal adds (each
a release at system scope), int64 adds, int64 fetch_adds. Median us a batch and a
record, with the 10th and 90th percentiles, over 400 batches of each. One PE, no job,
no MPI; the warp is started as under MPS (the proxy starts it only there). Checks the
word every kind touched.

    python benchmarks/target_batches.py
"""
from _machine import require_gpu

if __name__ == "__main__":  # (before any CUDA import)
    require_gpu("target_batches.py", "what a batch of atomics costs the resident warp")

import threading  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import numba_shmem as shmem  # noqa: E402
from numba_shmem import _current  # noqa: E402
from numba_shmem._cuda import _target  # noqa: E402
from numba_shmem._cuda._driver import call  # noqa: E402
from numba_shmem._transport import _engine, _ring  # noqa: E402

KINDS = {"p": _engine._P64, "signal add": _ring.code(_ring.SIGNAL, 0, 1),
         "int64 add": _ring.code(_ring.ATOMIC, 2, 4),
         "int64 fetch_add": _ring.code(_ring.ATOMIC, 2, 4, 1)}
SIZES, REPS, WARM = (1, 4, 32, 256), 400, 20


def measure(heap, context, base):
    """{(kind, n): us of each batch}, through a FunctionTarget whose warp runs,
    the records' words a line apart from ``base`` (an allocation's)."""
    call("cuCtxSetCurrent", context)
    target = _target.FunctionTarget(heap)
    try:
        target.attach()  # (the proxy's context, current on this thread)
        control = target._service[0]
        deadline = time.time() + 10
        while not control[_target.SERVICE_RUNNING]:
            if time.time() > deadline:
                raise RuntimeError("serve_batches did not start within 10 s")
            time.sleep(0.001)
        apply, settled, pend = target.target.apply, target.target.settled, target.target.pend
        times = {}
        for kind, code in KINDS.items():
            for n in SIZES:
                for i in range(n):  # (a line apart each)
                    pend[i] = (base + 64 * i, code, 1, 0, 0)
                took = []
                for _ in range(WARM + REPS):
                    began = time.perf_counter_ns()
                    rc = apply(pend.ctypes.data, n)
                    if rc == 0:  # (posted: done once settled says so)
                        rc = settled()
                        while rc == -1:
                            rc = settled()
                    if rc != 0:
                        raise RuntimeError(f"the target failed: CUDA error {rc}")
                    took.append(time.perf_counter_ns() - began)
                times[kind, n] = np.array(took[WARM:]) / 1e3
        return times
    finally:
        target.close()


def main():
    # the warp runs where an MPS daemon shares the GPU: started here as it would be there
    attribute = _target._attribute
    _target._attribute = lambda device, name: 1 if name == "CU_DEVICE_ATTRIBUTE_MPS_ENABLED" \
        else attribute(device, name)
    shmem.init()
    try:
        heap, context = _current.current().heap.backend, call("cuCtxGetCurrent")
        words = shmem.zeros(256 * 8, np.int64)  # (the records' words, a line apart)
        result = {}

        def run():  # (a thread of its own, as the proxy's: the target's context goes on it)
            try:
                result["times"] = measure(heap, context,
                                          words.__cuda_array_interface__["data"][0])
            except BaseException as error:  # (raised below, in the main thread)
                result["error"] = error

        thread = threading.Thread(target=run)
        thread.start()
        thread.join()
        if "error" in result:
            raise result["error"]
        third = int(words.copy_to_host()[3 * 8])  # (in batches of 4, 32 and 256 of each kind)
        want = 1 + 3 * 3 * (WARM + REPS)  # (p sets 1; the adds add 1 each)
        if third != want:
            raise RuntimeError(f"the fourth record's word holds {third}, not {want}")
        name = call("cuDeviceGetName", 64, call("cuCtxGetDevice"))
        name = (name.decode() if isinstance(name, bytes) else str(name)).split("\0")[0]
        print(f"a batch through serve_batches on {name}: median us a batch (a record) "
              f"[p10-p90], {REPS} batches each")
        print(f"{'':>16}" + "".join(f"{f'n = {n}':>30}" for n in SIZES))
        for kind in KINDS:
            cells = []
            for n in SIZES:
                us = result["times"][kind, n]
                median = np.median(us)
                cells.append(f"{median:.2f} ({median / n:.3f}) "
                             f"[{np.percentile(us, 10):.1f}-{np.percentile(us, 90):.1f}]")
            print(f"{kind:>16}" + "".join(f"{cell:>30}" for cell in cells))
    finally:
        shmem.finalize()


if __name__ == "__main__":
    main()
