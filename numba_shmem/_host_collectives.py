"""Host forms of the team collectives, ordered on a CUDA stream.

``shmem.sum_reduce(team, dest, source, nelems, stream=s)`` enqueues a one-block
kernel that runs ``sum_reduce_block`` on ``s``; collective over ``team``, and
complete on every member when the stream is.
"""

from . import _device_api as api
from ._runtime import require

_KERNELS = {}


def block_kernel(block_name):
    """A kernel ``(team, dest, source, nelems, root)`` that calls ``block_name``
    (``root`` is passed on only where the collective takes one)."""
    if block_name not in _KERNELS:
        from numba import cuda

        from . import _device_api

        fn = _device_api.FUNCTIONS[block_name]
        if "root" in api.TABLE[block_name][0].split():
            @cuda.jit
            def kernel(team, dest, source, nelems, root):
                fn(team, dest, source, nelems, root)
        else:
            @cuda.jit
            def kernel(team, dest, source, nelems, root):
                fn(team, dest, source, nelems)
        _KERNELS[block_name] = kernel
    return _KERNELS[block_name]


_THREADS = 256


def _make(block_name):
    name = block_name[:-len("_block")]
    takes_root = "root" in api.TABLE[block_name][0].split()

    def collective(team, dest, source, nelems, *root, stream=0):
        runtime = require(name)
        kernel = block_kernel(block_name)
        if runtime.backend == "sim":
            kernel[1, _THREADS](team, dest, source, nelems, root[0] if takes_root else 0)
        else:
            kernel[1, _THREADS, stream](team, dest, source, nelems, root[0] if takes_root else 0)

    collective.__name__ = collective.__qualname__ = name
    collective.__module__ = "numba_shmem"
    collective.__doc__ = (f"Host. Collective over ``team``: ``{block_name}`` in a one-block "
                          "kernel on ``stream``; complete on every member when the stream is.\n\n"
                          + api.TABLE[block_name][1])
    return collective


HOST_COLLECTIVES = {name[:-len("_block")]: _make(name) for name in api.COLLECTIVES}
