"""Drive the proxy loop's target side (_transport/_engine.py) by hand, with
no other PE and a recording target: a batch of requests toward a GPU's heap
is received into a landing segment, and its puts' data is copied from there,
a run of chunks (one record header apart) as one 2D copy. Prints ``ok``.

A batch of three 8 KiB puts to consecutive offsets, a put of 99 bytes
elsewhere, and three more 8 KiB puts goes to this PE itself; the target is
asked for three copies (rows of 8 KiB at a pitch of 8 KiB and a header, then
the small one, then the second run), each from the bytes the origin put.
"""

import numpy as np
from mpi4py import MPI

from numba_shmem._transport import _engine, _ring
from numba_shmem._transport._mpi_c import MPIC

CHUNK, REQ = _ring.CHUNK, 8 * _engine.REQ_WORDS
BASE = 1 << 40  # (the heap's address on the fake GPU)
comm = MPI.COMM_SELF.Dup()
host = np.zeros(_engine.HOST_NBYTES, np.uint8)
copies = []


@_engine.COPY_IN
def copy_in(dst, src, n, pitch, rows):
    rows_data = [np.ctypeslib.as_array((np.ctypeslib.ctypes.c_uint8 * n).from_address(
        src + row * pitch)).copy() for row in range(rows)]
    copies.append((dst - BASE, n, pitch, rows, rows_data))
    return 0


def refuse(*args):
    return -1


def done(*args):
    return 0


target = _engine.Target(copy_in, _engine.COPY_OUT(refuse), _engine.APPLY(refuse),
                        _engine.SETTLED(done), _engine.MARK(done), _engine.MARK(done), BASE,
                        np.zeros((_engine.PEND_MAX, _engine.PEND_WORDS), np.int64))
s = _engine.state(MPIC(comm), 1, host, np.zeros(8, np.uint8), np.array([1 << 20]), -1, -1,
                  target=target)

rng = np.random.default_rng(3)
puts = [(k * CHUNK, CHUNK) for k in range(3)] + [(200_001, 99)] \
    + [(300_000 + k * CHUNK, CHUNK) for k in range(3)]
data = [rng.integers(0, 256, n, dtype=np.uint8) for _, n in puts]
batch = bytearray()
for rid, ((offset, n), d) in enumerate(zip(puts, data)):
    header = np.array([rid * 2, _ring.code(_ring.PUT), offset, n, 0, n], np.int64)
    batch += header.tobytes() + d.tobytes() + bytes(_engine.pad(n) - n)
batch = np.frombuffer(bytes(batch), np.uint8)
request = comm.Isend([batch, MPI.BYTE], 0, _engine.TAG_REQ)
while _engine.look(s.iprobe, s.ctl, s.flag, s.status, s.ctl[_engine.ANY_TAG]) <= 0:
    pass
assert _engine.receive(s) == 1, s.ctl[_engine.FAILED_CALL]
request.Wait()

pitch = REQ + CHUNK
expected = [(0, CHUNK, pitch, 3, data[0:3]), (200_001, 99, 99, 1, data[3:4]),
            (300_000, CHUNK, pitch, 3, data[4:7])]
assert [c[:4] for c in copies] == [e[:4] for e in expected], [c[:4] for c in copies]
for got, want in zip(copies, expected):
    assert all((a == b).all() for a, b in zip(got[4], want[4])), "a copy read other bytes"
assert s.ctl[_engine.DEFERRED] == len(puts)  # (answered once the copies are done)
print("ok")
