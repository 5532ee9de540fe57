"""Atomics on the GPU, lowered straight to PTX."""

from llvmlite import ir
from numba.cuda import types
from numba.cuda.np.numpy_support import as_dtype

from .. import _device_api as api
from . import _ptx
from . import _proxied
from ._addressing import debug_enabled, peer_address
from ._far import _ANSWER, _GIVE_BACK_ACQUIRED, _far_namespace, _post_marked
from ._primitives import array_pointer, as_pe
from ._source import _compile_source, _indent, _register, _spin_namespace


# -- atomics, lowered straight to PTX --------------------------------------------------

_PTX_OP = {"swap": "exch", "inc": "add", "add": "add", "and": "and", "or": "or", "xor": "xor"}


def _ptx_type(op, dtype):
    bits = dtype.bitwidth
    if isinstance(dtype, types.Float):
        return f"f{bits}" if op == "add" else f"b{bits}"
    return f"u{bits}" if op == "add" else f"b{bits}"


def _far_atomic(name, op, fetching, dtype):
    """The implementation of atomic ``name`` on ``dtype`` toward a PE on another
    node: one request, and for a fetching one, a wait for the old value."""
    params = api.ATOMICS[name][0].replace(" ", ", ")
    target = params.split(",")[0]
    value = "1" if op == "inc" else "value" if "value" in params else "0"
    cond = "cond" if "cond" in params else "0"
    code = _proxied.atomic_code(op, as_dtype(dtype), fetching)
    source = (f"def impl({params}):\n    _proxy_check(pe, {name!r})\n"
              + _indent(_post_marked(code, "pe", f"_addr({target}) - _far_heap_base()",
                              f"_bits({target}, {value})", f"_bits({target}, {cond})"), 1))
    if fetching:
        source += (_indent(_ANSWER, 1)
                   + f"    old = _from_bits({target}, _load_word(ring + RING_ANSWER + slot * 8))\n"
                   + _indent(_GIVE_BACK_ACQUIRED, 1) + "    return old\n")
    return _compile_source(source, _far_namespace() | _spin_namespace(debug_enabled(), 0))


def _lower_atomic(name):
    """An atomic: inline PTX on the peer's address, or toward a PE on another
    node (peer table entry 0), a request into the proxy's ring."""
    op = name.replace("atomic_", "").replace("fetch_", "")
    fetching = api.atomic_returns_old(name)
    direct = _lower_direct_atomic(name, op, fetching)

    def lower(context, builder, sig, args):
        from numba.cuda import cgutils

        if not _proxied.compiled_in():
            return direct(context, builder, sig, args)
        far = _proxied.is_far(context, builder, as_pe(context, builder, args[-1], sig.args[-1]))
        returns = sig.return_type != types.none
        result = cgutils.alloca_once(builder, context.get_value_type(sig.return_type)) \
            if returns else None
        with builder.if_else(far, likely=False) as (proxied, otherwise):
            with proxied:
                value = context.compile_internal(
                    builder, _far_atomic(name, op, fetching, sig.args[0].dtype), sig, args)
                if returns:
                    builder.store(value, result)
            with otherwise:
                value = direct(context, builder, sig, args)
                if returns:
                    builder.store(value, result)
        return builder.load(result) if returns else context.get_dummy_value()
    return lower


def _lower_direct_atomic(name, op, fetching):
    def lower(context, builder, sig, args):
        arrty = sig.args[0]
        dtype = arrty.dtype
        llty = context.get_value_type(dtype)
        address = peer_address(context, builder, array_pointer(context, builder, arrty, args[0]),
                               as_pe(context, builder, args[-1], sig.args[-1]), name)
        if op == "fetch":
            return _ptx.load(builder, address, llty, "relaxed")
        if op == "set":
            _ptx.store(builder, address, context.cast(builder, args[1], sig.args[1], dtype),
                       "relaxed")
            return context.get_dummy_value()
        is_float = isinstance(dtype, types.Float)
        bits = ir.IntType(dtype.bitwidth)
        as_bits = (lambda v: builder.bitcast(v, bits)) if is_float and op != "add" else (lambda v: v)
        from_bits = (lambda v: builder.bitcast(v, llty)) if is_float and op != "add" else (lambda v: v)
        if op == "compare_swap":
            cond = as_bits(context.cast(builder, args[1], sig.args[1], dtype))
            value = as_bits(context.cast(builder, args[2], sig.args[2], dtype))
            return from_bits(_ptx.atomic(builder, "cas", _ptx_type("cas", dtype), address, value,
                                         compare=cond))
        if op == "inc":
            value = ir.Constant(llty, 1)
        else:
            value = as_bits(context.cast(builder, args[1], sig.args[1], dtype))
        result = _ptx.atomic(builder, _PTX_OP[op], _ptx_type(_PTX_OP[op], dtype), address, value,
                             fetch=fetching)
        return from_bits(result) if fetching else context.get_dummy_value()
    return lower


for _name in api.ATOMICS:
    _register(_name, _lower_atomic(_name))
