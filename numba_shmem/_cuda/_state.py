"""Device-side state: the PE number and heap addresses, read by device functions.

Kernels that call numba-shmem link a tiny PTX module defining the global
``numba_shmem_state``. When numba loads such a kernel's module, the setup
callback copies the running PE's state into that global, so a kernel compiled
once reads the right values on whichever PE loads it; nothing is frozen at
compile time.
"""

import sys

import numpy as np
from llvmlite import ir
from numba.cuda.cudadrv.linkable_code import PTXSource

from .._errors import ShmemUsageError
from ._driver import call

SYMBOL = "numba_shmem_state"

#: The layout of ``numba_shmem_state``; device code reads fields at these offsets.
STATE_DTYPE = np.dtype([
    ("my_pe", np.int32),
    ("n_pes", np.int32),
    ("heap_base", np.uint64),    # this PE's heap
    ("heap_size", np.uint64),    # bytes in each PE's heap slot
    ("peer_bases", np.uint64),   # device pointer to uint64[n_pes]; 0 = not reachable
    ("debug", np.int32),
    ("_pad", np.int32),
    ("teams", np.uint64),        # device pointer to int32[MAX_TEAMS, n_pes + 2]
    ("leaving", np.uint64),      # device pointer to an int32 of mapped host memory: 1 once
                                 # this PE is leaving the job (waits then stop the kernel)
    ("_reserved", np.uint64),
])
assert STATE_DTYPE.itemsize == 64

_PTX = f"""
.version 7.0
.target sm_70
.address_size 64
.visible .global .align 8 .b8 {SYMBOL}[{STATE_DTYPE.itemsize}];
""".encode()


def _current_state():
    from .. import _runtime

    runtime = _runtime.current()
    if runtime is None:
        raise ShmemUsageError(
            "a kernel that calls numba-shmem was loaded before shmem.init(); "
            "call shmem.init() before launching it")
    return runtime.device_state


def _load_state(object_code):
    """numba calls this once for every module it loads that links the state."""
    state = _current_state()
    pointer, size = call("cuLibraryGetGlobal", object_code.handle, SYMBOL.encode())
    assert size == state.nbytes, (size, state.nbytes)
    call("cuMemcpyHtoD", pointer, state.ctypes.data, size)


STATE_CODE = PTXSource(_PTX, name=SYMBOL, setup_callback=_load_state)


def _refuse_disk_cache():
    """A kernel that links code cannot be cached by numba (it would fail with
    'Cannot pickle CUDACodeLibrary with linking files'); say so up front."""
    from numba.cuda.dispatcher import CUDACache, CUDADispatcher

    frame = sys._getframe(2)
    while frame is not None:
        owner = frame.f_locals.get("self")
        if isinstance(owner, CUDADispatcher):
            if isinstance(getattr(owner, "_cache", None), CUDACache):
                raise ShmemUsageError(
                    f"kernel {owner.py_func.__name__!r} calls numba-shmem and was "
                    "declared with cache=True; numba cannot cache kernels that link "
                    "device state, remove cache=True")
            return
        frame = frame.f_back


def use_state(context):
    """Call from a lowering: link the state module into the kernel being built."""
    _refuse_disk_cache()
    context.active_code_library.add_linking_file(STATE_CODE)


def load_field(context, builder, field):
    """Emit a load of one field of the state; returns an LLVM value."""
    use_state(context)
    module = builder.module
    try:
        variable = module.get_global(SYMBOL)
    except KeyError:
        variable = ir.GlobalVariable(
            module, ir.ArrayType(ir.IntType(8), STATE_DTYPE.itemsize), SYMBOL, addrspace=1)
        variable.linkage = "external"
        variable.align = 8
    dtype, offset = STATE_DTYPE.fields[field][:2]
    llty = ir.IntType(8 * dtype.itemsize)
    i32 = ir.IntType(32)
    address = builder.gep(variable, [i32(0), i32(offset)], inbounds=True)
    address = builder.bitcast(address, llty.as_pointer(addrspace=1))
    return invariant(builder, builder.load(address, align=dtype.itemsize))


def load_table_entry(context, builder, field, index, llty):
    """Emit a load of entry ``index`` (i64) of the device table that state
    field ``field`` points to. The table lives in global memory and no kernel
    changes it, so the load is a global, invariant one: NVVM reads it through
    the read-only cache (``ld.global.nc``) instead of a generic load, which
    matters where it follows an ``ld.acquire`` on a signal's critical path."""
    pointer = builder.inttoptr(load_field(context, builder, field), llty.as_pointer(addrspace=1))
    entry = builder.gep(pointer, [index], inbounds=True)
    return invariant(builder, builder.load(entry, align=llty.width // 8))


def invariant(builder, load):
    """Mark a load of state that no kernel changes: LLVM may then hoist it out
    of loops (past the memory clobbers of the inline PTX) and NVVM may use the
    read-only cache."""
    load.set_metadata("invariant.load", builder.module.add_metadata([]))
    return load
