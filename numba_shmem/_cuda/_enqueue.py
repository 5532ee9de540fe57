"""What the stream tier enqueues on a CUDA stream: prepared kernel launches,
copies and stream memory operations, each one driver call.

numba's own launch builds a ctypes value for every argument on every call (20
to 30 us of host time); the stream tier launches the same few kernels again and
again, so it pays that once. A ``Prepared`` kernel is compiled for fixed
argument types when it is made; a launch stores the call's values into its
parameter buffer and calls ``cuLaunchKernel`` (which copies the parameters
before it returns). Nothing here allocates or talks to another PE, and only
``synchronize`` waits, so every other call can be captured into a CUDA graph.

The calls made on every enqueue (the launch, the copies, the stream memory
operations) go to the driver's functions through ctypes, their addresses asked
of the driver once (``cuGetProcAddress``, the same functions cuda.bindings
calls): cuda.bindings wraps every argument and every result in Python objects,
which costs microseconds a call.
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


def _driver_function(name, *argtypes):
    """The driver's ``name`` as a ctypes function returning the CUresult as an int."""
    (_, address, _status) = _check(cu.cuGetProcAddress(
        name.encode(), _ABI, cu.CUdriverProcAddress_flags.CU_GET_PROC_ADDRESS_DEFAULT),
        "cuGetProcAddress")
    if not address:
        raise ShmemDriverError("cuGetProcAddress", "CUDA_ERROR_NOT_FOUND",
                               f"the driver has no {name} for CUDA {_ABI // 1000}")
    return ctypes.CFUNCTYPE(ctypes.c_int, *argtypes)(int(address))


#: the CUDA version whose signatures the ctypes prototypes below follow
_ABI = 12000
_P, _U, _U64 = ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint64
_FAST = {}


def _fast(name):
    """The ctypes form of ``name`` (one of the calls below), made on first use."""
    found = _FAST.get(name)
    if found is None:
        argtypes = {"cuLaunchKernel": (_P, _U, _U, _U, _U, _U, _U, _U, _P, _P, _P),
                    "cuMemcpyDtoDAsync": (_U64, _U64, ctypes.c_size_t, _P),
                    "cuMemcpyHtoDAsync": (_U64, _P, ctypes.c_size_t, _P),
                    "cuMemcpyDtoHAsync": (_P, _U64, ctypes.c_size_t, _P),
                    "cuStreamWriteValue64": (_P, _U64, _U64, _U),
                    "cuStreamWaitValue64": (_P, _U64, _U64, _U)}[name]
        found = _FAST[name] = _driver_function(name, *argtypes)
    return found


def _failed(code, name):
    """Raise the ShmemDriverError of the CUresult ``code`` that ``name`` returned."""
    try:
        result = cu.CUresult(code).name
    except ValueError:
        result = f"CUresult {code}"
    raise ShmemDriverError(name, result)


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
            "params, None)\n"
            "    if result:\n"
            "        failed(result, 'cuLaunchKernel')\n")
        scope = {"lock": threading.Lock(), "pack": layout.pack_into, "buffer": self._buffer,
                 "launch_kernel": _fast("cuLaunchKernel"), "function": self._function,
                 "params": self._params, "failed": _failed}
        exec(source, scope)  # noqa: S102  (generated from the argument types)
        self.launch = scope["launch"]


_COPIES = {None: "cuMemcpyDtoDAsync", "from": "cuMemcpyHtoDAsync", "to": "cuMemcpyDtoHAsync"}


def copy(dest, source, nbytes, stream, host=None):
    """Copy ``nbytes`` between device addresses on ``stream``; ``host`` is
    "from" or "to" when ``source`` or ``dest`` is a host address."""
    name = _COPIES[host]
    result = _fast(name)(dest, source, nbytes, stream)
    if result:
        _failed(result, name)


def write_value(address, value, stream):
    """Store the uint64 ``value`` at ``address`` once the stream's earlier work is
    done, after a memory barrier (its writes are visible first)."""
    result = _fast("cuStreamWriteValue64")(stream, address, value, 0)
    if result:
        _failed(result, "cuStreamWriteValue64")


def wait_value(address, value, stream, nonzero=False):
    """Hold the stream until the uint64 at ``address`` equals ``value`` (or,
    with ``nonzero``, until it is not 0)."""
    result = (_fast("cuStreamWaitValue64")(stream, address, 0xFFFF_FFFF_FFFF_FFFF, _AND)
              if nonzero else _fast("cuStreamWaitValue64")(stream, address, value, _EQ))
    if result:
        _failed(result, "cuStreamWaitValue64")


def synchronize(stream):
    """Wait on the host until ``stream``'s work is done."""
    _check(cu.cuStreamSynchronize(stream), "cuStreamSynchronize")


def capturing(stream):
    """Whether ``stream`` is being captured into a graph."""
    (_, status) = _check(cu.cuStreamIsCapturing(stream), "cuStreamIsCapturing")
    return status != cu.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE
