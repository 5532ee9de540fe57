"""A PE on another node that no longer answers: PE 1 stops its proxy (as if its
proxy thread had died), PE 0's get from it must end in an error naming both
PEs and the operation, within the wait time-out, not hang.

    NUMBA_SHMEM_NODE_SIZE=1 NUMBA_SHMEM_WAIT_TIMEOUT=3 mpiexec -n 2 python far_timeout.py
"""

import os
import time

import numba_shmem as shmem  # first: on a machine without a GPU it picks the simulator
import numpy as np
from numba_shmem import _runtime


def main():
    shmem.init()
    me = shmem.my_pe()
    data = shmem.zeros(4, np.int64)
    shmem.barrier_all()
    if me == 1:
        _runtime.current().proxy.close()
        time.sleep(30)  # alive, but nobody serves its heap (mpiexec ends it)
        return
    start = time.monotonic()
    try:
        shmem.get(np.zeros(4, np.int64), data, 1)
    except shmem.ShmemTimeoutError as exc:
        print(f"PE 0 after {time.monotonic() - start:.0f} s: {exc}", flush=True)
        os._exit(3)
    print("PE 0: the get returned", flush=True)
    os._exit(1)


if __name__ == "__main__":
    main()
