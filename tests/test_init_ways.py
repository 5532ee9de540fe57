"""Jobs started without shmem-run: from a unique id the program hands around,
under torchrun, on an MPI sub-communicator (test_bootstrap.py has MPI's world)."""

import re
import sys

import pytest

from conftest import BACKEND, PROGRAMS, nshmem_dirs, python, run_hard, shm_entries, shm_left

from numba_shmem import _runtime
from numba_shmem._bootstrap import _uid
from numba_shmem._errors import ShmemUsageError

_RING = re.compile(r"PE (\d+) of (\d+) received (\d+) \((.*)\)")


def _ring_lines(stdout):
    return sorted((int(pe), int(n), int(got), how) for pe, n, got, how in _RING.findall(stdout))


def _env(extra=None):
    env = {"NUMBA_SHMEM_WAIT_TIMEOUT": "60", **(extra or {})}
    if BACKEND == "sim":
        env.update(NUMBA_ENABLE_CUDASIM="1", NUMBA_SHMEM_BACKEND="sim")
    return env


@pytest.mark.parametrize("npes", [2, 4])
def test_a_unique_id_job_runs_the_ring(npes, mpi_gpu_env, job_tmpdir):
    before = shm_entries()
    result = python("uid_job.py", "start", npes, timeout=180,
                    env=_env({**mpi_gpu_env, "TMPDIR": str(job_tmpdir)}))
    assert result.returncode == 0, result.stdout + result.stderr
    assert _ring_lines(result.stdout) == [
        (pe, npes, (pe - 1) % npes, f"unique id, local {pe}/{npes}") for pe in range(npes)]
    assert f"children exited {[0] * (npes - 1)}" in result.stdout
    assert not shm_left(before) and not nshmem_dirs(job_tmpdir)


@pytest.mark.parametrize("case,error", [
    ("bad_uid", "PE 0 error: ShmemUsageError: shmem.init: uid='numba-shmem-uid-1:nowhere' is "
                "not a unique id; pass the string shmem.get_unique_id() returned on rank 0"),
    ("rank_range", "PE 2 error: ShmemUsageError: shmem.init: rank=2 is not a rank of a job of "
                   "nranks=2 PEs (0 <= rank < nranks)"),
    ("not_maker", "PE 0 error: ShmemUsageError: shmem.init: rank 0 serves the job's rendezvous, "
                  "so it must run in the process that made the unique id"),
    ("unreachable", "PE 1 error: ShmemBootstrapError: PE 1 could not reach rank 0's rendezvous "
                    "at 127.0.0.1:9 (from its unique id)"),
])
def test_a_bad_unique_id_is_refused_leaving_nothing(case, error, job_tmpdir):
    result = python("uid_job.py", case, timeout=120, env=_env({"TMPDIR": str(job_tmpdir)}))
    assert result.returncode == 0, result.stdout + result.stderr
    assert error in result.stdout, result.stdout + result.stderr
    assert "descriptors left: []" in result.stdout
    assert not nshmem_dirs(job_tmpdir)


def test_every_rank_must_pass_the_same_nranks():
    result = python("uid_job.py", "mismatch", timeout=120, env=_env())
    assert "PE 1 error: ShmemBootstrapError: PE 1 was started with nranks=3, but rank 0 with 2; " \
           "pass the same nranks on every PE" in result.stdout, result.stdout + result.stderr
    assert "PE 0 error: ShmemBootstrapError: PE 1 died without leaving the job" in result.stdout


@pytest.mark.parametrize("die", [2, 0])
def test_a_pe_that_leaves_a_unique_id_job_is_named(die):
    """Rank 0 serves the rendezvous: once it is gone the others say so."""
    before = shm_entries()
    result = python("uid_job.py", "start", 3, f"die={die}", timeout=120, env=_env())
    errors = sorted(re.findall(r"PE (\d) error: (.*)", result.stdout))
    assert [pe for pe, _message in errors] == [str(pe) for pe in range(3) if pe != die], \
        result.stdout + result.stderr
    for _pe, message in errors:
        if die:
            assert message.startswith(f"ShmemBootstrapError: PE {die} exited before reaching "
                                      "shmem.zeros"), message
        else:  # (a collective that rank 0 had joined fails naming it the same way)
            assert re.match(r"ShmemBootstrapError: PE 0 exited before reaching|"
                            r"ShmemBootstrapError: PE \d lost the unique id rendezvous during "
                            r"shmem.zeros: .*; rank 0 serves it, so PE 0 has left the job",
                            message), message
    assert not shm_left(before)


def test_a_unique_id_job_across_nodes_needs_mpi():
    result = python("uid_job.py", "start", 2, timeout=120,
                    env=_env({"NUMBA_SHMEM_NODE_SIZE": "1"}))
    for pe in (0, 1):
        assert f"PE {pe} error: ShmemUsageError: PE {pe}: this job spans 2 nodes and was " \
               "started through unique id; PEs on other nodes are reached through MPI: start " \
               "the job with mpirun or srun" in result.stdout, result.stdout + result.stderr


@pytest.mark.parametrize("args,error", [
    (dict(comm=object(), uid="x"), "pass comm= (an MPI job) or uid= (a unique id's job), not both"),
    (dict(rank=1), "rank= goes with uid=; pass uid=shmem.get_unique_id() from rank 0 too"),
    (dict(nranks=2), "nranks= goes with uid="),
])
def test_init_arguments_that_do_not_fit_are_named(args, error):
    with pytest.raises(ShmemUsageError, match=re.escape(error)):
        _runtime._join(**{"comm": None, "uid": None, "rank": None, "nranks": None, **args})


@pytest.mark.parametrize("rank,nranks,error", [
    ("1", 2, "rank must be an int, got '1'"),
    (0, 2.0, "nranks must be an int, got 2.0"),
    (True, 2, "rank must be an int, got True"),
    (0, 0, "rank=0 is not a rank of a job of nranks=0 PEs"),
    (-1, 2, "rank=-1 is not a rank of a job of nranks=2 PEs"),
])
def test_ranks_that_are_not_ranks_are_named(rank, nranks, error):
    with pytest.raises(ShmemUsageError, match=re.escape(error)):
        _uid.check_ranks(rank, nranks)


def test_a_unique_id_names_a_host_port_and_secret():
    uid = _runtime.get_unique_id()
    try:
        host, port, secret = _uid.parse(uid)
        assert uid.startswith(_uid.PREFIX + ":") and port > 0 and len(secret) == 32
        assert _uid.parse(f"{_uid.PREFIX}:fe80::1:29500:{secret}") == ("fe80::1", 29500, secret)
    finally:
        _uid.make()  # (replaces, and so closes, the listener of the first)


# -- torchrun -----------------------------------------------------------------

def _torch_job(npes, *args, env=None, real=False):
    if real:
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                   f"--nproc-per-node={npes}", PROGRAMS / "torch_job.py", *args]
    else:
        command = [sys.executable, PROGRAMS / "torchrun_like.py", npes,
                   PROGRAMS / "torch_job.py", *args]
    return run_hard([str(part) for part in command], 240, _env(env))


@pytest.mark.parametrize("npes,args", [(2, ()), (4, ()), (2, ("pg",))],
                         ids=["2", "4", "process-group"])
def test_torchrun_starts_a_job(npes, args, mpi_gpu_env):
    """Under torchrun's variables with the stand-in for torch's store."""
    result = _torch_job(npes, *args, env=mpi_gpu_env)
    assert f"exit codes {[0] * npes}" in result.stdout, result.stdout + result.stderr
    assert _ring_lines(result.stdout) == [
        (pe, npes, (pe - 1) % npes, f"torchrun, GPU index {pe}") for pe in range(npes)]


def test_a_torchrun_pe_that_never_inits_is_waited_for_then_named():
    result = _torch_job(2, "noinit=0", env={"NUMBA_SHMEM_WAIT_TIMEOUT": "3"})
    assert "exit codes [0, 1]" in result.stdout, result.stdout + result.stderr
    assert "PE 1 error: ShmemTimeoutError: PE 1 waited for rank 0's unique id in " \
           "torch.distributed's store" in result.stdout


def test_a_torchrun_pe_that_leaves_is_named():
    result = _torch_job(3, "die=1")
    assert "exit codes [1, 3, 1]" in result.stdout, result.stdout + result.stderr
    for pe in (0, 2):
        assert f"PE {pe} error: ShmemBootstrapError: PE 1 exited before reaching shmem.zeros" \
            in result.stdout


def _has_torch():
    try:
        import torch.distributed  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _has_torch(), reason="needs torch (its wheels are over 500 MB: CI's "
                    "machine has none; the stand-in tests above run there)")
@pytest.mark.parametrize("npes,args", [(2, ()), (4, ()), (2, ("pg",))],
                         ids=["2", "4", "process-group"])
def test_the_real_torchrun_starts_a_job(npes, args, mpi_gpu_env):
    result = _torch_job(npes, *args, env=mpi_gpu_env, real=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert _ring_lines(result.stdout) == [
        (pe, npes, (pe - 1) % npes, f"torchrun, GPU index {pe}") for pe in range(npes)]
