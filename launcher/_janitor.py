"""Cleans up after a shmem-run that was killed with SIGKILL, which it cannot catch.

The launcher starts this in a session of its own (so that signals for the
launcher's group miss it), with stdin the read end of a pipe that only the
launcher holds. End of file there means the launcher is gone; the janitor then
stops the job's MPS daemon and removes the job's directory and the simulator's
shared-memory segments, as the launcher's own cleanup would have. After a
normal exit the launcher has done all of that, and the janitor finds nothing.

    SHMEM_RUN_JANITOR_JOB="JOBID NPES" python -m shmem_run._janitor CONTROL JOBDIR
    (CONTROL "" without MPS; the job id stays off the world-readable command line)
"""

import os
import shutil
import subprocess
import sys
import time

from ._mps import MpsDaemon
from ._run import JANITOR_JOB, remove_segments

#: a PE that the launcher's death is killing may still create a segment
_SECOND_PASS_S = 1.0


def main():
    control, jobdir = sys.argv[1:3]
    job_id, npes = os.environ[JANITOR_JOB].split()
    sys.stdin.buffer.read()  # returns at end of file: the launcher has exited or died
    if not os.path.isdir(jobdir):
        return  # the launcher cleaned up
    if control:
        try:
            MpsDaemon.left_in(control, jobdir).stop()
        except (OSError, subprocess.TimeoutExpired):
            pass  # the directory goes all the same
    remove_segments(job_id, int(npes))
    time.sleep(_SECOND_PASS_S)
    remove_segments(job_id, int(npes))
    shutil.rmtree(jobdir, ignore_errors=True)


if __name__ == "__main__":
    main()
