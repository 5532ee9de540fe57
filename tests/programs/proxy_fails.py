"""A proxy thread that fails: PE 1's proxy fails while it applies PE 0's
request (on the GPU its batch of word writes into the heap fails: the heap's address is
made one the driver refuses; on the simulator the heap's lock is taken from
under it: flock fails). PE 1 must say so in one line naming itself and the error; its next
call toward another node is an error naming the failure, not a hang; and PE
0's quiet, whose request is never answered, ends in the time-out error naming
the PEs it waited for. Both then leave the usual way.

    NUMBA_SHMEM_NODE_SIZE=1 NUMBA_SHMEM_WAIT_TIMEOUT=3 mpiexec -n 2 python proxy_fails.py DONE

DONE: a path PE 0 creates once it has its error, for PE 1 to stop waiting.
"""

import os
import sys
import time

import numba_shmem as shmem  # first: on a machine without a GPU it picks the simulator
import numpy as np
from numba_shmem import _runtime
from numba_shmem._transport import _engine


def _wait_for(condition, seconds=60):
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)


def main():
    done = sys.argv[1]
    shmem.init()
    me = shmem.my_pe()
    data = shmem.zeros(4, np.int64)
    sig = shmem.zeros(1, np.uint64)
    proxy = _runtime.current().proxy
    gpu = _runtime.current().backend == "cuda"
    if me == 1:
        if gpu:
            proxy._state.ctl[_engine.HEAP_BASE] = 8  # (no device memory there)
        else:
            os.close(proxy._lockfd)
    shmem.barrier_all()
    if me == 1:
        _wait_for(lambda: proxy._failure is not None)
        try:
            shmem.put(data, np.ones(4, np.int64), 0)
            print("PE 1: the put returned", flush=True)
        except shmem.ShmemUsageError as exc:
            print(f"PE 1: {exc}", flush=True)
        _wait_for(lambda: os.path.exists(done))
        return
    try:
        if gpu:
            shmem.put(data, np.ones(4, np.int64), 1)
        else:
            shmem.signal_op(sig, 1, shmem.SIGNAL_ADD, 1)
        shmem.quiet()
        print("PE 0: the quiet returned", flush=True)
    except shmem.ShmemTimeoutError as exc:
        print(f"PE 0: {exc}", flush=True)
    open(done, "w").close()


if __name__ == "__main__":
    main()
