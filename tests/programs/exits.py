"""PEs that fail in chosen ways, for the launcher's fail-fast tests.

    exits.py MODE PIDDIR
MODE: code3 (PE 2 exits 3), sigkill (PE 1 kills itself), sleep (all sleep),
lost (PE 1 leaves without finalize while PE 0 waits in a barrier).
"""

import os
import signal
import sys
import time

import numba_shmem as shmem


def main():
    mode, piddir = sys.argv[1], sys.argv[2]
    shmem.init()
    me = shmem.my_pe()
    with open(os.path.join(piddir, f"pe{me}.pid"), "w") as f:
        f.write(str(os.getpid()))
    shmem.barrier_all()  # every pid file is written
    if mode == "code3" and me == 2:
        sys.exit(3)
    if mode == "sigkill" and me == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "lost":
        if me == 1:
            os._exit(0)
        try:
            shmem.barrier_all()
        except shmem.ShmemBootstrapError as exc:
            sys.stdout.write(f"PE {me}: {exc}\n")
            sys.exit(5)
    time.sleep(60)


if __name__ == "__main__":
    main()
