"""PEs on other nodes, through the proxy: jobs under mpiexec whose ranks form
emulated nodes (NUMBA_SHMEM_NODE_SIZE=k: every k consecutive ranks a node that
shares no memory with the others), so that direct and proxied PEs mix in one
program. On the GPU every PE runs on one GPU, shared through a private MPS
daemon as shmem-run shares it."""

import re
import sys
import time

import pytest

from conftest import (BACKEND, ROOT, mpi_missing, mpiexec_job, nshmem_dirs,
                      run_hard, shm_entries, shm_left)

pytestmark = [pytest.mark.mpi, pytest.mark.nodes]

#: what every job's environment adds: on the GPU, the MPS daemon's
_JOB_ENV = {}


@pytest.fixture(autouse=True)
def _one_gpu_shared(mpi_gpu_env):
    _JOB_ENV.update(mpi_gpu_env)
    yield
    _JOB_ENV.clear()


def nodes_run(npes, node_size, program, *args, timeout=300, env=None, succeed=True, cpus=None):
    """``program`` (under tests/programs, or a path from the root) on ``npes``
    ranks in emulated nodes of ``node_size``; it must exit 0 (with ``succeed``)
    or not, and leave nothing in /dev/shm either way. ``cpus``: the CPUs
    every rank may run on (taskset's list), if not all."""
    if mpi_missing():
        pytest.skip(mpi_missing())
    path = ROOT / program if "/" in program else ROOT / "tests/programs" / program
    argv, env = mpiexec_job(npes, sys.executable, path, *args, env={
        "NUMBA_SHMEM_NODE_SIZE": str(node_size), "NUMBA_SHMEM_WAIT_TIMEOUT": "120",
        **_JOB_ENV, **(env or {})})
    if cpus is not None:
        argv = ["taskset", "-c", cpus, *argv]
    before = shm_entries()
    result = run_hard(argv, timeout, env)
    assert (result.returncode == 0) == succeed, result.stdout + result.stderr
    assert not shm_left(before)  # nothing left in /dev/shm
    return result


def pe_lines(result, pattern=r"PE \d+[: ].*"):
    # (Open MPI may add terminal escape sequences of its own)
    return sorted(re.findall(pattern, result.stdout))


@pytest.mark.long
def test_the_device_api_reaches_pes_on_other_nodes():
    """p/g, put/get at every scope, iput/iget, put_signal, signal_op, atomics
    (no lost update from 4 PEs, a compare_swap chain), fence/quiet, waits:
    tests/programs/device_api.py unchanged, every PE checked; two nodes of two,
    so that every PE has a neighbour on its node and one on the other."""
    checks = ("rma", "signal", "atomics", "waits")
    result = nodes_run(4, 2, "device_api.py", *checks)
    assert pe_lines(result) == sorted(f"PE {pe}: {c} ok" for pe in range(4) for c in checks)
    assert "ShmemPerformanceWarning" not in result.stderr  # (each PE may use every CPU)


def test_data_is_visible_once_its_signal_or_barrier_is_across_nodes():
    """The message-passing litmus test, every ordering the API offers, with
    every PE on a node of its own."""
    result = nodes_run(3, 1, "litmus.py", 5)
    modes = ("put_signal", "put_signal_nbi", "put_signal_warp", "put_signal_block",
             "put_fence_signal_op", "p_fence_signal_op", "put_nbi_quiet_signal_op",
             "put_block_barrier_all")
    lines = [line for line in pe_lines(result) if "control" not in line]
    assert lines == sorted(f"PE {pe}: {mode} ok" for pe in range(3) for mode in modes)


@pytest.mark.long
@pytest.mark.parametrize("mode", ["device", "host"])
def test_collectives_and_teams_across_nodes(mode):
    """Block and host collectives (in place too) with two nodes of two; teams
    split across them, TEAM_SHARED the PEs of one node."""
    result = nodes_run(4, 2, "collectives.py", mode)
    assert pe_lines(result) == [f"PE {pe}: collectives ok" for pe in range(4)]
    if mode == "device":
        result = nodes_run(4, 2, "teams.py", 5)
        assert pe_lines(result) == [f"PE {pe}: teams ok" for pe in range(4)]


def test_program_order_holds_across_host_and_kernel_calls_toward_another_node():
    """A kernel's p + fence, then (after cuda.synchronize) a host put to the
    same element: the host's value stays; the other way round, the kernel's;
    a kernel's put + fence, then a host signal_op: the data is there when the
    signal is (before: on an H200 the kernel's p won in 11 of 12 rounds)."""
    result = nodes_run(2, 1, "cross_path.py", 20 if BACKEND == "cuda" else 3)
    assert pe_lines(result) == [f"PE 1: {mode} ok" for mode in (
        "host_put_then_kernel_p", "kernel_p_then_host_put", "kernel_put_then_host_signal")]


@pytest.mark.long
def test_free_completes_requests_still_in_the_proxy():
    """Puts, a kernel's put_nbi and a signal toward another node, then free
    and zeros at once: the next array holds zeros (before: on the simulator
    8,576 of 12,288 elements held the freed array's data)."""
    result = nodes_run(2, 1, "free_completes.py", 3)
    assert pe_lines(result) == [
        f"PE 1: free after {way} ok" for way in ("host put", "host signal", "kernel put_nbi")]


def test_a_target_refuses_requests_outside_its_heap_and_goes_on_serving():
    """A kernel's iput and iget that stride past the target's heap: the sender
    raises the target's refusal, naming the call, the PE and the bytes; the
    target's proxy serves the next put (before: its proxy thread died on the
    simulator; on an H200 the put overwrote another PE's array)."""
    result = nodes_run(2, 1, "proxy_trust.py", env={"NUMBA_SHMEM_WAIT_TIMEOUT": "20"})
    refused = (r"PE 0: .*(shmem\.{0}|a kernel's {1} \(ring ticket \d+\)) toward PE 1: PE 1 "
               r"refused it: a {1} of 8 bytes at heap offset \d+ runs outside the \d+ mapped bytes "
               r"of its heap")
    lines = pe_lines(result)
    assert len(lines) == 3 and "PE 1: the proxy still serves" in lines, lines
    assert sum(bool(re.match(refused.format("iput", "put"), line)) for line in lines) == 1, lines
    assert sum(bool(re.match(refused.format("iget", "get"), line)) for line in lines) == 1, lines


def test_a_batch_toward_a_gpus_heap_is_copied_from_where_it_landed():
    """The target's loop driven by hand (tests/programs/batch_landing.py),
    toward a model GPU whose copies run only when waited for: a batch of
    requests is received into a landing segment; a run of its chunk puts to
    consecutive offsets is one 2D copy (rows a record header apart) of the
    bytes the origin put; an empty batch at a full segment starts the next;
    batches with puts sent apart among them, round the segments many times,
    leave the heap as the puts did (no segment written before its copies ran);
    a run past the heap's end lands its whole chunks before it, then is refused;
    a put's data is received while the next batches are taken, and copied in
    order once it has come; a failure on its way (MPI_Irecv, MPI_Test, the copy
    into the heap) makes the loop's step fail with its reason."""
    # (under mpiexec: Open MPI 4 starts no MPI in a plain process without an ssh agent)
    result = nodes_run(1, 1, "batch_landing.py", timeout=120)
    assert "ok" in result.stdout.split(), result.stdout + result.stderr  # (and escapes)


def test_chunks_of_one_transfer_go_as_runs_sent_from_the_ring():
    """The origin's loop driven by hand (tests/programs/ring_runs.py): a
    kernel's chunk puts of one transfer go as runs of up to RUN_MAX chunks,
    each one request whose data MPI sends from the ring (slots given back
    once sent), ending at the ring's end, a gap, another PE, a short chunk or
    an unanswered slot, and at a host put's ORDER (the host's request goes
    between); of a run partly past the heap the whole chunks before its end
    land (a put that fit is not dropped with the one it joined), the refusal
    names the first chunk past it, and every ticket is answered."""
    # (under mpiexec: Open MPI 4 starts no MPI in a plain process without an ssh agent)
    result = nodes_run(1, 1, "ring_runs.py", timeout=120)
    assert "ok" in result.stdout.split(), result.stdout + result.stderr  # (and escapes)


def test_puts_from_the_gpus_heap_are_copied_out_by_the_proxy():
    """The loop driven by hand (tests/programs/put_from.py), its heap reached
    through a Target's functions as a GPU's is: a kernel's PUT_FROM requests
    take the loop's segments in turn, each answered DONE once its data is
    copied out (the source written again after leaves the heap as put), a
    chunk put after them lands after them, and a request larger than a
    request may move, a copy out that fails and MPI failing while one runs
    stop the loop with their reasons, before DONE."""
    # (under mpiexec: Open MPI 4 starts no MPI in a plain process without an ssh agent)
    result = nodes_run(1, 1, "put_from.py", timeout=180)
    assert "ok" in result.stdout.split(), result.stdout + result.stderr  # (and escapes)


def test_host_puts_return_once_copied_and_land_as_given():
    """PE 0's host puts into PE 1, each source written again as soon as its
    put returns (tests/programs/host_put_copies.py): puts up to COPY_MAX go
    from copies the proxy keeps (at most KEPT_MAX bytes at once), a larger
    one from the caller's memory; PE 1 holds what each put was given, the
    later of two into the same bytes last."""
    result = nodes_run(2, 1, "host_put_copies.py", timeout=300)
    assert "PE 1: host put copies ok" in result.stdout, result.stdout + result.stderr


def test_a_host_calls_poll_lets_the_interpreter_go_and_ends_when_its_words_say():
    """_engine.spin_until, a host call's wait before it sleeps: True at once
    where both words are there, False after its time where one is not, and
    True as soon as a Python thread (which needs the interpreter lock) writes
    the word it waits for."""
    import threading

    import numpy as np
    from numba_shmem._transport import _engine

    clock_gettime, clock = _engine._libc()[4], np.zeros(2, np.int64)
    words, other = np.zeros(4, np.int64), np.zeros(2, np.int64)
    words[1], other[0] = 7, 3
    assert _engine.spin_until(words, 1, 7, other, 0, 3, 10**9, clock_gettime, clock)
    start = time.monotonic()
    assert not _engine.spin_until(words, 1, 8, other, 0, 3, 20_000_000, clock_gettime, clock)
    assert not _engine.spin_until(words, 1, 7, other, 0, 4, 20_000_000, clock_gettime, clock)
    assert time.monotonic() - start >= 0.04
    writer = threading.Timer(0.05, lambda: words.__setitem__(2, 5))
    writer.start()
    start = time.monotonic()
    assert _engine.spin_until(words, 2, 5, words, 2, 5, 60 * 10**9, clock_gettime, clock)
    assert time.monotonic() - start < 30
    writer.join()


@pytest.mark.parametrize("heap", ["host", "function"])
def test_puts_from_kernel_and_host_land_in_program_order_whatever_the_runs(heap):
    """Property (tests/programs/runs_model.py, hypothesis against a numpy
    model): a kernel's chunk transfers and host puts over one small heap, in
    any interleaving with the loop's drains, leave it as applied in the order
    posted: runs (two calls' chunks joined too) split at a host put's ORDER;
    past the heap's end the whole chunks before it land. The heap in this
    process's memory, and reached through a Target's functions as a GPU's."""
    # (under mpiexec: Open MPI 4 starts no MPI in a plain process without an ssh agent)
    result = nodes_run(1, 1, "runs_model.py", heap, timeout=300)
    assert "ok" in result.stdout.split(), result.stdout + result.stderr  # (and escapes)


def test_answers_out_of_order_are_read_against_their_own_requests():
    """The origin's loop driven by hand (tests/programs/answer_order.py): a
    get posted into the slot of a put not yet answered waits in the ring; the
    put's answer, come after the slot was given back, is read as the put's (it
    waited for ever in MPI_Recv for get data before); a second answer to one
    request is an error."""
    # (under mpiexec: Open MPI 4 starts no MPI in a plain process without an ssh agent)
    result = nodes_run(1, 1, "answer_order.py", timeout=120)
    assert "ok" in result.stdout.split(), result.stdout + result.stderr  # (and escapes)


def test_a_run_of_deferred_answers_is_queued_as_one_by_one():
    """The target's loop driven by hand (tests/programs/answer_runs.py,
    hypothesis): answering the deferred requests, a run toward one PE written
    in one pass, queues toward each PE what answering them one by one would
    (rids in order, nothing else), across a buffer that fills and is sent."""
    result = nodes_run(1, 1, "answer_runs.py", timeout=300)
    assert "ok" in result.stdout.split(), result.stdout + result.stderr  # (and escapes)


@pytest.mark.skipif(BACKEND != "sim", reason="the simulator's heap in the GPU's way; on the GPU "
                    "the other tests take it")
@pytest.mark.parametrize("program,args,expected", [
    ("device_api.py", ("rma", "signal", "atomics", "waits"), 4 * 4),
    ("cross_path.py", (3,), 3),
    ("proxy_trust.py", (), 3),
])
def test_the_compiled_proxy_reaches_a_heap_as_it_reaches_a_gpus(program, args, expected):
    """The compiled proxy's path for a heap that is not in its memory (a
    GPU's: copies in and out through functions, atomics and signals applied a
    batch at a time, in order with the copies), on the simulator's heap: the
    device API, program order across host and kernel calls, and refusals hold
    as on the direct path of the loop."""
    # (debug mode says which path the proxy takes; it would refuse proxy_trust's
    # strided calls where they are made, before any target sees them)
    debug = "0" if program == "proxy_trust.py" else "1"
    npes, node_size = (4, 2) if program == "device_api.py" else (2, 1)
    result = nodes_run(npes, node_size, program, *args, env={
        "NUMBA_SHMEM_TEST_FUNCTION_TARGET": "1", "NUMBA_SHMEM_DEBUG": debug,
        "NUMBA_SHMEM_WAIT_TIMEOUT": "60"})
    if debug == "1":
        assert "the heap reached through copies and a batch of atomics at a time" in \
            result.stderr, result.stderr
        # (and whether the MPI says it could address a GPU's heap itself)
        assert re.search(r"data staged through host memory \(this MPI (cannot address GPU "
                         r"memory: MPIX_\w+\(|says it can address GPU memory, MPIX_\w+\(|has "
                         r"no query of whether)", result.stderr), result.stderr
    lines = pe_lines(result)
    assert len(lines) == expected and all("ok" in line or "refused" in line
                                          or "still serves" in line for line in lines), lines


@pytest.mark.long
def test_small_puts_toward_a_gpus_heap_go_as_word_writes_not_copies():
    """A put of at most WORDS_MAX bytes in whole aligned words reaches a GPU's
    heap in a batch of word writes (on the GPU: stream memory operations,
    which do not wait for the application's time slice as a copy does); other
    puts as one copy each; every byte lands (on the simulator through the
    GPU's path). Both PEs run on one CPU, as a launcher that binds each rank
    to a core leaves the proxy's thread and the application: the first PE
    warns, naming both and the fix."""
    result = nodes_run(2, 1, "small_puts.py", env={"NUMBA_SHMEM_TEST_FUNCTION_TARGET": "1"},
                       cpus="0")
    assert pe_lines(result) == ["PE 1: small puts ok"], result.stdout + result.stderr
    warned = [line for line in result.stderr.splitlines() if "ShmemPerformanceWarning" in line]
    assert len(warned) == 1 and "PE 0, 1 may run on one CPU only" in warned[0] \
        and "--map-by slot:PE=2" in warned[0], result.stderr


@pytest.mark.skipif(BACKEND != "sim", reason="the simulator's message; the GPU's kernel stops "
                    "the same way as under shmem-run (test_departures.py)")
def test_a_reduction_in_lines_under_mpi_stops_when_a_member_leaves():
    """Under MPI (no launcher to ask what the PE did): PE 1 exits 0 without
    finalize while PE 0 waits for its part of a reduction in lines (one node:
    lines go between the PEs' heaps); PE 0's wait ends at once naming PE 1."""
    result = nodes_run(2, 2, "departures.py", "member_left", timeout=120)
    found = re.search(r"PE 0 after (\d+) s: ShmemUsageError: (tid=.*: )?PE 1 left the job "
                      r"before reaching shmem\.sum_reduce, which PE 0 waits in", result.stdout)
    assert found and int(found.group(1)) < 30, result.stdout + result.stderr


@pytest.mark.skipif(BACKEND != "sim", reason="the ring's host side, driven from Python threads "
                    "on the simulator's heap")
@pytest.mark.parametrize("seed", [1, 2])
def test_the_device_ring_delivers_every_request_once_in_order(seed):
    """The GPU's ring (_transport/_ring.py) with Python threads posting as GPU
    threads do: 2,096 requests per PE (every slot reused twice), puts of 1-16
    bytes, fetching adds, gets and signals, against a model; quiet covers all.
    Then program order between the ring and the host's calls toward one PE
    (before: the proxy sent the host's requests first, 200 of 200 wrong)."""
    result = nodes_run(2, 1, "ring_protocol.py", seed, timeout=120)
    assert pe_lines(result) == sorted(
        f"PE {pe}: {what} ok" for pe in (0, 1)
        for what in ("2096 requests through the ring", "order across the ring and the host"))


@pytest.mark.long
def test_barriers_and_on_stream_calls_across_nodes():
    result = nodes_run(4, 1, "barriers.py", 3)
    assert pe_lines(result) == [f"PE {pe}: 3 rounds of barriers at thread, block and warp "
                                "scope ok" for pe in range(4)]
    result = nodes_run(4, 1, "on_stream.py", 3)
    assert [line.split(" (")[0] for line in pe_lines(result)] == \
        [f"PE {pe}: on-stream ok" for pe in range(4)]


@pytest.mark.long
def test_the_samples_run_unchanged_across_nodes():
    result = nodes_run(4, 1, "samples/ring.py")
    assert pe_lines(result) == [f"PE {pe} of 4 received {(pe - 1) % 4}" for pe in range(4)]
    result = nodes_run(4, 2, "samples/kv_transfer.py", "--elements", 4096)
    assert pe_lines(result) == [
        "PE 0 (prefill) sent 4096 elements to each of 3 decode PEs"] + [
        f"PE {pe} (decode) received 4096 elements, 0 wrong" for pe in (1, 2, 3)]
    result = nodes_run(4, 2, "samples/moe_dispatch.py", "--tokens", 16, "--hidden", 32)
    lines = pe_lines(result)
    assert len(lines) == 4 and all(line.startswith(f"PE {pe}: sent 16 tokens, ")
                                   and line.endswith("combined results wrong: 0")
                                   for pe, line in enumerate(lines)), lines
    took = sum(int(line.split("took ")[1].split(",")[0]) for line in lines)
    assert took == 4 * 16  # every token reached an expert, wherever it lives


def test_a_pe_that_does_not_answer_is_an_error_naming_it_not_a_hang(tmp_path, job_tmpdir):
    result = nodes_run(2, 1, "far_timeout.py", tmp_path / "done", timeout=120,
                       env={"NUMBA_SHMEM_WAIT_TIMEOUT": "3", "TMPDIR": str(job_tmpdir)})
    found = re.search(r"PE 0 after (\d+) s: PE 0 waited 3 s in shmem.get for the answer from "
                      r"PE 1 through the proxy \(PEs on other nodes\)", result.stdout)
    assert found and int(found.group(1)) <= 10, result.stdout + result.stderr
    assert not nshmem_dirs(job_tmpdir)  # both PEs left the usual way


def test_a_proxy_thread_that_fails_says_so_and_stops_what_waits_for_it(tmp_path, job_tmpdir):
    """PE 1's proxy raises applying PE 0's put: one line from PE 1 names the
    error, its next call toward another node fails naming it, and PE 0's
    quiet ends in the time-out naming PE 1; both leave the usual way."""
    result = nodes_run(2, 1, "proxy_fails.py", tmp_path / "done", timeout=120,
                       env={"NUMBA_SHMEM_WAIT_TIMEOUT": "3", "TMPDIR": str(job_tmpdir)})
    output = result.stdout + result.stderr
    # (on the GPU the put, 32 bytes, goes as a batch of word writes)
    failure = "applying atomics, signals and p's on the GPU failed (it returned " \
        if BACKEND == "cuda" else "flock failed"
    assert f"numba-shmem: PE 1: the proxy thread failed: {failure}" in output, output
    assert f"PE 1: shmem.put toward PE 0: the proxy (PEs on other nodes) stopped: {failure}" \
        in result.stdout, output
    assert "PE 0: PE 0 waited 3 s in shmem.quiet for its requests from PE 1 through the proxy" \
           in result.stdout, output
    assert not nshmem_dirs(job_tmpdir)


@pytest.mark.parametrize("how, window", [
    ("raise", False), ("sys.exit", False),
    pytest.param("SystemExit", False, marks=pytest.mark.skipif(
        sys.version_info < (3, 12), reason="a raised SystemExit's code is seen through "
        "sys.monitoring (Python 3.12); before, only sys.exit's")),
    ("raise", True)])
def test_a_pe_that_dies_ends_the_job_on_every_node_in_one_line(how, window, job_tmpdir):
    """An uncaught exception, sys.exit(3) or raise SystemExit(3) without
    finalize: the job ends at once with that code. Before: MPI_Finalize at
    its exit waited for the others, which waited in the barrier for it, until
    the wait time-out (300 s; for sys.exit(3) the job then exited 1). Where
    the proxies hold an MPI window (a GPU's heap: the path taken on the
    simulator's), the PE leaving does not wait to free it (collective)."""
    start = time.monotonic()
    env = {"TMPDIR": str(job_tmpdir)}
    if window:
        env["NUMBA_SHMEM_TEST_FUNCTION_TARGET"] = "1"
    result = nodes_run(3, 1, "pe_dies.py", how, timeout=120, succeed=False, env=env)
    assert time.monotonic() - start < 60
    output = result.stdout + result.stderr
    if how == "raise":
        assert result.returncode == 1
        assert "numba-shmem: PE 1 of 3 exits with an uncaught RuntimeError: aborting the MPI " \
               "job (code 1)" in output, output
    else:
        assert result.returncode == 3
        assert "numba-shmem: PE 1 of 3 exits with code 3 without shmem.finalize(): aborting " \
               "the MPI job (code 3)" in output, output
    assert "the barrier returned" not in output
    # the PEs that mpirun stopped removed their private directories first
    assert not nshmem_dirs(job_tmpdir)
