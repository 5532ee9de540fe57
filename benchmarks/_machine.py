"""What the benchmarks' drivers need of the machine they run on."""

import sys


def require_gpu(benchmark, measures):
    """Exit with one line where there is no CUDA GPU: ``benchmark`` (its file
    name) measures ``measures`` on the GPU only."""
    from shmem_run import _gpus

    if _gpus.count() == 0:
        sys.exit(f"benchmarks/{benchmark}: measures {measures} on a GPU; this machine has no "
                 "CUDA GPU (the simulator has no GPU time to measure). Run it on a GPU machine")
