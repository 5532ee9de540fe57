"""The job's rendezvous: a Unix socket in a private directory, answered by a
thread of the launcher (the server is the library's,
``numba_shmem/_bootstrap/_rendezvous.py``, so that a PE started otherwise can
run the same one)."""

import os
import socket

from numba_shmem._bootstrap import _rendezvous


class RendezvousServer(_rendezvous.RendezvousServer):
    """The rendezvous of ``npes`` PEs on a Unix socket at ``path`` (mode 0600,
    in the job's private directory): each PE must present ``secret`` and be the
    process ``admit`` names for it."""

    def __init__(self, path, secret, npes):
        self.path = path
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(path)
            os.chmod(path, 0o600)
            listener.listen(npes)
        except BaseException:
            listener.close()
            raise
        super().__init__(listener, secret, npes, check_process=True)
