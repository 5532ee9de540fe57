"""The proxy: how a PE reaches the PEs of other nodes, through MPI.

Code that targets a PE on another node posts a request descriptor into this
PE's ring (bounded: a post waits while the ring is full, it never overwrites);
a host thread, the proxy, drains the ring and sends each request to the target
PE's proxy over MPI; that proxy applies it to its own heap with the same
operations the direct path uses (so an atomic from another node is atomic
against this node's) and answers every request: with the data or old value of
a get or fetching atomic, with an acknowledgement otherwise. MPI delivers the
messages of one pair of PEs in the order they were sent and each proxy applies
them in that order, so operations toward one PE stay in program order across
the network (what ``fence`` asks); ``quiet`` waits until every request this PE
posted is answered, that is, complete at its target.

GPU threads post into a ring of their own in pinned host memory (``_ring``),
which the proxy thread drains beside this one: same requests, same order.

Memory is bounded: the data staged in the ring and not yet sent (RING_BYTES)
counts until MPI is done sending it. Data travels in pieces of at most PIECE
bytes, so that the target copies one piece into its heap while the next
arrives. Idle, the proxy polls with a back-off that reaches a millisecond (a
post wakes it at once); on the GPU it polls without sleeping for the first
10 ms (each hop of a round trip waited for a sleep on each side: 620 us a
round trip on an H200, 130-260 without). It needs MPI initialized
with MPI_THREAD_MULTIPLE (mpi4py's default): the application's thread calls
MPI (the bootstrap's collectives) meanwhile.
"""

import collections
import operator
import sys
import threading
import time

import numpy as np

from .._errors import ShmemTimeoutError, ShmemUsageError
from . import _ring

#: request kinds
PUT, GET, ATOMIC, SIGNAL = "put", "get", "atomic", "signal"
#: the answer to a request the target refused: (REFUSED, why)
REFUSED = "refused"
_REQUEST, _ANSWER, _DATA = 11, 12, 13  # MPI tags: headers (pickled), then raw data

#: at most this many requests wait in the ring, and this many bytes of their
#: data are staged (in the ring, or sent and not yet done)
RING_SLOTS = 4096
RING_BYTES = 64 << 20
#: a put's or get's data travels in MPI messages of at most this many bytes;
#: up to INLINE bytes, inside its header (one message, not two)
PIECE = 1 << 20
INLINE = 256
#: a host put of up to this many bytes is copied when posted; a larger one is
#: sent from the caller's array, and the put returns once MPI is done with it
COPY_MAX = 64 << 10

_DEVICE_KINDS = {_ring.PUT: PUT, _ring.GET: GET, _ring.ATOMIC: ATOMIC, _ring.SIGNAL: SIGNAL}


class Proxy:
    """Collective over every PE (it duplicates the bootstrap's communicator).
    ``target`` applies requests from other PEs to this PE's heap: it has
    ``bytes(offset, nbytes)`` (a writable uint8 view of the heap, which a put's
    data is received into and a get's sent from), ``atomic(offset, dtype, op,
    value, cond)`` (returns the old value) and ``signal(offset, op, value)``.

    A put's or a get's data travels as a message of its own right after its
    header (tag _DATA), never pickled: received into ``target.receive(offset,
    nbytes)`` (on the simulator the heap itself) and handed to
    ``target.received(offset, buffer)``, piece by piece (each at most PIECE
    bytes; ``received`` may copy asynchronously, so that one piece is copied
    while the next arrives; ``target.flush()`` completes the copies before the
    answer); a get's is sent from
    ``target.read(offset, nbytes)``. ``target.attach()`` runs first in the
    proxy thread (the GPU's binds its CUDA context).

    ``device`` (a ``_ring.DeviceRing``, or None) is the ring the GPU's threads
    post into; ``stop_waiters()``, if given, is called when the proxy thread
    fails (the GPU's kernels waiting for it then stop instead of hanging).
    For ``busy_poll`` seconds after its last work the proxy thread polls
    without sleeping."""

    def __init__(self, bootstrap, target, wait_timeout, debug=False, device=None,
                 stop_waiters=None, busy_poll=0.0):
        from mpi4py import MPI

        self._mpi = MPI
        if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
            raise ShmemUsageError(
                "PEs on other nodes need MPI with MPI_THREAD_MULTIPLE (the proxy thread and "
                "this one both call MPI), but MPI was initialized with a lower level; do not "
                "set mpi4py.rc.thread_level (its default, 'multiple', is what is needed)")
        self.rank = bootstrap.rank
        self._comm = bootstrap.communicator().Dup()
        self._target = target
        self._device = device
        self._stop_waiters = stop_waiters
        self._busy_poll = busy_poll
        self._closed = False
        self._unsent = {}  # seq -> data messages MPI still sends from the caller's array
        self._device_seqs = {}  # seq -> ticket, for each request from the device ring
        self._wait_timeout = wait_timeout
        self._ring = collections.deque()
        self._staged = 0
        self._lock = threading.Condition()
        self._seq = 0
        #: seq -> (its target PE, what posted it), for each request not answered yet, oldest first
        self._pending = {}
        self._results = {}  # seq -> the answer of a get or fetching atomic
        self._wanted = set()  # seqs whose answer a caller waits for
        self._refused = []  # errors of refused requests nobody waited for, for the next call
        self._failure = None
        self._stopping = False
        self._wake = threading.Event()  # set by a post: the ring has something
        self._thread = threading.Thread(target=self._serve, name="numba-shmem proxy",
                                        daemon=True)
        self._thread.start()
        if debug:
            print(f"numba-shmem: PE {self.rank}: PEs on other nodes through the proxy: "
                  f"requests sent over MPI ({MPI.Get_library_version().splitlines()[0]}) and "
                  "applied by the target PE's proxy", file=sys.stderr, flush=True)

    # -- the origin's side: called by device code and host calls ---------------

    def _post(self, pe, kind, offset, args, nbytes, what, want, unsent=0):
        """Queue one request; its sequence number. Waits while the ring is full.
        ``unsent``: the data messages of a put sent from the caller's array.
        A refusal of an earlier request that nobody waited for is raised
        first, before anything of this one is queued."""
        deadline = self._deadline()
        with self._lock:
            self._raise_refused()
            # (one request larger than the whole budget goes once nothing else is staged)
            while len(self._ring) >= RING_SLOTS or (self._staged + nbytes > RING_BYTES
                                                    and self._staged > 0):
                self._check(pe, what)
                if not self._lock.wait(self._left(deadline, pe, what, "room in the ring")):
                    self._left(deadline, pe, what, "room in the ring")
            self._check(pe, what)
            if self._device is not None:
                # what the GPU posted before this call goes first, all of it: a
                # kernel's requests that a cuda.synchronize() (or a stream) saw
                # complete come before a host call made after it
                self._ring.extend(self._take_device_requests(_ring.SLOTS))
            self._seq += 1
            self._pending[self._seq] = (pe, what)
            if want:
                self._wanted.add(self._seq)
            if unsent:
                self._unsent[self._seq] = unsent
            self._ring.append((pe, (kind, self._seq, offset, *args), nbytes))
            self._staged += nbytes
            self._wake.set()
            return self._seq

    def put(self, pe, offset, data, what):
        """Copy ``data`` (a numpy array) to ``offset`` of PE ``pe``'s heap;
        return once ``data`` may be reused: up to COPY_MAX bytes are copied
        now, a larger array once MPI has sent it (copying it first took
        longer than sending it)."""
        flat = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        if flat.size <= COPY_MAX:
            self._post(pe, PUT, offset, (flat.copy(),), flat.size, what, False)
            return
        seq = self._post(pe, PUT, offset, (flat,), flat.size, what, False,
                         unsent=-(-flat.size // PIECE))
        deadline = self._deadline()
        with self._lock:
            while seq in self._unsent:
                self._check(pe, what)
                if not self._lock.wait(self._left(deadline, pe, what, "its data to be sent")):
                    self._left(deadline, pe, what, "its data to be sent")

    def get(self, pe, offset, nbytes, what):
        """``nbytes`` from ``offset`` of PE ``pe``'s heap, as a uint8 array."""
        return self._answer(self._post(pe, GET, offset, (nbytes,), 0, what, True), pe, what)

    def atomic(self, pe, offset, dtype, op, value, cond, fetch, what):
        """An atomic ``op`` on the ``dtype`` at ``offset`` of PE ``pe``: the old
        value when ``fetch``, else None once it is posted."""
        seq = self._post(pe, ATOMIC, offset, (str(dtype), op, value, cond), 0, what, fetch)
        return self._answer(seq, pe, what) if fetch else None

    def signal(self, pe, offset, op, value, what):
        self._post(pe, SIGNAL, offset, (op, value), 0, what, False)

    def quiet(self, what="shmem.quiet", device=True):
        """Return once every request posted so far is complete at its target;
        with ``device=False`` only those the host posted and those the proxy
        thread has taken from the GPU's ring (a quiet kernel waits for the
        rest on its stream)."""
        deadline = self._deadline()
        posted = self._device.posted() if device and self._device is not None else 0
        with self._lock:
            last = self._seq
            while (self._pending and next(iter(self._pending)) <= last) or (
                    posted and self._device.complete() < posted):
                self._check(None, what)
                if not self._lock.wait(self._left(deadline, None, what, "its requests")):
                    waited = sorted({pe for seq, (pe, _) in self._pending.items() if seq <= last})
                    self._left(deadline, waited or None, what, "its requests")
            self._raise_refused()  # complete, but some target refused a request

    def _answer(self, seq, pe, what):
        deadline = self._deadline()
        with self._lock:
            while seq not in self._results:
                self._check(pe, what)
                if not self._lock.wait(self._left(deadline, pe, what, "the answer")):
                    self._left(deadline, pe, what, "the answer")
            self._wanted.discard(seq)
            result = self._results.pop(seq)
        if isinstance(result, ShmemUsageError):  # the target refused it
            raise result
        return result

    def _deadline(self):
        return time.monotonic() + self._wait_timeout if self._wait_timeout else None

    def _left(self, deadline, pe, what, waiting_for):
        """Seconds to wait on, up to a short poll; past the deadline, the error
        that says which PE waited on what."""
        if deadline is None:
            return 0.05
        left = deadline - time.monotonic()
        if left <= 0:
            if isinstance(pe, list):  # the PEs a quiet waits for
                whom = f"PE {pe[0]}" if len(pe) == 1 else "PEs " + ", ".join(map(str, pe))
            else:
                whom = f"PE {pe}" if pe is not None else "the PEs it sent them to"
            raise ShmemTimeoutError(
                f"PE {self.rank} waited {self._wait_timeout:.0f} s in {what} for {waiting_for} "
                f"from {whom} through the proxy (PEs on other nodes); the target may be stuck "
                "or gone. Raise NUMBA_SHMEM_WAIT_TIMEOUT if the job is only slow")
        return min(left, 0.05)

    def _raise_refused(self):
        """Raise the refusals of earlier requests that nobody waited for, if any
        (the lock held): the first, and how many more."""
        if self._refused:
            first, more = self._refused[0], len(self._refused) - 1
            self._refused.clear()
            raise ShmemUsageError(first + (f" (and {more} more refused requests)" if more else ""))

    def _check(self, pe, what):
        """Raise what stops a call: the proxy thread failed or stopped (the lock
        held)."""
        if self._failure is not None:
            raise ShmemUsageError(f"{what} toward PE {pe}: the proxy (PEs on other nodes) "
                                  f"stopped: {self._failure}")
        if self._stopping:
            raise ShmemUsageError(f"{what} toward PE {pe} after the proxy stopped "
                                  "(shmem.finalize); call it before finalize")

    # -- the proxy thread ---------------------------------------------------------

    def _serve(self):
        MPI = self._mpi
        sending = []  # requests and answers on their way, kept until MPI is done with them
        status = MPI.Status()
        idle_since = time.monotonic()
        try:
            self._target.attach()
            while True:
                busy = False
                with self._lock:
                    batch = list(self._ring)
                    self._ring.clear()
                    stopping = self._stopping
                    if batch:
                        self._lock.notify_all()  # room in the ring
                    if self._device is not None and self._staged < RING_BYTES:
                        batch += self._take_device_requests()
                for pe, request, nbytes in batch:
                    if request[0] == PUT and request[3].size <= INLINE:
                        kind, seq, offset, data = request
                        sending.append((self._comm.isend((kind, seq, offset, data.size,
                                                          data.tobytes()), dest=pe,
                                                         tag=_REQUEST), None, nbytes, None))
                    elif request[0] == PUT:  # the header, then the data in pieces
                        kind, seq, offset, data = request
                        sending.append((self._comm.isend((kind, seq, offset, data.size), dest=pe,
                                                         tag=_REQUEST), None, 0, None))
                        for at in range(0, data.size, PIECE):
                            piece = data[at:at + PIECE]
                            sending.append((self._comm.Isend(piece, dest=pe, tag=_DATA), piece,
                                            piece.size, seq))
                    else:
                        sending.append((self._comm.isend(request, dest=pe, tag=_REQUEST), None,
                                        0, None))
                    busy = True
                while self._comm.iprobe(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status):
                    source, tag = status.Get_source(), status.Get_tag()
                    message = self._comm.recv(source=source, tag=tag)
                    if tag == _REQUEST:
                        answer, data = self._apply(message, source)
                        sending.append((self._comm.isend(answer, dest=source, tag=_ANSWER), None,
                                        0, None))
                        if data is not None:
                            sending.append((self._comm.Isend(data, dest=source, tag=_DATA), data,
                                            0, None))
                    else:
                        seq, result = message
                        if isinstance(result, tuple) and result[0] == "data":
                            result = np.empty(result[1], np.uint8)
                            self._comm.Recv(result, source=source, tag=_DATA)
                        self._answered_one(seq, result)
                    busy = True
                # each send keeps its buffer alive until MPI is done with it;
                # then its staged bytes no longer count, and a put sent from
                # its caller's array may return once all of its pieces are sent
                still, released, sent = [], 0, []
                for entry in sending:
                    if entry[0].Test():
                        released += entry[2]
                        if entry[3] is not None:
                            sent.append(entry[3])
                    else:
                        still.append(entry)
                sending = still
                if released:
                    with self._lock:
                        self._staged -= released
                        for seq in sent:
                            if seq in self._unsent:
                                self._unsent[seq] -= 1
                                if not self._unsent[seq]:
                                    del self._unsent[seq]
                        self._lock.notify_all()
                if stopping and not batch and not sending:
                    return
                now = time.monotonic()
                idle = now - idle_since
                if busy:
                    idle_since = now
                elif idle >= self._busy_poll:
                    # a post wakes it at once; what arrives over MPI is found by
                    # polling: every 20 us (a sleep that short lasts 50-150 us)
                    # for 10 ms after the last work, then backing off to every
                    # millisecond
                    self._wake.wait(2e-5 if idle < 0.01 else min(1e-3, idle / 10))
                    self._wake.clear()
        except BaseException as exc:  # noqa: BLE001  (every caller must hear of it)
            with self._lock:
                self._failure = f"{type(exc).__name__}: {exc}"
                self._lock.notify_all()
            print(f"numba-shmem: PE {self.rank}: the proxy thread failed: {self._failure}",
                  file=sys.stderr, flush=True)
            if self._stop_waiters is not None:
                self._stop_waiters()

    def _take_device_requests(self, limit=256):
        """The GPU's new requests (at most ``limit``), numbered like the host's
        (the lock held)."""
        taken = []
        for ticket, kind, pe, offset, args, nbytes, _fetch in self._device.drain(limit):
            self._seq += 1
            self._pending[self._seq] = (pe, f"a kernel's {_DEVICE_KINDS[kind]} (ring ticket "
                                            f"{ticket})")
            self._device_seqs[self._seq] = ticket
            self._staged += nbytes
            taken.append((pe, (_DEVICE_KINDS[kind], self._seq, offset, *args), nbytes))
        return taken

    def _apply(self, request, source):
        """Apply one request from ``source``: (its answer, the data that follows
        the answer or None)."""
        kind, seq, offset, *args = request
        why = self._refusal(kind, offset, args)
        if why is not None:
            if kind == PUT and len(args) == 1 and isinstance(args[0], int) and args[0] > 0:
                # its data follows: take it, drop it
                nbytes = args[0]
                drop = np.empty(min(PIECE, nbytes), np.uint8)
                for at in range(0, nbytes, PIECE):
                    self._comm.Recv(drop[:min(PIECE, nbytes - at)], source=source, tag=_DATA)
            return (seq, (REFUSED, f"PE {self.rank} refused it: {why}")), None
        target = self._target
        if kind == PUT and len(args) == 2:  # the data inside the header
            buffer = target.receive(offset, args[0])
            buffer[:] = np.frombuffer(args[1], np.uint8)
            target.received(offset, buffer)
            target.flush()
            return (seq, None), None
        if kind == PUT:  # the data follows its header, in pieces
            nbytes = args[0]
            for at in range(0, nbytes, PIECE):
                buffer = target.receive(offset + at, min(PIECE, nbytes - at))
                self._comm.Recv(buffer, source=source, tag=_DATA)
                target.received(offset + at, buffer)
            target.flush()
            return (seq, None), None
        if kind == GET:
            return (seq, ("data", args[0])), target.read(offset, args[0])
        if kind == ATOMIC:
            dtype, op, value, cond = args
            return (seq, target.atomic(offset, dtype, op, value, cond)), None
        target.signal(offset, *args)  # (a SIGNAL: _refusal knows no other kind)
        return (seq, None), None

    def _refusal(self, kind, offset, args):
        """Why this PE does not apply a request (a str), or None: it must be a
        well-formed request of a known operation on bytes of the mapped part of
        this PE's heap, aligned for an atomic or signal. Whatever another PE
        sends, this PE's memory outside its heap (and the proxy thread) stay
        untouched."""
        counts = {PUT: (1, 2), GET: (1,), ATOMIC: (4,), SIGNAL: (2,)}
        if kind not in counts:
            return f"{kind!r} is not a request it knows"
        if len(args) not in counts[kind]:
            return f"a {kind} request of {len(args)} arguments is malformed"
        if kind in (PUT, GET):
            nbytes, align, name = args[0], 1, f"a {kind}"
            if len(args) == 2 and (not isinstance(args[1], bytes) or len(args[1]) != nbytes):
                return f"a put of {nbytes!r} bytes came with {len(args[1])}"
        elif kind == ATOMIC:
            dtype, op, value, cond = args
            if dtype not in _ring.DTYPES or op not in _ring.ATOMIC_OPS or (
                    dtype.startswith("float") and op not in _ring.FLOAT_OPS):
                return f"an atomic {op!r} on {dtype!r} is not an operation it applies"
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                       for v in (value, 0 if cond is None else cond)):
                return f"an atomic {op} of {dtype} came with {value!r} and {cond!r}"
            nbytes = align = np.dtype(dtype).itemsize
            name = f"an atomic {op} of {dtype}"
        else:
            if args[0] not in (0, 1, _ring.SIGNAL_MAX):
                return f"a signal operation {args[0]!r} is not one it applies"
            if not isinstance(args[1], int) or isinstance(args[1], bool):
                return f"a signal update came with {args[1]!r}"
            nbytes, align, name = 8, 8, "a signal update"
        try:
            offset, nbytes = operator.index(offset), operator.index(nbytes)
        except TypeError:
            return f"{name} at heap offset {offset!r} of {nbytes!r} bytes is not a range"
        extent = self._target.extent()
        if not (offset >= 0 and nbytes >= 0 and offset + nbytes <= extent):
            return (f"{name} of {nbytes} bytes at heap offset {offset} runs outside the "
                    f"{extent} mapped bytes of its heap (offsets 0 to {extent - 1})")
        if offset % align:
            return f"{name} at heap offset {offset} is not aligned to its {align} bytes"
        return None

    def _answered_one(self, seq, result):
        with self._lock:
            pe, what = self._pending.pop(seq)
            ticket = self._device_seqs.pop(seq, None)
            error = None
            if isinstance(result, tuple) and result[0] == REFUSED:
                error = ShmemUsageError(
                    f"{what} toward PE {pe}: {result[1]}; check the array, nelems and "
                    "strides of the call (NUMBA_SHMEM_DEBUG=1 checks them where it is made)")
                result = None
            if ticket is not None:
                self._device.answered(ticket, result)  # (None: zeros, for a refused fetch)
            elif seq in self._wanted:
                self._results[seq] = error or result
                error = None  # its caller raises it
            if error is not None:
                self._refused.append(str(error))
                print(f"numba-shmem: PE {self.rank}: {error} (raised by this PE's next call "
                      "toward another node, quiet or barrier)", file=sys.stderr, flush=True)
            self._lock.notify_all()

    def close(self):
        """Stop the proxy thread once what it holds is sent (every PE has
        quieted and passed the finalize barrier before), and free its
        communicator."""
        with self._lock:
            if self._closed:
                return
            self._closed = self._stopping = True
        self._wake.set()
        self._thread.join(timeout=max(self._wait_timeout or 0, 10.0))
        if not self._thread.is_alive():
            self._comm.Free()
            self._target.close()
