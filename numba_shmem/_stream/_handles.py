"""Streams from every library, as numba streams.

``stream=`` of the host functions takes a numba stream, a raw ``CUstream``
handle (an int; 0 is the default stream), or a stream object of another
library: anything with ``__cuda_stream__`` (cuda.core), ``cuda_stream``
(PyTorch) or ``ptr`` (CuPy). Foreign streams become numba external streams,
made once per handle. The simulator runs every call at once, in call order,
so there any stream stands for the default one.
"""

from .._errors import ShmemUsageError

_external = {}  # handle -> numba external stream
_numba_types = set()  # the classes of numba's streams seen so far
_checked = set()  # raw handles the driver knows as streams of this process's context


def _numba_stream(stream):
    """Whether ``stream`` is numba's own (real or simulated) stream object."""
    kind = type(stream)
    if kind in _numba_types:
        return True
    module = kind.__module__
    if module.startswith("numba.cuda") or module.startswith("numba_cuda"):
        _numba_types.add(kind)
        return True
    return False


def handle_of(stream):
    """The ``CUstream`` handle (an int) of a foreign stream object or int, or
    None when ``stream`` is neither."""
    if isinstance(stream, bool):
        return None
    if isinstance(stream, int):
        return stream
    protocol = getattr(stream, "__cuda_stream__", None)
    if protocol is not None:  # cuda.core: (version, handle)
        value = protocol() if callable(protocol) else protocol
        return int(value[1]) if isinstance(value, tuple) and len(value) == 2 else None
    for attribute in ("cuda_stream", "ptr"):  # PyTorch, CuPy
        value = getattr(stream, attribute, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _refuse(stream, name):
    raise ShmemUsageError(
        f"shmem.{name}: stream={stream!r} is not a CUDA stream; pass a numba stream, a "
        "CUstream handle (an int, 0 for the default stream), or a CuPy, PyTorch or "
        "cuda.core stream")


def checked_handle(handle, stream, name):
    """``handle`` (an int), once it is known to be a stream of this PE's CUDA
    context (GPU only): a made-up handle is a usage error, never a crash.
    Checked once per handle."""
    if handle in _checked:
        return handle
    from .._cuda._enqueue import stream_problem

    problem = stream_problem(handle)
    if problem is not None:
        raise ShmemUsageError(
            f"shmem.{name}: stream={stream!r} is not a CUDA stream of this PE: {problem}; pass "
            "a numba stream, a CUstream handle of this process (an int, 0 for the default "
            "stream), or a CuPy, PyTorch or cuda.core stream")
    _checked.add(handle)
    return handle


def raw_handle(stream, name):
    """The ``CUstream`` handle (an int) that ``stream=`` of ``shmem.<name>``
    stands for (0 for None); an error names the argument and what to pass."""
    if stream is None:
        return 0
    if type(stream) is int:  # the common cases first: a handle...
        if stream < 0:
            _refuse(stream, name)
        return stream
    if _numba_stream(stream):  # ...or numba's own stream
        return int(stream.handle)
    handle = handle_of(stream)
    if handle is None or handle < 0:
        _refuse(stream, name)
    return handle


def as_stream(stream, name, backend):
    """The numba stream (or 0, the default stream) that ``stream=`` of
    ``shmem.<name>`` stands for; an error names the argument and what to pass."""
    if stream is None:
        return 0
    if _numba_stream(stream):
        return 0 if backend == "sim" else stream
    handle = handle_of(stream)
    if handle is None or handle < 0:
        _refuse(stream, name)
    if handle == 0 or backend == "sim":
        return 0
    found = _external.get(handle)
    if found is None:
        from numba import cuda

        checked_handle(handle, stream, name)
        found = _external[handle] = cuda.external_stream(handle)
    return found
