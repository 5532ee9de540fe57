"""Is collective_launch's griddim=0 grid resident at once on every PE? Every
block adds 1 to a counter on every PE, then waits on its own PE's counter until
all blocks of all PEs have arrived: a block placed only after others left would
wait forever, which debug mode's wait timeout turns into an error naming the
PE. Argument: bytes of dynamic shared memory per block."""

import sys

import numba_shmem as shmem  # first: on a machine without a GPU it picks the simulator
import numpy as np
from numba import cuda

LAUNCHES = 5


@cuda.jit
def arrive_and_wait(counter):
    if cuda.threadIdx.x == 0:
        npes = shmem.n_pes()
        for pe in range(npes):
            shmem.atomic_add(counter, 1, pe)
        shmem.wait_until(counter, shmem.CMP_GE, cuda.gridDim.x * npes)


def main():
    sharedmem = int(sys.argv[1])
    shmem.init()
    counter = shmem.zeros(1, np.int64)
    for _ in range(LAUNCHES):
        counter.copy_to_device(np.zeros(1, np.int64))
        shmem.barrier_all()  # every counter is zero before any block adds to it
        grid = shmem.collective_launch(arrive_and_wait, 0, 256, counter, sharedmem=sharedmem)
        cuda.synchronize()
    got = int(counter.copy_to_host()[0])
    assert got == grid * shmem.n_pes(), f"{got} blocks arrived, not {grid} x {shmem.n_pes()}"
    sys.stdout.write(f"PE {shmem.my_pe()}: {LAUNCHES} grids of {grid} blocks of 256 threads "
                     "all resident with the other PEs'\n")
    shmem.barrier_all()
    shmem.finalize()


if __name__ == "__main__":
    main()
