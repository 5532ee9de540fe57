"""How the PEs of a job find each other: ``shmem-run``, MPI (its world or a
communicator the program passes), torchrun, a unique id the program hands
around, or a lone process."""

import os

from .._errors import ShmemUsageError
from ._base import Bootstrap, check_same
from ._launcher import ENV_SOCKET, LauncherBootstrap
from ._mpi import MPIBootstrap, under_mpi
from ._single import SingleBootstrap
from ._torch import under_torchrun
from ._uid import UidBootstrap

__all__ = ["Bootstrap", "check_same", "start"]

#: Launchers that no bootstrap speaks, by the variables that number their
#: processes: (launcher, the rank's variable, the job size's, most specific
#: first). A process they started as one of several must not run as a job of one.
FOREIGN_LAUNCHERS = (
    # (torchrun also sets MASTER_ADDR and TORCHELASTIC_RUN_ID: _torch)
    ("a torchrun-style launcher", "RANK", ("WORLD_SIZE",)),
    # srun sets the step's size; a batch script sees only the allocation's
    ("srun", "SLURM_PROCID", ("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS")),
    ("jsrun", "JSM_NAMESPACE_RANK", ("JSM_NAMESPACE_SIZE",)),
)


def start(config, environ=None, comm=None, uid=None, rank=None, nranks=None):
    """Connect the bootstrap the program asked for (``comm``: an mpi4py
    communicator; ``uid``, ``rank``, ``nranks``: a unique id's job), else the
    one of the launcher that started this process."""
    environ = os.environ if environ is None else environ
    if comm is not None:
        return MPIBootstrap(config.wait_timeout, config.node_size, comm)
    if uid is not None:
        return UidBootstrap(config.wait_timeout, uid, rank, nranks, config.node_size)
    if ENV_SOCKET in environ:
        return LauncherBootstrap(config.wait_timeout, environ)
    if under_mpi(environ):
        return MPIBootstrap(config.wait_timeout, config.node_size)
    if under_torchrun(environ):
        from . import _torch

        return _torch.start(config.wait_timeout, config.node_size, environ)
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
            f"the job with shmem-run -n {npes} script.py or torchrun (one node), or with mpirun -n "
            f"{npes} or srun --mpi=pmix and mpi4py installed (pip install "
            f"'numba-shmem[mpi]'); to run this process alone as one PE, unset {rank}")
