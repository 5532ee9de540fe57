"""The GPU's side of the proxy (PEs on other nodes): the ring in mapped host
memory that its threads post requests into, and the intrinsics they post with.

The ring's layout and its host side are in ``_transport/_ring.py``; the
device API's implementations that post (``_device.py``) are written over the
intrinsics below. A PE whose peer table entry is 0 is on another node: its
requests go to the ring, those to the PEs of this node take the direct path.
That branch is compiled in only where the job spans nodes (``compiled_in``):
in a job of one node every kernel is what it would be without a proxy.
"""

import ast

import numpy as np
from llvmlite import ir
from numba.cuda import types
from numba.cuda.extending import intrinsic

from .._transport import _ring
from . import _ptx
from ._addressing import debug_enabled, fail
from ._primitives import _leaving, as_pe, state_word
from ._state import load_field, load_peer_base

_i64 = ir.IntType(64)
_void = ir.VoidType()


def compiled_in():
    """Whether device code compiled now carries the path to other nodes: the
    running job has a proxy, or (code compiled before init()) the environment
    emulates nodes (NUMBA_SHMEM_NODE_SIZE)."""
    from .. import _config, _current

    runtime = _current.current()
    if runtime is not None:
        return runtime.proxy is not None
    return bool(_config.from_env().node_size)


def device_ring(runtime, from_min):
    """Collective. Make this PE's ring, its ticket counters and its staging
    segments (in the heap) and point the device state at them (before any
    kernel is loaded); the ring's host side. ``from_min``: the FROM word (0
    where the proxy takes no PUT_FROM)."""
    from numba import cuda

    from ._driver import call

    memory = cuda.mapped_array(_ring.NBYTES, np.uint8)
    staging = runtime.heap.allocate((_ring.STAGE_BYTES,), np.uint8)
    words = np.zeros(COMPLETE_COPY + 1, np.uint64)  # (TICKETS ... COMPLETE_COPY)
    words[STAGE_BASE], words[FROM_COPY] = runtime.heap.backend.address(staging), from_min
    tickets = cuda.to_device(words)
    runtime.device_state["proxy_ring"] = memory.device_ctypes_pointer.value
    runtime.device_state["proxy_tickets"] = tickets.device_ctypes_pointer.value
    count = np.asarray(cuda.pinned_array(1, np.uint64))  # (pinned, as every proxy copy)

    def posted():
        """The tickets taken so far (read on the runtime's setup stream: it
        neither waits for nor joins the application's)."""
        call("cuMemcpyDtoHAsync", count.ctypes.data, tickets.device_ctypes_pointer.value, 8,
             runtime.setup_stream)
        call("cuStreamSynchronize", runtime.setup_stream)
        return int(count[0])

    ring = _ring.DeviceRing(np.asarray(memory), posted)
    ring.from_min = from_min
    ring.keep = (memory, tickets, staging)  # alive as long as the ring
    return ring


def is_far(context, builder, pe):
    """Emit: whether PE ``pe`` (an i64) is reached through the proxy, that is,
    its peer table entry is 0 (the same invariant load the direct path's
    address makes). In debug mode a ``pe`` out of range reads as this PE's
    entry, so that the direct path's checks report it."""
    if debug_enabled():
        npes = builder.sext(load_field(context, builder, "n_pes"), _i64)
        me = builder.sext(load_field(context, builder, "my_pe"), _i64)
        pe = builder.select(builder.icmp_unsigned("<", pe, npes), pe, me)
    return builder.icmp_unsigned("==", load_peer_base(context, builder, pe), _i64(0))


@intrinsic
def _far(typingctx, pe):
    """Whether PE ``pe`` is on another node (``is_far``)."""
    def codegen(context, builder, sig, args):
        return is_far(context, builder, as_pe(context, builder, args[0], sig.args[0]))
    return types.boolean(pe), codegen


@intrinsic
def _never_far(typingctx, pe):
    """``_far`` where the job is on one node: false, so the path to other
    nodes folds away."""
    def codegen(context, builder, sig, args):
        return ir.Constant(ir.IntType(1), 0)
    return types.boolean(pe), codegen


@intrinsic
def _no_ring(typingctx):
    """``_ring_base`` where the job is on one node: 0, a constant."""
    def codegen(context, builder, sig, args):
        return _i64(0)
    return types.int64(), codegen


@intrinsic
def _proxy_check(typingctx, pe, name):
    """Stop the kernel unless PE ``pe`` is a PE of the job that the proxy
    reaches (in debug mode with a message naming ``name`` and the PEs): a ``pe``
    out of range reads as 0 in the peer table too."""
    def codegen(context, builder, sig, args):
        pe = as_pe(context, builder, args[0], sig.args[0])
        name = sig.args[1].literal_value
        me = builder.sext(load_field(context, builder, "my_pe"), _i64)
        npes = builder.sext(load_field(context, builder, "n_pes"), _i64)
        bad_pe = builder.icmp_unsigned(">=", pe, npes)  # also pe < 0
        no_proxy = builder.icmp_unsigned("==", load_field(context, builder, "proxy_ring"),
                                         _i64(0))
        with builder.if_then(builder.or_(bad_pe, no_proxy), likely=False):
            if debug_enabled():
                with builder.if_then(bad_pe):
                    fail(context, builder, f"numba-shmem: shmem.{name}: PE %ld called it with "
                         "pe=%ld, outside 0..%ld", [me, pe, builder.sub(npes, _i64(1))])
                fail(context, builder, f"numba-shmem: shmem.{name}: PE %ld cannot reach PE %ld",
                     [me, pe])
            else:
                _ptx.trap(builder)
        return context.get_dummy_value()
    if not isinstance(name, types.StringLiteral):
        return None
    return types.void(pe, name), codegen


#: the ring's address (0 where the job has no proxy)
_ring_base = state_word("proxy_ring")
#: this PE's heap address, which a request's offsets are from, and whether
#: this PE has left the job (the path's waits), read at each call: the direct
#: path's invariant reads, hoisted out of the caller's loop, kept registers
#: through it
_far_heap_base = state_word("heap_base", per_call=True)
_far_left = _leaving(True)


#: the words at ``proxy_tickets`` (GPU memory): the ring's ticket counter, the
#: staging tickets' counter, the staging segments' address, the FROM word (read
#: by every thread of a large put: from mapped host memory that was a read over
#: the bus each, one warp after another), and the last FREED, STAGES_FREED and
#: COMPLETE a thread read of the ring (``_ring.py``)
TICKETS, STAGE_TICKETS, STAGE_BASE, FROM_COPY, FREED_COPY, STAGES_FREED_COPY, \
    COMPLETE_COPY = range(7)


def _tickets_word(index, instruction, operand=False):
    """An intrinsic of one PTX ``instruction`` on word ``index`` of
    ``proxy_tickets`` ($1 its address, $0 the int64 it gives; ``operand``: it
    takes an int64, $2)."""
    def emit(context, builder, args):
        at = builder.add(load_field(context, builder, "proxy_tickets", per_call=True),
                         _i64(8 * index))
        return _ptx.asm(builder, _i64, instruction, "=l,l,l" if operand else "=l,l",
                        [at, *args])

    if operand:
        @intrinsic
        def word(typingctx, value):
            def codegen(context, builder, sig, args):
                return emit(context, builder,
                            [context.cast(builder, args[0], sig.args[0], types.int64)])
            return types.int64(value), codegen
    else:
        @intrinsic
        def word(typingctx):
            def codegen(context, builder, sig, args):
                return emit(context, builder, [])
            return types.int64(), codegen
    return word


# (tickets are atomic adds at GPU scope: only this PE's threads take them)
#: take the next ticket; ``count`` consecutive tickets (the first); the next
#: staging ticket; how many tickets have been taken
_ring_claim = _tickets_word(TICKETS, "atom.relaxed.gpu.add.u64 $0, [$1], 1;")
_ring_claim_many = _tickets_word(TICKETS, "atom.relaxed.gpu.add.u64 $0, [$1], $2;", True)
_stage_claim = _tickets_word(STAGE_TICKETS, "atom.relaxed.gpu.add.u64 $0, [$1], 1;")
_ring_posted = _tickets_word(TICKETS, "ld.relaxed.gpu.b64 $0, [$1];")
#: the staging segments' address (in this PE's heap); the FROM word
_stage_base = _tickets_word(STAGE_BASE, "ld.relaxed.gpu.b64 $0, [$1];")
_ring_from = _tickets_word(FROM_COPY, "ld.relaxed.gpu.b64 $0, [$1];")
#: the copy of FREED (acquire: a slot it says is free is written after), and
#: keeping a newer one (release: after the acquire that read it); the same of
#: STAGES_FREED
_freed_copy = _tickets_word(FREED_COPY, "ld.acquire.gpu.b64 $0, [$1];")
_keep_freed = _tickets_word(FREED_COPY, "atom.release.gpu.max.u64 $0, [$1], $2;", True)
_stages_freed_copy = _tickets_word(STAGES_FREED_COPY, "ld.acquire.gpu.b64 $0, [$1];")
_keep_stages_freed = _tickets_word(STAGES_FREED_COPY, "atom.release.gpu.max.u64 $0, [$1], $2;",
                                   True)
#: the same of COMPLETE: a quiet after requests already seen complete (or
#: none) reads GPU memory, not the ring's word over the bus (1.3 us on an H200);
#: relaxed, as the quiet's fence follows it
_complete_copy = _tickets_word(COMPLETE_COPY, "ld.relaxed.gpu.b64 $0, [$1];")
_keep_complete = _tickets_word(COMPLETE_COPY, "atom.release.gpu.max.u64 $0, [$1], $2;", True)


@intrinsic
def _load_word(typingctx, address):
    """ld.acquire.sys of the ring's int64 word at ``address``."""
    def codegen(context, builder, sig, args):
        return _ptx.load(builder, args[0], _i64, "acquire")
    return types.int64(address), codegen


def _word_store(sem):
    @intrinsic
    def store(typingctx, address, value):
        def codegen(context, builder, sig, args):
            word = context.cast(builder, args[1], sig.args[1], types.int64)
            _ptx.asm(builder, _void, f"st.{sem}.sys.u64 [$0], $1;", "l,l", [args[0], word])
            return context.get_dummy_value()
        return types.void(address, value), codegen
    return store


#: st.relaxed.sys of a ring word; st.release.sys (the word that publishes a
#: descriptor, or gives a slot back, after what was written before it). Typed
#: u64, where the device API's own stores are b64: a PTX test tells them apart
_store_word = _word_store("relaxed")
_release_word = _word_store("release")


@intrinsic
def _bits(typingctx, like, value):
    """``value`` as ``like``'s dtype, its bits zero-extended into an int64."""
    def codegen(context, builder, sig, args):
        dtype = sig.args[0].dtype
        value = context.cast(builder, args[1], sig.args[1], dtype)
        width = dtype.bitwidth
        raw = builder.bitcast(value, ir.IntType(width)) if isinstance(dtype, types.Float) \
            else value
        return builder.zext(raw, _i64) if width < 64 else raw
    return types.int64(like, value), codegen


@intrinsic
def _from_bits(typingctx, like, word):
    """The ``like.dtype`` whose bits are the low bits of the int64 ``word``."""
    def codegen(context, builder, sig, args):
        dtype = sig.args[0].dtype
        width = dtype.bitwidth
        raw = builder.trunc(args[1], ir.IntType(width)) if width < 64 else args[1]
        return builder.bitcast(raw, context.get_value_type(dtype)) \
            if isinstance(dtype, types.Float) else raw
    return like.dtype(like, word), codegen


class _WithoutFarPaths(ast.NodeTransformer):
    """Each ``if _far(x):`` becomes its else branch, each ``if not _far(x):``
    its body; only where ``x`` is a name, so that dropping the test drops no
    computation."""

    def visit_If(self, node):
        self.generic_visit(node)
        test, negated = node.test, False
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test, negated = test.operand, True
        if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Name)
                and test.func.id == "_far" and not test.keywords
                and all(isinstance(arg, ast.Name) for arg in test.args)):
            return node
        return (node.body if negated else node.orelse) or [ast.Pass()]


def without_far_paths(source):
    """``source`` as it compiles where ``_far`` is ``_never_far`` (a job on one
    node): the same code once LLVM has folded the constant, but numba types
    and lowers none of the path to other nodes (a reduction's or a ``p``'s
    whole request)."""
    return ast.unparse(_WithoutFarPaths().visit(ast.parse(source)))


def namespace():
    """What the implementations that post refer to, for code compiled now:
    without the path to other nodes where the job has none (``compiled_in``)."""
    if compiled_in():
        return _NAMESPACE
    return {**_NAMESPACE, "_far": _never_far, "_ring_base": _no_ring}


_NAMESPACE = {
    "_far": _far, "_proxy_check": _proxy_check, "_ring_base": _ring_base,
    "_far_heap_base": _far_heap_base, "_far_left": _far_left,
    "_ring_claim": _ring_claim, "_ring_claim_many": _ring_claim_many,
    "_ring_posted": _ring_posted, "_load_word": _load_word,
    "_stage_claim": _stage_claim, "_stage_base": _stage_base, "_ring_from": _ring_from,
    "_freed_copy": _freed_copy, "_keep_freed": _keep_freed,
    "_stages_freed_copy": _stages_freed_copy, "_keep_stages_freed": _keep_stages_freed,
    "_complete_copy": _complete_copy, "_keep_complete": _keep_complete,
    "_store_word": _store_word, "_release_word": _release_word, "_bits": _bits,
    "_from_bits": _from_bits,
    "RING_MASK": _ring.SLOTS - 1, "RING_SLOTS": _ring.SLOTS, "RING_CHUNK": _ring.CHUNK,
    "RING_FREE": _ring.FREE, "RING_DONE": _ring.DONE, "RING_ANSWER": _ring.ANSWER,
    "RING_COMPLETE": _ring.COMPLETE, "RING_STAGING": _ring.STAGING,
    "RING_PUT": _ring.code(_ring.PUT), "RING_GET": _ring.code(_ring.GET),
    "RING_PUT_FROM": _ring.code(_ring.PUT_FROM),
    "RING_PUT_FROM_NBI": _ring.code(_ring.PUT_FROM, 0, _ring.FROM_NBI), "RING_PIECE": _ring.PIECE,
    "RING_FROM_MIN": _ring.FROM_MIN, "RING_AHEAD": _ring.AHEAD,
    "RING_STAGE_SEGS": _ring.STAGE_SEGS, "RING_STAGE_PIECE": _ring.STAGE_PIECE,
    "RING_STAGE_STRIDE": _ring.STAGE_STRIDE, "RING_STAGE_FREE": _ring.STAGE_FREE,
    "RING_MARK_SHIFT": _ring.MARK_SHIFT, "RING_PE_SHIFT": _ring.PE_SHIFT,
    "RING_LOW56": _ring.LOW56, "RING_MARKED_OFFSET": _ring.MARKED_OFFSET,
    "RING_FREED": _ring.FREED, "RING_STAGES_FREED": _ring.STAGES_FREED,
    "RING_SIGNAL": _ring.code(_ring.SIGNAL), "RING_SIGNAL_MAX": _ring.code(_ring.SIGNAL, 0,
                                                                            _ring.SIGNAL_MAX),
}


def atomic_code(op, dtype, fetch):
    """The CODE word of an atomic ``op`` (an op of the device API: "inc" is
    posted as an add of 1) on ``dtype`` (a numpy dtype)."""
    op = "add" if op == "inc" else op
    return _ring.code(_ring.ATOMIC, _ring.DTYPES.index(str(dtype)), _ring.ATOMIC_OPS.index(op),
                      int(fetch))
