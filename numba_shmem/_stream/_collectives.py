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
members' sources, ``barrier(team)`` after every collective. A collective that
fits in one block (at most ``_CHUNK_BYTES`` per member) is one launch of the
block form instead, its team synchronization inside. A reduction of at most
``LINE_BYTES`` per member of 4- or 8-byte numbers, in a job on one node, is one
launch that sends the data in lines (``_kernels.line_reduce_kernel``): the data
carries its own arrival, so the team is crossed once, and in place needs no
scratch; it ends when this member's dest is written, and the next collective
that puts into members' arrays syncs the team first. On the GPU every launch
is prepared (``_cuda/_enqueue.py``): a call costs microseconds of host time and
can be captured into a CUDA graph; an in-place reduction reduces into a
scratch buffer kept per team, made by its first call of a size (not during a
capture).
"""

import json

import numpy as np

from .. import _device_api as api
from .._errors import ShmemUsageError
from .._heap._symmetric import LINE_BYTES, LINE_TEAMS
from .._teams import is_integer
from ._tier import stream_of, tier_of

_THREADS = 256
#: the simulator runs every thread as a Python thread: a warp's worth does the
#: same work there, many times faster
_SIM_THREADS = 32
#: bytes of each member's part one block moves; the grid has at most _MAX_BLOCKS
_CHUNK_BYTES = 64 << 10
_MAX_BLOCKS = 1024
#: the block of a reduction in lines: one thread to an element at the largest
#: part of 4-byte numbers would be 1024; half of that leaves each thread two
_LINE_THREADS = 512


def _grid(nelems, itemsize):
    """Blocks, and elements per block (a whole number of 16-byte vectors)."""
    vector = max(1, 16 // itemsize)
    per_block = max(vector, _CHUNK_BYTES // itemsize // vector * vector)
    blocks = -(-nelems // per_block)
    if blocks > _MAX_BLOCKS:
        blocks = _MAX_BLOCKS
        per_block = -(-nelems // blocks // vector) * vector
    return max(1, blocks), per_block


def _checked(tier, plan, dest, source, nelems, root, members):
    """The Targets of dest and source, once every argument is right for
    ``plan``'s collective, and whether they are the same array (a reduction in
    place)."""
    name = plan.name

    def fail(message):
        raise ShmemUsageError(f"shmem.{name}: {message}")

    if not is_integer(nelems) or nelems < 0:
        fail(f"nelems must be an int >= 0, got {nelems!r}")
    dest_t = tier.targets.symmetric(plan.dest_name, "dest", dest)
    if plan.reduce_op is not None:  # members read each other's source
        source_t = tier.targets.symmetric(plan.source_name, "source", source)
    else:
        source_t = tier.targets.local(name, "source", source)
        if source_t.host and tier.runtime.backend == "cuda":  # kernels read it
            fail("source is a numpy array; on the GPU pass a device array (numba, CuPy or "
                 "PyTorch), e.g. numba.cuda.to_device(source)")
    if dest_t.dtype != source_t.dtype:
        fail(f"dest and source must have the same dtype, got {dest_t.dtype} and "
             f"{source_t.dtype}")
    if plan.reduce_op in api.INT_ONLY_OPS and source_t.dtype.kind == "f":
        fail(f"{plan.reduce_op} needs an integer dtype, got {source_t.dtype}")
    if root and not (is_integer(root[0]) and 0 <= root[0] < len(members)):
        fail(f"root must be a PE of the team, an int or numpy integer from 0 to "
             f"{len(members) - 1}, got {root[0]!r}; pass the team number of the PE whose "
             "source is sent")
    start_d, start_s = dest_t.address, source_t.address
    if start_d < start_s + source_t.nbytes and start_s < start_d + dest_t.nbytes and not (
            start_d == start_s and not plan.gathers):
        fail("dest and source overlap; pass separate arrays" + (
            "" if plan.gathers else " or the same array (in place)"))
    many = len(members) * nelems
    for arg, target, needed in (("dest", dest_t, many if plan.gathers else nelems),
                                ("source", source_t, many if plan.scatters else nelems)):
        if target.size < needed:
            fail(f"{arg} holds {target.size} elements but needs {needed} for nelems={nelems} "
                 f"on {len(members)} PEs; pass a larger {arg} or a smaller nelems")
    return dest_t, source_t, start_d == start_s


def _agree(runtime, team, members, name, dtype, nelems, root):
    """Debug mode: every member makes the same call (the collective, nelems,
    dtype, root), or every member gets an error naming the two calls. Without
    it, mismatched calls drift the team's barrier counts: wrong data or a hang."""
    call = [name, int(nelems), str(np.dtype(dtype)), int(root[0]) if root else None]
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


class _Plan:
    """What a host collective does, worked out once per collective: its name, the
    block form, and for a reduction its op and whether it scatters."""

    def __init__(self, block_name):
        self.block_name = block_name
        self.name = block_name[:-len("_block")]
        # what every call's checks name, made once (not formatted per call)
        self.qualified = f"shmem.{self.name}"
        self.dest_name, self.source_name = f"{self.name} (dest)", f"{self.name} (source)"
        kind = self.name.split("_")
        self.reduce_op = kind[0] if kind[-1] in ("reduce", "reducescatter") else None
        self.scatter = int(kind[-1] == "reducescatter")
        # dest holds every member's part; source holds a part for every member
        self.gathers = self.name in ("fcollect", "alltoall")
        self.scatters = self.name == "alltoall" or bool(self.scatter)


def _lines_launch(tier, plan, team, dtype):
    """(the prepared launch, its arguments up to dest) of ``plan``'s reduction in
    lines on ``team`` for ``dtype``, or None where it does not go in lines."""
    slots = tier.line_slots(team, dtype, 0)
    if slots is None:
        return None
    kernel = tier.prepared(tier.kernels.line_reduce_kernel(plan.reduce_op, dtype.itemsize // 4),
                           "lines", dtype)
    tier.lined.add(team)
    return kernel.launch, (team, *tier.team_row(team), *tier.state(), *slots, *tier.departed())


def _run_gpu(tier, plan, team, size, dest, source, nelems, root, in_place, stream):
    """Enqueue the collective on the GPU through prepared launches (``size``:
    the team's)."""
    kernels = tier.kernels
    dtype = source.dtype
    if plan.reduce_op is not None and nelems * dtype.itemsize <= LINE_BYTES:
        # (made once per team and dtype: the launch and its leading arguments)
        lines = tier.lines.get((plan, team, dtype), False)
        if lines is False:
            lines = tier.lines[plan, team, dtype] = _lines_launch(tier, plan, team, dtype)
        if lines is not None:
            launch, leading = lines
            launch(1, _LINE_THREADS, stream, *leading, dest.address, dest.size, source.address,
                   source.size, nelems, plan.scatter)
            return
    blocks, per_block = _grid(nelems, dtype.itemsize)
    # members on other nodes: a reduction goes in the block form, whose gets
    # reach them through the proxy (the grid form reads peers' memory)
    far = tier.runtime.proxy is not None and plan.reduce_op is not None
    if (blocks == 1 and not in_place) or far:  # one block: one launch
        kernel = tier.prepared(kernels.block_kernel(plan.block_name),
                               "block_root" if root else "block", dtype)
        # in place, into scratch first (the block form's closing barrier:
        # every member has read this source)
        out = (tier.scratch(team, nelems, dtype, stream, plan.name), max(nelems, 1)) \
            if in_place else (dest.address, dest.size)
        threads = _THREADS
        if plan.name == "alltoall":  # a thread for each 16-byte vector of every part
            vectors = size * nelems * dtype.itemsize // 16
            threads = min(kernel.max_threads // 32 * 32, max(_THREADS, -(-vectors // 32) * 32))
        kernel.launch(1, threads, stream, team, *out, source.address, source.size, nelems,
                      *root)
        if in_place and nelems:
            tier.enqueue.copy(dest.address, out[0], nelems * dtype.itemsize, stream)
        return
    row = tier.team_row(team)
    if plan.reduce_op is None:
        if team in tier.lined:  # (else no reduction in lines can have set the flag)
            tier.prepared(kernels.settle, "settle").launch(1, 1, stream, team, *tier.state())
        tier.prepared(kernels.spread, "spread", dtype).launch(
            blocks, _THREADS, stream, *row, dest.address, dest.size, source.address,
            source.size, nelems, kernels.SPREAD[plan.name], root[0] if root else 0, per_block)
    else:
        # in place, this member's result would overwrite its source while the others
        # still read it: reduce into scratch, wait for every member, then copy
        out = (tier.scratch(team, nelems, dtype, stream, plan.name), max(nelems, 1)) \
            if in_place else (dest.address, dest.size)
        tier.prepared(kernels.team_sync, "team").launch(1, 1, stream, team)
        tier.prepared(kernels.reduce_kernel(plan.reduce_op), "reduce", dtype).launch(
            blocks, _THREADS, stream, *row, *out, source.address, source.size, nelems,
            plan.scatter)
        if in_place and nelems:
            tier.prepared(kernels.team_sync, "team").launch(1, 1, stream, team)
            tier.enqueue.copy(dest.address, out[0], nelems * dtype.itemsize, stream)
    tier.prepared(kernels.team_barrier, "team").launch(1, 1, stream, team)


def _run_sim(tier, plan, team, dest, source, nelems, root, in_place):
    """The same kernels on the simulator, launched through numba (at once)."""
    from numba import cuda

    kernels = tier.kernels
    dest, source = dest.reshape(dest.size), source.reshape(source.size)
    slots = None if plan.reduce_op is None else tier.line_slots(team, source.dtype, nelems)
    if slots is not None:
        tier.lined.add(team)
        row = cuda.to_device(tier.runtime.teams.row(team))
        kernels.line_reduce_kernel(plan.reduce_op, source.dtype.itemsize // 4)[
            1, _SIM_THREADS, 0](team, row, tier.state(), slots, tier.departed(), dest, source,
                                nelems, plan.scatter)
        return
    if tier.runtime.proxy is not None:
        # members on other nodes: the block form, whose puts and gets reach them
        # through the proxy; in place, into a private array first (the block
        # form's closing barrier: every member has read this source)
        out = cuda.device_array(max(1, nelems), dest.dtype) if in_place else dest
        kernels.block_kernel(plan.block_name)[1, _SIM_THREADS, 0](team, out, source, nelems,
                                                                  *root[:1])
        if in_place and nelems:
            dest[:nelems].copy_to_device(out[:nelems])
        return
    row = cuda.to_device(tier.runtime.teams.row(team))  # the simulator has no device table
    blocks, per_block = _grid(nelems, source.dtype.itemsize)
    threads = _SIM_THREADS
    if plan.reduce_op is None:
        if team in tier.lined:
            kernels.settle[1, 1, 0](team, tier.state())
        kernels.spread[blocks, threads, 0](row, dest, source, nelems, kernels.SPREAD[plan.name],
                                           root[0] if root else 0, per_block)
    else:
        out = cuda.device_array(max(1, nelems), dest.dtype) if in_place else dest
        kernels.team_sync[1, 1, 0](team)
        kernels.reduce_kernel(plan.reduce_op)[blocks, threads, 0](
            row, out, source, nelems, plan.scatter)
        if in_place and nelems:
            kernels.team_sync[1, 1, 0](team)
            dest[:nelems].copy_to_device(out[:nelems])
    kernels.team_barrier[1, 1, 0](team)


def _make(block_name):
    plan = _Plan(block_name)
    name = plan.name

    def run(team, dest, source, nelems, root, stream):
        in_kernel = api.simulated(name)
        if in_kernel is not None:  # the thread form, in a kernel on the simulator
            return in_kernel(team, dest, source, nelems, *root)
        runtime, tier = tier_of(name)
        handle = stream_of(runtime, stream, name)
        members = runtime.teams.get(team, plan.qualified)
        dest_t, source_t, in_place = _checked(tier, plan, dest, source, nelems, root, members)
        if runtime.config.debug:
            _agree(runtime, team, members, name, source_t.dtype, nelems, root)
        if runtime.backend == "sim":
            _run_sim(tier, plan, team, dest, source, nelems, root, in_place)
        else:
            _run_gpu(tier, plan, int(team), len(members), dest_t, source_t, int(nelems),
                     tuple(int(r) for r in root), in_place, handle)

    # the documented signature is the real one: keywords by these names, and a
    # stray argument is a TypeError naming the collective
    if name == "broadcast":
        def collective(team, dest, source, nelems, root, *, stream=0):
            run(team, dest, source, nelems, (root,), stream)
    else:
        def collective(team, dest, source, nelems, *, stream=0):
            run(team, dest, source, nelems, (), stream)

    collective.__name__ = collective.__qualname__ = name
    collective.__module__ = "numba_shmem"
    order = api.collective_order(block_name) + " Ends with ``barrier(team)``: complete on " \
        "every member when the stream is."
    if plan.reduce_op is not None:
        order += (f" A reduction in lines (at most {LINE_BYTES} bytes per member of 4- or 8-byte "
                  f"numbers, a team handle below {LINE_TEAMS}, a job on one node) synchronizes "
                  "nothing: members send their parts into each other's slots, not ``dest``; it "
                  "is complete on this member when the stream is (``dest`` written, ``source`` "
                  "free), while another member may still be writing its own ``dest``.")
    collective.__doc__ = (f"Host. Collective over ``team``: what ``{block_name}`` does, "
                          "enqueued on ``stream`` (one block, or a grid of many blocks, moves "
                          f"the data). {api.COLLECTIVE_KINDS[name][1]} {order} In a kernel: "
                          f"{api.collective_doc(name)}")
    return collective


#: kind -> its host function, which is also its thread form in kernels
HOST_COLLECTIVES = {kind: _make(f"{kind}_block") for kind in api.COLLECTIVE_KINDS}
