"""A heap growth step that fails on one PE only (cuMemMap, injected on PE 1):
every PE must raise, undo the step and stay in agreement; no descriptor leaks.

    NUMBA_SHMEM_HEAP_CHUNK=2M heap_growth.py
"""

import os

import numba_shmem as shmem  # first: on a machine without a GPU it picks the simulator
import numpy as np
from numba_shmem import _runtime
from numba_shmem._cuda import _vmm


def say(line):
    os.write(1, (line + "\n").encode())


def main():
    shmem.init()
    me, n = shmem.my_pe(), shmem.n_pes()
    real, armed = _vmm.call, [me == 1]

    def failing(name, *args, **kwargs):
        if name == "cuMemMap" and armed[0]:
            armed[0] = False
            raise shmem.ShmemDriverError("cuMemMap", "CUDA_ERROR_INJECTED", "by the test")
        return real(name, *args, **kwargs)

    _vmm.call = failing
    fds = len(os.listdir("/proc/self/fd"))
    try:
        shmem.zeros(8 << 20, np.uint8)
        say(f"PE {me}: NO ERROR")
    except shmem.ShmemDriverError as exc:
        say(f"PE {me}: {exc}")
    say(f"PE {me}: descriptors left open: {len(os.listdir('/proc/self/fd')) - fds}")
    # the PEs still agree: the same offset everywhere, and the memory works
    arr = shmem.zeros(8 << 20, np.uint8)
    offset = _runtime.current().heap.offset_of(arr, "test")
    shmem.put(arr, np.full(8 << 20, me + 1, np.uint8), (me + 1) % n)
    shmem.barrier_all()
    ok = (arr.copy_to_host() == (me - 1) % n + 1).all()
    say(f"PE {me}: offset {offset}, data {'ok' if ok else 'WRONG'}")
    shmem.finalize()


if __name__ == "__main__":
    main()
