"""numba.cuda imported before numba_shmem, on a machine without a CUDA driver."""

import sys

from numba import cuda  # noqa: F401  (first, as a user might)

import numba_shmem as shmem

try:
    shmem.init()
except shmem.ShmemUsageError as exc:
    sys.stdout.write(f"EXPECTED ShmemUsageError: {exc}\n")
else:
    sys.stdout.write("NO ERROR\n")
