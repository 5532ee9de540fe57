"""A fix for numba's simulator: static shared arrays made by several threads.

numba-cuda's simulator finds a block's shared array by the source line that
asks for it, with a look-up and a store that are not atomic: two threads of a
block that reach a ``cuda.shared.array`` line first at the same moment each get
an array of their own, so they do not share it, and a kernel reads garbage
(seen in ``samples/allgather_gemm.py``, once in 30 runs under load). Here the
look-up and the store happen under a lock. Installed once numba runs its
simulator.
"""

import sys
import threading
import traceback

import numpy as np
from numba.cuda import types
from numba.cuda.np import numpy_support
from numba.cuda.simulator.kernelapi import FakeCUDAShared

_lock = threading.Lock()
_original = FakeCUDAShared.array


def _array(self, shape, dtype, alignment=None):
    if shape == 0 or alignment is not None:
        # dynamic shared memory is one buffer per block; alignment is refused
        return _original(self, shape, dtype, alignment)
    # keyed, as numba does, by the file and line of the kernel's call
    caller = tuple(traceback.extract_stack(sys._getframe(1), limit=1)[-1])[0:2]
    if isinstance(dtype, types.Type):
        dtype = numpy_support.as_dtype(dtype)
    with _lock:
        found = self._allocations.get(caller)
        if found is None:
            found = self._allocations[caller] = np.empty(shape, dtype)
    return found


def install():
    FakeCUDAShared.array = _array
