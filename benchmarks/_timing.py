"""Event timing shared by the benchmarks' PE programs."""

from numba import cuda


def _between_events(run):
    start, stop = cuda.event(), cuda.event()
    start.record()
    run()
    stop.record()
    stop.synchronize()
    return cuda.event_elapsed_time(start, stop) / 1e3


def timed(launch, reps):
    """Seconds per repetition of a kernel that repeats its work ``reps`` times
    in one launch (after a warm-up launch that also compiles it)."""
    launch(1)
    cuda.synchronize()
    return _between_events(lambda: launch(reps)) / reps


def timed_calls(call, reps):
    """Seconds per call of a host-side operation, between two events (after a
    warm-up call)."""
    call()
    cuda.synchronize()

    def run():
        for _ in range(reps):
            call()
    return _between_events(run) / reps
