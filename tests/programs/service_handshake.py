"""The host's side of ``serve_batches`` (numba_shmem/_cuda/_target.py), the
resident kernel that applies batches of atomics and signals under MPS,
against a thread that plays the kernel (its control block protocol: POSTED,
COUNT in; old values and APPLIED out), with the driver's functions replaced
by stand-ins. Needs no GPU. Prints ``ok``.

1. Each batch is posted once (its sequence number and record count in one
   word) and ``apply`` returns once the kernel has written it back, the old
   values in the records; with nothing given to the proxy's stream, no
   ``cuStreamQuery`` asks whether it is idle.
2. The kernel gone (its stream idle): ``apply`` says so (CUDA_ERROR_UNKNOWN)
   instead of waiting for ever.
3. The proxy's stream given a copy and still busy, or the kernel not (yet)
   running: the batch goes the stream's way, not the kernel's.
4. A batch of signals (each one a stream memory operation) goes as stream
   memory operations while it has fewer than SERVE_MIN records, and to the
   kernel from SERVE_MIN on.
"""

import threading

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
control = np.zeros(8, np.uint64)
counts = np.zeros(4, np.int64)
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
seen_batches = []


def kernel():
    """serve_batches' protocol: running, each posted batch once (old value =
    value + 1), not running once told to stop."""
    seen = 0
    control[_target.SERVICE_RUNNING] = 1
    while not stop.is_set():
        posted = int(control[_target.SERVICE_POSTED])
        if posted != seen:
            n = posted & ((1 << _target.SERVICE_SHIFT) - 1)
            pend[:n, 4] = pend[:n, 2] + 1
            seen_batches.append((posted >> _target.SERVICE_SHIFT, n))
            seen = posted
            control[_target.SERVICE_APPLIED] = posted
    control[_target.SERVICE_RUNNING] = 0


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


def batches():  # 1.
    for batch in range(1, 4):
        pend[:batch + 2, 2] = np.arange(batch + 2) * batch
        assert apply(pend.ctypes.data, batch + 2) == 0
        assert (pend[:batch + 2, 4] == np.arange(batch + 2) * batch + 1).all(), pend[:5]


playing_kernel(batches)
assert seen_batches == [(1, 3), (2, 4), (3, 5)], seen_batches
assert counts[1] == 3 and calls.get("cuLaunchKernel", 0) == 0, (counts, calls)
assert "proxy's stream queried" not in calls, calls
control[_target.SERVICE_RUNNING] = 1  # 2. (it stopped without saying so: it trapped)
assert apply(pend.ctypes.data, 2) == _target._SERVICE_GONE
posted = int(control[_target.SERVICE_POSTED])
stream_state[0] = 600  # 3.
copy_in = _engine.COPY_IN(functions[0].address)
assert copy_in(1 << 40, pend.ctypes.data, 8, 8, 1) == 0
assert apply(pend.ctypes.data, 1) == 0
assert int(control[_target.SERVICE_POSTED]) == posted and calls["cuLaunchKernel"] == 1, calls
stream_state[0] = 0
control[_target.SERVICE_RUNNING] = 0
assert apply(pend.ctypes.data, 1) == 0
assert int(control[_target.SERVICE_POSTED]) == posted and calls["cuLaunchKernel"] == 2, calls


def signals():  # 4.
    pend[:, 1] = SIGNAL_SET
    before = list(seen_batches)
    assert apply(pend.ctypes.data, _target.SERVE_MIN - 1) == 0
    assert seen_batches == before and calls["cuStreamBatchMemOp_v2"] == 1, calls
    assert apply(pend.ctypes.data, _target.SERVE_MIN) == 0
    assert seen_batches == before + [(5, _target.SERVE_MIN)], seen_batches
    assert calls["cuStreamBatchMemOp_v2"] == 1, calls


playing_kernel(signals)
print("ok")
