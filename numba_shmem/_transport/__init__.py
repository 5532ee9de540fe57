"""How one PE reaches another.

PEs of the same node reach each other directly: each maps the others' heaps
(``peer_view``; on the GPU, loads and stores through the peer table). PEs on
other nodes are reached through the proxy: requests over MPI, applied by the
target PE's proxy to its heap (the compiled request path: ``_compiled``, the
host's side, and ``_engine``, the loop; on the GPU ``_cuda/_target.py`` applies
requests to the GPU's heap). On the GPU, kernels post their requests into a
ring in mapped host memory (``_ring``) that the proxy drains. This layer
imports neither backend: ``_runtime`` starts the proxy with what the backend
provides.
"""

from .._teams import checked_pe


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


def proxy_for(runtime, pe, what):
    """The proxy when ``pe`` (checked: an int in range) is on another node, else
    None (the direct path)."""
    if runtime.proxy is None:
        return None
    pe = checked_pe(runtime, pe, what, direct=False)
    return None if pe in runtime.heap.backend.bases else runtime.proxy
