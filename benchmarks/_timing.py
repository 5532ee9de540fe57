"""Event timing shared by the benchmarks' PE programs."""

import numpy as np
from numba import cuda

from numba_shmem._cuda._primitives import _addr, _load_acquire, _now


def _between_events(run):
    start, stop = cuda.event(), cuda.event()
    start.record()
    run()
    stop.record()
    stop.synchronize()
    return cuda.event_elapsed_time(start, stop) / 1e3


def timed(launch, reps):
    """Seconds per repetition of a kernel that repeats its work ``reps`` times
    in one launch (after a warm-up launch that also compiles it), as the GPU
    runs it: the launch is queued behind a kernel that holds the stream, so
    that the host's time to launch (tens of microseconds through numba, against
    a few for a C++ launch) does not count as the kernel's."""
    return gpu_time(lambda: launch(reps), 1, warm_up=lambda: launch(1)) / reps


def timed_calls(call, reps):
    """Seconds per call of a host-side operation, between two events (after a
    warm-up call)."""
    call()
    cuda.synchronize()

    def run():
        for _ in range(reps):
            call()
    return _between_events(run) / reps


@cuda.jit
def _hold(flag, limit_ns, timed_out):
    # keeps the stream busy until the host sets flag[0] (or limit_ns pass)
    start = _now()
    while _load_acquire(flag, _addr(flag)) == 0:
        if _now() - start > limit_ns:
            timed_out[0] = 1
            return


def gpu_time(call, reps, release_together=None, limit_s=20.0, warm_up=None):
    """Seconds per call of a host-side operation as the GPU executes it: the
    ``reps`` calls are queued behind a kernel that holds the stream until all of
    them are queued, so that the host's time between calls does not count (a
    call must not wait for the GPU: if one does, the hold gives up after
    ``limit_s`` and this raises). ``release_together`` (e.g. ``shmem.sync_all``)
    runs between queueing and release, so that the PEs of a collective start
    together. A warm-up call (``warm_up``, else ``call``) comes first."""
    (warm_up or call)()
    cuda.synchronize()
    flag = cuda.mapped_array(1, np.int32)
    timed_out = cuda.mapped_array(1, np.int32)
    flag[0] = timed_out[0] = 0
    start, stop = cuda.event(), cuda.event()
    _hold[1, 1](flag, int(limit_s * 1e9), timed_out)
    start.record()
    for _ in range(reps):
        call()
    stop.record()
    if release_together is not None:
        release_together()
    flag[0] = 1
    stop.synchronize()
    if timed_out[0]:
        raise RuntimeError(f"gpu_time: queueing {reps} calls took more than {limit_s} s, or a "
                           "call waited for the GPU; time it with timed_calls instead")
    return cuda.event_elapsed_time(start, stop) / 1e3 / reps
