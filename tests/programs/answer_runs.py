"""Property: answering the deferred requests (``_engine.answer_deferred``, which
writes a run toward one PE in one pass) leaves in the answer buffers, toward
each PE, exactly the answers ``answer`` would have queued one by one: each
deferred request's rid, in order, with reason, value and inline bytes 0 (and,
tracing, one note each); the requests deferred after them stay, moved up.
PE 0's buffer may start nearly full, so that a run fills it and goes on in a
new one (the full one is sent, to this same process). The proxy's loop driven
by hand (hypothesis). Prints ``ok``.
"""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mpi4py import MPI

from numba_shmem._transport import _engine, _ring
from numba_shmem._transport._mpi_c import MPIC

PES, WORDS = 3, _engine.ANS_WORDS
ANS = _engine.TAG_ANS - _engine.TAG_REQ
comm = MPI.COMM_SELF.Dup()
s = _engine.state(MPIC(comm), PES, np.zeros(_engine.HOST_NBYTES, np.uint8),
                  np.zeros(1 << 12, np.uint8), np.array([1 << 12]), -1, -1,
                  np.zeros(_ring.NBYTES, np.uint8))
rids = iter(range(1, 1 << 40))
starts = {}  # a buffer's first answer of this example, where it did not start empty


def reset():
    """No buffer in use; what was sent to this process taken."""
    status = MPI.Status()
    while comm.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG, status):
        comm.Recv(bytearray(status.Get_count(MPI.BYTE)), status.Get_source(), status.Get_tag())
    s.bstate[:] = 0
    s.openb[:] = -1
    s.ctl[_engine.OPEN] = s.ctl[_engine.IN_FLIGHT] = s.ctl[_engine.DEFERRED] = 0
    starts.clear()


def queued(pe):
    """The answers toward ``pe`` in its buffers, sent ones first, as rows of
    (rid, reason, value, inline)."""
    rows = []
    for b in sorted(range(_engine.BUFFERS), key=lambda b: s.bstate[b] != 2):
        if s.bstate[b] != 0 and s.bpeer[b] == pe and s.btag[b] == _engine.TAG_ANS:
            answers = s.pool[b][starts.get(b, 0):s.fill[b]].view(np.int64)
            rows.extend(answers.reshape(-1, WORDS).tolist())
    return rows


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(st.integers(0, PES - 1), st.integers(1, 40)), min_size=1,
                max_size=12),
       st.integers(0, 4), st.integers(0, 10), st.booleans())
def test(runs, room, keep, tracing):
    reset()
    if room:  # PE 0's buffer open, with room for ``room - 1`` answers only
        assert _engine.answer(s, 0, 0, 0, 0, 0, 0)
        b = s.openb[0, ANS]
        s.fill[b] = starts[b] = _engine.BATCH - (room - 1) * 8 * WORDS
    s.ctl[_engine.TRACING] = int(tracing)
    s.ctl[_engine.TRACED] = 0
    sources = [pe for pe, length in runs for _ in range(length)]
    deferred = [(next(rids), pe) for pe in sources]
    later = [(next(rids), pe) for pe in sources[:keep]]  # (deferred after them)
    for k, (rid, pe) in enumerate(deferred + later):
        s.drid[k], s.dsource[k] = rid, pe
    s.ctl[_engine.DEFERRED] = len(deferred) + len(later)
    assert _engine.answer_deferred(s, len(deferred))
    for pe in range(PES):
        want = [[rid, 0, 0, 0] for rid, to in deferred if to == pe]
        got = queued(pe)
        assert got == want, (pe, room, got[:4], want[:4])
    if room > 0 and len([pe for pe in sources if pe == 0]) >= room:
        assert (s.bstate == 2).sum() == 1, "PE 0's full buffer was not sent"
    assert s.ctl[_engine.DEFERRED] == len(later)
    assert [(int(s.drid[k]), int(s.dsource[k])) for k in range(len(later))] == later
    if tracing:
        notes = s.trace[:s.ctl[_engine.TRACED]].tolist()
        assert [(a, b) for event, a, b, _at in notes if event == _engine.ANSWERED] == deferred


test()
reset()
print("ok")
