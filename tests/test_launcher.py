"""shmem-run: plan, fail fast, exit codes, signals, timeouts, nothing left behind."""

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import ROOT, _clean_env, shm_entries, shm_left, shmem_run
from shmem_run import _wire
from shmem_run._cli import build_parser, parse_args
from shmem_run._plan import MULTICAST_OFF, make_plan


def _plan(argv, gpus=0, mps="/usr/bin/nvidia-cuda-mps-control", environ=None):
    args = parse_args(build_parser(), argv)
    return make_plan(args, gpus=gpus, mps_control=mps, environ=environ or {"PATH": "/bin"})


def test_plan_without_gpu_runs_the_simulator_and_says_so():
    plan = _plan(["-n", "4", "x.py", "a"])
    env = dict(plan.base_env)
    assert plan.backend == "sim" and env["NUMBA_ENABLE_CUDASIM"] == "1"
    assert plan.command == (sys.executable, "x.py", "a")
    assert plan.notes == ("shmem-run: no CUDA GPU found; running 4 PEs on the CPU simulator",)
    assert not plan.use_mps


def test_plan_shares_one_gpu_through_mps():
    plan = _plan(["-n", "4", "x.py"], gpus=1)
    assert plan.backend == "cuda" and plan.use_mps
    assert "NUMBA_ENABLE_CUDASIM" not in dict(plan.base_env)
    assert plan.notes == ()


def test_plan_one_pe_per_gpu_needs_no_mps():
    plan = _plan(["-n", "2", "x.py"], gpus=2)
    assert not plan.use_mps and plan.notes == ()


def test_plan_warns_once_when_mps_is_missing():
    plan = _plan(["-n", "2", "x.py"], gpus=1, mps=None)
    assert not plan.use_mps
    assert len(plan.notes) == 1 and "nvidia-cuda-mps-control was not found" in plan.notes[0]


def test_plan_keeps_a_users_own_mps_daemon():
    plan = _plan(["-n", "2", "x.py"], gpus=1, environ={"CUDA_MPS_PIPE_DIRECTORY": "/x"})
    assert not plan.use_mps and plan.notes == ()


def test_plan_turns_nvlink_multicast_off_and_runs_modules():
    plan = _plan(["-n", "1", "-m", "pkg.mod", "--flag"], gpus=1)
    env = dict(plan.base_env)
    assert all(env[name] == value for name, value in MULTICAST_OFF.items())
    assert plan.command == (sys.executable, "-m", "pkg.mod", "--flag")
    assert plan.pe_env(3, {"SHMEM_RUN_SOCKET": "s"})["SHMEM_RUN_PE"] == "3"


def _launcher(*argv, timeout=60):
    return subprocess.run([sys.executable, "-m", "shmem_run", *argv], cwd=ROOT,
                          env=_clean_env({}), capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("argv,message", [
    (["-n", "0", "x.py"], "-n/--npes must be at least 1, got 0"),
    (["-n", "2"], "name a script to run, or -m MODULE"),
    (["-n", "2", "missing.py"], "script 'missing.py' does not exist"),
    (["--timeout", "0", "x.py"], "--timeout must be a positive number of seconds"),
    (["--timeout", "nan", "x.py"], "--timeout must be a positive number of seconds, got nan"),
    (["--timeout", "inf", "x.py"], "--timeout must be a positive number of seconds, got inf"),
    (["--grace", "-1", "x.py"], "--grace must be a number of seconds >= 0, got -1.0"),
])
def test_bad_arguments(argv, message):
    result = _launcher(*argv)
    assert result.returncode == 2
    assert message in result.stderr


def test_backend_cuda_without_gpu_is_refused():
    from conftest import GPUS

    if GPUS:
        pytest.skip("this machine has a GPU")
    result = _launcher("--backend", "cuda", "samples/ring.py")
    assert result.returncode == 2 and "no CUDA GPU is visible" in result.stderr


def test_module_mode():
    result = _launcher("-n", "2", "-m", "platform")
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 2


def _pids(piddir):
    return [int(open(os.path.join(piddir, name)).read()) for name in os.listdir(piddir)]


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is not a survivor
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(")")[-1].split()[0] != "Z"


def test_a_failing_pe_stops_the_job_with_its_code(tmp_path):
    before = shm_entries()
    start = time.monotonic()
    result = shmem_run(4, "exits.py", "code3", tmp_path)
    elapsed = time.monotonic() - start
    assert result.returncode == 3, result.stderr
    assert "shmem-run: PE 2 exited with code 3; stopped 3 other PEs" in result.stderr
    pids = _pids(tmp_path)
    assert len(pids) == 4 and not any(_alive(pid) for pid in pids)
    assert not shm_left(before)
    # the failure itself comes after start-up; the stop must be quick
    assert elapsed < 5 + 10, elapsed


def test_fail_fast_within_five_seconds_of_the_failure(tmp_path):
    result = shmem_run(4, "exits.py", "code3", tmp_path)
    assert result.returncode == 3
    # time from the failing PE's exit to the launcher's exit: the grace period
    # is 3 s and the sleeping PEs die on SIGTERM at once
    marker = max(os.path.getmtime(tmp_path / f"pe{pe}.pid") for pe in range(4))
    assert time.time() - marker < 5


def test_a_pe_killed_by_a_signal_gives_128_plus_signal(tmp_path):
    result = shmem_run(2, "exits.py", "sigkill", tmp_path)
    assert result.returncode == 128 + signal.SIGKILL
    assert "PE 1 was killed by SIGKILL (exit 137); stopped 1 other PE" in result.stderr
    assert not any(_alive(pid) for pid in _pids(tmp_path))


def test_a_pe_that_leaves_early_fails_the_waiters_with_its_name(tmp_path):
    result = shmem_run(2, "exits.py", "lost", tmp_path)
    assert result.returncode == 5, result.stdout + result.stderr
    assert ("PE 1 died without leaving the job (it crashed, was killed or called os._exit) "
            "before reaching shmem.barrier_all") in result.stdout


def test_timeout_stops_everything(tmp_path):
    result = shmem_run(2, "exits.py", "sleep", tmp_path, launcher_args=["--timeout", "8"])
    assert result.returncode == 124
    assert "ran past --timeout 8 s; stopped 2 PEs" in result.stderr
    assert not any(_alive(pid) for pid in _pids(tmp_path))


def test_a_killed_launcher_leaves_nothing_behind(tmp_path, job_tmpdir):
    """SIGKILL leaves shmem-run no chance to clean up: its PEs must die with it,
    and its janitor must stop the MPS daemon (PEs sharing a GPU) and remove the
    job's directory and any shared-memory segment left (the simulator's heaps)."""
    piddir = tmp_path / "pids"
    piddir.mkdir()
    # the job's directory goes into TMPDIR only if its path is short
    tmpdir = job_tmpdir
    before = shm_entries()
    proc = subprocess.Popen(
        [sys.executable, "-m", "shmem_run", "-n", "2", str(ROOT / "tests/programs/exits.py"),
         "sleep", str(piddir)], cwd=ROOT, env=_clean_env({"TMPDIR": str(tmpdir)}),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    pids = []
    try:
        deadline = time.monotonic() + 60
        while len(os.listdir(piddir)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)  # the pid files are complete
        pids = _pids(piddir)
        assert len(pids) == 2
        (jobdir,) = tmpdir.iterdir()
        mps = _mps_daemon(jobdir)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (
                any(_alive(pid) for pid in pids + mps) or jobdir.exists()
                or shm_entries() - before):
            time.sleep(0.05)
        assert not any(_alive(pid) for pid in pids), "a PE outlived its launcher"
        assert not any(_alive(pid) for pid in mps), "the job's MPS daemon outlived its launcher"
        assert not jobdir.exists() and not shm_left(before)
    finally:
        for pid in pids:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if proc.poll() is None:
            proc.kill()


def test_the_job_directory_stays_short_for_unix_sockets(monkeypatch, tmp_path):
    """The launcher's rule is the MPI bootstrap's (tests/test_bootstrap.py runs it)."""
    monkeypatch.setattr(tempfile, "tempdir", "/scratch/t")
    assert _wire.socket_parent() == "/scratch/t"
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / ("x" * 80)))
    assert _wire.socket_parent() == "/tmp"


def _mps_daemon(jobdir):
    """The pid of the job's MPS control daemon, in a list ([] without MPS)."""
    try:
        return [int((jobdir / "mps-pipe" / "nvidia-cuda-mps-control.pid").read_text())]
    except (OSError, ValueError):
        return []


def _stop_from_outside(piddir, npes, signum):
    """Send ``signum`` to shmem-run running ``npes`` sleeping PEs, as a user's
    Ctrl-C, ``timeout`` or a batch scheduler does; returns ``(code, stderr)``."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "shmem_run", "-n", str(npes),
         str(ROOT / "tests/programs/exits.py"), "sleep", str(piddir)], cwd=ROOT,
        env=_clean_env({}), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while len(os.listdir(piddir)) < npes and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        proc.send_signal(signum)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, err


def test_sigint_is_forwarded(tmp_path):
    before = shm_entries()
    code, err = _stop_from_outside(tmp_path, 2, signal.SIGINT)
    assert code == 128 + signal.SIGINT, err
    assert "the job was stopped from outside by SIGINT (exit 130); stopped 2 PEs" in err
    assert not any(_alive(pid) for pid in _pids(tmp_path))
    assert not shm_left(before)


def test_a_stop_from_outside_blames_no_pe(tmp_path):
    """Before: "PE 1 was killed by SIGTERM (exit 143); stopped 1 other PE" when
    ``timeout`` stopped shmem-run and its 4 PEs."""
    before = shm_entries()
    code, err = _stop_from_outside(tmp_path, 4, signal.SIGTERM)
    assert code == 128 + signal.SIGTERM, err
    lines = [line for line in err.splitlines() if line.startswith("shmem-run:")]
    assert lines[-1] == ("shmem-run: the job was stopped from outside by SIGTERM (exit 143); "
                         "stopped 4 PEs"), err
    assert "PE 1" not in err and len(_pids(tmp_path)) == 4
    assert not any(_alive(pid) for pid in _pids(tmp_path))
    assert not shm_left(before)


def test_tag_output_prefixes_every_line():
    result = shmem_run(2, str(ROOT / "samples/ring.py"), launcher_args=["--tag-output"])
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.splitlines()) == [
        "[PE 0] PE 0 of 2 received 1", "[PE 1] PE 1 of 2 received 0"]


@pytest.mark.parametrize("argv,module,program", [
    (["-n", "2", "x.py", "-n", "5", "--flag"], None, ["x.py", "-n", "5", "--flag"]),
    (["--tag-output", "-m", "pkg", "-m", "x"], "pkg", ["-m", "x"]),
    (["x.py", "-m", "y"], None, ["x.py", "-m", "y"]),
])
def test_program_arguments_are_left_alone(argv, module, program):
    args = parse_args(build_parser(), argv)
    assert args.module == module and args.program == program


def test_parser_usage_mentions_module_mode():
    assert "-m module" in build_parser().format_usage()
    assert isinstance(build_parser(), argparse.ArgumentParser)


def test_the_launcher_and_its_janitor_start_without_numba():
    """Only the PEs need numba (about a second of CPU to import): the launcher
    and the janitor it starts at every launch import none of it, nor numpy,
    nor the library."""
    from conftest import run_hard

    script = ("import sys, shmem_run._cli, shmem_run._janitor; "
              "print(sorted({m.split('.')[0] for m in sys.modules} "
              "& {'numba', 'numba_shmem', 'numba_cuda', 'numpy'}))")
    result = run_hard([sys.executable, "-c", script], 60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_an_mps_daemon_that_does_not_start_is_a_clear_error(tmp_path):
    from shmem_run._mps import MpsDaemon, MpsError

    daemon = MpsDaemon("/bin/false", str(tmp_path))
    with pytest.raises(MpsError, match=r"could not start the MPS daemon \(/bin/false -d exited 1"
                                       r".*run with --no-mps"):
        daemon.start()
    daemon.stop()  # nothing was started: nothing to stop


def test_the_mps_error_quotes_the_daemons_log(tmp_path):
    from shmem_run._mps import MpsDaemon, MpsError

    control = tmp_path / "fake-mps-control"
    control.write_text('#!/bin/sh\necho "[1] early line" > "$CUDA_MPS_LOG_DIRECTORY/control.log"\n'
                       'echo "[2] Failed to bind the control socket" >> '
                       '"$CUDA_MPS_LOG_DIRECTORY/control.log"\nexit 1\n')
    control.chmod(0o755)
    daemon = MpsDaemon(str(control), str(tmp_path))
    with pytest.raises(MpsError, match=r"exited 1 with no message; its log .*control\.log ends: \[1\] early line "
                                       r"\| \[2\] Failed to bind the control socket\); fix MPS"):
        daemon.start()


FAKE_MPS_CONTROL = """#!/bin/sh
# -d: start a stand-in daemon and write its pid file; "quit" on stdin: stop it
pidfile="$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid"
if [ "$1" = "-d" ]; then
    setsid sleep 60 > /dev/null 2>&1 < /dev/null &
    echo $! > "$pidfile"
    exit 0
fi
read command
[ "$command" = quit ] && kill "$(cat "$pidfile")" && rm -f "$pidfile"
"""


def test_the_janitor_stops_what_a_dead_launcher_left(tmp_path):
    from shmem_run._mps import MpsDaemon

    control = tmp_path / "fake-mps-control"
    control.write_text(FAKE_MPS_CONTROL)
    control.chmod(0o755)
    jobdir = tmp_path / "job"
    jobdir.mkdir()
    MpsDaemon(str(control), str(jobdir)).start()
    (daemon,) = _mps_daemon(jobdir)
    assert _alive(daemon)
    read_end, write_end = os.pipe()
    janitor = subprocess.Popen([sys.executable, "-m", "shmem_run._janitor", str(control),
                                str(jobdir)], stdin=read_end, cwd=ROOT,
                               env={**os.environ, "SHMEM_RUN_JANITOR_JOB": "0" * 12 + " 2"})
    os.close(read_end)
    os.close(write_end)  # as when the launcher dies
    assert janitor.wait(timeout=30) == 0
    deadline = time.monotonic() + 10
    while _alive(daemon) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(daemon) and not jobdir.exists()


def test_mps_failure_ends_the_job_cleanly(monkeypatch, capsys):
    from shmem_run import _gpus, _run

    monkeypatch.setattr(_gpus, "mps_control", lambda: "/bin/false")
    plan = _plan(["-n", "2", str(ROOT / "samples/ring.py")], gpus=1)
    assert plan.use_mps
    assert _run.run(plan) == 1
    assert "shmem-run: could not start the MPS daemon" in capsys.readouterr().err
