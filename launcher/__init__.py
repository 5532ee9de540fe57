"""shmem-run: start the PEs of a numba-shmem job on this node."""

from ._cli import main

__all__ = ["main"]
