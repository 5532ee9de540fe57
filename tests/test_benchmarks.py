"""The benchmarks' drivers where they cannot measure: a GPU-only benchmark on a
machine without a GPU says so in one line and exits, at once."""

import sys

import pytest

from conftest import BACKEND, ROOT, engine_compiled, mpi_missing, run_hard

GPU_ONLY = ("rma", "collectives", "stream", "overlap", "residency", "target_paths", "ring_steps",
            "target_batches")


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


@pytest.mark.nodes
def test_the_proxy_loops_benchmark_measures_without_a_gpu():
    """benchmarks/proxy_loop.py drives the compiled loop by hand on any machine
    (its p's checked where they landed) and prints its two figures."""
    if mpi_missing():
        pytest.skip(mpi_missing())
    engine_compiled()  # (loaded from numba's cache, not compiled beside the tests' jobs)
    result = run_hard([sys.executable, str(ROOT / "benchmarks" / "proxy_loop.py"),
                       "--rounds", "2"], 300)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 3 and lines[0].startswith("the proxy loop on "), result.stdout
    assert "taken from the ring (drain): best" in lines[1] and " ns, median " in lines[1]
    assert "whole time a p:" in lines[2] and lines[2].endswith(" us"), result.stdout


@pytest.mark.parametrize("max_bytes", ["0", "4095"])
def test_the_proxy_benchmark_refuses_a_max_bytes_below_its_first_size(max_bytes):
    """A --max-bytes below 4 KiB ran no size at all and the ranks then failed
    their own check of the puts; it is refused before any rank starts."""
    result = run_hard([sys.executable, str(ROOT / "benchmarks" / "proxy.py"),
                       "--max-bytes", max_bytes], 60)
    assert result.returncode == 2 and result.stdout == "", result.stdout + result.stderr
    assert "--max-bytes takes 4096 or more" in result.stderr \
        and f"(got {max_bytes})" in result.stderr, result.stderr


def test_the_compile_time_benchmark_measures_without_a_gpu(tmp_path):
    """benchmarks/compile_time.py compiles for sm_90 on any machine: a row a
    kernel, one node and spanning nodes, and every round in its JSON; a
    kernel it does not know, or no rounds, is refused."""
    import json

    result = run_hard([sys.executable, str(ROOT / "benchmarks" / "compile_time.py"), "--rounds",
                       "1", "--kernels", "plain,p_quiet", "--json", str(tmp_path / "c.json")], 300)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 4 and lines[0].startswith("compile time for sm_90 on "), result.stdout
    for line, name in zip(lines[2:], ("plain", "p_quiet")):
        cells = line.split()
        assert cells[0] == name and len(cells) == 5, line
        assert all(float(cell) > 0 for cell in (cells[1], cells[3])), line
    seconds = json.loads((tmp_path / "c.json").read_text())["seconds"]
    assert sorted(seconds) == ["p_quiet", "plain"]
    assert all(len(seconds[name][mode]) == 1 for name in seconds
               for mode in ("one_node", "spanning"))
    result = run_hard([sys.executable, str(ROOT / "benchmarks" / "compile_time.py"),
                       "--kernels", "p_quiet,put"], 60)
    assert result.returncode == 2 and "--kernels: unknown put; choose of plain, " in result.stderr
    result = run_hard([sys.executable, str(ROOT / "benchmarks" / "compile_time.py"),
                       "--rounds", "0"], 60)
    assert result.returncode == 2 and "--rounds: at least 1" in result.stderr, result.stderr
