"""The bootstraps: the launcher's rendezvous protocol and MPI."""

import os
import re
import socket
import sys
import threading
import types

import pytest

from conftest import (ROOT, _FOREIGN_RANKS, mpi_missing, mpiexec_job, run_hard,
                      shm_entries, shm_left)
from numba_shmem import ShmemBootstrapError, ShmemUsageError
from numba_shmem._bootstrap import FOREIGN_LAUNCHERS, start
from numba_shmem._bootstrap._launcher import LauncherBootstrap
from shmem_run import _wire
from shmem_run._rendezvous import UnixRendezvousServer


@pytest.fixture
def server(tmp_path):
    path = str(tmp_path / "rdv.sock")
    srv = UnixRendezvousServer(path, "s3cret", 2)
    for pe in range(2):  # the PEs are this process's threads
        srv.admit(pe, os.getpid())
    yield srv
    srv.close()


def _env(server, pe, secret="s3cret"):
    return {"SHMEM_RUN_SOCKET": server.path, "SHMEM_RUN_SECRET": secret,
            "SHMEM_RUN_PE": str(pe), "SHMEM_RUN_NPES": "2", "SHMEM_RUN_JOBID": "t"}


def test_socket_is_private(server):
    assert os.stat(server.path).st_mode & 0o777 == 0o600


def test_wrong_secret_is_refused(server):
    with pytest.raises(ShmemBootstrapError, match="wrong job secret"):
        LauncherBootstrap(5, _env(server, 0, secret="guess"))


def test_pe_number_taken_or_out_of_range(server):
    first = LauncherBootstrap(5, _env(server, 0))
    try:
        with pytest.raises(ShmemBootstrapError, match="PE number 0 is invalid or taken"):
            LauncherBootstrap(5, _env(server, 0))
        with pytest.raises(ShmemBootstrapError, match="PE number 7 is invalid or taken"):
            LauncherBootstrap(5, _env(server, 7))
    finally:
        first.close()


def test_losing_the_launcher_is_an_error_naming_the_collective(server):
    boot = LauncherBootstrap(5, _env(server, 0))
    server.close()
    with pytest.raises(ShmemBootstrapError, match="PE 0 lost the shmem-run rendezvous during "
                                                  "shmem.barrier_all"):
        boot.barrier("shmem.barrier_all")
    boot.close()


def test_a_collective_after_a_pe_left_fails_at_once(server):
    first = LauncherBootstrap(5, _env(server, 0))
    second = LauncherBootstrap(5, _env(server, 1))
    second.close()  # finalized: it will never join another collective
    with pytest.raises(ShmemBootstrapError, match=r"PE 1 called shmem\.finalize\(\) before "
                                                  r"reaching shmem\.barrier_all"):
        first.barrier("shmem.barrier_all")
    first.close()


def test_a_group_collective_must_name_a_sorted_group_with_the_caller(server):
    boot = LauncherBootstrap(5, _env(server, 0))
    for members in ([1, 0], [1]):
        with pytest.raises(ShmemBootstrapError, match=rf"PE 0 sent test to the group "
                                                      rf"\{members}, which must be sorted"):
            boot.allgather(b"", "test", members)
    assert boot.allgather(b"alone", "test", [0]) == [b"alone"]
    boot.close()


def test_allgather_and_descriptor_exchange(server, tmp_path):
    results = {}

    def pe(rank):
        boot = LauncherBootstrap(5, _env(server, rank))
        results[rank, "gather"] = boot.allgather(b"from %d" % rank, "test")
        path = tmp_path / f"file{rank}"
        path.write_text(f"contents of {rank}")
        fd = os.open(path, os.O_RDONLY)
        got = boot.exchange_fds([fd], "test fds")
        results[rank, "fds"] = [os.pread(fds[0], 100, 0).decode() for fds in got]
        for fds in got:
            os.close(fds[0])
        boot.close()

    threads = [threading.Thread(target=pe, args=(rank,)) for rank in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    for rank in range(2):
        assert results[rank, "gather"] == [b"from 0", b"from 1"]
        assert results[rank, "fds"] == ["contents of 0", "contents of 1"]


def test_wire_lists_round_trip():
    items = [b"", b"abc", bytes(range(256)) * 10]
    assert _wire.unpack_list(_wire.pack_list(items)) == items


def test_wire_reports_a_closed_peer():
    a, b = socket.socketpair()
    a.close()
    with pytest.raises(_wire.ConnectionClosed):
        _wire.recv(b)
    b.close()


@pytest.mark.mpi
@pytest.mark.skipif(mpi_missing() is not None, reason=str(mpi_missing()))
@pytest.mark.parametrize("npes", [2, 3])
def test_ring_under_mpiexec(npes):
    before = shm_entries()
    argv, env = mpiexec_job(npes, sys.executable, ROOT / "samples/ring.py")
    result = run_hard(argv, 180, env)
    assert result.returncode == 0, result.stdout + result.stderr
    # (Open MPI may add terminal escape sequences of its own)
    lines = sorted(line for line in result.stdout.splitlines() if line.startswith("PE "))
    assert lines == [f"PE {pe} of {npes} received {(pe - 1) % npes}" for pe in range(npes)]
    assert not shm_left(before)


@pytest.mark.mpi
@pytest.mark.skipif(mpi_missing() is not None, reason=str(mpi_missing()))
def test_teams_under_mpiexec():
    """Team collectives use MPI communicators of the members only."""
    argv, env = mpiexec_job(4, sys.executable, ROOT / "tests/programs/teams.py", 5,
                            env={"NUMBA_SHMEM_WAIT_TIMEOUT": "120"})
    result = run_hard(argv, 300, env)
    assert result.returncode == 0, result.stdout + result.stderr
    # (Open MPI may add terminal escape sequences of its own)
    lines = sorted(re.findall(r"PE \d+: teams ok", result.stdout))
    assert lines == [f"PE {pe}: teams ok" for pe in range(4)], result.stdout + result.stderr


def _mpiexec(npes, program, env=None, timeout=180):
    argv, env = mpiexec_job(npes, sys.executable, ROOT / "tests/programs" / program[0],
                            *program[1:], env={"NUMBA_SHMEM_WAIT_TIMEOUT": "60", **(env or {})})
    return run_hard(argv, timeout, env)


@pytest.mark.mpi
@pytest.mark.skipif(mpi_missing() is not None, reason=str(mpi_missing()))
def test_strangers_on_the_mpi_descriptor_sockets_are_dropped():
    """Before: the sockets were abstract (open to every local user); a silent
    connection hung both ranks, a wrong secret aborted the job."""
    result = _mpiexec(2, ["mpi_bootstrap.py", "strangers"])
    assert result.returncode == 0, result.stdout + result.stderr
    lines = sorted(re.findall(r"PE \d: .*", result.stdout))
    assert lines == [f"PE {pe}: directory mode 0o700, received ['from 0', 'from 1']"
                     for pe in (0, 1)], result.stdout + result.stderr


@pytest.mark.mpi
@pytest.mark.skipif(mpi_missing() is not None, reason=str(mpi_missing()))
def test_a_long_tmpdir_keeps_the_mpi_sockets_short(tmp_path):
    """A socket's path must fit in 108 bytes. Before: init() failed with
    ``OSError: AF_UNIX path too long`` under a TMPDIR of 100 characters."""
    tmpdir = tmp_path / ("t" * max(1, 100 - len(str(tmp_path))))
    tmpdir.mkdir()
    result = _mpiexec(2, ["mpi_bootstrap.py", "socket_dir"], env={"TMPDIR": str(tmpdir)})
    assert result.returncode == 0, result.stdout + result.stderr
    found = sorted(re.findall(r"PE (\d): socket (\S+), received (.*)", result.stdout))
    assert [(pe, seen) for pe, _path, seen in found] == [
        (str(pe), "['from 0', 'from 1']") for pe in (0, 1)], result.stdout + result.stderr
    for _pe, path, _seen in found:  # a private directory of its own, in /tmp, now gone
        assert os.path.dirname(os.path.dirname(path)) == "/tmp"
        assert not os.path.exists(os.path.dirname(path))
    assert not list(tmpdir.iterdir())


@pytest.mark.mpi
@pytest.mark.skipif(mpi_missing() is not None, reason=str(mpi_missing()))
def test_two_jobs_on_halves_of_an_mpi_world():
    """shmem.init(comm=...): the even and the odd ranks of four run a job each."""
    result = _mpiexec(4, ["mpi_bootstrap.py", "split"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(re.findall(r"rank \d: PE \d of \d received \d", result.stdout)) == [
        f"rank {world}: PE {world // 2} of 2 received {1 - world // 2}" for world in range(4)]
    assert len(re.findall(r"rank \d: shmem.init: comm=0 is not an mpi4py intra-communicator; "
                          r"pass one", result.stdout)) == 4, result.stdout + result.stderr


@pytest.mark.parametrize("env,seen,launch", [
    ({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}, "RANK=1 WORLD_SIZE=2", "shmem-run -n 2"),
    ({"SLURM_PROCID": "0", "SLURM_NTASKS": "2"}, "SLURM_PROCID=0 SLURM_NTASKS=2", "shmem-run -n 2"),
    ({"SLURM_PROCID": "3", "SLURM_NPROCS": "8"}, "SLURM_PROCID=3 SLURM_NPROCS=8", "shmem-run -n 8"),
], ids=["torchrun", "srun", "srun-nprocs"])
def test_another_launchers_ranks_are_refused(env, seen, launch):
    """Before: under torchrun (or a bare srun) each process ran as a job of one
    PE, ``my_pe 0 n_pes 1``, with no error."""
    before = shm_entries()
    result = run_hard([sys.executable, ROOT / "samples/ring.py"], 120, env)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "of 1 received" not in result.stdout
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith("numba_shmem._errors.ShmemUsageError: ") and seen in error
    assert launch in error and "mpi4py" in error
    assert not shm_left(before)


@pytest.mark.parametrize("launcher,rank,size", [
    (launcher, rank, size) for launcher, rank, sizes in FOREIGN_LAUNCHERS for size in sizes])
def test_every_foreign_launcher_is_refused_naming_its_variables(launcher, rank, size):
    config = types.SimpleNamespace(wait_timeout=5, node_size=0)
    with pytest.raises(ShmemUsageError, match=rf"started by {launcher} as one of 3 processes "
                                              rf"\({rank}=2 {size}=3\).*shmem-run -n 3.*"
                                              rf"unset {rank}$"):
        start(config, {rank: "2", size: "3"})
    # the tests' processes do not inherit a CI job's rank variables
    assert rank in _FOREIGN_RANKS


@pytest.mark.parametrize("env", [
    {}, {"RANK": "0", "WORLD_SIZE": "1"}, {"SLURM_PROCID": "0", "SLURM_NTASKS": "1"},
    # the step's count, where srun gives it, decides (not the allocation's)
    {"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_STEP_NUM_TASKS": "1"},
])
def test_a_job_of_one_process_is_one_pe(env):
    result = run_hard([sys.executable, ROOT / "samples/ring.py"], 120, env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == "PE 0 of 1 received 0\n"


def test_a_pe_number_says_hello_once(server):
    boot = LauncherBootstrap(5, _env(server, 0))
    boot.close()  # its bye: the number is not free for a newcomer
    with pytest.raises(ShmemBootstrapError, match="PE number 0 is invalid or taken"):
        LauncherBootstrap(5, _env(server, 0))


def test_only_the_process_started_as_a_pe_may_say_hello(tmp_path):
    srv = UnixRendezvousServer(str(tmp_path / "rdv.sock"), "s3cret", 2)
    srv.admit(0, os.getpid() + 1)  # another process
    try:
        with pytest.raises(ShmemBootstrapError,
                           match=rf"process {os.getpid()} is not the process shmem-run started "
                                 r"as PE 0; a PE's children cannot join its job"):
            LauncherBootstrap(5, _env(srv, 0))
    finally:
        srv.close()


def test_the_secret_leaves_the_environment_at_init(server):
    env = _env(server, 0)
    boot = LauncherBootstrap(5, env)
    assert "SHMEM_RUN_SECRET" not in env and env["SHMEM_RUN_SOCKET"] == server.path
    boot.close()
