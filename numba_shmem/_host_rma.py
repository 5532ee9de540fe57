"""Host-initiated put, get and barrier, ordered on a CUDA stream.

For users who stay on the host: ``shmem.put(dest, source, pe, stream=s)``
copies into PE ``pe``'s copy of ``dest`` through the peer mapping, in the
order of stream ``s``; it is complete when the stream is.
"""

import numpy as np

from ._arrays import peer_view
from ._errors import ShmemUsageError
from ._runtime import require


def _flat(arr):
    return arr.reshape(arr.size) if arr.ndim != 1 else arr


def _check_sizes(name, count, room):
    """``count`` elements of the local array against the ``room`` of the remote one."""
    if count <= room:
        return
    if name == "put":
        raise ShmemUsageError(f"shmem.put: the source's {count} elements do not fit in the "
                              f"{room} of dest; pass a smaller source or a larger dest")
    raise ShmemUsageError(f"shmem.get: dest asks for {count} elements but the source holds "
                          f"{room}; pass a smaller dest or a larger source")


def put(dest, source, pe, *, stream=0):
    """Host. Copy ``source`` (a host or device array) into ``dest`` (symmetric)
    on PE ``pe``, in the order of ``stream``; complete when the stream is."""
    remote = _flat(peer_view(dest, pe, "shmem.put"))
    count = int(np.prod(source.shape))
    _check_sizes("put", count, remote.size)
    if require("put").backend == "sim":
        from ._sim._heap import host_array

        host_array(remote)[:count] = np.asarray(
            source if isinstance(source, np.ndarray) else host_array(source)).reshape(count)
        return
    remote[:count].copy_to_device(_flat(source), stream=stream)


def get(dest, source, pe, *, stream=0):
    """Host. Copy PE ``pe``'s copy of ``source`` (symmetric) into ``dest`` (a host
    or device array), in the order of ``stream``; complete when the stream is."""
    remote = _flat(peer_view(source, pe, "shmem.get"))
    count = int(np.prod(dest.shape))
    _check_sizes("get", count, remote.size)
    if require("get").backend == "sim":
        from ._sim._heap import host_array

        target = dest if isinstance(dest, np.ndarray) else host_array(dest)
        target.reshape(count)[:] = host_array(remote)[:count]
        return
    if isinstance(dest, np.ndarray):
        remote[:count].copy_to_host(dest.reshape(count), stream=stream)
    else:
        _flat(dest).copy_to_device(remote[:count], stream=stream)


def barrier_all_on_stream(stream=0):
    """Collective over all PEs. Host. Enqueue on ``stream`` a barrier that
    completes the puts issued before it and waits for every PE."""
    from . import _host_kernels as kernels
    from ._teams import TEAM_WORLD

    runtime = require("barrier_all_on_stream")
    # one block is always resident: no need to agree on a grid
    if runtime.backend == "sim":
        kernels.team_barrier[1, 1](TEAM_WORLD)
    else:
        kernels.team_barrier[1, 1, stream](TEAM_WORLD)
