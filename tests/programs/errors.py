"""Trigger one documented error and print it.

    errors.py SCENARIO

Prints ``EXPECTED <ErrorType>: <message>`` and exits 0 when the scenario raised
the error it is about; anything else fails. Scenarios that check the job stays
usable afterwards say so by printing ``STILL USABLE``.
"""

import os
import sys
import time

import numpy as np

import numba_shmem as shmem

SCENARIOS = {}


def scenario(expected):
    def register(fn):
        SCENARIOS[fn.__name__] = (fn, expected)
        return fn
    return register


def still_usable():
    arr = shmem.zeros(16, np.int32)
    shmem.barrier_all()
    shmem.free(arr)
    sys.stdout.write("STILL USABLE\n")


@scenario(shmem.ShmemUsageError)
def before_init():
    shmem.my_pe()


@scenario(shmem.ShmemUsageError)
def array_before_init():
    shmem.array(4, np.int32)


@scenario(shmem.ShmemUsageError)
def init_twice():
    shmem.init()
    shmem.init()


@scenario(shmem.ShmemUsageError)
def init_after_finalize():
    shmem.init()
    shmem.finalize()
    shmem.init()


@scenario(shmem.ShmemUsageError)
def after_finalize():
    shmem.init()
    shmem.finalize()
    shmem.n_pes()


@scenario(shmem.ShmemUsageError)
def put_after_finalize():
    shmem.init()
    arr = shmem.zeros(4, np.int32)
    shmem.finalize()
    shmem.put(arr, np.ones(4, np.int32), 0)


@scenario(shmem.ShmemUsageError)
def array_after_finalize():
    shmem.init()
    arr = shmem.zeros(4, np.int32)
    shmem.finalize()
    arr.copy_to_host()


@scenario(shmem.ShmemUsageError)
def slice_after_finalize():
    shmem.init()
    part = shmem.zeros(4, np.int32)[1:3]
    shmem.finalize()
    part.copy_to_host()


@scenario(shmem.ShmemUsageError)
def kernel_after_finalize():
    from numba import cuda

    @cuda.jit
    def kernel(out):
        out[0] = 1

    shmem.init()
    arr = shmem.zeros(4, np.int32)
    shmem.finalize()
    kernel[1, 1](arr)


@scenario(shmem.ShmemConfigError)
def heap_smaller_than_its_reserve():
    os.environ["NUMBA_SHMEM_HEAP_SIZE"] = "512"
    shmem.init()


@scenario(shmem.ShmemUsageError)
def shm_exhausted():
    # (sized from /dev/shm's whole size, the same for every PE: its free space
    # changes as other jobs come and go, and the heap's size must not differ)
    stats = os.statvfs("/dev/shm")
    size = stats.f_blocks * stats.f_frsize
    os.environ["NUMBA_SHMEM_HEAP_SIZE"] = str(4 * size)
    shmem.init()
    try:
        shmem.array(2 * size, np.uint8)
    finally:
        still_usable()


@scenario(shmem.ShmemUsageError)
def heap_size_mismatch():
    pe = int(os.environ["SHMEM_RUN_PE"])
    os.environ["NUMBA_SHMEM_HEAP_SIZE"] = str((64 + 16 * pe) << 20)
    shmem.init()


@scenario(shmem.ShmemConfigError)
def bad_config():
    os.environ["NUMBA_SHMEM_HEAP_SIZE"] = "lots"
    shmem.init()


@scenario(shmem.ShmemUsageError)
def kernel_before_init():
    from numba import cuda

    @cuda.jit
    def kernel(out):
        out[0] = shmem.my_pe()

    kernel[1, 1](np.zeros(1, np.int32))


@scenario(shmem.ShmemBootstrapError)
def alloc_mismatch():
    shmem.init()
    try:
        shmem.array(1024 * (shmem.my_pe() + 1), np.uint8)
    finally:
        still_usable()


@scenario(shmem.ShmemBootstrapError)
def free_mismatch():
    shmem.init()
    a, b = shmem.array(8, np.int64), shmem.array(16, np.int64)
    try:
        shmem.free(a if shmem.my_pe() == 0 else b)
    finally:
        still_usable()


@scenario(shmem.ShmemBootstrapError)
def collective_mismatch():
    shmem.init()
    if shmem.my_pe() == 0:
        shmem.barrier_all()
    else:
        shmem.array(4, np.int32)


@scenario(shmem.ShmemUsageError)
def exhaustion():
    os.environ["NUMBA_SHMEM_HEAP_SIZE"] = "4M"
    shmem.init()
    try:
        shmem.array(8 << 20, np.uint8)
    finally:
        still_usable()


@scenario(shmem.ShmemUsageError)
def bad_shape():
    shmem.init()
    shmem.array((4, -1), np.float32)


@scenario(shmem.ShmemUsageError)
def shape_not_int():
    shmem.init()
    shmem.array(2.5, np.float32)


@scenario(shmem.ShmemUsageError)
def bad_dtype():
    shmem.init()
    shmem.array(4, "not-a-dtype")


@scenario(shmem.ShmemUsageError)
def object_dtype():
    shmem.init()
    shmem.array(4, object)


@scenario(shmem.ShmemUsageError)
def bad_align():
    shmem.init()
    shmem.array(4, np.int32, align=48)


@scenario(shmem.ShmemUsageError)
def free_foreign():
    from numba import cuda

    shmem.init()
    shmem.free(cuda.device_array(4, np.int32))


@scenario(shmem.ShmemUsageError)
def free_not_array():
    shmem.init()
    shmem.free([1, 2, 3])


@scenario(shmem.ShmemUsageError)
def double_free():
    shmem.init()
    arr = shmem.array(4, np.int32)
    shmem.free(arr)
    shmem.free(arr)


@scenario(shmem.ShmemUsageError)
def free_slice():
    shmem.init()
    arr = shmem.array(1024, np.int32)
    shmem.free(arr[512:])


@scenario(shmem.ShmemUsageError)
def peer_out_of_range():
    shmem.init()
    shmem.peer_array(shmem.array(4, np.int32), shmem.n_pes())


@scenario(shmem.ShmemUsageError)
def peer_not_int():
    shmem.init()
    shmem.peer_array(shmem.array(4, np.int32), 0.5)


@scenario(shmem.ShmemUsageError)
def peer_not_heap():
    from numba import cuda

    shmem.init()
    shmem.peer_array(cuda.device_array(4, np.int32), 0)


@scenario(shmem.ShmemTimeoutError)
def wait_timeout():
    os.environ["NUMBA_SHMEM_WAIT_TIMEOUT"] = "1"
    shmem.init()
    if shmem.my_pe() == 1:
        time.sleep(4)
        sys.stdout.write("EXPECTED ShmemTimeoutError: (PE 1 only slept)\n")
        os._exit(0)
    shmem.barrier_all()


@scenario(shmem.ShmemUsageError)
def backend_mismatch():
    from numba.cuda import config

    os.environ["NUMBA_SHMEM_BACKEND"] = "cuda" if config.ENABLE_CUDASIM else "sim"
    shmem.init()


@scenario(shmem.ShmemBootstrapError)
def launcher_env_malformed():
    os.environ.update(SHMEM_RUN_SOCKET="/nonexistent/socket", SHMEM_RUN_SECRET="x",
                      SHMEM_RUN_NPES="1", SHMEM_RUN_JOBID="j")
    shmem.init()


@scenario(shmem.ShmemBootstrapError)
def launcher_unreachable():
    os.environ.update(SHMEM_RUN_SOCKET="/nonexistent/socket", SHMEM_RUN_SECRET="x",
                      SHMEM_RUN_PE="0", SHMEM_RUN_NPES="1", SHMEM_RUN_JOBID="j")
    shmem.init()


@scenario(shmem.ShmemUsageError)
def mpi_without_mpi4py():
    sys.modules["mpi4py"] = None  # as if it were not installed
    os.environ["OMPI_COMM_WORLD_SIZE"] = "1"
    shmem.init()


@scenario(shmem.ShmemUsageError)
def cache_true():
    from numba import cuda

    shmem.init()

    @cuda.jit(cache=True)
    def kernel(out):
        out[0] = shmem.my_pe()

    kernel[1, 1](shmem.zeros(1, np.int32))


@scenario(shmem.ShmemUsageError)
def cache_true_device_function():
    """A kernel that calls numba-shmem through a device function; first, one
    that only reads a constant of it (no device function) runs with
    cache=True."""
    from numba import cuda

    shmem.init()

    @cuda.jit(cache=True)
    def plain(out):
        out[0] = 7 + shmem.CMP_EQ

    out = cuda.to_device(np.zeros(1, np.int32))
    plain[1, 1](out)
    assert out.copy_to_host()[0] == 7
    sys.stdout.write("PLAIN RAN\n")

    @cuda.jit(device=True)
    def helper(out):
        out[0] = shmem.my_pe()

    @cuda.jit(cache=True)
    def kernel(out):
        helper(out)

    kernel[1, 1](shmem.zeros(1, np.int32))


@scenario(shmem.ShmemUsageError)
def no_visible_gpu():
    os.environ["NUMBA_SHMEM_BACKEND"] = "cuda"
    shmem.init()


@scenario(shmem.ShmemDriverError)
def driver_out_of_memory():
    os.environ["NUMBA_SHMEM_HEAP_SIZE"] = "1T"
    shmem.init()
    try:
        shmem.array(600 << 30, np.uint8)  # more than the GPU has
    finally:
        still_usable()


def main():
    fn, expected = SCENARIOS[sys.argv[1]]
    try:
        fn()
    except expected as exc:
        sys.stdout.write(f"EXPECTED {type(exc).__name__}: {exc}\n")
        return 0
    sys.stdout.write(f"NO ERROR from {sys.argv[1]}\n")
    return 1


if __name__ == "__main__":
    sys.exit(main())
