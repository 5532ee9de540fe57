"""A job's rendezvous: a server that answers the PEs' collectives, run by a
thread of ``shmem-run`` (on a Unix socket in the job's private directory) or
of the PE that made a unique id (on a TCP socket,
``numba_shmem/_bootstrap/_uid.py``); the PEs' side is
``numba_shmem/_bootstrap/_rendezvous.py``.

A PE connects, proves it belongs to the job (the secret; on a Unix socket
also the kernel's word that the connecting process is the one ``shmem-run``
started as that PE), then sends collectives. A collective over a group is
answered, to every member at once, when all members have sent it; the answer
carries every member's payload and (over a Unix socket) file descriptors. A
collective that a departed member can never join, or that waits past the
time-out its callers sent, is answered with an error that names the PE it
waits for.
"""

import hmac
import os
import socket
import threading
import time

from . import _wire

#: how long a hello may take, and how long a PE's hello waits for the launcher to
#: say which process it started as that PE (it has just forked it)
_HELLO_S = 10.0
#: how often the watchdog looks for collectives waiting past their time-out
_WATCH_S = 0.25
#: the collective a PE that left after finalize() or a clean exit need not join
_FINALIZE = "shmem.finalize"
_CLEAN = (_wire.FINALIZED, _wire.EXITED)


def _pes(pes):
    """"PE 3" or "PEs 0, 2"."""
    pes = list(pes)
    return f"PE{'s' if len(pes) > 1 else ''} {', '.join(map(str, pes))}"


class RendezvousServer:
    """Serve the ``npes`` PEs that connect to ``listener`` (a listening socket,
    which it closes) with ``secret``. With ``check_process``, a PE's process
    must be the one ``admit`` names for it (a Unix socket's peer credentials);
    ``name`` starts its error messages."""

    def __init__(self, listener, secret, npes, check_process=False, name="shmem-run"):
        self._secret = secret
        self._npes = npes
        self._check_process = check_process
        self._name = name
        self._lock = threading.Lock()
        self._admitted = threading.Condition(self._lock)
        self._departed = threading.Condition(self._lock)
        self._pids = {}         # pe -> the pid the launcher started as that PE
        self._hellos = set()    # PEs that have said hello (a PE number is used once)
        self._conns = {}        # pe -> socket
        self._rounds = {}       # (group, seq) -> {pe: (meta, payload, fds)}
        self._started = {}      # (group, seq) -> (monotonic time of the first arrival, timeout)
        self._gone = {}         # pe -> what it did: it will never join another collective
        self.departures = []    # PEs in the order they left
        self.blamed = {}        # pe -> the departed PE whose absence failed its collective
        self._closed = False
        self._listener = listener
        self._threads = [threading.Thread(target=self._accept_loop, daemon=True),
                         threading.Thread(target=self._watch, daemon=True)]
        for thread in self._threads:
            thread.start()

    def admit(self, pe, pid):
        """Only process ``pid`` may say hello as PE ``pe``."""
        with self._admitted:
            self._pids[pe] = pid
            self._admitted.notify_all()

    def _accept_loop(self):
        while True:
            try:
                conn, _addr = self._listener.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            thread.start()

    def _refuse(self, conn, message):
        try:
            _wire.send(conn, {"op": "error", "message": f"{self._name}: {message}"})
        except OSError:
            pass
        return None

    def _hello(self, conn):
        conn.settimeout(_HELLO_S)  # a connection that says nothing is dropped
        meta, _payload, fds = _wire.recv(conn)
        conn.settimeout(None)
        for fd in fds:
            os.close(fd)
        pe = meta.get("pe")
        if meta.get("op") != "hello" or not hmac.compare_digest(
                str(meta.get("secret", "")), self._secret):
            return self._refuse(conn, "wrong job secret")
        with self._admitted:
            if not isinstance(pe, int) or not 0 <= pe < self._npes or pe in self._hellos:
                return self._refuse(conn, f"PE number {pe!r} is invalid or taken")
            if self._check_process:
                pid, uid = _wire.peer_credentials(conn)
                self._admitted.wait_for(lambda: pe in self._pids, timeout=_HELLO_S)
                if uid != os.getuid() or self._pids.get(pe) != pid:
                    return self._refuse(
                        conn, f"process {pid} is not the process shmem-run started as PE {pe}; "
                        "a PE's children cannot join its job")
            self._hellos.add(pe)
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
                    self._depart(pe, str(meta.get("why") or _wire.FINALIZED))
                    conn.close()
                    return
                self._deposit(pe, meta, payload, fds)
        except (_wire.ConnectionClosed, OSError, ValueError, KeyError, TypeError):
            if pe is not None:
                self._depart(pe, "died without leaving the job (it crashed, was killed or called os._exit)")
            conn.close()

    def _members(self, group):
        return range(self._npes) if group is None else group

    def _deposit(self, pe, meta, payload, fds):
        group = tuple(meta["group"]) if meta.get("group") is not None else None
        if group is not None and (pe not in group or list(group) != sorted(set(group))):
            self._send(pe, {"op": "error", "seq": meta["seq"],
                            "message": f"PE {pe} sent {meta['what']} to the group "
                            f"{list(group)}, which must be sorted, distinct and include it"})
            for fd in fds:
                os.close(fd)
            return
        with self._lock:
            key = (group, meta["seq"])
            entries = self._rounds.setdefault(key, {})
            entries[pe] = (meta, payload, fds)
            timeout = float(meta.get("timeout") or 0)
            first, old = self._started.get(key, (time.monotonic(), 0.0))
            self._started[key] = (first, max(old, timeout))
            self._settle(key)

    def _needed(self, key):
        """The members a round still waits for (departed ones included)."""
        group, _seq = key
        entries = self._rounds[key]
        what = next(iter(entries.values()))[0]["what"]
        return [pe for pe in self._members(group) if pe not in entries and not (
            what == _FINALIZE and self._gone.get(pe) in _CLEAN)]

    def _settle(self, key):
        """Answer the round ``key`` if it is complete, or fail it if a member it
        waits for has departed. Call with the lock held."""
        needed = self._needed(key)
        entries = self._rounds[key]
        if not needed:
            self._close_round(key)
            self._answer(key[1], entries)
            return
        gone = [pe for pe in self.departures if pe in needed]
        if gone:
            first = gone[0]  # the first to leave, not the lowest number
            meta = next(iter(entries.values()))[0]
            self._fail(key, f"PE {first} {self._gone[first]} before reaching {meta['what']} "
                            f"(collective #{key[1]}), which the other PEs wait in",
                       blame=first)

    def _close_round(self, key):
        del self._rounds[key]
        self._started.pop(key, None)

    def _fail(self, key, message, blame=None, kind="departed"):
        entries = self._rounds[key]
        self._close_round(key)
        for pe in entries:
            if blame is not None:
                self.blamed.setdefault(pe, blame)
            self._send(pe, {"op": "error", "kind": kind, "seq": key[1], "message": message})
        for _meta, _payload, fds in entries.values():
            for fd in fds:
                os.close(fd)

    def _answer(self, seq, entries):
        pes = sorted(entries)
        names = {entries[pe][0]["what"] for pe in pes}
        try:
            if len(names) > 1:
                calls = ", ".join(f"PE {pe} called {entries[pe][0]['what']}" for pe in pes)
                message = (f"collective #{seq} does not match across PEs: {calls}; "
                           "every PE must make the same collective calls in the same order")
                for pe in pes:
                    self._send(pe, {"op": "error", "seq": seq, "message": message})
                return
            payload = _wire.pack_list([entries[pe][1] for pe in pes])
            counts = [len(entries[pe][2]) for pe in pes]
            fds = [fd for pe in pes for fd in entries[pe][2]]
            for pe in pes:
                self._send(pe, {"op": "result", "seq": seq, "nfds": counts}, payload, fds)
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

    def _depart(self, pe, why):
        """PE ``pe`` will never join another collective: fail those that wait for it."""
        with self._lock:
            self._conns.pop(pe, None)
            if pe in self._gone:
                return
            self._gone[pe] = why
            self.departures.append(pe)
            for key in list(self._rounds):
                self._settle(key)
            self._departed.notify_all()

    def wait_departed(self, pe, timeout):
        """Wait up to ``timeout`` seconds until PE ``pe`` has left (its bye
        handled, the collectives that waited for it failed), then until every
        PE has: those still in a collective of their own get its answer, and
        the error that ends them, before the server goes."""
        deadline = time.monotonic() + timeout
        with self._departed:
            self._departed.wait_for(lambda: pe in self._gone, timeout=timeout)
            self._departed.wait_for(lambda: len(self._gone) >= self._npes,
                                    timeout=max(0.0, deadline - time.monotonic()))

    def _watch(self):
        """Fail every collective that has waited past the time-out its callers
        sent, naming the PEs that never arrived."""
        while not self._closed:
            time.sleep(_WATCH_S)
            now = time.monotonic()
            with self._lock:
                for key, (first, timeout) in list(self._started.items()):
                    if not timeout or now - first <= timeout or key not in self._rounds:
                        continue
                    entries = self._rounds[key]
                    what = next(iter(entries.values()))[0]["what"]
                    missing = _pes(self._needed(key))
                    self._fail(key, (
                        f"{_pes(sorted(entries))} waited {now - first:.0f} s in {what} "
                        f"(collective #{key[1]}) for {missing}, which never arrived: it is "
                        "stuck before it or called a different collective. Raise "
                        "NUMBA_SHMEM_WAIT_TIMEOUT if the job is only slow (0 waits forever)."),
                        kind="timeout")

    def close(self):
        self._closed = True
        self._listener.close()
        with self._lock:
            for conn in self._conns.values():
                conn.close()
            self._conns.clear()


class UnixRendezvousServer(RendezvousServer):
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
