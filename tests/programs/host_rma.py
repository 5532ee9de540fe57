"""Host-initiated put/get on a stream and barrier_all_on_stream."""

import sys

import numba_shmem as shmem  # first: on a machine without a GPU it picks the simulator
import numpy as np
from numba import cuda


def main():
    shmem.init()
    me, n = shmem.my_pe(), shmem.n_pes()
    right, left = (me + 1) % n, (me - 1) % n
    stream = cuda.stream()
    data = shmem.zeros((4, 8), np.int64)
    from_host = np.arange(32, dtype=np.int64).reshape(4, 8) + 100 * me
    shmem.put(data, from_host, right, stream=stream)
    shmem.barrier_all_on_stream(stream)
    stream.synchronize()
    assert (data.copy_to_host() == np.arange(32).reshape(4, 8) + 100 * left).all()
    # get into host memory and into device memory
    back = np.zeros(32, np.int64)
    shmem.get(back, data, right, stream=stream)
    on_device = cuda.device_array(16, np.int64)
    shmem.get(on_device, data, right, stream=stream)
    stream.synchronize()
    assert (back == np.arange(32) + 100 * me).all()
    assert (on_device.copy_to_host() == np.arange(16) + 100 * me).all()
    shmem.barrier_all()  # the left neighbour overwrites our copy next: we have checked it
    # a device source
    shmem.put(data, cuda.to_device(np.full(8, 7, np.int64)), right, stream=stream)
    shmem.barrier_all_on_stream(stream)
    stream.synchronize()
    assert (data.copy_to_host().reshape(-1)[:8] == 7).all()
    try:
        shmem.put(data, np.zeros(40, np.int64), right)
    except shmem.ShmemUsageError as exc:
        sys.stdout.write(f"EXPECTED ShmemUsageError: {exc}\n")
    shmem.barrier_all()
    sys.stdout.write(f"PE {me}: host put/get ok\n")
    shmem.finalize()


if __name__ == "__main__":
    main()
