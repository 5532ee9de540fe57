"""collective_launch: a grid that every PE can keep resident at once."""

import json
import math

from ._current import require
from ._errors import ShmemUsageError
from ._stream._handles import as_stream


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
    sharedmem](*args)`` with a grid that can be resident at once alongside the
    grids of the PEs that share its GPU, so that kernels whose blocks wait on
    each other (device barriers, collectives, signals) cannot deadlock for want
    of SMs. PEs sharing a GPU each get an equal part of what one grid could
    keep resident there. ``griddim=0`` takes the largest such grid; a grid that
    cannot be resident is an error on every PE that names the limit. Kernels
    that call device barriers launch cooperatively. Returns the grid launched
    (the number of blocks for ``griddim=0``).

    Residency holds while no other kernel occupies the GPU's SMs."""
    runtime = require("collective_launch")
    stream = as_stream(stream, "collective_launch", runtime.backend)
    threads = _count(blockdim, "blockdim")
    blocks = _count(griddim, "griddim")
    if runtime.backend == "sim":
        limit, sharers = 1, 1  # the simulator runs blocks one after another
    else:
        kernel = kernel.specialize(*args)  # compiled once, for these argument types
        (overload,) = kernel.overloads.values()
        # MPS spreads the blocks of the PEs that share a GPU over all its SMs
        # (measured by benchmarks/residency.py): each PE gets an equal part
        sharers = runtime.pes_on_my_gpu
        limit = overload.max_cooperative_grid_blocks(blockdim, sharedmem) // sharers
    chosen = limit if blocks == 0 else blocks
    reports = [json.loads(r) for r in runtime.bootstrap.allgather(
        json.dumps([chosen, limit, sharers]).encode(), "shmem.collective_launch")]
    too_large = [(pe, *report) for pe, report in enumerate(reports)
                 if report[0] > report[1] or report[1] == 0]
    if too_large:
        pe, asked, most, sharers = too_large[0]
        where = "its GPU" if sharers == 1 else f"its share of a GPU that {sharers} PEs share"
        if most == 0:
            raise ShmemUsageError(
                f"collective_launch: on PE {pe} not one block of {threads} threads can be "
                f"resident on {where}; use fewer threads or less shared memory")
        raise ShmemUsageError(
            f"collective_launch: PE {pe} asked for a grid of {asked} blocks of {threads} threads, "
            f"but at most {most} can be resident at once on {where}; pass "
            "griddim=0 for the largest grid, or use fewer threads or less shared memory")
    grid = limit if blocks == 0 else griddim
    if runtime.backend == "sim":
        kernel[grid, blockdim](*args)
    else:
        kernel[grid, blockdim, stream, sharedmem](*args)
    return grid
