"""A job started by torchrun (or tests/programs/torchrun_like.py, with the
stand-in for torch.distributed's store):

    torchrun --nproc-per-node N torch_job.py [pg] [die=PE] [noinit=PE]

Each PE runs the ring and prints "PE <me> of <n> received <left neighbour>
(<bootstrap>, GPU index <LOCAL_RANK>)". pg: the script makes torch's default
process group (gloo) before shmem.init(). die=PE: that PE exits right after
init(); noinit=PE: that PE exits without calling it. An error prints "PE <RANK> error: <type>: <message>".
"""

import os
import sys

os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")  # one-block kernel on purpose

import numba_shmem as shmem  # noqa: E402
import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402
from numba_shmem import _runtime  # noqa: E402


@cuda.jit
def send_right(received):
    if cuda.grid(1) == 0:
        right = (shmem.my_pe() + 1) % shmem.n_pes()
        shmem.p(received, shmem.my_pe(), right)


def say(line):
    os.write(1, (line + "\n").encode())


def main():
    options = dict(arg.split("=") if "=" in arg else (arg, "") for arg in sys.argv[1:])
    rank = int(os.environ["RANK"])
    if "pg" in options:
        import torch.distributed as dist

        dist.init_process_group("gloo")
    if "noinit" in options and rank == int(options["noinit"]):
        return
    try:
        shmem.init()
        if "die" in options and rank == int(options["die"]):
            sys.exit(3)
        received = shmem.zeros(1, np.int32)
        send_right[1, 32](received)
        shmem.barrier_all()
        boot = _runtime.current().bootstrap
        say(f"PE {shmem.my_pe()} of {shmem.n_pes()} received {int(received.copy_to_host()[0])} "
            f"({boot.name}, GPU index {boot.gpu_index})")
        shmem.free(received)
        shmem.finalize()
    except shmem.ShmemError as exc:
        say(f"PE {rank} error: {type(exc).__name__}: {exc}")
        sys.exit(1)


if __name__ == "__main__":
    main()
