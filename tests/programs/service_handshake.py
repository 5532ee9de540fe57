"""The host's side of ``serve_batches`` (numba_shmem/_cuda/_target.py), the
resident kernel that applies batches of atomics and signals under MPS,
against a thread that plays the kernel (its control block protocol: the
mailbox in, every word marked with the batch's number, up to SERVICE_INLINE
records in it; old values and APPLIED out), with the driver's functions
replaced by stand-ins. Needs no GPU. Prints ``ok``.

1. Each batch is posted once; a batch that fetches, or one larger than
   SERVICE_INLINE, is complete when ``apply`` returns (the old values in
   the records); with nothing given to the proxy's stream, no
   ``cuStreamQuery`` asks whether it is idle. The records a small batch
   carries in the mailbox are the records posted. A small batch whose
   records all fetch, and only such a batch, asks for its old values
   marked; ``apply`` takes them once every word carries the batch's number
   (the kernel here says APPLIED first, and writes the words one by one,
   each of them last in one batch: ``apply`` has not returned before it).
2. The kernel gone (its stream idle): ``apply`` says so (CUDA_ERROR_UNKNOWN)
   instead of waiting for ever, and so does ``settled`` for a batch it did
   not wait for.
3. The proxy's stream given a copy and still busy, or the kernel not (yet)
   running: the batch goes the stream's way, not the kernel's.
4. A small batch of signals that fetches nothing: ``apply`` returns at once,
   ``settled`` says it is not done until the kernel has applied it, and a
   copy into or out of the heap asked meanwhile waits for the kernel first
   (one order: a get sees the batches before it). A larger
   one: complete on return. No stream memory operation either way.
5. A record whose address is not in the heap never reaches the kernel (it
   would fault there and spoil the proxy's context): ``apply`` refuses the
   batch (CUDA_ERROR_INVALID_VALUE) and posts nothing.
"""

import threading
import time

import numpy as np

from numba_shmem._cuda import _target
from numba_shmem._transport import _engine, _ring

calls = {}
stream_state = [0]  # what cuStreamQuery returns for the proxy's stream: 0 idle, 600 busy
SERVICE_STREAM = 7
playing = threading.Event()  # the kernel's stream is busy while a thread plays it


def stand_in(name):
    def function(*args):
        calls[name] = calls.get(name, 0) + 1
        if name != "cuStreamQuery":
            return 0
        if args[0] == SERVICE_STREAM:
            return 600 if playing.is_set() else 0
        calls["proxy's stream queried"] = calls.get("proxy's stream queried", 0) + 1
        return stream_state[0]
    return _target.DRIVER[name](function)


driver = tuple(stand_in(name) for name in _target.DRIVER)
pend = np.zeros((_engine.PEND_MAX, _engine.PEND_WORDS), np.int64)
control = np.zeros(_target.SERVICE_BYTES // 8, np.uint64)
counts = np.zeros(_target.COUNTS, np.int64)
keep = [np.zeros((_engine.PEND_MAX, _target.MEMOP_WORDS), np.uint64),
        np.zeros(_engine.LAND_SEGS, np.uint64), np.zeros(32, np.uint64), np.zeros(1, np.int64)]
templates = np.zeros((len(_target.MEMOPS), _target.MEMOP_WORDS), np.uint64)
where = np.full((len(_target.MEMOPS), 2), -1, np.int64)  # (writes of 8 bytes only)
where[_target.MEMOPS.index("write64")] = 0, 1
SIGNAL_SET = _ring.code(_ring.SIGNAL)  # (what a signal that sets asks)
functions = _target._functions(
    driver, 1, 2, 3, keep[3].ctypes.data, keep[0].ctypes.data, templates, where,
    counts.ctypes.data, keep[1].ctypes.data, keep[2].ctypes.data, np.zeros(6, np.int64),
    _target.LAUNCH_MIN, pend.ctypes.data, control.ctypes.data, SERVICE_STREAM)
apply = _engine.APPLY(functions[2].address)
stop = threading.Event()
slow = threading.Event()  # the kernel waits before it applies
returned = threading.Event()  # ``apply`` of a batch answered marked has returned
early = []  # the batches whose ``apply`` returned before their last word
seen_batches = []
T = _target


def mailbox():
    """The batch in the mailbox: (its number, its count, its inline records
    as (address, code, value, cond) rows, or None, whether its old values go
    marked), or None while its words do not all carry one number."""
    words = [int(w) for w in control[:T.SERVICE_MAIL]]
    marks = {w >> 32 for w in words}
    if len(marks) != 1:
        return None
    number, n = words[0] >> 32, words[0] & (T.SERVICE_MARKED - 1)
    marked = words[0] & T.SERVICE_MARKED != 0
    if n > T.SERVICE_INLINE:
        return number, n, None, marked
    halves = [w & 0xFFFF_FFFF for w in words[1:]]
    rows = []
    for k in range(n):
        h = halves[k * T.MAIL_RECORD:(k + 1) * T.MAIL_RECORD]
        rows.append((h[0] | h[1] << 32, h[2], h[3] | h[4] << 32, h[5] | h[6] << 32))
    return number, n, rows, marked


def kernel():
    """serve_batches' protocol: running, each posted batch once (old value =
    value + 1; marked where asked, after APPLIED, one word at a time), not
    running once told to stop."""
    control[T.SERVICE_RUNNING] = 1
    while not stop.is_set():
        if int(control[0]) == T.SERVICE_STOP:
            break
        batch = mailbox()
        if batch is None or batch[0] == int(control[T.SERVICE_APPLIED]):
            continue
        number, n, rows, marked = batch
        if slow.is_set():
            time.sleep(0.05)
        if rows is not None:
            as_posted = [tuple(int(np.uint64(v)) for v in pend[k, :4]) for k in range(n)]
            assert rows == as_posted, (rows, as_posted)
        fetching = all(_engine.fetches(int(pend[k, 1])) for k in range(n))
        assert marked == (n <= T.SERVICE_INLINE and fetching), (n, marked)
        seen_batches.append((number, n))
        if not marked:
            pend[:n, 4] = pend[:n, 2] + 1
            control[T.SERVICE_APPLIED] = number
            continue
        control[T.SERVICE_APPLIED] = number  # (seen first: the host waits for the words)
        words = []
        for k in range(n):
            old = int(np.uint64(pend[k, 2] + 1))
            words += [old & 0xFFFF_FFFF, old >> 32]
        last = number % len(words)
        for w in [w for w in range(len(words)) if w != last] + [last]:
            time.sleep(0.02 if w == last else 0.002)
            if w == last and returned.is_set():
                early.append(number)
            assert control[T.SERVICE_OLD + w] == 0  # (cleared when posted)
            control[T.SERVICE_OLD + w] = number << 32 | words[w]
    control[T.SERVICE_RUNNING] = 0


def playing_kernel(work):
    """Run ``work`` while a thread plays the kernel."""
    stop.clear()
    thread = threading.Thread(target=kernel)
    playing.set()
    thread.start()
    try:
        work()
    finally:
        stop.set()
        thread.join()
        playing.clear()


FETCH_ADD = _ring.code(_ring.ATOMIC, 3, _ring.ATOMIC_OPS.index("add"), 1)
settled = _engine.SETTLED(functions[3].address)
copy_in = _engine.COPY_IN(functions[0].address)


def batches():  # 1.
    pend[:, 1] = FETCH_ADD
    for n in (1, 3, T.SERVICE_INLINE + 2):
        pend[:n, 0] = (1 << 40) + 8 * np.arange(n)
        pend[:n, 2] = np.arange(n) * n - 5
        pend[:n, 3] = -np.arange(n)
        pend[:n, 4] = 0
        assert apply(pend.ctypes.data, n) == 0
        assert (pend[:n, 4] == np.arange(n) * n - 4).all(), pend[:5]
    for r in range(6):  # (each of the six words of a batch of three last once)
        pend[:3, 2] = np.arange(3) - (1 << 40) * r
        pend[:3, 4] = 0
        returned.clear()
        assert apply(pend.ctypes.data, 3) == 0
        returned.set()
        assert (pend[:3, 4] == pend[:3, 2] + 1).all(), pend[:3]
    pend[1, 1] = SIGNAL_SET  # (a small batch that fetches, but not all of it: not marked)
    pend[:3, 4] = 0
    assert apply(pend.ctypes.data, 3) == 0
    assert pend[0, 4] == pend[0, 2] + 1 and pend[2, 4] == pend[2, 2] + 1, pend[:3]
    pend[:, 1] = FETCH_ADD


playing_kernel(batches)
assert seen_batches == [(1, 1), (2, 3), (3, T.SERVICE_INLINE + 2)] + [
    (4 + r, 3) for r in range(7)], seen_batches
assert not early, early
assert counts[1] == 10 and calls.get("cuLaunchKernel", 0) == 0, (counts, calls)
assert "proxy's stream queried" not in calls, calls
control[T.SERVICE_RUNNING] = 1  # 2. (it stopped without saying so: it trapped)
assert apply(pend.ctypes.data, 2) == T._SERVICE_GONE  # (answered marked)
assert apply(pend.ctypes.data, T.SERVICE_INLINE + 1) == T._SERVICE_GONE  # (caught_up)
control[T.SERVICE_APPLIED] = control[T.SERVICE_POSTED]  # (as if that one had been applied)
pend[:, 1] = SIGNAL_SET
assert apply(pend.ctypes.data, 2) == 0  # (not waited for)
for _ in range(5000):
    rc = settled()
    if rc != -1:
        break
assert rc == T._SERVICE_GONE, rc
control[T.SERVICE_APPLIED] = control[T.SERVICE_POSTED]
posted = int(control[T.SERVICE_POSTED])
stream_state[0] = 600  # 3.
pend[:, 1] = FETCH_ADD  # (no stream memory operation: a launch)
assert copy_in(1 << 40, pend.ctypes.data, 8, 8, 1) == 0
assert apply(pend.ctypes.data, 1) == 0
assert int(control[T.SERVICE_POSTED]) == posted and calls["cuLaunchKernel"] == 1, calls
stream_state[0] = 0
control[T.SERVICE_RUNNING] = 0
assert apply(pend.ctypes.data, 1) == 0
assert int(control[T.SERVICE_POSTED]) == posted and calls["cuLaunchKernel"] == 2, calls
seen_batches.clear()


def signals():  # 4.
    pend[:, 1] = SIGNAL_SET
    memops = calls.get("cuStreamBatchMemOp_v2", 0)
    slow.set()
    assert apply(pend.ctypes.data, 3) == 0
    assert settled() == -1, "a batch not yet applied was settled"
    assert copy_in(1 << 40, pend.ctypes.data, 8, 8, 1) == 0
    assert control[T.SERVICE_APPLIED] == control[T.SERVICE_POSTED], \
        "a copy went before the kernel's batch"
    assert apply(pend.ctypes.data, 2) == 0  # (and a copy out of the heap: a get's)
    copy_out = _engine.COPY_OUT(functions[1].address)
    assert copy_out(pend.ctypes.data, 1 << 40, 8, 0) == 0
    assert control[T.SERVICE_APPLIED] == control[T.SERVICE_POSTED], \
        "a copy out went before the kernel's batch"
    slow.clear()
    stream_state[0] = 0  # (the copy is done)
    assert settled() == 0
    assert apply(pend.ctypes.data, T.SERVICE_INLINE + 1) == 0
    assert seen_batches[-1] == (posted + 3, T.SERVICE_INLINE + 1), seen_batches
    assert settled() == 0
    assert calls.get("cuStreamBatchMemOp_v2", 0) == memops, calls


playing_kernel(signals)
assert [n for _, n in seen_batches] == [3, 2, T.SERVICE_INLINE + 1], seen_batches

# 5. (the same functions over a heap from 1 << 40 up to 1 << 41)
bounded = _target._functions(
    driver, 1, 2, 3, keep[3].ctypes.data, keep[0].ctypes.data, templates, where,
    counts.ctypes.data, keep[1].ctypes.data, keep[2].ctypes.data, np.zeros(6, np.int64),
    _target.LAUNCH_MIN, pend.ctypes.data, control.ctypes.data, SERVICE_STREAM,
    heap=(1 << 40, 1 << 41))
apply = _engine.APPLY(bounded[2].address)


def outside():
    posted = int(control[T.SERVICE_POSTED])
    pend[:2, 0] = (1 << 40) + 8, 8
    assert apply(pend.ctypes.data, 2) == T._INVALID_VALUE
    assert int(control[T.SERVICE_POSTED]) == posted, "a batch outside the heap was posted"
    pend[1, 0] = (1 << 41) - 8
    assert apply(pend.ctypes.data, 2) == 0 and int(control[T.SERVICE_POSTED]) == posted + 1


playing_kernel(outside)
print("ok")
