"""What the stream tier enqueues on a CUDA stream: prepared kernel launches,
copies and stream memory operations, each one driver call.

numba's own launch builds a ctypes value for every argument on every call (20
to 30 us of host time); the stream tier launches the same few kernels again and
again, so it pays that once. A ``Prepared`` kernel is compiled for fixed
argument types when it is made; a launch stores the call's values into its
parameter buffer and calls ``cuLaunchKernel`` (which copies the parameters
before it returns). Nothing here allocates or talks to another PE, and only
``synchronize`` waits, so every other call can be captured into a CUDA graph.
"""

import contextlib
import ctypes
import struct
import threading

from numba.cuda import types

from .._errors import ShmemDriverError
from ._driver import cu

_SUCCESS = cu.CUresult.CUDA_SUCCESS
_EQ = int(cu.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_EQ)
_AND = int(cu.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_AND)

_RELAXED = cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED


def _check(result, name):
    error = result[0]
    if error != _SUCCESS:
        raise ShmemDriverError(name, getattr(error, "name", str(error)))
    return result


#: struct codes of the integer arguments, each in an 8-byte slot
_CODES = {"int64": "q", "uint64": "Q", "int32": "i4x", "uint32": "I4x"}


@contextlib.contextmanager
def outside_capture():
    """Let this thread make calls that a graph capture under way would refuse
    (loading a module, a synchronous copy on a stream of its own): for work
    that belongs to no graph, done the first time a kernel is needed."""
    (_, previous) = _check(cu.cuThreadExchangeStreamCaptureMode(_RELAXED),
                           "cuThreadExchangeStreamCaptureMode")
    try:
        yield
    finally:
        cu.cuThreadExchangeStreamCaptureMode(previous)


class Prepared:
    """``kernel`` compiled for ``argtypes`` (numba types: one-dimensional C
    arrays and integers), launched without numba's per-call argument handling.

    ``launch(grid, block, stream, *values)`` takes, for each array argument,
    its device address and its number of elements (two values), and for each
    integer argument its value. Kernels run as plain (not cooperative) launches:
    the library's host kernels have no grid-wide barriers. Preparing may happen
    during a graph capture (the module is loaded outside it)."""

    def __init__(self, kernel, argtypes):
        argtypes = tuple(argtypes)
        with outside_capture():
            kernel.compile(argtypes)
            overload = kernel.overloads[argtypes]
            # loading the module runs the device state's setup (this PE's numbers)
            kernel_handle = overload._codelibrary.get_cufunc().handle
            (_, function) = _check(cu.cuKernelGetFunction(kernel_handle), "cuKernelGetFunction")
            #: the largest block this kernel can be launched with (its registers allow)
            (_, self.max_threads) = _check(cu.cuFuncGetAttribute(
                cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, function),
                "cuFuncGetAttribute")
        codes, fields, params = [], [], []
        for argtype in argtypes:
            k = len(params)
            if isinstance(argtype, types.Array):
                itemsize = argtype.dtype.bitwidth // 8
                codes.append("q" * 7)  # meminfo, parent, nitems, itemsize, data, shape, stride
                fields += ["0", "0", f"n{k}", str(itemsize), f"a{k}", f"n{k}", str(itemsize)]
                params += [f"a{k}", f"n{k}"]
            elif isinstance(argtype, types.Integer):
                codes.append(_CODES[str(argtype)])
                fields.append(f"v{k}")
                params.append(f"v{k}")
            else:
                raise TypeError(f"Prepared: unsupported argument type {argtype}")
        layout = struct.Struct("<" + "".join(codes))
        slots = len(fields)
        self._buffer = ctypes.create_string_buffer(max(8 * slots, 8))
        base = ctypes.addressof(self._buffer)
        self._pointers = (ctypes.c_void_p * max(slots, 1))(*[base + 8 * i for i in range(slots)])
        self._function = int(function)
        self._params = ctypes.addressof(self._pointers)
        # one generated function per kernel: a launch is one pack and one driver call
        source = (
            f"def launch(grid, block, stream, {', '.join(params)}):\n"
            "    with lock:\n"
            f"        pack(buffer, 0, {', '.join(fields)})\n"
            "        result = launch_kernel(function, grid, 1, 1, block, 1, 1, 0, stream, "
            "params, 0)\n"
            "    if result[0] != SUCCESS:\n"
            "        check(result, 'cuLaunchKernel')\n")
        scope = {"lock": threading.Lock(), "pack": layout.pack_into, "buffer": self._buffer,
                 "launch_kernel": cu.cuLaunchKernel, "function": self._function,
                 "params": self._params, "SUCCESS": _SUCCESS, "check": _check}
        exec(source, scope)  # noqa: S102  (generated from the argument types)
        self.launch = scope["launch"]


def copy(dest, source, nbytes, stream, host=None):
    """Copy ``nbytes`` between device addresses on ``stream``; ``host`` is
    "from" or "to" when ``source`` or ``dest`` is a host address."""
    if host is None:
        _check(cu.cuMemcpyDtoDAsync(dest, source, nbytes, stream), "cuMemcpyDtoDAsync")
    elif host == "from":
        _check(cu.cuMemcpyHtoDAsync(dest, source, nbytes, stream), "cuMemcpyHtoDAsync")
    else:
        _check(cu.cuMemcpyDtoHAsync(dest, source, nbytes, stream), "cuMemcpyDtoHAsync")


def write_value(address, value, stream):
    """Store the uint64 ``value`` at ``address`` once the stream's earlier work is
    done, after a memory barrier (its writes are visible first)."""
    _check(cu.cuStreamWriteValue64(stream, address, value, 0), "cuStreamWriteValue64")


def wait_value(address, value, stream, nonzero=False):
    """Hold the stream until the uint64 at ``address`` equals ``value`` (or,
    with ``nonzero``, until it is not 0)."""
    if nonzero:
        _check(cu.cuStreamWaitValue64(stream, address, 0xFFFF_FFFF_FFFF_FFFF, _AND),
               "cuStreamWaitValue64")
    else:
        _check(cu.cuStreamWaitValue64(stream, address, value, _EQ), "cuStreamWaitValue64")


#: handles every context knows: 0, CU_STREAM_LEGACY (1), CU_STREAM_PER_THREAD (2)
_DEFAULT_STREAMS = (0, 1, 2)
#: bytes of a stream's handle that must be mapped before the driver reads it
_HANDLE_BYTES = 64


def _readable(address, nbytes):
    """Whether this process has the ``nbytes`` at ``address`` mapped readable:
    the kernel copies them into a pipe, and answers EFAULT where they are not
    (where reading them from here would crash the process)."""
    import os

    libc = ctypes.CDLL(None, use_errno=True)
    libc.write.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t)
    libc.write.restype = ctypes.c_ssize_t
    read_end, write_end = os.pipe()
    try:
        return libc.write(write_end, address, nbytes) == nbytes
    finally:
        os.close(read_end)
        os.close(write_end)


def stream_problem(handle):
    """Why the int ``handle`` is not a stream this PE's work may go on (a
    str), or None when it is one of the current context's. A made-up handle
    must never reach the driver unchecked: it reads the memory the handle
    points to, and an address that is not mapped ends the process. (One that
    points to readable memory which is not a stream still reaches it: the
    driver then usually answers an error, but may read further and crash.)"""
    if handle in _DEFAULT_STREAMS:
        return None
    if not 0 < handle < 1 << 64 or not _readable(handle, _HANDLE_BYTES):
        return "it does not point to memory of this process (not a CUstream)"
    result, context = cu.cuStreamGetCtx(handle)
    if result != _SUCCESS:
        return f"the CUDA driver does not know it ({getattr(result, 'name', result)})"
    (_, current) = _check(cu.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if int(context) != int(current):
        return "it is a stream of another CUDA context than this PE's"
    return None


def synchronize(stream):
    """Wait on the host until ``stream``'s work is done."""
    _check(cu.cuStreamSynchronize(stream), "cuStreamSynchronize")


def capturing(stream):
    """Whether ``stream`` is being captured into a graph."""
    (_, status) = _check(cu.cuStreamIsCapturing(stream), "cuStreamIsCapturing")
    return status != cu.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE
