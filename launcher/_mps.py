"""A private CUDA MPS daemon for one job, so that PEs sharing a GPU run at once."""

import os
import subprocess
import time


class MpsDaemon:
    def __init__(self, control, jobdir):
        self._control = control
        pipe = os.path.join(jobdir, "mps-pipe")
        log = os.path.join(jobdir, "mps-log")
        os.mkdir(pipe, 0o700)
        os.mkdir(log, 0o700)
        self.env = {"CUDA_MPS_PIPE_DIRECTORY": pipe, "CUDA_MPS_LOG_DIRECTORY": log}
        self._started = False

    def _run(self, *args, stdin=None):
        return subprocess.run([self._control, *args], input=stdin, env={**os.environ, **self.env},
                              capture_output=True, text=True, timeout=30)

    def start(self):
        result = self._run("-d")
        if result.returncode != 0:
            raise RuntimeError(f"shmem-run: could not start the MPS daemon: "
                               f"{result.stderr.strip() or result.returncode}")
        self._started = True

    def stop(self):
        if not self._started:
            return
        self._started = False
        self._run(stdin="quit\n")
        control = os.path.join(self.env["CUDA_MPS_PIPE_DIRECTORY"], "control")
        deadline = time.monotonic() + 10
        while os.path.exists(control) and time.monotonic() < deadline:
            time.sleep(0.05)
