"""A group of PE processes kept alive across many generated examples.

``PEGroup(n)`` starts ``tests/programs/harness_pe.py`` with ``n`` PEs through
the real launcher (or, with ``node_size=k``, under mpiexec in emulated nodes of
``k`` PEs, so that some PEs are reached directly and others through the proxy);
each PE connects back to a Unix socket of the test process and runs the
collective requests sent to it (``group.run(kind, args_per_pe)``).
A PE that does not answer in time, or dies, fails the request with the PE and
what it was running; the group is then stopped and started afresh by the next
request, so a hang never wedges the suite.
"""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from conftest import PROGRAMS, ROOT, RUNNING, _clean_env, mpiexec_job, stop_job
from shmem_run import _wire


class HarnessFailure(AssertionError):
    """A PE hung, died or raised while running a request."""


class PEGroup:
    def __init__(self, npes, start_timeout=120, env=None, node_size=0):
        self.npes = npes
        self._start_timeout = start_timeout
        self._env = env or {}
        self._node_size = node_size
        self._proc = None
        self._conns = []
        self._dir = None
        self.starts = 0

    def _start(self):
        self._dir = tempfile.mkdtemp(prefix="shmem-harness-")
        path = os.path.join(self._dir, "control.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(self.npes)
        listener.settimeout(self._start_timeout)
        program = (PROGRAMS / "harness_pe.py", path)
        if self._node_size:
            argv, env = mpiexec_job(self.npes, sys.executable, *program, env={
                **self._env, "NUMBA_SHMEM_NODE_SIZE": str(self._node_size)})
        else:
            argv = [sys.executable, "-m", "shmem_run", "-n", str(self.npes), *map(str, program)]
            env = self._env
        self._proc = subprocess.Popen(
            argv,
            cwd=ROOT, env=_clean_env(env), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, start_new_session=True)
        RUNNING.add(self._proc)
        self.starts += 1
        conns = {}
        try:
            while len(conns) < self.npes:
                conn, _ = listener.accept()
                meta, _payload, _fds = _wire.recv(conn)
                conns[meta["pe"]] = conn
        except (socket.timeout, OSError) as exc:
            output = self._stop()
            raise HarnessFailure(f"the {self.npes} PEs did not start ({exc}):\n{output}") from None
        finally:
            listener.close()
        self._conns = [conns[pe] for pe in range(self.npes)]

    def run(self, kind, args_per_pe, timeout=120):
        """Send ``kind`` with ``args_per_pe[pe]`` to every PE; return their results."""
        if self._proc is None or self._proc.poll() is not None:
            self._stop()
            self._start()
        for pe, conn in enumerate(self._conns):
            _wire.send(conn, {"kind": kind, "args": args_per_pe[pe]})
        results = []
        deadline = time.monotonic() + timeout
        for pe, conn in enumerate(self._conns):
            conn.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                reply, _payload, _fds = _wire.recv(conn)
            except (socket.timeout, OSError, _wire.ConnectionClosed) as exc:
                output = self._stop()
                raise HarnessFailure(
                    f"PE {pe} did not answer {kind} within {timeout} s ({type(exc).__name__}); "
                    f"it was running {args_per_pe[pe]!r}; the group is restarted.\n"
                    f"PE output:\n{output}") from None
            if not reply["ok"]:
                self._stop()
                raise HarnessFailure(f"PE {pe} raised in {kind}: {reply['error']}\n"
                                     f"it was running {args_per_pe[pe]!r}")
            results.append(reply["result"])
        return results

    def _stop(self):
        """Stop the group (politely, then by force); return what the PEs printed."""
        output = ""
        if self._proc is not None:
            for conn in self._conns:
                try:
                    _wire.send(conn, {"kind": "exit", "args": {}})
                except OSError:
                    pass
            try:
                output, _ = self._proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                stop_job(self._proc)
                output, _ = self._proc.communicate()
            RUNNING.discard(self._proc)
        for conn in self._conns:
            conn.close()
        self._conns = []
        self._proc = None
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        return output or ""

    close = _stop
