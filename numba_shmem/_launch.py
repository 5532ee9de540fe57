"""collective_launch: a grid that every PE can keep resident at once."""

import json
import math

from ._errors import ShmemUsageError
from ._runtime import require


def _count(dims, what):
    """The number of blocks or threads in a grid or block shape."""
    try:
        total = math.prod(int(d) for d in (dims if isinstance(dims, (tuple, list)) else (dims,)))
    except (TypeError, ValueError):
        raise ShmemUsageError(f"collective_launch: {what} must be an int or a tuple of ints, "
                              f"got {dims!r}") from None
    if total < 0 or (what == "blockdim" and total == 0):
        raise ShmemUsageError(f"collective_launch: {what} must be positive, got {dims!r}")
    return total


def collective_launch(kernel, griddim, blockdim, *args, stream=0, sharedmem=0):
    """Collective over all PEs. Launch ``kernel[griddim, blockdim, stream,
    sharedmem](*args)`` cooperatively, so that kernels that wait on each other
    (device barriers, collectives, signals) cannot deadlock for want of SMs.
    ``griddim=0`` takes the largest grid that can be resident at once; a grid
    that cannot be resident is an error on every PE that names the limit."""
    runtime = require("collective_launch")
    threads = _count(blockdim, "blockdim")
    blocks = _count(griddim, "griddim")
    if runtime.backend == "sim":
        limit = 1  # the simulator runs blocks one after another
    else:
        kernel = kernel.specialize(*args)  # compiled once, for these argument types
        (overload,) = kernel.overloads.values()
        limit = overload.max_cooperative_grid_blocks(blockdim, sharedmem)
    chosen = limit if blocks == 0 else blocks
    reports = [json.loads(r) for r in runtime.bootstrap.allgather(
        json.dumps([chosen, limit]).encode(), "shmem.collective_launch")]
    too_large = [(pe, asked, most) for pe, (asked, most) in enumerate(reports) if asked > most]
    if too_large:
        pe, asked, most = too_large[0]
        raise ShmemUsageError(
            f"collective_launch: PE {pe} asked for a grid of {asked} blocks of {threads} threads, "
            f"but at most {most} can be resident at once on its share of the GPU; pass "
            "griddim=0 for the largest grid, or use fewer threads or less shared memory")
    if runtime.backend == "sim":
        kernel[chosen, blockdim](*args)
    else:
        kernel[chosen, blockdim, stream, sharedmem](*args)
