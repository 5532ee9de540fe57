"""collective_launch keeps a grid's shape: a kernel launched on (X, Y) blocks
sees gridDim (X, Y). Arguments: X Y."""

import sys

import numba_shmem as shmem  # first: on a machine without a GPU it picks the simulator
import numpy as np
from numba import cuda


@cuda.jit
def record_shape(shape):
    if cuda.threadIdx.x == 0 and cuda.blockIdx.x == 0 and cuda.blockIdx.y == 0:
        shape[0] = cuda.gridDim.x
        shape[1] = cuda.gridDim.y


def main():
    shmem.init()
    grid = (int(sys.argv[1]), int(sys.argv[2]))
    shape = cuda.to_device(np.zeros(2, np.int64))
    launched = shmem.collective_launch(record_shape, grid, 32, shape)
    cuda.synchronize()
    sys.stdout.write(f"PE {shmem.my_pe()}: launched {launched}, "
                     f"gridDim {tuple(int(v) for v in shape.copy_to_host())}\n")
    shmem.finalize()


if __name__ == "__main__":
    main()
