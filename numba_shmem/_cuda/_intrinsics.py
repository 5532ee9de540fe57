"""Typing and lowering of the host API names that also work inside kernels.

``shmem.my_pe()`` is one Python function: called on the host it asks the
runtime; called in a ``@cuda.jit`` kernel it compiles to a load from the device
state. Importing this module registers the device side.
"""

from llvmlite import ir
from numba.cuda import cgutils, types
from numba.cuda.core.imputils import impl_ret_borrowed
from numba.cuda.extending import lower_builtin, type_callable

from .._arrays import peer_array
from .._current import my_pe, n_pes
from . import _device  # noqa: F401  (registers the device API)
from ._addressing import peer_address
from ._state import load_field

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

