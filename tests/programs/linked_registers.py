"""Compile benchmarks/rma_pe.py's kernels that call a transfer (each block,
warp or thread its chunk) or an atomic in a loop, link each as numba-cuda
links a kernel for a GPU, no GPU needed, and print ``name registers`` for
each: the registers a thread of it takes.

numba-cuda's kernels link with link-time optimization wherever nvJitLink 12.3
or later is there (its default, ``lto``): the kernel as NVVM's LTO IR, with
numba-shmem's state module (PTX) beside it, through cuda.core's Linker. Where
it is not, numba-cuda links the kernel's PTX, and so does this."""

import re
import sys
from pathlib import Path

from cuda.core import Linker, LinkerOptions, ObjectCode
from numba import cuda, types
from numba.cuda.cudadrv.driver import _have_nvjitlink

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


LTO = _have_nvjitlink()


def registers(kernel, signature):
    """A thread's registers in ``kernel`` (for ``signature``) once linked."""
    if LTO:
        code, _ = cuda.compile(kernel.py_func, signature, device=False, abi="numba",
                               cc=(9, 0), output="ltoir")
        first = ObjectCode.from_ltoir(code, name="kernel.ltoir")
    else:
        ptx, _ = cuda.compile_ptx(kernel.py_func, signature, cc=(9, 0))
        first = ObjectCode.from_ptx(ptx.encode(), name="kernel.ptx")
    objects = [first, ObjectCode.from_ptx(_state._PTX, name="state.ptx")]
    linker = Linker(*objects, options=LinkerOptions(arch="sm_90", verbose=True,
                                                    link_time_optimization=LTO or None))
    linker.link("cubin")
    log = linker.get_info_log()
    linker.close()
    return int(re.findall(r"used (\d+) registers", log)[-1])


for name, (kernel, signature) in KERNELS.items():
    print(name, registers(kernel, signature), flush=True)
