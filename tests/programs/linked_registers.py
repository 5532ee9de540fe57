"""Compile benchmarks/rma_pe.py's kernels that call a transfer (each block,
warp or thread its chunk) or an atomic in a loop, link each as numba-cuda
links a kernel for a GPU (cuda.core's Linker: nvJitLink compiles the
kernel's PTX and numba-shmem's state module for separate linking), no GPU
needed, and print ``name registers`` for each: the registers a thread of it
takes."""

import re
import sys
from pathlib import Path

from cuda.core import Linker, LinkerOptions, ObjectCode
from numba import cuda, types

from numba_shmem._cuda import _state

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import rma_pe  # noqa: E402  (benchmarks/rma.py's kernels)

f64, i64 = types.float64[::1], types.int64
CHUNKED = (f64, f64, i64, i64, types.int32)  # (dest, source, chunk, pe, reps)

KERNELS = {"put_block": (rma_pe.put_blocks, CHUNKED),
           "put_nbi_block": (rma_pe.put_blocks_nbi, CHUNKED),
           "get_block": (rma_pe.get_blocks, CHUNKED), "put_warp": (rma_pe.put_warps, CHUNKED),
           "put": (rma_pe.put_threads, CHUNKED),
           "atomic_fetch_add": (rma_pe.fetch_add_latency, (i64[::1], i64, i64[::1])),
           "atomic_add": (rma_pe.add_throughput, (i64[::1], i64, i64))}


def registers(ptx):
    """A thread's registers in the kernel of ``ptx`` once linked."""
    objects = [ObjectCode.from_ptx(ptx.encode(), name="kernel.ptx"),
               ObjectCode.from_ptx(_state._PTX, name="state.ptx")]
    linker = Linker(*objects, options=LinkerOptions(arch="sm_90", verbose=True))
    linker.link("cubin")
    log = linker.get_info_log()
    linker.close()
    return int(re.findall(r"used (\d+) registers", log)[-1])


for name, (kernel, signature) in KERNELS.items():
    ptx, _ = cuda.compile_ptx(kernel.py_func, signature, cc=(9, 0))
    print(name, registers(ptx), flush=True)
