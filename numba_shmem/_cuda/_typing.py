"""Typing of the device API: argument checks that name the argument and the fix,
and each function's return type."""

from numba.cuda import types
from numba.cuda.core.errors import TypingError
from numba.cuda.typing.templates import Signature

from .. import _device_api as api

_INT_ATOMIC = (types.int32, types.uint32, types.int64, types.uint64)
_FLOAT_ATOMIC = (types.float32, types.float64)


def _fail(name, message):
    raise TypingError(f"shmem.{name}: {message}")


def _require_array(name, arg, what, contiguous=False):
    if not isinstance(arg, types.Array):
        _fail(name, f"{what} must be a device array, got {arg}")
    if contiguous and arg.layout not in "CF":
        _fail(name, f"{what} must be contiguous (a strided view like x[::2] is not); use "
                    "iput/iget with strides for strided data")


def _require_int(name, arg, what):
    if not isinstance(arg, types.Integer):
        _fail(name, f"{what} must be an integer, got {arg}")


#: constant arguments whose value must be one of these (checked when the value is
#: a compile-time constant; see ``invalid_literal``)
_CONSTANTS = {
    "cmp": ({api.CMP_EQ, api.CMP_NE, api.CMP_GT, api.CMP_LE, api.CMP_LT, api.CMP_GE},
            "one of shmem.CMP_EQ, CMP_NE, CMP_GT, CMP_LE, CMP_LT, CMP_GE"),
    "sig_op": ({api.SIGNAL_SET, api.SIGNAL_ADD}, "shmem.SIGNAL_SET or shmem.SIGNAL_ADD"),
}


def _signature(name, names, args):
    """The signature numba is to lower: the return type from ``_check``, the
    arguments as plain types, except a constant ``cmp``/``sig_op`` whose value
    is invalid, which stays a literal so that the lowering refuses it (numba
    tries the literal arguments first, and would fall back to the plain ones if
    the typer refused them here)."""
    result = _check(name, names, [types.unliteral(a) for a in args])
    kept = [a if _invalid_constant(n, a) else types.unliteral(a) for n, a in zip(names, args)]
    # (numba-cuda's signature() builds numba-core's Signature, which its
    # CallableTemplate does not take for one)
    return Signature(result, tuple(kept), recvr=None)


def _invalid_constant(name, arg):
    valid = _CONSTANTS.get(name, (None,))[0]
    return (valid is not None and isinstance(arg, types.IntegerLiteral)
            and arg.literal_value not in valid)


def refuse_invalid_constants(name, params, sig):
    """Called by a lowering: a TypingError for a constant cmp/sig_op that is not
    one of the API's constants."""
    for param, arg in zip(params.split(), sig.args):
        if _invalid_constant(param, arg):
            _fail(name, f"{param}={arg.literal_value} is not {_CONSTANTS[param][1]}")


def typer_for(name, params):
    """numba folds arguments by the typer's own signature, so it gets the
    function's parameter names."""
    names = params.split()
    namespace = {"check": lambda *args: _signature(name, names, args)}
    exec(f"def typer({', '.join(names)}):\n    return check({', '.join(names)})\n",  # noqa: S102
         namespace)
    return namespace["typer"]


def _check(name, names, args):
    """The return type of ``name`` for ``args``, or a TypingError saying what is wrong."""
    bound = dict(zip(names, args))
    # transfers copy bytes from the first element on: their arrays must be contiguous
    transfer = name.startswith(("put", "get", "iput", "iget")) or \
        api.collective_kind(name) is not None
    for key in ("dest", "source", "sig", "ivar", "ivars", "status", "indices", "values"):
        if key in bound:
            _require_array(name, bound[key], key,
                           contiguous=transfer and key in ("dest", "source"))
    for key in ("pe", "nelems", "dst_stride", "src_stride", "cmp", "sig_op", "team", "src_team",
                "src_pe", "dest_team", "root"):
        if key in bound:
            _require_int(name, bound[key], key)
    for key in ("dest", "source", "ivar", "ivars", "values"):
        if key in bound and name not in api.ATOMICS and not name.startswith(("put", "get")) \
                and api.collective_kind(name) is None:
            dtype = bound[key].dtype
            if not isinstance(dtype, (types.Integer, types.Float)) or \
                    isinstance(dtype, types.Boolean):
                _fail(name, f"{key} has dtype {dtype}; {name} works on integer and float "
                            "arrays (not bool, complex or records)")
    if "sig" in bound and bound["sig"].dtype != types.uint64:
        _fail(name, f"sig must be a uint64 array, got {bound['sig'].dtype}")
    if "dest" in bound and "source" in bound and bound["dest"].dtype != bound["source"].dtype:
        _fail(name, f"dest and source must have the same dtype, got {bound['dest'].dtype} "
                    f"and {bound['source'].dtype}")
    if api.collective_kind(name) and name.split("_")[0] in api.INT_ONLY_OPS and \
            isinstance(bound["source"].dtype, types.Float):
        _fail(name, f"{name.split('_')[0]} needs an integer dtype, got {bound['source'].dtype}")
    if name in api.ATOMICS:
        arr = bound.get("dest", bound.get("source"))
        allowed = _INT_ATOMIC + (_FLOAT_ATOMIC if name in api.FLOAT_ATOMICS else ())
        if arr.dtype not in allowed:
            _fail(name, f"dtype {arr.dtype} is not supported; use int32, uint32, int64 or "
                        "uint64" + (" (or float32/float64)" if name in api.FLOAT_ATOMICS else ""))
        return arr.dtype if api.atomic_returns_old(name) else types.void
    if name == "g":
        return bound["source"].dtype
    if name in ("signal_fetch", "signal_wait_until"):
        return types.uint64
    if name in ("test", "test_all", "team_my_pe", "team_n_pes", "team_translate_pe"):
        return types.int32
    if name.startswith(("wait_until_any", "wait_until_some", "test_any", "test_some")):
        return types.int64
    return types.void
