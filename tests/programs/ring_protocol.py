"""The proxy's device ring, driven from the host: Python threads stand in for
GPU threads and post requests through the ring's protocol (a ticket, the
slot's FREE word, the data staged, the fields, SEQ last; a fetch waits for
DONE, reads the answer and gives the slot back), exactly as the device code
in numba_shmem/_cuda/_far.py does. The requests go through a second proxy
with that ring (the compiled one, as on the GPU) to the other PE's simulator
heap; the results are checked
against a plain model. More than SLOTS requests, so that every slot is
reused; quiet (the host's, which waits for the ring's COMPLETE word) must
cover them all. Then program order across the ring and the host's calls: a
request the GPU published before a host call toward the same bytes is
applied before it, and one published after it, after it.

    NUMBA_SHMEM_NODE_SIZE=1 mpiexec -n 2 python ring_protocol.py SEED
"""

import sys
import threading
import time

import numba_shmem as shmem  # first: on a machine without a GPU it picks the simulator
import numpy as np
from numba_shmem import _runtime
from numba_shmem._sim._device import _offset
from numba_shmem._sim._heap import host_array
from numba_shmem._transport import _ring

THREADS = 8
PUTS = 200  # per thread, each to a region of its own
ADDS = 60  # fetching adds per thread on one counter
ORDER_ROUNDS = 200  # of each order across the ring and the host's calls
BURST = 600  # requests the GPU publishes at once before one host call (more than one drain)


class FakeDevice:
    """The GPU's side of the ring, in Python (one lock stands for the atomic
    add on the ticket counter)."""

    def __init__(self):
        self.memory = np.zeros(_ring.NBYTES, np.uint8)
        self.words = self.memory[:_ring.STAGING].view(np.uint64)
        self.tickets = 0
        self._lock = threading.Lock()

    def posted(self):
        return self.tickets

    def _wait(self, index, value, deadline=60.0):
        start = time.monotonic()
        while int(self.words[index]) != value:
            if time.monotonic() - start > deadline:
                raise RuntimeError(f"ring word {index} never became {value}")
            time.sleep(0)

    def post(self, code, pe, offset, arg=0, cond=0, data=None):
        with self._lock:
            t = self.tickets
            self.tickets += 1
        slot = t % _ring.SLOTS
        self._wait(_ring.FREE // 8 + slot, t)
        if data is not None:
            at = _ring.STAGING + slot * _ring.CHUNK
            self.memory[at:at + data.size] = data
        d = slot * _ring.DESCRIPTOR // 8
        for field, value in ((_ring.CODE, code), (_ring.PE, pe), (_ring.OFFSET, offset),
                             (_ring.ARG, arg), (_ring.COND, cond)):
            self.words[d + field] = value
        self.words[d + _ring.SEQ] = t + 1  # last
        return t, slot

    def post_all(self, requests):
        """Post ``requests`` ((code, pe, offset, arg, data) each) and publish
        them at once: every SEQ word last, the first ticket's last of all (the
        proxy reads in ticket order, so it sees none before it sees all)."""
        slots = []
        for code, pe, offset, arg, data in requests:
            with self._lock:
                t = self.tickets
                self.tickets += 1
            slot = t % _ring.SLOTS
            self._wait(_ring.FREE // 8 + slot, t)
            at = _ring.STAGING + slot * _ring.CHUNK
            self.memory[at:at + data.size] = data
            d = slot * _ring.DESCRIPTOR // 8
            for field, value in ((_ring.CODE, code), (_ring.PE, pe), (_ring.OFFSET, offset),
                                 (_ring.ARG, arg), (_ring.COND, 0)):
                self.words[d + field] = value
            slots.append((t, d))
        for t, d in reversed(slots):
            self.words[d + _ring.SEQ] = t + 1

    def answer(self, t, slot, nbytes=None):
        self._wait(_ring.DONE // 8 + slot, t + 1)
        if nbytes is None:
            value = int(self.words[_ring.ANSWER // 8 + slot])
        else:
            at = _ring.STAGING + slot * _ring.CHUNK
            value = self.memory[at:at + nbytes].copy()
        self.words[_ring.FREE // 8 + slot] = t + _ring.SLOTS  # give it back
        return value


def main():
    seed = int(sys.argv[1])
    shmem.init()
    runtime = _runtime.current()
    me, other = shmem.my_pe(), 1 - shmem.my_pe()
    regions = shmem.zeros((THREADS, PUTS, 16), np.uint8)
    counter = shmem.zeros(1, np.int64)
    signal = shmem.zeros(1, np.uint64)
    known = shmem.array(64, np.int32)
    host_array(known)[:] = np.arange(64, dtype=np.int32) * (me + 1)
    device = FakeDevice()
    ring = _ring.DeviceRing(device.memory, device.posted)
    proxy = _runtime.sim_proxy(runtime, device=ring)
    shmem.barrier_all()

    rng = np.random.default_rng(seed + me)
    payloads = rng.integers(0, 256, (THREADS, PUTS, 16), dtype=np.uint8)
    lengths = rng.integers(1, 17, (THREADS, PUTS))
    fetched, got, failures = [[] for _ in range(THREADS)], [None] * THREADS, []
    put_code = _ring.code(_ring.PUT)
    add_code = _ring.code(_ring.ATOMIC, _ring.DTYPES.index("int64"),
                          _ring.ATOMIC_OPS.index("add"), 1)

    def work(k):
        try:
            for i in range(PUTS):
                n = int(lengths[k, i])
                device.post(put_code, other, _offset(regions, "put", (k * PUTS + i) * 16), n,
                            data=payloads[k, i, :n])
                if i % (PUTS // ADDS + 1) == 0 and len(fetched[k]) < ADDS:
                    t, slot = device.post(add_code, other, _offset(counter, "add"), 1)
                    fetched[k].append(device.answer(t, slot))
            while len(fetched[k]) < ADDS:
                t, slot = device.post(add_code, other, _offset(counter, "add"), 1)
                fetched[k].append(device.answer(t, slot))
            t, slot = device.post(_ring.code(_ring.GET), other, _offset(known, "get"), 256)
            got[k] = device.answer(t, slot, 256).view(np.int32)
            device.post(_ring.code(_ring.SIGNAL, 0, 1), other, _offset(signal, "signal"), 1)
        except BaseException as exc:  # noqa: BLE001
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures
    proxy.quiet("ring_protocol")  # every ticket complete at the other PE
    complete = int(device.words[_ring.COMPLETE // 8])  # (the GPU's quiet waits for it)
    assert complete == device.posted() > _ring.SLOTS, (complete, device.posted())
    shmem.barrier_all()

    # what the other PE's threads did to this PE's heap, against the model
    theirs = np.random.default_rng(seed + other)
    their_payloads = theirs.integers(0, 256, (THREADS, PUTS, 16), dtype=np.uint8)
    their_lengths = theirs.integers(1, 17, (THREADS, PUTS))
    model = np.zeros((THREADS, PUTS, 16), np.uint8)
    for k in range(THREADS):
        for i in range(PUTS):
            model[k, i, :their_lengths[k, i]] = their_payloads[k, i, :their_lengths[k, i]]
    assert (host_array(regions) == model).all(), "a put was lost, misplaced or torn"
    assert host_array(counter)[0] == THREADS * ADDS, host_array(counter)[0]
    assert host_array(signal)[0] == THREADS
    # this PE's fetching adds on the other's counter: every old value once
    olds = sorted(v for values in fetched for v in values)
    assert len(olds) == THREADS * ADDS and len(set(olds)) == len(olds), olds[:10]
    expected = np.arange(64, dtype=np.int32) * (other + 1)
    assert all((g == expected).all() for g in got)
    print(f"PE {me}: {device.posted()} requests through the ring ok", flush=True)

    cells = shmem.zeros((2, ORDER_ROUNDS), np.int64)
    burst = shmem.zeros(BURST, np.int64)
    shmem.barrier_all()

    def ring_put(index, value):
        device.post(put_code, other, _offset(cells, "put", index), 8,
                    data=np.array([value], np.int64).view(np.uint8))

    for r in range(ORDER_ROUNDS):
        ring_put(r, 1)  # the GPU's first, then the host's: 2
        proxy.put(other, _offset(cells, "put", r), np.array([2], np.int64), "shmem.put")
        proxy.put(other, _offset(cells, "put", ORDER_ROUNDS + r), np.array([3], np.int64),
                  "shmem.put")
        ring_put(ORDER_ROUNDS + r, 4)  # the host's first, then the GPU's: 4
    # a burst the GPU published at once, then the host's put to the burst's last cell
    device.post_all([(put_code, other, _offset(burst, "put", i), 8,
                      np.array([5], np.int64).view(np.uint8)) for i in range(BURST)])
    proxy.put(other, _offset(burst, "put", BURST - 1), np.array([6], np.int64), "shmem.put")
    proxy.quiet("ring_protocol")
    shmem.barrier_all()
    wrong = [int((host_array(cells)[k] != value).sum()) for k, value in ((0, 2), (1, 4))]
    wrong.append(int(host_array(burst)[-1] != 6))
    print(f"PE {me}: order across the ring and the host " + (
        "ok" if not any(wrong) else f"wrong in {wrong} of {ORDER_ROUNDS} rounds"), flush=True)
    shmem.barrier_all()
    proxy.close()
    shmem.finalize()


if __name__ == "__main__":
    main()
