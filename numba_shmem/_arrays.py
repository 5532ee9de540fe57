"""Arrays on the symmetric heap: numba device arrays, and PyTorch tensors and
CuPy arrays whose memory is a symmetric allocation."""

import math
import sys
import weakref

import numpy as np

from ._current import require
from ._errors import ShmemUsageError
from ._heap._allocator import DEFAULT_ALIGN
from ._heap._symmetric import normalize_dtype, normalize_shape
from ._teams import checked_pe


def array(shape, dtype=np.float64, *, align=DEFAULT_ALIGN):
    """Collective. A new uninitialized symmetric array.

    Every PE must make the same allocations in the same order; a mismatch is an
    error on every PE. The result is a numba device array (zero-copy into CuPy
    and PyTorch through ``__cuda_array_interface__``).
    """
    return require("array").heap.allocate(shape, dtype, align)


def zeros(shape, dtype=np.float64, *, align=DEFAULT_ALIGN):
    """Collective. A new symmetric array of zeros, zeroed on every PE before any
    PE returns."""
    return require("zeros").heap.allocate(shape, dtype, align, zero=True)


def free(arr):
    """Collective. Release a symmetric array on every PE (same order everywhere):
    one that ``array``/``zeros`` returned, or a tensor from ``tensor`` or an
    array from ``cupy_array``."""
    runtime = require("free")
    runtime.heap.free(_heap_array_under(arr))


def peer_array(arr, pe):
    """Host and device. A view of PE ``pe``'s copy of the symmetric ``arr``, for
    direct loads and stores (PEs on the same node only)."""
    require("peer_array")  # before init(), the runtime error comes first
    return peer_view(arr, pe, "shmem.peer_array")


def peer_view(arr, pe, what):
    """``peer_array`` for the library's own callers; errors name ``what``."""
    runtime = require(what)
    pe = checked_pe(runtime, pe, what)
    offset = runtime.heap.offset_of(arr, what)
    return runtime.heap.backend.view(pe, offset, arr.shape, np.dtype(arr.dtype), arr.strides)


# -- other libraries' arrays -----------------------------------------------------

#: id(tensor or CuPy array) -> (weak reference to it, the heap array under it)
_UNDER = {}


def _heap_array_under(arr):
    """The heap array that ``tensor``/``cupy_array`` put under ``arr``, else ``arr``."""
    ref, raw = _UNDER.get(id(arr), (None, None))
    return raw if ref is not None and ref() is arr else arr


def _imported(module, what):
    try:
        return __import__(module)
    except ImportError:
        raise ShmemUsageError(f"{what} needs {module}, which is not installed") from None


def _under(runtime, nbytes, align):
    """Collective. A new uint8 heap array of ``nbytes`` bytes."""
    return runtime.heap.allocate((nbytes,), np.uint8, align)


def _remember(obj, raw):
    key = id(obj)

    def forget(ref):
        if _UNDER.get(key, (None,))[0] is ref:
            del _UNDER[key]

    _UNDER[key] = (weakref.ref(obj, forget), raw)
    return obj


def _torch_bytes(torch, runtime, raw):
    """A torch uint8 tensor over the bytes of the heap array ``raw`` (a CUDA
    tensor on the GPU, a CPU tensor over the shared memory on the simulator)."""
    if runtime.backend == "sim":
        return torch.from_numpy(runtime.heap.backend.host(raw))
    from numba import cuda

    return torch.as_tensor(raw, device=f"cuda:{cuda.get_current_device().id}")


def tensor(shape, dtype=None, *, align=DEFAULT_ALIGN):
    """Collective. A new uninitialized PyTorch tensor on the symmetric heap
    (``torch.float32`` unless ``dtype`` says: any torch dtype, ``bfloat16`` and
    the ``float8`` types included), on this PE's GPU (a CPU tensor over the
    heap's shared memory on the simulator). Same sizes in the same order on
    every PE, as ``array``; released by ``free``. Kernels and host calls see
    its bytes as a symmetric array: ``numba.cuda.as_cuda_array(t)``, or of a
    view with a numba type for dtypes numba has not
    (``t.view(torch.int16)`` for bfloat16)."""
    runtime = require("tensor")
    torch = _imported("torch", "shmem.tensor")
    dtype = torch.float32 if dtype is None else dtype
    if not isinstance(dtype, torch.dtype):
        raise ShmemUsageError(f"shmem.tensor: dtype must be a torch.dtype (torch.bfloat16, ...), "
                              f"got {dtype!r}")
    shape = normalize_shape(shape, "shmem.tensor")
    itemsize = torch.empty((), dtype=dtype).element_size()
    raw = _under(runtime, math.prod(shape) * itemsize, align)
    return _remember(_torch_bytes(torch, runtime, raw).view(dtype).view(shape), raw)


def cupy_array(shape, dtype=np.float64, *, align=DEFAULT_ALIGN):
    """Collective. A new uninitialized CuPy array on the symmetric heap, as
    ``array`` (the same dtypes); released by ``free``. GPU only."""
    runtime = require("cupy_array")
    if runtime.backend == "sim":
        raise ShmemUsageError("shmem.cupy_array needs a GPU (CuPy has no simulator); on the "
                              "simulator use shmem.array")
    cupy = _imported("cupy", "shmem.cupy_array")
    shape = normalize_shape(shape, "shmem.cupy_array")
    dtype = normalize_dtype(dtype, "shmem.cupy_array")
    raw = _under(runtime, math.prod(shape) * dtype.itemsize, align)
    return _remember(cupy.asarray(raw).view(dtype).reshape(shape), raw)


def _span(shape, strides, itemsize):
    """Bytes from a strided array's first element to the end of its last
    (``strides`` in bytes)."""
    if math.prod(shape) == 0:
        return 0
    return sum((n - 1) * stride for n, stride in zip(shape, strides)) + itemsize


def _peer_bytes(runtime, address, nbytes, pe, what):
    """A uint8 heap array over PE ``pe``'s copy of the ``nbytes`` bytes that
    start at this process's ``address`` on the heap."""
    pe = checked_pe(runtime, pe, what)
    offset = runtime.heap.offset_at(address, what)
    if offset + nbytes > runtime.heap.backend.capacity:
        raise ShmemUsageError(f"{what}: the array runs past the end of the symmetric heap")
    return runtime.heap.backend.view(pe, offset, (nbytes,), np.dtype(np.uint8), (1,))


def peer_tensor(t, pe):
    """Host. A view of PE ``pe``'s copy of the symmetric tensor ``t`` (from
    ``tensor``, or a view of one): same dtype, shape and strides, for direct
    reads and writes by PyTorch (PEs on the same node only)."""
    runtime = require("peer_tensor")
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(t, torch.Tensor):
        raise ShmemUsageError(f"shmem.peer_tensor: t must be a torch.Tensor from shmem.tensor(), "
                              f"got {type(t).__name__}; for other arrays use shmem.peer_array")
    size = t.element_size()
    raw = _peer_bytes(runtime, t.data_ptr(),
                      _span(t.shape, [stride * size for stride in t.stride()], size), pe,
                      "shmem.peer_tensor")
    return _torch_bytes(torch, runtime, raw).view(t.dtype).as_strided(t.shape, t.stride())


def peer_cupy_array(a, pe):
    """Host. A view of PE ``pe``'s copy of the symmetric CuPy array ``a`` (from
    ``cupy_array``, or a view of one): same dtype, shape and strides (PEs on the
    same node only). GPU only."""
    runtime = require("peer_cupy_array")
    cupy = sys.modules.get("cupy")
    if cupy is None or not isinstance(a, cupy.ndarray):
        raise ShmemUsageError(f"shmem.peer_cupy_array: a must be a cupy.ndarray from "
                              f"shmem.cupy_array(), got {type(a).__name__}")
    if any(stride < 0 for stride in a.strides):
        raise ShmemUsageError("shmem.peer_cupy_array: a has a negative stride; pass the array "
                              "it is a reversed view of")
    raw = _peer_bytes(runtime, a.data.ptr, _span(a.shape, a.strides, a.itemsize), pe,
                      "shmem.peer_cupy_array")
    return cupy.lib.stride_tricks.as_strided(cupy.asarray(raw).view(a.dtype), a.shape,
                                             a.strides)
