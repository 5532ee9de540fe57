"""Print the errors the stream tier's ctypes driver calls raise for a failing
CUresult (what they return is an int, not cuda.bindings' enum)."""

import sys

import numba_shmem as shmem
from numba_shmem._cuda._enqueue import _failed

for code, name in ((1, "cuLaunchKernel"), (400, "cuMemcpyDtoDAsync"),
                   (987654, "cuStreamWaitValue64")):
    try:
        _failed(code, name)
    except shmem.ShmemDriverError as error:
        sys.stdout.write(f"{error}\n")
if "gpu" in sys.argv[1:]:  # asking the driver needs one
    from numba_shmem._cuda._enqueue import _driver_function

    try:
        _driver_function("cuNoSuchCall")
    except shmem.ShmemDriverError as error:
        sys.stdout.write(f"{error}\n")
