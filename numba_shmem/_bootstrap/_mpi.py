"""PEs started by ``mpirun``/``srun``: collectives over mpi4py's COMM_WORLD.

Node-local peers are found with a shared-memory split (or, for tests, emulated
nodes of ``NUMBA_SHMEM_NODE_SIZE`` consecutive ranks). MPI cannot carry file
descriptors, so each PE also listens on a Unix socket in a private (0700)
directory of its own, and descriptors move between local peers over those
sockets. A connection is taken only from a process of this user whose pid is
one of the job's local ranks, that sends the job's secret within the wait
time-out; anything else is dropped and the job goes on.
"""

import hmac
import os
import secrets
import shutil
import signal
import socket
import tempfile
import threading
import time

from .._errors import ShmemUsageError
from . import _wire
from ._base import Bootstrap

#: Variables that mark a process started by an MPI launcher.
MPI_MARKERS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS",
               "MV2_COMM_WORLD_SIZE")


def under_mpi(environ):
    return any(name in environ for name in MPI_MARKERS)


class MPIBootstrap(Bootstrap):
    name = "MPI"

    def __init__(self, wait_timeout, node_size=0):
        super().__init__(wait_timeout)
        try:
            from mpi4py import MPI
        except ImportError as exc:
            raise ShmemUsageError(
                f"this process was started by an MPI launcher but mpi4py cannot be "
                f"imported ({exc}); install it with: pip install 'numba-shmem[mpi]'") from None
        self._mpi = MPI
        self._comm = MPI.COMM_WORLD.Dup()
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
        self._pids = tuple(self._node.allgather(os.getpid()))
        self._groups = {}
        # mode 0700: this user's only; not under a TMPDIR too long for a socket's path
        self._dir = tempfile.mkdtemp(prefix="nshmem-", dir=_wire.socket_parent())
        try:
            self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._listener.bind(os.path.join(self._dir, "fds.sock"))
            self._listener.listen(self.local_size)
            self._paths = tuple(self._node.allgather(self._listener.getsockname()))
            self.barrier("bootstrap")
        except BaseException:
            self._remove_socket()
            raise
        self._remove_on_sigterm()

    def _remove_on_sigterm(self):
        """mpirun ends a job that a PE aborted with SIGTERM to the others: remove
        this PE's private directory first, then die of the signal as before.
        Only where the program has not set a SIGTERM handler of its own."""
        if threading.current_thread() is not threading.main_thread() or \
                signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return

        def on_sigterm(signum, frame):
            self._remove_socket()
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
        signal.signal(signal.SIGTERM, on_sigterm)

    def communicator(self):
        """The job's communicator (a duplicate of COMM_WORLD), for the proxy."""
        return self._comm

    def _remove_socket(self):
        listener = getattr(self, "_listener", None)
        if listener is not None:
            listener.close()
        shutil.rmtree(self._dir, ignore_errors=True)

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

    def _deadline(self):
        return time.monotonic() + self.wait_timeout if self.wait_timeout else None

    def _left_s(self, deadline, what):
        """Seconds left before ``deadline`` (None: no limit), or the time-out error."""
        if deadline is None:
            return None
        left = deadline - time.monotonic()
        if left <= 0:
            raise self.timeout_error(what, self.wait_timeout)
        return left

    def _exchange_fds(self, fds, what):
        self._wait(self._node.Ibarrier(), what)
        me = self.local_rank
        deadline = self._deadline()
        for peer in range(self.local_size):
            if peer == me:
                continue
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(self._left_s(deadline, what))
                try:
                    sock.connect(self._paths[peer])
                    _wire.send(sock, {"secret": self._secret, "from": me, "what": what}, fds=fds)
                except socket.timeout:
                    raise self.timeout_error(what, self.wait_timeout) from None
        out = [None] * self.local_size
        out[me] = list(fds)
        while any(entry is None for entry in out):
            self._listener.settimeout(self._left_s(deadline, what))
            try:
                conn, _addr = self._listener.accept()
            except socket.timeout:
                raise self.timeout_error(what, self.wait_timeout) from None
            with conn:
                received = self._take(conn, deadline, what)
            if received is not None:
                sender, fds_in = received
                if out[sender] is not None:  # a second message from one rank: refuse it
                    for fd in fds_in:
                        os.close(fd)
                    continue
                out[sender] = fds_in
        return out

    def _take(self, conn, deadline, what):
        """``(local rank, descriptors)`` from a connection of one of the job's
        local ranks that sent the secret in time, else None (the connection is
        dropped, the descriptors it sent closed)."""
        pid, uid = _wire.peer_credentials(conn)
        if uid != os.getuid() or pid not in self._pids or pid == os.getpid():
            return None
        conn.settimeout(min(self._left_s(deadline, what) or 5.0, 5.0))
        try:
            meta, _payload, received = _wire.recv(conn)
        except (OSError, ValueError, _wire.ConnectionClosed):
            return None
        sender = meta.get("from") if isinstance(meta, dict) else None
        if not hmac.compare_digest(str(meta.get("secret")) if isinstance(meta, dict) else "",
                                   self._secret) or self._pids.index(pid) != sender:
            for fd in received:
                os.close(fd)
            return None
        return sender, received

    def _leave(self, why):
        for comm in self._groups.values():
            comm.Free()
        self._remove_socket()
        self._node.Free()
        self._comm.Free()
