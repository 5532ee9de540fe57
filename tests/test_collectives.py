"""Team collectives (block, warp and thread scope, host and device), against numpy, on both
backends; the samples built on them; their PTX."""

import re

import pytest

from conftest import needs_gpu, python, shmem_run


@pytest.mark.long
@pytest.mark.parametrize("npes,mode", [(2, "device"), (4, "device"), (2, "host"), (4, "host"),
                                       (2, "host_errors"), (4, "host_errors")])
def test_every_collective_on_the_world_and_on_a_subteam(npes, mode):
    result = shmem_run(npes, "collectives.py", mode, timeout=600,
                       env={"NUMBA_SHMEM_WAIT_TIMEOUT": "120"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(result.stdout.splitlines()) == [f"PE {pe}: collectives ok" for pe in range(npes)]


@pytest.fixture(scope="module")
def collectives_ptx(once_per_run):
    """ptx_collectives.py's output, compiled once in the run for the tests that read it."""
    def make():
        # (about 70 s alone on a 2-core machine, 117 s beside the other worker of CI)
        result = python("ptx_collectives.py", env={"NUMBA_SHMEM_BACKEND": "cuda"}, timeout=360)
        assert result.returncode == 0, result.stderr
        return result.stdout
    return once_per_run("collectives_ptx", make)


@pytest.mark.long
def test_collectives_compile_and_bitwise_reductions_need_integers(collectives_ptx):
    assert "compiled" in collectives_ptx
    assert "shmem.and_reduce_block: and needs an integer dtype, got float64" in collectives_ptx


def test_the_root_of_a_broadcast_loads_each_vector_once_for_every_member(collectives_ptx):
    """Where each thread has one 16-byte vector of the source, it loads it once
    and stores it to every member (LLVM unrolls the loop over members: one
    loaded pair, several stores); before, each member's copy loaded it again."""
    ptx = collectives_ptx.split("=== broadcast_block\n")[1].split("=== lines")[0]
    loaded = re.findall(r"ld\.v2\.u64\s+(\{%rd\d+, %rd\d+\})", ptx)
    stored = re.findall(r"st\.v2\.u64\s+\[%rd\d+\], (\{%rd\d+, %rd\d+\})", ptx)
    assert any(stored.count(pair) > 1 for pair in loaded), (loaded, stored)


@pytest.mark.parametrize("kernel,words", [("sum float64", 2), ("max int32", 1)])
def test_a_reduction_in_lines_stores_and_polls_at_system_scope(collectives_ptx, kernel, words):
    """Each word goes to a peer with st.relaxed.sys (the mark and the data in
    one 8-byte store: a reader sees both or neither) and is waited for with
    ld.acquire.sys in a loop (not one load hoisted out of it). No team
    synchronization, and one fence: membar.sys after a set is zeroed at the end
    of a cycle of marks."""
    ptx = collectives_ptx.split(f"=== lines {kernel}\n")[1].split("=== ")[0]
    stores = re.findall(r"st\.relaxed\.sys\.b64", ptx)
    # LLVM unrolls the loop over members: several stores of each word
    assert len(stores) >= words and len(stores) % words == 0, stores
    polls = re.findall(r"ld\.acquire\.sys\.b64", ptx)
    assert len(polls) >= 2 * words, polls  # the first poll and the loop's, for each word
    fences = re.findall(r"membar\.\S+|fence\.\S+", ptx)
    assert fences == ["membar.sys;"], fences
    assert "ld.global.nc.u64" not in ptx


@pytest.mark.parametrize("name", ["sum_reduce", "barrier"])
def test_each_scope_synchronizes_its_own_threads_only(collectives_ptx, name):
    """The block form synchronizes the block (bar.sync), the warp form only
    its warp (bar.warp.sync, with the mask of the lanes there are), the thread
    form nothing beside the team's own synchronization."""
    def section(scope):
        return collectives_ptx.split(f"=== {name}{scope}\n")[1].split("=== ")[0]
    block, warp, thread = section("_block"), section("_warp"), section("")
    assert re.search(r"\bbar\.sync\b|barrier\.sync", block) and "bar.warp.sync" not in block
    assert "bar.warp.sync" in warp and not re.search(r"\bbar\.sync\b|barrier\.sync\b", warp)
    assert "bar.warp.sync" not in thread and not re.search(r"\bbar\.sync\b", thread)
    # the leader's team synchronization is the same in every form: acquire polls
    for ptx in (block, warp, thread):
        assert "ld.acquire.sys" in ptx


def test_the_block_collectives_read_the_teams_state_where_the_heap_keeps_it():
    """The put-based block collectives compute the offset of the teams' state
    words, and the device barriers that of the departure words, in device code
    (the job's size is known only at run time); each must be the heap's."""
    import sys

    from conftest import run_hard

    script = ("from numba_shmem._cuda._source import _departures_offset, _state_offset; "
              "from numba_shmem._heap._symmetric import departures, team_state; "
              "print(all(eval(_state_offset('n'), {'n': n}) == team_state(n)[0] "
              "and eval(_departures_offset('n'), {'n': n}) == departures(n)[0] "
              "for n in range(1, 300)))")
    result = run_hard([sys.executable, "-c", script], 120, {"NUMBA_SHMEM_BACKEND": "cuda"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"


def test_task_queue_sample():
    """A persistent kernel per PE claiming tasks from symmetric queues (stealing
    from the others' when its own is empty), inputs from other PEs' tasks
    carried by put_signal_block; the same graph as one launch per task; both
    checked against numpy on every PE. 3 PEs: the queues differ in length."""
    from conftest import BACKEND, ROOT

    layers, width, elements = (3, 5, 32) if BACKEND == "sim" else (16, 200, 256)
    result = shmem_run(3, str(ROOT / "samples/task_queue.py"), "--layers", layers, "--width",
                       width, "--elements", elements, "--work", 4, "--threads", 32,
                       timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = sorted(result.stdout.splitlines())
    tasks = layers * width
    assert lines[0].startswith(f"3 PEs, {layers} x {width} tasks of {elements} elements: "
                               "persistent kernel "), lines
    ran = 0
    for pe in range(3):
        per_task, persistent = lines[1 + 2 * pe], lines[2 + 2 * pe]
        assert per_task == f"PE {pe}: one launch per task: {tasks} tasks, 0 wrong elements"
        assert persistent.startswith(f"PE {pe}: persistent kernel: {tasks} tasks, 0 wrong "
                                     "elements; "), persistent
        ran += int(persistent.split(" ran ")[1].split(" ")[0])
    assert ran == tasks  # every task ran exactly once, wherever it was claimed


def test_task_queue_sample_at_its_defaults_suits_the_backend():
    """Run as a new user would, with no arguments: sizes for the backend (before,
    on the simulator: the GPU's, past 300 s with no output), a line of
    progress on stderr before each run."""
    from conftest import BACKEND, ROOT

    result = shmem_run(2, str(ROOT / "samples/task_queue.py"), timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    layers, width, elements = (3, 5, 32) if BACKEND == "sim" else (16, 64, 256)
    assert f"2 PEs, {layers} x {width} tasks of {elements} elements: " in result.stdout
    assert result.stderr.count("task_queue: ") == 4, result.stderr


def test_moe_dispatch_sample():
    from conftest import BACKEND, ROOT

    tokens, hidden = (8, 32) if BACKEND == "sim" else (4096, 1024)
    result = shmem_run(4, str(ROOT / "samples/moe_dispatch.py"), "--tokens", tokens,
                       "--hidden", hidden, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = sorted(result.stdout.splitlines())
    assert len(lines) == 4
    took = 0
    for pe, line in enumerate(lines):
        assert line.startswith(f"PE {pe}: sent {tokens} tokens, its experts took ")
        assert line.endswith("combined results wrong: 0")
        took += int(line.split("took ")[1].split(",")[0])
    assert took == 4 * tokens  # every token went to exactly one expert


def test_allgather_gemm_sample():
    from conftest import BACKEND, ROOT

    m, k, n = (4, 8, 4) if BACKEND == "sim" else (256, 512, 256)
    result = shmem_run(4, str(ROOT / "samples/allgather_gemm.py"), "--m", m, "--k", k, "--n", n,
                       timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = sorted(result.stdout.splitlines())
    assert len(lines) == 4
    for pe, line in enumerate(lines):
        assert line.startswith(f"PE {pe}: C is {4 * m}x{n}, largest difference from numpy ")
        assert line.endswith("(ok)")


def test_mismatched_host_collectives_are_an_error_in_debug_mode():
    """Before: PE 0's fcollect and PE 1's sum_reduce went ahead, drifting the
    team's barrier epochs (wrong data or a hang)."""
    result = shmem_run(2, "stream_collectives.py", "mismatch", timeout=180,
                       env={"NUMBA_SHMEM_DEBUG": "1", "NUMBA_SHMEM_WAIT_TIMEOUT": "60"})
    assert result.returncode == 0, result.stdout + result.stderr
    for pe in (0, 1):
        assert (f"PE {pe}: collective calls on team 0 do not match: PE 0 called "
                "shmem.fcollect(nelems=4, int64) but PE 1 called shmem.sum_reduce(nelems=4, "
                "int64)") in result.stdout, result.stdout


@needs_gpu
def test_barriers_on_one_team_from_two_streams_at_once():
    """Before: the epoch was a load and a store; two streams' barrier kernels
    interleaved them, lost increments, and a later barrier hung (debug mode
    turns the hang into a trap)."""
    result = shmem_run(2, "stream_collectives.py", "concurrent", timeout=180,
                       env={"NUMBA_SHMEM_DEBUG": "1", "NUMBA_SHMEM_WAIT_TIMEOUT": "20"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(result.stdout.splitlines()) == [f"PE {pe}: concurrent barriers ok"
                                                  for pe in (0, 1)]


@pytest.mark.parametrize("mode", ["back_to_back", "wrap"])
def test_world_reductions_back_to_back_each_get_their_own_parts(mode):
    """Reductions queued back to back, sizes and forms changing, one in place,
    one followed by an fcollect into its dest: no call may read another call's
    parts, nor a source its PE has changed since, nor land over a later call's
    result. ``wrap``: across the end of a cycle of the lines' marks."""
    result = shmem_run(3, "stream_collectives.py", mode, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(result.stdout.splitlines()) == [f"PE {pe}: back to back ok"
                                                  for pe in (0, 1, 2)]
