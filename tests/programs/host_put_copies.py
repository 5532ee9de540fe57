"""A host put toward another node returns once its data is copied: up to
_compiled.COPY_MAX bytes go from a copy the proxy keeps until MPI has sent it
(at most KEPT_MAX bytes of copies at once: here 3 MiB, so that the puts wait
for room), a larger put from the caller's memory. PE 0 puts into PE 1 and
writes each source again as soon as the put returns (sent copies are let go
only where a put needs their room, as where MPI sends slower than the puts
come); after quiet and a barrier PE 1 holds what each put was given, the
later of two puts into the same bytes last. Copies never let go, a put waits for room until its timeout,
an error that names PE 1.

    NUMBA_SHMEM_NODE_SIZE=1 mpiexec -n 2 python host_put_copies.py

Prints ``PE 1: host put copies ok``.
"""

import numba_shmem as shmem  # first: on a machine without a GPU it picks the simulator
import numpy as np
from numba_shmem import _runtime
from numba_shmem._transport import _compiled, _engine

_compiled.KEPT_MAX = KEPT_MAX = 3 << 20
COPY_MAX, PIECE = _compiled.COPY_MAX, _engine.PIECE
#: (offset, bytes) of each put: a slot's, copies, many more than KEPT_MAX of
#: copies in all (into the same bytes again), and ones from the caller's memory
PUTS = ([(0, 9000), (4096, COPY_MAX), (1 << 20, 70_000), (3, PIECE + 5)]
        + [((k % 4) * COPY_MAX, COPY_MAX - k) for k in range(40)]
        + [(COPY_MAX, COPY_MAX + 8)])


def main():
    shmem.init()
    me = shmem.my_pe()
    heap = shmem.zeros(6 * COPY_MAX, np.uint8)
    proxy = _runtime.current().proxy
    expected = np.zeros(heap.size, np.uint8)
    rng = np.random.default_rng(5)
    data = [rng.integers(1, 256, nbytes, dtype=np.uint8) for _offset, nbytes in PUTS]
    source = np.empty(heap.size, np.uint8)
    most = 0
    let_go = proxy._let_go
    # as if MPI sent slower than the puts come (on a fast host it keeps up):
    # sent copies are let go only where a put needs their room

    def when_needed():
        if proxy._kept_bytes + COPY_MAX > KEPT_MAX:
            let_go()
    proxy._let_go = when_needed
    for (offset, nbytes), given in zip(PUTS, data):
        expected[offset:offset + nbytes] = given
        if me == 0:
            source[:nbytes] = given
            shmem.put(heap[offset:offset + nbytes], source[:nbytes], 1)
            source[:nbytes] = 0  # (reused at once: the put took its data)
            most = max(most, proxy._kept_bytes)
    proxy._let_go = let_go
    if me == 0:  # (the puts waited for room)
        assert KEPT_MAX - COPY_MAX < most <= KEPT_MAX, most
        shmem.quiet()
        # copies never let go: a put waits for room until the timeout, which
        # names the PE the kept copies go to
        timeout = proxy._wait_timeout
        proxy._let_go, proxy._wait_timeout = (lambda: None), 1.0
        try:
            for _ in range(KEPT_MAX // COPY_MAX + 1):
                shmem.put(heap[:COPY_MAX], source[:COPY_MAX], 1)
            raise AssertionError("a put went past the copies' room")
        except shmem.ShmemTimeoutError as exc:
            assert "room for its copy" in str(exc) and "from PE 1 " in str(exc), exc
        finally:
            proxy._let_go, proxy._wait_timeout = let_go, timeout
        shmem.quiet()
    expected[:COPY_MAX] = 0  # (what PE 0's source held then)
    shmem.barrier_all()
    if me == 1:
        wrong = int((heap.copy_to_host() != expected).sum())
        assert wrong == 0, f"{wrong} bytes differ from what the puts were given"
        print("PE 1: host put copies ok", flush=True)
    shmem.finalize()


if __name__ == "__main__":
    main()
