"""Prefill-to-decode KV-cache transfer.

PE 0 (prefill) holds one KV-cache slice per decode PE and, in one kernel, puts
each slice to its decode PE with ``put_signal_block`` (one block per decode PE).
Each decode PE waits on its signal in a kernel and verifies every element.

    shmem-run -n 4 samples/kv_transfer.py [--elements N]
"""

import argparse
import os
import sys

os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")  # small grids on purpose

import numba_shmem as shmem  # noqa: E402
import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402


@cuda.jit
def fill(cache, per_pe):
    """The prefill's KV cache: element i of decode PE d's slice is a function of (d, i)."""
    for i in range(cuda.grid(1), cache.size, cuda.gridsize(1)):
        decode = i // per_pe + 1
        cache[i] = decode * 1000003 + (i % per_pe)


@cuda.jit
def send(received, cache, ready, per_pe):
    decode = cuda.blockIdx.x + 1
    part = cache[(decode - 1) * per_pe:decode * per_pe]
    shmem.put_signal_block(received, part, ready, 1, shmem.SIGNAL_SET, decode)


@cuda.jit
def receive(received, ready, errors):
    if cuda.threadIdx.x == 0 and cuda.blockIdx.x == 0:
        shmem.signal_wait_until(ready, shmem.CMP_EQ, 1)
    cuda.syncthreads()
    me = shmem.my_pe()
    for i in range(cuda.grid(1), received.size, cuda.gridsize(1)):
        if received[i] != me * 1000003 + i:
            cuda.atomic.add(errors, 0, 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=1 << 16,
                        help="elements of the KV slice each decode PE receives")
    per_pe = parser.parse_args().elements
    shmem.init()
    me, npes = shmem.my_pe(), shmem.n_pes()
    if npes < 2:
        raise SystemExit("kv_transfer needs a prefill PE and at least one decode PE: shmem-run -n 4")
    received = shmem.zeros(per_pe, np.int64)
    ready = shmem.zeros(1, np.uint64)
    shmem.barrier_all()
    if me == 0:
        cache = cuda.device_array((npes - 1) * per_pe, np.int64)
        fill[64, 256](cache, per_pe)
        send[npes - 1, 256](received, cache, ready, per_pe)
        cuda.synchronize()
        sys.stdout.write(f"PE 0 (prefill) sent {per_pe} elements to each of {npes - 1} decode PEs\n")
    else:
        errors = cuda.to_device(np.zeros(1, np.int64))
        receive[1, 128](received, ready, errors)
        bad = int(errors.copy_to_host()[0])
        sys.stdout.write(f"PE {me} (decode) received {per_pe} elements, {bad} wrong\n")
        if bad:
            raise SystemExit(1)
    shmem.barrier_all()
    shmem.finalize()


if __name__ == "__main__":
    main()
