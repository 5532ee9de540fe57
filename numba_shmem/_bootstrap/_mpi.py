"""PEs started by ``mpirun``/``srun``: collectives over mpi4py's COMM_WORLD,
or over the communicator the program passed (``shmem.init(comm=...)``).

Node-local peers are found with a shared-memory split (or, for tests, emulated
nodes of ``NUMBA_SHMEM_NODE_SIZE`` consecutive ranks). MPI cannot carry file
descriptors: they move between local peers over Unix sockets in private
directories (``_local``).
"""

import os
import secrets

from .._errors import ShmemUsageError
from ._base import Bootstrap
from ._local import NodeDescriptors

#: Variables that mark a process started by an MPI launcher.
MPI_MARKERS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS",
               "MV2_COMM_WORLD_SIZE")


def under_mpi(environ):
    return any(name in environ for name in MPI_MARKERS)


def _checked(MPI, comm):
    """``comm`` (None: COMM_WORLD), or a usage error naming it."""
    if comm is None:
        return MPI.COMM_WORLD
    if not isinstance(comm, MPI.Intracomm) or comm == MPI.COMM_NULL:
        raise ShmemUsageError(
            f"shmem.init: comm={comm!r} is not an mpi4py intra-communicator; pass one "
            "(MPI.COMM_WORLD or one split from it) that this process belongs to")
    return comm


class MPIBootstrap(Bootstrap):
    name = "MPI"

    def __init__(self, wait_timeout, node_size=0, comm=None):
        super().__init__(wait_timeout)
        try:
            from mpi4py import MPI
        except ImportError as exc:
            raise ShmemUsageError(
                f"this process was started by an MPI launcher but mpi4py cannot be "
                f"imported ({exc}); install it with: pip install 'numba-shmem[mpi]'") from None
        self._mpi = MPI
        self._comm = _checked(MPI, comm).Dup()
        self.rank = self._comm.Get_rank()
        self.size = self._comm.Get_size()
        host = MPI.Get_processor_name()
        if node_size:
            self._node = self._comm.Split(self.rank // node_size, self.rank)
            host = f"{host}:emulated-node-{self.rank // node_size}"
        else:
            self._node = self._comm.Split_type(MPI.COMM_TYPE_SHARED)
        self.nodes = tuple(self._comm.allgather(host))
        self.local_peers = tuple(self._node.allgather(self.rank))
        self._secret = self._node.bcast(secrets.token_hex(16) if self._node.Get_rank() == 0
                                        else None)
        self.job_id = self._comm.bcast(secrets.token_hex(6) if self.rank == 0 else None)
        self._groups = {}
        self._local = NodeDescriptors(self.local_size)
        try:
            self._paths = tuple(self._node.allgather(self._local.path))
            self._local.join(self._paths, self._node.allgather(os.getpid()), self._secret,
                             self.local_rank)
            self.barrier("bootstrap")
        except BaseException:
            self._local.close()
            raise
        # mpirun ends a job that a PE aborted with SIGTERM to the others
        self._local.remove_on_sigterm()

    def communicator(self):
        """The job's communicator (a duplicate of the one it was started on),
        for the proxy."""
        return self._comm

    def _remove_socket(self):
        self._local.close()

    def _wait(self, request, what):
        self.poll(request.Test, what)

    def _group_comm(self, members):
        """A communicator of ``members`` only, made (collectively over them) once."""
        key = tuple(members)
        if key not in self._groups:
            group = self._comm.Get_group().Incl(list(members))
            self._groups[key] = self._comm.Create_group(group)
            group.Free()
        return self._groups[key]

    def _allgather(self, data, what, members):
        comm = self._comm if members is None else self._group_comm(members)
        self._wait(comm.Ibarrier(), what)
        return comm.allgather(data)

    def _exchange_fds(self, fds, what):
        self._wait(self._node.Ibarrier(), what)
        return self._local.exchange(fds, what, self.wait_timeout,
                                    lambda what: self.timeout_error(what, self.wait_timeout))

    def _leave(self, why):
        for comm in self._groups.values():
            comm.Free()
        self._remove_socket()
        self._node.Free()
        self._comm.Free()
