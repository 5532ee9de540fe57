"""Barriers and syncs: one Python function each, called on the host or in a
kernel (the device side is registered in ``_cuda/_syncs.py``).

On the host they wait for the other PEs through the bootstrap; ``barrier(team,
stream=s)`` instead enqueues the barrier on a CUDA stream and returns at once.
"""

from ._current import require

#: the stream tier's ``barrier_on_stream(team, stream, name)``, which it gives
#: when imported (``_stream._rma``): the stream tier's kernels call the barriers
#: below, so this module does not import it
_on_stream = []


def enqueue_with(barrier_on_stream):
    """Take the stream tier's function for ``barrier(team, stream=s)``."""
    _on_stream[:] = [barrier_on_stream]


def barrier_all():
    """Collective over all PEs, host and device (thread scope). On the host:
    complete this PE's GPU work, then wait for every PE. In a kernel: complete
    this PE's puts, atomics and signals, then wait for every PE; launch such a
    kernel with ``collective_launch``."""
    runtime = require("barrier_all")
    runtime.synchronize("shmem.barrier_all")
    runtime.bootstrap.barrier("shmem.barrier_all")


def sync_all():
    """Collective over all PEs, host and device (thread scope): wait until every
    PE has arrived. Orders memory; completes no outstanding operation."""
    require("sync_all").bootstrap.barrier("shmem.sync_all")


def barrier(team, *, stream=None):
    """Collective over ``team``, host and device (thread scope): ``barrier_all``
    for the members of ``team``. On the host with ``stream=s``: enqueue on
    ``s`` a barrier that completes the puts, signals and atomics issued before
    it (on ``s``, and by kernels that ran before it) and waits for every member;
    the call returns at once."""
    if stream is not None:
        return _on_stream[0](team, stream, "barrier")
    runtime = require("barrier")
    members = runtime.teams.get(team, "shmem.barrier")
    runtime.synchronize("shmem.barrier")
    runtime.bootstrap.barrier("shmem.barrier", list(members))


def sync(team):
    """Collective over ``team``, host and device (thread scope): ``sync_all``
    for the members of ``team``."""
    runtime = require("sync")
    runtime.bootstrap.barrier("shmem.sync", list(runtime.teams.get(team, "shmem.sync")))
