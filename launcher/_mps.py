"""A private CUDA MPS daemon for one job, so that PEs sharing a GPU run at once."""

import os
import subprocess
import time


class MpsError(RuntimeError):
    """The job's MPS daemon could not be started."""


class MpsDaemon:
    def __init__(self, control, jobdir, create=True):
        self._control = control
        pipe = os.path.join(jobdir, "mps-pipe")
        log = os.path.join(jobdir, "mps-log")
        if create:
            os.mkdir(pipe, 0o700)
            os.mkdir(log, 0o700)
        self.env = {"CUDA_MPS_PIPE_DIRECTORY": pipe, "CUDA_MPS_LOG_DIRECTORY": log}
        self._started = False

    @classmethod
    def left_in(cls, control, jobdir):
        """The daemon a dead launcher started in ``jobdir``, to stop; stopping
        it does nothing if there is none."""
        daemon = cls(control, jobdir, create=False)
        daemon._started = os.path.exists(daemon._pidfile)
        return daemon

    @property
    def _pidfile(self):
        return os.path.join(self.env["CUDA_MPS_PIPE_DIRECTORY"], "nvidia-cuda-mps-control.pid")

    def _run(self, *args, stdin=None):
        return subprocess.run([self._control, *args], input=stdin, env={**os.environ, **self.env},
                              capture_output=True, text=True, timeout=30)

    def start(self):
        result = self._run("-d")
        if result.returncode != 0:
            said = result.stderr.strip()
            said = f": {said}" if said else " with no message"
            raise MpsError(f"could not start the MPS daemon ({self._control} -d exited "
                           f"{result.returncode}{said}{self._log_tail()}); fix MPS or run with "
                           "--no-mps")
        self._started = True

    def _log_tail(self, lines=5):
        """The end of the daemon's control log, which goes away with the job's
        directory (the daemon often says nothing on stderr)."""
        path = os.path.join(self.env["CUDA_MPS_LOG_DIRECTORY"], "control.log")
        try:
            with open(path, errors="replace") as f:
                tail = [line.strip() for line in f.read().splitlines()[-lines:] if line.strip()]
        except OSError:
            return ""
        return f"; its log {path} ends: " + " | ".join(tail) if tail else ""

    def stop(self):
        if not self._started:
            return
        self._started = False
        pidfile = self._pidfile
        try:
            with open(pidfile) as f:
                pid = int(f.read())
        except (OSError, ValueError):
            pid = None
        self._run(stdin="quit\n")
        # The daemon forked itself away; the launcher is its subreaper, so wait
        # for it and reap it (a PID 1 that does not reap would keep a zombie).
        # Where it is not our child, its pid file going away says it is done
        # (measured on the H200 machine: within 0.1 s of quit).
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if pid is not None:
                try:
                    if os.waitpid(pid, os.WNOHANG)[0]:
                        return
                except ChildProcessError:
                    pid = None
            elif not os.path.exists(pidfile):
                return
            time.sleep(0.02)
