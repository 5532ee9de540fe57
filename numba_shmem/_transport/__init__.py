"""How one PE reaches another.

PEs of the same node reach each other directly: each maps the others' heaps
(``peer_view``; on the GPU, loads and stores through the peer table). PEs on
other nodes are reached through the proxy (``_proxy``): requests over MPI,
applied by the target PE's proxy to its heap (``_sim`` for the simulator's,
``_cuda/_target.py`` for the GPU's). On the GPU, kernels post their requests
into a ring in mapped host memory (``_ring``) that the proxy drains.
"""

from .._arrays import checked_pe


def far_pes(bootstrap):
    """The PEs that are not on this PE's node."""
    return [pe for pe in range(bootstrap.size) if pe not in bootstrap.local_peers]


def check_reachable(runtime):
    """Before the backend starts: a usage error if this job spans nodes and was
    not started by MPI (which carries the traffic between nodes)."""
    bootstrap = runtime.bootstrap
    if far_pes(bootstrap) and not hasattr(bootstrap, "communicator"):
        from .._errors import ShmemUsageError

        hosts = len(set(bootstrap.nodes))
        raise ShmemUsageError(
            f"PE {bootstrap.rank}: this job spans {hosts} nodes and was started through "
            f"{bootstrap.name}; PEs on other nodes are reached through MPI: start the job "
            "with mpirun or srun")


def start(runtime):
    """The proxy of a job that spans nodes, else None."""
    if not far_pes(runtime.bootstrap):
        return None
    if runtime.backend != "cuda":
        return sim_proxy(runtime)
    # on the GPU, for now, the proxy whose request path is Python (_proxy.py)
    from .._cuda._proxied import device_ring
    from .._cuda._target import GpuTarget
    from ._proxy import PIECE, Proxy

    device = device_ring(runtime)
    target = GpuTarget(runtime.heap.backend, PIECE)
    try:
        return Proxy(runtime.bootstrap, target, runtime.config.wait_timeout,
                     runtime.config.debug, device, runtime.stop_device_waits, busy_poll=0.01)
    except BaseException:
        target.close()
        raise


def sim_proxy(runtime, device=None):
    """The proxy of a PE on the simulator: the compiled request path
    (``_compiled``), applying requests to the simulator's heap; ``device``: a
    ring in the GPU ring's layout that threads post into (a test's)."""
    import os
    import sys

    from ._compiled import CompiledProxy

    # numba's simulator polls its kernel threads in a loop that holds the
    # interpreter lock: a kernel thread waiting for an answer would get it once
    # per switch interval (5 ms by default)
    sys.setswitchinterval(min(sys.getswitchinterval(), 1e-4))
    backend = runtime.heap.backend
    lockfd = backend.lock_descriptor()
    try:
        return CompiledProxy(runtime.bootstrap, backend.own_heap(), backend.extent_word,
                             lockfd, runtime.config.wait_timeout, runtime.config.debug,
                             device=device)
    except BaseException:
        os.close(lockfd)
        raise


def proxy_for(runtime, pe, what):
    """The proxy when ``pe`` (checked: an int in range) is on another node, else
    None (the direct path)."""
    if runtime.proxy is None:
        return None
    pe = checked_pe(runtime, pe, what, direct=False)
    return None if pe in runtime.heap.backend.bases else runtime.proxy
