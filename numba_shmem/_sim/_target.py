"""The simulator's heap reached as the compiled proxy reaches a GPU's: through
a ``_transport._engine.Target``'s C functions (copies, and batches of atomics
and signals applied with the direct path's operations under the heap's lock),
so that the tests run the GPU's path on machines without one
(``NUMBA_SHMEM_TEST_FUNCTION_TARGET=1``). The simulator's own proxy reaches its
heap directly."""

import numpy as np

_FUNCTIONS = {}


def function_target(heap, lockfd):
    """A ``_transport._engine.Target`` over ``heap`` (this PE's simulator heap,
    uint8) whose functions copy and apply with the operations of the direct
    path (atomics under the heap's lock, ``lockfd``): the compiled proxy then
    takes the path it takes for a GPU's heap, which the tests run this way
    on machines without one (``NUMBA_SHMEM_TEST_FUNCTION_TARGET=1``)."""
    from numba import carray, cfunc, types
    from numba.core.extending import intrinsic

    from .._transport import _engine

    if "copy_in" not in _FUNCTIONS:
        @intrinsic
        def bytes_at(typingctx, address):
            def codegen(context, builder, signature, args):
                return builder.inttoptr(args[0], context.get_value_type(signature.return_type))
            return types.CPointer(types.uint8)(address), codegen

        u8p = types.CPointer(types.uint8)

        @cfunc(types.int32(types.uint64, types.uint64, types.uintp, types.uintp, types.uintp))
        def copy_in(dst, src, n, pitch, rows):
            for row in range(rows):
                carray(bytes_at(dst + row * n), n)[:] = carray(bytes_at(src + row * pitch), n)
            return 0

        @cfunc(types.int32(u8p, types.uint64, types.uintp, types.int64))
        def copy_out(dst, src, n, wait):
            carray(dst, n)[:] = carray(bytes_at(src), n)
            return 0

        _FUNCTIONS.update(copy_in=copy_in, copy_out=copy_out, bytes_at=bytes_at)
    if lockfd not in _FUNCTIONS:
        _FUNCTIONS[lockfd] = _apply_function(lockfd, _FUNCTIONS["bytes_at"])
    apply = _FUNCTIONS[lockfd]
    return _engine.Target(_engine.COPY_IN(_FUNCTIONS["copy_in"].address),
                          _engine.COPY_OUT(_FUNCTIONS["copy_out"].address),
                          _engine.APPLY(apply.address),
                          _engine.SETTLED(_engine.settled_at_once.address),
                          _engine.MARK(_engine.marked_at_once.address),
                          _engine.MARK(_engine.marked_at_once.address),
                          _engine.MARK(_engine.marked_at_once.address), int(heap.ctypes.data),
                          np.zeros((_engine.PEND_MAX, _engine.PEND_WORDS), np.int64))


def _apply_function(lockfd, bytes_at):
    """``apply(records, n)`` for the heap whose lock is ``lockfd``."""
    import ctypes

    from numba import carray, cfunc, types

    from .._transport import _engine

    flock = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_int)(
        ("flock", ctypes.CDLL(None)))
    words = _engine.PEND_WORDS
    atomic, signal = _engine.ATOMIC_KIND, _engine.SIGNAL_KIND

    @cfunc(types.int32(types.CPointer(types.int64), types.int64))
    def apply(records, n):
        pending = carray(records, (n, words))
        if flock(lockfd, 2) != 0:  # LOCK_EX
            return -1
        for i in range(n):
            address, code, value, cond = pending[i, 0], pending[i, 1], pending[i, 2], \
                pending[i, 3]
            word = carray(bytes_at(address), 8)
            if code & 255 == atomic:
                pending[i, 4] = _engine.apply_atomic(word, 0, code, value, cond)
            elif code & 255 == signal:
                _engine.apply_signal(word, 0, (code >> 16) & 255, value)
        flock(lockfd, 8)  # LOCK_UN
        return 0

    return apply
