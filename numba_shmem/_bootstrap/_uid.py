"""PEs started by any launcher, from a unique id: rank 0 makes one
(``shmem.get_unique_id()``), the application hands it to the others by any
means (a file, Ray, torch.distributed's store), and every PE calls
``shmem.init(uid=..., rank=..., nranks=...)``.

A unique id names a TCP socket of the process that made it and a secret.
That process must be rank 0: its ``init()`` serves the job's rendezvous there
(the server ``shmem-run`` runs, ``launcher/_rendezvous.py``), and every PE connects,
presents the secret and its rank, and makes its collectives as under
``shmem-run``. Descriptors move between the PEs of a node over Unix sockets
(``_local``); a node's PEs are those of one host name. PEs on other hosts are
reached through MPI only: ``init()`` then says to start the job with mpirun
or srun.
"""

import operator
import os
import secrets
import socket
import threading

from shmem_run._rendezvous import RendezvousServer

from .._errors import ShmemBootstrapError, ShmemUsageError
from ._local import NodeDescriptors
from ._rendezvous import RendezvousClient

#: what a unique id starts with (and the version of its format)
PREFIX = "numba-shmem-uid-1"
#: the backlog of a unique id's socket: PEs that connect at once
_BACKLOG = 1024

#: how long rank 0's server stays to fail the collectives that wait for it
_LEAVE_S = 2.0

#: the socket of the unique id this process made last, until its init() serves it
_made = {}
_made_lock = threading.Lock()


def _advertised_host():
    """The address other processes reach this one at: NUMBA_SHMEM_BOOTSTRAP_HOST,
    else that of the interface of the default route, else this host's by its name."""
    host = os.environ.get("NUMBA_SHMEM_BOOTSTRAP_HOST")
    if host:
        return host
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("192.0.2.1", 9))  # (a UDP connect sends nothing)
            return probe.getsockname()[0]
    except OSError:
        pass
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def make():
    """A new unique id, served by this process's ``init(uid=...)`` (as rank 0);
    it replaces the id this process made before, if any."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.bind(("", 0))
        listener.listen(_BACKLOG)
        port = listener.getsockname()[1]
    except BaseException:
        listener.close()
        raise
    uid = f"{PREFIX}:{_advertised_host()}:{port}:{secrets.token_hex(16)}"
    with _made_lock:
        for old in _made.values():
            old.close()
        _made.clear()
        _made[uid] = listener
    return uid


def parse(uid):
    """(host, port, secret) of a unique id; a usage error naming ``uid`` if it
    is not one."""
    start = PREFIX + ":"
    parts = uid[len(start):].rsplit(":", 2) if isinstance(uid, str) and \
        uid.startswith(start) else []
    if len(parts) != 3 or not parts[0] or not parts[1].isdigit() or len(parts[2]) != 32:
        shown = uid if isinstance(uid, str) and len(uid) < 100 else type(uid).__name__
        raise ShmemUsageError(
            f"shmem.init: uid={shown!r} is not a unique id; pass the string "
            "shmem.get_unique_id() returned on rank 0, unchanged")
    return parts[0], int(parts[1]), parts[2]


def check_ranks(rank, nranks):
    """``rank`` and ``nranks`` as ints, or a usage error naming them."""
    values = []
    for name, value in (("rank", rank), ("nranks", nranks)):
        try:
            if isinstance(value, bool):
                raise TypeError
            values.append(operator.index(value))
        except TypeError:
            raise ShmemUsageError(f"shmem.init: {name} must be an int, got {value!r}; with "
                                  "uid=..., pass this PE's rank and the number of PEs") from None
    rank, nranks = values
    if nranks < 1 or not 0 <= rank < nranks:
        raise ShmemUsageError(f"shmem.init: rank={rank} is not a rank of a job of nranks="
                              f"{nranks} PEs (0 <= rank < nranks)")
    return rank, nranks


class UidBootstrap(RendezvousClient):
    name = "unique id"
    lost_hint = ("; rank 0 serves it, so PE 0 has left the job (it exited, crashed or "
                 "was killed)")

    def __init__(self, wait_timeout, uid, rank, nranks, node_size=0, name=None):
        super().__init__(wait_timeout)
        if name is not None:
            self.name = name
        self._node_size = node_size
        host, port, secret = parse(uid)
        self.rank, self.size = check_ranks(rank, nranks)
        self._seqs = {}
        self._server = None
        self._local = None
        if rank == 0:
            with _made_lock:
                listener = _made.pop(uid, None)
            if listener is None:
                raise ShmemUsageError(
                    "shmem.init: rank 0 serves the job's rendezvous, so it must run in the "
                    "process that made the unique id; call shmem.get_unique_id() in the "
                    "process of rank 0 and hand its result to the other ranks")
            self._server = RendezvousServer(listener, secret, nranks, name="numba-shmem")
        try:
            self._connect(host, port, secret)
            self._meet()
        except BaseException:
            self._release()
            raise

    def _connect(self, host, port, secret):
        timeout = self.wait_timeout or None
        try:
            self._sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise ShmemBootstrapError(
                f"PE {self.rank} could not reach rank 0's rendezvous at {host}:{port} (from its "
                f"unique id): {exc}; rank 0 must be running shmem.init(uid=...), and reachable "
                "at that address (else set NUMBA_SHMEM_BOOTSTRAP_HOST on rank 0 to an address "
                "the others reach it at)") from None
        # the server times collectives out; the socket's own time-out is the backstop
        self._sock.settimeout(self.wait_timeout + 30 if self.wait_timeout else None)
        reply, _payload, _fds = self._call(
            {"op": "hello", "secret": secret, "pe": self.rank}, "the rendezvous's hello")
        if reply.get("npes") != self.size:
            raise ShmemBootstrapError(
                f"PE {self.rank} was started with nranks={self.size}, but rank 0 with "
                f"{reply.get('npes')}; pass the same nranks on every PE")

    def _meet(self):
        """Find the PEs of this node, the job's id, and open the node's
        descriptor exchange."""
        host = socket.gethostname()
        if self._node_size:  # (tests: emulated nodes of consecutive ranks)
            host = f"{host}:emulated-node-{self.rank // self._node_size}"
        me = f"{host} {os.getpid()} {secrets.token_hex(8)}".encode()
        everyone = [entry.decode().split() for entry in self.allgather(me, "shmem.init")]
        self.nodes = tuple(host for host, _pid, _token in everyone)
        self.local_peers = tuple(pe for pe in range(self.size)
                                 if self.nodes[pe] == self.nodes[self.rank])
        self.job_id = everyone[0][2][:12]
        pids = [int(everyone[pe][1]) for pe in self.local_peers]
        node_secret = everyone[self.local_peers[0]][2]  # (the node's first PE's token)
        self._local = NodeDescriptors(self.local_size)
        paths = [entry.decode() for entry in self.allgather(
            self._local.path.encode(), "shmem.init", list(self.local_peers))]
        self._local.join(paths, pids, node_secret, self.local_rank)
        self._local.remove_on_sigterm()

    def _exchange_fds(self, fds, what):
        self._allgather(b"", what, list(self.local_peers))  # every local PE is there
        return self._local.exchange(fds, what, self.wait_timeout,
                                    lambda what: self.timeout_error(what, self.wait_timeout))

    def _release(self):
        if getattr(self, "_sock", None) is not None:
            self._sock.close()
        if self._local is not None:
            self._local.close()
        if self._server is not None:
            self._server.close()

    def _leave(self, why):
        try:
            super()._leave(why)
            if self._server is not None:
                # the others' collectives that wait for rank 0 fail naming it,
                # before its server goes
                self._server.wait_departed(self.rank, _LEAVE_S)
        finally:
            self._release()
