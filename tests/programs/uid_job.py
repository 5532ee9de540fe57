"""Jobs whose PEs find each other from a unique id, with no launcher.

    python uid_job.py start N [die=PE]   rank 0 makes the id and starts ranks
                                         1..N-1 itself (this file, "join"); with
                                         die=PE, that PE exits right after init()
    python uid_job.py mismatch           rank 1 is started with another nranks
    python uid_job.py <case>             one process, bad input: bad_uid,
                                         rank_range, not_maker, unreachable;
                                         then the descriptors init() left open

Each PE prints "PE <me> of <n> received <left neighbour> (<bootstrap>, local
<local rank>/<local size>)"; an error prints "PE <rank> error: <type>: <message>".
"""

import os
import subprocess
import sys

os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")  # one-block kernel on purpose

import numba_shmem as shmem  # noqa: E402
import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402
from numba_shmem import _runtime  # noqa: E402
from numba_shmem._bootstrap import _uid  # noqa: E402


@cuda.jit
def send_right(received):
    if cuda.grid(1) == 0:
        right = (shmem.my_pe() + 1) % shmem.n_pes()
        shmem.p(received, shmem.my_pe(), right)


def say(line):
    os.write(1, (line + "\n").encode())


def ring(uid, rank, nranks, die=None):
    try:
        shmem.init(uid=uid, rank=rank, nranks=nranks)
        if rank == die:
            sys.exit(3)
        received = shmem.zeros(1, np.int32)
        send_right[1, 32](received)
        shmem.barrier_all()
        # a collective of some PEs only (the bootstrap's groups)
        team = shmem.team_split_strided(shmem.TEAM_WORLD, 0, 2, (nranks + 1) // 2)
        if team != shmem.TEAM_INVALID:
            shmem.team_destroy(team)
        boot = _runtime.current().bootstrap
        say(f"PE {shmem.my_pe()} of {shmem.n_pes()} received {int(received.copy_to_host()[0])} "
            f"({boot.name}, local {boot.local_rank}/{boot.local_size})")
        shmem.free(received)
        shmem.finalize()
    except shmem.ShmemError as exc:
        say(f"PE {rank} error: {type(exc).__name__}: {exc}")
        sys.exit(1)


def start(nranks, die=None, child_nranks=None):
    """Rank 0 here; ranks 1.. in child processes, given the id on their command line."""
    uid = shmem.get_unique_id()
    children = [subprocess.Popen([sys.executable, __file__, "join", uid, str(rank),
                                  str(child_nranks or nranks), str(die)])
                for rank in range(1, nranks)]
    if die == 0:  # rank 0 exits at once (its children report on the same stdout)
        ring(uid, 0, nranks, die)
    try:
        ring(uid, 0, nranks, die)
    finally:
        codes = [child.wait() for child in children]
        say(f"children exited {codes}")


def single(case):
    uid = shmem.get_unique_id()
    args = {
        "bad_uid": dict(uid="numba-shmem-uid-1:nowhere", rank=0, nranks=2),
        "rank_range": dict(uid=uid, rank=2, nranks=2),
        "not_maker": dict(uid=f"{_uid.PREFIX}:127.0.0.1:9:{'0' * 32}", rank=0, nranks=2),
        "unreachable": dict(uid=f"{_uid.PREFIX}:127.0.0.1:9:{'0' * 32}", rank=1, nranks=2),
    }[case]
    before = sorted(os.listdir("/proc/self/fd"))
    try:
        shmem.init(**args)
    except shmem.ShmemError as exc:
        say(f"PE {args['rank']} error: {type(exc).__name__}: {exc}")
        after = sorted(os.listdir("/proc/self/fd"))
        say(f"descriptors left: {sorted(set(after) - set(before))}")
        return
    say("no error")
    sys.exit(1)


def main():
    case = sys.argv[1]
    if case == "start":
        options = dict(arg.split("=") for arg in sys.argv[3:])
        die = int(options["die"]) if "die" in options else None
        start(int(sys.argv[2]), die)
    elif case == "join":
        uid, rank, nranks, die = sys.argv[2:6]
        ring(uid, int(rank), int(nranks), None if die == "None" else int(die))
    elif case == "mismatch":
        start(2, child_nranks=3)
    else:
        single(case)


if __name__ == "__main__":
    main()
