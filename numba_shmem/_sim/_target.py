"""Requests from PEs on other nodes, applied to this PE's simulator heap with
the operations the direct path uses (and the same lock for atomics), by the
Python proxy (``_proxy``): the simulator's own proxy is the compiled one
(``_compiled``); this target lets the tests run the GPU's proxy on the
simulator's heap (``tests/programs/ring_protocol.py``)."""

import numpy as np

from ._device import apply_atomic, apply_signal
from ._heap import host_array


class SimTarget:
    def __init__(self, backend, rank):
        self._backend = backend
        self._rank = rank

    def _view(self, offset, count, dtype=np.uint8):
        return host_array(self._backend.view(self._rank, offset, (count,), np.dtype(dtype)))

    def attach(self):
        pass

    def extent(self):
        """Bytes of this PE's heap, from its start, that requests may reach."""
        return self._backend.extent

    def close(self):
        pass

    def receive(self, offset, nbytes):
        return self._view(offset, nbytes)  # a put's data lands in the heap itself

    def received(self, offset, buffer):
        pass

    def flush(self):
        pass  # (received into the heap itself)

    def read(self, offset, nbytes):
        return self._view(offset, nbytes)

    def atomic(self, offset, dtype, op, value, cond):
        with self._backend.locked(self._rank):
            return apply_atomic(self._view(offset, 1, dtype), op, value, cond)

    def signal(self, offset, op, value):
        with self._backend.locked(self._rank):
            apply_signal(self._view(offset, 1, np.uint64), op, value)

