"""An undo stack: resources are transactions (create, then register the undo)."""

import sys

from ._errors import ShmemUsageError


class UndoStack:
    """Register the undo of each step as it succeeds; ``unwind()`` runs them in
    reverse. A failed ``init()`` unwinds what it did; ``finalize()`` unwinds all."""

    def __init__(self):
        self._steps = []

    def push(self, undo, *args):
        self._steps.append((undo, args))

    @property
    def depth(self):
        return len(self._steps)

    def unwind(self, to=0):
        """Run the undos registered after depth ``to``, newest first. Every step
        runs even if one fails; the first failure is raised at the end."""
        first = None
        while len(self._steps) > to:
            undo, args = self._steps.pop()
            try:
                undo(*args)
            except Exception as exc:  # keep unwinding: leave nothing behind
                if first is None:
                    first = exc
                else:
                    print(f"numba-shmem: also failed while cleaning up: {exc}", file=sys.stderr)
        if first is not None:
            raise first


class Lifetime:
    """Whether a symmetric heap is still there. Its arrays check it on every
    use, so an array used after ``finalize()`` is an error, not a fault."""

    def __init__(self):
        self.ended = False

    def check(self):
        if self.ended:
            raise ShmemUsageError(
                "a symmetric array was used after shmem.finalize(), which released the "
                "symmetric heap; use symmetric arrays between shmem.init() and "
                "shmem.finalize() (copy what you keep to the host before finalize)")
