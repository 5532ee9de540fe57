"""The GPU runtime's start with more PEs than constant memory holds the heap
addresses of: refused before any GPU work (no GPU needed to see it)."""

from types import SimpleNamespace

import numba_shmem as shmem
from numba_shmem._runtime import Runtime

try:
    Runtime._start_cuda(SimpleNamespace(bootstrap=SimpleNamespace(size=2049)))
except shmem.ShmemUsageError as error:
    print(f"EXPECTED ShmemUsageError: {error}")
