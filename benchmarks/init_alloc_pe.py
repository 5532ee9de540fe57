"""One PE of the init/allocation benchmark: time init() and the first and
second allocations, and report them from PE 0 as one JSON line."""

import json
import sys
import time

import numpy as np

import numba_shmem as shmem


def main():
    nbytes = int(sys.argv[1])
    start = time.perf_counter()
    shmem.init()
    initialized = time.perf_counter()
    first = shmem.array(nbytes, np.uint8)
    allocated = time.perf_counter()
    second = shmem.array(nbytes, np.uint8)
    again = time.perf_counter()
    runtime = shmem._runtime.current()
    times = np.array([initialized - start, allocated - initialized, again - allocated])
    table = shmem.zeros((shmem.n_pes(), 3), np.float64)
    shmem.peer_array(table, 0)[shmem.my_pe()].copy_to_device(times)
    shmem.barrier_all()
    if shmem.my_pe() == 0:
        worst = table.copy_to_host().max(axis=0)
        sys.stdout.write(json.dumps({
            "npes": shmem.n_pes(), "backend": runtime.backend, "bytes": nbytes,
            "init_s": worst[0], "first_alloc_s": worst[1], "second_alloc_s": worst[2],
        }) + "\n")
    for arr in (table, second, first):
        shmem.free(arr)
    shmem.finalize()


if __name__ == "__main__":
    main()
