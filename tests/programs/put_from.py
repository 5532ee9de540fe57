"""Drive the proxy loop (_transport/_engine.py) by hand, one PE sending to
itself, its heap reached through a Target's functions as a GPU's is: a
kernel's PUT_FROM requests (a put whose data stays in the GPU's heap) are
copied out into the loop's out units, answered DONE once copied (the source
may then change), and sent. Prints ``ok``.

1. A put of two requests of PIECE bytes more than the loop's out units hold
   (the last one half a piece): the loop asks the copies out of as many as
   they hold at once, ahead of forwarding them; it announces none and
   answers none DONE before its copy is done (the mark after it passed), and
   takes the rest once MPI has sent a piece's; the source written again
   after DONE leaves the heap as the put found it. The target's copies out
   are done only at its second ``settled`` or ``passed`` after them, as a
   GPU's may be: data sent before then would be the units' old bytes.
2. A chunk put staged in its slot after them, over the same bytes, lands
   after them (program order).
3. A PUT_FROM whose source is not all in the heap's mapped part is refused
   by the loop itself, answered DONE at once, and nothing is sent.
4. Non-blocking PUT_FROM requests: no DONE; the loop gives each slot back
   once its data is copied out, and the data lands; one whose source is
   outside the heap is refused with its slot given back, no DONE.
5. A PUT_FROM larger than a request may move, or of an op it does not know,
   stops the loop with its reason.
6. A copy out that fails, when asked or once done, stops the loop with its
   reason and the driver's error, before DONE and before anything is sent.
7. MPI failing while a copy out runs (the loop tests the sends before it
   meanwhile: its turns go on) stops the loop with MPI's reason, before DONE.
8. With the out units a window (MPI_Win_allocate), the pieces of step 1
   travel as WINDOW records and no DATA message: the target fetches each
   from the window, and units are taken again only once their put is
   answered (not once its batch is sent); the source written again after
   DONE leaves the heap as the puts found it. A piece the target refuses
   frees its units once answered; non-blocking pieces land from the
   window. Pieces of one unit: as many in flight as there are units, each
   in its own, and a piece of PIECE bytes after them once units are free.
   MPI_Win_sync failing stops the loop with its reason, before DONE and
   before the piece is announced.
9. Staged puts (a group's blocking put copied into a staging segment of the
   heap first): non-blocking PUT_FROMs whose COND is the staging ticket + 1;
   the loop gives the staging segment back (STAGE_FREE) with the slot once
   the copy out is done, not before, and once refused; the data lands; the
   ring's FREED and STAGES_FREED words pass every ticket given back.
10. The heap's extent changing between a copy asked ahead and the piece's
   turn: shrunk past its source, the piece is refused and its units freed
   (no copy left counted: the loop stops when told to); a piece whose
   source is past the extent stops the copies asked ahead (those after it
   wait for it), and once the heap has grown it is copied and lands.
11. The out units' allocator against a model (first fit of consecutive
   free units), over random sequences of pieces taken and given back in any
   order (hypothesis): the same units, never two pieces in one.
12. A request the loop takes is sent before the loop looks at MPI: with a
   batch already waiting to be received, the new request's batch goes first;
   and a batch's answers are sent before the loop takes the next batch.
"""

import ctypes
import tempfile

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi4py import MPI

from numba import carray, cfunc, njit, types

from numba_shmem._sim._target import _FUNCTIONS, function_target
from numba_shmem._transport import _engine, _ring
from numba_shmem._transport._compiled import CompiledProxy
from numba_shmem._transport._mpi_c import MPIC

SLOTS, CHUNK, PIECE = _ring.SLOTS, _ring.CHUNK, _ring.PIECE
comm = MPI.COMM_SELF.Dup()
HEAP = 32 << 20
heap = np.zeros(HEAP, np.uint8)
lock = tempfile.TemporaryFile()
# a copy out asked without waiting is done at the second ``settled`` or
# ``passed`` after it
direct = function_target(heap, lock.fileno())
bytes_at = _FUNCTIONS["bytes_at"]
# the copies asked (then dst, src, n each, from word 8), where to look when
# they are done (a word of the GPU ring: what it held then goes into word 2),
# settled calls while one waited, copies done
LATER_MAX = 2 * _engine.OUT_UNITS
later = np.zeros(8 + 3 * LATER_MAX, np.int64)
LATER = later.ctypes.data


@cfunc(types.int32(types.uint64, types.uint64, types.uint64, types.int64))
def copy_out_later(dst, src, n, wait):
    asked = carray(bytes_at(LATER), 8 * (8 + 3 * LATER_MAX)).view(np.int64)
    if wait:
        carray(bytes_at(dst), n)[:] = carray(bytes_at(src), n)
    else:
        k = asked[0]
        asked[8 + 3 * k], asked[9 + 3 * k], asked[10 + 3 * k] = dst, src, n
        asked[0] = k + 1
    return 0


@njit
def copied_later():
    asked = carray(bytes_at(LATER), 8 * (8 + 3 * LATER_MAX)).view(np.int64)
    if asked[0] == 0:
        return 0
    asked[3] += 1
    if asked[3] % 2 == 1:
        return -1
    for k in range(asked[0]):
        dst, src, n = asked[8 + 3 * k], asked[9 + 3 * k], asked[10 + 3 * k]
        carray(bytes_at(dst), n)[:] = carray(bytes_at(src), n)
    asked[4] += asked[0]
    asked[0] = 0
    if asked[1] != 0:
        asked[2] = carray(bytes_at(asked[1]), 8).view(np.int64)[0]
    return 0


@cfunc(types.int32())
def settled_later():
    return copied_later()


@cfunc(types.int32(types.int64))
def passed_later(k):  # (every copy asked is done: any mark after them has passed)
    return copied_later()


target = direct._replace(
    copy_out=_engine.COPY_OUT(copy_out_later.address),
    settled=_engine.SETTLED(settled_later.address), passed=_engine.MARK(passed_later.address))
host = np.zeros(_engine.HOST_NBYTES, np.uint8)
host.view(np.int64)[_ring.FREE // 8:_ring.FREE // 8 + SLOTS] = np.arange(SLOTS)
gpu = np.zeros(_ring.NBYTES, np.uint8)
gpu.view(np.int64)[_ring.FREE // 8:_ring.FREE // 8 + SLOTS] = np.arange(SLOTS)
s = _engine.state(MPIC(comm), 1, host, heap, np.array([HEAP]), lock.fileno(), -1, gpu,
                  target)
s.ctl[_engine.STOP] = 1  # (serve returns once it has nothing left to do)
gw = s.gw
rng = np.random.default_rng(7)
SOURCE_AT = 16 << 20
source = heap[SOURCE_AT:]  # (the kernel's source array, in the heap)
source[:] = rng.integers(0, 256, source.size, dtype=np.uint8)
want = heap.copy()
posted = [0]


def post(code, offset, nbytes, addr=0):
    t = posted[0]
    d = (t % SLOTS) * 8
    gw[d + 1], gw[d + 2], gw[d + 3], gw[d + 4] = code, 0, offset, nbytes
    gw[d + _ring.ADDR] = addr
    gw[d] = t + 1
    posted[0] = t + 1
    return t


def done(t):
    return gw[_ring.DONE // 8 + t % SLOTS] == t + 1


def drains(state=None):
    """What the first drain that takes or fails returns (a piece waits for
    its copy out, done at the second look), 0 if none does."""
    for _ in range(4):
        n = _engine.drain(s if state is None else state)
        if n != 0:
            return n
    return 0


def finish():
    for _ in range(1000):
        if gw[_ring.COMPLETE // 8] == posted[0]:
            return
        assert _engine.serve(s) == 0, _engine.CALLS[s.ctl[_engine.FAILED_CALL]]
    raise AssertionError(f"{gw[_ring.COMPLETE // 8]} of {posted[0]} tickets complete")


# 1. two pieces more than segments; the source changes once each is DONE
SEGS = _engine.OUT_SEGS
total = (SEGS + 1) * PIECE + PIECE // 2
first = posted[0]
for at in range(0, total, PIECE):
    n = min(PIECE, total - at)
    post(_ring.code(_ring.PUT_FROM), 4096 + at, n, source.ctypes.data + at)
want[4096:4096 + total] = source[:total]
assert _engine.drain(s) == 0 and later[0] == SEGS, later  # (asked together, not yet done)
assert not any(done(first + k) for k in range(SEGS + 2)), "DONE before the copy out"
assert s.ctl[_engine.SENT] == 0 and s.ctl[_engine.OPEN] == 0, "announced before copied out"
assert drains() == _engine.OUT_SEGS
assert [done(first + k) for k in range(SEGS + 2)] == [True] * SEGS + [False] * 2
assert later[4] == SEGS and later[3] == 2, later
source[:SEGS * PIECE] = 0  # (written again: the heap keeps what was put)
want[SOURCE_AT:SOURCE_AT + SEGS * PIECE] = 0
assert (s.ostate != 0).all()  # (every unit: the pieces fill them)

# 2. a chunk put staged in its slot, over the same bytes, after them
t = post(_ring.code(_ring.PUT), 4096 + (SEGS + 1) * PIECE, 100)
stage = _ring.STAGING + (t % SLOTS) * CHUNK
gpu[stage:stage + 100] = 77
want[4096 + (SEGS + 1) * PIECE:4096 + (SEGS + 1) * PIECE + 100] = 77
finish()
assert all(done(first + k) for k in range(SEGS + 2))
assert (s.ostate == 0).all(), "units stayed taken once sent"
wrong = int((heap != want).sum())
assert wrong == 0, f"{wrong} bytes of the heap differ from what the puts left"
assert later[4] == SEGS + 2, later

# 3. a source outside the heap: refused by this PE's loop, answered at once
outside = np.ones(PIECE, np.uint8)
refusals = s.ctl[_engine.REFUSED]
t = post(_ring.code(_ring.PUT_FROM), 0, CHUNK * 4, outside.ctypes.data)
finish()
assert done(t) and s.ctl[_engine.REFUSED] == refusals + 1
assert tuple(s.refusals[refusals, [0, 3, 4, 5, 6]]) == (2 * t + 1, 0, CHUNK * 4,
                                                         _engine.SOURCE, HEAP)
t = post(_ring.code(_ring.PUT_FROM), 0, CHUNK * 4, heap.ctypes.data + HEAP - CHUNK)
finish()  # (its last bytes past the heap's end)
assert done(t) and s.ctl[_engine.REFUSED] == refusals + 2
assert (heap == want).all(), "a refused put changed the heap"
message = CompiledProxy._refusal_message("a kernel's put (ring ticket 7)", 0,
                                         *s.refusals[refusals, 2:])
assert f"this PE's proxy refused it: a put of 32768 bytes reads outside the {HEAP} mapped " \
    "bytes of this PE's heap; check the source array" in message, message

# 4. non-blocking: each slot free once copied out, no DONE, the data lands
nbi = _ring.code(_ring.PUT_FROM, 0, _ring.FROM_NBI)
source[:3 * PIECE] = rng.integers(0, 256, 3 * PIECE, dtype=np.uint8)
want[SOURCE_AT:SOURCE_AT + 3 * PIECE] = source[:3 * PIECE]
tickets = [post(nbi, 4096 + at, min(PIECE, 3 * PIECE - at), source.ctypes.data + at)
           for at in range(0, 3 * PIECE, PIECE)]
assert drains() == 3
assert [gw[_ring.FREE // 8 + t % SLOTS] for t in tickets] == [t + SLOTS for t in tickets]
assert not any(done(t) for t in tickets)
want[4096:4096 + 3 * PIECE] = source[:3 * PIECE]
finish()
assert (heap == want).all(), "a non-blocking put from the heap did not land"
assert not any(done(t) for t in tickets)
refusals = s.ctl[_engine.REFUSED]
t = post(nbi, 0, CHUNK * 4, outside.ctypes.data)
finish()
assert s.ctl[_engine.REFUSED] == refusals + 1 and not done(t)
assert gw[_ring.FREE // 8 + t % SLOTS] == t + SLOTS, "a refused non-blocking put kept its slot"
assert (heap == want).all(), "a refused put changed the heap"

# 5. larger than a request may move: the loop stops, naming it
post(_ring.code(_ring.PUT_FROM), 0, PIECE + 1, source.ctypes.data)
assert _engine.serve(s) == 14 and "malformed request" in _engine.CALLS[14]
s.ctl[_engine.GPU_NEXT] += 1  # (past it: an op no PUT_FROM has, the same)
post(_ring.code(_ring.PUT_FROM, 0, _ring.FROM_NBI + 1), 0, CHUNK * 4, source.ctypes.data)
assert _engine.serve(s) == 14
s.ctl[_engine.GPU_NEXT] += 1


# 6. a copy out that fails (an illegal address: 700), at once or once asked
@cfunc(types.int32(types.uint64, types.uint64, types.uint64, types.int64))
def copy_out_fails(dst, src, n, wait):
    return 700


@cfunc(types.int32())
def settled_fails():
    return 700


@cfunc(types.int32(types.int64))
def passed_fails(k):
    return 700


for failing in ({"copy_out": _engine.COPY_OUT(copy_out_fails.address)},
                {"copy_out": _engine.COPY_OUT(copy_out_later.address),
                 "settled": _engine.SETTLED(settled_fails.address),
                 "passed": _engine.MARK(passed_fails.address)}):
    s = s._replace(**failing)
    s.ctl[_engine.FAILED_CALL] = s.ctl[_engine.FAILED_RC] = 0
    sent, copied = s.ctl[_engine.SENT], later[4]
    t = post(_ring.code(_ring.PUT_FROM), 0, CHUNK * 4, source.ctypes.data)
    assert _engine.serve(s) == 11 and "copying out of the GPU's heap" in _engine.CALLS[11]
    assert s.ctl[_engine.FAILED_RC] == 700 and not done(t) and later[4] == copied
    assert s.ctl[_engine.SENT] == sent and s.ctl[_engine.DATA_IN_FLIGHT] == 0
    s.ctl[_engine.GPU_NEXT] += 1
    later[0] = 0  # (the copy asked is dropped)
assert (heap == want).all(), "a put whose copy out failed changed the heap"


# 7. MPI_Test failing while the second piece's copy out runs (the first
# one's data in flight meanwhile)
@cfunc(types.int32(types.uint64, types.uint64, types.uint64))
def test_fails(request, flag, status):
    return 1


def fresh(window=None):
    """A new State and rings (a loop that failed is not run again)."""
    global s, gw, gpu
    gpu = np.zeros(_ring.NBYTES, np.uint8)
    _ring.DeviceRing(gpu, lambda: 0)  # (every slot and staging segment free)
    host = np.zeros(_engine.HOST_NBYTES, np.uint8)
    host.view(np.int64)[_ring.FREE // 8:_ring.FREE // 8 + SLOTS] = np.arange(SLOTS)
    s = _engine.state(MPIC(comm), 1, host, heap, np.array([HEAP]), lock.fileno(), -1, gpu,
                      target, window)
    s.ctl[_engine.STOP] = 1  # (serve returns once it has nothing left to do)
    gw, posted[0] = s.gw, 0


fresh()
first = post(_ring.code(_ring.PUT_FROM), 4096, CHUNK * 4, source.ctypes.data)
assert drains() == 1 and _engine.flush(s) and s.ctl[_engine.DATA_IN_FLIGHT] == 1
mpi_test = s.test
s = s._replace(test=ctypes.CFUNCTYPE(ctypes.c_int, *[ctypes.c_void_p] * 3)(test_fails.address))
later[3] += later[3] % 2  # (the next settled says "not yet" once)
second = post(_ring.code(_ring.PUT_FROM), 4096 + CHUNK * 4, CHUNK * 4,
              source.ctypes.data + CHUNK * 4)
assert _engine.serve(s) == 4 and _engine.CALLS[s.ctl[_engine.FAILED_CALL]] == "MPI_Test failed"
assert done(first) and not done(second)
s = s._replace(test=mpi_test)  # (then both land: the first's data was sent)
want[4096:4096 + 2 * CHUNK * 4] = source[:2 * CHUNK * 4]
for _ in range(1000):  # (COMPLETE stays at the tickets skipped above)
    assert _engine.serve(s) == 0, _engine.CALLS[s.ctl[_engine.FAILED_CALL]]
    if done(second) and not _engine.sending(s):
        break
assert (heap == want).all(), "the puts did not land"

# 8. the segments as a window: fetched by the target
win = MPI.Win.Allocate(_engine.OUT_SEGS * PIECE, 1, comm=comm)
win.Lock_all(MPI.MODE_NOCHECK)
fresh((MPI._handleof(win), np.frombuffer(win.tomemory(), np.uint8)))
s.ctl[_engine.TRACING] = 1
source[:total] = rng.integers(0, 256, total, dtype=np.uint8)
want[SOURCE_AT:SOURCE_AT + total] = source[:total]
for at in range(0, total, PIECE):
    post(_ring.code(_ring.PUT_FROM), 4096 + at, min(PIECE, total - at), source.ctypes.data + at)
want[4096:4096 + total] = source[:total]
assert drains() == _engine.OUT_SEGS and _engine.flush(s)
assert [done(k) for k in range(SEGS + 2)] == [True] * SEGS + [False] * 2
assert s.ctl[_engine.DATA_IN_FLIGHT] == 0 and _engine.reap(s) >= 0
assert (s.ostate != 0).all(), "a window's units were taken again before its put was answered"
source[:SEGS * PIECE] = 0
want[SOURCE_AT:SOURCE_AT + SEGS * PIECE] = 0
finish()
assert all(done(k) for k in range(SEGS + 2)) and (s.ostate == 0).all()
wrong = int((heap != want).sum())
assert wrong == 0, f"{wrong} bytes of the heap differ from what the window's puts left"
events = s.trace[:s.ctl[_engine.TRACED], 0]
assert (events == _engine.LANDED).sum() == SEGS + 2 and (events == _engine.DATA_SENT).sum() == 0
# refused by the target (past its heap's end): the segment is free once answered
refusals = s.ctl[_engine.REFUSED]
t = post(_ring.code(_ring.PUT_FROM), HEAP - CHUNK, CHUNK * 4, source.ctypes.data)
finish()
assert done(t) and s.ctl[_engine.REFUSED] == refusals + 1 and (s.ostate == 0).all()
assert s.refusals[refusals, 5] == _engine.OUTSIDE
# non-blocking: the slot back once copied out, the data lands from the window
source[:3 * PIECE] = rng.integers(0, 256, 3 * PIECE, dtype=np.uint8)
want[SOURCE_AT:SOURCE_AT + 3 * PIECE] = source[:3 * PIECE]
tickets = [post(nbi, 8192 + at, PIECE, source.ctypes.data + at)
           for at in range(0, 3 * PIECE, PIECE)]
assert drains() == 3
assert [gw[_ring.FREE // 8 + t % SLOTS] for t in tickets] == [t + SLOTS for t in tickets]
want[8192:8192 + 3 * PIECE] = source[:3 * PIECE]
finish()
assert (heap == want).all() and (s.ostate == 0).all(), "a non-blocking put from a window"
# pieces of one unit: OUT_UNITS of them copied out at once (not OUT_SEGS),
# each into a unit of its own; the two after them, and a piece of PIECE
# bytes (its units in a row), once units are free again
UNIT, UNITS = _engine.OUT_UNIT, _engine.OUT_UNITS
small = UNITS + 2
total = small * UNIT + PIECE
source[:total] = rng.integers(0, 256, total, dtype=np.uint8)
want[SOURCE_AT:SOURCE_AT + total] = source[:total]
tickets = [post(_ring.code(_ring.PUT_FROM), 4096 + k * UNIT, UNIT, source.ctypes.data + k * UNIT)
           for k in range(small)]
tickets.append(post(_ring.code(_ring.PUT_FROM), 4096 + small * UNIT, PIECE,
                    source.ctypes.data + small * UNIT))
assert _engine.drain(s) == 0 and later[0] == UNITS, later  # (asked together, not yet done)
out = s.out.ctypes.data
assert sorted(later[8:8 + 3 * UNITS:3]) == [out + k * UNIT for k in range(UNITS)], \
    "two pieces were copied out into one unit"
want[4096:4096 + total] = source[:total]
finish()
assert all(done(t) for t in tickets) and (s.ostate == 0).all()
wrong = int((heap != want).sum())
assert wrong == 0, f"{wrong} bytes of the heap differ from what pieces of one unit left"
# MPI_Win_sync failing once the piece is copied out: the loop stops with its
# reason, before DONE and before the piece's record is sent
t = post(_ring.code(_ring.PUT_FROM), 4096, CHUNK * 4, source.ctypes.data)
sent = s.ctl[_engine.SENT]
assert drains(s._replace(win_sync=type(s.win_sync)(lambda *args: 1))) == -1
assert _engine.CALLS[s.ctl[_engine.FAILED_CALL]] == "MPI_Win_sync failed" and not done(t)
assert s.ctl[_engine.SENT] == sent, "a piece was announced after MPI_Win_sync failed"
win.Unlock_all()
win.Free()

# 9. staged puts (a group's blocking put, copied into a staging segment of
# the heap first): non-blocking PUT_FROMs whose COND is the staging ticket
# + 1; once copied out the loop gives back the slot and the staging segment
# (STAGE_FREE = ticket + STAGE_SEGS), not before; one refused gives both back;
# the FREED and STAGES_FREED words follow
fresh()
STAGES, STAGE_FREE = _ring.STAGE_SEGS, _ring.STAGE_FREE // 8
staging = SOURCE_AT + 4 * PIECE  # (the staging segments, in the heap)
n = 3 * CHUNK + 5
stage_tickets = range(STAGES + 2)
tickets = []
for u in stage_tickets:
    if u >= STAGES:  # (as the GPU's thread would: its segment free again first)
        assert gw[STAGE_FREE + u % STAGES] == u, "a staging segment was not given back"
    at = staging + (u % STAGES) * _ring.STAGE_STRIDE + 3
    heap[at:at + n] = rng.integers(0, 256, n, dtype=np.uint8)
    want[4096 + u * n:4096 + (u + 1) * n] = heap[at:at + n]
    t = post(nbi, 4096 + u * n, n, heap.ctypes.data + at)
    gw[(t % SLOTS) * 8 + _ring.COND] = u + 1
    tickets.append(t)
    later[1] = gw[STAGE_FREE + u % STAGES:].ctypes.data  # (what it holds once copied)
    assert drains() == 1
    assert later[2] == u, "a staging segment was given back before its copy out was done"
    assert gw[STAGE_FREE + u % STAGES] == u + STAGES and \
        gw[_ring.FREE // 8 + t % SLOTS] == t + SLOTS and not done(t)
    finish()
want[staging:staging + _ring.STAGE_BYTES] = heap[staging:staging + _ring.STAGE_BYTES]
assert (heap == want).all(), "a staged put did not land as staged"
later[1] = 0
refusals = s.ctl[_engine.REFUSED]
t = post(nbi, 0, CHUNK * 4, outside.ctypes.data)
u = STAGES + 2
gw[(t % SLOTS) * 8 + _ring.COND] = u + 1
finish()
assert s.ctl[_engine.REFUSED] == refusals + 1 and not done(t)
assert gw[STAGE_FREE + u % STAGES] == u + STAGES and gw[_ring.FREE // 8 + t % SLOTS] == t + SLOTS
# (and the words threads read instead of their slot's and segment's: every
# ticket below them is back)
assert (gw[_ring.FREED // 8], gw[_ring.STAGES_FREED // 8]) == (t + 1, u + 1)

# 10. the extent shrinks past a piece whose copy was asked, then grows back
fresh()
later[3] += later[3] % 2  # (the next look says "not yet" once)
source[:2 * PIECE] = rng.integers(0, 256, 2 * PIECE, dtype=np.uint8)
want[SOURCE_AT:SOURCE_AT + 2 * PIECE] = source[:2 * PIECE]
t = post(_ring.code(_ring.PUT_FROM), 4096, CHUNK * 4, source.ctypes.data)
assert _engine.drain(s) == 0 and s.ctl[_engine.COPIES] == 1 and s.cseg[t % SLOTS] >= 0
s.extent[0] = SOURCE_AT  # (its source now past the heap's end)
refusals = s.ctl[_engine.REFUSED]
assert drains() == 1 and s.ctl[_engine.REFUSED] == refusals + 1 and done(t)
assert s.ctl[_engine.COPIES] == 0 and (s.ostate == 0).all() and s.cseg[t % SLOTS] == -1, \
    "a refused piece kept the units its copy was asked into"
finish()
assert _engine.serve(s) == 0  # (STOP: nothing left to do, no copy counted)
# a piece past the extent, then puts that fit: no copy asked past it
AFTER_AT = 8 << 20  # (within the extent)
heap[AFTER_AT:AFTER_AT + SEGS * CHUNK * 4] = rng.integers(0, 256, SEGS * CHUNK * 4,
                                                          dtype=np.uint8)
want[AFTER_AT:AFTER_AT + SEGS * CHUNK * 4] = heap[AFTER_AT:AFTER_AT + SEGS * CHUNK * 4]
far = post(_ring.code(_ring.PUT_FROM), 8192, CHUNK * 4, source.ctypes.data)
after = [post(_ring.code(_ring.PUT_FROM), 8192 + (k + 1) * CHUNK * 4, CHUNK * 4,
              heap.ctypes.data + AFTER_AT + k * CHUNK * 4) for k in range(SEGS)]
assert _engine.copy_ahead(s) and s.ctl[_engine.COPIES] == 0 and \
    s.ctl[_engine.COPY_NEXT] == far, "copies were asked past a piece not yet in the heap"
s.extent[0] = HEAP  # (grown: it is copied and lands, then the rest)
want[8192:8192 + CHUNK * 4] = source[:CHUNK * 4]
for k in range(SEGS):
    at = 8192 + (k + 1) * CHUNK * 4
    want[at:at + CHUNK * 4] = heap[AFTER_AT + k * CHUNK * 4:AFTER_AT + (k + 1) * CHUNK * 4]
finish()
assert done(far) and all(done(t) for t in after)
wrong = int((heap != want).sum())
assert wrong == 0, f"{wrong} bytes of the heap differ after the extent changed"


# 11. the out units against a model
def model_take(held, need):
    """First fit: the first unit of ``need`` free ones in a row, or -1."""
    taken = np.zeros(UNITS, bool)
    for first, n in held.items():
        taken[first:first + n] = True
    run = 0
    for u in range(UNITS):
        run = 0 if taken[u] else run + 1
        if run == need:
            return u + 1 - need
    return -1


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(1, PIECE), st.integers(0, 1 << 30)),
                max_size=60))
def test_units(steps):
    units, held = s._replace(ostate=np.zeros(UNITS, np.int64)), {}
    for take, nbytes, which in steps:
        if take or not held:
            need = -(-nbytes // UNIT)
            first = _engine.take_out(units, nbytes)
            assert first == model_take(held, need), (first, held, need)
            if first >= 0:
                held[first] = need
        else:
            first = sorted(held)[which % len(held)]
            _engine.give_out(units, first)
            del held[first]
        state = np.zeros(UNITS, np.int64)
        for first, n in held.items():
            state[first], state[first + 1:first + n] = n, -1
        assert (units.ostate == state).all(), (units.ostate, held)


test_units()

# 12. a request taken goes out before the loop looks at MPI: with a batch
# already waiting to be received, the loop sends the new request's batch first
fresh()
s.ctl[_engine.TRACING] = 1
for k, at in enumerate((4096, 8192)):
    t = post(_ring.code(_ring.PUT), at, 100)
    stage = _ring.STAGING + (t % SLOTS) * CHUNK
    gpu[stage:stage + 100] = want[at:at + 100] = 90 + k
    if k == 0:  # (sent by hand: waits in MPI)
        assert _engine.drain(s) == 1 and _engine.flush(s) and s.ctl[_engine.SENT] == 1
finish()
events = list(s.trace[:s.ctl[_engine.TRACED], 0])
second = events.index(_engine.TAKEN, events.index(_engine.TAKEN) + 1)
assert events.index(_engine.SENT_BATCH, second) < events.index(_engine.RECEIVED), \
    "the loop looked at MPI before it sent the request it took"
assert (heap == want).all()
# ... and a batch's answers before it takes the next batch
fresh()
s.ctl[_engine.TRACING] = 1
gets = []
for k, at in enumerate((4096, 8192)):  # (two batches of a get, sent by hand: both wait in MPI)
    gets.append(post(_ring.code(_ring.GET), at, 100))
    assert _engine.drain(s) == 1 and _engine.flush(s) and s.ctl[_engine.SENT] == k + 1
for _ in range(1000):
    assert _engine.serve(s) == 0, _engine.CALLS[s.ctl[_engine.FAILED_CALL]]
    if all(done(t) for t in gets):
        break
for t, at in zip(gets, (4096, 8192)):
    stage = _ring.STAGING + (t % SLOTS) * CHUNK
    assert done(t) and (gpu[stage:stage + 100] == heap[at:at + 100]).all()
steps = [(event, b) for event, _a, b, _at in s.trace[:s.ctl[_engine.TRACED]].tolist()]
requests = [i for i, step in enumerate(steps) if step == (_engine.RECEIVED, _engine.TAG_REQ)]
assert steps.index((_engine.SENT_BATCH, _engine.TAG_ANS)) < requests[1], \
    "the loop took the next batch before it sent the answers of the one before"
print("ok")
