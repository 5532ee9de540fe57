"""Host collectives on streams: calls that do not match, barriers on one team
from two streams at once, and world reductions queued back to back.

    stream_collectives.py mismatch | concurrent | back_to_back
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


@cuda.jit
def bump(source, by):
    i = cuda.grid(1)
    if i < source.size:
        source[i] += by


#: small parts, and a larger one (in place, the scratch grows while earlier calls are queued)
SIZES = (5, 40, 5, 1, 40, 24, 600)


def back_to_back():
    """World reductions queued on one stream without a wait between them, a
    kernel changing every source after each, sizes and forms changing from call
    to call (one in place): each result must be its own call's, whichever PE
    runs ahead (a PE's parts must not land where another still reads)."""
    me, n = shmem.my_pe(), shmem.n_pes()
    width = n * max(SIZES)
    everyone = [(p + 1) * (np.arange(width, dtype=np.int64) + 1) for p in range(n)]
    source = shmem.array(width, np.int64)
    source.copy_to_device(everyone[me])
    # (on the simulator every thread is a Python thread: fewer calls)
    calls = 4 * len(SIZES) * (10 if shmem._runtime.current().backend == "cuda" else 1)
    dests = [shmem.zeros(width, np.int64) for _ in range(calls)]
    stream = cuda.stream()
    expected, added = [], 0
    for r, dest in enumerate(dests):
        nelems = SIZES[r % len(SIZES)]
        kind = ("sum_reduce", "max_reduce", "sum_reducescatter", "in place")[r % 4]
        if kind == "in place":
            dest.copy_to_device(source, stream=stream)
            shmem.sum_reduce(shmem.TEAM_WORLD, dest, dest, nelems, stream=stream)
        else:
            getattr(shmem, kind)(shmem.TEAM_WORLD, dest, source, nelems, stream=stream)
        skip = me * nelems if kind == "sum_reducescatter" else 0
        parts = np.array([part[skip:skip + nelems] + added for part in everyone])
        expected.append(parts.max(axis=0) if kind == "max_reduce" else parts.sum(axis=0))
        bump[-(-width // 256), 256, stream](source, r + 1)
        added += r + 1
    stream.synchronize()
    wrong = [r for r, dest in enumerate(dests)
             if not np.array_equal(dest.copy_to_host()[:len(expected[r])], expected[r])]
    say(f"PE {me}: back to back " + (f"wrong in calls {wrong}" if wrong else "ok"))
    shmem.barrier_all()


if __name__ == "__main__":
    shmem.init()
    globals()[sys.argv[1]]()
    shmem.finalize()
