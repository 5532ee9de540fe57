"""``cache=True`` on the simulator: the GPU's error for kernels that call numba-shmem.

numba's simulator takes ``cuda.jit(cache=True)`` and ignores it. On the GPU a
kernel that calls numba-shmem links the device state and cannot be cached:
compiling it, at its first launch, is an error (``_cuda/_state.py``). Here
``cuda.jit`` notes the flag, and launching such a kernel whose code refers to
numba-shmem (directly, or through the device functions it calls) raises the
same error before any thread runs. Installed once numba runs its simulator.
"""

import types

from numba import cuda
from numba.cuda.simulator.kernel import FakeCUDAKernel

from .._device_api import cache_refused

_original_jit = cuda.jit


class _CacheDeclared(FakeCUDAKernel):
    """A simulated kernel declared with ``cache=True``."""

    def __call__(self, *args):
        if not self._device:
            refers = self.__dict__.get("_refers_to_shmem")
            if refers is None:
                refers = self._refers_to_shmem = _refers_to_shmem(self.fn, set())
            if refers:
                raise cache_refused(self.fn.__name__)
        return super().__call__(*args)


def _names(code):
    """The global and attribute names ``code`` and the code nested in it use."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _ours(value):
    return str(getattr(value, "__module__", "")).split(".")[0] == "numba_shmem"


def _device_function(value, names):
    """Whether ``value`` is a function of numba-shmem, or one of its modules
    while ``names`` (those the code uses) name a function of it: calling one in
    a kernel links the device state on the GPU (a constant such as
    ``shmem.CMP_EQ`` does not)."""
    if isinstance(value, types.ModuleType):
        return value.__name__.split(".")[0] == "numba_shmem" and any(
            callable(getattr(value, name, None)) for name in names)
    return callable(value) and _ours(value)


def _refers_to_shmem(fn, seen):
    """Whether the Python function ``fn`` calls numba-shmem's device API,
    directly or through the simulated device functions it refers to."""
    if fn in seen:
        return False
    seen.add(fn)
    names = _names(fn.__code__)
    values = [fn.__globals__.get(name) for name in names]
    for cell in fn.__closure__ or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:  # (a cell not yet filled)
            pass
    return any(_refers_to_shmem(value.fn, seen) if isinstance(value, FakeCUDAKernel)
               else _device_function(value, names) for value in values)


def _jit(func_or_sig=None, *args, cache=None, **kwargs):
    """numba's simulated ``cuda.jit``, keeping ``cache=True`` for the launch."""
    made = _original_jit(func_or_sig, *args, **kwargs)
    if not cache:
        return made

    def declared(kernel):
        kernel.__class__ = _CacheDeclared  # (the same object, launched through the check)
        return kernel

    if isinstance(made, FakeCUDAKernel):
        return declared(made)
    return lambda fn: declared(made(fn))


def install():
    cuda.jit = _jit
