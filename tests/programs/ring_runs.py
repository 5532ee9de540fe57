"""Drive the proxy loop's origin side (_transport/_engine.py) by hand, one PE
sending to itself: the GPU's chunk puts of one transfer go as runs, one
request whose data is sent from the ring's staging in place. Prints ``ok``.

1. A transfer of 300 chunks and 100 bytes more: three requests (128, 128 and
   the 45 left, the short last chunk ending its run); the slots of a run are
   given back only once MPI has sent its data; the heap holds what was put;
   the ring's FREED word is then the first ticket whose slot is taken.
2. A transfer across the ring's end: a run stops there (two requests); FREED
   follows slots given back by others (as a thread gives back a fetch's).
3. A gap between offsets, another PE, a put that is not a whole chunk (it
   ends its run), an unanswered slot: each ends a run.
4. A host put posted while a kernel's chunks were being published, its ORDER
   in the middle of them: the run stops at ORDER and the host's request goes
   between the two parts, as ordered.
5. A run partly past the end of the target's heap: its whole chunks before
   the end land, one refusal record names the first chunk refused, and its
   tickets are all answered (COMPLETE passes them); two calls joined in one
   run, the first up to the end, the second past it: the first lands.
6. FREED and STAGES_FREED pass a slot and a staging segment given back out of
   order: the next ticket of the one above came and went back before the one
   below it was back.
7. Marked requests (a kernel's put of an element, atomics): not taken while
   one of their words is still on its way, a stale word of the slot's last
   request included; once whole, applied with their values' and offsets'
   every bit (a negative value, one above 32 bits, a compare-and-swap's
   condition), a put's value in the request itself. A host post's
   ORDER counts a whole marked request as published, and stops at one that
   is not.
"""

import tempfile

import numpy as np
from mpi4py import MPI

from numba_shmem._transport import _engine, _ring
from numba_shmem._transport._mpi_c import MPIC

SLOTS, CHUNK = _ring.SLOTS, _ring.CHUNK
comm = MPI.COMM_SELF.Dup()
host = np.zeros(_engine.HOST_NBYTES, np.uint8)
host.view(np.int64)[_ring.FREE // 8:_ring.FREE // 8 + SLOTS] = np.arange(SLOTS)
gpu = _ring.DeviceRing(np.zeros(_ring.NBYTES, np.uint8), None).memory  # (every slot free)
HEAP = 8 << 20
heap = np.zeros(HEAP, np.uint8)
want = np.zeros(HEAP, np.uint8)
lock = tempfile.TemporaryFile()  # (the heap's lock, for atomics)
s = _engine.state(MPIC(comm), 1, host, heap, np.array([HEAP]), lock.fileno(), -1, gpu)
s.ctl[_engine.STOP] = 1  # (serve returns once it has nothing left to do)
s.ctl[_engine.TRACING] = 1
gw, hw = s.gw, s.hw
rng = np.random.default_rng(5)
tickets = [0, 0]  # the next GPU and host tickets


def post_gpu(pe, offset, nbytes):
    """A kernel's chunk put of ``nbytes`` random bytes (remembered in ``want``)."""
    t = tickets[0]
    slot = t % SLOTS
    assert gw[_ring.FREE // 8 + slot] == t, f"slot {slot} is not free for ticket {t}"
    data = rng.integers(0, 256, nbytes, dtype=np.uint8)
    gpu[_ring.STAGING + slot * CHUNK:_ring.STAGING + slot * CHUNK + nbytes] = data
    if offset + nbytes <= HEAP:
        want[offset:offset + nbytes] = data
    d = slot * 8
    gw[d + 1], gw[d + 2], gw[d + 3], gw[d + 4] = _ring.code(_ring.PUT), pe, offset, nbytes
    gw[d] = t + 1  # SEQ: published
    tickets[0] = t + 1


def post_host(offset, nbytes, order):
    """A host put staged in its slot, posted when the kernel's ``order``th
    ticket was the first not yet published."""
    t = tickets[1]
    slot = t % SLOTS
    data = rng.integers(0, 256, nbytes, dtype=np.uint8)
    host[_ring.STAGING + slot * CHUNK:_ring.STAGING + slot * CHUNK + nbytes] = data
    want[offset:offset + nbytes] = data
    d = slot * 8
    hw[d + 1], hw[d + 2], hw[d + 3], hw[d + 4] = _ring.code(_ring.PUT), 0, offset, nbytes
    hw[d + _engine.ADDR], hw[d + _engine.ORDER] = 0, order
    hw[d] = t + 1
    tickets[1] = t + 1


def transfer(offset, nbytes):
    for at in range(0, nbytes, CHUNK):
        post_gpu(0, offset + at, min(CHUNK, nbytes - at))


def taken():
    """The requests taken since the last call, as (GPU or host, ticket)."""
    n = s.ctl[_engine.TRACED]
    events = s.trace[:n]
    s.ctl[_engine.TRACED] = 0
    return [(int(rid & 1), int(rid >> 1)) for event, rid, _, _ in events
            if event == _engine.TAKEN]


def finish():
    """Serve until every ticket posted is complete."""
    for _ in range(1000):
        if gw[_ring.COMPLETE // 8] == tickets[0] and hw[_ring.COMPLETE // 8] == tickets[1]:
            return
        assert _engine.serve(s) == 0, _engine.CALLS[s.ctl[_engine.FAILED_CALL]]
    raise AssertionError(f"tickets not complete: {gw[_ring.COMPLETE // 8]} of {tickets}")


# 1. runs of at most RUN_MAX chunks; slots given back once sent
transfer(0, 300 * CHUNK + 100)
assert _engine.drain(s) == 3
first = [t for _, t in taken()]
assert first == [0, 128, 256], first
free = gw[_ring.FREE // 8:_ring.FREE // 8 + 301]
assert (free == np.arange(301)).all(), "a run's slot was given back before its data was sent"
finish()
assert (gw[_ring.FREE // 8:_ring.FREE // 8 + 301] == np.arange(301) + SLOTS).all()
assert gw[_ring.FREED // 8] == 301, "FREED is not the first ticket whose slot is taken"
assert (heap == want).all(), "the heap differs from what the runs put"

# 2. across the ring's end
tickets[0] = 1000
gw[_ring.COMPLETE // 8] = 1000  # (as if tickets 301-999 had come and gone)
gw[_ring.FREE // 8 + 301:_ring.FREE // 8 + 1000] = np.arange(301, 1000) + SLOTS
s.ctl[_engine.GPU_NEXT] = 1000
transfer(3 * CHUNK, 100 * CHUNK)
finish()
assert [t for _, t in taken()] == [1000, 1024], "a run went past the ring's end"
assert gw[_ring.FREED // 8] == 1100, "FREED did not follow slots given back by hand"
assert (heap == want).all()

# 3. a gap, another PE, a short chunk in the middle: each ends a run (read by
# run_of from a ring of its own, whose requests are never sent)
other = np.zeros(_ring.NBYTES, np.uint8)
o = _engine.state(MPIC(comm), 2, np.zeros(_engine.HOST_NBYTES, np.uint8), heap,
                  np.array([HEAP]), -1, -1, other)
ow = o.gw
for t, (pe, offset, nbytes) in enumerate(
        [(0, 0, CHUNK), (0, CHUNK, CHUNK), (0, 3 * CHUNK, CHUNK),  # a gap
         (0, 4 * CHUNK, CHUNK), (1, 5 * CHUNK, CHUNK),  # another PE
         (1, 6 * CHUNK, CHUNK), (1, 7 * CHUNK, 10), (1, 7 * CHUNK + 10, CHUNK),
         (1, 8 * CHUNK + 10, 0)]):
    d = t * 8
    ow[d + 1], ow[d + 2], ow[d + 3], ow[d + 4] = _ring.code(_ring.PUT), pe, offset, nbytes
    ow[d] = t + 1
runs = [_engine.run_of(o, t) for t in range(9)]
assert runs == [2, 1, 2, 1, 3, 2, 1, 1, 1], runs
o.gstate[1] = 2  # (a slot whose request is not answered ends a run too)
assert _engine.run_of(o, 0) == 1

# 4. a host put's ORDER in the middle of a run
start = tickets[0]
transfer(3 << 20, 4 * CHUNK)
post_host(5 << 20, 64, start + 2)
transfer((3 << 20) + 4 * CHUNK, 4 * CHUNK)
finish()
assert taken() == [(1, start), (0, 0), (1, start + 2)], "the host's put was not between"
assert (heap == want).all()

# 5. runs past the heap's end: the whole chunks before it land (each was a
# request of its own), the first refused is named, every ticket is answered
for first_offset, chunks, cut in ((HEAP - 3 * CHUNK, 6, 3),  # one transfer
                                  (HEAP - CHUNK - 100, 3, 1)):  # (its second straddles the end)
    refused = s.ctl[_engine.REFUSED]
    start = tickets[0]
    transfer(first_offset, chunks * CHUNK)
    finish()
    assert [t for _, t in taken()] == [start]
    assert s.ctl[_engine.REFUSED] == refused + 1
    rid, _, _, offset, nbytes, reason, _ = s.refusals[refused]
    assert (rid, offset, nbytes, reason) == ((start + cut) * 2 + 1, first_offset + cut * CHUNK,
                                             (chunks - cut) * CHUNK, _engine.OUTSIDE)
    assert (heap == want).all(), "the chunks before the heap's end did not land"
# two calls joined in one run: the first, up to the heap's end, lands; the
# refusal names the second's chunk
refused = s.ctl[_engine.REFUSED]
start = tickets[0]
transfer(HEAP - 2 * CHUNK, 2 * CHUNK)
transfer(HEAP, CHUNK)
finish()
assert [t for _, t in taken()] == [start]
assert tuple(s.refusals[refused, [0, 3, 4]]) == ((start + 2) * 2 + 1, HEAP, CHUNK)
assert (heap == want).all(), "a put that fit was dropped with the run it joined"
# 6. out of order (a ring of its own: FREE and STAGE_FREE words as threads and
# the loop leave them)
words = _ring.DeviceRing(np.zeros(_ring.NBYTES, np.uint8), None).memory[:_ring.STAGING]
words = words.view(np.int64)
FREED, STAGES_FREED = _ring.FREED // 8, _ring.STAGES_FREED // 8
FREE, STAGE_FREE, SEGS = _ring.FREE // 8, _ring.STAGE_FREE // 8, _ring.STAGE_SEGS
words[FREE + 1] = 1 + 2 * SLOTS  # (tickets 1 and 1 + SLOTS back, 0 not yet)
words[STAGE_FREE + 1] = 1 + 2 * SEGS
_engine.given_back(words)
assert (words[FREED], words[STAGES_FREED]) == (0, 0)
words[FREE], words[STAGE_FREE] = SLOTS, SEGS  # (ticket 0 back)
_engine.given_back(words)
assert (words[FREED], words[STAGES_FREED]) == (2, 2), (words[FREED], words[STAGES_FREED])

# 7. marked requests
def post_marked(code, offset, arg, cond, hold=None):
    """A kernel's marked request toward PE 0, its MARKED words written in a
    random order, but for word ``hold`` (an index into MARKED): its address
    and value, to write later."""
    t = tickets[0]
    slot = t % SLOTS
    assert gw[_ring.FREE // 8 + slot] == t, f"slot {slot} is not free for ticket {t}"
    words = _ring.marked(t, code, 0, offset, arg, cond)
    for k in rng.permutation(len(words)):
        if k != hold:
            gw[slot * 8 + _ring.MARKED[k]] = words[k]
    tickets[0] = t + 1
    return None if hold is None else (slot * 8 + _ring.MARKED[hold], words[hold])


def code_of(op, dtype, fetch=0):
    return _ring.code(_ring.ATOMIC, _ring.DTYPES.index(dtype), _ring.ATOMIC_OPS.index(op), fetch)


P = (6 << 20) + 8 * (SLOTS - tickets[0] % SLOTS)  # (a slot whose last request was marked, later)
value = np.int64(-0x1122334455667788)
held = post_marked(_ring.code(_ring.PUT), P, 8, int(value), hold=3)  # (ARG's high half)
assert _engine.drain(s) == 0 and taken() == [], "a marked put was taken before it was whole"
gw[held[0]] = held[1]
post_marked(_ring.code(_ring.PUT), P + 8, 4, 0x7FFF_FFF1)
counter = np.array([2**40 + 3, -5], np.int64)
heap[P + 16:P + 32] = counter.view(np.uint8)
post_marked(code_of("add", "uint64"), P + 16, 2**40 + 5, 0)
post_marked(code_of("compare_swap", "int64", 1), P + 24, -3, -5)  # (cond -5: swaps)
cas = tickets[0] - 1
finish()
assert heap[P:P + 8].view(np.int64)[0] == value, heap[P:P + 8].view(np.int64)
assert heap[P + 8:P + 12].view(np.int32)[0] == 0x7FFF_FFF1
assert heap[P + 16:P + 24].view(np.uint64)[0] == 2**41 + 8
assert heap[P + 24:P + 32].view(np.int64)[0] == -3
assert gw[_ring.DONE // 8 + cas % SLOTS] == cas + 1 and gw[_ring.ANSWER // 8 + cas % SLOTS] == -5
# around the ring once more: the slots' words are the released form the loop
# left (stale), which carries no mark; a host post's ORDER
for t in range(tickets[0], tickets[0] + SLOTS - 4):  # (as if they had come and gone)
    gw[_ring.FREE // 8 + t % SLOTS] = t
    gw[(t % SLOTS) * 8] = t + 1
tickets[0] += SLOTS - 4
gw[_ring.COMPLETE // 8] = tickets[0]
s.ctl[_engine.GPU_NEXT] = tickets[0]
for t in range(tickets[0] - SLOTS - 4, tickets[0]):
    gw[_ring.FREE // 8 + t % SLOTS] = t + SLOTS
start = tickets[0]
assert _engine.first_unpublished(gw, start) == start
stale = gw[(start % SLOTS) * 8:(start % SLOTS) * 8 + 8].copy()
for hold in range(len(_ring.MARKED)):
    tickets[0] = start
    gw[(start % SLOTS) * 8:(start % SLOTS) * 8 + 8] = stale
    held = post_marked(_ring.code(_ring.PUT), P + 40, 8, -1, hold=hold)
    assert not _engine.marked_whole(gw, start, (start % SLOTS) * 8), hold
    assert _engine.first_unpublished(gw, start) == start, hold
gw[held[0]] = held[1]
post_marked(_ring.code(_ring.PUT), P + 48, 8, 2**63 - 1)
assert _engine.first_unpublished(gw, start) == start + 2
finish()
assert (heap[P + 40:P + 56].view(np.int64) == [-1, 2**63 - 1]).all()
assert [t for _, t in taken()][-2:] == [start, start + 1]
print("ok")
