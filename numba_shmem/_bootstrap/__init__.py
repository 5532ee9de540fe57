"""How the PEs of a job find each other: ``shmem-run``, MPI, or a lone process."""

import os

from .._errors import ShmemUsageError
from ._base import Bootstrap, check_same
from ._launcher import ENV_SOCKET, LauncherBootstrap
from ._mpi import MPIBootstrap, under_mpi
from ._single import SingleBootstrap

__all__ = ["Bootstrap", "check_same", "start"]

#: Launchers that no bootstrap speaks, by the variables that number their
#: processes: (launcher, the rank's variable, the job size's, most specific
#: first). A process they started as one of several must not run as a job of one.
FOREIGN_LAUNCHERS = (
    ("torchrun", "RANK", ("WORLD_SIZE",)),
    # srun sets the step's size; a batch script sees only the allocation's
    ("srun", "SLURM_PROCID", ("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS")),
    ("jsrun", "JSM_NAMESPACE_RANK", ("JSM_NAMESPACE_SIZE",)),
)


def start(config, environ=None):
    """Pick the bootstrap that started this process and connect it."""
    environ = os.environ if environ is None else environ
    if ENV_SOCKET in environ:
        return LauncherBootstrap(config.wait_timeout, environ)
    if under_mpi(environ):
        return MPIBootstrap(config.wait_timeout, config.node_size)
    _refuse_foreign_launcher(environ)
    return SingleBootstrap(config.wait_timeout)


def _refuse_foreign_launcher(environ):
    """Raise if a launcher no bootstrap speaks started this process as one of
    several: each would otherwise be a job of one PE, with no error."""
    for launcher, rank, sizes in FOREIGN_LAUNCHERS:
        size = next((name for name in sizes if name in environ), None)
        if rank not in environ or size is None:
            continue
        npes = environ[size].strip()
        if not npes.isdigit() or int(npes) <= 1:
            continue
        raise ShmemUsageError(
            f"this process was started by {launcher} as one of {npes} processes "
            f"({rank}={environ[rank]} {size}={environ[size]}), and numba-shmem cannot "
            f"bootstrap from it: each process would run as a job of one PE. Start "
            f"the job with shmem-run -n {npes} script.py (one node), or with mpirun -n "
            f"{npes} or srun --mpi=pmix and mpi4py installed (pip install "
            f"'numba-shmem[mpi]'); to run this process alone as one PE, unset {rank}")
