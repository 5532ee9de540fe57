"""Property: whatever a kernel's chunk puts and the host's puts post, in any
interleaving with the loop's drains, the heap ends as the puts, applied in the
order they were posted, leave it (hypothesis against a numpy model). The
proxy's loop is driven by hand (_transport/_engine.py), one PE sending to
itself, its heap reached through a Target's functions as a GPU's is
(``function`` as argv[1]) or in this process's memory. Prints ``ok``.

The puts overlap (a 144 KiB heap), so order shows; the GPU's transfers go
as runs of chunks (``run_of``), a transfer from where the last one ended may
join its run, a host put's ORDER splits them; some run past the heap's end,
where the whole chunks before the end land (as their own requests would) and
the rest is refused.
"""

import sys
import tempfile

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from mpi4py import MPI

from numba_shmem._sim._target import function_target
from numba_shmem._transport import _engine, _ring
from numba_shmem._transport._mpi_c import MPIC

SLOTS, CHUNK = _ring.SLOTS, _ring.CHUNK
REGION = 16 * CHUNK  # where the puts go: they overlap
HEAP = REGION + 2 * CHUNK
comm = MPI.COMM_SELF.Dup()
heap = np.zeros(HEAP, np.uint8)
lock = tempfile.TemporaryFile()
target = function_target(heap, lock.fileno()) if sys.argv[1:] == ["function"] else None
host = np.zeros(_engine.HOST_NBYTES, np.uint8)
host.view(np.int64)[_ring.FREE // 8:_ring.FREE // 8 + SLOTS] = np.arange(SLOTS)
gpu = _ring.DeviceRing(np.zeros(_ring.NBYTES, np.uint8), None).memory  # (every slot free)
s = _engine.state(MPIC(comm), 1, host, heap, np.array([HEAP]), lock.fileno(), -1, gpu, target)
s.ctl[_engine.STOP] = 1  # (serve returns once it has nothing left to do)
gw, hw = s.gw, s.hw
tickets = [0, 0]  # the next GPU and host tickets


def serve():
    assert _engine.serve(s) == 0, _engine.CALLS[s.ctl[_engine.FAILED_CALL]]


def post(ring, words, which, offset, data, order=0):
    """Post a put of ``data`` into ring ``which`` (0: the GPU's, 1: the
    host's), once its slot is free (the loop runs meanwhile)."""
    t = tickets[which]
    slot = t % SLOTS
    while words[_ring.FREE // 8 + slot] != t:
        serve()
    stage = _ring.STAGING + slot * CHUNK
    ring[stage:stage + data.size] = data
    d = slot * 8
    words[d + 1], words[d + 2], words[d + 3], words[d + 4] = _ring.code(_ring.PUT), 0, offset, \
        data.size
    if which:
        words[d + _engine.ADDR], words[d + _engine.ORDER] = 0, order
    words[d] = t + 1
    tickets[which] = t + 1


def finish():
    for _ in range(10_000):
        if gw[_ring.COMPLETE // 8] == tickets[0] and hw[_ring.COMPLETE // 8] == tickets[1]:
            return
        serve()
    raise AssertionError("tickets not complete")


last_chunk = st.one_of(st.just(CHUNK), st.integers(1, CHUNK))
gpu_transfer = st.tuples(st.just("gpu"), st.integers(0, 17), st.integers(1, 12), last_chunk,
                         st.integers(0, 255))
# a transfer from where the last one ended (the chunks of two calls can join a run)
gpu_after = st.tuples(st.just("after"), st.just(0), st.integers(1, 12), last_chunk,
                      st.integers(0, 255))
# (at a chunk, and bytes into it: where the GPU's chunks go)
host_put = st.tuples(st.just("host"), st.integers(0, HEAP // CHUNK - 1), st.integers(1, CHUNK),
                     st.integers(0, CHUNK - 1), st.integers(0, 255))
drain = st.tuples(st.just("drain"), st.just(0), st.just(0), st.just(0), st.just(0))


@settings(max_examples=80, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(st.lists(st.one_of(gpu_transfer, gpu_after, host_put, drain), max_size=12))
@example([("gpu", 0, 2, CHUNK, 1), ("host", 3, 100, 0, 9), ("after", 0, 2, CHUNK, 5)])
def test(ops):
    heap[:] = 0
    want = np.zeros(HEAP, np.uint8)
    refused = s.ctl[_engine.REFUSED]
    expect_refused = 0
    end = 0  # the chunk after the last GPU transfer's
    for kind, at, count, last, fill in ops:
        if kind == "after":
            kind, at = "gpu", end
        if kind == "drain":
            assert _engine.drain(s) >= 0
        elif kind == "host":
            at = at * CHUNK + last
            n = min(count, HEAP - at)
            data = np.full(n, fill, np.uint8)
            post(host, hw, 1, at, data, order=tickets[0])
            want[at:at + n] = data
        else:  # count chunks from chunk ``at``, the last of ``last`` bytes
            end = at + count
            for c in range(count):
                n = CHUNK if c < count - 1 else last
                offset = (at + c) * CHUNK
                data = np.full(n, (fill + c) % 256, np.uint8)
                post(gpu, gw, 0, offset, data)
                if offset + n <= HEAP:
                    want[offset:offset + n] = data
                else:
                    expect_refused += 1
    finish()
    wrong = np.flatnonzero(heap != want)
    assert wrong.size == 0, f"{wrong.size} bytes differ, the first at {wrong[:1]}: {ops}"
    # (a run refused past the heap's end is one refusal for all of its chunks)
    assert (s.ctl[_engine.REFUSED] > refused) == (expect_refused > 0)


test()
print("ok")
