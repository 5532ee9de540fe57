"""Typing and lowering of the host API names that also work inside kernels.

``shmem.my_pe()`` is one Python function: called on the host it asks the
runtime; called in a ``@cuda.jit`` kernel it compiles to a load from the device
state. Importing this module registers the device side.
"""

from llvmlite import ir
from numba.cuda import cgutils, nvvmutils, types
from numba.cuda.core.imputils import impl_ret_borrowed
from numba.cuda.extending import lower_builtin, type_callable

from .._arrays import peer_array
from .._runtime import my_pe, n_pes
from ._state import load_field, load_table_entry

_i64 = ir.IntType(64)


@type_callable(my_pe)
def _type_my_pe(context):
    def typer():
        return types.int32
    return typer


@lower_builtin(my_pe)
def _lower_my_pe(context, builder, sig, args):
    return load_field(context, builder, "my_pe")


@type_callable(n_pes)
def _type_n_pes(context):
    def typer():
        return types.int32
    return typer


@lower_builtin(n_pes)
def _lower_n_pes(context, builder, sig, args):
    return load_field(context, builder, "n_pes")


def debug_enabled():
    """Whether device code compiled now carries the debug checks: the running
    job's setting, or NUMBA_SHMEM_DEBUG for code compiled before init()."""
    from .. import _config, _runtime

    runtime = _runtime.current()
    return (runtime.config if runtime else _config.from_env()).debug


def fail(context, builder, message, values):
    """printf ``message`` % ``values`` (i64 each) from the device, then trap."""
    fmt = context.insert_string_const_addrspace(builder, message + "\n")
    arguments = cgutils.alloca_once_value(builder, cgutils.make_anonymous_struct(builder, values))
    vprintf = nvvmutils.declare_vprint(builder.module)
    builder.call(vprintf, (fmt, builder.bitcast(arguments, ir.IntType(8).as_pointer())))
    _ptx_trap(builder)


def _ptx_trap(builder):
    fnty = ir.FunctionType(ir.VoidType(), [])
    builder.call(ir.InlineAsm(fnty, "trap;", "~{memory}", side_effect=True), [])


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
    peer_base = load_table_entry(context, builder, "peer_bases", pe, _i64)
    if debug_enabled():
        unreachable = builder.icmp_unsigned("==", peer_base, _i64(0))
        with builder.if_then(unreachable, likely=False):
            fail(context, builder, f"numba-shmem: shmem.{name}: PE %ld cannot reach PE %ld "
                 "(another node)", [me, pe])
    return builder.add(peer_base, builder.sub(address, base))


@type_callable(peer_array)
def _type_peer_array(context):
    def typer(arr, pe):
        if isinstance(arr, types.Array) and isinstance(pe, types.Integer):
            return arr
        return None
    return typer


@lower_builtin(peer_array, types.Array, types.Integer)
def _lower_peer_array(context, builder, sig, args):
    arrty, pety = sig.args
    source = context.make_array(arrty)(context, builder, value=args[0])
    pe = context.cast(builder, args[1], pety, types.int64)
    address = builder.ptrtoint(source.data, _i64)
    result = context.make_array(arrty)(context, builder)
    cgutils.copy_struct(result, source)
    result.data = builder.inttoptr(peer_address(context, builder, address, pe),
                                   source.data.type)
    return impl_ret_borrowed(context, builder, sig.return_type, result._getvalue())


from . import _device  # noqa: E402,F401  (registers the device API)
