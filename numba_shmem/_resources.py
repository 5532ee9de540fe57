"""An undo stack: resources are transactions (create, then register the undo)."""

import sys


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
