"""Cleans up after a shmem-run that was killed with SIGKILL, which it cannot catch.

The launcher starts this in a session of its own (so that signals for the
launcher's group miss it), with stdin the read end of a pipe that only the
launcher holds. End of file there means the launcher is gone; the janitor then
stops the job's MPS daemon and removes the job's directory and the simulator's
shared-memory segments, as the launcher's own cleanup would have. After a
normal exit the launcher has done all of that, and the janitor finds nothing.

    python -m shmem_run._janitor CONTROL JOBDIR JOBID   (CONTROL "" without MPS)
"""

import glob
import os
import shutil
import subprocess
import sys
import time

#: a PE that the launcher's death is killing may still create a segment
_SECOND_PASS_S = 1.0


def _stop_mps(control, jobdir):
    pipe = os.path.join(jobdir, "mps-pipe")
    pidfile = os.path.join(pipe, "nvidia-cuda-mps-control.pid")
    if not control or not os.path.exists(pidfile):
        return
    env = {**os.environ, "CUDA_MPS_PIPE_DIRECTORY": pipe,
           "CUDA_MPS_LOG_DIRECTORY": os.path.join(jobdir, "mps-log")}
    try:
        subprocess.run([control], input="quit\n", env=env, capture_output=True, text=True,
                       timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return
    deadline = time.monotonic() + 10
    while os.path.exists(pidfile) and time.monotonic() < deadline:
        time.sleep(0.05)


def _remove_segments(job_id):
    for path in glob.glob(f"/dev/shm/nshmem-{job_id}-*"):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def main():
    control, jobdir, job_id = sys.argv[1:4]
    sys.stdin.buffer.read()  # returns at end of file: the launcher has exited or died
    if not os.path.isdir(jobdir):
        return  # the launcher cleaned up
    _stop_mps(control, jobdir)
    _remove_segments(job_id)
    time.sleep(_SECOND_PASS_S)
    _remove_segments(job_id)
    shutil.rmtree(jobdir, ignore_errors=True)


if __name__ == "__main__":
    main()
