"""A job that hangs as a stuck MPI job does: this process (the job's leader)
starts two children, each in a session (and process group) of its own, as
mpiexec's ranks are, that ignore SIGTERM; prints their pids; and waits."""

import subprocess
import sys
import time

STUCK = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"

# (not on the job's pipes: the harness sees the leader's end, as it sees mpiexec's)
children = [subprocess.Popen([sys.executable, "-c", STUCK], start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(2)]
print(" ".join(str(child.pid) for child in children), flush=True)
time.sleep(600)
