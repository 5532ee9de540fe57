"""Device barriers and collective_launch, through the launcher on both backends."""

import re

import pytest

from conftest import BACKEND, needs_gpu, python, shmem_run

ROUNDS = 10000 if BACKEND == "cuda" else 40  # the simulator's barrier is a rendezvous round trip


@pytest.mark.parametrize("npes", [2, 4])
def test_many_barriers_in_one_kernel_at_every_scope(npes):
    result = shmem_run(npes, "barriers.py", ROUNDS, timeout=240,
                       env={"NUMBA_SHMEM_WAIT_TIMEOUT": "120"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(result.stdout.splitlines()) == [
        f"PE {pe}: {ROUNDS} rounds of barriers at thread, block and warp scope ok"
        for pe in range(npes)]


def test_a_grid_that_cannot_be_resident_fails_on_every_pe():
    result = shmem_run(2, "barriers.py", "too_large")
    assert result.returncode == 0, result.stdout + result.stderr
    found = re.findall(r"^EXPECTED ShmemUsageError: (.*)$", result.stdout, re.MULTILINE)
    assert len(found) == 2
    for message in found:
        assert re.match(r"collective_launch: PE 0 asked for a grid of 1048576 blocks of 1024 "
                        r"threads, but at most \d+ can be resident at once on its (GPU|share "
                        r"of a GPU that 2 PEs share); pass griddim=0 for the largest grid",
                        message), message


@pytest.mark.parametrize("npes", [2, 4])
@pytest.mark.parametrize("sharedmem", [0, 40 << 10])
def test_the_largest_grid_is_resident_with_every_other_pes(npes, sharedmem):
    # on one GPU the PEs share its SMs (through MPS): each grid is its part
    result = shmem_run(npes, "residency.py", sharedmem, timeout=240,
                       env={"NUMBA_SHMEM_DEBUG": "1", "NUMBA_SHMEM_WAIT_TIMEOUT": "30"})
    assert result.returncode == 0, result.stdout + result.stderr
    lines = sorted(result.stdout.splitlines())
    assert len(lines) == npes, result.stdout
    for pe, line in enumerate(lines):
        assert re.fullmatch(rf"PE {pe}: 5 grids of \d+ blocks of 256 threads all resident "
                            r"with the other PEs'", line), line


def test_a_grid_keeps_its_shape():
    # the simulator keeps one block per PE resident; the GPU many more
    x, y = (2, 3) if BACKEND == "cuda" else (1, 1)
    result = shmem_run(2, "grid_shape.py", x, y)
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(result.stdout.splitlines()) == [
        f"PE {pe}: launched ({x}, {y}), gridDim ({x}, {y})" for pe in range(2)]


@needs_gpu
def test_a_block_that_does_not_fit_at_all_is_an_error():
    # 64 KiB of dynamic shared memory needs an opt-in numba does not make: no block fits
    result = python("launch_errors.py", 0, 256, 64 << 10)
    assert result.returncode == 0, result.stdout + result.stderr
    assert ("EXPECTED ShmemUsageError: collective_launch: on PE 0 not one block of 256 threads "
            "can be resident on its GPU; use fewer threads or less shared memory"
            in result.stdout), result.stdout


def test_barrier_ptx_releases_acquires_and_backs_off():
    result = python("ptx_barrier.py", env={"NUMBA_SHMEM_BACKEND": "cuda"})
    assert result.returncode == 0, result.stderr
    ptx = result.stdout
    for instruction in ("fence.sc.sys", "fence.acq_rel.sys", "fence.sc.gpu", "fence.acq_rel.gpu",
                        "red.relaxed.sys.max.u64",
                        "ld.acquire.sys.b64", "nanosleep.u32", "bar.sync", "bar.warp.sync"):
        assert instruction in ptx, instruction
    # one fence, then relaxed publishes (before: a release on every member's slot)
    assert "red.release" not in ptx
    # (the likely, one-GPU path is laid out in line; fence.sc.sys is branched to)
    assert ptx.index("fence.sc.gpu") < ptx.index("red.relaxed.sys.max.u64")
    # the epoch's atomic is issued before the fence: their round trips overlap
    assert ptx.index("atom.relaxed.gpu.add.u64") < ptx.index("fence.sc.gpu")
    # the epoch: one atomic step (before: a load and a store, which two streams'
    # barriers on one team could interleave)
    assert "atom.relaxed.gpu.add.u64" in ptx


@pytest.mark.parametrize("griddim,blockdim,message", [
    ("many", 32, "griddim must be an int or a tuple of ints, got 'many'"),
    (1, 0, "blockdim must be positive, got 0"),
])
def test_bad_launch_shapes(griddim, blockdim, message):
    result = python("launch_errors.py", griddim, blockdim)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"EXPECTED ShmemUsageError: collective_launch: {message}" in result.stdout


@pytest.mark.parametrize("npes", [2, 4])
def test_teams_split_query_translate_barrier_and_destroy(npes):
    result = shmem_run(npes, "teams.py", 1000 if BACKEND == "cuda" else 20, timeout=240,
                       env={"NUMBA_SHMEM_WAIT_TIMEOUT": "120"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(result.stdout.splitlines()) == [f"PE {pe}: teams ok" for pe in range(npes)]


def test_team_functions_compile_to_table_lookups():
    result = python("ptx_barrier.py", "teams", env={"NUMBA_SHMEM_BACKEND": "cuda"})
    assert result.returncode == 0, result.stderr
    assert "ld.acquire.sys.b64" in result.stdout and "red.relaxed.sys.max.u64" in result.stdout
