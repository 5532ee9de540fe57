"""The benchmarks' drivers where they cannot measure: a GPU-only benchmark on a
machine without a GPU says so in one line and exits, at once."""

import sys

import pytest

from conftest import BACKEND, ROOT, run_hard

GPU_ONLY = ("rma", "collectives", "stream", "overlap", "residency", "target_paths", "ring_steps")


@pytest.mark.skipif(BACKEND != "sim", reason="this machine has a GPU: they measure it")
@pytest.mark.parametrize("benchmark", GPU_ONLY)
def test_a_gpu_benchmark_without_a_gpu_says_so_in_one_line(benchmark):
    """Before: rma, collectives and stream failed in their PEs with an
    ImportError of the CUDA driver's binding; overlap printed nothing for 300 s."""
    result = run_hard([sys.executable, str(ROOT / "benchmarks" / f"{benchmark}.py")], 60)
    assert result.returncode == 1 and result.stdout == "", result.stdout + result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"benchmarks/{benchmark}.py: measures ") \
        and "this machine has no CUDA GPU" in lines[0], result.stderr
