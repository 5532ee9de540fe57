"""PEs started by ``mpirun``/``srun``: collectives over mpi4py's COMM_WORLD.

Node-local peers are found with a shared-memory split. MPI cannot carry file
descriptors, so each PE also listens on an abstract Unix socket (no file left
behind) named after the job, and descriptors move between local peers over
those sockets with a per-job secret.
"""

import hmac
import os
import secrets
import socket

from .._errors import ShmemBootstrapError, ShmemUsageError
from . import _wire
from ._base import Bootstrap

#: Variables that mark a process started by an MPI launcher.
MPI_MARKERS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS",
               "MV2_COMM_WORLD_SIZE")


def under_mpi(environ):
    return any(name in environ for name in MPI_MARKERS)


class MPIBootstrap(Bootstrap):
    name = "MPI"

    def __init__(self, wait_timeout):
        super().__init__(wait_timeout)
        try:
            from mpi4py import MPI
        except ImportError as exc:
            raise ShmemUsageError(
                f"this process was started by an MPI launcher but mpi4py cannot be "
                f"imported ({exc}); install it with: pip install 'numba-shmem[mpi]'") from None
        self._mpi = MPI
        self._comm = MPI.COMM_WORLD.Dup()
        self._node = self._comm.Split_type(MPI.COMM_TYPE_SHARED)
        self.rank = self._comm.Get_rank()
        self.size = self._comm.Get_size()
        self.local_peers = tuple(self._node.allgather(self.rank))
        self.job_id, self._secret = self._comm.bcast(
            (secrets.token_hex(6), secrets.token_hex(16)) if self.rank == 0 else None)
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self._address(self.local_rank))
        self._listener.listen(self.local_size)
        self._listener.settimeout(wait_timeout or None)
        self._groups = {}
        self.barrier("bootstrap")

    def _address(self, local_rank):
        return f"\0numba-shmem-{self.job_id}-{local_rank}"

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

    def allgather(self, data, what, members=None):
        comm = self._comm if members is None else self._group_comm(members)
        self._wait(comm.Ibarrier(), what)
        return comm.allgather(bytes(data))

    def exchange_fds(self, fds, what):
        self._wait(self._node.Ibarrier(), what)
        me = self.local_rank
        for peer in range(self.local_size):
            if peer == me:
                continue
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.connect(self._address(peer))
                _wire.send(sock, {"secret": self._secret, "from": me, "what": what}, fds=fds)
        out = [None] * self.local_size
        out[me] = list(fds)
        for _ in range(self.local_size - 1):
            try:
                conn, _addr = self._listener.accept()
            except socket.timeout:
                raise self.timeout_error(what, self.wait_timeout) from None
            with conn:
                meta, _payload, received = _wire.recv(conn)
            if not hmac.compare_digest(str(meta.get("secret")), self._secret):
                for fd in received:
                    os.close(fd)
                raise ShmemBootstrapError(
                    f"PE {self.rank}: a process without this job's secret connected to "
                    "its descriptor socket during " + what)
            out[meta["from"]] = received
        return out

    def close(self):
        for comm in self._groups.values():
            comm.Free()
        self._listener.close()
        self._node.Free()
        self._comm.Free()
