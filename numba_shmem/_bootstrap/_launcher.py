"""PEs started by ``shmem-run``: a rendezvous over the launcher's Unix socket.

The launcher passes the socket path, the job's secret and this PE's number in
``SHMEM_RUN_*`` variables. Every collective is one round trip to the launcher,
which answers once all PEs have sent the same collective.
"""

import ctypes
import os
import signal
import socket
import sys

from .._errors import ShmemBootstrapError
from ._rendezvous import RendezvousClient

#: The variables ``shmem-run`` sets for each PE.
ENV_SOCKET = "SHMEM_RUN_SOCKET"
ENV_SECRET = "SHMEM_RUN_SECRET"
ENV_PE = "SHMEM_RUN_PE"
ENV_NPES = "SHMEM_RUN_NPES"
ENV_JOBID = "SHMEM_RUN_JOBID"


_PR_SET_PDEATHSIG = 1
#: seconds past NUMBA_SHMEM_WAIT_TIMEOUT after which a PE stops waiting for a
#: launcher that does not answer at all
_BACKSTOP_S = 30.0


def _die_with(launcher):
    """SIGKILL this PE when ``launcher`` (its parent) dies, however it dies: a PE
    left behind may spin in a GPU kernel for ever. Linux only; elsewhere a no-op."""
    if not sys.platform.startswith("linux"):
        return
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != launcher:  # it died before the request took effect
        os.kill(os.getpid(), signal.SIGKILL)


class LauncherBootstrap(RendezvousClient):
    name = "shmem-run"

    def __init__(self, wait_timeout, environ=None):
        super().__init__(wait_timeout)
        environ = os.environ if environ is None else environ
        # The secret is this process's alone: its children must not inherit it
        # (a child that called init() would join as this PE).
        secret = environ.pop(ENV_SECRET, None)
        if secret is None:
            raise ShmemBootstrapError(
                f"{ENV_SOCKET} is set but {ENV_SECRET} is not: this process inherited "
                "its environment from a PE (a PE's child processes cannot join its job; "
                "start every PE with shmem-run) or SHMEM_RUN_* were set by hand")
        try:
            path = environ[ENV_SOCKET]
            self.rank = int(environ[ENV_PE])
            self.size = int(environ[ENV_NPES])
            self.job_id = environ[ENV_JOBID]
        except (KeyError, ValueError) as exc:
            raise ShmemBootstrapError(
                f"{ENV_SOCKET} is set but {exc} is missing or malformed; start the "
                "job with shmem-run rather than setting SHMEM_RUN_* by hand") from None
        self.local_peers = tuple(range(self.size))
        self._seqs = {}  # group (None: every PE) -> collectives so far
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # the launcher times collectives out (naming the PE that never came);
        # the socket's own time-out is the backstop should the launcher hang
        self._sock.settimeout(wait_timeout + _BACKSTOP_S if wait_timeout else None)
        try:
            self._sock.connect(path)
            self._call({"op": "hello", "secret": secret, "pe": self.rank, "pid": os.getpid()},
                       "the launcher's hello")
            _die_with(os.getppid())
        except OSError as exc:
            self._sock.close()
            raise ShmemBootstrapError(
                f"PE {self.rank} could not reach the shmem-run rendezvous at {path}: {exc}"
            ) from None
        except BaseException:
            self._sock.close()
            raise

    def _exchange_fds(self, fds, what):
        reply, _payload, received = self._collective(what, fds=fds)
        out, start = [], 0
        for pe, count in enumerate(reply["nfds"]):
            mine = received[start:start + count]
            start += count
            if pe == self.rank:
                for fd in mine:  # our own descriptors came back as duplicates
                    os.close(fd)
                mine = list(fds)
            out.append(mine)
        return out
