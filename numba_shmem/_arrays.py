"""Arrays on the symmetric heap."""

import operator

import numpy as np

from ._errors import ShmemUsageError
from ._heap._allocator import DEFAULT_ALIGN
from ._runtime import require


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
    """Collective. Release a symmetric array on every PE (same order everywhere)."""
    require("free").heap.free(arr)


def peer_array(arr, pe):
    """Host and device. A view of PE ``pe``'s copy of the symmetric ``arr``, for
    direct loads and stores (PEs on the same node only)."""
    require("peer_array")  # before init(), the runtime error comes first
    return peer_view(arr, pe, "shmem.peer_array")


def checked_pe(runtime, pe, what, direct=True):
    """``pe`` as an int, once it is a PE of the job (and, with ``direct``, one
    this PE can address directly); else a usage error that names ``what``."""
    try:
        pe = operator.index(pe)
    except TypeError:
        raise ShmemUsageError(f"{what}: pe must be an int, got {pe!r}") from None
    size = runtime.bootstrap.size
    if not 0 <= pe < size:
        raise ShmemUsageError(f"{what}: pe={pe} is out of range for {size} PEs (0..{size - 1})")
    bases = runtime.heap.backend.bases
    if direct and pe not in bases:
        raise ShmemUsageError(
            f"{what}: PE {pe} is on another node; only PEs on this node "
            f"({list(bases)}) can be addressed directly")
    return pe


def peer_view(arr, pe, what):
    """``peer_array`` for the library's own callers; errors name ``what``."""
    runtime = require(what)
    pe = checked_pe(runtime, pe, what)
    offset = runtime.heap.offset_of(arr, what)
    return runtime.heap.backend.view(pe, offset, arr.shape, np.dtype(arr.dtype), arr.strides)
