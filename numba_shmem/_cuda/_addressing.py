"""Address translation and the checks of debug mode, emitted into lowerings.

Below the device API's intrinsics (``_primitives``) and lowerings (``_device``,
``_intrinsics``); imports none of them.
"""

from llvmlite import ir
from numba.cuda import cgutils, nvvmutils

from . import _ptx
from ._state import load_field, load_peer_base

_i64 = ir.IntType(64)


def debug_enabled():
    """Whether device code compiled now carries the debug checks: the running
    job's setting, or NUMBA_SHMEM_DEBUG for code compiled before init()."""
    from .. import _config, _current

    runtime = _current.current()
    return (runtime.config if runtime else _config.from_env()).debug


def fail(context, builder, message, values):
    """printf ``message`` % ``values`` (i64 each) from the device, then trap."""
    fmt = context.insert_string_const_addrspace(builder, message + "\n")
    arguments = cgutils.alloca_once_value(builder, cgutils.make_anonymous_struct(builder, values))
    vprintf = nvvmutils.declare_vprint(builder.module)
    builder.call(vprintf, (fmt, builder.bitcast(arguments, ir.IntType(8).as_pointer())))
    _ptx.trap(builder)


def peer_address(context, builder, address, pe, name="peer_array"):
    """The address on PE ``pe`` of the symmetric ``address`` (both i64). In debug
    mode, a ``pe`` out of range, an address off the heap or a PE on another node
    stops the kernel with a message naming ``name`` and the PEs."""
    base = load_field(context, builder, "heap_base")
    if debug_enabled():
        me = builder.sext(load_field(context, builder, "my_pe"), _i64)
        npes = builder.sext(load_field(context, builder, "n_pes"), _i64)
        bad_pe = builder.icmp_unsigned(">=", pe, npes)  # also catches pe < 0
        with builder.if_then(bad_pe, likely=False):
            fail(context, builder, f"numba-shmem: shmem.{name}: PE %ld called it with pe=%ld, "
                 "outside 0..%ld", [me, pe, builder.sub(npes, _i64(1))])
        offset = builder.sub(address, base)
        off_heap = builder.icmp_unsigned(">=", offset, load_field(context, builder, "heap_size"))
        with builder.if_then(off_heap, likely=False):
            fail(context, builder, f"numba-shmem: shmem.{name}: PE %ld passed address 0x%lx, "
                 "which is not on the symmetric heap (allocate it with shmem.array)",
                 [me, address])
    peer_base = load_peer_base(context, builder, pe)
    if debug_enabled():
        unreachable = builder.icmp_unsigned("==", peer_base, _i64(0))
        with builder.if_then(unreachable, likely=False):
            fail(context, builder, f"numba-shmem: shmem.{name}: PE %ld cannot reach PE %ld "
                 "(another node)", [me, pe])
    return builder.add(peer_base, builder.sub(address, base))
