"""The job's rendezvous: a Unix socket in a private directory, answered by a
thread of the launcher.

A PE connects, proves it belongs to the job with the secret, then sends
collectives. A collective is answered, to every PE at once, when all PEs have
sent it; the answer carries every PE's payload and file descriptors.
"""

import hmac
import os
import socket
import threading

from numba_shmem._bootstrap import _wire


class RendezvousServer:
    def __init__(self, path, secret, npes):
        self.path = path
        self._secret = secret
        self._npes = npes
        self._lock = threading.Lock()
        self._conns = {}        # pe -> socket
        self._rounds = {}       # (group, seq) -> {pe: (meta, payload, fds)}
        self._gone = {}         # pe -> why it will never join another collective
        self._closed = False
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(path)
        os.chmod(path, 0o600)
        self._listener.listen(npes)
        self._threads = [threading.Thread(target=self._accept_loop, daemon=True)]
        self._threads[0].start()

    def _accept_loop(self):
        while True:
            try:
                conn, _addr = self._listener.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            thread.start()

    def _hello(self, conn):
        meta, _payload, fds = _wire.recv(conn)
        for fd in fds:
            os.close(fd)
        pe = meta.get("pe")
        if meta.get("op") != "hello" or not hmac.compare_digest(
                str(meta.get("secret", "")), self._secret):
            _wire.send(conn, {"op": "error", "message": "shmem-run: wrong job secret"})
            return None
        with self._lock:
            if not isinstance(pe, int) or not 0 <= pe < self._npes or pe in self._conns:
                _wire.send(conn, {"op": "error",
                                  "message": f"shmem-run: PE number {pe!r} is invalid or taken"})
                return None
            self._conns[pe] = conn
        _wire.send(conn, {"op": "ok", "npes": self._npes})
        return pe

    def _serve(self, conn):
        pe = None
        try:
            pe = self._hello(conn)
            if pe is None:
                conn.close()
                return
            while True:
                meta, payload, fds = _wire.recv(conn)
                if meta.get("op") == "bye":
                    with self._lock:
                        self._conns.pop(pe, None)
                        self._gone[pe] = "called shmem.finalize()"
                        self._fail_open_rounds()
                    conn.close()
                    return
                self._deposit(pe, meta, payload, fds)
        except (_wire.ConnectionClosed, OSError, ValueError):
            if pe is not None:
                self._lost(pe)
            conn.close()

    def _deposit(self, pe, meta, payload, fds):
        group = tuple(meta["group"]) if meta.get("group") is not None else None
        if group is not None and (pe not in group or list(group) != sorted(set(group))):
            self._send(pe, {"op": "error", "message": f"PE {pe} sent {meta['what']} to the group "
                            f"{list(group)}, which must be sorted, distinct and include it"})
            for fd in fds:
                os.close(fd)
            return
        with self._lock:
            key = (group, meta["seq"])
            entries = self._rounds.setdefault(key, {})
            entries[pe] = (meta, payload, fds)
            if self._gone:
                self._fail_open_rounds()
            elif len(entries) == (self._npes if group is None else len(group)):
                del self._rounds[key]
                self._answer(meta["seq"], entries)

    def _answer(self, seq, entries):
        pes = sorted(entries)
        names = {entries[pe][0]["what"] for pe in pes}
        try:
            if len(names) > 1:
                calls = ", ".join(f"PE {pe} called {entries[pe][0]['what']}" for pe in pes)
                message = (f"collective #{seq} does not match across PEs: {calls}; "
                           "every PE must make the same collective calls in the same order")
                for pe in pes:
                    self._send(pe, {"op": "error", "message": message})
                return
            payload = _wire.pack_list([entries[pe][1] for pe in pes])
            counts = [len(entries[pe][2]) for pe in pes]
            fds = [fd for pe in pes for fd in entries[pe][2]]
            for pe in pes:
                self._send(pe, {"op": "result", "nfds": counts}, payload, fds)
        finally:
            for pe in pes:
                for fd in entries[pe][2]:
                    os.close(fd)

    def _send(self, pe, meta, payload=b"", fds=()):
        conn = self._conns.get(pe)
        if conn is None:
            return
        try:
            _wire.send(conn, meta, payload, fds)
        except OSError:
            pass  # that PE is gone; the launcher sees it exit

    def _lost(self, lost_pe):
        """A PE closed its connection without saying bye: fail the PEs that wait for it."""
        with self._lock:
            self._conns.pop(lost_pe, None)
            self._gone[lost_pe] = "exited"
            self._fail_open_rounds()

    def _fail_open_rounds(self):
        """Answer every collective still waiting (now or later) with an error:
        a PE in ``_gone`` will never join it. Call with the lock held."""
        for key, entries in list(self._rounds.items()):
            group, seq = key
            what = next(iter(entries.values()))[0]["what"]
            members = range(self._npes) if group is None else group
            missing = [pe for pe in sorted(self._gone) if pe in members and pe not in entries]
            if not missing:
                continue
            gone = missing[0]
            message = (f"PE {gone} {self._gone[gone]} before reaching {what} "
                       f"(collective #{seq}), which the other PEs wait in")
            for pe in entries:
                self._send(pe, {"op": "error", "message": message})
            for _meta, _payload, fds in entries.values():
                for fd in fds:
                    os.close(fd)
            del self._rounds[key]

    def close(self):
        self._listener.close()
        with self._lock:
            for conn in self._conns.values():
                conn.close()
            self._conns.clear()
