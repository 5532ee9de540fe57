"""Arguments of the collectives and of the host calls that take a team, on
every PE: one line per case, ``CASE ok`` or ``CASE ERROR-TYPE MESSAGE``.

Bad teams, roots and team-split arguments (floats, strings, bools) and a stray
positional argument are refused before anything moves; the documented
parameter names work as keywords, on the host and in kernels.

    collective_args.py
"""

import numpy as np
from numba import cuda

import numba_shmem as shmem

N = 4


@cuda.jit
def keywords_kernel(team, dest, total, source):
    shmem.broadcast_block(team, dest, source, N, root=1)
    shmem.sum_reduce_block(team=team, dest=total, source=source, nelems=N)


@cuda.jit
def stray_kernel(team, dest, source):
    shmem.fcollect_block(team, dest, source, N, 0)


@cuda.jit
def root_kernel(team, dest, source, root):
    shmem.broadcast_block(team, dest, source, N, root)


def report(case, call):
    try:
        call()
    except Exception as exc:  # noqa: BLE001  (the type is what is reported)
        print(case, type(exc).__name__, " ".join(str(exc).split()))
    else:
        print(case, "ok")


def main():
    shmem.init()
    me, npes = shmem.my_pe(), shmem.n_pes()
    world = shmem.TEAM_WORLD
    source = shmem.zeros(N * npes, np.int64)
    source.copy_to_device(np.arange(N * npes, dtype=np.int64) + 100 * me)
    dest = shmem.zeros(N * npes, np.int64)
    total = shmem.zeros(N * npes, np.int64)
    shmem.barrier_all()
    bad = (
        ("broadcast_root_float", lambda: shmem.broadcast(world, dest, source, N, 0.5)),
        ("broadcast_root_str", lambda: shmem.broadcast(world, dest, source, N, "1")),
        ("broadcast_root_bool", lambda: shmem.broadcast(world, dest, source, N, True)),
        ("broadcast_team_float", lambda: shmem.broadcast(0.7, dest, source, N, 0)),
        ("fcollect_team_str", lambda: shmem.fcollect("0", dest, source, N)),
        ("sum_reduce_team_bool", lambda: shmem.sum_reduce(True, dest, source, N)),
        ("fcollect_stray", lambda: shmem.fcollect(world, dest, source, N, 0)),
        ("sum_reduce_stray", lambda: shmem.sum_reduce(world, dest, source, N, 1)),
        ("broadcast_stray", lambda: shmem.broadcast(world, dest, source, N, 0, 1)),
        ("broadcast_no_root", lambda: shmem.broadcast(world, dest, source, N)),
        ("barrier_team_float", lambda: shmem.barrier(0.7)),
        ("barrier_stream_team_str", lambda: shmem.barrier("0", stream=0)),
        ("sync_team_bool", lambda: shmem.sync(True)),
        ("team_my_pe_str", lambda: shmem.team_my_pe("0")),
        ("team_n_pes_float", lambda: shmem.team_n_pes(0.7)),
        ("team_translate_pe_team_bool", lambda: shmem.team_translate_pe(True, 0, world)),
        ("team_translate_pe_pe_float", lambda: shmem.team_translate_pe(world, 0.5, world)),
        ("team_split_strided_parent_str",
         lambda: shmem.team_split_strided("0", 0, 1, npes)),
        ("team_split_strided_start_bool",
         lambda: shmem.team_split_strided(world, True, 1, 1)),
        ("team_split_2d_parent_float", lambda: shmem.team_split_2d(0.7, 1)),
        ("team_split_2d_xrange_bool", lambda: shmem.team_split_2d(world, True)),
        ("team_destroy_bool", lambda: shmem.team_destroy(True)),
    )
    for case, call in bad:
        report(case, call)
    report("device_stray", lambda: (stray_kernel[1, 32](world, dest, source),
                                    cuda.synchronize()))
    for case, team, root in (("device_root_float", world, 0.5), ("device_team_float", 0.7, 0),
                             ("device_root_outside", world, npes)):
        report(case, lambda team=team, root=root: (
            shmem.collective_launch(root_kernel, 1, 32, team, dest, source, root),
            cuda.synchronize()))
    shmem.barrier_all()

    # exact integers of numpy types, and the documented names as keywords
    def host_keywords():
        stream = cuda.stream()
        shmem.broadcast(team=np.int32(world), dest=dest, source=source, nelems=N,
                        root=np.int64(1), stream=stream)
        shmem.sum_reduce(world, total, source, nelems=N, stream=stream)
        stream.synchronize()
        assert dest.copy_to_host()[:N].tolist() == list(range(100, 100 + N)), dest
        want = [sum(i + 100 * pe for pe in range(npes)) for i in range(N)]
        assert total.copy_to_host()[:N].tolist() == want, total
        half = shmem.team_split_strided(np.int64(world), np.int64(0), np.int64(1),
                                        np.int64(npes))
        assert shmem.team_n_pes(np.int64(half)) == npes
        assert shmem.team_translate_pe(half, np.int32(me), world) == me
        shmem.sync(np.int32(half))
        shmem.barrier(np.int64(half))
        shmem.team_destroy(half)
    report("host_keywords", host_keywords)
    shmem.barrier_all()

    def device_keywords():
        dest.copy_to_device(np.zeros(N * npes, np.int64))
        total.copy_to_device(np.zeros(N * npes, np.int64))
        shmem.barrier_all()
        shmem.collective_launch(keywords_kernel, 1, 32, world, dest, total, source)
        cuda.synchronize()
        assert dest.copy_to_host()[:N].tolist() == list(range(100, 100 + N)), dest
        want = [sum(i + 100 * pe for pe in range(npes)) for i in range(N)]
        assert total.copy_to_host()[:N].tolist() == want, total
    report("device_keywords", device_keywords)
    shmem.barrier_all()
    shmem.finalize()


if __name__ == "__main__":
    main()
