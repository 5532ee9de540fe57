"""How the PEs of a job find each other: ``shmem-run``, MPI, or a lone process."""

import os

from ._base import Bootstrap, check_same
from ._launcher import ENV_SOCKET, LauncherBootstrap
from ._mpi import MPIBootstrap, under_mpi
from ._single import SingleBootstrap

__all__ = ["Bootstrap", "check_same", "start"]


def start(config, environ=None):
    """Pick the bootstrap that started this process and connect it."""
    environ = os.environ if environ is None else environ
    if ENV_SOCKET in environ:
        return LauncherBootstrap(config.wait_timeout, environ)
    if under_mpi(environ):
        return MPIBootstrap(config.wait_timeout, config.node_size)
    return SingleBootstrap(config.wait_timeout)
