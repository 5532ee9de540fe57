"""Trigger one device-API error and print it (see errors.py for the protocol)."""

import sys

import numpy as np
from numba import cuda

import numba_shmem as shmem


@cuda.jit
def wait_kernel(sig):
    shmem.signal_wait_until(sig, shmem.CMP_GE, 5)


@cuda.jit
def bad_cmp_kernel(ivar):
    shmem.wait_until(ivar, 42, 1)


@cuda.jit
def bad_sig_op_kernel(sig):
    shmem.signal_op(sig, 1, 7, 0)


@cuda.jit
def float_and_kernel(x):
    shmem.atomic_and(x, 1, 0)


@cuda.jit
def put_out_of_range_kernel(dest, source):
    shmem.put_block(dest, source, shmem.n_pes())


@cuda.jit
def atomic_off_heap_kernel(counter):
    shmem.atomic_add(counter, 1, 0)


@cuda.jit
def strided_put_kernel(dest, source):
    shmem.put(dest[::2], source[::2], 0)


@cuda.jit
def float_and_reduce_kernel(dest, source):
    shmem.and_reduce_block(shmem.TEAM_WORLD, dest, source, 4)


@cuda.jit
def runtime_cmp_kernel(ivar, cmp):
    shmem.wait_until(ivar, cmp, 1)


@cuda.jit
def runtime_sig_op_kernel(sig, sig_op):
    shmem.signal_op(sig, 1, sig_op, 0)


@cuda.jit
def put_overrun_kernel(dest, source):
    shmem.put_block(dest, source, 0)


@cuda.jit
def get_overrun_kernel(dest, source):
    shmem.get(dest, source, 0)


@cuda.jit
def iput_overrun_kernel(dest, source):
    shmem.iput(dest, source, 2, 1, 10, 0)  # dest element 18 of 16


@cuda.jit
def iget_overrun_kernel(dest, source):
    shmem.iget(dest, source, 1, 3, 6, 0)  # source element 15 of 8


@cuda.jit
def wait_all_kernel(ivars, status):
    shmem.wait_until_all(ivars, status, shmem.CMP_EQ, 1)


def main():
    scenario = sys.argv[1]
    shmem.init()
    try:
        if scenario == "host_call":
            arr = shmem.zeros(4, np.float64)
            shmem.put_block(arr, arr, 0)
        elif scenario == "bad_cmp":
            bad_cmp_kernel[1, 1](shmem.zeros(1, np.int64))
        elif scenario == "bad_sig_op":
            bad_sig_op_kernel[1, 1](shmem.zeros(1, np.uint64))
        elif scenario == "atomic_float_and":
            float_and_kernel[1, 1](shmem.zeros(1, np.float32))
        elif scenario in ("signal_timeout", "debug_timeout"):
            sig = shmem.zeros(1, np.uint64)
            sig.copy_to_device(np.array([2], np.uint64))
            wait_kernel[1, 1](sig)
            cuda.synchronize()
        elif scenario == "put_pe_out_of_range":
            arr = shmem.zeros(64, np.float64)
            put_out_of_range_kernel[1, 32](arr, arr)
            cuda.synchronize()
        elif scenario == "atomic_off_heap":
            atomic_off_heap_kernel[1, 1](cuda.to_device(np.zeros(1, np.int64)))
            cuda.synchronize()
        elif scenario == "strided_put":
            arr = shmem.zeros(8, np.float64)
            strided_put_kernel[1, 1](arr, arr)
        elif scenario == "float_and_reduce":
            arr = shmem.zeros(8, np.float64)
            float_and_reduce_kernel[1, 32](arr, arr)
        elif scenario == "runtime_cmp":
            runtime_cmp_kernel[1, 1](shmem.zeros(1, np.int64), 42)
            cuda.synchronize()
        elif scenario == "runtime_sig_op":
            runtime_sig_op_kernel[1, 1](shmem.zeros(1, np.uint64), 7)
            cuda.synchronize()
        elif scenario == "put_overrun":
            arr = shmem.zeros(64, np.float64)
            put_overrun_kernel[1, 32](arr[:16], cuda.to_device(np.ones(20)))
            cuda.synchronize()
        elif scenario == "get_overrun":
            arr = shmem.zeros(64, np.float64)
            get_overrun_kernel[1, 1](cuda.to_device(np.ones(20)), arr[:16])
            cuda.synchronize()
        elif scenario == "iput_overrun":
            arr = shmem.zeros(64, np.float64)
            iput_overrun_kernel[1, 1](arr[:16], cuda.to_device(np.ones(20)))
            cuda.synchronize()
        elif scenario == "iget_overrun":
            arr = shmem.zeros(64, np.float64)
            iget_overrun_kernel[1, 1](cuda.to_device(np.ones(20)), arr[:8])
            cuda.synchronize()
        elif scenario == "wait_all_timeout":
            ivars = shmem.zeros(2, np.int64)
            ivars.copy_to_device(np.array([1, 0], np.int64))
            wait_all_kernel[1, 1](ivars, cuda.to_device(np.zeros(2, np.int32)))
        sys.stdout.write(f"NO ERROR from {scenario}\n")
        return 1
    except (shmem.ShmemUsageError, shmem.ShmemTimeoutError) as exc:
        sys.stdout.write(f"EXPECTED {type(exc).__name__}: {exc}\n")
        return 0


if __name__ == "__main__":
    sys.exit(main())
