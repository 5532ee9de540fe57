"""Device-side state: the PE number and heap addresses, read by device functions.

Kernels that call numba-shmem link a tiny PTX module defining
``numba_shmem_state`` and ``numba_shmem_peers`` (every PE's heap address) in
constant memory. When numba loads such a kernel's module, the setup callback
copies the running PE's state into them, so a kernel compiled once reads the
right values on whichever PE loads it; nothing is frozen at compile time.

Constant memory, not global: its cache is separate from L1, which every
acquire load invalidates (``CCTL.IVALL``). A peer's address read right after a
wait (a reply to a signal) then comes from the constant cache in a few cycles,
not from L2.
"""

import sys

import numpy as np
from llvmlite import ir
from numba.cuda.cudadrv.linkable_code import PTXSource

from .._device_api import cache_refused
from .._errors import ShmemUsageError
from ._driver import call
from ._enqueue import outside_capture
from ._ptx import per_call as per_call_value

SYMBOL = "numba_shmem_state"

#: The layout of ``numba_shmem_state``; device code reads fields at these offsets.
STATE_DTYPE = np.dtype([
    ("my_pe", np.int32),
    ("n_pes", np.int32),
    ("heap_base", np.uint64),    # this PE's heap
    ("heap_size", np.uint64),    # bytes in each PE's heap slot
    ("proxy_ring", np.uint64),   # the proxy's ring in mapped host memory (PEs on other
                                 # nodes; _transport/_ring.py), 0 when every PE is on this node
    ("debug", np.int32),
    ("one_gpu", np.int32),       # 1: every PE of the job runs on this GPU
    ("teams", np.uint64),        # device pointer to int32[MAX_TEAMS, n_pes + 2]
    ("leaving", np.uint64),      # device pointer to an int32 of mapped host memory: 1 once
                                 # this PE is leaving the job (waits then stop the kernel)
    ("proxy_tickets", np.uint64),  # device pointer to the ring's uint64 ticket counter
])
assert STATE_DTYPE.itemsize == 64

#: the most PEs a job on the GPU may have: every PE's heap address is in
#: constant memory (16 KiB of a module's 64 KiB; 0 for a PE this one cannot reach)
CONST_PEERS = 2048
PEERS = "numba_shmem_peers"

_PTX = f"""
.version 7.0
.target sm_70
.address_size 64
.visible .const .align 8 .b8 {SYMBOL}[{STATE_DTYPE.itemsize}];
.visible .const .align 8 .b8 {PEERS}[{8 * CONST_PEERS}];
""".encode()


def _current_state():
    from .. import _current

    runtime = _current.current()
    if runtime is None:
        raise ShmemUsageError(
            "a kernel that calls numba-shmem was loaded before shmem.init(); "
            "call shmem.init() before launching it")
    return runtime


def _load_state(object_code):
    """numba calls this once for every module it loads that links the state.
    The copies go on the runtime's own non-blocking stream, outside any graph
    capture under way (a module may first be needed while one is)."""
    runtime = _current_state()
    stream = runtime.setup_stream
    with outside_capture():
        for symbol, values in ((SYMBOL, runtime.device_state), (PEERS, runtime.peer_table)):
            pointer, size = call("cuLibraryGetGlobal", object_code.handle, symbol.encode())
            assert size >= values.nbytes, (symbol, size, values.nbytes)
            call("cuMemcpyHtoDAsync", pointer, values.ctypes.data, values.nbytes, stream)
        call("cuStreamSynchronize", stream)


STATE_CODE = PTXSource(_PTX, name=SYMBOL, setup_callback=_load_state)


def _refuse_disk_cache():
    """A kernel that links code cannot be cached by numba (it would fail with
    'Cannot pickle CUDACodeLibrary with linking files'); say so up front."""
    from numba.cuda.dispatcher import CUDACache, CUDADispatcher

    # every dispatcher on the stack: a device function's (never cached) is
    # compiled inside the kernel's that calls it
    frame = sys._getframe(2)
    while frame is not None:
        owner = frame.f_locals.get("self")
        if isinstance(owner, CUDADispatcher) and isinstance(getattr(owner, "_cache", None),
                                                            CUDACache):
            raise cache_refused(owner.py_func.__name__)
        frame = frame.f_back


def use_state(context):
    """Call from a lowering: link the state module into the kernel being built."""
    _refuse_disk_cache()
    context.active_code_library.add_linking_file(STATE_CODE)


_CONSTANT = 4  # NVVM's address space of constant memory


def _constant_symbol(module, name, nbytes):
    try:
        return module.get_global(name)
    except KeyError:
        variable = ir.GlobalVariable(module, ir.ArrayType(ir.IntType(8), nbytes), name,
                                     addrspace=_CONSTANT)
        variable.linkage = "external"
        variable.align = 8
        return variable


def load_field(context, builder, field, per_call=False):
    """Emit a load of one field of the state; returns an LLVM value. An
    invariant load, which LLVM may hoist out of the caller's loops; or
    (``per_call``) one at each call, from an offset that ``_ptx.per_call``
    computes anew, so that the value takes no register through the loop."""
    use_state(context)
    variable = _constant_symbol(builder.module, SYMBOL, STATE_DTYPE.itemsize)
    dtype, offset = STATE_DTYPE.fields[field][:2]
    llty = ir.IntType(8 * dtype.itemsize)
    i32 = ir.IntType(32)
    at = per_call_value(builder, i32(offset)) if per_call else i32(offset)
    address = builder.gep(variable, [i32(0), at], inbounds=True)
    address = builder.bitcast(address, llty.as_pointer(addrspace=_CONSTANT))
    load = builder.load(address, align=dtype.itemsize)
    return load if per_call else invariant(builder, load)


def load_peer_base(context, builder, pe):
    """Emit a load of PE ``pe``'s heap address (``pe`` an i64) from the
    constant table. One unconditional load: LLVM hoists it out of a loop that
    puts to the same PE (a branch to a fallback table kept it inside, behind
    the loop's other branches)."""
    use_state(context)
    i64 = ir.IntType(64)
    variable = _constant_symbol(builder.module, PEERS, 8 * CONST_PEERS)
    words = builder.bitcast(variable, i64.as_pointer(addrspace=_CONSTANT))
    return invariant(builder, builder.load(builder.gep(words, [pe], inbounds=True), align=8))


def load_table_entry(context, builder, field, index, llty):
    """Emit a load of entry ``index`` (i64) of the device table that state
    field ``field`` points to. The table lives in global memory and no kernel
    changes it, so the load is a global, invariant one: NVVM reads it through
    the read-only cache (``ld.global.nc``) instead of a generic load. (After an
    acquire that cache is invalidated too: what a signal's reply needs is in
    constant memory instead.)"""
    pointer = builder.inttoptr(load_field(context, builder, field), llty.as_pointer(addrspace=1))
    entry = builder.gep(pointer, [index], inbounds=True)
    return invariant(builder, builder.load(entry, align=llty.width // 8))


def invariant(builder, load):
    """Mark a load of state that no kernel changes: LLVM may then hoist it out
    of loops (past the memory clobbers of the inline PTX) and NVVM may use the
    read-only cache."""
    load.set_metadata("invariant.load", builder.module.add_metadata([]))
    return load
