"""Bare PTX for the benchmarks' hardware references: flag stores with no
library function around them."""

from llvmlite import ir
from numba.cuda import types
from numba.cuda.extending import intrinsic

from numba_shmem._cuda import _ptx


def _store(semantics):
    @intrinsic
    def store(typingctx, address, value):
        def codegen(context, builder, sig, args):
            value = context.cast(builder, args[1], sig.args[1], types.uint64)
            _ptx.asm(builder, ir.VoidType(), f"st.{semantics}.sys.b64 [$0], $1;", "l,l",
                     [args[0], value])
            return context.get_dummy_value()
        return types.void(address, value), codegen
    return store


store_release = _store("release")
store_relaxed = _store("relaxed")
