"""The on-stream functions (put_signal, signal_op, signal_wait_until, quiet,
barrier(team, stream=)) through the real launcher; graph capture and replay on
the GPU."""

import pytest

from conftest import BACKEND, needs_gpu, shmem_run

ROUNDS = 1000 if BACKEND == "cuda" else 8


@pytest.mark.parametrize("npes", [2, 3])
def test_a_ring_of_signalled_puts_sees_every_block(npes):
    result = shmem_run(npes, "on_stream.py", ROUNDS, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(result.stdout.splitlines()) == [
        f"PE {pe}: on-stream ok ({ROUNDS} rounds, 0 errors, flag {7 + (pe - 1) % npes})"
        for pe in range(npes)]


def test_bad_arguments_are_refused_before_anything_is_enqueued():
    result = shmem_run(2, "on_stream.py", 2, "errors", timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    expected = sorted({line for line in lines if line.startswith("EXPECTED")})
    assert "NO ERROR" not in lines
    assert expected == sorted([
        "EXPECTED shmem.barrier: team=12 is not a team of this PE (destroyed, or this PE is "
        "not a member)",
        "EXPECTED shmem.put_signal: pe=2 is out of range for 2 PEs (0..1)",
        "EXPECTED shmem.put_signal: sig must be a uint64 symmetric array of at least one "
        "element, got 1 of int64",
        "EXPECTED shmem.put_signal: sig_op=7 is not shmem.SIGNAL_SET or shmem.SIGNAL_ADD",
        "EXPECTED shmem.put_signal: stream='fast' is not a CUDA stream; pass a numba stream, a "
        "CUstream handle (an int, 0 for the default stream), or a CuPy, PyTorch or cuda.core "
        "stream",
        "EXPECTED shmem.put_signal: value must be an int from 0 to 2**64 - 1 (a uint64), got -1",
        "EXPECTED shmem.quiet: stream=-3 is not a CUDA stream; pass a numba stream, a CUstream "
        "handle (an int, 0 for the default stream), or a CuPy, PyTorch or cuda.core stream",
        "EXPECTED shmem.signal_op: value must be an int from 0 to 2**64 - 1 (a uint64), got 1.5",
        "EXPECTED shmem.signal_wait_until: cmp=9 is not one of shmem.CMP_EQ, CMP_NE, CMP_GT, "
        "CMP_LE, CMP_LT, CMP_GE",
        "EXPECTED shmem.signal_wait_until: sig must be a uint64 symmetric array of at least one "
        "element, got 1 of int64"])
    assert len([line for line in lines if line.startswith("EXPECTED")]) == 2 * len(expected)
    assert sum(" on-stream ok " in line for line in lines) == 2  # the job went on


@pytest.mark.long
@needs_gpu
def test_graphs_of_every_on_stream_call_and_collective_replay_right():
    """Captured by cuda.bindings (global mode: an allocation or a synchronization in
    the captured path is an error), cuda.core and torch.cuda.graph where installed,
    each replayed 1,000 times with the data checked on the GPU every replay."""
    result = shmem_run(2, "on_stream.py", 10, "graphs", 1000, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    graphs = sorted(line for line in lines if " graph " in line)
    assert graphs and all(line.endswith("ok (1000 replays)") for line in graphs), lines
    assert sum("graph cuda.bindings ok" in line for line in graphs) == 2, lines
    refused = [line for line in lines if line.startswith("EXPECTED")]
    assert len(refused) == 2 and all(
        "an in-place reduction of 4800 bytes on team 0 needs a scratch buffer, which cannot be "
        "allocated while the stream is captured" in line for line in refused), lines


@pytest.mark.parametrize("sample,npes,args", [
    ("allgather_matmul.py", 2, ["--m", 64, "--k", 48, "--n", 32, "--chunks", 2]),
    ("allgather_matmul.py", 3, ["--m", 32, "--k", 40, "--n", 24, "--chunks", 4]),
    ("matmul_reducescatter.py", 2, ["--m", 64, "--k", 48, "--n", 32]),
    ("matmul_reducescatter.py", 4, ["--m", 32, "--k", 24, "--n", 40]),
])
def test_the_overlap_samples_match_numpy_fused_and_unfused(sample, npes, args):
    from conftest import ROOT

    result = shmem_run(npes, str(ROOT / "samples" / sample), *args, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = sorted(result.stdout.splitlines())
    assert len(lines) == 2 * npes and all(line.endswith("(ok)") for line in lines), lines
    assert sum(": fused: " in line for line in lines) == npes
