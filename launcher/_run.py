"""Run a plan: rendezvous, MPS, PEs; fail fast; leave nothing behind."""

import ctypes
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from . import _wire
from ._mps import MpsDaemon, MpsError
from ._rendezvous import UnixRendezvousServer

_POLL = 0.02
TIMEOUT_EXIT = 124
#: the variable that tells the janitor the job id and the number of PEs
JANITOR_JOB = "SHMEM_RUN_JANITOR_JOB"
#: how long the verdict waits for the PE whose departure failed the others to exit
_CULPRIT_WAIT_S = 15.0

#: the simulator's heap segments (numba_shmem._sim._heap.segment_path)
_SEGMENT = "/dev/shm/nshmem-{job_id}-{pe}"


def remove_segments(job_id, npes):
    """Unlink the simulator heaps of a job whose PEs died before unlinking them:
    only the names the job's PEs make, and only files of this user; what cannot
    be removed is left alone."""
    for pe in range(npes):
        path = _SEGMENT.format(job_id=job_id, pe=pe)
        try:
            if os.lstat(path).st_uid == os.getuid():
                os.unlink(path)
        except OSError:
            pass


def _exit_code(returncode):
    return 128 - returncode if returncode < 0 else returncode


def _signal_name(signum):
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _describe(pe, returncode):
    if returncode < 0:
        return f"PE {pe} was killed by {_signal_name(-returncode)} (exit {128 - returncode})"
    return f"PE {pe} exited with code {returncode}"


def _count(number, noun="PE"):
    return f"{number} {noun}{'s' if number != 1 else ''}"


_PR_SET_CHILD_SUBREAPER = 36


def _become_subreaper():
    """Adopt orphaned descendants (the MPS daemon forks itself away; a PE may
    leave a child), so that the launcher reaps them instead of leaving zombies
    under a PID 1 that does not reap (seen on the GPU machine)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: nothing to adopt


def _reap_orphans():
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _pump(stream, pe, sink):
    for line in iter(stream.readline, b""):
        sink.buffer.write(b"[PE %d] " % pe + line)
        sink.flush()
    stream.close()


class Job:
    """The live processes and resources of one run."""

    def __init__(self, plan):
        self.plan = plan
        self.children = []
        self.pumps = []
        # mode 0700; the rendezvous and the MPS daemon make Unix sockets in it
        self.jobdir = tempfile.mkdtemp(prefix="shmem-run-", dir=_wire.socket_parent())
        self.job_id = secrets.token_hex(6)
        self.server = None
        self.mps = None
        self.forwarded = None   # the signal from outside that stops the job
        self.stopped = set()    # the PEs a signal was sent to while they ran
        self.janitor = None
        self._janitor_pipe = None

    def _start_janitor(self, control):
        """A process that cleans up if this launcher is killed (see _janitor)."""
        read_end, self._janitor_pipe = os.pipe()
        try:
            # the job id goes in the environment, which only this user can read
            # (a command line is world-readable)
            env = {**os.environ, JANITOR_JOB: f"{self.job_id} {self.plan.npes}"}
            self.janitor = subprocess.Popen(
                [sys.executable, "-m", "shmem_run._janitor", control or "", self.jobdir],
                stdin=read_end, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                env=env, start_new_session=True)
        finally:
            os.close(read_end)

    def _stop_janitor(self):
        if self._janitor_pipe is not None:
            os.close(self._janitor_pipe)  # end of file: the janitor looks, finds nothing, exits
            self._janitor_pipe = None
        if self.janitor is not None:
            try:
                self.janitor.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.janitor.kill()
                self.janitor.wait()

    def start(self):
        plan = self.plan
        _become_subreaper()
        from ._gpus import mps_control

        self._start_janitor(mps_control() if plan.use_mps else None)
        secret = secrets.token_hex(16)
        path = os.path.join(self.jobdir, "rendezvous.sock")
        self.server = UnixRendezvousServer(path, secret, plan.npes)
        extra = {"SHMEM_RUN_SOCKET": path, "SHMEM_RUN_SECRET": secret,
                 "SHMEM_RUN_JOBID": self.job_id}
        if plan.use_mps:
            self.mps = MpsDaemon(mps_control(), self.jobdir)
            self.mps.start()
            extra.update(self.mps.env)
        for pe in range(plan.npes):
            if self.forwarded is not None:
                break  # stopped from outside while starting: start no more
            pipe = subprocess.PIPE if plan.tag_output else None
            child = subprocess.Popen(plan.command, env=plan.pe_env(pe, extra),
                                     stdout=pipe, stderr=pipe, start_new_session=True)
            self.server.admit(pe, child.pid)
            self.children.append(child)
            if plan.tag_output:
                for stream, sink in ((child.stdout, sys.stdout), (child.stderr, sys.stderr)):
                    pump = threading.Thread(target=_pump, args=(stream, pe, sink), daemon=True)
                    pump.start()
                    self.pumps.append(pump)

    def signal_all(self, signum, pes=None):
        """Send ``signum`` to the live PEs among ``pes`` (None: all of them)."""
        for pe, child in enumerate(self.children):
            if (pes is None or pe in pes) and child.poll() is None:
                try:
                    os.killpg(child.pid, signum)
                except ProcessLookupError:
                    continue
                self.stopped.add(pe)

    def stop_all(self, signum=signal.SIGTERM):
        """Send ``signum`` to every live PE that no signal was sent to yet (one
        forwarded from outside needs no second), then SIGKILL what is left after
        the grace period; returns how many PEs were stopped."""
        self.signal_all(signum, [pe for pe in range(len(self.children))
                                 if pe not in self.stopped])
        deadline = time.monotonic() + self.plan.grace
        while any(child.poll() is None for child in self.children) and \
                time.monotonic() < deadline:
            time.sleep(_POLL)
        # SIGKILL the whole process group: grandchildren too
        for child in self.children:
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for child in self.children:
            child.wait()
        return len(self.stopped)

    def wait(self):
        """Until all PEs exit 0, the first failure, the timeout or a signal from
        outside (``self.forwarded``). Returns ``(failed_pe or None, timed_out)``."""
        deadline = None if self.plan.timeout is None else time.monotonic() + self.plan.timeout
        while True:
            if self.forwarded is not None:
                return None, False  # the PEs that die of it did not fail the job
            codes = [child.poll() for child in self.children]
            for pe, code in enumerate(codes):
                if code not in (None, 0):
                    return pe, False
            if all(code == 0 for code in codes):
                return None, False
            if deadline is not None and time.monotonic() > deadline:
                return None, True
            time.sleep(_POLL)

    def culprit(self, failed):
        """The PE whose departure started the failure that ``failed`` exited
        with, and its exit code: PE ``failed`` itself unless its collective
        failed because another PE had left and that PE failed too."""
        chain, pe = [failed], failed
        while pe in self.server.blamed and self.server.blamed[pe] not in chain:
            pe = self.server.blamed[pe]
            chain.append(pe)
        if pe == failed:
            return failed
        try:  # it has left the job; give it the time to finish exiting
            code = self.children[pe].wait(timeout=_CULPRIT_WAIT_S)
        except subprocess.TimeoutExpired:
            return failed
        return pe if code != 0 else failed

    def cleanup(self):
        for pump in self.pumps:
            pump.join(timeout=1)
        if self.server is not None:
            self.server.close()
        if self.mps is not None:
            self.mps.stop()
        _reap_orphans()
        shutil.rmtree(self.jobdir, ignore_errors=True)
        remove_segments(self.job_id, self.plan.npes)
        self._stop_janitor()


def run(plan):
    """Run the job; return shmem-run's exit code."""
    for note in plan.notes:
        print(note, file=sys.stderr, flush=True)
    job = Job(plan)
    previous = {}

    def forward(signum, _frame):
        job.forwarded = signum
        job.signal_all(signum)

    for signum in (signal.SIGINT, signal.SIGTERM):
        previous[signum] = signal.signal(signum, forward)
    try:
        try:
            job.start()
        except MpsError as exc:
            print(f"shmem-run: {exc}", file=sys.stderr, flush=True)
            job.stop_all()
            return 1
        failed, timed_out = job.wait()
        if job.forwarded is not None:
            signum = job.forwarded
            stopped = job.stop_all(signum)
            print(f"shmem-run: the job was stopped from outside by {_signal_name(signum)} "
                  f"(exit {128 + signum}); stopped {_count(stopped)}",
                  file=sys.stderr, flush=True)
            return 128 + signum
        if timed_out:
            stopped = job.stop_all()
            print(f"shmem-run: the job ran past --timeout {plan.timeout:g} s; "
                  f"stopped {_count(stopped)}", file=sys.stderr, flush=True)
            return TIMEOUT_EXIT
        if failed is None:
            return 0
        failed = job.culprit(failed)
        code = job.children[failed].returncode
        stopped = job.stop_all()
        others = f"; stopped {_count(stopped, 'other PE')}" if stopped else ""
        print(f"shmem-run: {_describe(failed, code)}{others}", file=sys.stderr, flush=True)
        return _exit_code(code)
    except BaseException:
        job.stop_all()
        raise
    finally:
        job.cleanup()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
