"""Host collectives on streams: calls that do not match, barriers on one team
from two streams at once, and world collectives queued back to back (also across
the end of a cycle of the marks of reductions in lines).

    stream_collectives.py mismatch | concurrent | back_to_back | wrap
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
    for i in range(cuda.grid(1), source.size, cuda.gridsize(1)):
        source[i] += by


#: parts that go in lines, and a larger one (in place through scratch, which grows while
#: earlier calls are queued)
SIZES = (5, 40, 5, 1, 40, 24, 600)
KINDS = ("sum_reduce", "max_reduce", "sum_reducescatter", "in place", "fcollect after")


def back_to_back():
    """World collectives queued on one stream without a wait between them, a
    kernel changing every source after each, sizes and forms changing from call
    to call (one in place): each result must be its own call's, whichever PE
    runs ahead (a PE's parts must not land where another still reads). One form
    is a reduction followed by an fcollect into the same dest: a member still
    writing its reduction's result there must not land over the others' parts."""
    me, n = shmem.my_pe(), shmem.n_pes()
    world = shmem.TEAM_WORLD
    width = n * max(SIZES)
    everyone = [(p + 1) * (np.arange(width, dtype=np.int64) + 1) for p in range(n)]
    source = shmem.array(width, np.int64)
    source.copy_to_device(everyone[me])
    # (on the simulator every thread is a Python thread: fewer calls, and a
    # kernel of fewer threads changes the sources)
    on_gpu = shmem._runtime.current().backend == "cuda"
    calls = len(KINDS) * len(SIZES) * (10 if on_gpu else 1)
    bump_grid = (-(-width // 256), 256) if on_gpu else (1, 32)
    dests = [shmem.zeros(width, np.int64) for _ in range(calls)]
    stream = cuda.stream()
    expected, added = [], 0
    for r, dest in enumerate(dests):
        nelems = SIZES[r % len(SIZES)]
        kind = KINDS[r % len(KINDS)]
        if kind == "in place":
            dest.copy_to_device(source, stream=stream)
            shmem.sum_reduce(world, dest, dest, nelems, stream=stream)
        elif kind == "fcollect after":
            shmem.sum_reduce(world, dest, source, nelems, stream=stream)
            shmem.fcollect(world, dest, source, nelems, stream=stream)
        else:
            getattr(shmem, kind)(world, dest, source, nelems, stream=stream)
        skip = me * nelems if kind == "sum_reducescatter" else 0
        parts = np.array([part[skip:skip + nelems] + added for part in everyone])
        expected.append(parts.reshape(-1) if kind == "fcollect after" else
                        parts.max(axis=0) if kind == "max_reduce" else parts.sum(axis=0))
        bump[bump_grid[0], bump_grid[1], stream](source, r + 1)
        added += r + 1
    stream.synchronize()
    wrong = [r for r, dest in enumerate(dests)
             if not np.array_equal(dest.copy_to_host()[:len(expected[r])], expected[r])]
    say(f"PE {me}: back to back " + (f"wrong in calls {wrong}" if wrong else "ok"))
    shmem.barrier_all()


def wrap():
    """back_to_back with the world's count of reductions in lines set just
    before the end of a cycle of marks: the sets' words of the cycle's last
    calls (of other sizes and values) must not pass for the next cycle's."""
    from numba_shmem._heap._symmetric import team_state
    from numba_shmem._stream._kernels import _CYCLE

    runtime = shmem._runtime.current()
    state = runtime.heap.backend.view(runtime.bootstrap.rank, team_state(shmem.n_pes())[0],
                                      (2,), np.dtype(np.uint64))
    # the next calls' marks: _CYCLE - 1 (one in each set), _CYCLE, _CYCLE, then 1, 1, 2, ...
    state.copy_to_device(np.array([2 * (int(_CYCLE) - 2), 0], np.uint64))
    shmem.barrier_all()
    back_to_back()


if __name__ == "__main__":
    shmem.init()
    globals()[sys.argv[1]]()
    shmem.finalize()
