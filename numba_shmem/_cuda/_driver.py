"""CUDA driver calls through numba's driver layer, with numba-shmem's errors."""

import time

from numba.cuda.cudadrv.driver import CudaAPIError, binding, driver

from .._errors import ShmemDriverError

cu = binding


def call(name, *args, hint=""):
    """Call ``cu<name>`` through numba's driver; a failure is a ShmemDriverError
    that carries the CUresult name."""
    try:
        return getattr(driver, name)(*args)
    except CudaAPIError as exc:
        result = getattr(exc.code, "name", str(exc.code))
        raise ShmemDriverError(name, result, hint) from None


def device_location(device_id):
    location = cu.CUmemLocation()
    location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    location.id = device_id
    return location


def wait_idle(timeout=None):
    """Wait until the GPU has finished this process's work, at most ``timeout``
    seconds (None: as long as it takes). Returns "idle", "busy" (still running
    at the time-out) or "failed" (the context has failed: a kernel trapped). An
    event on the legacy default stream completes after the work of every
    blocking stream."""
    from numba import cuda

    try:
        if timeout is None:
            cuda.synchronize()
            return "idle"
        event = cuda.event(timing=False)
        event.record(stream=cuda.legacy_default_stream())
        deadline = time.monotonic() + timeout
        while not event.query():
            if time.monotonic() > deadline:
                return "busy"
            time.sleep(0.005)
        return "idle"
    except CudaAPIError:
        return "failed"
