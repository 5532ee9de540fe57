"""What the benchmarks' drivers need of the machine they run on."""

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def require_gpu(benchmark, measures):
    """Exit with one line where there is no CUDA GPU: ``benchmark`` (its file
    name) measures ``measures`` on the GPU only."""
    from shmem_run import _gpus

    if _gpus.count() == 0:
        sys.exit(f"benchmarks/{benchmark}: measures {measures} on a GPU; this machine has no "
                 "CUDA GPU (the simulator has no GPU time to measure). Run it on a GPU machine")


def mps_daemon(jobdir, gpus=1):
    """A started MPS daemon (``jobdir`` its directory) for processes that will
    share one GPU, as shmem-run's would; None on the simulator, where the
    machine has not exactly ``gpus`` GPUs or no MPS, or under a daemon already
    running (CUDA_MPS_PIPE_DIRECTORY set). Its ``env`` goes to the processes;
    stop it with ``stop()``."""
    from shmem_run import _gpus
    from shmem_run._mps import MpsDaemon

    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" or _gpus.count() != gpus or \
            _gpus.mps_control() is None or "CUDA_MPS_PIPE_DIRECTORY" in os.environ:
        return None
    daemon = MpsDaemon(_gpus.mps_control(), jobdir)
    daemon.start()
    return daemon


def emulated_nodes(npes, node_size, command, mpiexec_args="--bind-to none", timeout=1800,
                   stderr=subprocess.PIPE):
    """Run ``command`` (a list, after the Python interpreter) as ``npes``
    ranks of ``mpiexec`` in emulated nodes of ``node_size`` PEs
    (NUMBA_SHMEM_NODE_SIZE); on one GPU they share it through a private MPS
    daemon, as shmem-run's PEs would. The finished process (its stdout
    captured; its stderr too, unless ``stderr`` is None: then the ranks'
    stderr goes to ours as they write it)."""
    mpiexec = shutil.which("mpiexec") or str(Path(sys.executable).parent / "mpiexec")
    flags = ["--allow-run-as-root", "--oversubscribe"] if os.geteuid() == 0 else []
    env = dict(os.environ, NUMBA_SHMEM_NODE_SIZE=str(node_size), OMPI_MCA_plm_rsh_agent="false")
    argv = [mpiexec, *flags, *shlex.split(mpiexec_args), "-n", str(npes), sys.executable,
            *command]
    with tempfile.TemporaryDirectory() as jobdir:
        daemon = mps_daemon(jobdir)
        try:
            return subprocess.run(argv, stdout=subprocess.PIPE, stderr=stderr, text=True,
                                  timeout=timeout, env={**env, **(daemon.env if daemon else {})})
        finally:
            if daemon:
                daemon.stop()
