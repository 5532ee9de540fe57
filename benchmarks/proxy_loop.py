"""Benchmark: the compiled proxy loop's CPU time a request (``_transport/_engine.py``),
driven by hand in one process: one PE sends 8-byte puts (as a kernel's ``p``'s) to
itself, its heap reached through a Target's functions as a GPU's is, 1,024 posted into
the GPU ring at once, then served until all are answered. Prints, best and median of
the rounds: the time to take a request from the ring (``drain``) and the loop's whole
time a ``p`` (taken, sent, received, applied, answered, its answer taken). What the
calls from Python cost (an empty ``drain``) is taken off. The loop's functions are
called as the proxy's thread calls ``serve``, from Python: a compiled wrapper around
them would compile them anew, inlined otherwise than in the loop the proxy runs (with
dd9dde6's engine, such a wrapper took a request in 43 ns where its own ``drain`` took
123-147). No GPU, no second PE; MPI (mpi4py) sends the batches to this same process.

    python benchmarks/proxy_loop.py [--rounds 30]
"""
import argparse
import platform
import tempfile
import time

import numpy as np
from mpi4py import MPI

from numba_shmem._sim._target import function_target
from numba_shmem._transport import _engine, _ring
from numba_shmem._transport._mpi_c import MPIC

SLOTS, HEAP = _ring.SLOTS, 1 << 16


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    rounds = parser.parse_args().rounds
    heap = np.zeros(HEAP, np.uint8)
    lock = tempfile.TemporaryFile()
    host = np.zeros(_engine.HOST_NBYTES, np.uint8)
    host.view(np.int64)[_ring.FREE // 8:_ring.FREE // 8 + SLOTS] = np.arange(SLOTS)
    gpu = _ring.DeviceRing(np.zeros(_ring.NBYTES, np.uint8), None).memory
    s = _engine.state(MPIC(MPI.COMM_SELF.Dup()), 1, host, heap, np.array([HEAP]),
                      lock.fileno(), -1, gpu, function_target(heap, lock.fileno()))
    s.ctl[_engine.STOP] = 1  # (serve returns once nothing is left to do)
    words = s.gw
    ticket = 0

    def post():  # 1,024 puts of 8 bytes, each slot's value its ticket
        nonlocal ticket
        for _ in range(SLOTS):
            slot = ticket % SLOTS
            assert words[_ring.FREE // 8 + slot] == ticket, "the slot is not free"
            gpu[_ring.STAGING + slot * _ring.CHUNK:][:8].view(np.int64)[0] = ticket
            d = slot * 8
            words[d + 1], words[d + 2], words[d + 3], words[d + 4] = \
                _ring.code(_ring.PUT), 0, 8 * (ticket % (HEAP // 8)), 8
            words[d] = ticket + 1  # (published)
            ticket += 1

    def served():
        while words[_ring.COMPLETE // 8] != ticket:
            assert _engine.serve(s) == 0, _engine.CALLS[s.ctl[_engine.FAILED_CALL]]

    _engine.drain(s)  # (compiled, or loaded from numba's cache)
    empty = []
    for _ in range(rounds):  # a call into the loop's code from Python, alone
        began = time.perf_counter_ns()
        assert _engine.drain(s) == 0
        empty.append(time.perf_counter_ns() - began)
    call_ns = float(np.median(empty))
    take, whole = [], []
    for k in range(rounds + 2):  # (the first two warm up)
        post()
        began, taken, calls = time.perf_counter_ns(), 0, 0
        while taken < SLOTS:
            taken += _engine.drain(s)
            calls += 1
        took = time.perf_counter_ns() - began - calls * call_ns
        served()
        post()
        began = time.perf_counter_ns()
        served()
        if k >= 2:
            take.append(took / SLOTS)
            whole.append((time.perf_counter_ns() - began - call_ns) / SLOTS / 1e3)
    last = np.arange(ticket - SLOTS, ticket)  # (each p landed: the last round's values)
    assert (heap.view(np.int64)[last % (HEAP // 8)] == last).all(), "a p did not land"
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor()) \
        if platform.system() == "Linux" else platform.processor()
    print(f"the proxy loop on {cpu}, {SLOTS} p's a round, {rounds} rounds "
          f"(a call from Python: {call_ns / 1e3:.1f} us, taken off)")
    print(f"  a request taken from the ring (drain): best {min(take):.0f} ns, "
          f"median {np.median(take):.0f} ns")
    print(f"  the loop's whole time a p:             best {min(whole):.3f} us, "
          f"median {np.median(whole):.3f} us")


if __name__ == "__main__":
    main()
