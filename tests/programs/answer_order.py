"""Drive the proxy loop's origin side (_transport/_engine.py) by hand, with
no other PE: answers that come out of order, and a ring slot given back
before its request is answered. Prints ``ok``.

A kernel posts 1,024 puts (their slots given back as they are taken), then a
get into the first put's slot. The get must wait in the ring until the first
put is answered; the first put's answer, read while its slot holds the get's
descriptor, must be read as a put's (before, it waited in MPI_Recv for get
data that never came); a second answer to it is an error.
"""

import numpy as np
from mpi4py import MPI

from numba_shmem._transport import _engine, _ring
from numba_shmem._transport._mpi_c import MPIC

SLOTS = _ring.SLOTS
comm = MPI.COMM_SELF.Dup()
host = np.zeros(_engine.HOST_NBYTES, np.uint8)
host.view(np.int64)[_ring.FREE // 8:_ring.FREE // 8 + SLOTS] = np.arange(SLOTS)
gpu = np.zeros(_ring.NBYTES, np.uint8)
gpu.view(np.int64)[_ring.FREE // 8:_ring.FREE // 8 + SLOTS] = np.arange(SLOTS)
heap = np.zeros(1 << 16, np.uint8)
s = _engine.state(MPIC(comm), 2, host, heap, np.array([heap.size]), -1, -1, gpu)
words = s.gw


def post(ticket, kind, nbytes):
    """The GPU's post of ticket ``ticket``: a request of ``kind`` to PE 1."""
    d = (ticket % SLOTS) * 8
    assert words[_ring.FREE // 8 + ticket % SLOTS] == ticket, "the slot is not free"
    words[d + 1], words[d + 2], words[d + 3], words[d + 4] = _ring.code(kind), 1, 64, nbytes
    words[d] = ticket + 1  # SEQ: published


def answer(*tickets):
    """Take an ANS batch answering ``tickets`` (reason 0, no data)."""
    batch = np.zeros(len(tickets) * _engine.ANS_WORDS, np.int64)
    for k, ticket in enumerate(tickets):
        batch[k * _engine.ANS_WORDS] = ticket * 2 + 1  # rid: a GPU ticket
    inbox = batch.view(np.uint8)
    return _engine.take_answers(s, inbox, inbox.size, 1)


for t in range(SLOTS):
    post(t, _ring.PUT, 8)
    _engine.forward(s, True, t, 1)  # (as drain takes it; the slot is given back)
s.ctl[_engine.GPU_NEXT] = SLOTS
post(SLOTS, _ring.GET, 8)  # into ticket 0's slot, ticket 0 not answered
assert _engine.drain(s) == 0, "took a ticket whose slot's request is not answered"
assert answer(*range(1, SLOTS))
assert words[_ring.COMPLETE // 8] == 0 and _engine.drain(s) == 0
assert answer(0)  # read as the put it answers, not as the get in its slot now
assert words[_ring.COMPLETE // 8] == SLOTS
assert _engine.drain(s) == 1 and s.ctl[_engine.GPU_NEXT] == SLOTS + 1
assert not answer(0) and s.ctl[_engine.FAILED_CALL] == 13, "a second answer was taken"
print("ok")
