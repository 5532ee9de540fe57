"""Compile small kernels that use the device API to PTX for sm_90 (no GPU
needed) and print each as a section ``=== name``; typing errors print as
``=== name\\nTypingError: ...``."""

import sys

from numba import cuda, types

import numba_shmem as shmem

u64 = types.uint64[::1]
i64 = types.int64[::1]
f32 = types.float32[::1]
f64 = types.float64[::1]


def wait_signal(sig, out):
    out[0] = shmem.signal_wait_until(sig, shmem.CMP_GE, 3)


def put_signal_set(dest, source, sig):
    shmem.put_signal(dest, source, sig, 1, shmem.SIGNAL_SET, 1)


def put_signal_add_block(dest, source, sig):
    shmem.put_signal_block(dest, source, sig, 1, shmem.SIGNAL_ADD, 1)


def put_block(dest, source):
    shmem.put_block(dest, source, 1)


def fence_and_quiet(dest):
    shmem.p(dest, 1, 1)
    shmem.fence()
    shmem.p(dest, 2, 1)
    shmem.quiet()


def atomics(counter, out):
    out[0] = shmem.atomic_fetch_add(counter, 1, 1)
    shmem.atomic_add(counter, 2, 1)
    out[1] = shmem.atomic_compare_swap(counter, 0, 5, 1)
    out[2] = shmem.atomic_swap(counter, 7, 1)
    shmem.atomic_xor(counter, 3, 1)


def atomic_and_float(counter):
    shmem.atomic_and(counter, 1.0, 1)


def bad_signal_dtype(dest, source, sig):
    shmem.put_signal(dest, source, sig, 1, shmem.SIGNAL_SET, 1)


def mismatched_put(dest, source):
    shmem.put(dest, source, 1)


def strided_put(dest, source):
    shmem.put(dest[::2], source[::2], 1)


KERNELS = {
    "wait_signal": (wait_signal, (u64, u64)),
    "put_signal_set": (put_signal_set, (f64, f64, u64)),
    "put_signal_add_block": (put_signal_add_block, (f64, f64, u64)),
    "put_block": (put_block, (f64, f64)),
    "fence_and_quiet": (fence_and_quiet, (i64,)),
    "atomics": (atomics, (i64, i64)),
    "atomic_and_float": (atomic_and_float, (f32,)),
    "bad_signal_dtype": (bad_signal_dtype, (f64, f64, i64)),
    "mismatched_put": (mismatched_put, (f64, f32)),
    "strided_put": (strided_put, (f64, f64)),
}

for name in sys.argv[1:] or KERNELS:
    fn, sig = KERNELS[name]
    sys.stdout.write(f"=== {name}\n")
    try:
        ptx, _ = cuda.compile_ptx(fn, sig, cc=(9, 0))
    except Exception as exc:  # a typing error is what some cases are about
        sys.stdout.write(f"{type(exc).__name__}: {exc}\n")
        continue
    sys.stdout.write(ptx + "\n")
