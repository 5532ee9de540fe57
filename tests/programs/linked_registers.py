"""Compile kernels that call a transfer in a loop, link each as numba-cuda
links a kernel for a GPU (cuda.core's Linker: the kernel's PTX and
numba-shmem's state module, each compiled apart), no GPU needed, and print
``name registers`` for each: the registers a thread of it takes."""

import re

from cuda.core import Linker, LinkerOptions, ObjectCode
from numba import cuda, types

import numba_shmem as shmem
from numba_shmem._cuda import _state

f64 = types.float64[::1]


def _looped(transfer, unit):
    """A kernel in which every block (warp, thread: ``unit``) moves its own
    chunk with ``transfer`` ``reps`` times, as benchmarks/rma_pe.py's do."""
    def kernel(dest, source, chunk, pe, reps):
        if unit == "block":
            index = cuda.blockIdx.x
        elif unit == "warp":
            index = cuda.grid(1) // 32
        else:
            index = cuda.grid(1)
        start = index * chunk
        end = min(start + chunk, min(dest.size, source.size))
        if start < end:
            for _ in range(reps):
                transfer(dest[start:end], source[start:end], pe)
    return kernel


KERNELS = {
    "put_block": _looped(shmem.put_block, "block"),
    "put_nbi_block": _looped(shmem.put_nbi_block, "block"),
    "get_block": _looped(shmem.get_block, "block"),
    "put_warp": _looped(shmem.put_warp, "warp"),
    "put": _looped(shmem.put, "thread"),
}


def registers(ptx):
    """A thread's registers in the kernel of ``ptx`` once linked."""
    objects = [ObjectCode.from_ptx(ptx.encode(), name="kernel.ptx"),
               ObjectCode.from_ptx(_state._PTX, name="state.ptx")]
    linker = Linker(*objects, options=LinkerOptions(arch="sm_90", verbose=True))
    linker.link("cubin")
    log = linker.get_info_log()
    linker.close()
    return int(re.findall(r"used (\d+) registers", log)[-1])


for name, kernel in KERNELS.items():
    ptx, _ = cuda.compile_ptx(kernel, (f64, f64, types.int64, types.int64, types.int32),
                              cc=(9, 0))
    print(name, registers(ptx), flush=True)
