"""The arrays of a stream-tier call, checked once and remembered.

A call names symmetric arrays (the remote side) and local arrays (numpy or
device arrays of any library). Checking them (on the heap, in a live
allocation, contiguous, the dtype) and finding their addresses costs more than
enqueueing the work, so the result is kept per array object until an array is
freed. A ``Target`` is what a call needs: the heap offset (for
a symmetric array) or the address (for a local one), the element count, the
dtype, and whether the memory is on the host.
"""

import weakref

import numpy as np

from .._errors import ShmemUsageError


class Target:
    __slots__ = ("offset", "address", "size", "dtype", "nbytes", "host")

    def __init__(self, offset, address, size, dtype, host=False):
        self.offset = offset
        self.address = address
        self.size = size
        self.dtype = dtype
        self.nbytes = size * dtype.itemsize
        self.host = host


def _device_contiguous(interface, itemsize):
    strides = interface.get("strides")
    if strides is None:
        return True
    expected = itemsize
    for extent, stride in zip(reversed(interface["shape"]), reversed(strides)):
        if extent > 1 and stride != expected:
            return False
        expected *= extent
    return True


def _simulated_interface(arr):
    """What ``__cuda_array_interface__`` would say of a simulator device array
    (None for anything else)."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    from .._sim._heap import host_array

    if not isinstance(arr, FakeCUDAArray):
        return None
    data = host_array(arr)
    return {"shape": data.shape, "typestr": data.dtype.str, "data": (int(data.ctypes.data), False),
            "strides": None if data.flags.c_contiguous else data.strides}


class Targets:
    """This PE's remembered arrays (one per runtime)."""

    def __init__(self, runtime):
        self._runtime = runtime
        self._known = {}  # id(array) -> (weak reference, kind, Target)
        self._version = None

    def _remembered(self, arr, kind):
        version = self._runtime.heap.version
        if version != self._version:  # an array was freed: check again
            self._known.clear()
            self._version = version
            return None
        entry = self._known.get(id(arr))
        if entry is not None and entry[1] == kind and entry[0]() is arr:
            return entry[2]
        return None

    def _remember(self, arr, kind, target):
        key = id(arr)
        known = self._known

        def forget(ref):
            if known.get(key, (None,))[0] is ref:
                del known[key]

        try:
            known[key] = (weakref.ref(arr, forget), kind, target)
        except TypeError:  # an object that takes no weak reference: not remembered
            pass
        return target

    def symmetric(self, name, arg, arr):
        """The Target of a contiguous symmetric array, or a usage error naming
        ``arg`` and the fix."""
        found = self._remembered(arr, "symmetric")
        if found is not None:
            return found
        heap = self._runtime.heap
        if not hasattr(arr, "dtype") or not hasattr(arr, "size"):
            raise ShmemUsageError(f"shmem.{name}: {arg} must be a symmetric array (from "
                                  f"shmem.array()), got {type(arr).__name__}")
        offset = heap.offset_of(arr, f"shmem.{name}")
        contiguous = arr.is_c_contiguous() if hasattr(arr, "is_c_contiguous") else \
            arr.flags.c_contiguous
        if not contiguous:
            raise ShmemUsageError(
                f"shmem.{name}: {arg} is a strided view (like x[::2]); pass a contiguous part "
                "of a symmetric array")
        target = Target(offset, heap.backend.base + offset, int(arr.size), np.dtype(arr.dtype))
        return self._remember(arr, "symmetric", target)

    def local(self, name, arg, arr, like=None):
        """The Target of the local side of a transfer: a numpy array (host) or a
        device array of any library, of ``like``'s dtype if given; a usage
        error names ``arg`` and the fix. A strided numpy array is not accepted
        here (the caller copies it)."""
        found = self._remembered(arr, "local")
        if found is None:
            found = self._local(name, arg, arr, like)
        if like is not None and found.dtype != like.dtype:
            other = "dest" if arg == "source" else "source"
            raise ShmemUsageError(
                f"shmem.{name}: {arg} has dtype {found.dtype} but {other} has "
                f"{like.dtype}; pass {arg} as {like.dtype} (.astype(numpy.{like.dtype}))")
        return found

    def _local(self, name, arg, arr, like):
        if isinstance(arr, np.ndarray):
            # not remembered: numpy arrays are cheap to read, and often temporary
            return Target(None, int(arr.ctypes.data), int(arr.size), arr.dtype, host=True)
        interface = getattr(arr, "__cuda_array_interface__", None)
        if interface is None and self._runtime.backend == "sim":
            interface = _simulated_interface(arr)
        if interface is None:
            raise ShmemUsageError(
                f"shmem.{name}: {arg} must be a numpy array or a device array, got "
                f"{type(arr).__name__}; pass numpy.asarray(...)"
                + (f" with dtype {like.dtype}" if like is not None else ""))
        dtype = np.dtype(interface["typestr"])
        if not _device_contiguous(interface, dtype.itemsize):
            raise ShmemUsageError(
                f"shmem.{name}: {arg} is a strided view of a device array; pass a contiguous "
                "one (.copy()), or a numpy array")
        size = int(np.prod(interface["shape"], dtype=np.int64))
        target = Target(None, int(interface["data"][0]), size, dtype)
        return self._remember(arr, "local", target)
