"""A target checks what other nodes ask of its heap: requests that run past
the heap it has in use are refused, not applied, and the sender raises the
refusal; the target's proxy goes on serving.

    NUMBA_SHMEM_NODE_SIZE=1 mpiexec -n 2 python proxy_trust.py

PE 0 (on another node than PE 1) runs a kernel whose ``iput`` strides past
PE 1's heap, then one whose ``iget`` does, each followed by ``barrier_all``
(which completes them); each must end in an error naming the operation, PE 1
and the bytes (on the GPU the kernel's requests are refused after it posted
them: the host's next call raises; on the simulator the get raises in the
kernel). Then a put that is right must still arrive. Prints ``PE 0:
<error>`` for each and ``PE 1: the proxy still serves``.
"""

import numba_shmem as shmem  # first: on a machine without a GPU it picks the simulator
import numpy as np
from numba import cuda

STRIDE = 1 << 27  # elements of 8 bytes: 1 GiB, past any test's heap


@cuda.jit
def iput_past(dest, source):
    if cuda.grid(1) == 0:
        shmem.iput(dest, source, STRIDE, 1, 2, 1)


@cuda.jit
def iget_past(dest, source):
    if cuda.grid(1) == 0:
        shmem.iget(dest, source, 1, STRIDE, 2, 1)


def main():
    shmem.init()
    me = shmem.my_pe()
    assert shmem.n_pes() == 2
    x = shmem.zeros(4, np.int64)
    local = cuda.to_device(np.arange(4, dtype=np.int64))
    shmem.barrier_all()
    for kernel, args in ((iput_past, (x, local)), (iget_past, (local, x))):
        if me == 0:
            try:
                kernel[1, 1](*args)
                shmem.barrier_all()
                print(f"PE 0: {kernel.__name__} raised nothing", flush=True)
            except shmem.ShmemUsageError as exc:
                print(f"PE 0: {exc}", flush=True)
                shmem.barrier_all()  # (the one the error left out)
        else:
            shmem.barrier_all()
    if me == 0:
        shmem.put(x, np.full(4, 7, np.int64), 1)
    shmem.barrier_all()
    if me == 1:
        got = x.copy_to_host()
        print("PE 1: the proxy still serves" if (got == 7).all() else f"PE 1: x is {got}",
              flush=True)
    shmem.finalize()


if __name__ == "__main__":
    main()
