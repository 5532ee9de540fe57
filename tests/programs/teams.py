"""Teams on the host and in kernels: split, query, translate, barrier, destroy."""

import os
import sys

import numba_shmem as shmem  # first: on a machine without a GPU it picks the simulator
import numpy as np
from numba import cuda


@cuda.jit
def query(out, team):
    if cuda.grid(1) == 0:
        out[0] = shmem.team_my_pe(team)
        out[1] = shmem.team_n_pes(team)
        out[2] = shmem.team_translate_pe(team, 0, shmem.TEAM_WORLD)


@cuda.jit
def team_rounds(flag, errors, team, rounds):
    # members pass a token around the team, one barrier per round
    if cuda.threadIdx.x == 0:
        me = shmem.team_my_pe(team)
        size = shmem.team_n_pes(team)
        right = shmem.team_translate_pe(team, (me + 1) % size, shmem.TEAM_WORLD)
        for r in range(1, rounds + 1):
            shmem.p(flag, r, right)
            shmem.barrier(team)
            if flag[0] != r:
                errors[0] += 1
            shmem.sync(team)


@cuda.jit
def team_rounds_scoped(flag, errors, team, rounds):
    # the same with barrier_block (every thread) and sync_warp (the first warp)
    me = shmem.team_my_pe(team)
    size = shmem.team_n_pes(team)
    right = shmem.team_translate_pe(team, (me + 1) % size, shmem.TEAM_WORLD)
    for r in range(1, rounds + 1):
        if cuda.threadIdx.x == 0:
            shmem.p(flag, r, right)
        shmem.barrier_block(team)
        if cuda.threadIdx.x == 0 and flag[0] != r:
            errors[0] += 1
        if cuda.threadIdx.x < 32:
            shmem.sync_warp(team)
        cuda.syncthreads()


def expect(message_start, fn, *args):
    try:
        fn(*args)
    except shmem.ShmemUsageError as exc:
        assert str(exc).startswith(message_start), str(exc)
        return
    raise AssertionError(f"no error from {fn.__name__}{args}")


def main():
    rounds = int(sys.argv[1])
    shmem.init()
    me, n = shmem.my_pe(), shmem.n_pes()
    assert shmem.team_my_pe(shmem.TEAM_WORLD) == me and shmem.team_n_pes(shmem.TEAM_WORLD) == n
    # one node, or emulated nodes of NUMBA_SHMEM_NODE_SIZE consecutive PEs
    node = int(os.environ.get("NUMBA_SHMEM_NODE_SIZE") or n)
    assert shmem.team_n_pes(shmem.TEAM_SHARED) == min(node, n - me // node * node)
    evens = shmem.team_split_strided(shmem.TEAM_WORLD, 0, 2, (n + 1) // 2)
    odds = shmem.team_split_strided(shmem.TEAM_WORLD, 1, 2, n // 2)
    mine = evens if me % 2 == 0 else odds
    assert (evens == shmem.TEAM_INVALID) == (me % 2 == 1) and mine != shmem.TEAM_INVALID
    rows, columns = shmem.team_split_2d(shmem.TEAM_WORLD, 2)
    out = cuda.to_device(np.zeros(3, np.int32))
    # TEAM_INVALID (and a handle past the table) answer -1, on the host and in kernels
    invalid = shmem.TEAM_INVALID
    assert [shmem.team_my_pe(invalid), shmem.team_n_pes(invalid),
            shmem.team_translate_pe(invalid, 0, shmem.TEAM_WORLD),
            shmem.team_translate_pe(shmem.TEAM_WORLD, 0, invalid)] == [-1] * 4
    for handle in (invalid, 1000, -7):
        query[1, 32](out, handle)
        assert out.copy_to_host().tolist() == [-1, -1, -1], (handle, out.copy_to_host())
    if me % 2 == 0:
        assert evens != shmem.TEAM_INVALID
        assert shmem.team_my_pe(evens) == me // 2 and shmem.team_n_pes(evens) == (n + 1) // 2
        assert shmem.team_translate_pe(evens, 1, shmem.TEAM_WORLD) in (2, -1)
        query[1, 32](out, evens)
        assert out.copy_to_host().tolist() == [me // 2, (n + 1) // 2, 0]
    flag = shmem.zeros(1, np.int64)
    assert shmem.team_my_pe(rows) == me % 2 and shmem.team_n_pes(rows) == min(2, n - me // 2 * 2)
    assert shmem.team_my_pe(columns) == me // 2
    assert shmem.team_translate_pe(columns, 0, shmem.TEAM_WORLD) == me % 2
    query[1, 32](out, rows)
    assert out.copy_to_host().tolist() == [me % 2, shmem.team_n_pes(rows), me // 2 * 2]
    errors = cuda.to_device(np.zeros(1, np.int64))
    # every PE launches (collective_launch is collective over all PEs); each
    # passes the token around its own team, evens and odds at once
    shmem.collective_launch(team_rounds, 1, 32, flag, errors, mine, rounds)
    cuda.synchronize()
    assert errors.copy_to_host()[0] == 0, "a team barrier let a PE through early"
    shmem.collective_launch(team_rounds_scoped, 1, 64, flag, errors, mine, rounds)
    cuda.synchronize()
    assert errors.copy_to_host()[0] == 0, "a block-scope team barrier let a PE through early"
    if me % 2 == 0:  # the evens' barrier count on the handle now exceeds the odds'
        team_rounds[1, 32](flag, errors, mine, 3)
        cuda.synchronize()
    shmem.barrier(mine)
    shmem.team_destroy(mine)
    assert shmem.team_n_pes(mine) == -1 and shmem.team_my_pe(mine) == -1  # destroyed
    # the freed handle, given to a team of everyone, starts afresh on every PE
    # (a member's stale count there would make the barrier hang or let PEs through)
    everyone = shmem.team_split_strided(shmem.TEAM_WORLD, 0, 1, n)
    assert everyone == mine, (everyone, mine)
    shmem.collective_launch(team_rounds, 1, 32, flag, errors, everyone, rounds)
    cuda.synchronize()
    assert errors.copy_to_host()[0] == 0, "a reused team's barrier let a PE through early"
    shmem.team_destroy(everyone)
    shmem.barrier_all()
    expect("shmem.team_split_strided: start=0, stride=0, size=1 do not pick PEs",
           shmem.team_split_strided, shmem.TEAM_WORLD, 0, 0, 1)
    expect("shmem.team_destroy: TEAM_WORLD and TEAM_SHARED cannot be destroyed",
           shmem.team_destroy, shmem.TEAM_WORLD)
    expect("shmem.team_split_2d: xrange must be an int >= 1, got 0",
           shmem.team_split_2d, shmem.TEAM_WORLD, 0)
    # handles run out: every PE is in rows, columns and the world, shared and its own team
    extra = []
    try:
        while True:
            extra.append(shmem.team_split_strided(shmem.TEAM_WORLD, 0, 1, n))
    except shmem.ShmemUsageError as exc:
        assert str(exc).startswith("shmem.team_split_strided: no team handle is free on every "
                                   "member; destroy teams (at most 64 per PE)"), str(exc)
    assert len(extra) == 64 - 4, len(extra)
    for team in extra:
        shmem.team_destroy(team)
    shmem.team_destroy(rows)
    shmem.team_destroy(columns)
    shmem.free(flag)
    # before finalize, flushed: under mpiexec, output written after MPI_Finalize may be lost
    sys.stdout.write(f"PE {me}: teams ok\n")
    sys.stdout.flush()
    shmem.finalize()


if __name__ == "__main__":
    main()
