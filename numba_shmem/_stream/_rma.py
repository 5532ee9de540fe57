"""The host forms of put, get, the signals, quiet and the barriers, on a stream.

``shmem.put_signal(dest, source, sig, value, sig_op, pe, stream=s)`` enqueues
on ``s`` and returns at once: the data goes on the copy engine, the signal
after it; ``signal_wait_until(sig, cmp, value, stream=s)`` holds ``s`` (and
only ``s``) until the signal compares true. Ordering and completion follow
NVSHMEM's ``*_on_stream`` functions: each operation starts once the stream's
earlier work is done, and the stream goes on once the operation is complete
at its target. Every call is one driver call on the GPU (a copy, a stream
memory operation or a prepared kernel launch), so it can be captured into a
CUDA graph. On the simulator the calls run at once, in call order.
"""

import numpy as np

from .. import _barriers, _device_api as api
from .._errors import ShmemUsageError
from .._teams import TEAM_WORLD
from ._tier import peer_base, stream_of, tier_of

_U64 = np.dtype(np.uint64)
#: a put_signal of at most this many bytes from device memory is one kernel (a
#: block copies, then signals: one driver call); a larger one goes on the copy
#: engine, then cuStreamWriteValue64 sets or a one-thread kernel adds
ONE_KERNEL_BYTES = 64 << 10
_SIGNAL_OPS = (api.SIGNAL_SET, api.SIGNAL_ADD)
_CMPS = {api.CMP_EQ: "CMP_EQ", api.CMP_NE: "CMP_NE", api.CMP_GT: "CMP_GT",
         api.CMP_LE: "CMP_LE", api.CMP_LT: "CMP_LT", api.CMP_GE: "CMP_GE"}


def _check_sizes(name, count, room):
    """``count`` elements of the local array against the ``room`` of the remote one."""
    if count <= room:
        return
    if name == "get":
        raise ShmemUsageError(f"shmem.get: dest asks for {count} elements but the source holds "
                              f"{room}; pass a smaller dest or a larger source")
    raise ShmemUsageError(f"shmem.{name}: the source's {count} elements do not fit in the "
                          f"{room} of dest; pass a smaller source or a larger dest")


def _sim_view(runtime, target, pe):
    """PE ``pe``'s copy of a symmetric Target, as numpy (simulator)."""
    from .._sim._heap import host_array

    return host_array(runtime.heap.backend.view(pe, target.offset, (target.size,), target.dtype))


def _put_targets(runtime, tier, name, dest, source, pe):
    """The checked sides of a put: (remote Target, local Target, PE ``pe``'s heap,
    the source as it is read)."""
    remote = tier.targets.symmetric(name, "dest", dest)
    base = peer_base(runtime, pe, name)
    if isinstance(source, np.ndarray) and not source.flags.c_contiguous:
        source = np.ascontiguousarray(source)  # a strided numpy source is read as it is
    local = tier.targets.local(name, "source", source, remote)
    _check_sizes(name, local.size, remote.size)
    return remote, local, base, source


def _put_data(runtime, tier, put, pe, handle):
    """The copy of put and put_signal (``put``: what _put_targets returned)."""
    remote, local, base, source = put
    if runtime.backend == "sim":
        from .._sim._heap import host_array

        data = (source if local.host else host_array(source)).reshape(local.size)
        if base is None:  # another node: staged into the proxy's request
            runtime.proxy.put(pe, remote.offset, data, "shmem.put")
        else:
            _sim_view(runtime, remote, pe)[:local.size] = data
        return
    if base is None:  # another node: after the stream's work, staged through the proxy
        runtime.proxy.put(pe, remote.offset, _from_stream(tier, local, source, handle),
                          "shmem.put", owned=not local.host)  # (a device array's: a copy)
        return
    tier.enqueue.copy(base + remote.offset, local.address, local.nbytes, handle,
                      "from" if local.host else None)


def _from_stream(tier, local, source, handle):
    """On the GPU, toward a PE on another node: the data of ``source`` once
    ``handle``'s earlier work is done, in host memory (uint8)."""
    tier.enqueue.synchronize(handle)
    if local.host:
        return np.ascontiguousarray(source).reshape(-1).view(np.uint8)
    data = _pinned(local.nbytes)
    tier.enqueue.copy(data.ctypes.data, local.address, local.nbytes, handle, "to")
    tier.enqueue.synchronize(handle)
    return data


def _pinned(nbytes):
    """Pinned host memory for a copy toward or from another node's data, as
    the proxy's own copies: never pageable, which the driver stages."""
    from numba import cuda

    return np.asarray(cuda.pinned_array(max(nbytes, 1), np.uint8))[:nbytes]


def put(dest, source, pe, *, stream=0):
    """Host. Copy ``source`` (a numpy or device array of dest's dtype) into
    ``dest`` (symmetric) on PE ``pe``, in the order of ``stream``; complete when
    the stream is. A device ``source`` goes on the copy engine."""
    runtime, tier = tier_of("put")
    handle = stream_of(runtime, stream, "put")
    _put_data(runtime, tier, _put_targets(runtime, tier, "put", dest, source, pe), pe, handle)


def get(dest, source, pe, *, stream=0):
    """Host. Copy PE ``pe``'s copy of ``source`` (symmetric) into ``dest`` (a
    numpy or device array of source's dtype), in the order of ``stream``;
    complete when the stream is. Into host memory the call returns once the
    data is there (a strided numpy ``dest`` is filled after the copy)."""
    runtime, tier = tier_of("get")
    handle = stream_of(runtime, stream, "get")
    remote = tier.targets.symmetric("get", "source", source)
    base = peer_base(runtime, pe, "get")
    strided = isinstance(dest, np.ndarray) and not dest.flags.c_contiguous
    into = np.empty(dest.shape, dest.dtype) if strided else dest
    local = tier.targets.local("get", "dest", into, remote)
    _check_sizes("get", local.size, remote.size)
    if runtime.backend == "sim":
        from .._sim._heap import host_array

        if base is None:  # another node
            data = runtime.proxy.get(pe, remote.offset, local.nbytes, "shmem.get").view(
                remote.dtype)
        else:
            data = _sim_view(runtime, remote, pe)[:local.size]
        (into if local.host else host_array(into)).reshape(local.size)[:] = data
    elif base is None:  # another node: after the stream's work, through the proxy
        tier.enqueue.synchronize(handle)
        data = runtime.proxy.get(pe, remote.offset, local.nbytes, "shmem.get")
        if local.host:
            into.reshape(-1).view(np.uint8)[:] = data
        else:
            staged = _pinned(local.nbytes)
            staged[:] = data
            tier.enqueue.copy(local.address, staged.ctypes.data, local.nbytes, handle, "from")
            tier.enqueue.synchronize(handle)
    else:
        tier.enqueue.copy(local.address, base + remote.offset, local.nbytes, handle,
                          "to" if local.host else None)
        if local.host:
            tier.enqueue.synchronize(handle)  # host memory is read right after the call
    if strided:
        dest[...] = into


def _signal_target(runtime, tier, name, sig):
    target = tier.targets.symmetric(name, "sig", sig)
    if target.dtype != _U64 or target.size == 0:
        raise ShmemUsageError(f"shmem.{name}: sig must be a uint64 symmetric array of at least "
                              f"one element, got {target.size} of {target.dtype}")
    return target


def _signal_value(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or \
            not 0 <= int(value) < 1 << 64:
        raise ShmemUsageError(f"shmem.{name}: value must be an int from 0 to 2**64 - 1 (a "
                              f"uint64), got {value!r}")
    return int(value)


def _signal_checked(runtime, tier, name, sig, value, sig_op, pe):
    """The signal's Target, the value and PE ``pe``'s heap, once all are right."""
    target = _signal_target(runtime, tier, name, sig)
    value = _signal_value(name, value)
    if sig_op not in _SIGNAL_OPS or isinstance(sig_op, bool):
        raise ShmemUsageError(f"shmem.{name}: sig_op={sig_op!r} is not shmem.SIGNAL_SET or "
                              "shmem.SIGNAL_ADD")
    return target, value, peer_base(runtime, pe, name)


def _signal(runtime, tier, name, checked, sig, sig_op, pe, handle):
    """Update ``sig[0]`` on PE ``pe`` by ``sig_op`` once the stream's earlier work is done."""
    target, value, base = checked
    if runtime.backend == "sim":
        from .._sim import _device

        _device._signal(sig, value, sig_op, pe, name)
        return
    if base is None and sig_op == api.SIGNAL_SET:  # another node: after the stream's work
        tier.enqueue.synchronize(handle)
        runtime.proxy.signal(pe, target.offset, sig_op, value, f"shmem.{name}")
        return
    if sig_op == api.SIGNAL_SET:
        tier.enqueue.write_value(base + target.offset, value, handle)
    else:  # no stream memory operation adds: one thread does
        tier.prepared(tier.kernels.signal_add, "signal_add").launch(
            1, 1, handle, target.address, target.size, value, pe)


def put_signal(dest, source, sig, value, sig_op, pe, *, stream=0):
    """Host. On ``stream``: copy ``source`` into ``dest`` on PE ``pe`` (on the
    copy engine; one of at most ONE_KERNEL_BYTES from device memory in one
    kernel with its signal), then update ``sig`` there by ``sig_op``
    with ``value``; whoever sees the signal sees the data. Returns at once."""
    runtime, tier = tier_of("put_signal")
    handle = stream_of(runtime, stream, "put_signal")
    checked = _signal_checked(runtime, tier, "put_signal", sig, value, sig_op, pe)
    put = _put_targets(runtime, tier, "put_signal", dest, source, pe)
    remote, local = put[:2]
    if runtime.backend == "cuda" and not local.host and local.nbytes <= ONE_KERNEL_BYTES:
        # a small put and its signal are one kernel: one driver call, not two
        target, value = checked[:2]
        tier.prepared(tier.kernels.put_signal, "put_signal").launch(
            1, 256, handle, remote.address, local.nbytes, local.address, local.nbytes,
            target.address, target.size, value, sig_op, pe)
        return
    _put_data(runtime, tier, put, pe, handle)
    _signal(runtime, tier, "put_signal", checked, sig, sig_op, pe, handle)


def signal_op(sig, value, sig_op, pe, *, stream=0):
    """Host. On ``stream``: update ``sig[0]`` on PE ``pe`` by ``sig_op``
    (SIGNAL_SET or SIGNAL_ADD) with ``value``, once the stream's earlier work
    (puts included) is complete. Returns at once."""
    runtime, tier = tier_of("signal_op")
    handle = stream_of(runtime, stream, "signal_op")
    checked = _signal_checked(runtime, tier, "signal_op", sig, value, sig_op, pe)
    _signal(runtime, tier, "signal_op", checked, sig, sig_op, pe, handle)


def signal_wait_until(sig, cmp, value, *, stream=0):
    """Host. Hold ``stream`` until this PE's ``sig[0]`` compares ``cmp`` to
    ``value``; the work enqueued after it sees the data put with the signal.
    Returns at once (the host does not wait). CMP_EQ, and CMP_NE / CMP_GT
    against 0, are a stream memory operation; the other comparisons (and every
    comparison with NUMBA_SHMEM_DEBUG=1, whose time-out names the signal, or
    in a job that spans nodes) a one-thread kernel."""
    runtime, tier = tier_of("signal_wait_until")
    handle = stream_of(runtime, stream, "signal_wait_until")
    target = _signal_target(runtime, tier, "signal_wait_until", sig)
    value = _signal_value("signal_wait_until", value)
    if cmp not in _CMPS or isinstance(cmp, bool):
        raise ShmemUsageError(f"shmem.signal_wait_until: cmp={cmp!r} is not one of "
                              f"shmem.{', '.join(_CMPS.values())}")
    if runtime.backend == "sim":
        from .._sim import _device

        _device.signal_wait_until(sig, cmp, value)
        return
    # (in a job that spans nodes, never a stream memory wait: a hang on an H200
    # was first read as the proxy's copy not completing while such waits were
    # pending; its cause was a module load blocking the proxy's context, fixed
    # by a context of its own, and the memory waits were not tried again)
    if not runtime.config.debug and runtime.proxy is None:
        if cmp == api.CMP_EQ:
            return tier.enqueue.wait_value(target.address, value, handle)
        if value == 0 and cmp in (api.CMP_NE, api.CMP_GT):
            return tier.enqueue.wait_value(target.address, 0, handle, nonzero=True)
    tier.prepared(tier.kernels.signal_wait, "signal_wait").launch(
        1, 1, handle, target.address, target.size, cmp, value)


def quiet(*, stream=0):
    """Host. Enqueue on ``stream`` a quiet: the puts, signals and atomics this
    PE issued before it (on the stream, and from kernels that ran before it)
    are complete at their targets before the stream goes on. Returns at once,
    except in a job that spans nodes: there it first waits until this PE's
    host calls toward other nodes are complete (they left after the stream's
    earlier work)."""
    runtime, tier = tier_of("quiet")
    handle = stream_of(runtime, stream, "quiet")
    if runtime.proxy is not None:
        # a direct put is complete when it returns; the host's requests toward
        # other nodes are waited for here, the GPU's ring by the quiet kernel
        runtime.proxy.quiet("shmem.quiet", device=runtime.backend == "sim")
    if runtime.backend != "sim":
        tier.prepared(tier.kernels.quiet, "none").launch(1, 1, handle)


def barrier_on_stream(team, stream, name):
    """Enqueue ``barrier(team)`` on ``stream`` (``shmem.<name>``)."""
    runtime, tier = tier_of(name)
    handle = stream_of(runtime, stream, name)
    runtime.teams.get(team, f"shmem.{name}")  # a team of this PE
    if runtime.backend == "sim":  # one block, run at once
        tier.kernels.team_barrier[1, 1, 0](team)
    else:
        tier.prepared(tier.kernels.team_barrier, "team").launch(1, 1, handle, int(team))


def barrier_all_on_stream(stream=0):
    """Collective over all PEs. Host. Enqueue on ``stream`` a barrier that
    completes the puts issued before it and waits for every PE."""
    barrier_on_stream(TEAM_WORLD, stream, "barrier_all_on_stream")


_barriers.enqueue_with(barrier_on_stream)
