"""Intrinsics over ``_ptx`` that the device API's Python-level implementations
call: addresses, copies, system-scope loads and stores, fences, timers."""

from llvmlite import ir
from numba.cuda import types
from numba.cuda.extending import intrinsic

from .. import _device_api as api
from . import _ptx
from ._addressing import debug_enabled, fail, peer_address

_i64 = ir.IntType(64)
_void = ir.VoidType()


def array_pointer(context, builder, arrty, value):
    array = context.make_array(arrty)(context, builder, value=value)
    return builder.ptrtoint(array.data, _i64)


def as_pe(context, builder, value, ty):
    return context.cast(builder, value, ty, types.int64)


@intrinsic
def _addr(typingctx, arr):
    def codegen(context, builder, sig, args):
        return array_pointer(context, builder, sig.args[0], args[0])
    return types.int64(arr), codegen


@intrinsic
def _remote(typingctx, arr, pe, name):
    """The address of ``arr`` on PE ``pe``; ``name`` (a literal) is the API
    function that debug-mode checks name."""
    def codegen(context, builder, sig, args):
        local = array_pointer(context, builder, sig.args[0], args[0])
        return peer_address(context, builder, local, as_pe(context, builder, args[1], sig.args[1]),
                            sig.args[2].literal_value)
    if not isinstance(name, types.StringLiteral):
        return None
    return types.int64(arr, pe, name), codegen


#: 16-byte vectors as two 64-bit lanes: each lane is one access, so an element
#: of up to 8 bytes inside a vector is never seen half written
_VEC16 = ir.VectorType(_i64, 2)


@intrinsic
def _copy16(typingctx, dst, src):
    """Copy 16 bytes with one vector load and one vector store."""
    def codegen(context, builder, sig, args):
        source = builder.inttoptr(args[1], _VEC16.as_pointer())
        dest = builder.inttoptr(args[0], _VEC16.as_pointer())
        builder.store(builder.load(source, align=16), dest, align=16)
        return context.get_dummy_value()
    return types.void(dst, src), codegen


_PAIR = types.UniTuple(types.int64, 2)


@intrinsic
def _load16(typingctx, address):
    """One 16-byte vector load; its two 64-bit lanes as a pair, for code that
    stores the same vector to several places (``_store16``)."""
    def codegen(context, builder, sig, args):
        vector = builder.load(builder.inttoptr(args[0], _VEC16.as_pointer()), align=16)
        pair = context.get_value_type(_PAIR)(ir.Undefined)
        for lane in range(2):
            pair = builder.insert_value(pair, builder.extract_element(vector, _i64(lane)), lane)
        return pair
    return _PAIR(address), codegen


@intrinsic
def _store16(typingctx, address, pair):
    """One 16-byte vector store of a pair from ``_load16``."""
    def codegen(context, builder, sig, args):
        vector = ir.Constant(_VEC16, ir.Undefined)
        for lane in range(2):
            vector = builder.insert_element(vector, builder.extract_value(args[1], lane),
                                            _i64(lane))
        builder.store(vector, builder.inttoptr(args[0], _VEC16.as_pointer()), align=16)
        return context.get_dummy_value()
    if pair != _PAIR:
        return None
    return types.void(address, pair), codegen


def _vectors(count):
    """An intrinsic that copies ``count`` 16-byte vectors ``step`` bytes apart:
    every load is issued before the first store, so a thread keeps
    ``16 * count`` bytes in flight (a loop of single copies keeps 16: a store
    to a generic address may alias the next load, so that load waits)."""
    @intrinsic
    def copy(typingctx, dst, src, step):
        def codegen(context, builder, sig, args):
            dst, src, step = args
            offsets = [builder.mul(step, ir.Constant(_i64, k)) for k in range(count)]
            values = [builder.load(builder.inttoptr(builder.add(src, o), _VEC16.as_pointer()),
                                   align=16) for o in offsets]
            for value, o in zip(values, offsets):
                builder.store(value, builder.inttoptr(builder.add(dst, o),
                                                      _VEC16.as_pointer()), align=16)
            return context.get_dummy_value()
        return types.void(dst, src, step), codegen
    return copy


_copy16x2, _copy16x3, _copy16x4 = _vectors(2), _vectors(3), _vectors(4)


def _scalar_access(width):
    """Intrinsics for ``width``-byte pieces at integer addresses: a copy, and
    a load (zero-extended to int64) and a store (of an int64's low bytes) for
    code that issues several loads before their stores."""
    llty = ir.IntType(width * 8)

    def load(builder, address):
        return builder.load(builder.inttoptr(address, llty.as_pointer()), align=width)

    def store(builder, address, value):
        builder.store(value, builder.inttoptr(address, llty.as_pointer()), align=width)

    @intrinsic
    def copy(typingctx, dst, src):
        def codegen(context, builder, sig, args):
            store(builder, args[0], load(builder, args[1]))
            return context.get_dummy_value()
        return types.void(dst, src), codegen

    @intrinsic
    def load_int(typingctx, address):
        def codegen(context, builder, sig, args):
            value = load(builder, args[0])
            return value if width == 8 else builder.zext(value, _i64)
        return types.int64(address), codegen

    @intrinsic
    def store_int(typingctx, address, value):
        def codegen(context, builder, sig, args):
            value = context.cast(builder, args[1], sig.args[1], types.int64)
            store(builder, args[0], value if width == 8 else builder.trunc(value, llty))
            return context.get_dummy_value()
        return types.void(address, value), codegen
    return copy, load_int, store_int


_copy8, _load8, _store8 = _scalar_access(8)
_copy4, _load4, _store4 = _scalar_access(4)
_copy2, _load2, _store2 = _scalar_access(2)
_copy1, _load1, _store1 = _scalar_access(1)


@intrinsic
def _load_acquire(typingctx, like, address):
    """Load ``like.dtype`` at ``address`` with ld.acquire.sys."""
    def codegen(context, builder, sig, args):
        llty = context.get_value_type(sig.return_type)
        return _ptx.load(builder, args[1], llty, "acquire")
    return like.dtype(like, address), codegen


def _signal_codegen(context, builder, sig, args, scopes):
    """Update the signal at ``args[0]``: SIGNAL_SET stores, SIGNAL_ADD adds; any
    other sig_op (only possible when it is not a constant) stops the kernel.
    ``scopes(emit)`` calls ``emit(semantics)`` once for each way the update is
    ordered (it may branch between them)."""
    value = context.cast(builder, args[1], sig.args[1], types.uint64)
    op = context.cast(builder, args[2], sig.args[2], types.int64)
    is_set = builder.icmp_unsigned("==", op, ir.Constant(_i64, api.SIGNAL_SET))
    is_add = builder.icmp_unsigned("==", op, ir.Constant(_i64, api.SIGNAL_ADD))

    def emit(sem):
        with builder.if_else(is_set) as (then, otherwise):
            with then:
                _ptx.asm(builder, _void, f"st.{sem}.b64 [$0], $1;", "l,l", [args[0], value])
            with otherwise:
                with builder.if_else(is_add, likely=True) as (add, neither):
                    with add:
                        _ptx.asm(builder, _void, f"red.{sem}.add.u64 [$0], $1;", "l,l",
                                 [args[0], value])
                    with neither:
                        _refuse(context, builder, "numba-shmem: a signal got sig_op=%ld, which "
                                "is not shmem.SIGNAL_SET or shmem.SIGNAL_ADD", [op])
    scopes(emit)
    return context.get_dummy_value()


@intrinsic
def _signal_update(typingctx, address, value, sig_op):
    """signal_op: a relaxed atomic update at system scope (st/red.relaxed.sys),
    like the other atomics; ``fence`` orders it after earlier puts."""
    def codegen(context, builder, sig, args):
        return _signal_codegen(context, builder, sig, args, lambda emit: emit("relaxed.sys"))
    return types.void(address, value, sig_op), codegen


def _by_scope(context, builder, emit):
    """``emit(scope)`` for the narrowest scope that covers every PE of the job:
    ``gpu`` when they all run on this GPU (an ordering or completion there
    waits for this GPU's memory only, about 0.3 us less per fence on an H200),
    else ``sys``. One uniform branch on the device state."""
    from ._state import load_field

    one_gpu = builder.icmp_unsigned("!=", load_field(context, builder, "one_gpu"),
                                    ir.Constant(ir.IntType(32), 0))
    with builder.if_else(one_gpu, likely=True) as (gpu, system):
        with gpu:
            emit("gpu")
        with system:
            emit("sys")


@intrinsic
def _signal_release(typingctx, address, value, sig_op):
    """The signal of put_signal: a release update, so that the data this thread
    wrote (or saw written, through a block or warp synchronization) is visible
    to whoever acquires the signal, at the scope that covers every PE."""
    def codegen(context, builder, sig, args):
        def scopes(emit):
            _by_scope(context, builder, lambda scope: emit(f"release.{scope}"))
        return _signal_codegen(context, builder, sig, args, scopes)
    return types.void(address, value, sig_op), codegen


def _refuse(context, builder, message, values):
    """Stop the kernel: with the message in debug mode, silently otherwise."""
    if debug_enabled():
        fail(context, builder, message, values)
    else:
        _ptx.trap(builder)


@intrinsic
def _valid_cmp(typingctx, cmp):
    """Whether ``cmp`` is one of the CMP_* codes."""
    def codegen(context, builder, sig, args):
        code = context.cast(builder, args[0], sig.args[0], types.int64)
        codes = [getattr(api, n) for n in ("CMP_EQ", "CMP_NE", "CMP_GT", "CMP_LE", "CMP_LT",
                                           "CMP_GE")]
        assert sorted(codes) == list(range(len(codes)))
        return builder.icmp_unsigned("<", code, ir.Constant(_i64, len(codes)))
    return types.boolean(cmp), codegen


@intrinsic
def _compare(typingctx, value, cmp, target):
    """``value <cmp> target`` for a CMP_* code known only at run time."""
    def codegen(context, builder, sig, args):
        vty = sig.args[0]
        target = context.cast(builder, args[2], sig.args[2], vty)
        signed = getattr(vty, "signed", True)
        code = context.cast(builder, args[1], sig.args[1], types.int64)
        result = ir.Constant(ir.IntType(1), 0)
        for name, op in (("CMP_EQ", "=="), ("CMP_NE", "!="), ("CMP_GT", ">"),
                         ("CMP_LE", "<="), ("CMP_LT", "<"), ("CMP_GE", ">=")):
            if isinstance(vty, types.Float):
                hit = builder.fcmp_ordered(op, args[0], target)
            elif signed:
                hit = builder.icmp_signed(op, args[0], target)
            else:
                hit = builder.icmp_unsigned(op, args[0], target)
            chosen = builder.icmp_unsigned("==", code, ir.Constant(_i64, getattr(api, name)))
            result = builder.or_(result, builder.and_(chosen, hit))
        return result
    return types.boolean(value, cmp, target), codegen


@intrinsic
def _fence(typingctx):
    """fence.acq_rel: orders this thread's earlier puts, atomics and signals
    before its later ones, toward every PE."""
    def codegen(context, builder, sig, args):
        _by_scope(context, builder, lambda scope: _ptx.fence(builder, "acq_rel", scope))
        return context.get_dummy_value()
    return types.void(), codegen


@intrinsic
def _quiet(typingctx):
    """fence.sc: also waits until they are performed at every PE."""
    def codegen(context, builder, sig, args):
        _by_scope(context, builder, lambda scope: _ptx.fence(builder, "sc", scope))
        return context.get_dummy_value()
    return types.void(), codegen


@intrinsic
def _nanosleep(typingctx, nanoseconds):
    def codegen(context, builder, sig, args):
        _ptx.nanosleep(builder, context.cast(builder, args[0], sig.args[0], types.uint32))
        return context.get_dummy_value()
    return types.void(nanoseconds), codegen


@intrinsic
def _now(typingctx):
    def codegen(context, builder, sig, args):
        return _ptx.globaltimer(builder)
    return types.int64(), codegen


@intrinsic
def _per_call(typingctx, value):
    """``value`` (an integer of 32 or 64 bits), computed anew at each call
    (``_ptx.per_call``)."""
    if not isinstance(value, types.Integer) or value.bitwidth not in (32, 64):
        return None
    def codegen(context, builder, sig, args):
        return _ptx.per_call(builder, args[0])
    return value(value), codegen


@intrinsic
def _trap(typingctx):
    def codegen(context, builder, sig, args):
        _ptx.trap(builder)
        return context.get_dummy_value()
    return types.void(), codegen


@intrinsic
def _store_relaxed(typingctx, address, like, value):
    def codegen(context, builder, sig, args):
        value = context.cast(builder, args[2], sig.args[2], sig.args[1].dtype)
        _ptx.store(builder, args[0], value, "relaxed")
        return context.get_dummy_value()
    return types.void(address, like, value), codegen


@intrinsic
def _load_relaxed(typingctx, like, address):
    def codegen(context, builder, sig, args):
        return _ptx.load(builder, args[1], context.get_value_type(sig.return_type), "relaxed")
    return like.dtype(like, address), codegen


def state_word(field, per_call=False):
    """An intrinsic that reads the device state's 64-bit ``field`` as an int64
    (``per_call``: at each call, ``load_field``)."""
    @intrinsic
    def read(typingctx):
        def codegen(context, builder, sig, args):
            from ._state import load_field

            return load_field(context, builder, field, per_call)
        return types.int64(), codegen
    return read


#: This PE's heap address; the barrier slots are at its start.
_heap_base = state_word("heap_base")
#: The bytes of each PE's heap slot (this PE's heap lies in the first of them).
_heap_size = state_word("heap_size")


@intrinsic
def _peer_of(typingctx, address, pe, name):
    """``address`` (on this PE's heap) translated to PE ``pe``."""
    def codegen(context, builder, sig, args):
        return peer_address(context, builder, args[0], as_pe(context, builder, args[1], sig.args[1]),
                            sig.args[2].literal_value)
    if not isinstance(name, types.StringLiteral):
        return None
    return types.int64(address, pe, name), codegen


@intrinsic
def _load_u64(typingctx, address):
    """ld.acquire.sys of a uint64 (barrier slots and epoch)."""
    def codegen(context, builder, sig, args):
        return _ptx.load(builder, args[0], _i64, "acquire")
    return types.uint64(address), codegen


@intrinsic
def _next_epoch(typingctx, address):
    """Add 1 to this PE's barrier epoch at ``address`` (atom.add at GPU scope:
    only this PE's kernels touch it) and return the new value."""
    def codegen(context, builder, sig, args):
        old = _ptx.asm(builder, _i64, "atom.relaxed.gpu.add.u64 $0, [$1], 1;", "=l,l",
                       [args[0]])
        return builder.add(old, _i64(1))
    return types.uint64(address), codegen


@intrinsic
def _publish_epoch(typingctx, address, value):
    """red.relaxed.sys.max.u64: raise a barrier slot to ``value``, never lower
    it. Relaxed: the barrier fences once before it publishes to every member
    (one fence instead of a release on each slot)."""
    def codegen(context, builder, sig, args):
        value = context.cast(builder, args[1], sig.args[1], types.uint64)
        _ptx.asm(builder, _void, "red.relaxed.sys.max.u64 [$0], $1;", "l,l", [args[0], value])
        return context.get_dummy_value()
    return types.void(address, value), codegen


def _leaving(per_call):
    """An intrinsic: whether this PE has left the job (its host is exiting),
    a word of mapped host memory that the host sets and waits read at system
    scope; its address read at each call where ``per_call``
    (``load_field``)."""
    @intrinsic
    def left(typingctx):
        def codegen(context, builder, sig, args):
            from ._state import load_field

            word = _ptx.load(builder, load_field(context, builder, "leaving", per_call),
                             ir.IntType(32), "relaxed")
            return builder.icmp_unsigned("!=", word, ir.Constant(ir.IntType(32), 0))
        return types.boolean(), codegen
    return left


_left = _leaving(False)


@intrinsic
def _stop_for(typingctx, pe):
    """Stop the kernel: the PE ``pe`` it waits for has left the job. The word
    after the leaving flag (mapped host memory) takes ``pe + 1`` first, so that
    the host can say so once the kernel has failed (``Runtime.close``); no
    printf in the waits themselves (its call in a spin loop cost a barrier
    0.4 us on an H200)."""
    def codegen(context, builder, sig, args):
        from ._state import load_field

        address = builder.add(load_field(context, builder, "leaving"), ir.Constant(_i64, 4))
        value = builder.add(builder.trunc(context.cast(builder, args[0], sig.args[0],
                                                       types.int64), ir.IntType(32)),
                            ir.Constant(ir.IntType(32), 1))
        _ptx.store(builder, address, value, "relaxed")
        _ptx.trap(builder)
        return context.get_dummy_value()
    return types.void(pe), codegen


@intrinsic
def _mark_cooperative(typingctx):
    """Make numba launch this kernel cooperatively: a grid too large to be
    resident then fails at launch instead of deadlocking in a barrier."""
    def codegen(context, builder, sig, args):
        context.active_code_library.use_cooperative = True
        return context.get_dummy_value()
    return types.void(), codegen


@intrinsic
def _team_entry(typingctx, team, k):
    """Entry ``k`` of ``team``'s row of the team table: 0 size, 1 this PE's
    index (-1: not a member), 2 + j the world number of member j. A handle
    outside the table (TEAM_INVALID among them) reads as -1, never past it."""
    def codegen(context, builder, sig, args):
        from .._heap._symmetric import MAX_TEAMS
        from ._state import load_field, load_table_entry

        npes = builder.sext(load_field(context, builder, "n_pes"), _i64)
        team = context.cast(builder, args[0], sig.args[0], types.int64)
        entry = context.cast(builder, args[1], sig.args[1], types.int64)
        valid = builder.icmp_unsigned("<", team, _i64(MAX_TEAMS))  # also team < 0
        row = builder.select(valid, team, _i64(0))
        index = builder.add(builder.mul(row, builder.add(npes, _i64(2))), entry)
        value = load_table_entry(context, builder, "teams", index, ir.IntType(32))
        return builder.select(valid, value, ir.Constant(ir.IntType(32), -1))
    return types.int32(team, k), codegen
