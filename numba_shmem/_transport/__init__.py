"""How one PE reaches another.

PEs of the same node reach each other directly: each maps the others' heaps
(``peer_view``; on the GPU, loads and stores through the peer table). PEs on
other nodes are reached through the proxy (``_proxy``): requests over MPI,
applied by the target PE's proxy to its heap (``_sim`` for the simulator's).
"""

from .._arrays import checked_pe


def far_pes(bootstrap):
    """The PEs that are not on this PE's node."""
    return [pe for pe in range(bootstrap.size) if pe not in bootstrap.local_peers]


def check_reachable(runtime):
    """Before the backend starts: a usage error if this job spans nodes and its
    backend has no proxy (the GPU, so far)."""
    far = far_pes(runtime.bootstrap)
    if far and runtime.backend == "cuda":
        from .._errors import ShmemUsageError

        bootstrap = runtime.bootstrap
        nodes = getattr(bootstrap, "nodes", None) or ["?"] * bootstrap.size
        raise ShmemUsageError(
            f"PE {bootstrap.rank} (on node {nodes[bootstrap.rank]}) cannot reach PE {far[0]} "
            f"(on node {nodes[far[0]]}): on the GPU numba-shmem reaches only the PEs of one "
            "node for now (the simulator reaches every node, through the proxy); start every "
            "PE on one node (mpirun -n N on one host, or shmem-run -n N)")


def start(runtime):
    """The proxy of a job that spans nodes (on the simulator), else None."""
    if not far_pes(runtime.bootstrap):
        return None
    from .._errors import ShmemUsageError

    bootstrap = runtime.bootstrap
    if not hasattr(bootstrap, "communicator"):
        raise ShmemUsageError(
            f"PE {bootstrap.rank}: PEs on other nodes are reached through MPI; start the job "
            "with mpirun or srun")
    import sys

    from ._proxy import Proxy
    from ._sim import SimTarget

    # numba's simulator polls its kernel threads in a loop that holds the
    # interpreter lock: the proxy thread would get it once per switch interval
    # (5 ms by default), each hop of a round trip (18 ms against 1.8 ms at 0.1 ms)
    sys.setswitchinterval(min(sys.getswitchinterval(), 1e-4))
    return Proxy(bootstrap, SimTarget(runtime.heap.backend, bootstrap.rank),
                 runtime.config.wait_timeout, runtime.config.debug)


def proxy_for(runtime, pe, what):
    """The proxy when ``pe`` (checked: an int in range) is on another node, else
    None (the direct path)."""
    if runtime.proxy is None:
        return None
    pe = checked_pe(runtime, pe, what, direct=False)
    return None if pe in runtime.heap.backend.bases else runtime.proxy
