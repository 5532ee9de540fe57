"""Small puts toward a GPU's heap on another node go as writes of their words:
host puts from PE 0 into PE 1 of sizes and offsets on either side of the rule
(at most _engine.WORDS_MAX bytes, in whole words of 4 or 8 bytes at an
offset of their width), each followed by quiet; PE 1's proxy traces its calls
into its heap (``CompiledProxy.trace``): a put that qualifies is one batch of
word writes and no copy, the others one copy each; and every byte lands.

    NUMBA_SHMEM_NODE_SIZE=1 mpiexec -n 2 python small_puts.py

On the simulator, with NUMBA_SHMEM_TEST_FUNCTION_TARGET=1 (the GPU's path
on the simulator's heap), or on the GPU. Prints ``PE 1: small puts ok``.
"""

import numba_shmem as shmem  # first: on a machine without a GPU it picks the simulator
import numpy as np
from mpi4py import MPI
from numba_shmem import _runtime
from numba_shmem._transport import _engine

MAX = _engine.WORDS_MAX
#: (offset, bytes, as words) of each put
PUTS = [(4, 4, True), (0, 8, True), (4, 12, True), (0, MAX, True), (4, MAX, True),
        (8, 16, True), (0, MAX + 8, False), (0, 6, False), (2, 16, False), (4, MAX + 4, False)]


def main():
    shmem.init()
    me = shmem.my_pe()
    comm = MPI.COMM_WORLD
    heap = shmem.zeros(2 * MAX + 64, np.uint8)
    proxy = _runtime.current().proxy
    expected = np.zeros(heap.size, np.uint8)
    rng = np.random.default_rng(7)
    if me == 1:
        proxy.trace(True)
    comm.Barrier()  # (not shmem's: its signals would be traced too)
    for offset, nbytes, _words in PUTS:
        data = rng.integers(1, 256, nbytes, dtype=np.uint8)
        expected[offset:offset + nbytes] = data
        if me == 0:
            shmem.put(heap[offset:offset + nbytes], data, 1)
            shmem.quiet()
        comm.Barrier()
    if me == 1:
        calls = [int(b) for event, _ns, b, _at in proxy.trace(False)
                 if event == _engine.CALLED]
        copies, batches = calls.count(10), calls.count(12)
        want = sum(not words for *_, words in PUTS), sum(words for *_, words in PUTS)
        got = heap.copy_to_host() if hasattr(heap, "copy_to_host") else np.asarray(heap)
        wrong = int((got != expected).sum())
        if (copies, batches) == want and not wrong:
            print("PE 1: small puts ok", flush=True)
        else:
            print(f"PE 1: {copies} copies and {batches} batches (expected {want}), "
                  f"{wrong} bytes wrong", flush=True)
    shmem.barrier_all()
    shmem.finalize()


if __name__ == "__main__":
    main()
