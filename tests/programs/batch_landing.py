"""Drive the proxy loop's target side (_transport/_engine.py) by hand, with
no other PE, toward a model of a GPU's heap whose copies run only when the
loop waits for them (``reached``, ``settled``): batches of requests are
received into landing segments and their puts' data is copied from there,
a run of chunks (one record header apart) as one 2D copy, and no segment is
written again before the copies from it have run. Prints ``ok``.

1. A batch of three 8 KiB puts to consecutive offsets, a put of 99 bytes
   elsewhere, and three more 8 KiB puts: three copies (rows of 8 KiB at a
   pitch of 8 KiB and a header, the small one, the second run).
2. An empty batch when the last segment is being filled and full: it starts
   the first segment again (it named one past the last).
3. Batches of up to 80 chunk puts with puts of up to 1 MiB sent apart
   (FOLLOWS) among them, enough to go round the segments many times: the
   heap ends as the puts left it.
4. A run of chunks (RUN) past the heap's end: its whole chunks before the
   end land before it is answered, nothing past it.
5. Puts sent apart in batches of their own: their data is received while
   the next batches are taken (RECV_MAX receives at once, none copied until
   it has arrived), then copied in order and answered once copied; a put
   carried in a batch after one waits for its data.
6. A failure on the data's way makes the loop's step fail with its reason:
   the receive's post (MPI_Irecv), its test (MPI_Test), the copy into the
   heap once it has arrived (the driver's error kept).
7. Puts whose data waits in the origin's window (WINDOW, here this PE's
   own): fetched with MPI_Rget into the landing segments and copied from
   there, in order with a put carried in the batch over the same bytes; the
   window written again once they have landed leaves the heap as they put
   it. One whose bytes lie outside the window, or that is also FOLLOWS
   (its DATA message is dropped), carries bytes or is not a put, is refused
   as malformed, nothing fetched; an MPI_Rget that fails makes the step fail
   with its reason.
8. While the target's work keeps coming (``settled`` says not yet
   throughout), requests deferred for CHECK_NS are marked, and answered once
   their mark has passed: those deferred after it wait for the next, or for
   the stream to be idle; a mark that fails makes the step fail.
9. Window puts and the fetchers (two threads running ``fetch``, as the
   proxy starts them): while they nap the loop fetches the pieces itself and
   wakes every fetcher once a nap (one byte into its pipe, however many
   pieces it fetched; one piece wakes both, and each leaves its nap); while
   they are awake each piece goes to its fetcher. Either way the heap is as the puts left
   it, in order with a put carried in the batch; a fetch that fails makes
   the loop's step fail with its reason and MPI's error. The trace names the
   loop's marks (DRIVER events).
"""

import ctypes
import os
import threading
import time

import numpy as np
from mpi4py import MPI

from numba_shmem._transport import _engine, _ring
from numba_shmem._transport._mpi_c import MPIC

CHUNK, REQ, PIECE = _ring.CHUNK, 8 * _engine.REQ_WORDS, _engine.PIECE
BASE = 1 << 40  # (the heap's address on the model GPU)
HEAP = 16 << 20
comm = MPI.COMM_SELF.Dup()
gpu = np.zeros(HEAP, np.uint8)  # the model GPU's heap
want = np.zeros(HEAP, np.uint8)  # what the puts leave in it
asked = []  # copies asked for, in order: (offset, n, pitch, rows, the rows' bytes then)
ran = [0]  # how many of them ran
events = {}  # mark -> copies asked when it was made
marks = []
busy = [False]  # the stream keeps getting work: settled says not yet, and runs nothing
passing = [0]  # what passed returns: 0 (the mark's copies have run), -1 (not yet), an error


def run_until(k):
    while ran[0] < k:
        offset, n, _pitch, rows, _then, src = asked[ran[0]]
        for row in range(rows):
            at = src + row * _pitch
            gpu[offset + row * n:offset + (row + 1) * n] = \
                np.ctypeslib.as_array((ctypes.c_uint8 * n).from_address(at))
        ran[0] += 1


@_engine.COPY_IN
def copy_in(dst, src, n, pitch, rows):
    then = [np.ctypeslib.as_array((ctypes.c_uint8 * n).from_address(src + row * pitch)).copy()
            for row in range(rows)]
    asked.append((dst - BASE, n, pitch, rows, then, src))
    return 0


@_engine.MARK
def mark(k):
    marks.append(k)
    events[k] = len(asked)
    return 0 if 0 <= k < _engine.MARKS else 1


@_engine.MARK
def reached(k):
    run_until(events.get(k, 0))
    return 0 if 0 <= k < _engine.MARKS else 1


@_engine.MARK
def passed(k):
    if passing[0] == 0:
        run_until(events.get(k, 0))
    return passing[0] if 0 <= k < _engine.MARKS else 1


@_engine.SETTLED
def settled():
    if busy[0]:
        return -1
    run_until(len(asked))
    return 0


def refuse(*args):
    return -1


target = _engine.Target(copy_in, _engine.COPY_OUT(refuse), _engine.APPLY(refuse), settled,
                        mark, reached, passed, BASE,
                        np.zeros((_engine.PEND_MAX, _engine.PEND_WORDS), np.int64))
s = _engine.state(MPIC(comm), 1, np.zeros(_engine.HOST_NBYTES, np.uint8),
                  np.zeros(8, np.uint8), np.array([HEAP]), -1, -1, target=target)
rng = np.random.default_rng(3)
rid = [0]


def send_batch(puts):
    """Send this PE a batch of ``puts`` ((offset, bytes, sent apart)), with
    random data, and have the loop take it."""
    batch, apart, data = bytearray(), [], []
    for offset, n, big, *run in puts:
        d = rng.integers(0, 256, n, dtype=np.uint8)
        if not run:
            want[offset:offset + n] = d
        data.append(d)
        code = _ring.code(_ring.PUT) | (_engine.FOLLOWS if big else 0) | \
            (_engine.RUN if run else 0)
        batch += np.array([rid[0] * 2, code, offset, n, 0, 0 if big else n], np.int64).tobytes()
        rid[0] += 1
        if big:
            apart.append(d)
        else:
            batch += d.tobytes() + bytes(_engine.pad(n) - n)
    requests = [comm.Isend([np.frombuffer(bytes(batch), np.uint8), MPI.BYTE], 0,
                           _engine.TAG_REQ)]
    requests += [comm.Isend([d, MPI.BYTE], 0, _engine.TAG_DATA) for d in apart]
    while _engine.look(s.iprobe, s.ctl, s.flag, s.status, _engine.TAG_REQ) <= 0:
        pass
    assert _engine.receive(s) == 1, s.ctl[_engine.FAILED_CALL]
    MPI.Request.Waitall(requests)
    return data


# 1. runs of chunks as 2D copies, each reading the bytes its puts carried
puts = [(k * CHUNK, CHUNK, False) for k in range(3)] + [(200_001, 99, False)] \
    + [(300_000 + k * CHUNK, CHUNK, False) for k in range(3)]
data = send_batch(puts)
pitch = REQ + CHUNK
expected = [(0, CHUNK, pitch, 3, data[0:3]), (200_001, 99, 99, 1, data[3:4]),
            (300_000, CHUNK, pitch, 3, data[4:7])]
assert [a[:4] for a in asked] == [e[:4] for e in expected], [a[:4] for a in asked]
for got, sent in zip(asked, expected):
    assert all((a == b).all() for a, b in zip(got[4], sent[4])), "a copy read other bytes"
assert s.ctl[_engine.DEFERRED] == len(puts)  # (answered once the copies are done)

# 2. an empty batch when the segment being filled is full
last = _engine.LAND_SEGS - 1
s.ctl[_engine.LAND_SEG], s.ctl[_engine.LAND_FILL] = last, PIECE
s.lused[last] = 1
send_batch([])
assert all(0 <= k < _engine.LAND_SEGS for k in marks) and s.ctl[_engine.LAND_SEG] == 0, marks

# 3. round the segments many times, with puts sent apart among the chunks
room = HEAP - 2 * PIECE
offset = 0
for _ in range(12):
    puts = []
    for _ in range(int(rng.integers(20, 80))):
        puts.append((offset, CHUNK, False))
        offset = (offset + CHUNK) % room
    for _ in range(int(rng.integers(0, 3))):
        n = int(rng.integers(1, PIECE))
        puts.append((offset, n, True))
        offset = (offset + n) % room
        for _ in range(int(rng.integers(1, 15))):
            puts.append((offset, CHUNK, False))
            offset = (offset + CHUNK) % room
    send_batch(puts)
assert _engine.all_landed(s)  # (the loop asks for the copies of the data that has arrived)
settled()
wrong = int((gpu != want).sum())
assert wrong == 0, f"{wrong} bytes of the heap differ from what the puts left"
assert any(a[3] > 1 for a in asked[3:]), "no run of chunks went as one 2D copy"

# 4. a run of chunks past the heap's end: its whole chunks before the end land
# (and have landed once it is answered), the rest is dropped
offset = HEAP - 2 * CHUNK - 10
before = gpu.copy()
data = send_batch([(offset, 4 * CHUNK, True, "run")])
assert ran[0] == len(asked), "a refusal was answered before the chunks before it landed"
assert (gpu[offset:offset + 2 * CHUNK] == data[0][:2 * CHUNK]).all()
assert (gpu[offset + 2 * CHUNK:] == before[offset + 2 * CHUNK:]).all()
want[offset:offset + 2 * CHUNK] = data[0][:2 * CHUNK]

# 5. data received while the next batches are taken, copied in order once arrived
settled()
assert s.ctl[_engine.RECV_COUNT] == 0 and s.ctl[_engine.DEFERRED] == 0
copies, deferred = len(asked), []
for k in range(_engine.RECV_MAX):
    send_batch([(k * PIECE, PIECE - 8 * k, True)])
    assert s.ctl[_engine.RECV_COUNT] == k + 1 and len(asked) == copies, "copied before it came"
send_batch([(_engine.RECV_MAX * PIECE, 100, True)])  # (one more: the oldest lands first)
assert s.ctl[_engine.RECV_COUNT] == _engine.RECV_MAX
assert [a[0] for a in asked[copies:]] == [0] and s.ctl[_engine.DEFERRED] == 1
while _engine.landed_data(s, False) > 0:
    pass
assert s.ctl[_engine.RECV_COUNT] == 0 and s.ctl[_engine.DEFERRED] == _engine.RECV_MAX + 1
assert _engine.issue_copy(s)
assert [a[0] for a in asked[copies:]] == [k * PIECE for k in range(_engine.RECV_MAX + 1)]
copies = len(asked)  # a put whose data is sent only after its batch was taken
data = rng.integers(0, 256, 4000, dtype=np.uint8)
record = np.array([rid[0] * 2, _ring.code(_ring.PUT) | _engine.FOLLOWS, 5 * PIECE, 4000, 0, 0],
                  np.int64)
rid[0] += 1
comm.Isend([record.view(np.uint8), MPI.BYTE], 0, _engine.TAG_REQ).Wait()
while _engine.look(s.iprobe, s.ctl, s.flag, s.status, _engine.TAG_REQ) <= 0:
    pass
assert _engine.receive(s) == 1 and s.ctl[_engine.RECV_COUNT] == 1
assert _engine.landed_data(s, False) == 0 and len(asked) == copies, "copied before it came"
comm.Isend([data, MPI.BYTE], 0, _engine.TAG_DATA).Wait()
assert _engine.landed_data(s, True) == 1 and _engine.issue_copy(s)
assert [a[:2] for a in asked[copies:]] == [(5 * PIECE, 4000)]
want[5 * PIECE:5 * PIECE + 4000] = data
copies = len(asked)
send_batch([(3 * PIECE, 5000, True), (3 * PIECE + 1000, 99, False)])
assert s.ctl[_engine.RECV_COUNT] == 0 and _engine.issue_copy(s)
assert [a[:2] for a in asked[copies:]] == [(3 * PIECE, 5000), (3 * PIECE + 1000, 99)]
settled()
wrong = int((gpu != want).sum())
assert wrong == 0, f"{wrong} bytes of the heap differ from what the puts left"


# 6. failures on the data's way
def take_put(offset, n, loop):
    """Send a batch of one put of ``n`` bytes sent apart; ``loop`` takes it."""
    record = np.array([rid[0] * 2, _ring.code(_ring.PUT) | _engine.FOLLOWS, offset, n, 0, 0],
                      np.int64)
    rid[0] += 1
    comm.Isend([record.view(np.uint8), MPI.BYTE], 0, _engine.TAG_REQ).Wait()
    while _engine.look(s.iprobe, s.ctl, s.flag, s.status, _engine.TAG_REQ) <= 0:
        pass
    return _engine.receive(loop)


def fails(function):
    return type(function)(lambda *args: 1)


def failed(why):
    return _engine.CALLS[s.ctl[_engine.FAILED_CALL]] == why


assert take_put(6 * PIECE, 500, s._replace(irecv=fails(s.irecv))) == -1
assert failed("MPI_Irecv failed") and s.ctl[_engine.RECV_COUNT] == 0
assert take_put(6 * PIECE, 500, s) == 1 and s.ctl[_engine.RECV_COUNT] == 1
data = rng.integers(0, 256, 500, dtype=np.uint8)
comm.Isend([data, MPI.BYTE], 0, _engine.TAG_DATA).Wait()
assert _engine.landed_data(s._replace(test=fails(s.test)), True) == -1
assert failed("MPI_Test failed") and s.ctl[_engine.RECV_COUNT] == 1
s.ctl[_engine.FAILED_CALL] = 0
copies = len(asked)
assert _engine.landed_data(s, True) == 1 and len(asked) == copies  # (the copy waits to be joined)
s.ctl[_engine.FAILED_RC] = 0
assert not _engine.issue_copy(s._replace(copy_in=_engine.COPY_IN(lambda *args: 700)))
assert failed("copying into the GPU's heap failed") and s.ctl[_engine.FAILED_RC] == 700


# 7. data fetched from the origin's window
def answers():
    """The answers this PE's loop has sent itself so far: rid -> reason."""
    assert _engine.flush(s)
    reasons = {}
    status = MPI.Status()
    while comm.Iprobe(0, _engine.TAG_ANS, status):
        got = np.zeros(status.Get_count(MPI.BYTE), np.uint8)
        comm.Recv([got, MPI.BYTE], 0, _engine.TAG_ANS)
        words, at = got.view(np.int64), 0
        while at < words.size:
            reasons[int(words[at])] = int(words[at + 1])
            at += _engine.ANS_WORDS + _engine.pad(int(words[at + 3])) // 8
    return reasons


def window_batch(puts, loop=s):
    """Have ``loop`` take a batch of ``puts`` ((offset, bytes, where in the
    window; or bytes carried in the batch if None)), random data."""
    batch, data = bytearray(), []
    for offset, n, disp in puts:
        d = rng.integers(0, 256, n, dtype=np.uint8)
        data.append(d)
        if disp is None:
            code, words = _ring.code(_ring.PUT), [0, n]
        else:
            code, words = _ring.code(_ring.PUT) | _engine.WINDOW, [disp, 0]
            if 0 <= disp <= exposed.size - n:
                exposed[disp:disp + n] = d
        batch += np.array([rid[0] * 2, code, offset, n] + words, np.int64).tobytes()
        if disp is None:
            batch += d.tobytes() + bytes(_engine.pad(n) - n)
        rid[0] += 1
    comm.Isend([np.frombuffer(bytes(batch), np.uint8), MPI.BYTE], 0, _engine.TAG_REQ).Wait()
    while _engine.look(s.iprobe, s.ctl, s.flag, s.status, _engine.TAG_REQ) <= 0:
        pass
    return _engine.receive(loop), data


def landed_whole(puts, data, first, what):
    """Once the target's work is done, the heap holds what ``window_batch``'s
    ``puts`` carried (``data``), and each (rids from ``first`` on) was
    answered 0; then the window is written again."""
    exposed[:] = 0  # (written again once landed)
    settled()
    for (offset, n, _disp), d in zip(puts, data):
        want[offset:offset + n] = d
    wrong = int((gpu != want).sum())
    assert wrong == 0, f"{wrong} bytes of the heap differ from what {what} left"
    assert _engine.settle(s, True)
    assert answers() == {2 * (first + k): 0 for k in range(len(puts))}


s.ctl[_engine.FAILED_CALL] = s.ctl[_engine.FAILED_RC] = 0
assert _engine.settle(s, True)
answers()  # (those of the steps before)
win = MPI.Win.Allocate(_engine.OUT_SEGS * PIECE, 1, comm=comm)
win.Lock_all(MPI.MODE_NOCHECK)
exposed = np.frombuffer(win.tomemory(), np.uint8)
s.ctl[_engine.WIN] = MPI._handleof(win)
first = rid[0]
puts = [(7 * PIECE, PIECE, 0), (8 * PIECE, 5000, 3 * PIECE), (8 * PIECE + 1000, 99, None),
        (8 * PIECE + 2000, 300, PIECE + 64)]
took, data = window_batch(puts)
assert took == 1 and _engine.all_landed(s) and _engine.issue_copy(s)
landed_whole(puts, data, first, "the window's puts")
before = gpu.copy()
for disp in (exposed.size - 100, -64):
    took, _data = window_batch([(9 * PIECE, 4096, disp)])
    assert took == 1 and s.ctl[_engine.RECV_COUNT] == 0
    assert answers() == {2 * (rid[0] - 1): _engine.MALFORMED}
# a window record that is also FOLLOWS (its DATA message is taken and dropped),
# carries bytes, or is not a put
put, get = _ring.code(_ring.PUT), _ring.code(_ring.GET)
for code, inline in ((put | _engine.FOLLOWS, 0), (put, 4096), (get, 0)):
    record = np.array([rid[0] * 2, code | _engine.WINDOW, 9 * PIECE, 4096, 0, inline], np.int64)
    rid[0] += 1
    sends = [comm.Isend([np.concatenate([record.view(np.uint8), np.ones(inline, np.uint8)]),
                         MPI.BYTE], 0, _engine.TAG_REQ)]
    if code & _engine.FOLLOWS:
        sends.append(comm.Isend([np.ones(4096, np.uint8), MPI.BYTE], 0, _engine.TAG_DATA))
    while _engine.look(s.iprobe, s.ctl, s.flag, s.status, _engine.TAG_REQ) <= 0:
        pass
    assert _engine.receive(s) == 1 and s.ctl[_engine.RECV_COUNT] == 0
    MPI.Request.Waitall(sends)
    assert answers() == {2 * (rid[0] - 1): _engine.MALFORMED}
assert not comm.Iprobe(0, _engine.TAG_DATA), "a DATA message was left behind"
settled()
assert (gpu == before).all(), "a refused put from a window changed the heap"
took, _data = window_batch([(9 * PIECE, 4096, 0)], s._replace(rget=fails(s.rget)))
assert took == -1 and failed("MPI_Rget failed") and s.ctl[_engine.RECV_COUNT] == 0
win.Unlock_all()
win.Free()

# 8. answers in steps while the stream stays busy
s.ctl[_engine.FAILED_CALL] = s.ctl[_engine.FAILED_RC] = 0
assert _engine.settle(s, True)
answers()
busy[0] = True
first = rid[0]
puts = [(10 * PIECE, 99, False), (10 * PIECE + 4096, 99, False)]
data = send_batch(puts)
assert _engine.settle(s, False) and s.ctl[_engine.CHECK_COUNT] == 0  # (waited for no time yet)
time.sleep(2 * _engine.CHECK_NS / 1e9)
passing[0] = -1
assert _engine.settle(s, False) and s.ctl[_engine.CHECK_COUNT] == 1
assert marks[-1] >= _engine.LAND_SEGS and events[marks[-1]] == len(asked)  # (its copies asked)
send_batch([(10 * PIECE + 8192, 99, False)])
assert _engine.settle(s, False) and answers() == {}, "answered before its mark passed"
passing[0] = 0
assert _engine.settle(s, False)
assert answers() == {2 * first: 0, 2 * (first + 1): 0} and s.ctl[_engine.DEFERRED] == 1
for (offset, n, _big), d in zip(puts, data):
    assert (gpu[offset:offset + n] == d).all(), "answered before its copy ran"
busy[0] = False
assert _engine.settle(s, False) and answers() == {2 * (first + 2): 0}
assert s.ctl[_engine.DEFERRED] == 0 and s.ctl[_engine.CHECK_COUNT] == 0
busy[0] = True
send_batch([(10 * PIECE, 99, False)])
assert _engine.settle(s, False)
time.sleep(2 * _engine.CHECK_NS / 1e9)
assert _engine.settle(s, False) and s.ctl[_engine.CHECK_COUNT] == 1
passing[0] = 700
assert not _engine.settle(s, False) and s.ctl[_engine.FAILED_RC] == 700
passing[0] = 0
busy[0] = False


# 9. fetched by the fetchers
def fetchers(loop):
    """Start the fetchers of ``loop``; a function that stops them."""
    pipes = [os.pipe2(os.O_NONBLOCK) for _ in range(_engine.FETCHERS)]
    loop.fpipe[:] = pipes
    loop.ctl[_engine.FETCH_STOP] = 0
    threads = [threading.Thread(target=_engine.fetch, args=(loop, me), daemon=True)
               for me in range(_engine.FETCHERS)]  # (a failed assert ends the program)
    for thread in threads:
        thread.start()
    loop.ctl[_engine.FETCHING] = _engine.FETCHERS

    def stop():
        loop.ctl[_engine.FETCH_STOP] = 1
        for (_read, write), thread in zip(pipes, threads):
            os.write(write, b"!")
            thread.join(timeout=30)
            assert not thread.is_alive(), "a fetcher did not stop"
        loop.ctl[_engine.FETCHING] = 0
        for pipe in pipes:
            os.close(pipe[0])
            os.close(pipe[1])
    return stop


s.ctl[_engine.FAILED_CALL] = s.ctl[_engine.FAILED_RC] = 0
assert _engine.settle(s, True)
answers()
win = MPI.Win.Allocate(_engine.OUT_SEGS * PIECE, 1, comm=comm)
win.Lock_all(MPI.MODE_NOCHECK)
exposed = np.frombuffer(win.tomemory(), np.uint8)
s.ctl[_engine.WIN] = MPI._handleof(win)
# fetchers that nap (no threads: their words and pipes only): the loop
# fetches every piece itself and writes one byte into every pipe, once a nap
pipes = [os.pipe2(os.O_NONBLOCK) for _ in range(_engine.FETCHERS)]
s.fpipe[:] = pipes
s.ctl[_engine.FETCHING] = _engine.FETCHERS
s.fsleep[:], s.fnaps[:] = 1, 5
puts = [(11 * PIECE, PIECE, 2 * PIECE), (12 * PIECE, 5000, 0), (12 * PIECE + 1000, 99, None),
        (12 * PIECE + 2000, 300, 5 * PIECE + 64), (13 * PIECE, 70_000, 7 * PIECE)]
first = rid[0]
took, data = window_batch(puts)
assert took == 1 and _engine.all_landed(s) and _engine.issue_copy(s) and not s.fstate.any()
landed_whole(puts, data, first, "the loop's fetches for napping fetchers")
assert (s.fwoken == 5).all()
for read, write in pipes:
    assert len(os.read(read, 16)) == 1, "a napping fetcher was woken more or less than once"
    os.close(read)
    os.close(write)
s.fsleep[:] = 0
s.ctl[_engine.FETCHING] = 0
stop = fetchers(s)


def fetched_by(puts):
    """Have ``s`` take a batch of ``puts`` (``window_batch``), land and
    answer them; who fetched each from the window (a fetcher, -1: the loop)."""
    first, traced = rid[0], s.ctl[_engine.TRACED]
    took, data = window_batch(puts)
    assert took == 1 and _engine.all_landed(s) and _engine.issue_copy(s)
    assert not s.fstate.any()
    landed_whole(puts, data, first, "the fetched puts")
    events = s.trace[traced:s.ctl[_engine.TRACED]]
    began = events[events[:, 0] == _engine.FETCH_BEGAN]
    assert len(began) == sum(disp is not None for _o, _n, disp in puts)
    return list(began[:, 2])


def until(condition, what, seconds=10):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.001)


s.ctl[_engine.TRACING] = 1
s.ctl[_engine.FETCH_NAP] = 100 * 10**9  # (a nap ends only when woken)
naps = s.fnaps.copy()
until(lambda: (s.fnaps > naps).all() and s.fsleep.all(), "the fetchers did not nap")
naps = s.fnaps.copy()
s.ctl[_engine.FETCH_SPIN] = 10**11  # (once woken, they stay awake)
assert fetched_by([(11 * PIECE, PIECE, 2 * PIECE)]) == [-1], "posted to a fetcher that naps"
assert (s.fwoken == naps).all(), "a fetcher was not woken from the nap it was in"
until(lambda: not s.fsleep.any(), "a fetcher was not woken")
# awake: each piece at k goes to fetcher k % FETCHERS
k = s.ctl[_engine.RECV_HEAD]
assert fetched_by(puts) == [(k + j) % _engine.FETCHERS for j in range(4)]
# the trace names the calls of the target's functions besides copies in, apply, settled
recorded = s.trace[:s.ctl[_engine.TRACED]]
driver = recorded[recorded[:, 0] == _engine.DRIVER]
assert set(driver[:, 1]) <= set(range(len(_engine.DRIVER_CALLS))) and (driver[:, 2] >= 0).all()
assert _engine.MARK_CALL in driver[:, 1], "no mark in the trace"
s.ctl[_engine.TRACING] = 0
stop()
failing = s._replace(rget=type(s.rget)(lambda *args: 13))
stop = fetchers(failing)  # (awake: they spin, FETCH_SPIN)
took, _data = window_batch([(9 * PIECE, 4096, 0)], failing)
assert took == 1 and _engine.landed_data(failing, True) == -1
assert failed("MPI_Rget failed") and s.ctl[_engine.FAILED_RC] == 13
stop()
s.ctl[_engine.FETCH_SPIN], s.ctl[_engine.FETCH_NAP] = _engine.FETCH_SPIN_NS, _engine.FETCH_NAP_NS
win.Unlock_all()
win.Free()
print("ok")
