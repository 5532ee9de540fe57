"""Descriptors between the PEs of one node, for bootstraps with no channel of
their own that carries them (MPI, a unique id's rendezvous over TCP).

Each PE listens on a Unix socket in a private (0700) directory of its own. A
connection is taken only from a process of this user whose pid is one of the
node's PEs, that sends the node's secret within the wait time-out; anything
else is dropped and the job goes on.
"""

import hmac
import os
import shutil
import signal
import socket
import tempfile
import threading
import time

from shmem_run import _wire


class NodeDescriptors:
    """This PE's socket (``path``, to be made known to the node's PEs), then,
    once ``join`` has told it theirs, ``exchange``."""

    def __init__(self, local_size):
        # mode 0700: this user's only; not under a TMPDIR too long for a socket's path
        self.dir = tempfile.mkdtemp(prefix="nshmem-", dir=_wire.socket_parent())
        try:
            self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._listener.bind(os.path.join(self.dir, "fds.sock"))
            self._listener.listen(local_size)
        except BaseException:
            self.close()
            raise
        self.path = self._listener.getsockname()

    def join(self, paths, pids, secret, me):
        """The node's PEs' ``paths`` and ``pids``, in local order, the node's
        ``secret`` and this PE's local rank ``me``."""
        self._paths, self._pids, self._secret, self._me = tuple(paths), tuple(pids), secret, me

    def exchange(self, fds, what, wait_timeout, timeout_error):
        """Every local PE's descriptors, in local order (this PE's own entry is
        ``fds``); the node's PEs must have reached the exchange (a barrier
        first). Past ``wait_timeout`` (0: none), ``timeout_error(what)``."""
        me = self._me
        deadline = time.monotonic() + wait_timeout if wait_timeout else None

        def left():
            if deadline is None:
                return None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise timeout_error(what)
            return remaining

        for peer in range(len(self._paths)):
            if peer == me:
                continue
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(left())
                try:
                    sock.connect(self._paths[peer])
                    _wire.send(sock, {"secret": self._secret, "from": me, "what": what}, fds=fds)
                except socket.timeout:
                    raise timeout_error(what) from None
        out = [None] * len(self._paths)
        out[me] = list(fds)
        while any(entry is None for entry in out):
            self._listener.settimeout(left())
            try:
                conn, _addr = self._listener.accept()
            except socket.timeout:
                raise timeout_error(what) from None
            with conn:
                received = self._take(conn, min(left() or 5.0, 5.0))
            if received is not None:
                sender, fds_in = received
                if out[sender] is not None:  # a second message from one PE: refuse it
                    for fd in fds_in:
                        os.close(fd)
                    continue
                out[sender] = fds_in
        return out

    def _take(self, conn, timeout):
        """``(local rank, descriptors)`` from a connection of one of the node's
        PEs that sent the secret in time, else None (the connection is dropped,
        the descriptors it sent closed)."""
        pid, uid = _wire.peer_credentials(conn)
        if uid != os.getuid() or pid not in self._pids or pid == os.getpid():
            return None
        conn.settimeout(timeout)
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

    def remove_on_sigterm(self):
        """A launcher that ends a job with SIGTERM to its PEs (mpirun, torchrun)
        leaves no directory behind: remove it first, then die of the signal as
        before. Only where the program has not set a SIGTERM handler of its own."""
        if threading.current_thread() is not threading.main_thread() or \
                signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return

        def on_sigterm(signum, frame):
            self.close()
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
        signal.signal(signal.SIGTERM, on_sigterm)

    def close(self):
        """Close the socket and remove the private directory (at most once
        matters; again does nothing)."""
        listener = getattr(self, "_listener", None)
        if listener is not None:
            listener.close()
        shutil.rmtree(self.dir, ignore_errors=True)
