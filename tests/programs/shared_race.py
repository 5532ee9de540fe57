"""Many threads of one simulated block reach one ``cuda.shared.array`` line at
once; they must all get the same array. Prints how many distinct arrays the
patched and numba's own look-up handed out (100 rounds of 64 threads).

    NUMBA_ENABLE_CUDASIM=1 shared_race.py
"""

import sys
import threading

import numba_shmem  # noqa: F401  (installs the fix)
import numpy as np
from numba.cuda.simulator.kernelapi import FakeCUDAShared

from numba_shmem._sim import _shared_arrays


def distinct(array_fn, rounds=100, threads=64):
    worst = 1
    for _ in range(rounds):
        shared = FakeCUDAShared(0)
        start = threading.Barrier(threads)
        got = []

        def thread():
            start.wait()
            got.append(id(array_fn(shared, (16, 16), np.float32)))  # one source line

        workers = [threading.Thread(target=thread) for _ in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        worst = max(worst, len(set(got)))
    return worst


sys.setswitchinterval(1e-6)  # switch threads as often as possible
print(f"fixed: {distinct(_shared_arrays._array)}")
print(f"numba: {distinct(_shared_arrays._original)}")
