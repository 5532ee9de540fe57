"""A PE on another node that no longer answers: PE 1 stops its proxy (as if its
proxy thread had died), PE 0's get from it must end in an error naming both
PEs and the operation, within the wait time-out, not hang. Both then leave the
usual way, so that nothing is left behind.

    NUMBA_SHMEM_NODE_SIZE=1 NUMBA_SHMEM_WAIT_TIMEOUT=3 mpiexec -n 2 python far_timeout.py DONE

DONE: a path PE 0 creates once it has its error, for PE 1 to stop waiting.
"""

import os
import sys
import time

import numba_shmem as shmem  # first: on a machine without a GPU it picks the simulator
import numpy as np
from numba_shmem import _runtime


def main():
    done = sys.argv[1]
    shmem.init()
    me = shmem.my_pe()
    data = shmem.zeros(4, np.int64)
    shmem.barrier_all()
    if me == 1:
        _runtime.current().proxy.close()
        deadline = time.monotonic() + 60
        while not os.path.exists(done) and time.monotonic() < deadline:
            time.sleep(0.05)  # alive, but nobody serves its heap
        return
    start = time.monotonic()
    try:
        shmem.get(np.zeros(4, np.int64), data, 1)
        print("PE 0: the get returned", flush=True)
    except shmem.ShmemTimeoutError as exc:
        print(f"PE 0 after {time.monotonic() - start:.0f} s: {exc}", flush=True)
    open(done, "w").close()


if __name__ == "__main__":
    main()
