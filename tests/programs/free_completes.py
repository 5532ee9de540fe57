"""``free`` completes what was issued before it: nothing still in flight toward
the freed array lands in the next allocation at its offset.

    free_completes.py ROUNDS                                     (shmem-run -n 2)
    NUMBA_SHMEM_NODE_SIZE=1 mpiexec -n 2 python free_completes.py ROUNDS

Each round PE 0 writes into PE 1's copy of ``x`` in three ways, each followed
at once by ``free(x)`` and ``y = zeros(...)`` (which takes ``x``'s offset):

- ``host put``: ``put(x[...], source[...], 1, stream=s)`` from device memory
  in PIECES slices, still on the stream (on the GPU copies on the copy engine;
  toward another node, requests still in the proxy);
- ``kernel put_nbi``: a kernel's ``put_nbi_block`` of PIECES slices with no
  ``quiet`` after them;
- ``host signal``: ``signal_op(x, r, SIGNAL_ADD, 1, stream=s)``, on the stream.

PE 1 then counts the elements of ``y`` that are not zero. Prints ``PE 1:
free after <way> ok`` per way, or how many elements held the freed data.
"""

import sys

import numba_shmem as shmem  # first: on a machine without a GPU it picks the simulator
import numpy as np
from numba import cuda


PIECES = 64


@cuda.jit
def put_nbi(x, source, pe):
    m = x.size // PIECES
    for i in range(PIECES):
        shmem.put_nbi_block(x[i * m:(i + 1) * m], source[i * m:(i + 1) * m], pe)


def main():
    rounds = int(sys.argv[1])
    shmem.init()
    me = shmem.my_pe()
    gpu = shmem._runtime.current().backend == "cuda"
    # on the GPU as large as the report (the copy takes milliseconds)
    n = (1 << 25) if gpu else 4096
    stream = cuda.stream()
    source = cuda.device_array(n, np.uint64)
    dirty = {"host put": 0, "kernel put_nbi": 0, "host signal": 0}
    for r in range(rounds):
        for way in dirty:
            x = shmem.array(n, np.uint64)
            if me == 0:
                source.copy_to_device(np.full(n, r + 7, np.uint64))
                if way == "host put":
                    m = n // PIECES
                    for i in range(PIECES):
                        shmem.put(x[i * m:(i + 1) * m], source[i * m:(i + 1) * m], 1,
                                  stream=stream)
                elif way == "kernel put_nbi":
                    put_nbi[1, 256 if gpu else 32](x, source, 1)
                else:
                    shmem.signal_op(x, r + 7, shmem.SIGNAL_ADD, 1, stream=stream)
            shmem.free(x)
            y = shmem.zeros(n, np.uint64)
            shmem.barrier_all()
            if me == 1:
                dirty[way] += int(np.count_nonzero(y.copy_to_host()))
            shmem.free(y)
    if me == 1:
        for way, count in dirty.items():
            print(f"PE 1: free after {way} " + (
                "ok" if not count else f"left {count} elements of the freed array's data in "
                f"the next one ({rounds} rounds of {n})"), flush=True)
    shmem.finalize()


if __name__ == "__main__":
    main()
