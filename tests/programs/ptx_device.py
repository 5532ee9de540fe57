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


def p_runtime_pe(dest, pe):
    shmem.p(dest, 1, pe)


def g_far(out, source, pe):
    out[0] = shmem.g(source, pe)


def signal_op_set(sig):
    shmem.signal_op(sig, 1, shmem.SIGNAL_SET, 1)


def put_block(dest, source):
    shmem.put_block(dest, source, 1)


def iput_iget(dest, source, stride, nelems):
    shmem.iput(dest, source, stride, 1, nelems, 1)
    shmem.iget(dest, source, 1, stride, nelems, 1)


def fence_and_quiet(dest):
    shmem.p(dest, 1, 1)
    shmem.fence()
    shmem.p(dest, 2, 1)
    shmem.quiet()


def quiet_only():
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


def put_int64(dest, source):
    shmem.put(dest, source, 1)


def put_int16(dest, source):
    shmem.put(dest, source, 1)


def put_warp(dest, source):
    shmem.put_warp(dest, source, 1)


def bad_cmp_literal(ivar):
    shmem.wait_until(ivar, 42, 1)


def bad_sig_op_literal(sig):
    shmem.signal_op(sig, 1, 7, 1)


def p_bool(dest):
    shmem.p(dest, True, 1)


def g_complex(source, out):
    out[0] = shmem.g(source, 1)


def wait_bool(ivar):
    shmem.wait_until(ivar, shmem.CMP_EQ, True)


def wait_any_kernel(ivars, status, out):
    out[0] = shmem.wait_until_any(ivars, status, shmem.CMP_EQ, 1)


KERNELS = {
    "put_int64": (put_int64, (i64, i64)),
    "put_int16": (put_int16, (types.int16[::1], types.int16[::1])),
    "put_warp": (put_warp, (f64, f64)),
    "bad_cmp_literal": (bad_cmp_literal, (i64,)),
    "bad_sig_op_literal": (bad_sig_op_literal, (u64,)),
    "p_bool": (p_bool, (types.boolean[::1],)),
    "g_complex": (g_complex, (types.complex128[::1], types.complex128[::1])),
    "wait_bool": (wait_bool, (types.boolean[::1],)),
    "wait_any": (wait_any_kernel, (i64, types.int32[::1], u64)),
    "wait_signal": (wait_signal, (u64, u64)),
    "put_signal_set": (put_signal_set, (f64, f64, u64)),
    "put_signal_add_block": (put_signal_add_block, (f64, f64, u64)),
    "signal_op_set": (signal_op_set, (u64,)),
    "p_runtime_pe": (p_runtime_pe, (i64, types.int64)),
    "g_far": (g_far, (f64, f64, types.int64)),
    "put_block": (put_block, (f64, f64)),
    "iput_iget": (iput_iget, (f64, f64, types.int64, types.int64)),
    "fence_and_quiet": (fence_and_quiet, (i64,)),
    "quiet_only": (quiet_only, ()),
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
