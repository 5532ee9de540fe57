"""CUDA driver calls through numba's driver layer, with numba-shmem's errors."""

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
