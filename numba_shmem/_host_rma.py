"""Host-initiated put, get and barrier, ordered on a CUDA stream.

For users who stay on the host: ``shmem.put(dest, source, pe, stream=s)``
copies into PE ``pe``'s copy of ``dest`` through the peer mapping, in the
order of stream ``s``; it is complete when the stream is.
"""

import numpy as np

from ._arrays import peer_view
from ._errors import ShmemUsageError
from ._runtime import require
from ._select import numba_is_simulator
from ._stream._handles import as_stream


def _flat(arr):
    return arr.reshape(arr.size) if arr.ndim != 1 else arr


def _is_device_array(arr):
    if hasattr(arr, "__cuda_array_interface__"):
        return True
    if not numba_is_simulator():
        return False
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    return isinstance(arr, FakeCUDAArray)


def _contiguous(arr):
    if isinstance(arr, np.ndarray):
        return arr.flags.c_contiguous
    return arr.is_c_contiguous()


def local_array(name, arg, arr, like=None):
    """``arr`` as the local side of a host transfer: a numpy array or a device
    array (of ``like``'s dtype, if given), else a usage error naming ``arg`` and
    the fix."""
    if not (isinstance(arr, np.ndarray) or _is_device_array(arr)):
        raise ShmemUsageError(
            f"shmem.{name}: {arg} must be a numpy array or a device array, got "
            f"{type(arr).__name__}; pass numpy.asarray(...)"
            + (f" with dtype {np.dtype(like.dtype)}" if like is not None else ""))
    if like is not None and np.dtype(arr.dtype) != np.dtype(like.dtype):
        other = "dest" if arg == "source" else "source"
        raise ShmemUsageError(
            f"shmem.{name}: {arg} has dtype {np.dtype(arr.dtype)} but {other} has "
            f"{np.dtype(like.dtype)}; pass {arg} as {np.dtype(like.dtype)} "
            f"(.astype(numpy.{np.dtype(like.dtype)}))")
    if not isinstance(arr, np.ndarray) and not _contiguous(arr):
        raise ShmemUsageError(
            f"shmem.{name}: {arg} is a strided view of a device array; pass a contiguous one "
            "(.copy()), or a numpy array")
    return arr


def symmetric_array(name, arg, arr, pe):
    """PE ``pe``'s copy of the symmetric ``arr``, flat; a usage error unless it is a
    contiguous symmetric array."""
    remote = peer_view(arr, pe, f"shmem.{name}")
    if not _contiguous(remote):
        raise ShmemUsageError(
            f"shmem.{name}: {arg} is a strided view (like x[::2]); pass a contiguous part of "
            "a symmetric array")
    return _flat(remote)


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
    """Host. Copy ``source`` (a numpy or device array of dest's dtype) into
    ``dest`` (symmetric) on PE ``pe``, in the order of ``stream``; complete when
    the stream is."""
    runtime = require("put")
    stream = as_stream(stream, "put", runtime.backend)
    remote = symmetric_array("put", "dest", dest, pe)
    source = local_array("put", "source", source, remote)
    count = int(source.size)
    _check_sizes("put", count, remote.size)
    if isinstance(source, np.ndarray):
        source = np.ascontiguousarray(source).reshape(count)
    if runtime.backend == "sim":
        from ._sim._heap import host_array

        host_array(remote)[:count] = source if isinstance(source, np.ndarray) else \
            host_array(source).reshape(count)
        return
    remote[:count].copy_to_device(_flat(source), stream=stream)


def get(dest, source, pe, *, stream=0):
    """Host. Copy PE ``pe``'s copy of ``source`` (symmetric) into ``dest`` (a
    numpy or device array of source's dtype), in the order of ``stream``;
    complete when the stream is. A strided numpy ``dest`` is filled once the
    copy is complete (this call then waits for ``stream``)."""
    runtime = require("get")
    stream = as_stream(stream, "get", runtime.backend)
    remote = symmetric_array("get", "source", source, pe)
    dest = local_array("get", "dest", dest, remote)
    count = int(dest.size)
    _check_sizes("get", count, remote.size)
    strided = isinstance(dest, np.ndarray) and not dest.flags.c_contiguous
    target = np.empty(count, dest.dtype) if strided else dest
    if runtime.backend == "sim":
        from ._sim._heap import host_array

        into = target if isinstance(target, np.ndarray) else host_array(target)
        into.reshape(count)[:] = host_array(remote)[:count]
    elif isinstance(target, np.ndarray):
        remote[:count].copy_to_host(target.reshape(count), stream=stream)
        if strided and not isinstance(stream, int):
            stream.synchronize()  # (with stream 0 the copy was synchronous)
    else:
        _flat(target).copy_to_device(remote[:count], stream=stream)
    if strided:
        dest[...] = target.reshape(dest.shape)


def barrier_all_on_stream(stream=0):
    """Collective over all PEs. Host. Enqueue on ``stream`` a barrier that
    completes the puts issued before it and waits for every PE."""
    from . import _host_kernels as kernels
    from ._teams import TEAM_WORLD

    runtime = require("barrier_all_on_stream")
    stream = as_stream(stream, "barrier_all_on_stream", runtime.backend)
    # one block is always resident: no need to agree on a grid (as_stream gave
    # the simulator stream 0, which it runs at once)
    kernels.team_barrier[1, 1, stream](TEAM_WORLD)
