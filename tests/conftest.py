"""Shared fixtures: jobs through the real launcher with a hard timeout, skips
with reasons, hypothesis profiles."""

import contextlib
import fcntl
import functools
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = Path(__file__).resolve().parent / "programs"

settings.register_profile("ci", derandomize=True, deadline=None, max_examples=60,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", deadline=None, max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_configure(config):
    """Under pytest-xdist, hand tests to the workers one at a time (as
    ``--maxschedchunk 1`` does) unless the command line says otherwise: by default
    xdist first gives each worker a quarter of its share in one piece, so the
    ``long`` tests, collected first, would all go to the first worker."""
    if getattr(config.option, "maxschedchunk", 0) is None:
        config.option.maxschedchunk = 1


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """The tests marked ``nodes`` last, by when the compiled proxy's loop
    they need has been compiled beside the others (``_warm_from_the_start``);
    within each part the tests marked ``long`` first (otherwise in order):
    under pytest-xdist they start at once on different workers instead of
    last on one."""
    items.sort(key=lambda item: (item.get_closest_marker("nodes") is not None,
                                 item.get_closest_marker("long") is None))
    if not config.option.collectonly and any(item.get_closest_marker("nodes") for item in items):
        _warm_from_the_start()


#: the thread that compiles the proxy's loop from the start of a run
_WARMING = []


def _warm_from_the_start():
    """Compile the proxy's loop (``engine_compiled``) from the start of a run
    that has tests marked ``nodes``, in the background of each test process
    (the first compiles it, the others then load it), while the tests of one
    node run: a test of emulated nodes that came first compiled it while the
    other worker's waited for it (2 minutes or more of a core of two, at every
    CI run)."""
    if _WARMING or mpi_missing():
        return
    thread = threading.Thread(target=_warm_quietly, name="warm the proxy's loop", daemon=True)
    thread.start()
    _WARMING.append(thread)


def _warm_quietly():
    # (a failure here is the first test's to report: it compiles it again)
    with contextlib.suppress(BaseException):
        engine_compiled()


def pytest_sessionfinish(session):
    """Stop the compile if the run ends first (interrupted): its job runs in
    a session of its own."""
    for proc in list(RUNNING):
        stop_job(proc)
    for thread in _WARMING:
        thread.join()


def _gpus():
    from shmem_run import _gpus

    return _gpus.count()


GPUS = _gpus()
BACKEND = "cuda" if GPUS else "sim"

needs_gpu = pytest.mark.skipif(GPUS == 0, reason="needs a CUDA GPU; this machine has none")


#: the rank variables of launchers that numba-shmem refuses to run under (a CI
#: job started by one must not make every test's process refuse)
_FOREIGN_RANKS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "SLURM_PROCID", "JSM_NAMESPACE_RANK")


def _clean_env(extra):
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("SHMEM_RUN_", "NUMBA_SHMEM_", "OMPI_", "PMI"))
           and key not in _FOREIGN_RANKS}
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    env["NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS"] = "0"
    env.update(extra or {})
    return env


RUNNING = set()  # the jobs now running, each the leader of its process group


def _stat(pid):
    """The fields of ``/proc/<pid>/stat`` after the command's name (state
    first), or None where the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _started(pid, fields=None):
    """Process ``pid``'s start time (clock ticks since boot), or None where it
    is gone or a zombie (``fields``: its ``_stat``, where read already)."""
    fields = fields or _stat(pid)
    return None if not fields or fields[0] in "ZX" else int(fields[19])


def _descendants(pid):
    """Every process below ``pid`` now, with its start time (so that a pid
    reused later is not taken for it)."""
    children = {}
    for entry in os.listdir("/proc"):
        fields = _stat(entry) if entry.isdigit() else None
        start = _started(entry, fields) if fields else None
        if start is not None:
            children.setdefault(int(fields[1]), []).append((int(entry), start))
    found, todo = {}, [pid]
    while todo:
        for child, start in children.get(todo.pop(), ()):
            found[child] = start
            todo.append(child)
    return found


def stop_job(proc, grace=30):
    """SIGTERM first, so that shmem-run stops its PEs and its MPS daemon (which
    lives in a session of its own) and mpiexec its ranks (each in a process
    group of its own), then SIGKILL what is left of the group and of every
    process that was below the job's leader: a rank that outlives its
    mpiexec is no longer in the group, nor below the leader."""
    family = _descendants(proc.pid)  # (before any of them ends)
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if proc.poll() is not None and not any(
                _started(pid) == start for pid, start in family.items()):
            return
        time.sleep(0.05)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for pid, start in family.items():
        if _started(pid) == start:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _stop_running_jobs(signum, frame):
    """pytest killed from outside (a CI or batch timeout) takes its jobs with it:
    they run in their own sessions and would otherwise keep PEs spinning on the GPU."""
    for proc in list(RUNNING):
        stop_job(proc)
    raise KeyboardInterrupt(f"stopped by signal {signum}")


signal.signal(signal.SIGTERM, _stop_running_jobs)


def run_hard(command, timeout, env=None, cwd=ROOT, grace=30):
    """Run ``command`` in its own process group; at ``timeout`` stop it and
    every process below it (``stop_job``, SIGKILL ``grace`` seconds after
    SIGTERM) so a hung PE fails the test instead of wedging the suite."""
    proc = subprocess.Popen(command, cwd=cwd, env=_clean_env(env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    RUNNING.add(proc)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop_job(proc, grace)
        out, err = proc.communicate()
        pytest.fail(f"{' '.join(map(str, command))} hung past {timeout} s\n"
                    f"stdout:\n{out}\nstderr:\n{err}")
    finally:
        RUNNING.discard(proc)
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def shmem_run(npes, program, *args, timeout=120, env=None, launcher_args=()):
    """Run ``tests/programs/<program>`` (or a path) with ``npes`` PEs through shmem-run."""
    path = PROGRAMS / program if not os.path.isabs(program) else Path(program)
    command = [sys.executable, "-m", "shmem_run", "-n", str(npes), *launcher_args,
               str(path), *map(str, args)]
    return run_hard(command, timeout, env)


def python(program, *args, timeout=120, env=None):
    """Run a program as one plain process (no launcher)."""
    return run_hard([sys.executable, str(PROGRAMS / program), *map(str, args)], timeout, env)


def shm_entries():
    return {name for name in os.listdir("/dev/shm") if name.startswith("nshmem-")}


def shm_left(before, settle=2.0):
    """The simulator's segments made since ``before`` (a ``shm_entries()``) that
    are still there ``settle`` seconds on: what a job left behind. A job running
    beside the test makes its own and unlinks them within moments of starting
    (once every peer has mapped them), so they do not count."""
    left = shm_entries() - before
    deadline = time.monotonic() + settle
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left &= shm_entries()
    return left


@pytest.fixture
def job_tmpdir():
    """A TMPDIR of the test's own, short enough for the bootstraps' sockets
    (so they make their private nshmem-* directories in it, not in /tmp, where
    other jobs make theirs): check what a job left there with
    ``nshmem_dirs(job_tmpdir)``."""
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="nt-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def nshmem_dirs(parent):
    """The private nshmem-* directories in ``parent``."""
    return {name for name in os.listdir(parent) if name.startswith("nshmem-")}


def mpiexec():
    found = shutil.which("mpiexec")
    if found is None:
        bindir = Path(sys.executable).parent
        candidate = bindir / "mpiexec"
        found = str(candidate) if candidate.exists() else None
    return found


def mpiexec_job(npes, *command, env=None):
    """``(argv, env)`` that run ``command`` as ``npes`` ranks under mpiexec on
    this machine's backend: as root with --allow-run-as-root --oversubscribe;
    with no ssh/rsh agent (Open MPI 4 insists on one even for a single node);
    unbound (Open MPI binds a small job's ranks to the first cores: the jobs of
    tests running at once, and a PE with its proxy thread, would share them).
    A job that spans nodes (NUMBA_SHMEM_NODE_SIZE) finds the proxy's loop
    compiled (``engine_compiled``)."""
    if env and "NUMBA_SHMEM_NODE_SIZE" in env:
        engine_compiled()
    flags = ["--allow-run-as-root", "--oversubscribe"] if os.geteuid() == 0 else []
    flags += ["--bind-to", "none"]
    # (Open MPI 5 queries its UCX one-sided component at each window, and where
    # UCX finds no network prints that the query failed; the proxy's window
    # then takes the shared-memory component, as it does without UCX)
    base = {"NUMBA_SHMEM_BACKEND": BACKEND, "OMPI_MCA_plm_rsh_agent": "false",
            "OMPI_MCA_osc": "^ucx"}
    if BACKEND == "sim":
        base["NUMBA_ENABLE_CUDASIM"] = "1"
    return [mpiexec(), *flags, "-n", str(npes), *map(str, command)], {**base, **(env or {})}


def mpi_missing():
    """Why jobs under mpiexec cannot run here, or None."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return "mpi4py is not installed (pip install 'numba-shmem[mpi]')"
    return None if mpiexec() else "no mpiexec on PATH"


@functools.cache
def engine_compiled():
    """The compiled proxy's loop in numba's cache before the first job that
    spans nodes needs it (tests/programs/warm_engine.py): one test process
    compiles it while the others wait on a lock, so that the PEs of the first
    such jobs do not each compile it at once (minutes on two cores), and tests
    of one node never wait for it."""
    if mpi_missing():
        return
    import fcntl

    cache = ROOT / "numba_shmem/_transport/__pycache__"
    cache.mkdir(exist_ok=True)
    with open(cache / "warm-engine.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # (released when closed)
        argv, env = mpiexec_job(1, sys.executable, PROGRAMS / "warm_engine.py")
        result = run_hard(argv, 600, env)
    assert "ok" in result.stdout.split(), result.stdout + result.stderr


@contextlib.contextmanager
def _mps_env():
    """What an mpiexec job's environment adds so that its PEs share this
    machine's GPU at once: a private MPS daemon's directories (shmem-run
    starts one of its own; mpiexec does not). Without one, PEs on one GPU
    time-slice (4.5 ms a round trip). {} on the simulator."""
    import tempfile

    from shmem_run._gpus import mps_control
    from shmem_run._mps import MpsDaemon

    control = mps_control() if BACKEND == "cuda" else None
    if control is None:
        yield {}
        return
    with tempfile.TemporaryDirectory() as jobdir:
        daemon = MpsDaemon(control, jobdir)
        daemon.start()
        try:
            yield dict(daemon.env)
        finally:
            daemon.stop()


@pytest.fixture
def mpi_gpu_env():
    """``_mps_env`` for one test: a daemon of its own, as shmem-run gives each
    job (a kernel that stops on purpose makes its MPS server fail every
    client, those of the jobs after it included)."""
    with _mps_env() as env:
        yield env


@pytest.fixture(scope="session")
def once_per_run(tmp_path_factory):
    """``once_per_run(name, make)``: the text ``make()`` returns, made by one
    test process of the run and read by the others (under pytest-xdist each
    worker that ran one of a module's tests set up its module fixtures again:
    the PTX of every collective, a minute and a half on two cores, was
    compiled three times in one run). A ``make()`` that fails leaves nothing:
    the next one tries again."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # (this run's, shared by its workers)

    def get(name, make):
        path = root / f"once-{name}.txt"
        with open(root / f"once-{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not path.exists():
                part = path.with_suffix(".part")
                part.write_text(make())
                part.rename(path)
            return path.read_text()
    return get


@pytest.fixture(scope="module")
def mpi_gpu_env_module():
    """``_mps_env`` for a module's long-lived PEs."""
    with _mps_env() as env:
        yield env
