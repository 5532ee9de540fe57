"""Requests from PEs on other nodes, applied to this PE's heap on the GPU.

The compiled proxy's loop (``_transport/_engine.py``) reaches the heap through
the C functions of a ``FunctionTarget``, in a CUDA context of its own on the
PE's GPU, which reaches the heap as the application's does (the heap's
mappings give the device access, whichever context): data with the copy
engine; a batch of atomics and signals as stream memory operations where it
can (below), else with one launch of a small kernel written here in PTX, each
record with the direct path's system-scope instruction, so that an atomic
from another node is atomic against this node's. Each call is complete (the
stream synchronized) before it returns, but a batch of stream memory
operations: the proxy goes on and answers its requests once the stream says
they are done.

Why a context of its own: while the application's context loads a module
(numba loads a kernel at its first launch), every call into that context
waits until its running kernels finish. Measured on an H200, with and without
MPS, lazy or eager loading alike: a launch from another thread of the same
context waited too, and one in a second context ran at once. An application
kernel waiting for a signal from another node, and the application loading
its next kernel meanwhile, hung every PE that way (on_stream, moe_dispatch
across emulated nodes).

A kernel of the application that fills every SM and waits for an atomic or
signal from another node (a barrier's included) may leave no room for the
one-thread kernel: leave a block's worth of room on the GPU, as with NVSHMEM's
proxy. Under MPS, ``serve_batches`` (one warp, 8 KiB of shared memory) stays
on one SM for as long as the proxy runs.
"""

import ctypes

import numpy as np

from .._transport import _ring
from .._errors import ShmemDriverError
from .._resources import UndoStack
from ._driver import call, cu

#: each op's instruction on a W-bit value: {res} the old value, {val} the
#: operand, {cond} compare_swap's expected value
_OPS = {
    "fetch": "ld.relaxed.sys.global.b{W} {res}, [%rd1];",
    "set": "st.relaxed.sys.global.b{W} [%rd1], {val};",
    "swap": "atom.relaxed.sys.global.exch.b{W} {res}, [%rd1], {val};",
    "compare_swap": "atom.relaxed.sys.global.cas.b{W} {res}, [%rd1], {cond}, {val};",
    "add": "atom.relaxed.sys.global.add.{A}{W} {res}, [%rd1], {val};",
    "and": "atom.relaxed.sys.global.and.b{W} {res}, [%rd1], {val};",
    "or": "atom.relaxed.sys.global.or.b{W} {res}, [%rd1], {val};",
    "xor": "atom.relaxed.sys.global.xor.b{W} {res}, [%rd1], {val};",
}
#: a signal is a release at system scope: the thread that applies it runs in
#: the proxy's own context, and whoever acquires it may be a kernel of another
#: process, a peer GPU or the host (which may cache this GPU's memory on a
#: coherent platform); one at GPU scope is faster (about 0.5 us on an H200,
#: benchmarks/target_poll.py) but not, in PTX's memory model, a release to them
_SIGNALS = {0: "st.release.sys.global.b64 [%rd1], %rd2;",  # SIGNAL_SET
            1: "red.release.sys.global.add.u64 [%rd1], %rd2;",  # SIGNAL_ADD
            _ring.SIGNAL_MAX: "red.release.sys.global.max.u64 [%rd1], %rd2;"}


def _ops(dtype):
    """The ops the ring carries for ``dtype``."""
    return _ring.FLOAT_OPS if np.dtype(dtype).kind == "f" else _ring.ATOMIC_OPS


def _atomic_body(dtype, op):
    """PTX of ``op`` on the ``dtype`` at %rd1, with the value's bits in %rd2 and
    cond's in %rd3, leaving the old value's bits in %rd5."""
    kind, width = np.dtype(dtype).kind, np.dtype(dtype).itemsize * 8
    lines = []
    if width == 32:  # operands from the low halves, the result widened
        lines.append("    cvt.u32.u64 %r1, %rd2;\n    cvt.u32.u64 %r2, %rd3;\n")
        res, val, cond, widen = "%r3", "%r1", "%r2", "    cvt.u64.u32 %rd5, %r3;\n"
    else:
        res, val, cond, widen = "%rd5", "%rd2", "%rd3", ""
    if kind == "f" and op == "add":  # through float registers
        freg = "%f" if width == 32 else "%fd"
        lines.append(f"    mov.b{width} {freg}1, {val};\n"
                     f"    atom.relaxed.sys.global.add.f{width} {freg}3, [%rd1], {freg}1;\n"
                     f"    mov.b{width} {res}, {freg}3;\n")
    else:
        lines.append("    " + _OPS[op].format(W=width, A="u", res=res, val=val, cond=cond) + "\n")
    if op != "set":
        lines.append(widen)
    return "".join(lines)


def _new_context():
    """A new context on the calling thread's device, not left current."""
    device = call("cuCtxGetDevice")
    try:
        context = call("cuCtxCreate", None, 0, device)
    except TypeError:  # cuda.bindings before 13 (cuCtxCreate without parameters)
        context = call("cuCtxCreate", 0, device)
    call("cuCtxPopCurrent")
    return context


def _own_context(undo, load):
    """A new context (destroyed by ``undo``) with ``load()`` run in it: what
    it returns."""
    context = _new_context()
    undo.push(call, "cuCtxDestroy", context)
    call("cuCtxPushCurrent", context)
    try:
        return context, load()
    finally:
        call("cuCtxPopCurrent")


def _host_buffer(undo, nbytes):
    """Pinned host memory that every context maps: (numpy view, device address)."""
    flags = cu.CU_MEMHOSTALLOC_PORTABLE | cu.CU_MEMHOSTALLOC_DEVICEMAP
    address = int(call("cuMemHostAlloc", nbytes, flags))
    undo.push(call, "cuMemFreeHost", address)
    view = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(address))
    return view, int(call("cuMemHostGetDevicePointer", address, 0))


def _records_loop(done, staged=False):
    """PTX: apply the %rd11 records of ``_engine.PEND_WORDS`` words at %rd10
    (address, code, value's bits, cond's bits, the old value's bits: written
    where the code fetches) in order, each with the instruction of its
    one-request kernel above; then go to ``done``. ``staged``: each record's
    first four words are read from a copy in shared memory at %rd20
    (``STAGED_WORDS`` words a record), not from %rd10; and where %r25 is not
    0, record i's old value goes into the control block at %rd14 instead, as
    two words at SERVICE_OLD + 2 i, its low and high half each marked with
    the batch's number (%r16) in the high half."""
    ops = len(_ring.ATOMIC_OPS)
    atomics = [f"$A{index}_{op}" if op in _ops(dtype) else "$STORE"
               for index, dtype in enumerate(_ring.DTYPES) for op in _ring.ATOMIC_OPS]
    signals = [f"$S{op}" for op in range(len(_SIGNALS))]
    assert sorted(_SIGNALS) == list(range(len(_SIGNALS)))
    bodies = "".join(f"$A{index}_{op}:\n{_atomic_body(dtype, op)}    bra $STORE;\n"
                     for index, dtype in enumerate(_ring.DTYPES) for op in _ops(dtype))
    bodies += "".join(f"$S{op}:\n    {text}\n    bra $STORE;\n" for op, text in _SIGNALS.items())
    # the code's kind, dtype and op (a byte each, from the low one) pick the
    # body from a jump table (an atomic's entry: dtype * ops + op), one
    # indirect branch where a chain of compares took up to 43; a code of no
    # body applies nothing (the loop refuses such a request before it posts)
    dispatch = (f"$ATOMICS: .branchtargets {', '.join(atomics)};\n"
                f"$SIGNALS: .branchtargets {', '.join(signals)};\n"
                "    cvt.u32.u64 %r26, %rd7;\n    and.b32 %r27, %r26, 255;\n"
                "    bfe.u32 %r28, %r26, 8, 8;\n    bfe.u32 %r29, %r26, 16, 8;\n"
                f"    setp.eq.u32 %p1, %r27, {_ring.SIGNAL};\n    @%p1 bra $SIGNAL;\n"
                f"    setp.ne.u32 %p1, %r27, {_ring.ATOMIC};\n    @%p1 bra $STORE;\n"
                f"    setp.ge.u32 %p1, %r28, {len(_ring.DTYPES)};\n    @%p1 bra $STORE;\n"
                f"    setp.ge.u32 %p1, %r29, {ops};\n    @%p1 bra $STORE;\n"
                f"    mad.lo.u32 %r30, %r28, {ops}, %r29;\n    brx.idx %r30, $ATOMICS;\n"
                "$SIGNAL:\n    setp.ne.u32 %p1, %r28, 0;\n    @%p1 bra $STORE;\n"
                f"    setp.ge.u32 %p1, %r29, {len(_SIGNALS)};\n    @%p1 bra $STORE;\n"
                "    brx.idx %r29, $SIGNALS;\n")
    if staged:
        load = (f"    mad.lo.u64 %rd21, %rd12, {8 * STAGED_WORDS}, %rd20;\n"
                "    ld.shared.u64 %rd1, [%rd21];\n    ld.shared.u64 %rd6, [%rd21+8];\n"
                "    ld.shared.u64 %rd2, [%rd21+16];\n    ld.shared.u64 %rd3, [%rd21+24];\n")
    else:
        load = ("    ld.volatile.u64 %rd1, [%rd13];\n    ld.volatile.u64 %rd6, [%rd13+8];\n"
                "    ld.volatile.u64 %rd2, [%rd13+16];\n    ld.volatile.u64 %rd3, [%rd13+24];\n")
    marked = ""
    if staged:
        marked = ("    setp.ne.u32 %p2, %r25, 0;\n    @!%p2 bra $OLD;\n"
                  "    cvt.u64.u32 %rd29, %r16;\n    shl.b64 %rd29, %rd29, 32;\n"
                  "    and.b64 %rd30, %rd5, 4294967295;\n    or.b64 %rd30, %rd30, %rd29;\n"
                  "    shr.u64 %rd31, %rd5, 32;\n    or.b64 %rd31, %rd31, %rd29;\n"
                  "    mad.lo.u64 %rd28, %rd12, 16, %rd14;\n"
                  f"    st.relaxed.sys.u64 [%rd28+{8 * SERVICE_OLD}], %rd30;\n"
                  f"    st.relaxed.sys.u64 [%rd28+{8 * SERVICE_OLD + 8}], %rd31;\n"
                  "    bra $NEXT;\n$OLD:\n")
    return ("    mov.u64 %rd12, 0;\n"
            "$LOOP:\n    setp.ge.u64 %p1, %rd12, %rd11;\n"
            f"    @%p1 bra {done};\n"
            "    mad.lo.u64 %rd13, %rd12, 40, %rd10;\n" + load +
            "    mov.u64 %rd5, 0;\n    and.b64 %rd7, %rd6, 16777215;\n"
            + dispatch + bodies +
            # (the old value goes back only where the request fetches: a write
            # over the bus, which each later release waits for)
            "$STORE:\n    and.b64 %rd9, %rd6, 16777216;\n    setp.eq.u64 %p1, %rd9, 0;\n"
            "    @%p1 bra $NEXT;\n" + marked + "    st.volatile.u64 [%rd13+32], %rd5;\n"
            "$NEXT:\n    add.u64 %rd12, %rd12, 1;\n    bra $LOOP;\n")


_REGISTERS = ("    .reg .pred %p<8>;\n    .reg .b64 %rd<32>;\n    .reg .b32 %r<32>;\n"
              "    .reg .f32 %f<4>;\n    .reg .f64 %fd<4>;\n")
#: the service kernel's control block (mapped host memory, SERVICE_BYTES): its
#: mailbox, SERVICE_MAIL words that the host writes and the warp's threads read
#: one each, at once, in every poll (one read over the bus); then, a line
#: apart each, the last batch the kernel applied (its sequence number), 1
#: while the kernel runs (it says so once it has started, and before it ends),
#: and the last batch the host posted (read by the host only). Every mailbox
#: word carries the batch's sequence number in its high half (1 to 2^32 - 2,
#: then 1 again; every batch writes every word, so a word of an earlier batch
#: never carries the number a poll waits for); the first holds the batch's
#: record count, the others, SERVICE_INLINE records of MAIL_RECORD words each
#: (the halves of address, code, value and cond), the records of a batch of
#: up to SERVICE_INLINE; a larger batch's records are read from the records'
#: buffer once the first word is seen. All words of one number: the batch is
#: there, whole. SERVICE_STOP in the first word stops the kernel. A batch of
#: up to SERVICE_INLINE records that all fetch has SERVICE_MARKED in its count:
#: the kernel writes each old value marked (two words from SERVICE_OLD on, the
#: value's halves each with the batch's number in the high half), with no
#: release, and the host takes them once every word carries the number; a
#: release at system scope waits for the bus (1.3-1.4 us on the H200,
#: benchmarks/target_poll.py), and a fetching atomic's answer waited for it.
SERVICE_INLINE, MAIL_RECORD = 4, 7
SERVICE_MAIL = 1 + SERVICE_INLINE * MAIL_RECORD
SERVICE_APPLIED, SERVICE_RUNNING, SERVICE_POSTED, SERVICE_OLD = 32, 40, 48, 56
SERVICE_BYTES = 8 * (SERVICE_OLD + 2 * SERVICE_INLINE)
SERVICE_MARKED = 1 << 30
SERVICE_STOP = 0xFFFF_FFFF << 32
#: the int64 words of a Target's counts (``_functions``)
COUNTS = 5
#: the threads of ``serve_batches`` (one warp), and the words of a record it
#: copies into shared memory (address, code, value, cond)
SERVICE_THREADS, STAGED_WORDS = 32, 4
assert SERVICE_MAIL <= SERVICE_THREADS


def _mail_source():
    """PTX of ``serve_batches``' wait for the next batch: every thread of the
    warp reads its mailbox word (at %rd24) relaxed, all at once; the batch
    (number %r16) is there once each of the first SERVICE_MAIL threads sees
    its number (a vote). Leaves the record count in %r17 and its
    SERVICE_MARKED bit in %r25; to $END on SERVICE_STOP."""
    every = "0xffffffff"
    return ("$WAIT:\n    mov.u64 %rd25, 0;\n"
            f"    setp.lt.u32 %p5, %r4, {SERVICE_MAIL};\n"
            "    @%p5 ld.relaxed.sys.u64 %rd25, [%rd24];\n"
            "    shr.u64 %rd26, %rd25, 32;\n    cvt.u32.u64 %r18, %rd26;\n"  # its number
            "    cvt.u32.u64 %r19, %rd25;\n"  # its low half
            f"    shfl.sync.idx.b32 %r20, %r18, 0, 31, {every};\n"  # the first word's
            f"    shfl.sync.idx.b32 %r17, %r19, 0, 31, {every};\n"
            "    setp.eq.u32 %p6, %r20, -1;\n    @%p6 bra $END;\n"  # (SERVICE_STOP)
            "    setp.ne.u32 %p6, %r20, %r16;\n    @%p6 bra $WAIT;\n"
            "    setp.eq.u32 %p6, %r18, %r16;\n    not.pred %p7, %p5;\n"
            "    or.pred %p6, %p6, %p7;\n"
            f"    vote.sync.all.pred %p6, %p6, {every};\n    @!%p6 bra $WAIT;\n"
            f"    and.b32 %r25, %r17, {SERVICE_MARKED};\n"  # (its old values marked)
            f"    and.b32 %r17, %r17, {SERVICE_MARKED - 1};\n")


def _unmail_source():
    """PTX: the threads holding a word of the batch's inline records (%r17 of
    them) store its half into the record's place in shared memory (at %rd20,
    STAGED_WORDS words a record: the code's word whole, the others' halves,
    low first)."""
    return (f"    setp.gt.u32 %p6, %r17, {SERVICE_INLINE};\n    @%p6 bra $FROM_RECORDS;\n"
            "    setp.eq.u32 %p6, %r4, 0;\n    @%p6 bra $STAGED;\n"
            f"    setp.ge.u32 %p6, %r4, {SERVICE_MAIL};\n    @%p6 bra $STAGED;\n"
            "    sub.u32 %r21, %r4, 1;\n"
            f"    div.u32 %r22, %r21, {MAIL_RECORD};\n"  # its record
            f"    rem.u32 %r23, %r21, {MAIL_RECORD};\n"  # its word in the record
            "    setp.ge.u32 %p6, %r22, %r17;\n    @%p6 bra $STAGED;\n"
            "    shl.b32 %r24, %r23, 2;\n"  # (4 bytes a half; after the code's, 4 more)
            "    setp.ge.u32 %p6, %r23, 3;\n    @%p6 add.u32 %r24, %r24, 4;\n"
            f"    mad.lo.u32 %r24, %r22, {8 * STAGED_WORDS}, %r24;\n"
            "    cvt.u64.u32 %rd27, %r24;\n    add.u64 %rd27, %rd27, %rd20;\n"
            "    setp.eq.u32 %p6, %r23, 2;\n"
            "    and.b64 %rd28, %rd25, 4294967295;\n"
            "    @%p6 st.shared.u64 [%rd27], %rd28;\n"
            "    @!%p6 st.shared.u32 [%rd27], %r19;\n"
            "    bra $STAGED;\n")


def _batch_source():
    """PTX of ``apply_batch(records, n)``: one thread applies ``n`` records
    (``_records_loop``); and of ``serve_batches(records, control)``: a kernel
    of one warp that stays, applying each batch the host posts into
    ``control``'s mailbox (SERVICE_* words), then saying so, until told to
    stop: a batch then costs no launch. The warp polls the mailbox together,
    a word each: a batch of up to SERVICE_INLINE records arrives with the
    read that sees it, and its threads put the records' words together in
    shared memory; those of a larger batch the threads copy from ``records``
    over the bus together (a read each, at once, where one thread would wait
    for every one in turn) after the fence that orders them after the
    mailbox. Then its first thread applies them in order, as ``apply_batch``
    does (an old value back into ``records``)."""
    from .._transport._engine import PEND_MAX

    every = "0xffffffff"
    return (".version 7.0\n.target sm_70\n.address_size 64\n\n"
            ".visible .entry apply_batch(.param .u64 p0, .param .u64 p1)\n{\n" + _REGISTERS
            + "    ld.param.u64 %rd10, [p0];\n    ld.param.u64 %rd11, [p1];\n"
            + _records_loop("$END") + "$END:\n    ret;\n}\n\n"
            ".visible .entry serve_batches(.param .u64 p0, .param .u64 p1)\n{\n" + _REGISTERS
            + f"    .shared .align 8 .b8 staged[{PEND_MAX * STAGED_WORDS * 8}];\n"
            "    ld.param.u64 %rd10, [p0];\n    ld.param.u64 %rd14, [p1];\n"
            "    mov.u64 %rd20, staged;\n    mov.u32 %r4, %tid.x;\n"
            "    mul.wide.u32 %rd24, %r4, 8;\n    add.u64 %rd24, %rd24, %rd14;\n"  # its word
            "    mov.u32 %r16, 1;\n"  # the batch it waits for
            "    setp.ne.u32 %p3, %r4, 0;\n    @%p3 bra $STARTED;\n    mov.u64 %rd18, 1;\n"
            f"    st.release.sys.u64 [%rd14+{8 * SERVICE_RUNNING}], %rd18;\n$STARTED:\n"
            + _mail_source() + _unmail_source() +
            "$FROM_RECORDS:\n    fence.acq_rel.sys;\n"  # (the records after the mailbox)
            "    cvt.u64.u32 %rd11, %r17;\n"
            "    cvt.u64.u32 %rd22, %r4;\n"  # each thread copies every 32nd record
            "$STAGE:\n    setp.ge.u64 %p1, %rd22, %rd11;\n    @%p1 bra $STAGED;\n"
            "    mad.lo.u64 %rd13, %rd22, 40, %rd10;\n"
            "    ld.volatile.u64 %rd1, [%rd13];\n    ld.volatile.u64 %rd6, [%rd13+8];\n"
            "    ld.volatile.u64 %rd2, [%rd13+16];\n    ld.volatile.u64 %rd3, [%rd13+24];\n"
            f"    mad.lo.u64 %rd21, %rd22, {8 * STAGED_WORDS}, %rd20;\n"
            "    st.shared.u64 [%rd21], %rd1;\n    st.shared.u64 [%rd21+8], %rd6;\n"
            "    st.shared.u64 [%rd21+16], %rd2;\n    st.shared.u64 [%rd21+24], %rd3;\n"
            f"    add.u64 %rd22, %rd22, {SERVICE_THREADS};\n    bra $STAGE;\n"
            f"$STAGED:\n    bar.warp.sync {every};\n"
            "    setp.ne.u32 %p3, %r4, 0;\n    @%p3 bra $JOIN;\n"
            "    cvt.u64.u32 %rd11, %r17;\n"
            + _records_loop("$APPLIED", staged=True) +
            "$APPLIED:\n    cvt.u64.u32 %rd16, %r16;\n    setp.ne.u32 %p2, %r25, 0;\n"
            # (marked old values need no release: each says it is there)
            f"    @%p2 st.relaxed.sys.u64 [%rd14+{8 * SERVICE_APPLIED}], %rd16;\n"
            f"    @!%p2 st.release.sys.u64 [%rd14+{8 * SERVICE_APPLIED}], %rd16;\n"
            f"$JOIN:\n    bar.warp.sync {every};\n"
            "    add.u32 %r16, %r16, 1;\n"  # (the next number: 2^32 - 1 is SERVICE_STOP's)
            "    setp.eq.u32 %p3, %r16, -1;\n    @%p3 mov.u32 %r16, 1;\n"
            "    bra $WAIT;\n$END:\n    setp.ne.u32 %p3, %r4, 0;\n    @%p3 bra $GONE;\n"
            "    mov.u64 %rd18, 0;\n"
            f"    st.release.sys.u64 [%rd14+{8 * SERVICE_RUNNING}], %rd18;\n"
            "$GONE:\n    ret;\n}\n").encode()


#: a stream memory operation (``cuStreamBatchMemOp``'s parameters): 48 bytes
MEMOP_WORDS = 6
#: the most operations of one ``cuStreamBatchMemOp`` call (the driver takes fewer
#: than 256; a full batch of 256 failed on the H200)
MEMOP_CALL = 128
#: where an MPS daemon shares the GPU (a launch from the proxy's context then
#: runs alongside the application's kernels), a batch of this many records or
#: more goes as one launch of ``apply_batch``: one launch and synchronize took
#: 11 us on the H200 under MPS, stream memory operations about 0.9 us each
LAUNCH_MIN = 32
#: the operations the target applies that way: writes of 4 and 8 bytes, then
#: atomic reductions (add, and, or) of 4 and 8 bytes
MEMOPS = ("write32", "write64", "add32", "add64", "and32", "and64", "or32", "or64")
_ADDRESS_MARK, _VALUE_MARK = 0x1111_1111_1111_1110, 0x2222_2222_2222_2222


def _memop_templates():
    """Each of MEMOPS as cuda.bindings lays it out (``MEMOP_WORDS`` uint64
    words, address and value marked), and where its address and value go: the
    layout is the driver header's, read from the binding instead of
    hard-coded. A binding without reductions: their rows stay zero."""
    templates = np.zeros((len(MEMOPS), MEMOP_WORDS), np.uint64)
    where = np.full((len(MEMOPS), 2), -1, np.int64)
    for k, name in enumerate(MEMOPS):
        kind, bits = name[:-2], int(name[-2:])
        op = cu.CUstreamBatchMemOpParams()
        if kind == "write":
            op.operation = op.writeValue.operation = getattr(
                cu.CUstreamBatchMemOpType, f"CU_STREAM_MEM_OP_WRITE_VALUE_{bits}")
            op.writeValue.address = _ADDRESS_MARK
            op.writeValue.value64 = _VALUE_MARK
            op.writeValue.flags = 0  # a system-wide fence first: what came before is seen
        else:
            try:
                reduction = cu.CUstreamBatchMemOpType.CU_STREAM_MEM_OP_ATOMIC_REDUCTION
                how = getattr(cu.CUstreamAtomicReductionOpType,
                              f"CU_STREAM_ATOMIC_REDUCTION_OP_{kind.upper()}")
                width = getattr(cu.CUstreamAtomicReductionDataType,
                                f"CU_STREAM_ATOMIC_REDUCTION_UNSIGNED_{bits}")
            except AttributeError:
                continue
            op.operation = op.atomicReduction.operation = reduction
            op.atomicReduction.flags = 0
            op.atomicReduction.reductionOp = how
            op.atomicReduction.dataType = width
            op.atomicReduction.address = _ADDRESS_MARK
            op.atomicReduction.value = _VALUE_MARK
        raw = np.frombuffer(ctypes.string_at(op.getPtr(), 8 * MEMOP_WORDS), np.uint64)
        address = np.flatnonzero(raw == _ADDRESS_MARK)
        value = np.flatnonzero(raw == _VALUE_MARK)
        assert len(address) == 1 and len(value) == 1, (name, raw)
        templates[k] = raw
        templates[k, address[0]] = templates[k, value[0]] = 0
        where[k] = address[0], value[0]
    return templates, where


#: a ``CUDA_MEMCPY2D`` (``cuMemcpy2DAsync``'s parameters), in uint64 words
COPY2D_WORDS = 16
#: its fields the target sets for each copy, in this order
COPY2D_FIELDS = ("srcHost", "srcPitch", "dstDevice", "dstPitch", "WidthInBytes", "Height")


def _copy2d_template():
    """A ``CUDA_MEMCPY2D`` from host to device memory as cuda.bindings lays it
    out (COPY2D_WORDS uint64 words, COPY2D_FIELDS zero), and the word of each
    of COPY2D_FIELDS, read from the binding as ``_memop_templates`` does."""
    copy = cu.CUDA_MEMCPY2D()
    copy.srcMemoryType = cu.CUmemorytype.CU_MEMORYTYPE_HOST
    copy.dstMemoryType = cu.CUmemorytype.CU_MEMORYTYPE_DEVICE
    for k, field in enumerate(COPY2D_FIELDS):
        setattr(copy, field, _ADDRESS_MARK + k)
    raw = np.frombuffer(ctypes.string_at(copy.getPtr(), 8 * COPY2D_WORDS), np.uint64).copy()
    where = np.array([np.flatnonzero(raw == _ADDRESS_MARK + k)[0]
                      for k in range(len(COPY2D_FIELDS))], np.int64)
    raw[where] = 0
    return raw, where


def _attribute(device, name):
    """The device attribute ``name`` (of CUdevice_attribute), 0 where the
    bindings or the driver predate it."""
    value = getattr(cu.CUdevice_attribute, name, None)
    if value is None:
        return 0
    try:
        return call("cuDeviceGetAttribute", value, device)
    except ShmemDriverError:
        return 0


def _memops_supported(device):
    """(writes, reductions): whether this GPU and driver take stream memory
    operations that write 4 and 8 bytes, and atomic reductions."""
    return (bool(_attribute(device, "CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS")),
            bool(_attribute(device, "CU_DEVICE_ATTRIBUTE_ATOMIC_REDUCTION_SUPPORTED")))


class FunctionTarget:
    """The compiled proxy's way to this PE's heap on the GPU
    (``_transport._engine.Target``, ``target``): in a context of its own (see
    above), on a stream of its own, data with the copy engine, and each batch
    of atomics and signals either as stream memory operations (writes and
    atomic reductions, one ``cuStreamBatchMemOp``), where every one of them is
    such (signals that set or add, ``p``, atomics that set, add, and or or and
    fetch nothing; a reduction never after a write) and, where an MPS daemon
    shares the GPU, there are fewer than LAUNCH_MIN, or else with one launch
    of ``apply_batch``. Each call is complete (the stream synchronized) before
    it returns, but for a batch of stream memory operations: that is complete
    once ``settled`` says so (or a later call returned: one stream). Stream memory
    operations are the way that does not wait for a time slice: on a GPU
    where the application's kernel runs and no MPS daemon shares it, a copy or
    a launch from another context waits for the application's slice to end
    (milliseconds), a stream memory operation does not. ``attach()`` makes the
    context current on the proxy's thread; ``alongside``: an MPS daemon shares
    the GPU, so the copies run alongside the application's kernels; and
    there a batch goes, when the stream has no work left, to
    ``serve_batches``, a kernel of one warp that stays (launched by
    ``attach``, stopped first by ``close``): no driver call (a
    ``cuStreamQuery`` only after the stream was given work), no launch; a
    batch of up to SERVICE_INLINE records that fetches nothing is complete
    once ``settled`` says so, any other once the call returns, and every
    call that gives the stream work waits for the kernel's batches first (one
    order); ``close()`` releases it all;
    ``counts()`` says how many batches went each way."""

    def __init__(self, heap):
        from .._transport import _engine

        self._undo = UndoStack()

        def load():  # (the stream and the module go with the context)
            stream = call("cuStreamCreate", cu.CUstream_flags.CU_STREAM_NON_BLOCKING)
            module = call("cuModuleLoadData", _batch_source())
            function = call("cuModuleGetFunction", module, b"apply_batch")
            call("cuFuncLoad", function)
            self._serve = call("cuModuleGetFunction", module, b"serve_batches")
            call("cuFuncLoad", self._serve)
            words = _engine.PEND_MAX * _engine.PEND_WORDS
            events = [call("cuEventCreate", cu.CUevent_flags.CU_EVENT_DISABLE_TIMING)
                      for _ in range(_engine.MARKS)]  # (they go with the context)
            device = call("cuCtxGetDevice")
            return (stream, function, events, *_host_buffer(self._undo, 8 * words),
                    _memops_supported(device),
                    bool(_attribute(device, "CU_DEVICE_ATTRIBUTE_MPS_ENABLED")))

        try:
            self._context, (stream, function, events, pend, device_pend,
                            (writes, reductions), self.alongside) = _own_context(self._undo, load)
            self._events = np.array([int(e) for e in events], np.uint64)
            # the kernel's two parameters, and the pointers to them cuLaunchKernel takes
            self._args = (ctypes.c_uint64 * 2)(device_pend, 0)
            self._params = (ctypes.c_void_p * 2)(ctypes.addressof(self._args),
                                                 ctypes.addressof(self._args) + 8)
            # a batch's stream memory operations, and how many batches went each way
            self._memops = np.zeros((_engine.PEND_MAX, MEMOP_WORDS), np.uint64)
            self._copy2d, copy2d_where = _copy2d_template()
            self._counts = np.zeros(COUNTS, np.int64)
            templates, where = _memop_templates()
            if not reductions:
                where[2:] = -1
            driver = _driver()
            writes = writes and driver[-1] is not None
            service = self._service_block(device_pend) if self.alongside else (0, 0)
            self._keep = _functions(
                driver, int(stream), int(function), ctypes.addressof(self._params),
                ctypes.addressof(self._args) + 8, self._memops.ctypes.data if writes else 0,
                templates, where, self._counts.ctypes.data, self._events.ctypes.data,
                self._copy2d.ctypes.data, copy2d_where,
                LAUNCH_MIN if self.alongside else _engine.PEND_MAX + 1, pend.ctypes.data,
                *service, heap=(heap.base, heap.base + heap.capacity))
            copy_in, copy_out, apply, settled, mark, reached, passed = self._keep
            self.target = _engine.Target(
                _engine.COPY_IN(copy_in.address), _engine.COPY_OUT(copy_out.address),
                _engine.APPLY(apply.address), _engine.SETTLED(settled.address),
                _engine.MARK(mark.address), _engine.MARK(reached.address),
                _engine.MARK(passed.address), heap.base,
                pend.view(np.int64).reshape(_engine.PEND_MAX, _engine.PEND_WORDS))
        except BaseException:
            self._undo.unwind()
            raise

    def _service_block(self, device_pend):
        """``serve_batches``' control block and stream (it starts in
        ``attach``): (the block's host address, the stream)."""
        control, on_device = _host_buffer(self._undo, SERVICE_BYTES)
        control[:] = 0
        call("cuCtxPushCurrent", self._context)
        try:
            stream = call("cuStreamCreate", cu.CUstream_flags.CU_STREAM_NON_BLOCKING)
        finally:
            call("cuCtxPopCurrent")
        self._service = (control.view(np.uint64), stream, device_pend, on_device)
        return control.ctypes.data, int(stream)

    def _start_service(self):
        """Launch ``serve_batches``, reading records where ``apply_batch``
        does; ``close`` stops it before it unregisters or frees anything (the
        loop's buffers are page-locked before: that waits for the context's
        kernels). Until it says it runs, batches go the stream's way."""
        words, stream, device_pend, on_device = self._service
        args = (ctypes.c_uint64 * 2)(device_pend, on_device)
        params = (ctypes.c_void_p * 2)(ctypes.addressof(args), ctypes.addressof(args) + 8)
        call("cuLaunchKernel", self._serve, 1, 1, 1, SERVICE_THREADS, 1, 1, 0, stream,
             ctypes.addressof(params), 0)

        def stop():
            words[0] = SERVICE_STOP  # (no batch is left: the loop has ended)
            call("cuStreamSynchronize", stream)  # (the proxy's context is current)
        self._undo.push(call, "cuCtxPopCurrent")
        self._undo.push(stop)
        self._undo.push(call, "cuCtxPushCurrent", self._context)

    def counts(self):
        """Batches of atomics and signals applied so far: (as stream memory
        operations, by ``apply_batch`` or ``serve_batches``)."""
        return int(self._counts[0]), int(self._counts[1])

    def attach(self):
        call("cuCtxSetCurrent", self._context)
        if self.alongside:
            self._start_service()

    def pin(self, *arrays):
        """Page-lock the host memory of ``arrays`` (the loop's buffers that the
        copies read and write) until ``close``: the copy engine then reads and
        writes them directly, and no copy waits for the driver's staging."""
        call("cuCtxPushCurrent", self._context)
        try:
            for array in arrays:
                call("cuMemHostRegister", array.ctypes.data, array.nbytes,
                     cu.CU_MEMHOSTREGISTER_PORTABLE)
                self._undo.push(call, "cuMemHostUnregister", array.ctypes.data)
        finally:
            call("cuCtxPopCurrent")

    def close(self):
        self._undo.unwind()


#: the driver's C functions the target calls, as ctypes types
_U64, _U32, _I32 = ctypes.c_uint64, ctypes.c_uint, ctypes.c_int
DRIVER = {"cuMemcpyHtoDAsync_v2": ctypes.CFUNCTYPE(_I32, _U64, _U64, _U64, _U64),
          "cuMemcpy2DAsync_v2": ctypes.CFUNCTYPE(_I32, _U64, _U64),
          "cuMemcpyDtoHAsync_v2": ctypes.CFUNCTYPE(_I32, _U64, _U64, _U64, _U64),
          "cuStreamSynchronize": ctypes.CFUNCTYPE(_I32, _U64),
          "cuLaunchKernel": ctypes.CFUNCTYPE(_I32, _U64, _U32, _U32, _U32, _U32, _U32, _U32,
                                             _U32, _U64, _U64, _U64),
          "cuStreamQuery": ctypes.CFUNCTYPE(_I32, _U64),
          "cuEventRecord": ctypes.CFUNCTYPE(_I32, _U64, _U64),
          "cuEventSynchronize": ctypes.CFUNCTYPE(_I32, _U64),
          "cuEventQuery": ctypes.CFUNCTYPE(_I32, _U64),
          "cuStreamBatchMemOp_v2": ctypes.CFUNCTYPE(_I32, _U64, _U32, _U64, _U32)}
#: what cuStreamQuery and cuEventQuery return while the work is still running
_NOT_READY = 600
#: what a batch for ``serve_batches`` returns if the kernel has stopped
#: (CUDA_ERROR_UNKNOWN)
_SERVICE_GONE = 999
#: CUDA_ERROR_INVALID_VALUE: what ``apply`` returns for a record outside the heap
_INVALID_VALUE = 1


def _driver():
    """DRIVER's functions from libcuda, in its order (None for a stream memory
    operations' function the driver lacks)."""
    lib = ctypes.CDLL("libcuda.so.1")
    found = []
    for name, kind in DRIVER.items():
        try:
            found.append(kind((name, lib)))
        except AttributeError:
            if name != "cuStreamBatchMemOp_v2":
                raise
            found.append(None)
    return tuple(found)


def _functions(driver, stream, function, params, count_at, memops_at, templates, where,
               counts_at, events_at, copy2d_at, copy2d_where, launch_min, pend_at, service_at,
               service_stream, heap=(0, (1 << 63) - 1)):
    """The Target's C functions (numba cfuncs), calling ``driver`` (DRIVER's
    functions, in its order), for ``stream`` and the
    ``apply_batch`` kernel ``function``, launched with the parameter pointers
    at ``params``; ``count_at`` is where its record count goes; ``events_at``
    holds MARKS events (``mark`` records one, ``reached`` waits for it,
    ``passed`` asks whether it has happened).
    Copies into the heap return once asked (complete once settled); one of
    several runs is a 2D copy, its parameters built at ``copy2d_at`` (a
    ``_copy2d_template``; ``copy2d_where`` where its fields go). A batch goes
    as stream memory operations, built at ``memops_at`` (0: never) from
    ``templates`` (``_memop_templates``, ``where`` -1 for those the GPU does
    not take), where each of its records is one and it has fewer than
    ``launch_min`` records; ``counts_at`` (COUNTS int64) counts the
    batches each way (two) and says, in a third, whether writes of an
    earlier batch may not have landed yet (nothing then orders a reduction
    after them: it goes to the kernel), in a fourth whether the stream
    may have work left, and counts in a fifth the looks that found the
    resident kernel behind (it is asked whether it still runs now and then).
    Where ``service_at`` is not 0 (the
    control block of ``serve_batches``, running on ``service_stream``), a
    batch at ``pend_at`` goes to it instead when the stream has nothing left
    to do (the kernel's writes would not be ordered after its work), where
    every record's address lies in ``heap`` (its first and end address): an
    address the kernel cannot write would stop it and spoil the proxy's
    context, where the driver refuses a stream memory operation's."""
    from numba import carray, cfunc, njit, types
    from numba.core.extending import intrinsic

    from .._transport._engine import PEND_MAX, PEND_WORDS, _fence
    from .._transport._engine import fetches as request_fetches

    htod, htod2d, dtoh, synchronize, launch, query, record, wait_event, ask_event, batch = \
        driver
    heap_first, heap_end = heap
    if batch is None:  # (never called: memops_at is 0; the function still compiles)
        batch = DRIVER["cuStreamBatchMemOp_v2"](lambda *args: 1)
    kinds = (_ring.SIGNAL, _ring.ATOMIC)

    @intrinsic
    def pointer(typingctx, address, like):
        """``address`` as a pointer to values of ``like``'s type."""
        target = types.CPointer(like)

        def codegen(context, builder, signature, args):
            return builder.inttoptr(args[0], context.get_value_type(target))
        return target(address, like), codegen

    @njit
    def counts():
        """The Target's counts (COUNTS int64, at ``counts_at``)."""
        return carray(pointer(np.uint64(counts_at), np.int64(0)), COUNTS)

    @njit
    def unlanded(flag):
        """Record (the third count) whether writes asked of the stream may not
        have landed yet."""
        counts()[2] = flag

    @njit
    def asked(flag):
        """Record (the fourth count) whether the stream may have work left:
        set by each call that gives it some, cleared once it is seen idle."""
        counts()[3] = flag

    @njit
    def seen_idle():
        """Record that the stream has no work left: nothing it was asked to
        write is still on its way."""
        unlanded(0)
        asked(0)

    @njit
    def idle():
        """Whether the stream has no work left (asked only when it may)."""
        if counts()[3] == 0:
            return True
        if query(stream) != 0:
            return False
        seen_idle()
        return True

    @njit
    def synchronized(rc):
        """Synchronize the stream after a call that returned ``rc``: what it
        returns; once it has, no earlier write is still on its way."""
        if rc != 0:
            return rc
        rc = synchronize(stream)
        if rc == 0:
            seen_idle()
        return rc

    @njit
    def event(k):
        return carray(pointer(np.uint64(events_at), np.uint64(0)), k + 1)[k]

    @njit
    def control():
        return carray(pointer(np.uint64(service_at), np.uint64(0)), SERVICE_BYTES // 8)

    @njit
    def running():
        """Whether ``serve_batches`` has said it runs."""
        _fence()
        return control()[SERVICE_RUNNING] == 1

    @njit
    def stopped():
        """-1 while ``serve_batches``' stream runs; once it has stopped, its
        error, or CUDA_ERROR_UNKNOWN where it ended without one."""
        rc = query(service_stream)
        return -1 if rc == _NOT_READY else rc if rc != 0 else _SERVICE_GONE

    @njit
    def caught_up(wait):
        """0 once ``serve_batches`` has applied every batch posted (their old
        values written); -1 while it has not, without ``wait``; if it stopped,
        its stream's error (or CUDA_ERROR_UNKNOWN where it ended without
        one). Without the kernel: 0."""
        if service_at == 0:
            return 0
        words = control()
        posted = words[SERVICE_POSTED]
        polls = 0
        while True:
            _fence()
            if words[SERVICE_APPLIED] == posted:
                _fence()  # (the old values are read after it)
                return 0
            if not wait:
                looks = counts()
                looks[4] += 1
                if looks[4] % 4096 != 0:
                    return -1
                return stopped()
            polls += 1
            if polls % 65536 == 0:
                rc = stopped()
                if rc != -1:
                    return rc

    @njit
    def post(records, n, marked):
        """Post the n records to ``serve_batches`` (the kernel has applied
        every earlier batch: the mailbox is free), SERVICE_INLINE or fewer in
        the mailbox itself; ``marked``: their old values to come back marked.
        The batch's number."""
        words = control()
        number = words[SERVICE_POSTED] + np.uint64(1)
        if number == np.uint64(0xFFFF_FFFF):
            number = np.uint64(1)
        mark = number << np.uint64(32)
        low = np.uint64(0xFFFF_FFFF)
        for k in range(SERVICE_INLINE):
            at = 1 + k * MAIL_RECORD
            if k < n and n <= SERVICE_INLINE:
                for j in range(4):
                    bits = np.uint64(records[k, j])
                    if j == 1:  # (the code: one word)
                        words[at + 2] = mark | (bits & low)
                    else:
                        half = at + (0 if j == 0 else 2 * j - 1)
                        words[half] = mark | (bits & low)
                        words[half + 1] = mark | (bits >> np.uint64(32))
            else:
                for j in range(MAIL_RECORD):
                    words[at + j] = mark
        if marked:  # (no word keeps a number from 2^32 batches ago)
            for k in range(2 * n):
                words[SERVICE_OLD + k] = 0
        _fence()  # (a larger batch's records before the word that posts it)
        words[0] = mark | np.uint64(n) | np.uint64(SERVICE_MARKED if marked else 0)
        words[SERVICE_POSTED] = number
        return number

    @njit
    def in_heap(records, n):
        for i in range(n):
            if records[i, 0] < heap_first or records[i, 0] >= heap_end:
                return False
        return True

    @njit
    def fetching(records, n):
        """How many of the n records fetch."""
        found = 0
        for i in range(n):
            if request_fetches(records[i, 1]):
                found += 1
        return found

    @njit
    def answered(records, n, number):
        """0 once ``serve_batches`` has written the old values of batch
        ``number`` (n records, all fetching) marked, each then put into its
        record; if the kernel stopped first, its stream's error (or
        CUDA_ERROR_UNKNOWN)."""
        words = control()
        low, mark = np.uint64(0xFFFF_FFFF), np.uint64(number)
        polls = 0
        while True:
            _fence()
            whole = True
            for i in range(n):
                for half in range(2):
                    if words[SERVICE_OLD + 2 * i + half] >> np.uint64(32) != mark:
                        whole = False
            if whole:
                for i in range(n):
                    old = (words[SERVICE_OLD + 2 * i] & low) \
                        | (words[SERVICE_OLD + 2 * i + 1] << np.uint64(32))
                    records[i, 4] = np.int64(old)
                return 0
            polls += 1
            if polls % 65536 == 0:
                rc = stopped()
                if rc != -1:
                    return rc

    @cfunc(types.int32(types.uint64, types.uint64, types.uint64, types.uint64, types.uint64))
    def copy_in(dst, src, n, pitch, rows):
        rc = caught_up(True)  # (the copy goes after the kernel's batches)
        if rc != 0:
            return rc
        if rows == 1:
            rc = htod(dst, src, n, stream)
        else:  # (the driver takes the parameters in at the call)
            copy = carray(pointer(np.uint64(copy2d_at), np.uint64(0)), COPY2D_WORDS)
            values = (src, pitch, dst, n, n, rows)
            for k in range(6):
                copy[copy2d_where[k]] = values[k]
            rc = htod2d(np.uint64(copy2d_at), stream)
        if rc == 0:  # (its bytes land once settled says so)
            unlanded(1)
            asked(1)
        return rc

    @cfunc(types.int32(types.int64))
    def mark(k):
        rc = caught_up(True)  # (the mark goes after the kernel's batches)
        return rc if rc != 0 else record(event(k), stream)

    @cfunc(types.int32(types.int64))
    def reached(k):
        return wait_event(event(k))

    @cfunc(types.int32(types.int64))
    def passed(k):
        rc = ask_event(event(k))
        return -1 if rc == _NOT_READY else rc

    @cfunc(types.int32(types.uint64, types.uint64, types.uint64, types.int64))
    def copy_out(dst, src, n, wait):
        rc = caught_up(True)  # (a get sees the kernel's batches before it)
        if rc != 0:
            return rc
        rc = dtoh(dst, src, n, stream)
        asked(1)
        return synchronized(rc) if wait else rc

    @njit
    def memop(code):
        """The MEMOPS index of a record's operation, or -1 (it fetches, or is
        an operation no stream memory operation does)."""
        kind, dtype, op = code & 255, (code >> 8) & 255, (code >> 16) & 255
        if kind == kinds[0]:  # a signal: set, add (max: no)
            k = 1 if op == 0 else 3 if op == 1 else -1
        elif kind == kinds[1] and (code >> 24) & 1 == 0:
            wide = 0 if dtype == 0 or dtype == 1 or dtype == 4 else 1
            if op == 1:  # set: the bits, of any type
                k = wide
            elif dtype <= 3 and op >= 4 and op <= 6:  # add, and, or on integers
                k = 2 * (op - 3) + wide
            else:
                k = -1
        else:
            k = -1
        return k if k >= 0 and where[k, 0] >= 0 else -1

    @njit
    def as_memops(records, n, wrote):
        """Build the batch's stream memory operations; False if one record is
        not such an operation, or is a reduction after a write, of this batch
        or (``wrote``) an earlier one not yet known to have landed (a write has
        a system-wide fence before it; nothing documented orders a reduction
        after the writes before it, and a signal added after its data must
        not be seen first: the kernel's release then)."""
        out = carray(pointer(np.uint64(memops_at), np.uint64(0)), (n, templates.shape[1]))
        for i in range(n):
            k = memop(records[i, 1])
            if k < 0 or (k >= 2 and wrote):
                return False
            wrote = wrote or k < 2
            out[i, :] = templates[k]
            out[i, where[k, 0]] = np.uint64(records[i, 0])
            value = np.uint64(records[i, 2])
            out[i, where[k, 1]] = value if k % 2 == 1 else value & np.uint64(0xFFFFFFFF)
            records[i, 4] = 0
        return True

    @cfunc(types.int32(types.uint64, types.int64))
    def apply(address, n):
        records = carray(pointer(address, np.int64(0)), (n, PEND_WORDS))
        tally = counts()
        rc = caught_up(True)  # (what follows goes after the kernel's batches)
        if rc != 0:
            return rc
        if (service_at != 0 and address == pend_at and n <= PEND_MAX and running()
                and idle()):
            if not in_heap(records, n):
                return _INVALID_VALUE
            tally[1] += 1
            fetch = fetching(records, n)
            marked = n <= SERVICE_INLINE and fetch == n
            number = post(records, n, marked)
            # (complete once settled says so; a fetch, or a batch whose records
            # the kernel reads where the next batch goes, once it returns)
            if marked:
                return answered(records, n, number)
            if n > SERVICE_INLINE or fetch > 0:
                return caught_up(True)
            return 0
        memops = memops_at != 0 and n < launch_min and as_memops(records, n, tally[2] != 0)
        if memops:
            # (the driver takes the operations in at the call: the records and
            # the operations may be reused at once; complete once settled says so)
            tally[0] += 1
            asked(1)
            for i in range(n):  # (its writes land once settled says so)
                if memop(records[i, 1]) < 2:
                    tally[2] = 1
            rc = 0
            for first in range(0, n, MEMOP_CALL):  # (one call takes fewer than 256)
                if rc == 0:
                    rc = batch(stream, min(MEMOP_CALL, n - first),
                               memops_at + 8 * MEMOP_WORDS * first, 0)
            return rc
        tally[1] += 1
        carray(pointer(np.uint64(count_at), np.int64(0)), 1)[0] = n
        return synchronized(launch(function, 1, 1, 1, 1, 1, 1, 0, stream, params, 0))

    @cfunc(types.int32())
    def settled():
        rc = caught_up(False)
        if rc != 0:
            return rc
        if counts()[3] == 0:
            return 0  # (the stream was given no work since it was seen idle)
        rc = query(stream)
        if rc == 0:
            seen_idle()
        return -1 if rc == _NOT_READY else rc

    return copy_in, copy_out, apply, settled, mark, reached, passed
