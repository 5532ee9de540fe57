"""The proxy's request path, compiled: a loop that runs without the interpreter.

One thread of each PE runs ``serve``, a numba ``@njit(nogil=True)`` function,
until it is told to stop. It drains this PE's rings (the host's, and the GPU's
where kernels post), packs their requests into one message per target PE,
sends them with MPI's C functions (``_mpi_c``), receives the batches other PEs
send, applies each request to this PE's heap and answers it, and records the
answers to this PE's own requests where their callers look. Python makes the
state, starts and stops the thread, and turns what the loop records (a
refusal, an MPI call that failed) into errors (``_compiled.CompiledProxy``).

Rings. Both have the layout of ``_ring`` (descriptors, FREE, DONE, ANSWER,
COMPLETE, staging). The host's is plain host memory, posted into by the host
calls under a lock; a host descriptor also carries ADDR (the caller's memory,
for a transfer larger than a slot's staging) and ORDER (the first of the GPU's
tickets not yet published when it was posted: the loop sends the GPU's
tickets below it first, so a kernel's requests go before a host call made
after the kernel), and each host slot has a STATUS word (a refusal's reason).

Messages, on the proxies' own communicator:

- REQ: a batch of request records, six int64 each (rid, code, offset, arg,
  cond, inline bytes), and their inline data, padded to 8 bytes. ``rid`` is
  the origin's ticket times 2, plus 1 for the GPU's ring. A host put sent from
  its caller's memory (ADDR) is FOLLOWS: its data is the next DATA message,
  received straight into the heap. So is a run of the GPU's chunk puts (the
  chunks of one transfer, in consecutive slots, toward consecutive offsets
  of one PE): one record for all, its data sent from the ring's staging,
  whose slots are given back once MPI has sent it. And so is a GPU's PUT_FROM
  (a put whose data stays in the GPU's heap): the loop copies its data out
  into pinned host memory (``Target.copy_out``), answers the
  posting thread DONE (its source may be written again; a non-blocking
  one's slot is given back instead), and sends it.
- ANS: a batch of answer records, four int64 each (rid, status, value, inline
  bytes), and a get's data; a get larger than a slot's staging is FOLLOWS.
- DATA: the data of FOLLOWS records, in record order (a tag for the data of
  requests, another for that of answers). Toward a GPU's heap a put's DATA is
  received without waiting (RECV_MAX at once) and copied once it has arrived;
  any other request waits for the data before it.

MPI delivers the messages of one pair of ranks in the order they were sent,
and the loop forwards and applies records in order: requests toward one PE
stay in program order. Every request is answered once applied; COMPLETE counts
a ring's tickets whose requests are all complete at their targets.

The target checks every record before it applies it: a known kind and
operation, aligned for an atomic or signal, inside the mapped part of its heap
(``extent``). A refused record is answered with its reason; the origin writes
it (and the target's extent) into the slot's STATUS and ANSWER (a host fetch
raises it) or a refusal record (the next host call raises it). Atomics and
signals take the lock of the heap's direct path (``flock`` on its segment,
through a descriptor of the loop's own, so that it excludes the host's
threads as well as other processes).
"""

import collections
import ctypes
import platform

import numpy as np
from numba import cfunc, njit, types
from numba.core.extending import intrinsic

from . import _ring

#: The loop's functions: numba's, cached, run without the interpreter lock and
#: without reference counting. Those that Python calls (``_entry``: the loop,
#: a fetcher thread, a quiet's wait, and the pieces the tests drive one step
#: at a time) have the wrappers numba makes for Python's calls; the rest
#: (``_inner``) have none, as each unboxes a whole State: the loop compiles
#: from an empty cache in two thirds of the time (134 s against 199 on one
#: core of this project's CI machine). ``_inlined``: inlined into its callers
#: by numba (a call that passes the State costs about 0.1 us), and still
#: callable from Python.
_entry = njit(nogil=True, cache=True, _nrt=False)
_inner = njit(nogil=True, cache=True, _nrt=False, no_cpython_wrapper=True,
              no_cfunc_wrapper=True)
_inlined = njit(nogil=True, cache=True, _nrt=False, inline="always")

#: message tags: batches of requests and of answers, and the data that follows
#: each (apart, so that answers taken while a batch of requests is served never
#: take the data of a put of that batch)
TAG_REQ, TAG_ANS, TAG_DATA, TAG_ANS_DATA = 21, 22, 23, 24
#: record headers, in int64 words
REQ_WORDS, ANS_WORDS = 6, 4
#: the most bytes of one batch message
BATCH = 1 << 20
#: batches being filled or sent, over all peers: the first half for requests,
#: the second for answers (so that answers always find room: below)
BUFFERS = 32
#: FOLLOWS records one batch may hold; DATA messages in flight (one for each
#: FOLLOWS record any buffer can hold, so a send never waits for one)
FOLLOW_MAX = 64
DATA_SENDS = BUFFERS * FOLLOW_MAX
#: a FOLLOWS record has this bit in its code word; a run of a GPU's chunks
#: (FOLLOWS too) this one as well: refused as past the heap's end, the
#: target still lands the whole chunks before it (each was a request of its own)
FOLLOWS = 1 << 32
RUN = 1 << 33
#: a put whose data waits in the origin's window (the out units its proxy
#: exposes to the others with MPI_Win_allocate): its record's cond word
#: says where, and the target fetches it with MPI_Rget (one copy, which the
#: target's loop drives, where a DATA message moves between processes of one
#: host only while both loops call MPI, in two copies)
WINDOW = 1 << 34
#: the most bytes one request moves (a larger transfer is several requests)
PIECE = _ring.PIECE
#: the most GPU tickets one run of chunk puts joins
RUN_MAX = PIECE // _ring.CHUNK
#: at most this many requests are taken from the rings between two looks at MPI
TAKE = 256
#: puts toward a GPU's heap land in pinned host memory of this many PIECE-byte
#: segments and go on with asynchronous copies: the data of the next put is
#: received while the copy of the one before runs (a segment is written again
#: once the copies from it are done: ``Target.reached``). A batch of requests
#: toward a GPU's heap is received there too, so that the data of its puts is
#: copied from where it arrived; each landing starts on a LAND_ALIGN boundary
LAND_SEGS = 8
LAND_ALIGN = 64
#: the data of a put toward a GPU's heap is received without waiting
#: (MPI_Irecv into its landing segment), up to this many at once: a DATA
#: message of one origin then moves while the loop takes the next batch and
#: posts the receive of its data (with one receive at a time, between
#: processes of one host, a message moved at about 0.6 of MPI's rate for a
#: window of them). Its copy into the heap is asked once it has arrived, in
#: order; anything else the loop applies waits for the data before it
RECV_MAX = 4
#: a put's piece that waits in its origin's window is fetched (MPI_Rget) by
#: one of FETCHERS threads of the proxy's own (``fetch``), where they run
#: (FETCHING), else by the loop: between processes of one host a fetch is one
#: memcpy in the call, on one core (on the H200's host about 9.5 GB/s, where
#: MPI's Send/Recv moves a message in two copies on two cores at once); with
#: two at once the copy into the GPU bounds the path. The receive at k goes
#: to fetcher k % FETCHERS (``fstate[k]``: POSTED, then FETCHED, or
#: FETCH_FAILED with MPI's error in ``frc[k]``); a fetcher with nothing to do
#: for FETCH_SPIN ns (a control word) naps in ``ppoll`` on its pipe, up to
#: FETCH_NAP ns. While it naps the loop fetches its pieces itself and writes a
#: byte into the pipe of every fetcher that naps, once a nap (``fnaps`` counts
#: a fetcher's naps, ``fwoken`` holds the last one woken): on the H200 the
#: first piece of a window posted to napping fetchers landed 43-172 us after
#: its batch arrived, the next ones 3-8 us apart. ``fwhen[k]``: while tracing,
#: when the fetch at k was posted, began and ended (ns)
FETCHERS = 2
FETCH_SPIN_NS = 200_000
FETCH_NAP_NS = 1_000_000_000
POSTED, FETCHED, FETCH_FAILED = 1, 2, 3
#: a GPU's PUT_FROM request is copied out of its heap into pinned host memory
#: of OUT_SEGS * PIECE bytes (twice the pieces one call keeps in the ring), in
#: units of OUT_UNIT bytes: a piece takes as many consecutive units as it
#: needs, and is sent from there (its units are taken again once MPI has sent
#: it; where they are a window, once the put is answered, which takes longer).
#: Pieces smaller than PIECE are then more in flight at once (128 of 64 KiB):
#: a piece's way (copied out, fetched, copied in, answered) takes 100 us and
#: more on the H200, most of it the copies' latency (20 us each under MPS),
#: which the pieces in flight share
OUT_SEGS = 2 * _ring.AHEAD
OUT_UNIT = 64 << 10
OUT_UNITS = OUT_SEGS * PIECE // OUT_UNIT
#: a PUT_FROM's copy out is asked as soon as the loop sees it published
#: (``copy_ahead``, ahead of the tickets it forwards, in order, while units
#: are free for it) and marked (the mark of MARK_OUT + its first unit); the
#: piece is forwarded, and its thread told (DONE, or the slot given back; a
#: staged put's staging segment too), once the mark has passed: each copy
#: runs while the loop forwards those before it and the GPU's threads post
#: the next (waiting for each cost 12-15 us a piece of 64 KiB on the H200,
#: and once a drain left one piece a drain). ``cseg``: by slot, the first
#: unit its copy goes to (-1: none asked), ``cbegan`` when it was asked;
#: ``ostate``: by unit, how many units a piece took from it (at its first),
#: -1 (another of a piece's), or 0 (free)

#: words of a host descriptor beyond the GPU ring's (ADDR: the caller's
#: memory, or for PUT_FROM the GPU's)
ADDR, ORDER = _ring.ADDR, 7
#: what the loop keeps of a request it took, by slot, for its answer (the slot
#: of a request that fetches nothing is given back when it is taken, and its
#: descriptor may be another's by the time the answer comes): code, PE,
#: offset, bytes asked, ADDR, and the tickets its record answers for (a run's)
TAKEN_WORDS = 6
#: the host ring: the GPU ring's layout, then a STATUS word per slot
STATUS = _ring.NBYTES
HOST_NBYTES = STATUS + 8 * _ring.SLOTS

#: control words (Python sets STOP, BUSY_NS, SLEEP_US, LOCKFD, HAS_GPU, the MPI
#: library's handles and constants, and for a heap on a GPU ON_DEVICE and
#: HEAP_BASE; the loop the rest, counters included; FAILED_RC is what a
#: target's function that failed returned: a CUresult on the GPU; OPEN,
#: IN_FLIGHT and DATA_IN_FLIGHT count the buffers being filled, the buffers
#: and the DATA messages MPI is sending, so that an idle turn looks at none;
#: DEFERRED the requests applied but not yet answered: ``drid``, ``dsource``;
#: LAND_SEG and LAND_FILL the landing segment being filled and its bytes used;
#: RECV_HEAD and RECV_COUNT the data receives posted, not yet landed (``rreq``
#: their requests, ``rinfo`` where each landed, where it goes, its bytes, rid
#: and source);
#: COPY_DST, COPY_AT, COPY_N the copy from it not yet asked of the target (a
#: contiguous next one joins it; COPY_ROWS of them, COPY_PITCH bytes apart in
#: the segment, each COPY_N bytes and the next's right after it in the heap:
#: the chunks of one transfer, their request records between them); LAND_HOLD
#: the segment that holds the batch being served (-1: none), which no landing
#: takes meanwhile); CHECK_HEAD and CHECK_COUNT the marks of ``settle`` not
#: yet passed (``checked``: how many of the deferred requests each covers),
#: CHECK_SINCE when the loop first saw deferred requests that no mark covers
#: (0: none); FETCHING how many fetchers run, FETCH_STOP tells them to stop,
#: FETCH_SPIN how long they spin before they nap and FETCH_NAP the longest
#: nap (ns: FETCH_SPIN_NS, FETCH_NAP_NS); COPIES
#: the copies out asked whose pieces are not yet forwarded, COPY_NEXT the
#: GPU's next ticket ``copy_ahead`` looks at
STOP, FAILED_CALL, GPU_NEXT, HOST_NEXT, REFUSED, BUSY_NS, SLEEP_US, LOCKFD, HAS_GPU, \
    COMM, BYTE, ANY_SOURCE, ANY_TAG, SOURCE_AT, TAG_AT, WAKE_FD, SLEEPING, ON_DEVICE, \
    HEAP_BASE, PENDING, LOOPS, SLEPT_NS, SENT, BATCHES_IN, APPLIED, TARGET_CALLS, TARGET_NS, \
    FAILED_RC, TRACING, TRACED, OPEN, IN_FLIGHT, DATA_IN_FLIGHT, DEFERRED, LAND_SEG, \
    LAND_FILL, COPY_DST, COPY_AT, COPY_N, COPY_ROWS, COPY_PITCH, LAND_HOLD, RECV_HEAD, \
    RECV_COUNT, WIN, CHECK_HEAD, CHECK_COUNT, CHECK_SINCE, FETCHING, FETCH_STOP, COPIES, \
    COPY_NEXT, FETCH_SPIN, FETCH_NAP, CONTROL_WORDS = range(55)
#: the counters among them (what the loop has done since it started, for
#: benchmarks: ``CompiledProxy.counters()``)
COUNTERS = {"loops": LOOPS, "slept_ns": SLEPT_NS, "batches_sent": SENT,
            "request_batches_in": BATCHES_IN, "requests_in": APPLIED,
            "target_calls": TARGET_CALLS, "target_ns": TARGET_NS}
#: what FAILED_CALL names
CALLS = ("", "MPI_Isend failed", "MPI_Recv failed", "MPI_Iprobe failed", "MPI_Test failed",
         "MPI_Get_count failed",
         "a message larger than the receive buffer came (a batch of another library?)",
         "a message of an unknown tag came", "every send buffer was in use", "flock failed",
         "copying into the GPU's heap failed",
         "copying out of the GPU's heap (or work before it on the proxy's stream) failed",
         "applying atomics, signals and p's on the GPU failed",
         "an answer to no request it sent, or malformed, came (a batch of another library?)",
         "a malformed request was in the GPU's ring", "MPI_Irecv failed", "MPI_Rget failed",
         "MPI_Win_sync failed")
#: atomics and signals toward a heap on a GPU wait here, five int64 each
#: (address, code, value, cond, the old value), to be applied together
#: (``Target.apply``) before the next request that is not one
PEND_MAX = 256
PEND_WORDS = 5
#: requests whose batch the target took in but may not have applied yet,
#: answered once it has (``settle``); at most this many at once
DEFER_MAX = 1024
#: deferred answers go in steps where the target's work keeps coming (a put's
#: copy is asked while the one before runs, so its stream is never idle for
#: ``settled`` to say so): once requests have waited CHECK_NS with no mark
#: after them, the loop marks how far the work asked has come (``mark`` of
#: LAND_SEGS + k, CHECKS of them at once) and answers the requests deferred
#: before a mark once it has passed (``passed``); the window's units of
#: the origin and a quiet there do not wait for the end of a stream of puts
CHECKS = 4
CHECK_NS = 20_000
#: the marks of a Target: a landing segment's (below LAND_SEGS), then settle's,
#: then from MARK_OUT a copy out's (by its first unit)
MARK_OUT = LAND_SEGS + CHECKS
MARKS = MARK_OUT + OUT_UNITS
#: a put to a GPU's heap of at most this many bytes, in whole aligned words of
#: 4 or 8 bytes (``p`` included), waits there too, as atomic sets of its words
#: (one record each): no copy of its own (a copy from the proxy's context can
#: wait for the application's time slice, a write to the heap in a batch of
#: stream memory operations does not)
WORDS_MAX = 1024

#: a trace of the loop's steps, while TRACING is set (for benchmarks: where a
#: round trip's time goes): TRACED records of four int64 (event, two of its
#: numbers, the CLOCK_MONOTONIC ns it happened at), up to the trace's length
TRACE_WORDS, TRACE_RECORDS = 4, 1 << 16
#: events: a request taken from a ring (its rid, target PE); a batch sent (peer,
#: tag); one received (source, tag); a call into a GPU's heap ended (its ns,
#: its FAILED_CALL number); an answer queued (rid, origin PE); an answer taken
#: at the origin (rid, target PE); a put's data received at its target (rid,
#: bytes); a DATA message's send done (the ring ticket it came from, -1 for
#: an answer's; then a run's length, -(first unit + 1) for a PUT_FROM's, or 0);
#: and, noted once it has landed, a put's fetch from a window begun (rid, the
#: fetcher, -1 for the loop itself; at its begin) and ended (rid, ns from its
#: post to its begin; at its end); and a call of one of DRIVER_CALLS, the
#: target's functions besides copies in, ``apply`` and ``settled`` (asked each
#: turn while answers wait), ended (its index, its ns)
TAKEN, SENT_BATCH, RECEIVED, CALLED, ANSWERED, ANSWER_TAKEN, LANDED, DATA_SENT, \
    FETCH_BEGAN, FETCH_ENDED, DRIVER = range(1, 12)
EVENTS = {TAKEN: "taken", SENT_BATCH: "sent", RECEIVED: "received", CALLED: "target call",
          ANSWERED: "answered", ANSWER_TAKEN: "answer taken", LANDED: "data landed",
          DATA_SENT: "data sent", FETCH_BEGAN: "fetch began", FETCH_ENDED: "fetch ended",
          DRIVER: "target's function"}
#: the target's functions a DRIVER event names (a driver call or two each on a
#: GPU: a copy out of the heap asked; an event recorded, waited for, queried)
DRIVER_CALLS = ("copy out", "mark", "reached", "passed")
COPY_OUT_CALL, MARK_CALL, REACHED_CALL, PASSED_CALL = range(len(DRIVER_CALLS))

#: refusal reasons (a STATUS word, or a refusal record's): outside the mapped
#: part of the heap, misaligned, an operation it does not apply, malformed; and
#: (refused by the origin's loop) a PUT_FROM whose source is outside the
#: mapped part of this PE's heap
OUTSIDE, MISALIGNED, UNKNOWN, MALFORMED, SOURCE = 1, 2, 3, 4, 5
#: a refusal record: rid, pe, code, offset, nbytes, reason, the target's extent
REFUSAL_WORDS = 7
MAX_REFUSALS = 256

_LOCK_EX, _LOCK_UN = 2, 8

#: everything the loop works on: the C functions it calls (ctypes function
#: pointers: passed, not global, so that the compiled loop is cached on disk,
#: whatever the addresses of this process's libraries), then numpy arrays
#: (``ctl`` the control words)
State = collections.namedtuple("State", [
    "isend", "recv", "irecv", "rget", "win_sync", "iprobe", "test", "get_count", "flock",
    "ppoll", "read", "write",
    "clock_gettime", "copy_in", "copy_out", "apply", "settled", "mark", "reached", "passed",
    "pend", "prid", "drid", "checked",
    "dsource", "ctl", "clock", "flag",
    "count", "status", "pollfd", "timeout",
    "host", "hw", "hstate", "htaken", "gpu", "gw", "gstate", "gtaken",
    "pool", "bstate", "fill", "expect", "bpeer", "btag", "breq", "openb", "follows",
    "nfollow", "dreq", "dticket", "drun", "dstate", "inbox", "inbox2", "drop", "land", "lused",
    "rreq", "rinfo", "fstate", "freq", "frc", "fsleep", "fnaps", "fwoken", "fwhen", "fpipe",
    "fpoll", "fflag", "fclock",
    "ftimeout", "fbuf", "out", "ostate", "cseg", "cbegan",
    "heap", "extent",
    "refusals", "trace"])


#: a heap that the loop reaches through functions (a GPU's), each returning 0
#: or an error code: ``copy_in(dst, src, n, pitch, rows)`` copies ``rows``
#: runs of n bytes from host memory, ``pitch`` bytes apart there, into the
#: heap at its address ``dst``, one after the other, and may return before the
#: copy is done (the source stays untouched until then); ``copy_out(dst, src, n,
#: wait)`` copies from the heap into host memory and returns once done (without
#: ``wait``, it may return before: done once ``settled()`` returns 0); ``apply(records,
#: n)`` applies n PEND_WORDS records in order (the old value into the fifth
#: word) and returns once they are applied where one fetches, else may return
#: once they are taken in. The target does its work in the order asked: all
#: of it is done once ``settled()`` returns 0 (-1: not yet) or ``copy_out`` or
#: a fetching ``apply`` has returned; ``mark(k)`` marks how far the work
#: asked has come, ``reached(k)`` returns once the work before mark ``k`` is
#: done, and ``passed(k)`` says whether it is (0, -1: not yet) without
#: waiting (k < MARKS). ``base`` is the heap's address there; ``pend``
#: (PEND_MAX x PEND_WORDS int64) is where ``apply`` finds its records.
Target = collections.namedtuple("Target", ["copy_in", "copy_out", "apply", "settled",
                                           "mark", "reached", "passed", "base", "pend"])


def state(mpic, npes, host, heap, extent, lockfd, wakefd, gpu=None, target=None, window=None):
    """A State for ``mpic`` (``_mpi_c.MPIC``: its communicator's proxies) in a
    job of ``npes`` PEs: ``host`` the host ring (HOST_NBYTES of uint8),
    ``heap`` this PE's heap (uint8, as mapped in this process), ``extent`` an
    int64[1] the heap keeps current, ``lockfd`` a descriptor for the heap's
    lock, ``wakefd`` the read end of a pipe a host post writes a byte into
    while the loop sleeps (SLEEPING), ``gpu`` the GPU's ring (or None);
    ``target`` a ``Target`` where the heap is a GPU's (``heap`` is then not
    used), else None; ``window``: (its MPI_Win handle, its memory: OUT_SEGS *
    PIECE uint8), the out units exposed to the other PEs, or None (a
    PUT_FROM's data is then sent)."""
    assert host.size == HOST_NBYTES and mpic.request_bytes <= 8
    ctl = np.zeros(CONTROL_WORDS, np.int64)
    ctl[LOCKFD] = lockfd
    ctl[HAS_GPU] = gpu is not None
    ctl[COMM], ctl[BYTE] = mpic.comm, mpic.byte
    ctl[ANY_SOURCE], ctl[ANY_TAG] = mpic.any_source, mpic.any_tag
    ctl[SOURCE_AT], ctl[TAG_AT] = mpic.source_at, mpic.tag_at
    ctl[WAKE_FD] = wakefd
    ctl[LAND_HOLD] = -1
    ctl[FETCH_SPIN], ctl[FETCH_NAP] = FETCH_SPIN_NS, FETCH_NAP_NS
    out = np.zeros(OUT_SEGS * PIECE if target is not None else 8, np.uint8)
    if window is not None:
        ctl[WIN], out = window
        assert out.dtype == np.uint8 and out.size == OUT_SEGS * PIECE
    if target is None:  # (the State's types stay one: functions that are never called)
        target = _unused_target()
    else:
        ctl[ON_DEVICE], ctl[HEAP_BASE] = 1, target.base
        assert target.pend.shape == (PEND_MAX, PEND_WORDS)
    status_bytes = mpic.status_bytes
    gpu = np.zeros(_ring.NBYTES, np.uint8) if gpu is None else gpu
    flock, ppoll, read, write, clock_gettime = _libc()
    pollfd = np.zeros(2, np.int32)  # struct pollfd: fd, then events and revents (int16)
    pollfd[0], pollfd[1] = wakefd, 1  # POLLIN
    return State(
        isend=mpic.isend, recv=mpic.recv, irecv=mpic.irecv, rget=mpic.rget,
        win_sync=mpic.win_sync, iprobe=mpic.iprobe, test=mpic.test,
        get_count=mpic.get_count, flock=flock, ppoll=ppoll, read=read, write=write,
        clock_gettime=clock_gettime, copy_in=target.copy_in, copy_out=target.copy_out,
        apply=target.apply, settled=target.settled, mark=target.mark,
        reached=target.reached, passed=target.passed, pend=target.pend,
        prid=np.zeros(PEND_MAX, np.int64), drid=np.zeros(DEFER_MAX, np.int64),
        checked=np.zeros(CHECKS, np.int64),
        dsource=np.zeros(DEFER_MAX, np.int64), ctl=ctl,
        clock=np.zeros(2, np.int64),
        pollfd=pollfd, timeout=np.zeros(2, np.int64), flag=np.zeros(1, np.int32),
        count=np.zeros(1, np.int32), status=np.zeros(max(status_bytes // 4, 8), np.int32),
        host=host, hw=host.view(np.int64), hstate=np.zeros(_ring.SLOTS, np.int64),
        htaken=np.zeros((_ring.SLOTS, TAKEN_WORDS), np.int64),
        gpu=gpu, gw=gpu[:_ring.STAGING].view(np.int64), gstate=np.zeros(_ring.SLOTS, np.int64),
        gtaken=np.zeros((_ring.SLOTS, TAKEN_WORDS), np.int64),
        pool=np.zeros((BUFFERS, BATCH), np.uint8), bstate=np.zeros(BUFFERS, np.int64),
        fill=np.zeros(BUFFERS, np.int64), expect=np.zeros(BUFFERS, np.int64),
        bpeer=np.zeros(BUFFERS, np.int64),
        btag=np.zeros(BUFFERS, np.int64), breq=np.zeros(BUFFERS, np.int64),
        openb=np.full((max(npes, 1), 2), -1, np.int64),
        follows=np.zeros((BUFFERS, FOLLOW_MAX, 4), np.int64),
        nfollow=np.zeros(BUFFERS, np.int64), dreq=np.zeros(DATA_SENDS, np.int64),
        dticket=np.zeros(DATA_SENDS, np.int64), drun=np.zeros(DATA_SENDS, np.int64),
        dstate=np.zeros(DATA_SENDS, np.int64),
        inbox=np.zeros(BATCH, np.uint8), inbox2=np.zeros(BATCH, np.uint8),
        drop=np.zeros(PIECE, np.uint8),
        land=np.zeros(LAND_SEGS * PIECE if ctl[ON_DEVICE] else 8, np.uint8),
        lused=np.zeros(LAND_SEGS, np.int64), rreq=np.zeros(RECV_MAX, np.int64),
        rinfo=np.zeros((RECV_MAX, 6), np.int64),
        fstate=np.zeros(RECV_MAX, np.int64), freq=np.zeros(RECV_MAX, np.int64),
        frc=np.zeros(RECV_MAX, np.int64), fsleep=np.zeros(FETCHERS, np.int64),
        fpipe=np.full((FETCHERS, 2), -1, np.int64), fpoll=np.zeros((FETCHERS, 2), np.int32),
        fnaps=np.zeros(FETCHERS, np.int64), fwoken=np.zeros(FETCHERS, np.int64),
        fwhen=np.zeros((RECV_MAX, 3), np.int64),
        fflag=np.zeros((FETCHERS, 2), np.int32), fclock=np.zeros((FETCHERS, 2), np.int64),
        ftimeout=np.zeros((FETCHERS, 2), np.int64), fbuf=np.zeros((FETCHERS, 4), np.int32),
        out=out,
        ostate=np.zeros(OUT_UNITS, np.int64), cseg=np.full(_ring.SLOTS, -1, np.int64),
        cbegan=np.zeros(_ring.SLOTS, np.int64), heap=heap,
        extent=extent, refusals=np.zeros((MAX_REFUSALS, REFUSAL_WORDS), np.int64),
        trace=np.zeros((TRACE_RECORDS, TRACE_WORDS), np.int64))


#: the C types of a Target's functions
COPY_IN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t,
                           ctypes.c_size_t, ctypes.c_size_t)
COPY_OUT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t,
                            ctypes.c_int64)
APPLY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int64)
SETTLED = ctypes.CFUNCTYPE(ctypes.c_int)
MARK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int64)


@cfunc(types.int32(types.uint64, types.voidptr, types.uintp, types.uintp, types.uintp),
       cache=True)
def _refuse_in(dst, src, n, pitch, rows):
    return -1


@cfunc(types.int32(types.voidptr, types.uint64, types.uintp, types.int64), cache=True)
def _refuse_out(dst, src, n, wait):
    return -1


@cfunc(types.int32(types.voidptr, types.int64), cache=True)
def _refuse_apply(records, n):
    return -1


@cfunc(types.int32(), cache=True)
def settled_at_once():
    """``settled`` of a target whose ``apply`` returns once applied."""
    return 0


@cfunc(types.int32(types.int64), cache=True)
def marked_at_once(k):
    """``mark``, ``reached`` and ``passed`` of a target whose copies return
    once done."""
    return 0


def _unused_target():
    """The Target of a heap in this process's memory, whose functions the loop
    never calls (they have the types above, and would answer an error)."""
    return Target(COPY_IN(_refuse_in.address), COPY_OUT(_refuse_out.address),
                  APPLY(_refuse_apply.address), SETTLED(settled_at_once.address),
                  MARK(marked_at_once.address), MARK(marked_at_once.address),
                  MARK(marked_at_once.address), 0, np.zeros((PEND_MAX, PEND_WORDS), np.int64))


@intrinsic
def _fence(typingctx):
    """A full memory fence: the rings are written by other threads, processes
    and the GPU; no load or store moves across it."""
    def codegen(context, builder, signature, args):
        builder.fence("seq_cst")
        return context.get_dummy_value()
    return types.void(), codegen


#: the processor's spin-wait hint (an LLVM intrinsic and its argument, if one):
#: the core's other hardware thread (often the application's) gets what a
#: polling turn would take
_SPIN_HINT = {"x86_64": ("llvm.x86.sse2.pause", None), "AMD64": ("llvm.x86.sse2.pause", None),
              "aarch64": ("llvm.aarch64.hint", 1),  # (YIELD)
              "arm64": ("llvm.aarch64.hint", 1)}.get(platform.machine())


@intrinsic
def _float_of(typingctx, bits):
    """The float32 (of a uint32) or float64 (of an int64) whose bits are
    ``bits``."""
    width = bits.bitwidth
    result = types.float32 if width == 32 else types.float64

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(result))
    return result(bits), codegen


@intrinsic
def _move(typingctx, dst, dst_at, src, src_at, n):
    """Copy ``n`` bytes from the uint8 array ``src`` at ``src_at`` to ``dst``
    at ``dst_at`` (the caller keeps both in bounds): a memmove, where a slice
    assignment would call numba's general copy (and allocate, for overlap)."""
    from llvmlite import ir
    from numba.core import cgutils

    def codegen(context, builder, signature, args):
        (dst, dst_at, src, src_at, n) = args
        byte = ir.IntType(8)
        to = context.make_array(signature.args[0])(context, builder, dst).data
        of = context.make_array(signature.args[2])(context, builder, src).data
        to = builder.gep(builder.bitcast(to, byte.as_pointer()), [dst_at])
        of = builder.gep(builder.bitcast(of, byte.as_pointer()), [src_at])
        cgutils.raw_memmove(builder, to, of, n, 1)
        return context.get_dummy_value()
    return types.void(dst, types.int64, src, types.int64, types.int64), codegen


@intrinsic
def _spin_hint(typingctx):
    """A spin-wait hint (x86's pause, Arm's yield), where the loop found
    nothing to do."""
    from llvmlite import ir
    from numba.core import cgutils

    def codegen(context, builder, signature, args):
        if _SPIN_HINT is not None:
            name, argument = _SPIN_HINT
            takes = [] if argument is None else [ir.IntType(32)]
            hint = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), takes), name)
            builder.call(hint, [] if argument is None else [ir.Constant(ir.IntType(32),
                                                                         argument)])
        return context.get_dummy_value()
    return types.void(), codegen


@intrinsic
def _arg(typingctx, function, index, value):
    """``value`` (an int64) as argument ``index`` of the C ``function`` takes
    it: a pointer, or an int of its width (MPI's handles are pointers in one
    library, ints in another)."""
    if not isinstance(index, types.IntegerLiteral):
        return None
    target = function.sig.args[index.literal_value]

    def codegen(context, builder, signature, args):
        if isinstance(target, (types.RawPointer, types.CPointer)):
            return builder.inttoptr(args[2], context.get_value_type(target))
        return context.cast(builder, args[2], signature.args[2], target)
    return target(function, index, value), codegen


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    i, p = ctypes.c_int, ctypes.c_void_p
    return (ctypes.CFUNCTYPE(i, i, i)(("flock", libc)),
            ctypes.CFUNCTYPE(i, p, ctypes.c_ulong, p, p)(("ppoll", libc)),
            ctypes.CFUNCTYPE(ctypes.c_ssize_t, i, p, ctypes.c_size_t)(("read", libc)),
            ctypes.CFUNCTYPE(ctypes.c_ssize_t, i, p, ctypes.c_size_t)(("write", libc)),
            ctypes.CFUNCTYPE(i, i, p)(("clock_gettime", libc)))


_SLOTS, _CHUNK, _DESC = _ring.SLOTS, _ring.CHUNK, _ring.DESCRIPTOR // 8
_FREE_AT, _DONE_AT, _ANSWER_AT = _ring.FREE // 8, _ring.DONE // 8, _ring.ANSWER // 8
_COMPLETE_AT, _STAGING, _STATUS_AT = _ring.COMPLETE // 8, _ring.STAGING, STATUS // 8
_PUT, _GET, _ATOMIC, _SIGNAL, _PUT_FROM = _ring.PUT, _ring.GET, _ring.ATOMIC, \
    _ring.SIGNAL, _ring.PUT_FROM
_SIGNAL_MAX = _ring.SIGNAL_MAX
_FROM_NBI = _ring.FROM_NBI
_STAGE_FREE_AT, _STAGE_SEGS = _ring.STAGE_FREE // 8, _ring.STAGE_SEGS
_FREED_AT, _STAGES_FREED_AT = _ring.FREED // 8, _ring.STAGES_FREED // 8
#: the request kinds, for a Target's ``apply``
ATOMIC_KIND, SIGNAL_KIND = _ATOMIC, _SIGNAL
#: a word of a small put (WORDS_MAX) goes to a GPU's heap as this atomic (set,
#: fetching nothing): with the atomics and signals around it
_P32 = _ring.code(_ATOMIC, _ring.DTYPES.index("uint32"), _ring.ATOMIC_OPS.index("set"))
_P64 = _ring.code(_ATOMIC, _ring.DTYPES.index("uint64"), _ring.ATOMIC_OPS.index("set"))
_REQ_BYTES, _ANS_BYTES = 8 * REQ_WORDS, 8 * ANS_WORDS
_MARKED, _MARK_SHIFT, _PE_SHIFT = _ring.MARKED, _ring.MARK_SHIFT, _ring.PE_SHIFT
_LOW56 = _ring.LOW56
_mark = _inner(_ring.mark)


@njit(cache=True, _nrt=False)  # (Python's call, under its lock: the GIL kept)
def first_unpublished(words, start):
    """The first ticket from ``start`` on that a ring has not published (a
    host post's ORDER): released, or marked whole (``marked_whole``). One
    whose words are still on their way is not published yet: no
    synchronization the host could have seen has completed it."""
    ticket = start
    while published(words, ticket):
        ticket += 1
    return ticket


@_entry
def marked_whole(words, ticket, d):
    """Whether every MARKED word of the descriptor at ``d`` carries ticket
    ``ticket``'s mark (``_ring.marked``)."""
    m = _mark(ticket)
    for k in _MARKED:
        if (words[d + k] >> _MARK_SHIFT) & 255 != m:
            return False
    return True


@_entry
def unmarked(words, d):
    """The fields of the whole marked descriptor at ``d``: code, PE, offset,
    arg and cond (a put's value)."""
    first = words[d] & _LOW56
    return (first & ((1 << _PE_SHIFT) - 1), first >> _PE_SHIFT,
            (words[d + 1] << 8) >> 8,  # (56 bits, signed)
            (words[d + 2] & 0xFFFF_FFFF) | (words[d + 3] << 32),
            (words[d + 6] & 0xFFFF_FFFF) | (words[d + 7] << 32))


@_inner
def first_taken(words, waits_at, n, first):
    """The first ticket from ``first`` on whose slot (of the ``n`` at
    ``waits_at``: the ticket each waits for) is not given back yet. (A
    slot's word only grows: past ``first + n``, its next ticket came and
    went back too.)"""
    while words[waits_at + first % n] >= first + n:
        first += 1
    return first


@_entry
def given_back(gw):
    """Advance the GPU ring's FREED and STAGES_FREED words past the tickets
    whose slots and staging segments are back (the loop's or a thread's
    release), so that threads need not read their slot's word over the bus.
    The slots' words are read first (x86 keeps a store after earlier loads)."""
    freed = gw[_FREED_AT]
    if gw[_FREE_AT + freed % _SLOTS] >= freed + _SLOTS:
        gw[_FREED_AT] = first_taken(gw, _FREE_AT, _SLOTS, freed)
    freed = gw[_STAGES_FREED_AT]
    if gw[_STAGE_FREE_AT + freed % _STAGE_SEGS] >= freed + _STAGE_SEGS:
        gw[_STAGES_FREED_AT] = first_taken(gw, _STAGE_FREE_AT, _STAGE_SEGS, freed)


@_inner
def now_ns(s):
    return clock_ns(s.clock_gettime, s.clock)


@_inner
def clock_ns(clock_gettime, clock):
    """CLOCK_MONOTONIC in ns (the loop's idle turns call this, not ``now_ns``:
    they touch no more of the State than they need)."""
    clock_gettime(1, clock.ctypes.data)
    return clock[0] * 1_000_000_000 + clock[1]


@_entry
def spin_until(words, at, value, other, other_at, other_value, ns, clock_gettime, clock):
    """Poll, without the interpreter lock, until ``words[at] >= value`` and
    ``other[other_at] >= other_value`` (True), or for ``ns`` ns (False): a
    host call's wait for the loop before it sleeps."""
    since = clock_ns(clock_gettime, clock)
    while True:
        _fence()  # (read anew each time: the loop writes them)
        if words[at] >= value and other[other_at] >= other_value:
            return True
        if clock_ns(clock_gettime, clock) - since >= ns:
            return False
        _spin_hint()


@_inner
def note(s, event, a, b, at):
    """Record ``event`` with its numbers ``a``, ``b`` at ``at`` ns (0: now)
    while the trace has room (callers look at TRACING first)."""
    n = s.ctl[TRACED]
    if n < s.trace.shape[0]:
        s.trace[n, 0] = event
        s.trace[n, 1] = a
        s.trace[n, 2] = b
        s.trace[n, 3] = at if at else now_ns(s)
        s.ctl[TRACED] = n + 1


@_inlined
def tracing_now(s):
    """Now (ns) while the trace records, else 0. (Inline, as ``traced``: a
    call that passes the state costs about 0.1 us.)"""
    return now_ns(s) if s.ctl[TRACING] else 0


@_inlined
def traced(s, began, which, rc):
    """``rc``, what the target's function ``which`` (DRIVER_CALLS) called at
    ``began`` (``tracing_now``) returned; the call noted where it was traced."""
    if began:
        ended = now_ns(s)
        note(s, DRIVER, which, ended - began, ended)
    return rc


@_inner
def target_call(s, began, call):
    """Count one call of the target's functions, begun at ``began`` (ns);
    ``call``: its FAILED_CALL number."""
    ended = now_ns(s)
    s.ctl[TARGET_CALLS] += 1
    s.ctl[TARGET_NS] += ended - began
    if s.ctl[TRACING]:
        note(s, CALLED, ended - began, call, ended)


@_inner
def target_failed(s, rc, call):
    """Whether the target's function that returned ``rc`` failed (then
    recorded: ``rc`` and ``call``, its FAILED_CALL number)."""
    if rc == 0:
        return False
    s.ctl[FAILED_RC] = rc
    s.ctl[FAILED_CALL] = call
    return True


@_entry
def issue_copy(s):
    """Ask the target for the copy that waits (COPY_ROWS runs of COPY_N bytes
    from the landing segments into the heap), counted. False if the target
    failed."""
    n = s.ctl[COPY_N]
    if n == 0:
        return True
    s.ctl[COPY_N] = 0
    began = now_ns(s)
    rc = s.copy_in(s.ctl[COPY_DST],
                   _arg(s.copy_in, 1, np.int64(s.land.ctypes.data) + s.ctl[COPY_AT]), n,
                   s.ctl[COPY_PITCH], s.ctl[COPY_ROWS])
    target_call(s, began, 10)
    return not target_failed(s, rc, 10)


@_inner
def land(s, n):
    """Where in ``land`` ``n`` bytes (at most PIECE) may be written now: in
    the segment being filled, or in the next (not LAND_HOLD) once the data
    receives into it have landed and the copies from it are done. -1 if MPI
    or the target failed."""
    seg, fill = s.ctl[LAND_SEG], s.ctl[LAND_FILL]
    if fill + n > PIECE or fill == PIECE:  # (even nothing starts within a segment)
        if not issue_copy(s) or (s.lused[seg] != 0 and target_failed(
                s, traced(s, tracing_now(s), MARK_CALL, s.mark(seg)), 10)):
            return -1
        seg = (seg + 1) % LAND_SEGS
        if seg == s.ctl[LAND_HOLD]:
            seg = (seg + 1) % LAND_SEGS
        if s.lused[seg] != 0:
            while receiving_into(s, seg):  # (the oldest receives: in order)
                if landed_data(s, True) < 0:
                    return -1
            if target_failed(s, traced(s, tracing_now(s), REACHED_CALL, s.reached(seg)), 10):
                return -1
            s.lused[seg] = 0
        s.ctl[LAND_SEG] = seg
        fill = 0
    s.ctl[LAND_FILL] = min(fill + (n + LAND_ALIGN - 1) // LAND_ALIGN * LAND_ALIGN, PIECE)
    s.lused[seg] = 1
    return seg * PIECE + fill


@_inner
def completed(s, requests, k):
    """Whether MPI's request ``requests[k]`` is complete (MPI_Test): 1, 0, or
    -1 if MPI failed (recorded)."""
    if s.test(requests[k:k + 1].ctypes.data, s.flag.ctypes.data, 0) != 0:
        s.ctl[FAILED_CALL] = 4
        return -1
    return 1 if s.flag[0] != 0 else 0


@_inner
def receiving_into(s, seg):
    """Whether a data receive not yet landed goes into landing segment ``seg``."""
    for j in range(s.ctl[RECV_COUNT]):
        if s.rinfo[(s.ctl[RECV_HEAD] + j) % RECV_MAX, 0] // PIECE == seg:
            return True
    return False


@_inner
def receive_data(s, at, address, n, rid, source, disp):
    """Post the receive of the next DATA message of ``source`` (``n`` bytes,
    into ``land[at]``; with ``disp`` >= 0, the get of those bytes from
    ``source``'s window at ``disp`` instead), to be copied to ``address`` of
    the GPU's heap and request ``rid`` answered once it has landed
    (``landed_data``). False if MPI or the target failed."""
    if s.ctl[RECV_COUNT] == RECV_MAX and landed_data(s, True) < 0:
        return False
    k = (s.ctl[RECV_HEAD] + s.ctl[RECV_COUNT]) % RECV_MAX
    into = np.int64(s.land.ctypes.data) + at
    s.rinfo[k, 0], s.rinfo[k, 1], s.rinfo[k, 2], s.rinfo[k, 3], s.rinfo[k, 4], \
        s.rinfo[k, 5] = at, address, n, rid, source, disp
    f = k % FETCHERS
    if disp >= 0 and s.ctl[TRACING]:
        s.fwhen[k, 0] = now_ns(s)
    if disp >= 0 and s.ctl[FETCHING] != 0 and s.fsleep[f] == 0:
        _fence()  # (what it fetches, before the word that posts it)
        s.fstate[k] = POSTED
        _fence()  # (posted before its sleep is looked at: a fetcher that sleeps
        if s.fsleep[f] != 0:  # looks at its posts after it says so)
            wake(s, f)
    elif disp >= 0:  # (fetched here: no fetcher, or its fetcher sleeps)
        for g in range(s.ctl[FETCHING]):  # (every one that naps: the next piece may be its)
            if s.fsleep[g] != 0:
                wake(s, g)
        byte = _arg(s.rget, 2, s.ctl[BYTE])
        if s.ctl[TRACING]:
            s.fwhen[k, 1] = now_ns(s)
        if s.rget(_arg(s.rget, 0, into), n, byte, source, disp, n, byte,
                  _arg(s.rget, 7, s.ctl[WIN]), s.rreq[k:k + 1].ctypes.data) != 0:
            s.ctl[FAILED_CALL] = 16
            return False
    else:
        comm, byte = _arg(s.irecv, 5, s.ctl[COMM]), _arg(s.irecv, 2, s.ctl[BYTE])
        if s.irecv(_arg(s.irecv, 0, into), n, byte, source, TAG_DATA, comm,
                   s.rreq[k:k + 1].ctypes.data) != 0:
            s.ctl[FAILED_CALL] = 15
            return False
    s.ctl[RECV_COUNT] += 1
    return True


@_inner
def wake(s, f):
    """Wake fetcher ``f`` from its nap (once a nap), seen asleep."""
    _fence()  # (its nap's number, read after its sleep: the fetcher wrote it before)
    nap = s.fnaps[f]
    if s.fwoken[f] != nap:
        s.fwoken[f] = nap
        s.write(_arg(s.write, 0, s.fpipe[f, 1]), s.fbuf[f].ctypes.data, 1)


@_inner
def fetched(s, k):
    """Whether the fetch posted at ``k`` to a fetcher is done: 1, 0, or -1
    if it failed (MPI's error recorded)."""
    state = s.fstate[k]
    _fence()  # (the state before the data it says is there)
    if state == FETCHED:
        return 1
    if state == FETCH_FAILED:
        s.ctl[FAILED_CALL] = 16
        s.ctl[FAILED_RC] = s.frc[k]
        return -1
    return 0


@_entry
def fetch(s, me):
    """A fetcher's loop (number ``me``): fetch each piece the loop posts it
    (``receive_data``) with MPI_Rget and wait for it; sleep in ``ppoll`` on
    its pipe after FETCH_SPIN ns with none. Returns once FETCH_STOP is set."""
    ctl = s.ctl
    byte = _arg(s.rget, 2, ctl[BYTE])
    window = _arg(s.rget, 7, ctl[WIN])
    clock = s.fclock[me]
    idle_since = clock_ns(s.clock_gettime, clock)
    while ctl[FETCH_STOP] == 0:
        worked = False
        for k in range(me, RECV_MAX, FETCHERS):
            if s.fstate[k] != POSTED:
                continue
            _fence()  # (posted: its fields are there)
            n = s.rinfo[k, 2]
            into = _arg(s.rget, 0, np.int64(s.land.ctypes.data) + s.rinfo[k, 0])
            if ctl[TRACING]:
                s.fwhen[k, 1] = clock_ns(s.clock_gettime, clock)
            rc = s.rget(into, n, byte, s.rinfo[k, 4], s.rinfo[k, 5], n, byte, window,
                        s.freq[k:k + 1].ctypes.data)
            s.fflag[me, 0] = 0
            while rc == 0 and s.fflag[me, 0] == 0:
                rc = s.test(s.freq[k:k + 1].ctypes.data, s.fflag[me].ctypes.data, 0)
            if ctl[TRACING]:
                s.fwhen[k, 2] = clock_ns(s.clock_gettime, clock)
            s.frc[k] = rc
            _fence()  # (the data, then the word that says it is there)
            s.fstate[k] = FETCHED if rc == 0 else FETCH_FAILED
            worked = True
        now = clock_ns(s.clock_gettime, clock)
        if worked:
            idle_since = now
        elif now - idle_since <= ctl[FETCH_SPIN]:
            _spin_hint()
        else:
            s.fnaps[me] += 1  # (a nap the loop has not woken it from yet)
            _fence()
            s.fsleep[me] = 1
            _fence()
            posted = False
            for k in range(me, RECV_MAX, FETCHERS):
                posted = posted or s.fstate[k] == POSTED
            if not posted and ctl[FETCH_STOP] == 0:
                s.fpoll[me, 0], s.fpoll[me, 1] = s.fpipe[me, 0], 1  # POLLIN
                nap = ctl[FETCH_NAP]  # (woken by a post before)
                s.ftimeout[me, 0], s.ftimeout[me, 1] = nap // 1_000_000_000, nap % 1_000_000_000
                if s.ppoll(s.fpoll[me].ctypes.data, 1, s.ftimeout[me].ctypes.data, 0) > 0:
                    s.read(_arg(s.read, 0, s.fpipe[me, 0]), s.fbuf[me].ctypes.data, 16)
            s.fsleep[me] = 0
            idle_since = clock_ns(s.clock_gettime, clock)
    return 0


@_entry
def landed_data(s, wait):
    """The oldest data receive posted, once it has arrived (with ``wait``:
    waited for): its copy into the heap asked (its segment marked again where
    the loop has left it, so that it is written again only once the copy is
    done) and its request answered once that is done. 1, 0 if it has not
    arrived (or none is posted), -1 if MPI or the target failed."""
    if s.ctl[RECV_COUNT] == 0:
        return 0
    k = s.ctl[RECV_HEAD]
    posted = s.fstate[k] != 0
    while True:
        done = fetched(s, k) if posted else completed(s, s.rreq, k)
        if done < 0:
            return -1
        if done:
            break
        if not wait:
            return 0
    s.fstate[k] = 0
    s.ctl[RECV_HEAD] = (k + 1) % RECV_MAX
    s.ctl[RECV_COUNT] -= 1
    if s.ctl[TRACING]:
        if s.rinfo[k, 5] >= 0:  # (fetched from a window: by whom, and when)
            if not posted:  # (the loop's own: done once MPI_Test said so)
                s.fwhen[k, 2] = now_ns(s)
            note(s, FETCH_BEGAN, s.rinfo[k, 3], k % FETCHERS if posted else -1, s.fwhen[k, 1])
            note(s, FETCH_ENDED, s.rinfo[k, 3], s.fwhen[k, 1] - s.fwhen[k, 0], s.fwhen[k, 2])
        note(s, LANDED, s.rinfo[k, 3], s.rinfo[k, 2], 0)
    at = s.rinfo[k, 0]
    if not land_copy(s, s.rinfo[k, 1], at, s.rinfo[k, 2]):
        return -1
    seg = at // PIECE
    if seg != s.ctl[LAND_SEG] and (not issue_copy(s) or target_failed(
            s, traced(s, tracing_now(s), MARK_CALL, s.mark(seg)), 10)):
        return -1
    return 1 if defer(s, s.rinfo[k, 4], s.rinfo[k, 3]) else -1


@_entry
def all_landed(s):
    """Wait for every data receive posted, in order (``landed_data``). False
    if MPI or the target failed."""
    while s.ctl[RECV_COUNT] != 0:
        if landed_data(s, True) < 0:
            return False
    return True


@_inner
def land_copy(s, address, at, n):
    """Copy ``n`` bytes landed at ``land[at]`` to ``address`` of the GPU's
    heap: joined to the copy that waits where both continue it (the chunks
    of one transfer: contiguous where they landed alone, one pitch apart
    where they came in one batch), else after it. False if the target
    failed."""
    width, rows = s.ctl[COPY_N], s.ctl[COPY_ROWS]
    if width != 0 and s.ctl[COPY_DST] + width * rows == address:
        first, pitch = s.ctl[COPY_AT], s.ctl[COPY_PITCH]
        if rows == 1 and first + width == at:
            s.ctl[COPY_N] = width + n
            s.ctl[COPY_PITCH] = width + n
            return True
        if n == width and (at == first + pitch * rows if rows > 1 else at > first + width):
            s.ctl[COPY_PITCH] = at - first if rows == 1 else pitch
            s.ctl[COPY_ROWS] = rows + 1
            return True
    if not issue_copy(s):
        return False
    s.ctl[COPY_DST], s.ctl[COPY_AT], s.ctl[COPY_N] = address, at, n
    s.ctl[COPY_PITCH], s.ctl[COPY_ROWS] = n, 1
    return True


@_inner
def defer(s, source, rid):
    """Answer request ``rid`` of ``source`` once the target has applied what
    was asked of it so far (``settle``). False if the target or MPI failed."""
    k = s.ctl[DEFERRED]
    if k == DEFER_MAX:
        if not settle(s, True):
            return False
        k = 0
    s.drid[k] = rid
    s.dsource[k] = source
    s.ctl[DEFERRED] = k + 1
    return True


@_inner
def run_landed(offset, nbytes, extent):
    """Of a run of chunks at ``offset`` refused as past the end of a heap of
    ``extent`` bytes: the bytes of its whole chunks before the end, which the
    target lands as their own requests would have (and the origin's refusal
    record skips)."""
    if offset < 0 or offset >= extent or nbytes <= 0 or nbytes > PIECE:
        return 0
    return min(nbytes, (extent - offset) // _CHUNK * _CHUNK)


@_entry
def pad(n):
    return (n + 7) & ~7


@_entry
def fetches(code):
    kind = code & 255
    return kind == _GET or (kind == _ATOMIC and ((code >> 24) & 1) == 1)


# -- a target's side: checking and applying requests ---------------------------


@_entry
def refusal(code, offset, arg, extent):
    """0 where this PE applies the request, else its reason (OUTSIDE, ...)."""
    kind = code & 255
    dtype = (code >> 8) & 255
    op = (code >> 16) & 255
    if kind == _PUT or kind == _GET:
        nbytes, align = arg, 1
    elif kind == _ATOMIC:
        if dtype > 5 or op > 7 or (dtype >= 4 and op != 0 and op != 1 and op != 2
                                   and op != 4):
            return UNKNOWN
        nbytes = 4 if dtype == 0 or dtype == 1 or dtype == 4 else 8
        align = nbytes
    elif kind == _SIGNAL:
        if dtype != 0 or (op != 0 and op != 1 and op != _SIGNAL_MAX):
            return UNKNOWN
        nbytes, align = 8, 8
    else:
        return MALFORMED
    if offset < 0 or nbytes < 0 or offset > extent or nbytes > extent - offset:
        return OUTSIDE
    if offset % align != 0:
        return MISALIGNED
    return 0


@_inner
def apply_atomic(heap, offset, code, value, cond):
    """The atomic of ``code`` on the heap (the lock held); the old value's
    bits. Integer operations act on the bits, signed or not alike."""
    dtype = (code >> 8) & 255
    op = (code >> 16) & 255
    if dtype == 0 or dtype == 1 or dtype == 4:  # 4 bytes
        word = heap[offset:offset + 4].view(np.uint32)
        old = np.int64(word[0])
        v = np.uint32(value & 0xFFFFFFFF)
        if op == 1 or op == 2:  # set, swap
            word[0] = v
        elif op == 3:  # compare_swap
            if word[0] == np.uint32(cond & 0xFFFFFFFF):
                word[0] = v
        elif op == 4 and dtype == 4:
            single = heap[offset:offset + 4].view(np.float32)
            single[0] = single[0] + _float_of(v)
        elif op == 4:
            word[0] = np.uint32(np.uint64(word[0]) + np.uint64(v))
        elif op == 5:
            word[0] = word[0] & v
        elif op == 6:
            word[0] = word[0] | v
        elif op == 7:
            word[0] = word[0] ^ v
        return old
    word8 = heap[offset:offset + 8].view(np.int64)
    old = word8[0]
    if op == 1 or op == 2:
        word8[0] = value
    elif op == 3:
        if word8[0] == cond:
            word8[0] = value
    elif op == 4 and dtype == 5:
        double = heap[offset:offset + 8].view(np.float64)
        double[0] = double[0] + _float_of(value)
    elif op == 4:
        word8[0] = np.int64(np.uint64(word8[0]) + np.uint64(value))
    elif op == 5:
        word8[0] = word8[0] & value
    elif op == 6:
        word8[0] = word8[0] | value
    elif op == 7:
        word8[0] = word8[0] ^ value
    return old


@_inner
def apply_signal(heap, offset, op, value):
    word = heap[offset:offset + 8].view(np.uint64)
    v = np.uint64(value)
    if op == 0:
        word[0] = v
    elif op == 1:
        word[0] = word[0] + v
    elif word[0] < v:  # MAX: a barrier's epoch
        word[0] = v


# -- send buffers --------------------------------------------------------------


@_inner
def open_buffer(s, pe, tag, need, answers):
    """The buffer being filled for (``pe``, ``tag``) with room for ``need``
    bytes and (requests) ``answers`` bytes of their answers; a full one is
    sent first. -1 if none is free, -2 if MPI failed."""
    b = s.openb[pe, tag - TAG_REQ]
    if b >= 0 and s.fill[b] + need <= BATCH and s.expect[b] + answers <= BATCH and \
            s.nfollow[b] < FOLLOW_MAX:
        return b
    if b >= 0 and not send_buffer(s, b):
        return -2
    half = BUFFERS // 2
    first = 0 if tag == TAG_REQ else half
    for k in range(first, first + half):
        if s.bstate[k] == 0:
            s.bstate[k] = 1
            s.ctl[OPEN] += 1
            s.fill[k] = 0
            s.expect[k] = 0
            s.nfollow[k] = 0
            s.bpeer[k] = pe
            s.btag[k] = tag
            s.openb[pe, tag - TAG_REQ] = k
            return k
    return -1


@_inner
def send_buffer(s, b):
    """Send buffer ``b``, then the DATA messages of its FOLLOWS records.
    False if MPI failed."""
    comm, byte = _arg(s.isend, 5, s.ctl[COMM]), _arg(s.isend, 2, s.ctl[BYTE])
    pe, tag = s.bpeer[b], s.btag[b]
    if s.isend(s.pool[b].ctypes.data, s.fill[b], byte, pe, tag, comm,
               s.breq[b:b + 1].ctypes.data) != 0:
        s.ctl[FAILED_CALL] = 1
        return False
    s.bstate[b] = 2
    s.ctl[OPEN] -= 1
    s.ctl[IN_FLIGHT] += 1
    s.ctl[SENT] += 1
    if s.ctl[TRACING]:
        note(s, SENT_BATCH, pe, tag, 0)
    s.openb[pe, tag - TAG_REQ] = -1
    d = 0
    for j in range(s.nfollow[b]):
        while d < DATA_SENDS and s.dstate[d] != 0:  # (data_queued keeps one free)
            d += 1
        if d == DATA_SENDS:
            s.ctl[FAILED_CALL] = 8
            return False
        data_tag = TAG_DATA if tag == TAG_REQ else TAG_ANS_DATA
        if s.isend(_arg(s.isend, 0, s.follows[b, j, 0]), s.follows[b, j, 1], byte, pe,
                   data_tag, comm, s.dreq[d:d + 1].ctypes.data) != 0:
            s.ctl[FAILED_CALL] = 1
            return False
        s.dstate[d] = 1
        s.ctl[DATA_IN_FLIGHT] += 1
        s.dticket[d] = s.follows[b, j, 2]
        s.drun[d] = s.follows[b, j, 3]
    s.nfollow[b] = 0
    return True


@_entry
def flush(s):
    """Send every buffer being filled. False if MPI failed."""
    for b in range(BUFFERS):
        if s.bstate[b] == 1 and not send_buffer(s, b):
            return False
    return True


@_inner
def data_queued(s):
    """DATA messages in flight or to be sent with the buffers being filled."""
    n = s.ctl[DATA_IN_FLIGHT]
    for b in range(BUFFERS):
        if s.bstate[b] == 1:
            n += s.nfollow[b]
    return n


@_entry
def reap(s):
    """Free what MPI is done sending (a host put sent from its caller's
    memory is then done with it: DONE; a run of the GPU's chunks gives its
    slots back: FREE; a PUT_FROM its units); how many, or -1 if MPI failed."""
    freed = 0
    left = s.ctl[IN_FLIGHT]
    for b in range(BUFFERS):
        if left == 0:
            break
        if s.bstate[b] == 2:
            left -= 1
            done = completed(s, s.breq, b)
            if done < 0:
                return -1
            if done:
                s.bstate[b] = 0
                s.ctl[IN_FLIGHT] -= 1
                freed += 1
    left = s.ctl[DATA_IN_FLIGHT]
    for d in range(DATA_SENDS):
        if left == 0:
            break
        if s.dstate[d] == 1:
            left -= 1
            done = completed(s, s.dreq, d)
            if done < 0:
                return -1
            if done:
                s.dstate[d] = 0
                s.ctl[DATA_IN_FLIGHT] -= 1
                ticket, run = s.dticket[d], s.drun[d]
                if s.ctl[TRACING]:
                    note(s, DATA_SENT, ticket, run, 0)
                if run > 0:
                    _fence()
                    for t in range(ticket, ticket + run):
                        s.gw[_FREE_AT + t % _SLOTS] = t + _SLOTS
                elif run < 0:  # (a PUT_FROM's units)
                    give_out(s, -run - 1)
                elif ticket >= 0:
                    _fence()
                    s.hw[_DONE_AT + ticket % _SLOTS] = ticket + 1
                freed += 1
    return freed


@_entry
def take_out(s, nbytes):
    """Take the first run of free out units that holds ``nbytes``: its first
    unit, or -1 where none is free."""
    need = (nbytes + OUT_UNIT - 1) // OUT_UNIT
    free = 0
    for u in range(OUT_UNITS):
        free = free + 1 if s.ostate[u] == 0 else 0
        if free == need:
            first = u + 1 - need
            s.ostate[first] = need
            for k in range(first + 1, u + 1):
                s.ostate[k] = -1
            return first
    return -1


@_entry
def give_out(s, first):
    """Give back the out units of the piece that took ``first`` on."""
    for k in range(first, first + s.ostate[first]):
        s.ostate[k] = 0


@_entry
def copy_ahead(s):
    """Ask the copies out of the GPU's PUT_FROM requests published from
    COPY_NEXT on, in ticket order, each into free units, and mark each
    (``forward`` sends its piece once the mark has passed); up to the first
    one no units are free for, or that ``forward`` refuses or stops at as it
    reads now (it decides once it gets there: the heap may have grown, or
    shrunk again, meanwhile). False if the target failed."""
    ctl, words = s.ctl, s.gw
    t = max(ctl[COPY_NEXT], ctl[GPU_NEXT])
    while t - ctl[GPU_NEXT] < _SLOTS and published(words, t):
        slot = t % _SLOTS
        d = slot * _DESC
        code, arg = words[d + 1], words[d + 4]
        source = words[d + ADDR] - ctl[HEAP_BASE]
        if words[d] > 0 and code & 255 == _PUT_FROM and s.cseg[slot] < 0:  # (released)
            if arg <= 0 or arg > PIECE or (code >> 16) & 255 > _FROM_NBI or source < 0 or \
                    source > s.extent[0] - arg:
                break
            seg = take_out(s, arg)
            if seg < 0:
                break
            s.cbegan[slot] = now_ns(s)
            into = np.int64(s.out.ctypes.data) + seg * OUT_UNIT
            if target_failed(s, traced(s, tracing_now(s), COPY_OUT_CALL, s.copy_out(
                    _arg(s.copy_out, 0, into), words[d + ADDR], arg, 0)), 11) or \
                    target_failed(s, traced(s, tracing_now(s), MARK_CALL,
                                            s.mark(MARK_OUT + seg)), 11):
                return False
            s.cseg[slot] = seg
            ctl[COPIES] += 1
        t += 1
    ctl[COPY_NEXT] = t
    return True


@_entry
def sending(s):
    """Whether the loop holds work not yet done: batches or data being sent,
    answers deferred, data being received, or (its targets may still read
    them) window units whose puts are not answered."""
    if s.ctl[OPEN] + s.ctl[IN_FLIGHT] + s.ctl[DATA_IN_FLIGHT] + s.ctl[DEFERRED] + \
            s.ctl[RECV_COUNT] != 0:
        return True
    if s.ctl[WIN] != 0:
        for k in range(OUT_UNITS):
            if s.ostate[k] != 0:
                return True
    return False


# -- an origin's side: taking requests from the rings ----------------------------


@_inner
def published(words, ticket):
    """Whether ``ticket``'s request is in the ring (``words``): released, or
    marked whole."""
    d = (ticket % _SLOTS) * _DESC
    first = words[d]
    seen = first == ticket + 1 or (first < 0 and marked_whole(words, ticket, d))
    _fence()
    return seen


@_entry
def run_of(s, ticket):
    """How many of the GPU's tickets from ``ticket`` on are one run: chunk
    puts (CHUNK bytes each, the last one may be shorter) published in
    consecutive slots (up to the ring's end, at most RUN_MAX), toward one PE
    and offsets each a CHUNK past the one before; 1 if none follows."""
    words = s.gw
    slot = ticket % _SLOTS
    d = slot * _DESC
    if words[d + 1] != _PUT or words[d + 4] != _CHUNK:
        return 1
    pe, offset = words[d + 2], words[d + 3]
    n = 1
    limit = min(RUN_MAX, _SLOTS - slot)
    while n < limit:
        t = ticket + n
        if not published(words, t) or s.gstate[t % _SLOTS] != 0:
            break
        e = (t % _SLOTS) * _DESC
        if words[e + 1] != _PUT or words[e + 2] != pe or words[e + 3] != offset + n * _CHUNK:
            break
        nbytes = words[e + 4]
        if nbytes <= 0 or nbytes > _CHUNK:
            break
        n += 1
        if nbytes < _CHUNK:
            break
    return n


@_inlined
def forward(s, gpu, ticket, run):
    """Put ring ``gpu``'s ticket (with the GPU's: and the ``run`` - 1 after
    it, ``run_of``) into its target's batch. 1 if it went, 0 if no buffer had
    room (it stays in the ring), -1 if MPI failed."""
    ring, words, outstanding, kept = (s.gpu, s.gw, s.gstate, s.gtaken) if gpu else \
        (s.host, s.hw, s.hstate, s.htaken)
    slot = ticket % _SLOTS
    if outstanding[slot] != 0:
        # the slot's last request is not answered, or COMPLETE has not passed
        # it: this one waits in the ring (answers come in any order; each is
        # read against what was kept of its own request)
        return 0
    d = slot * _DESC
    marked = words[d] < 0  # (whole: published)
    if marked:
        code, pe, offset, arg, cond = unmarked(words, d)
    else:
        code, pe, offset, arg, cond = words[d + 1], words[d + 2], words[d + 3], \
            words[d + 4], words[d + 5]
    kind = code & 255
    inline = 0
    value = 0  # (a marked put's, in its COND)
    big = False  # (its data follows as a DATA message)
    window = False  # (its data waits in this PE's window, at cond)
    address = 0
    seg = -1
    # (a PUT_FROM's thread waits for DONE, then gives the slot back; but for a
    # non-blocking one's, which the loop gives back once its data is copied out,
    # as a staged one's staging segment: COND holds its staging ticket + 1)
    at_copied = _DONE_AT + slot
    copied_value = ticket + 1
    stage_at, stage_value = -1, 0
    if gpu and kind == _PUT_FROM:  # copied out of the GPU's heap, sent from there
        if arg <= 0 or arg > PIECE or s.ctl[ON_DEVICE] == 0 or (code >> 16) & 255 > _FROM_NBI:
            s.ctl[FAILED_CALL] = 14
            return -1
        if (code >> 16) & 255 == _FROM_NBI:
            at_copied = _FREE_AT + slot
            copied_value = ticket + _SLOTS
        if cond > 0:
            stage_at = _STAGE_FREE_AT + (cond - 1) % _STAGE_SEGS
            stage_value = cond - 1 + _STAGE_SEGS
        source = words[d + ADDR] - s.ctl[HEAP_BASE]
        if source < 0 or source > s.extent[0] - arg:  # (refused here, answered at once)
            refused(s, ticket * 2 + 1, pe, _PUT, offset, arg, SOURCE, s.extent[0])
            if s.cseg[slot] >= 0:  # (asked while the heap was larger: the units back,
                give_out(s, s.cseg[slot])  # a later copy into them comes after this one)
                s.cseg[slot] = -1
                s.ctl[COPIES] -= 1
            _fence()
            words[at_copied] = copied_value
            if stage_at >= 0:
                words[stage_at] = stage_value
            outstanding[slot] = ticket + 1
            answered(words, outstanding, ticket, 1)
            return 1
        seg = s.cseg[slot]
        if seg < 0:  # (no units were free: copy_ahead asks it once they are)
            s.ctl[COPY_NEXT] = min(s.ctl[COPY_NEXT], ticket)
            return 0
        rc = traced(s, tracing_now(s), PASSED_CALL, s.passed(MARK_OUT + seg))
        if rc == -1:  # (not yet copied out)
            return 0
        if target_failed(s, rc, 11):
            return -1
        code = _PUT  # (the target takes it as any put sent apart)
        kind = _PUT
        window = s.ctl[WIN] != 0
        big = not window
        address = np.int64(s.out.ctypes.data) + seg * OUT_UNIT
        cond = seg * OUT_UNIT if window else 0  # (where it waits; not the staging ticket)
    elif kind == _PUT and run > 1:  # from the ring's staging, in place
        last = words[((ticket + run - 1) % _SLOTS) * _DESC + 4]
        arg = (run - 1) * _CHUNK + last
        big = True
        address = np.int64(ring.ctypes.data) + _STAGING + slot * _CHUNK
    elif kind == _PUT and marked:  # (its value: up to 8 bytes)
        if arg <= 0 or arg > 8:
            s.ctl[FAILED_CALL] = 14
            return -1
        inline = arg
        value = cond
        cond = 0
    elif kind == _PUT:
        if gpu or words[d + ADDR] == 0:  # staged in the slot
            inline = arg
        else:  # from the caller's memory
            big = True
            address = words[d + ADDR]
    if big and data_queued(s) >= DATA_SENDS // 2:  # (the other half: answers' data)
        return 0
    # the answers of one batch of requests fit in one batch of answers
    answers = _ANS_BYTES + (pad(arg) if kind == _GET and arg <= _CHUNK else 0)
    b = open_buffer(s, pe, TAG_REQ, _REQ_BYTES + pad(inline), answers)
    if b == -2:
        return -1
    if b < 0:
        return 0
    if seg >= 0:  # copied out: DONE, or the slots back
        target_call(s, s.cbegan[slot], 11)
        # (the copy engine's stores, public before the target's MPI_Rget of
        # them: the record that says where they are goes after this)
        if window and s.win_sync(_arg(s.win_sync, 0, s.ctl[WIN])) != 0:
            s.ctl[FAILED_CALL] = 17
            return -1
        _fence()
        words[at_copied] = copied_value
        if stage_at >= 0:
            words[stage_at] = stage_value
        s.cseg[slot] = -1
        s.ctl[COPIES] -= 1
    s.expect[b] += answers
    at = s.fill[b]
    record = s.pool[b].view(np.int64)
    w = at // 8
    record[w] = ticket * 2 + (1 if gpu else 0)
    record[w + 1] = code | (FOLLOWS if big else 0) | (WINDOW if window else 0) | \
        (RUN if run > 1 else 0)
    record[w + 2] = offset
    record[w + 3] = arg
    record[w + 4] = cond
    record[w + 5] = inline
    if marked and inline:
        record[w + REQ_WORDS] = value
    elif inline:
        start = _STAGING + slot * _CHUNK
        _move(s.pool[b], at + _REQ_BYTES, ring, start, inline)
    s.fill[b] = at + _REQ_BYTES + pad(inline)
    for t in range(ticket, ticket + run):
        outstanding[t % _SLOTS] = t + 1
    kept[slot, 0], kept[slot, 1], kept[slot, 2], kept[slot, 3] = code, pe, offset, arg
    # (a window's units are free once the put is answered)
    kept[slot, 4] = words[d + ADDR] if not gpu else seg + 1 if window else 0
    kept[slot, 5] = run
    if s.ctl[TRACING]:
        note(s, TAKEN, record[w], pe, 0)
    if big:
        n = s.nfollow[b]
        s.follows[b, n, 0] = address
        s.follows[b, n, 1] = arg
        s.follows[b, n, 2] = ticket
        # (once sent: a run's slots are free, a PUT_FROM's units)
        s.follows[b, n, 3] = -(seg + 1) if seg >= 0 else run if gpu else 0
        s.nfollow[b] = n + 1
    elif not fetches(code) and seg < 0:
        _fence()
        words[_FREE_AT + slot] = ticket + _SLOTS  # copied out: the slot is free
    return 1


@_entry
def drain(s):
    """Forward what the rings published, in order: a GPU ticket before a
    host ticket whose ORDER is past it. How many, or -1 if MPI failed."""
    taken = 0
    has_gpu = s.ctl[HAS_GPU] != 0
    if has_gpu and s.ctl[ON_DEVICE] != 0 and not copy_ahead(s):
        return -1
    while taken < TAKE:
        host_next = s.ctl[HOST_NEXT]
        gpu_next = s.ctl[GPU_NEXT]
        # The GPU's ring first: a host ticket published before the GPU ticket
        # seen here is then seen too, and goes first. A host ticket whose ORDER
        # is past the GPU's next goes after it, even where that GPU ticket was
        # published only after the read above (it was before the host posted).
        gpu_ready = has_gpu and published(s.gw, gpu_next)  # (then a fence)
        host_ready = published(s.hw, host_next)
        order = s.hw[(host_next % _SLOTS) * _DESC + ORDER]
        if host_ready and gpu_next < order and not gpu_ready:
            gpu_ready = published(s.gw, gpu_next)
            if not gpu_ready:  # (it is published: ORDER saw it; read again next time)
                break
        if host_ready and not (gpu_ready and gpu_next < order):
            went = forward(s, False, host_next, 1)
            if went == 1:
                s.ctl[HOST_NEXT] = host_next + 1
        elif gpu_ready:
            run = run_of(s, gpu_next)
            if run > 1 and published(s.hw, host_next):
                # a host ticket published meanwhile goes before the GPU's
                # tickets from its ORDER on (those were not published when
                # it was posted)
                order = s.hw[(host_next % _SLOTS) * _DESC + ORDER]
                if gpu_next < order < gpu_next + run:
                    run = order - gpu_next
            went = forward(s, True, gpu_next, run)
            if went == 1:
                s.ctl[GPU_NEXT] = gpu_next + run
        else:
            break
        if went < 0:
            return -1
        if went == 0:
            break
        taken += 1
    return taken


# -- a target's side: a batch of requests ------------------------------------------


@_inlined
def answer_words(out, w, rid, reason, value, back):
    """An answer's _ANS_BYTES from word ``w`` of ``out``: the request's rid,
    its reason (0 once applied), its value, and how many bytes follow."""
    out[w] = rid
    out[w + 1] = reason
    out[w + 2] = value
    out[w + 3] = back


@_entry
def answer(s, source, rid, reason, value, back, offset):
    """Queue the answer to request ``rid`` of ``source``: its reason (0 once
    applied), value, and for a get the ``back`` bytes from ``offset`` of the
    heap. False if MPI or a copy out of a GPU's heap failed."""
    inline_back = back if back <= _CHUNK else 0
    while back > _CHUNK and data_queued(s) >= DATA_SENDS:
        # its data would find no DATA send free: wait for one (taking the
        # answers other PEs send meanwhile, as below)
        if not flush(s) or reap(s) < 0 or receive_answers(s) < 0:
            return False
    b = open_buffer(s, source, TAG_ANS, _ANS_BYTES + pad(inline_back), 0)
    while b == -1:
        # every answer buffer is taken: send those being filled for other PEs
        # (else, with more than BUFFERS / 2 of them, none would ever be free),
        # and take the answers other PEs send meanwhile (they do the same), so
        # that theirs arrive
        if not flush(s) or reap(s) < 0 or receive_answers(s) < 0:
            return False
        b = open_buffer(s, source, TAG_ANS, _ANS_BYTES + pad(inline_back), 0)
    if b < 0:
        return False
    answer_words(s.pool[b].view(np.int64), s.fill[b] // 8, rid, reason, value, inline_back)
    start = s.fill[b] + _ANS_BYTES
    if inline_back and s.ctl[ON_DEVICE]:
        if not issue_copy(s):  # (a get sees the puts before it)
            return False
        into = np.int64(s.pool[b].ctypes.data) + start
        began = now_ns(s)
        rc = s.copy_out(_arg(s.copy_out, 0, into), s.ctl[HEAP_BASE] + offset, inline_back, 1)
        target_call(s, began, 11)
        if target_failed(s, rc, 11):
            return False
    elif inline_back:
        _move(s.pool[b], start, s.heap, offset, inline_back)
    s.fill[b] = start + pad(inline_back)
    if s.ctl[TRACING]:
        note(s, ANSWERED, rid, source, 0)
    if back > _CHUNK:  # a large get's data follows the answers, from the heap (one in
        n = s.nfollow[b]  # this process's memory: from a GPU's, gets come in slots' sizes)
        s.follows[b, n, 0] = np.int64(s.heap.ctypes.data + np.uint64(offset))
        s.follows[b, n, 1] = back
        s.follows[b, n, 2] = -1
        s.follows[b, n, 3] = 0
        s.nfollow[b] = n + 1
    return True


@_inner
def apply_pending(s, source):
    """Apply the atomics and signals waiting in ``pend`` on the GPU's heap, in
    order, and answer them: a fetching one now (the target returns once it
    is applied), the others once the target says they are (``settle``).
    False if that or MPI failed."""
    n = s.ctl[PENDING]
    s.ctl[PENDING] = 0
    if not issue_copy(s):  # (the puts before them land first: one stream)
        return False
    began = now_ns(s)
    rc = s.apply(_arg(s.apply, 0, np.int64(s.pend.ctypes.data)), n)
    target_call(s, began, 12)
    if target_failed(s, rc, 12):
        return False
    for i in range(n):
        if s.prid[i] < 0:
            continue
        if fetches(s.pend[i, 1]):
            if not answer(s, source, s.prid[i], 0, s.pend[i, 4], 0, 0):
                return False
        elif not defer(s, source, s.prid[i]):
            return False
    return True


@_entry
def settle(s, wait):
    """Answer the deferred requests if the target has applied them (with
    ``wait``: once it has); without, while it has not, those before a mark
    that has passed (``settle_marked``). False if the target or MPI failed."""
    if not issue_copy(s):
        return False
    while True:
        rc = s.settled()
        if rc == 0:
            break
        if rc != -1 and target_failed(s, rc, 12):
            return False
        if not wait:
            return settle_marked(s)
    s.ctl[CHECK_COUNT] = 0
    s.ctl[CHECK_SINCE] = 0
    return answer_deferred(s, s.ctl[DEFERRED])


@_inner
def settle_marked(s):
    """Answer the requests deferred before each of settle's marks that has
    passed, oldest first; mark how far the work asked has come where
    requests have waited CHECK_NS with no mark after them (CHECKS). False if
    the target or MPI failed."""
    ctl = s.ctl
    while ctl[CHECK_COUNT] != 0:
        k = ctl[CHECK_HEAD]
        rc = traced(s, tracing_now(s), PASSED_CALL, s.passed(LAND_SEGS + k))
        if rc == -1:
            break
        if target_failed(s, rc, 12):
            return False
        ctl[CHECK_HEAD] = (k + 1) % CHECKS
        ctl[CHECK_COUNT] -= 1
        if not answer_deferred(s, s.checked[k]):
            return False
    covered = s.checked[(ctl[CHECK_HEAD] + ctl[CHECK_COUNT] - 1) % CHECKS] \
        if ctl[CHECK_COUNT] != 0 else 0
    if ctl[DEFERRED] == covered or ctl[CHECK_COUNT] == CHECKS:
        return True
    now = now_ns(s)
    if ctl[CHECK_SINCE] == 0:
        ctl[CHECK_SINCE] = now
    elif now - ctl[CHECK_SINCE] >= CHECK_NS:
        k = (ctl[CHECK_HEAD] + ctl[CHECK_COUNT]) % CHECKS
        if target_failed(s, traced(s, tracing_now(s), MARK_CALL, s.mark(LAND_SEGS + k)), 12):
            return False
        s.checked[k] = ctl[DEFERRED]
        ctl[CHECK_COUNT] += 1
        ctl[CHECK_SINCE] = 0
    return True


@_entry
def answer_deferred(s, n):
    """Answer the first ``n`` deferred requests (the rest move up, and the
    marks' counts with them). False if MPI failed."""
    drid, dsource, tracing = s.drid, s.dsource, s.ctl[TRACING] != 0
    i = 0
    while i < n:  # (as ``answer`` would, each in turn; a run toward one PE in one pass)
        source = dsource[i]
        if not answer(s, source, drid[i], 0, 0, 0, 0):
            return False
        b = s.openb[source, TAG_ANS - TAG_REQ]
        out = s.pool[b].view(np.int64)
        at = s.fill[b]
        i += 1
        while i < n and dsource[i] == source and at + _ANS_BYTES <= BATCH:
            answer_words(out, at // 8, drid[i], 0, 0, 0)
            at += _ANS_BYTES
            if tracing:
                note(s, ANSWERED, drid[i], source, 0)
            i += 1
        s.fill[b] = at
    left = s.ctl[DEFERRED] - n
    for i in range(left):
        s.drid[i] = s.drid[n + i]
        s.dsource[i] = s.dsource[n + i]
    s.ctl[DEFERRED] = left
    for j in range(s.ctl[CHECK_COUNT]):
        s.checked[(s.ctl[CHECK_HEAD] + j) % CHECKS] -= n
    return True


@_inner
def serve_batch(s, inbox, first, nbytes, source):
    """Apply the requests of one REQ batch from ``source`` (``nbytes`` at
    ``inbox[first]``: the inbox, or toward a GPU's heap ``land``, where its
    puts' data is copied from) and queue their answers, in order. False if
    MPI, the lock or the GPU failed."""
    comm, byte = _arg(s.recv, 5, s.ctl[COMM]), _arg(s.recv, 2, s.ctl[BYTE])
    at = 0
    record = inbox.view(np.int64)  # (first is a multiple of 8)
    batch = inbox[first:first + nbytes]
    heap, extent, lockfd = s.heap, s.extent[0], s.ctl[LOCKFD]
    device, base = s.ctl[ON_DEVICE] != 0, s.ctl[HEAP_BASE]
    s.ctl[BATCHES_IN] += 1
    while at + _REQ_BYTES <= nbytes:  # (a record cut short is dropped)
        w = (first + at) // 8
        rid, code, offset, arg, cond, inline = record[w], record[w + 1], \
            record[w + 2], record[w + 3], record[w + 4], record[w + 5]
        big = (code & FOLLOWS) != 0
        window = (code & WINDOW) != 0
        run = (code & RUN) != 0
        code = code & (FOLLOWS - 1)
        data_at = at + _REQ_BYTES
        at = data_at + pad(inline)
        kind = code & 255
        s.ctl[APPLIED] += 1
        reason = refusal(code, offset, arg, extent)
        if inline < 0 or inline > BATCH or at > nbytes:
            reason, inline, at = MALFORMED, 0, nbytes  # (nothing after it can be read)
        if reason == 0 and kind == _PUT and not big and not window and inline != arg:
            reason = MALFORMED
        if device and reason == 0 and ((kind == _GET and arg > _CHUNK) or
                                       ((big or window) and arg > PIECE)):
            reason = MALFORMED  # (the origins of a job on GPUs ask for no more)
        if window and reason == 0 and (not device or big or kind != _PUT or inline != 0 or
                                       cond < 0 or cond > OUT_SEGS * PIECE - arg):
            reason = MALFORMED  # (only a GPU's PUT_FROM waits in a window, within it)
        if device and reason == 0 and (big or window) and kind == _PUT:
            # its data: received, or fetched from the origin's window, meanwhile
            if s.ctl[PENDING] and not apply_pending(s, source):
                return False
            landed = land(s, arg)
            if landed < 0 or not receive_data(s, landed, base + offset, arg, rid, source,
                                              cond if window else -1):
                return False
            continue
        if s.ctl[RECV_COUNT] and not all_landed(s):  # (whatever comes next, after them)
            return False
        # a small put in whole aligned words: as atomic sets of their bits
        width = 8 if arg % 8 == 0 and offset % 8 == 0 else 4
        words = device and reason == 0 and kind == _PUT and not big and arg > 0 and \
            arg <= WORDS_MAX and arg % 4 == 0 and offset % 4 == 0
        if device and reason == 0 and (kind == _ATOMIC or kind == _SIGNAL or words):
            # applied with the next ones, before the next request of another kind
            n = arg // width if words else 1
            if s.ctl[PENDING] + n > PEND_MAX and not apply_pending(s, source):
                return False
            k = s.ctl[PENDING]
            for j in range(n):
                if words:
                    at_j = data_at + width * j
                    s.pend[k + j, 0] = base + offset + width * j
                    s.pend[k + j, 1] = _P64 if width == 8 else _P32
                    s.pend[k + j, 2] = batch[at_j:at_j + 8].view(np.int64)[0] \
                        if width == 8 else np.int64(batch[at_j:at_j + 4].view(np.uint32)[0])
                else:
                    s.pend[k + j, 0] = base + offset
                    s.pend[k + j, 1] = code
                    s.pend[k + j, 2] = arg
                s.pend[k + j, 3] = cond
                s.pend[k + j, 4] = 0
                s.prid[k + j] = rid if j == n - 1 else -1  # (answered once: its last)
            s.ctl[PENDING] = k + n
            continue
        if s.ctl[PENDING] and not apply_pending(s, source):
            return False
        fits = run_landed(offset, arg, extent) if big and run and reason == OUTSIDE and \
            kind == _PUT else 0
        if big:  # its data is the next DATA message: into the heap, or dropped
            n = arg if reason == 0 or fits else min(max(arg, 0), s.drop.size)
            into = np.int64(s.drop.ctypes.data)
            landed = -1
            if reason == 0 and not device:
                into = np.int64(heap.ctypes.data + np.uint64(offset))
            elif device and (reason == 0 or fits):  # (landed in host memory, then copied)
                landed = land(s, n)
                if landed < 0:
                    return False
                into = np.int64(s.land.ctypes.data) + landed
            if s.recv(_arg(s.recv, 0, into), n, byte, source, TAG_DATA, comm, 0) != 0:
                s.ctl[FAILED_CALL] = 2
                return False
            if landed >= 0 and not land_copy(s, base + offset, landed, n if reason == 0 else fits):
                return False
            if fits and device and not settle(s, True):  # (landed before it is answered)
                return False
            if fits and not device:
                _move(heap, offset, s.drop, 0, fits)
        value = extent if reason != 0 else 0  # (a refusal says how much is mapped)
        back = 0
        if reason == 0:
            if kind == _PUT and not big and device:
                if not land_copy(s, base + offset, first + data_at, inline):
                    return False
            elif kind == _PUT and not big:
                _move(heap, offset, inbox, first + data_at, inline)
            elif kind == _GET:
                back = arg
            elif kind == _ATOMIC or kind == _SIGNAL:
                if s.flock(lockfd, _LOCK_EX) != 0:
                    s.ctl[FAILED_CALL] = 9
                    return False
                if kind == _ATOMIC:
                    value = apply_atomic(heap, offset, code, arg, cond)
                else:
                    apply_signal(heap, offset, (code >> 16) & 255, arg)
                s.flock(lockfd, _LOCK_UN)
        if device and reason == 0 and kind == _PUT:
            if not defer(s, source, rid):  # (answered once its copy is done)
                return False
        elif not answer(s, source, rid, reason, value, back, offset):
            return False
    if s.ctl[PENDING] and not apply_pending(s, source):
        return False
    return issue_copy(s)


# -- an origin's side: a batch of answers -------------------------------------------


@_entry
def take_answers(s, inbox, nbytes, source):
    """Record the answers of one ANS batch. False if MPI failed."""
    comm, byte = _arg(s.recv, 5, s.ctl[COMM]), _arg(s.recv, 2, s.ctl[BYTE])
    at = 0
    record = inbox.view(np.int64)
    while at < nbytes:
        w = at // 8
        rid, reason, value, inline = record[w], record[w + 1], record[w + 2], \
            record[w + 3]
        data_at = at + _ANS_BYTES
        at = data_at + pad(inline)
        if s.ctl[TRACING]:
            note(s, ANSWER_TAKEN, rid, source, 0)
        gpu = (rid & 1) == 1
        ticket = rid >> 1
        slot = ticket % _SLOTS
        ring, words, outstanding, kept = (s.gpu, s.gw, s.gstate, s.gtaken) if gpu else \
            (s.host, s.hw, s.hstate, s.htaken)
        if outstanding[slot] != ticket + 1 or inline < 0 or data_at + inline > nbytes or \
                inline > _CHUNK:
            s.ctl[FAILED_CALL] = 13  # (an answer to no request taken, or malformed)
            return False
        code, asked = kept[slot, 0], kept[slot, 3]
        kind = code & 255
        if gpu and kind == _PUT and kept[slot, 4] > 0:  # (its data fetched from the window)
            give_out(s, kept[slot, 4] - 1)
        if kind == _GET:
            start = _STAGING + slot * _CHUNK
            if reason != 0:
                if asked <= _CHUNK:
                    for i in range(asked):
                        ring[start + i] = 0
            elif inline:
                _move(ring, start, inbox, data_at, inline)
            elif s.recv(_arg(s.recv, 0, kept[slot, 4]), asked, byte, source, TAG_ANS_DATA,
                        comm, 0) != 0:
                s.ctl[FAILED_CALL] = 2
                return False
        if not gpu:
            s.hw[_STATUS_AT + slot] = reason
        if reason != 0 and (gpu or not fetches(code)):
            landed = run_landed(kept[slot, 2], asked, value) \
                if kept[slot, 5] > 1 and reason == OUTSIDE else 0
            refused(s, rid + 2 * (landed // _CHUNK), kept[slot, 1], code,  # (the first one)
                    kept[slot, 2] + landed, asked - landed, reason, value)
        if fetches(code):
            if kind == _ATOMIC or (reason != 0 and not gpu):
                # (a host fetch's refusal: the target's extent, for its error)
                words[_ANSWER_AT + slot] = value if reason == 0 or not gpu else 0
            _fence()
            words[_DONE_AT + slot] = ticket + 1
        answered(words, outstanding, ticket, kept[slot, 5])
    return True


@_inner
def refused(s, rid, pe, code, offset, nbytes, reason, value):
    """Record a refusal that nobody waits for (the next host call raises it)."""
    n = s.ctl[REFUSED]
    if n < MAX_REFUSALS:
        s.refusals[n, 0] = rid
        s.refusals[n, 1] = pe
        s.refusals[n, 2] = code
        s.refusals[n, 3] = offset
        s.refusals[n, 4] = nbytes
        s.refusals[n, 5] = reason
        s.refusals[n, 6] = value
    _fence()
    s.ctl[REFUSED] = n + 1


@_inner
def answered(words, outstanding, ticket, run):
    """Tickets ``ticket`` to ``ticket + run`` of a ring (``words``) are
    answered: COMPLETE moves past every ticket answered from it on."""
    for t in range(ticket, ticket + run):
        outstanding[t % _SLOTS] = -(t + 1)
    first = words[_COMPLETE_AT]  # COMPLETE: the first ticket not answered
    while outstanding[first % _SLOTS] == -(first + 1):
        outstanding[first % _SLOTS] = 0
        first += 1
    _fence()
    words[_COMPLETE_AT] = first


# -- the loop -------------------------------------------------------------------


@_entry
def look(iprobe, ctl, flag, status, only):
    """Whether MPI has a message for this PE (of tag ``only``, or any): 1 (its
    status in ``status``), 0, or -1 if MPI failed."""
    if iprobe(ctl[ANY_SOURCE], only, _arg(iprobe, 2, ctl[COMM]), flag.ctypes.data,
              status.ctypes.data) != 0:
        ctl[FAILED_CALL] = 3
        return -1
    return 1 if flag[0] != 0 else 0


@_inner
def probe(s, only, inbox):
    """Receive one message MPI has for this PE (of tag ``only``, or any)
    into ``inbox``: (tag, bytes, source); tag 0 if there was none, -1 if
    MPI failed."""
    found = look(s.iprobe, s.ctl, s.flag, s.status, only)
    if found <= 0:
        return found, 0, 0
    tag, nbytes, source = incoming(s)
    if tag > 0 and not take_message(s, inbox, 0, tag, nbytes, source):
        return -1, 0, 0
    return tag, nbytes, source


@_inner
def incoming(s):
    """The message ``look`` found (its status in ``status``): (tag, bytes,
    source), or -1 if MPI failed or it is none the loop takes."""
    source, tag = s.status[s.ctl[SOURCE_AT]], s.status[s.ctl[TAG_AT]]
    if s.get_count(s.status.ctypes.data, _arg(s.get_count, 1, s.ctl[BYTE]),
                   s.count.ctypes.data) != 0:
        s.ctl[FAILED_CALL] = 5
        return -1, 0, 0
    nbytes = s.count[0]
    if nbytes > BATCH or nbytes < 0:
        s.ctl[FAILED_CALL] = 6
        return -1, 0, 0
    if tag != TAG_REQ and tag != TAG_ANS:
        s.ctl[FAILED_CALL] = 7
        return -1, 0, 0
    return tag, nbytes, source


@_inner
def take_message(s, inbox, first, tag, nbytes, source):
    """Receive the message ``incoming`` described into ``inbox[first]``.
    False if MPI failed."""
    comm, byte = _arg(s.recv, 5, s.ctl[COMM]), _arg(s.recv, 2, s.ctl[BYTE])
    if s.recv(_arg(s.recv, 0, np.int64(inbox.ctypes.data) + first), nbytes, byte, source, tag,
              comm, 0) != 0:
        s.ctl[FAILED_CALL] = 2
        return False
    if s.ctl[TRACING]:
        note(s, RECEIVED, source, tag, 0)
    return True


@_inner
def receive_answers(s):
    """Take one batch of answers, if one came: 1, 0 if none, -1 if MPI failed."""
    tag, nbytes, source = probe(s, TAG_ANS, s.inbox2)
    if tag <= 0:
        return tag
    return 1 if take_answers(s, s.inbox2, nbytes, source) else -1


@_entry
def receive(s):
    """Take the message ``look`` found and act on it: 1, or -1 if MPI or the
    target failed. A batch of requests toward a GPU's heap is received into
    a landing segment, which holds it while it is served (its puts' data is
    copied from there)."""
    tag, nbytes, source = incoming(s)
    if tag < 0:
        return tag
    if tag == TAG_ANS or s.ctl[ON_DEVICE] == 0:
        if not take_message(s, s.inbox, 0, tag, nbytes, source):
            return -1
        if tag == TAG_ANS:
            return 1 if take_answers(s, s.inbox, nbytes, source) else -1
        return 1 if serve_batch(s, s.inbox, 0, nbytes, source) else -1
    at = land(s, nbytes)
    if at < 0 or not take_message(s, s.land, at, tag, nbytes, source):
        return -1
    held = at // PIECE
    s.ctl[LAND_HOLD] = held
    ok = serve_batch(s, s.land, at, nbytes, source)
    s.ctl[LAND_HOLD] = -1
    if ok and s.ctl[LAND_SEG] != held:
        # the batch's segment was left while it was served: mark it again, so
        # that it is written again only once the copies from it asked since
        # are done
        ok = issue_copy(s) and not target_failed(
            s, traced(s, tracing_now(s), MARK_CALL, s.mark(held)), 10)
    return 1 if ok else -1


@_entry
def serve(s):
    """Run until told to stop (STOP, and nothing left to send): 0; or until
    an MPI call fails: its number (CALLS)."""
    # (each turn calls a function that takes the whole State only where there
    # is work for it: such a call costs about 0.1 us, an idle turn a few looks)
    ctl, clock_gettime, clock = s.ctl, s.clock_gettime, s.clock
    gw, hw = s.gw, s.hw
    idle_since = clock_ns(clock_gettime, clock)
    sleep_us = 1
    while True:
        busy = False
        ctl[LOOPS] += 1
        if ctl[HAS_GPU] != 0:
            given_back(gw)
        freed = 0
        if ctl[IN_FLIGHT] + ctl[DATA_IN_FLIGHT] != 0:
            freed = reap(s)
            if freed < 0:
                return ctl[FAILED_CALL]
        if ctl[RECV_COUNT] != 0:  # (no sleep while data is on its way: MPI moves it while called)
            busy = True
        while ctl[RECV_COUNT] != 0:  # (the data that has arrived: copied into the heap)
            got = landed_data(s, False)
            if got < 0:
                return ctl[FAILED_CALL]
            if got == 0:
                break
        if ctl[DEFERRED] != 0:
            if not settle(s, False):
                return ctl[FAILED_CALL]
            busy = True  # (answered now, or to be: no sleep meanwhile)
            if ctl[OPEN] != 0 and not flush(s):  # (the answers go before the next
                return ctl[FAILED_CALL]           # message is taken: its put's data may take long)
        taken = 0
        if published(gw, ctl[GPU_NEXT]) or published(hw, ctl[HOST_NEXT]):
            taken = drain(s)
            if taken < 0:
                return ctl[FAILED_CALL]
            if ctl[OPEN] != 0 and not flush(s):  # (sent now, not after a look at MPI)
                return ctl[FAILED_CALL]
        for _ in range(TAKE):
            found = look(s.iprobe, ctl, s.flag, s.status, ctl[ANY_TAG])
            got = receive(s) if found > 0 else found  # (one MPI_Iprobe a message)
            if got < 0:
                return ctl[FAILED_CALL]
            if got == 0:
                break
            busy = True
            if ctl[OPEN] != 0 and not flush(s):  # (its answers sent now, not after a look)
                return ctl[FAILED_CALL]
            if ctl[RECV_COUNT] != 0:  # (a put's data on its way: what has landed is
                break                 # copied, and what is done answered, before the next)
        if ctl[OPEN] != 0 and not flush(s):
            return ctl[FAILED_CALL]
        if taken or freed or ctl[COPIES] != 0:  # (a copy out runs: no sleep)
            busy = True
        if s.ctl[STOP] != 0 and not busy and not sending(s):
            return 0
        now = clock_ns(clock_gettime, clock)
        if busy:
            idle_since = now
            sleep_us = 1
        elif now - idle_since <= s.ctl[BUSY_NS]:
            _spin_hint()
        else:
            # idle: sleep, longer and longer up to SLEEP_US (a GPU post or a
            # message waits at most that long to be seen; a host post wakes
            # the loop through the pipe)
            s.ctl[SLEEPING] = 1
            _fence()
            if not published(s.hw, s.ctl[HOST_NEXT]):
                s.timeout[0] = 0
                s.timeout[1] = sleep_us * 1000
                if s.ppoll(s.pollfd.ctypes.data, 1, s.timeout.ctypes.data, 0) > 0:
                    s.read(_arg(s.read, 0, s.ctl[WAKE_FD]), s.status.ctypes.data, 16)
                s.ctl[SLEPT_NS] += clock_ns(clock_gettime, clock) - now
            s.ctl[SLEEPING] = 0
            sleep_us = min(sleep_us * 2, s.ctl[SLEEP_US])
