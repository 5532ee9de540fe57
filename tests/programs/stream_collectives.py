"""Host collectives on streams: calls that do not match, and barriers on one
team from two streams at once.

    stream_collectives.py mismatch | concurrent
"""

import os
import sys

import numba_shmem as shmem  # first: on a machine without a GPU it picks the simulator
import numpy as np
from numba import cuda


def say(line):
    os.write(1, (line + "\n").encode())


def mismatch():
    me, n = shmem.my_pe(), shmem.n_pes()
    dest = shmem.zeros(4 * n, np.int64)
    source = shmem.zeros(4 * n, np.int64)
    try:
        if me == 0:
            shmem.fcollect(shmem.TEAM_WORLD, dest, source, 4)
        else:
            shmem.sum_reduce(shmem.TEAM_WORLD, dest, source, 4)
    except shmem.ShmemUsageError as exc:
        say(f"PE {me}: {exc}")
    shmem.barrier_all()


def concurrent():
    """Two streams enqueue barriers on TEAM_WORLD at once; then every PE's
    epochs must still agree (a lost increment makes later barriers hang)."""
    me = shmem.my_pe()
    streams = [cuda.stream(), cuda.stream()]
    for _ in range(200):
        for stream in streams:
            shmem.barrier_all_on_stream(stream)
    cuda.synchronize()
    shmem.barrier_all()
    for _ in range(20):  # one stream, in order: each must see every PE
        shmem.barrier_all_on_stream(0)
    cuda.synchronize()
    shmem.barrier_all()
    say(f"PE {me}: concurrent barriers ok")


if __name__ == "__main__":
    shmem.init()
    globals()[sys.argv[1]]()
    shmem.finalize()
