"""Each PE writes its number into its right neighbour's symmetric integer
(with ``shmem.p``, which reaches a PE on another node as well as one on this).

    shmem-run -n 4 samples/ring.py
    mpirun -n 4 python samples/ring.py
"""

import os
import sys

os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")  # one-block kernel on purpose

import numba_shmem as shmem  # noqa: E402
import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402


@cuda.jit
def send_right(received):
    if cuda.grid(1) == 0:
        right = (shmem.my_pe() + 1) % shmem.n_pes()
        shmem.p(received, shmem.my_pe(), right)


def main():
    shmem.init()
    received = shmem.zeros(1, np.int32)
    send_right[1, 32](received)
    shmem.barrier_all()
    value = int(received.copy_to_host()[0])
    sys.stdout.write(f"PE {shmem.my_pe()} of {shmem.n_pes()} received {value}\n")
    shmem.free(received)
    shmem.finalize()


if __name__ == "__main__":
    main()
