"""A PE's side of a job's rendezvous: the server is ``shmem-run``'s (or that of
the PE that made a unique id), ``launcher/_rendezvous.py``."""

import os
import socket

from shmem_run import _wire

from .._errors import ShmemBootstrapError, ShmemTimeoutError
from ._base import Bootstrap


class RendezvousClient(Bootstrap):
    """A PE's side of a rendezvous: ``self._sock`` is connected and has said
    hello; every collective is one round trip on it."""

    #: what a lost rendezvous means, for its error
    lost_hint = ""

    def _call(self, meta, what, fds=(), payload=b""):
        try:
            _wire.send(self._sock, meta, payload, fds)
            reply, payload, fds = _wire.recv(self._sock)
        except socket.timeout:
            raise self.timeout_error(what, self._sock.gettimeout()) from None
        except (_wire.ConnectionClosed, OSError) as exc:
            raise ShmemBootstrapError(
                f"PE {self.rank} lost the {self.name} rendezvous during {what}: {exc}"
                f"{self.lost_hint}") from None
        if reply.get("op") == "error" or reply.get("seq") != meta.get("seq"):
            for fd in fds:
                os.close(fd)
            if reply.get("op") != "error":
                raise ShmemBootstrapError(
                    f"PE {self.rank} got the answer to collective #{reply.get('seq')} during "
                    f"{what} (#{meta.get('seq')}); the rendezvous connection is out of step")
            if reply.get("kind") == "timeout":
                raise ShmemTimeoutError(reply["message"])
            raise ShmemBootstrapError(reply["message"])
        return reply, payload, fds

    def _collective(self, what, payload=b"", fds=(), members=None):
        key = None if members is None else tuple(members)
        self._seqs[key] = seq = self._seqs.get(key, 0) + 1
        meta = {"op": "allgather", "seq": seq, "what": what, "nfds": len(fds),
                "group": None if members is None else list(members),
                "timeout": self.wait_timeout}
        return self._call(meta, what, fds, payload)

    def _allgather(self, data, what, members):
        _reply, payload, _fds = self._collective(what, payload=data, members=members)
        return _wire.unpack_list(payload)

    def _leave(self, why):
        if self._sock.fileno() >= 0:
            try:
                _wire.send(self._sock, {"op": "bye", "why": why})
            except OSError:
                pass
            self._sock.close()
