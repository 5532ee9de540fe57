"""Every collective on TEAM_WORLD and on the even PEs, checked against numpy.

    collectives.py [device | host | host_errors]

``device`` calls the block, warp and thread forms from kernels; ``host`` calls
the host forms on a stream; ``host_errors`` gives the host forms bad
arguments, then checks that the job still works.
"""

import sys

import numba_shmem as shmem  # first: on a machine without a GPU it picks the simulator
import numpy as np
from numba import cuda

N = 37  # elements per member: not a multiple of the vector width

REDUCE = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum,
          "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}


def source_of(rank, size, dtype, n=N):
    """What member ``rank`` contributes: size * n elements."""
    values = (np.arange(size * n) * 3 + rank * 7 + 1) % 11 + 1
    return values.astype(dtype)


def expected(name, rank, size, dtype, n=N):
    kind = shmem._device_api.collective_kind(name)
    sources = [source_of(r, size, dtype, n) for r in range(size)]
    if kind == "broadcast":
        return sources[1 % size][:n]
    if kind == "fcollect":
        return np.concatenate([s[:n] for s in sources])
    if kind == "alltoall":
        return np.concatenate([s[rank * n:(rank + 1) * n] for s in sources])
    op, what = kind.split("_")
    block = rank if what == "reducescatter" else 0
    parts = [s[block * n:(block + 1) * n] for s in sources]
    with np.errstate(over="ignore"):
        result = parts[0]
        for part in parts[1:]:
            result = REDUCE[op](result, part)
    return result


HOST = False
_KERNELS = {}


def block_kernel(name):
    """A user's kernel that calls the collective ``name`` (a block or warp
    form, or a kind alone: its thread form, which thread 0 calls); ``root`` is
    passed on only where the collective takes one."""
    if name not in _KERNELS:
        fn = getattr(shmem, name)
        scoped = name.endswith(("_warp", "_block"))
        if shmem._device_api.collective_kind(name) == "broadcast":
            @cuda.jit
            def kernel(team, dest, source, nelems, root):
                if scoped or cuda.threadIdx.x == 0:
                    fn(team, dest, source, nelems, root)
        else:
            @cuda.jit
            def kernel(team, dest, source, nelems, root):
                if scoped or cuda.threadIdx.x == 0:
                    fn(team, dest, source, nelems)
        _KERNELS[name] = kernel
    return _KERNELS[name]


#: threads of the block that calls each form: a whole block, a warp (20
#: threads: the block's last warp is partial), one thread of 32
THREADS = {"_block": 64, "_warp": 20, "": 32}


def run(team, name, dtype, n=N):
    rank, size = shmem.team_my_pe(team), shmem.team_n_pes(team)
    source = shmem.array(size * n, dtype)
    dest = shmem.zeros(size * n, dtype)
    source.copy_to_device(source_of(rank, size, dtype, n))
    shmem.barrier_all()
    if HOST:
        stream = cuda.stream()
        root = (1 % size,) if name == "broadcast_block" else ()
        getattr(shmem, name[:-len("_block")])(team, dest, source, n, *root, stream=stream)
        stream.synchronize()
    else:
        threads = THREADS[name[len(shmem._device_api.collective_kind(name)):]]
        block_kernel(name)[1, threads](team, dest, source, n, 1 % size)
        cuda.synchronize()
    want = expected(name, rank, size, dtype, n)
    got = dest.copy_to_host()
    assert np.array_equal(got[:want.size], want), (name, dtype, n, rank, got, want)
    assert not got[want.size:].any(), (name, dtype, n, rank, "wrote past its part")
    shmem.barrier_all()
    shmem.free(dest)
    shmem.free(source)


def in_place(n):
    """Host reductions with dest = source, large enough that a member writing its
    result before the others have read its source would show."""
    me, npes = shmem.my_pe(), shmem.n_pes()
    x = shmem.zeros(n * npes, np.int64)
    for what in ("reduce", "reducescatter"):
        x.copy_to_device(np.arange(n * npes, dtype=np.int64) + 1000 * me)
        shmem.barrier_all()
        stream = cuda.stream()
        getattr(shmem, f"sum_{what}")(shmem.TEAM_WORLD, x, x, n, stream=stream)
        stream.synchronize()
        block = me if what == "reducescatter" else 0
        want = sum(np.arange(block * n, (block + 1) * n) + 1000 * pe for pe in range(npes))
        got = x.copy_to_host()
        assert np.array_equal(got[:n], want), (what, int((got[:n] != want).sum()))
        rest = np.arange(n * npes) + 1000 * me
        assert np.array_equal(got[n:], rest[n:]), f"{what} wrote past nelems"
        shmem.barrier_all()
    shmem.free(x)


def host_errors():
    n = shmem.n_pes()
    source = shmem.zeros(n * N, np.float64)
    dest = shmem.zeros(n * N, np.float64)
    plain = cuda.device_array(n * N, np.float64)
    world = shmem.TEAM_WORLD
    for call, message in (
            (lambda: shmem.fcollect(world, dest, source, -1), "nelems must be an int >= 0, got -1"),
            (lambda: shmem.fcollect(world, dest, source, N + 1),
             f"dest holds {n * N} elements but needs {n * (N + 1)} for nelems={N + 1} on {n} PEs"),
            (lambda: shmem.alltoall(world, dest, shmem.zeros(n * N, np.int64), N),
             "dest and source must have the same dtype, got float64 and int64"),
            (lambda: shmem.xor_reduce(world, dest, source, N), "xor needs an integer dtype"),
            (lambda: shmem.broadcast(world, dest, source, N, n), "root must be a PE of the team"),
            (lambda: shmem.sum_reduce(world, dest, plain, N),
             "shmem.sum_reduce (source): the array is not on the symmetric heap"),
            (lambda: shmem.fcollect(world, plain, source, N),
             "shmem.fcollect (dest): the array is not on the symmetric heap"),
            (lambda: shmem.fcollect(99, dest, source, N), "team=99 is not a team of this PE"),
            (lambda: shmem.fcollect(world, source, source, N),
             "dest and source overlap; pass separate arrays"),
            (lambda: shmem.sum_reduce(world, source[1:], source, N),
             "dest and source overlap; pass separate arrays or the same array (in place)")):
        try:
            call()
        except shmem.ShmemUsageError as exc:
            assert message in str(exc), (message, str(exc))
        else:
            raise AssertionError(f"no error; expected {message!r}")
    if shmem._runtime.current().backend == "sim":  # the GPU does not check this
        try:
            block_kernel("sum_reduce_block")[1, 64](world, source, source, N, 0)
        except shmem.ShmemUsageError as exc:
            assert "dest and source overlap; the device forms need separate arrays" in str(exc)
        else:
            raise AssertionError("no error for an in-place block reduction")
        shmem.barrier_all()
    run(world, "sum_reduce_block", np.float64)  # still works


def main():
    global HOST
    HOST = sys.argv[1:] in (["host"], ["host_errors"])
    if HOST:  # a 64-byte slice per block: N elements take several blocks, the last one short
        shmem._stream._collectives._CHUNK_BYTES = 64
    shmem.init()
    me, n = shmem.my_pe(), shmem.n_pes()
    if sys.argv[1:] == ["host_errors"]:
        host_errors()
        in_place(500)  # in lines
        in_place(600)  # too large for lines: through scratch
        shmem.finalize()
        sys.stdout.write(f"PE {me}: collectives ok\n")
        return
    evens = shmem.team_split_strided(shmem.TEAM_WORLD, 0, 2, (n + 1) // 2)
    api = shmem._device_api
    # every kind on both teams in one form (block on the host: the host forms),
    # the other two forms on some kinds
    forms = ("_block",) if HOST else ("_block", "_warp", "")
    names = [f"{kind}{forms[i % len(forms)]}"
             for i, kind in enumerate(sorted(api.COLLECTIVE_KINDS))]
    if not HOST:
        names += ["broadcast_warp", "broadcast", "sum_reduce", "sum_reduce_warp",
                  "alltoall", "fcollect_warp", "max_reducescatter", "and_reducescatter_warp"]
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
    if HOST:
        # reductions in lines of 4-byte numbers, and parts too large for lines (a grid);
        # an alltoall of one block (at most 64 bytes a part here): a thread to a vector
        for name, dtype, n in (("sum_reduce_block", np.int32, N),
                               ("xor_reducescatter_block", np.uint32, N),
                               ("min_reduce_block", np.float32, N),
                               ("sum_reduce_block", np.int64, 600),
                               ("max_reducescatter_block", np.float64, 600),
                               ("alltoall_block", np.int64, 8)):
            run(shmem.TEAM_WORLD, name, dtype, n)
    else:
        # the other forms of the block collectives that send one source to
        # every member, with 64 threads: a 16-byte vector per thread, vectors
        # looped over, pieces narrower than 8 bytes
        for name in ("broadcast_block", "fcollect_block", "broadcast_warp", "fcollect"):
            for dtype, n in ((np.int64, 100), (np.int64, 300), (np.int32, 37)):
                run(shmem.TEAM_WORLD, name, dtype, n)
        # alltoall's: a thread to each vector of every part (16 a part, up to 4
        # members), and parts that take the member-by-member copy
        for name in ("alltoall_block", "alltoall_warp"):
            for dtype, n in ((np.int64, 32), (np.int64, 100)):
                run(shmem.TEAM_WORLD, name, dtype, n)
    shmem.finalize()
    sys.stdout.write(f"PE {me}: collectives ok\n")


if __name__ == "__main__":
    main()
