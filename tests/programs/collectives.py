"""Every collective on TEAM_WORLD and on the even PEs, checked against numpy.

    collectives.py [device | host]

``device`` calls the block-scope functions from a kernel; ``host`` calls their
host forms on a stream.
"""

import sys

import numba_shmem as shmem  # first: on a machine without a GPU it picks the simulator
import numpy as np
from numba import cuda
from numba_shmem._host_collectives import block_kernel  # a user kernel calling the block form

N = 37  # elements per member: not a multiple of the vector width

REDUCE = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum,
          "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}


def source_of(rank, size, dtype):
    """What member ``rank`` contributes: size * N elements."""
    values = (np.arange(size * N) * 3 + rank * 7 + 1) % 11 + 1
    return values.astype(dtype)


def expected(name, rank, size, dtype):
    sources = [source_of(r, size, dtype) for r in range(size)]
    if name == "broadcast_block":
        return sources[1 % size][:N]
    if name == "fcollect_block":
        return np.concatenate([s[:N] for s in sources])
    if name == "alltoall_block":
        return np.concatenate([s[rank * N:(rank + 1) * N] for s in sources])
    op, what = name[:-len("_block")].split("_")
    block = rank if what == "reducescatter" else 0
    parts = [s[block * N:(block + 1) * N] for s in sources]
    with np.errstate(over="ignore"):
        result = parts[0]
        for part in parts[1:]:
            result = REDUCE[op](result, part)
    return result


HOST = False


def run(team, name, dtype):
    rank, size = shmem.team_my_pe(team), shmem.team_n_pes(team)
    source = shmem.array(size * N, dtype)
    dest = shmem.zeros(size * N, dtype)
    source.copy_to_device(source_of(rank, size, dtype))
    shmem.barrier_all()
    if HOST:
        stream = cuda.stream()
        root = (1 % size,) if name == "broadcast_block" else ()
        getattr(shmem, name[:-len("_block")])(team, dest, source, N, *root, stream=stream)
        stream.synchronize()
    else:
        block_kernel(name)[1, 64](team, dest, source, N, 1 % size)
        cuda.synchronize()
    want = expected(name, rank, size, dtype)
    got = dest.copy_to_host()[:want.size]
    assert np.array_equal(got, want), (name, dtype, rank, got, want)
    shmem.barrier_all()
    shmem.free(dest)
    shmem.free(source)


def main():
    global HOST
    HOST = sys.argv[1:] == ["host"]
    shmem.init()
    me, n = shmem.my_pe(), shmem.n_pes()
    evens = shmem.team_split_strided(shmem.TEAM_WORLD, 0, 2, (n + 1) // 2)
    names = sorted(shmem._device_api.COLLECTIVES)
    for dtype in (np.int64, np.float64):
        for name in names:
            if dtype == np.float64 and name.split("_")[0] in shmem._device_api.INT_ONLY_OPS:
                continue
            run(shmem.TEAM_WORLD, name, dtype)
            # the evens run the same collective in a team of their own, while
            # the odd PEs only allocate with them
            if evens != shmem.TEAM_INVALID:
                run(evens, name, dtype)
            else:  # match run()'s allocations, frees and world barriers
                size = (n + 1) // 2
                a = shmem.array(size * N, dtype)
                b = shmem.zeros(size * N, dtype)
                shmem.barrier_all()
                shmem.barrier_all()
                shmem.free(b)
                shmem.free(a)
    shmem.finalize()
    sys.stdout.write(f"PE {me}: collectives ok\n")


if __name__ == "__main__":
    main()
