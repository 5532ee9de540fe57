"""What the benchmarks' drivers need of the machine they run on."""

import os
import sys


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
