"""Host forms of the team collectives, ordered on a CUDA stream.

``shmem.sum_reduce(team, dest, source, nelems, stream=s)`` enqueues its work on
``s``; collective over ``team``, and complete on every member when the stream is.
Every member must make the same collective calls on a team in the same order
(with ``NUMBA_SHMEM_DEBUG=1`` a mismatch is an error on every member). Calls on
one team from several streams at once are matched in the order each PE issues
them; order them (one stream per team, or events) to keep their data apart.
The data moves in a grid of many blocks, each taking a slice of every member's
part (a one-block kernel would leave most of the GPU idle); one-thread kernels
around it synchronize the team: ``sync(team)`` before a reduction reads the
members' sources, ``barrier(team)`` after every collective.
"""

import json

import numpy as np

from . import _device_api as api
from ._errors import ShmemUsageError
from ._host_rma import _flat, local_array, symmetric_array
from ._runtime import require
from ._stream._handles import as_stream

_THREADS = 256
#: the simulator runs every thread as a Python thread: a warp's worth does the
#: same work there, many times faster
_SIM_THREADS = 32
#: bytes of each member's part one block moves; the grid has at most _MAX_BLOCKS
_CHUNK_BYTES = 64 << 10
_MAX_BLOCKS = 1024


def _grid(nelems, itemsize):
    """Blocks, and elements per block (a whole number of 16-byte vectors)."""
    vector = max(1, 16 // itemsize)
    per_block = max(vector, _CHUNK_BYTES // itemsize // vector * vector)
    blocks = -(-nelems // per_block)
    if blocks > _MAX_BLOCKS:
        blocks = _MAX_BLOCKS
        per_block = -(-nelems // blocks // vector) * vector
    return max(1, blocks), per_block


def _checked(name, dest, source, nelems, root, members, rank):
    """The flat dest and source, once every argument is right for ``name``, and
    whether they are the same array (a reduction in place)."""
    def fail(message):
        raise ShmemUsageError(f"shmem.{name}: {message}")

    if isinstance(nelems, bool) or not isinstance(nelems, (int, np.integer)) or nelems < 0:
        fail(f"nelems must be an int >= 0, got {nelems!r}")
    op, what = (name.split("_") + [""])[:2]
    symmetric_array(f"{name} (dest)", "dest", dest, rank)  # dest must be symmetric
    if what in ("reduce", "reducescatter"):  # members read each other's source
        symmetric_array(f"{name} (source)", "source", source, rank)
    else:
        local_array(name, "source", source)
    if dest.dtype != source.dtype:
        fail(f"dest and source must have the same dtype, got {dest.dtype} and {source.dtype}")
    if op in api.INT_ONLY_OPS and source.dtype.kind == "f":
        fail(f"{op} needs an integer dtype, got {source.dtype}")
    if name == "broadcast" and not (root and 0 <= root[0] < len(members)):
        fail(f"root must be a PE of the team (0 to {len(members) - 1}), got "
             f"{root[0] if root else None!r}")
    address = require(name).heap.backend.address
    start_d, start_s = address(dest), address(source)
    end_d = start_d + dest.size * dest.dtype.itemsize
    end_s = start_s + source.size * source.dtype.itemsize
    if start_d < end_s and start_s < end_d and not (start_d == start_s and name not in (
            "fcollect", "alltoall")):
        fail("dest and source overlap; pass separate arrays" + (
            "" if name in ("fcollect", "alltoall") else " or the same array (in place)"))
    many = len(members) * nelems
    for arg, arr, needed in (
            ("dest", dest, many if name in ("fcollect", "alltoall") else nelems),
            ("source", source, many if name == "alltoall" or what == "reducescatter" else nelems)):
        if arr.size < needed:
            fail(f"{arg} holds {arr.size} elements but needs {needed} for nelems={nelems} on "
                 f"{len(members)} PEs; pass a larger {arg} or a smaller nelems")
    return _flat(dest), _flat(source), start_d == start_s


def _agree(runtime, team, members, name, dtype, nelems, root):
    """Debug mode: every member makes the same call (the collective, nelems,
    dtype, root), or every member gets an error naming the two calls. Without
    it, mismatched calls drift the team's barrier counts: wrong data or a hang."""
    call = [name, int(nelems), str(np.dtype(dtype)), root[0] if root else None]
    reports = [json.loads(r) for r in runtime.bootstrap.allgather(
        json.dumps(call).encode(), "a host collective (NUMBA_SHMEM_DEBUG check)",
        list(members))]

    def describe(r):
        return f"shmem.{r[0]}(nelems={r[1]}, {r[2]}" + (f", root={r[3]})" if r[3] is not None
                                                       else ")")
    for member, report in zip(members, reports):
        if report != reports[0]:
            raise ShmemUsageError(
                f"collective calls on team {team} do not match: PE {members[0]} called "
                f"{describe(reports[0])} but PE {member} called {describe(report)}; every "
                "member must make the same collective calls in the same order")


def _make(block_name):
    name = block_name[:-len("_block")]
    takes_root = "root" in api.TABLE[block_name][0].split()
    kind = name.split("_")
    reduce_op = kind[0] if kind[-1] in ("reduce", "reducescatter") else None

    def collective(team, dest, source, nelems, *root, stream=0):
        runtime = require(name)
        stream = as_stream(stream, name, runtime.backend)
        members = runtime.teams.get(team, f"shmem.{name}")
        dest, source, in_place = _checked(name, dest, source, nelems, root, members,
                                          runtime.bootstrap.rank)
        if runtime.config.debug:
            _agree(runtime, team, members, name, source.dtype, nelems, root)
        from numba import cuda

        from . import _host_kernels as kernels

        def launch(kernel, grid, block):  # (as_stream gave the simulator stream 0)
            return kernel[grid, block, stream]
        threads = _SIM_THREADS if runtime.backend == "sim" else _THREADS
        # the team's row of the device team table (the simulator has none: made per call)
        row = runtime.teams.device[team] if runtime.teams.device is not None else \
            cuda.to_device(runtime.teams.row(team))
        blocks, per_block = _grid(nelems, source.dtype.itemsize)

        if reduce_op is None:
            which = {"broadcast": kernels.BROADCAST, "fcollect": kernels.FCOLLECT,
                     "alltoall": kernels.ALLTOALL}[name]
            launch(kernels.spread, blocks, threads)(
                row, dest, source, nelems, which, root[0] if takes_root else 0, per_block)
        else:
            # in place, this member's result would overwrite its source while the others
            # still read it: reduce into a private array, wait for every member, then copy
            if in_place:
                out = cuda.device_array(max(1, nelems), dest.dtype)  # cuMemFree waits for the GPU
            else:
                out = dest
            launch(kernels.team_sync, 1, 1)(team)  # every member's source is ready
            launch(kernels.reduce_kernel(reduce_op), blocks, threads)(
                row, out, source, nelems, kind[-1] == "reducescatter")
            if in_place and nelems:
                launch(kernels.team_sync, 1, 1)(team)  # every member has read every source
                if runtime.backend == "sim":
                    dest[:nelems].copy_to_device(out[:nelems])
                else:
                    dest[:nelems].copy_to_device(out[:nelems], stream=stream)
        launch(kernels.team_barrier, 1, 1)(team)  # complete on every member

    collective.__name__ = collective.__qualname__ = name
    collective.__module__ = "numba_shmem"
    collective.__doc__ = (f"Host. Collective over ``team``: what ``{block_name}`` does, "
                          "enqueued on ``stream`` (a grid of many blocks moves the data); "
                          "complete on every member when the stream is.\n\n"
                          + api.TABLE[block_name][1])
    return collective


HOST_COLLECTIVES = {name[:-len("_block")]: _make(name) for name in api.COLLECTIVES}
