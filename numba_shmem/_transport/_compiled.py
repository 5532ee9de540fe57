"""The proxy whose request path is compiled (``_engine``): the host's side.

The host calls post their requests into a ring in host memory (``_engine``'s
host ring, the GPU ring's layout) and wait for their answers there; a thread
of the library runs the compiled loop, which never takes the interpreter lock.
This class makes the loop's state, starts and stops its thread, and turns what
the loop records into the errors the callers raise: ``put``, ``get``,
``atomic``, ``signal``, ``quiet``, ``close``.
"""

import os
import sys
import threading
import time
import warnings

import numba
import numpy as np

from .._errors import ShmemPerformanceWarning, ShmemTimeoutError, ShmemUsageError
from .._resources import UndoStack
from . import _engine, _ring
from ._mpi_c import MPIC, library_version

_SLOTS, _CHUNK = _ring.SLOTS, _ring.CHUNK
_DESC = _ring.DESCRIPTOR // 8
_FREE, _DONE, _ANSWER = _ring.FREE // 8, _ring.DONE // 8, _ring.ANSWER // 8
_COMPLETE, _STAGING, _STATUS = _ring.COMPLETE // 8, _ring.STAGING, _engine.STATUS // 8
_KINDS = {_ring.PUT: "put", _ring.GET: "get", _ring.ATOMIC: "atomic", _ring.SIGNAL: "signal"}
#: a host put of at most this many bytes (one request's) is copied as it is
#: posted, the copy kept until MPI has sent it, and returns at once, so that
#: puts follow each other while MPI sends; a larger one is sent from the
#: caller's memory, its pieces in flight together, and waits until MPI has
#: sent them (on two cores, copies of 4 MiB puts cost more than they saved)
COPY_MAX = _engine.PIECE
#: the most bytes of such copies kept at once: a put waits for room
KEPT_MAX = 64 << 20
#: the most pieces of one call in the ring at once: a call waits for its
#: earlier pieces before it posts more, so that a transfer of any size never
#: waits for room that only its own pieces hold
WINDOW = _SLOTS // 4


#: a host call waiting for an answer or a quiet polls for SPIN_NS ns in compiled
#: code, the interpreter lock let go (an answer from another node comes in
#: microseconds), where the host has two CPUs for each of its PEs (elsewhere
#: the poll would take the CPU the loop needs to bring the answer), then
#: sleeps between polls: briefly, for the kernel's timer slack (50 us: what any
#: sleep lasts, time.sleep(0) too), then, once it has waited NAP_AFTER_S
#: seconds, a millisecond at a time
SPIN_NS = 50_000
NAP_AFTER_S = 0.1


def _word(value):
    """An int (a value's bits, up to 64 of them) as an int64 ring word."""
    value = int(value) & 0xFFFF_FFFF_FFFF_FFFF
    return value - (1 << 64) if value >= 1 << 63 else value


def _warn_if_one_cpu(comm):
    """Warn (on the first PE) where PEs may run on one CPU only: the loop's
    thread then takes turns with the application's on it, each turn a
    scheduler's tick (milliseconds), and a round trip waits for them.
    Collective over ``comm``."""
    one = comm.allgather(len(os.sched_getaffinity(0)) == 1)
    pes = [pe for pe, alone in enumerate(one) if alone]
    if comm.rank != 0 or not pes:
        return
    named = ", ".join(map(str, pes[:8])) + (f" and {len(pes) - 8} more" if len(pes) > 8 else "")
    warnings.warn(
        f"numba-shmem: PE {named} may run on one CPU only (the launcher bound "
        f"{'it' if len(pes) == 1 else 'them'} to a core), where the proxy's thread, which "
        "carries requests to PEs on other nodes, takes turns with the application: round "
        "trips wait milliseconds for the scheduler and the application's Python runs at half "
        "speed. Give each PE two CPUs or more: mpirun --map-by slot:PE=2 (or --bind-to "
        "none), srun --cpus-per-task=2", ShmemPerformanceWarning, stacklevel=2)


def _cpus_for_two(comm):
    """Whether this host's CPUs (those its PEs may run on) number two or more
    for each of its PEs: the application's thread and the loop's each have
    one, and a host call may poll for its answer without taking the loop's.
    Collective over ``comm``."""
    from mpi4py import MPI

    host = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        cpus = set().union(*host.allgather(os.sched_getaffinity(0)))
        return len(cpus) >= 2 * host.size
    finally:
        host.Free()


class CompiledProxy:
    """Collective over every PE (it duplicates the bootstrap's communicator).
    ``heap``: this PE's heap as a uint8 array of this process's memory,
    ``extent``: an int64[1] the heap keeps at the size of its mapped part,
    ``lockfd``: a descriptor of the heap's lock file of this proxy's own (its
    ``flock`` then excludes this process's other users too), closed with it.
    ``device``: the ring the GPU's threads post into (``_ring.DeviceRing``),
    or None. ``target``: how the loop reaches ``heap`` where it is not in
    this process's memory (``_engine.Target``: a GPU's), else None;
    ``attach()``, if given, runs first on the loop's thread (a CUDA context
    made current); ``pin(*arrays)``, if given, makes the loop's buffers
    page-locked for the target's copies; ``release()``, if given, is called
    when the proxy closes, once its loop has stopped. ``stop_waiters()``, if
    given, is called when the loop fails. For ``busy_poll`` seconds after its
    last work the loop polls without sleeping; then it sleeps, up to
    ``max_sleep`` seconds at a time. ``target_counts()``, if given, says how
    many batches of atomics and signals the target applied each way (stream
    memory operations, a kernel), for ``counters``."""

    def __init__(self, bootstrap, heap, extent, lockfd, wait_timeout, debug=False,
                 device=None, stop_waiters=None, busy_poll=0.0, max_sleep=100e-6,
                 target=None, attach=None, pin=None, release=None, target_counts=None):
        from mpi4py import MPI

        if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
            raise ShmemUsageError(
                "PEs on other nodes need MPI with MPI_THREAD_MULTIPLE (the proxy's thread and "
                "this one both call MPI), but MPI was initialized with a lower level; do not "
                "set mpi4py.rc.thread_level (its default, 'multiple', is what is needed)")
        self.rank = bootstrap.rank
        self._lockfd = lockfd
        self._wait_timeout = wait_timeout
        self._device = device
        self._stop_waiters = stop_waiters
        self._target, self._attach = target, attach
        self._target_counts = target_counts
        # a GPU's heap answers a get from a slot's staging (one copy out of it)
        self._get_piece = _CHUNK if target is not None else _engine.PIECE
        self._lock = threading.Lock()  # host posts, one at a time
        self._tickets = 0  # the host ring's tickets taken
        self._what = [None] * _SLOTS  # each slot's caller and target PE, for errors
        self._kept = {}  # ticket -> the copy a put is sent from, until MPI has sent it
        self._kept_bytes = 0
        self._refusals_seen = 0
        self._failure = None
        self._stopping = False
        self._closed = False
        self._host = np.zeros(_engine.HOST_NBYTES, np.uint8)
        self._words = self._host.view(np.int64)
        self._words[_FREE:_FREE + _SLOTS] = np.arange(_SLOTS)
        self._undo = UndoStack()  # what close() releases, once the loop has stopped
        self._window, self._all_clean = None, False
        self._clocks = threading.local()  # (a buffer for each waiting thread's clock)
        self._spin_ns = 0
        self._stop_fetchers = lambda: True  # (where there are none)
        try:
            self._comm = bootstrap.communicator().Dup()
            self._undo.push(self._comm.Free)
            _warn_if_one_cpu(self._comm)
            if _cpus_for_two(self._comm):
                self._spin_ns = SPIN_NS
            self._mpi = MPIC(self._comm)
            window = None
            if target is not None:
                window = self._expose()
                self._undo.push(self._free_window)
            if release is not None:
                self._undo.push(release)  # (before the window: its memory is pinned)
            # a host post wakes a sleeping loop with a byte into this pipe
            self._wake_read, self._wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
            self._undo.push(os.close, self._wake_read)
            self._undo.push(os.close, self._wake_write)
            self._state = _engine.state(self._mpi, bootstrap.size, self._host, heap, extent,
                                        lockfd, self._wake_read,
                                        None if device is None else device.memory, target,
                                        window)
            self._gpu_words = self._state.gw
            if pin is not None:
                pin(self._state.inbox, self._state.inbox2, self._state.drop, self._state.pool,
                    self._state.land, self._state.out)
            self._state.ctl[_engine.BUSY_NS] = int(busy_poll * 1e9)
            self._state.ctl[_engine.SLEEP_US] = max(1, int(max_sleep * 1e6))
            # compiled (or loaded from numba's cache) now: a failure is init()'s
            _engine.serve.compile((numba.typeof(self._state),))
            words, ints = numba.typeof(self._words), numba.int64
            for other in {words, numba.typeof(self._gpu_words)}:  # (a quiet's, with a GPU)
                _engine.spin_until.compile((words, ints, ints, other, ints, ints, ints,
                                            numba.typeof(self._state.clock_gettime),
                                            numba.typeof(self._state.clock)))
            if window is not None:
                self._start_fetchers()
            self._thread = threading.Thread(target=self._run, name="numba-shmem proxy",
                                            daemon=True)
            self._thread.start()
        except BaseException:
            self._undo.unwind()
            raise
        if debug:
            heap = "the heap reached through copies and a batch of atomics at a time" \
                if target is not None else "the heap in host memory"
            if device is not None and target is not None:
                heap += ("; kernels' puts from the heap copied out by the proxy (a warp's or a "
                         "block's blocking put of up to 256 KiB staged in the heap first) into "
                         "a window that their target reads with MPI_Rget (MPS shares the GPU)"
                         if device.from_min else "; kernels' puts staged by their "
                         "threads (the proxy's copies would wait for the application's time "
                         "slice: no MPS)")
            staged = "data staged through host memory"
            if target is not None:
                staged += {
                    True: f" (this MPI says it can address GPU memory, {self._mpi.gpu_query}: "
                          "the proxy stages it all the same)",
                    False: f" (this MPI cannot address GPU memory: {self._mpi.gpu_query} "
                           "says so)",
                    None: " (this MPI has no query of whether it can address GPU memory)",
                }[self._mpi.gpu_memory]
            print(f"numba-shmem: PE {self.rank}: PEs on other nodes through the proxy: its "
                  f"request path compiled, over MPI ({library_version()}); {staged}; {heap}",
                  file=sys.stderr, flush=True)

    def _expose(self):
        """The loop's out units, allocated by MPI as a window of this PE
        that the others' proxies read with MPI_Rget (one copy where PEs share
        a host, the network's RDMA read where the MPI has one), in a
        passive-target epoch as long as the proxy: (its handle, its memory)."""
        from mpi4py import MPI

        self._window = MPI.Win.Allocate(_engine.OUT_SEGS * _engine.PIECE, 1,
                                        comm=self._comm)
        self._window.Lock_all(MPI.MODE_NOCHECK)
        return MPI._handleof(self._window), np.frombuffer(self._window.tomemory(), np.uint8)

    def _start_fetchers(self):
        """The threads that fetch window puts' pieces for the loop
        (``_engine.fetch``), each woken through a pipe of its own; stopped
        once the loop has stopped (``_stop_fetchers``: ``close``, or the undo
        of a failed set-up), their pipes closed after."""
        state = self._state
        _engine.fetch.compile((numba.typeof(state), numba.int64))
        for me in range(_engine.FETCHERS):
            read, write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
            self._undo.push(os.close, read)
            self._undo.push(os.close, write)
            state.fpipe[me] = read, write
        threads = [threading.Thread(target=_engine.fetch, args=(state, me), daemon=True,
                                    name=f"numba-shmem fetch {me}")
                   for me in range(_engine.FETCHERS)]

        def stop():
            """Whether every fetcher has stopped (each waited for as long as
            the loop is)."""
            if state.ctl[_engine.FETCH_STOP]:  # (told before: not waited for again)
                return not any(thread.is_alive() for thread in threads)
            state.ctl[_engine.FETCH_STOP] = 1
            for me, thread in enumerate(threads):
                try:
                    os.write(int(state.fpipe[me, 1]), b"!")
                except BlockingIOError:  # (the pipe is full: it wakes anyway)
                    pass
                if thread.ident is not None:  # (started)
                    thread.join(timeout=max(self._wait_timeout or 0, 10.0))
            return not any(thread.is_alive() for thread in threads)
        self._stop_fetchers = stop
        self._undo.push(stop)
        for thread in threads:
            thread.start()
        state.ctl[_engine.FETCHING] = _engine.FETCHERS

    def _free_window(self):
        # collective: only where every PE closes its proxy (finalize) and
        # every loop ended cleanly (``close``); otherwise MPI releases it when
        # the process ends (MPI_Finalize, or the MPI_Abort of a PE that
        # failed), where a PE waiting here for the others would keep the job
        # from ending
        if self._all_clean:
            self._window.Unlock_all()
            self._window.Free()

    def _run(self):
        try:
            if self._attach is not None:
                self._attach()
            failed = _engine.serve(self._state)
            why = _engine.CALLS[failed] if failed else None
            code = int(self._state.ctl[_engine.FAILED_RC])
            if why and code:
                why += f" (it returned {code})"
        except BaseException as exc:  # noqa: BLE001  (every caller must hear of it)
            why = f"{type(exc).__name__}: {exc}"
        if why:
            self._failure = why
            print(f"numba-shmem: PE {self.rank}: the proxy thread failed: {self._failure}",
                  file=sys.stderr, flush=True)
            if self._stop_waiters is not None:
                self._stop_waiters()

    # -- posting and waiting -----------------------------------------------------------

    def _post(self, pe, code, offset, arg, what, cond=0, data=None, address=0, keep=None):
        """Post one request into the host ring; its ticket. Waits while the
        ring is full. A refusal of an earlier request nobody waited for is
        raised first. ``keep``: the copy a put is sent from (``address``),
        kept until MPI has sent it, and its slot then given back."""
        since, deadline = self._began()
        with self._lock:
            self._raise_refused()
            self._check(pe, what)
            t = self._tickets
            slot = t % _SLOTS
            words = self._words
            self._let_go()
            while words[_FREE + slot] != t:  # (the ring is full)
                self._check(pe, what)
                self._pause(since, deadline, pe, what, "room in the ring")
                self._let_go()
            while keep is not None and self._kept and \
                    self._kept_bytes + keep.nbytes > KEPT_MAX:  # (sent puts free room)
                self._check(pe, what)
                self._pause(since, deadline, self._kept_toward, what, "room for its copy "
                            "(the copies of earlier puts, until MPI has sent them)")
                self._let_go()
            self._tickets = t + 1
            if data is not None and data.size:
                self._host[_STAGING + slot * _CHUNK:_STAGING + slot * _CHUNK + data.size] = data
            d = slot * _DESC
            words[d + 1] = code
            words[d + 2] = pe
            words[d + 3] = offset
            words[d + 4] = arg
            words[d + 5] = cond
            words[d + _engine.ADDR] = address
            words[d + _engine.ORDER] = 0 if self._device is None else \
                _engine.first_unpublished(self._gpu_words, self._state.ctl[_engine.GPU_NEXT])
            self._what[slot] = (what, pe)
            if keep is not None:
                self._kept[t] = keep
                self._kept_bytes += keep.nbytes
            words[d] = t + 1  # published: last
            if self._state.ctl[_engine.SLEEPING]:
                try:
                    os.write(self._wake_write, b"!")
                except BlockingIOError:  # (the pipe is full: the loop wakes anyway)
                    pass
            return t

    def _kept_toward(self):
        """The PEs the kept copies' puts go to (for the error of a wait for room)."""
        return sorted({self._what[t % _SLOTS][1] for t in self._kept})

    def _let_go(self):
        """Give back the slots (and drop the copies) of the kept puts MPI has
        sent (the lock held)."""
        for t in [t for t in self._kept if self._words[_DONE + t % _SLOTS] == t + 1]:
            self._kept_bytes -= self._kept.pop(t).nbytes
            self._give_back(t)

    def _take(self, t, pe, what):
        """Wait for ticket ``t``'s answer; its STATUS (0, or a refusal's
        reason). The slot stays the caller's until ``_give_back``."""
        since, deadline = self._began()
        slot = t % _SLOTS
        self._spin(self._words, _DONE + slot, t + 1)
        while self._words[_DONE + slot] != t + 1:
            self._check(pe, what)
            self._pause(since, deadline, pe, what, "the answer")
        return int(self._words[_STATUS + slot])

    def _give_back(self, t):
        self._words[_FREE + t % _SLOTS] = t + _SLOTS

    def _refused(self, t, reason, pe, what):
        slot = t % _SLOTS
        d = slot * _DESC
        words = self._words
        return ShmemUsageError(self._refusal_message(
            what, pe, int(words[d + 1]), int(words[d + 3]), int(words[d + 4]), reason,
            int(words[_ANSWER + slot])))

    def put(self, pe, offset, data, what, owned=False):
        """Copy ``data`` (a numpy array) to ``offset`` of PE ``pe``'s heap;
        return once ``data`` may be reused: up to a slot's staging is copied
        into the slot, up to COPY_MAX bytes into a copy the proxy keeps until
        MPI has sent it (``owned``: ``data`` itself, a copy the caller made for
        this put and gives up); a larger array is sent from its memory in
        pieces, and the call returns once MPI has sent them."""
        flat = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        code = _ring.code(_ring.PUT)
        if flat.size <= _CHUNK:
            self._post(pe, code, offset, flat.size, what, data=flat)
            return
        if flat.size <= COPY_MAX:  # sent from a copy, kept until MPI has sent it
            copy = flat if owned else flat.copy()
            self._post(pe, code, offset, copy.size, what, address=copy.ctypes.data, keep=copy)
            return
        starts = range(0, flat.size, _engine.PIECE)
        for first in range(0, len(starts), WINDOW):
            tickets = [self._post(pe, code, offset + at, min(_engine.PIECE, flat.size - at),
                                  what, address=flat.ctypes.data + at)
                       for at in starts[first:first + WINDOW]]
            for t in tickets:  # sent: the slot, and the caller's memory, are free
                self._take(t, pe, what)
                self._give_back(t)

    def get(self, pe, offset, nbytes, what):
        """``nbytes`` from ``offset`` of PE ``pe``'s heap, as a uint8 array."""
        out = np.empty(nbytes, np.uint8)
        code = _ring.code(_ring.GET)
        piece = self._get_piece
        pieces = [(at, min(piece, nbytes - at)) for at in range(0, nbytes, piece)] or [(0, 0)]
        error = None
        for first in range(0, len(pieces), WINDOW):
            window = pieces[first:first + WINDOW]
            tickets = [self._post(pe, code, offset + at, n, what,
                                  address=0 if n <= _CHUNK else out.ctypes.data + at)
                       for at, n in window]
            for t, (at, n) in zip(tickets, window):
                reason = self._take(t, pe, what)
                if reason:
                    error = error or self._refused(t, reason, pe, what)
                elif n <= _CHUNK:
                    start = _STAGING + (t % _SLOTS) * _CHUNK
                    out[at:at + n] = self._host[start:start + n]
                self._give_back(t)
        if error is not None:
            raise error
        return out

    def atomic(self, pe, offset, dtype, op, value, cond, fetch, what):
        """An atomic ``op`` (one of ``_ring.ATOMIC_OPS``) on the ``dtype`` at
        ``offset`` of PE ``pe``: the old value when ``fetch``, else None."""
        dtype = np.dtype(dtype)
        code = _ring.code(_ring.ATOMIC, _ring.DTYPES.index(str(dtype)),
                          _ring.ATOMIC_OPS.index(op), int(fetch))
        t = self._post(pe, code, offset, _word(_ring._bits(dtype.type(value))), what,
                       cond=_word(_ring._bits(dtype.type(0 if cond is None else cond))))
        if not fetch:
            return None
        reason = self._take(t, pe, what)
        bits = int(self._words[_ANSWER + t % _SLOTS])
        error = self._refused(t, reason, pe, what) if reason else None
        self._give_back(t)
        if error is not None:
            raise error
        return _ring._value(bits & 0xFFFF_FFFF_FFFF_FFFF, dtype)

    def signal(self, pe, offset, op, value, what):
        self._post(pe, _ring.code(_ring.SIGNAL, 0, op), offset, _word(value), what)

    def quiet(self, what="shmem.quiet", device=True):
        """Return once every request posted so far is complete at its target;
        with ``device=False`` only the host's (a quiet kernel waits for the
        GPU's on its stream)."""
        since, deadline = self._began()
        last = self._tickets
        posted = self._device.posted() if device and self._device is not None else 0

        def waited():  # (the PEs its requests went to: only for the error)
            return sorted({self._what[t % _SLOTS][1]
                           for t in range(int(self._words[_COMPLETE]), last)}) or None
        self._spin(self._words, _COMPLETE, last,
                   *((self._gpu_words, _COMPLETE, int(posted)) if posted else ()))
        while self._words[_COMPLETE] < last or (posted and self._gpu_words[_COMPLETE] < posted):
            self._check(None, what)
            self._pause(since, deadline, waited, what, "its requests")
        with self._lock:
            self._let_go()  # (the copies of puts MPI has sent: dropped)
            self._raise_refused()  # complete, but some target refused a request

    # -- errors ------------------------------------------------------------------------

    def _began(self):
        """A wait's start (time.monotonic()) and deadline (None: none)."""
        now = time.monotonic()
        return now, now + self._wait_timeout if self._wait_timeout else None

    def _spin(self, words, at, value, other=None, other_at=0, other_value=0):
        """Poll (SPIN_NS) until ``words[at] >= value`` and ``other[other_at] >=
        other_value``, the interpreter lock let go."""
        if self._spin_ns:
            clock = getattr(self._clocks, "clock", None)
            if clock is None:
                clock = self._clocks.clock = np.zeros(2, np.int64)
            if other is None:
                other, other_at, other_value = words, at, value
            _engine.spin_until(words, at, value, other, other_at, other_value, self._spin_ns,
                               self._state.clock_gettime, clock)

    def _pause(self, since, deadline, pe, what, waiting_for):
        """Wait a little (``since``: when the wait began; NAP_AFTER_S says how
        long); past the deadline, the error that says which
        PE waited on what (``pe``: a PE, a list of them, None, or a function that
        returns one of those)."""
        now = time.monotonic()
        if deadline is not None and now > deadline:
            if callable(pe):
                pe = pe()
            if isinstance(pe, list):  # the PEs a quiet waits for
                whom = f"PE {pe[0]}" if len(pe) == 1 else "PEs " + ", ".join(map(str, pe))
            else:
                whom = f"PE {pe}" if pe is not None else "the PEs it sent them to"
            raise ShmemTimeoutError(
                f"PE {self.rank} waited {self._wait_timeout:.0f} s in {what} for {waiting_for} "
                f"from {whom} through the proxy (PEs on other nodes); the target may be stuck "
                "or gone. Raise NUMBA_SHMEM_WAIT_TIMEOUT if the job is only slow")
        time.sleep(0 if now - since < NAP_AFTER_S else 1e-3)

    def _check(self, pe, what):
        if self._failure is not None:
            raise ShmemUsageError(f"{what} toward PE {pe}: the proxy (PEs on other nodes) "
                                  f"stopped: {self._failure}")
        if self._stopping:
            raise ShmemUsageError(f"{what} toward PE {pe} after the proxy stopped "
                                  "(shmem.finalize); call it before finalize")

    @staticmethod
    def _refusal_message(what, pe, code, offset, nbytes, reason, extent):
        """What a refused request's caller raises."""
        kind = _KINDS.get(code & 255, "request")
        dtype, op = (code >> 8) & 255, (code >> 16) & 255
        if kind == "atomic" and dtype < len(_ring.DTYPES) and op < len(_ring.ATOMIC_OPS):
            name = f"an atomic {_ring.ATOMIC_OPS[op]} of {_ring.DTYPES[dtype]}"
            nbytes = np.dtype(_ring.DTYPES[dtype]).itemsize
        elif kind == "atomic":
            name = "an atomic"
        elif kind == "signal":
            name, nbytes = "a signal update", 8
        else:
            name = f"a {kind}"
        why = {1: f"{name} of {nbytes} bytes at heap offset {offset} runs outside the {extent} "
                  f"mapped bytes of its heap (offsets 0 to {extent - 1})",
               2: f"{name} at heap offset {offset} is not aligned to its {nbytes} bytes",
               3: f"{name} is not an operation it applies"}.get(
            reason, f"{name} of {nbytes} bytes at heap offset {offset} is malformed")
        if reason == _engine.SOURCE:
            return (f"{what} toward PE {pe}: this PE's proxy refused it: {name} of {nbytes} "
                    f"bytes reads outside the {extent} mapped bytes of this PE's heap; check "
                    "the source array of the call")
        return (f"{what} toward PE {pe}: PE {pe} refused it: {why}; check the array, nelems "
                "and strides of the call (NUMBA_SHMEM_DEBUG=1 checks them where it is made)")

    def _raise_refused(self):
        """Raise the refusals of requests that nobody waited for, recorded by
        the loop since the last time: the first, and how many more."""
        count = int(self._state.ctl[_engine.REFUSED])
        if count == self._refusals_seen:
            return
        first = self._state.refusals[self._refusals_seen % _engine.MAX_REFUSALS]
        more = count - self._refusals_seen - 1
        self._refusals_seen = count
        rid, pe, code, offset, nbytes, reason, extent = (int(v) for v in first)
        ticket = rid >> 1
        if rid & 1:
            what = f"a kernel's {_KINDS.get(code & 255, 'request')} (ring ticket {ticket})"
        else:
            what = self._what[ticket % _SLOTS][0]
        message = self._refusal_message(what, pe, code, offset, nbytes, reason, extent)
        raise ShmemUsageError(message + (f" (and {more} more refused requests)" if more else ""))

    def counters(self):
        """What the loop has done since it started (``_engine.COUNTERS``: its
        turns, ns asleep, batches sent (of requests or answers; DATA messages
        not counted), batches of requests received and their requests, refused
        ones included, and the calls into a GPU's heap and their ns), read
        while it runs; for a GPU's heap also its batches of atomics and signals
        applied as stream memory operations and by a kernel."""
        ctl = self._state.ctl
        counters = {name: int(ctl[word]) for name, word in _engine.COUNTERS.items()}
        if self._target_counts is not None:
            counters["memop_batches"], counters["kernel_batches"] = self._target_counts()
        return counters

    def trace(self, on):
        """Start recording the loop's steps (``_engine.EVENTS``) afresh (``on``),
        or stop: then what was recorded, an int64 array of (event, its two
        numbers, CLOCK_MONOTONIC ns) rows, in order. For benchmarks."""
        ctl = self._state.ctl
        ctl[_engine.TRACING] = 0
        if on:
            ctl[_engine.TRACED] = 0
            ctl[_engine.TRACING] = 1
            return None
        time.sleep(0.001)  # (a record the loop was writing lands first)
        return self._state.trace[:int(ctl[_engine.TRACED])].copy()

    def close(self, every_pe=False):
        """Stop the loop once what it holds is sent (every PE has quieted and
        passed the finalize barrier before), free its communicator and the
        descriptors; with ``every_pe`` (every PE closes its proxy now:
        finalize) its window too, where every PE's loop ended cleanly."""
        with self._lock:
            if self._closed:
                return
            self._closed = self._stopping = True
        self._state.ctl[_engine.STOP] = 1
        self._thread.join(timeout=max(self._wait_timeout or 0, 10.0))
        clean = not self._thread.is_alive() and self._failure is None
        # (a fetcher still in an MPI_Rget keeps the window, and the landing
        # memory it writes, from being let go)
        clean = self._stop_fetchers() and clean
        if every_pe and self._window is not None:
            # (freeing it is collective: all free it, or none, which leaves it
            # to MPI's end; a collective does not take the loop's messages)
            from mpi4py import MPI

            self._all_clean = self._comm.allreduce(clean, op=MPI.LAND)
        if not self._thread.is_alive():
            if clean:  # (the loop ended once all it held was sent; one that
                self._kept.clear()  # failed may have left MPI sending from them)
                self._kept_bytes = 0
            os.close(self._lockfd)
            self._undo.unwind()
