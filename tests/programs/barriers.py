"""Device barriers launched with collective_launch.

    barriers.py ROUNDS          many barriers in one kernel, at every scope
    barriers.py too_large       a grid that cannot be resident: an error on every PE
"""

import sys

import numpy as np
from numba import cuda

import numba_shmem as shmem


@cuda.jit
def thread_rounds(flag, errors, rounds):
    right = (shmem.my_pe() + 1) % shmem.n_pes()
    if cuda.threadIdx.x == 0:
        for r in range(1, rounds + 1):
            shmem.p(flag, r, right)
            shmem.barrier_all()
            if flag[0] != r:
                errors[0] += 1
            shmem.sync_all()  # nobody writes round r + 1 before everyone checked round r


@cuda.jit
def block_rounds(flag, errors, rounds):
    right = (shmem.my_pe() + 1) % shmem.n_pes()
    for r in range(1, rounds + 1):
        if cuda.threadIdx.x == 0:
            shmem.p(flag, r, right)
        shmem.barrier_all_block()
        if cuda.threadIdx.x == 5 and flag[0] != r:
            errors[0] += 1
        shmem.sync_all_block()


@cuda.jit
def warp_rounds(flag, errors, rounds):
    right = (shmem.my_pe() + 1) % shmem.n_pes()
    if cuda.threadIdx.x < 32:
        for r in range(1, rounds + 1):
            if cuda.threadIdx.x == 0:
                shmem.p(flag, r, right)
            shmem.barrier_all_warp()
            if cuda.threadIdx.x == 3 and flag[0] != r:
                errors[0] += 1
            shmem.sync_all_warp()


def main():
    shmem.init()
    me = shmem.my_pe()
    if sys.argv[1] == "too_large":
        try:
            shmem.collective_launch(thread_rounds, 1 << 20, 1024, shmem.zeros(1, np.int64),
                                    cuda.to_device(np.zeros(1, np.int64)), 1)
        except shmem.ShmemUsageError as exc:
            sys.stdout.write(f"EXPECTED ShmemUsageError: {exc}\n")
        shmem.finalize()
        return
    rounds = int(sys.argv[1])
    for kernel in (thread_rounds, block_rounds, warp_rounds):
        flag = shmem.zeros(1, np.int64)
        errors = cuda.to_device(np.zeros(1, np.int64))
        # one block per PE: a device barrier is called once per PE (by one thread,
        # one warp or one block), never by every block of a larger grid
        shmem.collective_launch(kernel, 1, 64, flag, errors, rounds)
        cuda.synchronize()
        assert errors.copy_to_host()[0] == 0, f"{kernel.__name__}: a barrier let a PE through early"
        shmem.free(flag)
    shmem.barrier_all()
    sys.stdout.write(f"PE {me}: {rounds} rounds of barriers at thread, block and warp scope ok\n")
    shmem.finalize()


if __name__ == "__main__":
    main()
