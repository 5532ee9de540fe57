"""One PE of the proxy benchmark (run by benchmarks/proxy.py under mpiexec, an
even number of PEs on emulated nodes of one). The PEs work in pairs (0 and 1,
2 and 3, ...), every pair at once: the even PE sends, the odd one answers. PE
0 measures its pair; prints one JSON line from PE 0.

On the same processes, one after another: numba-shmem's puts and round trips
through the proxy, mpi4py's own Send/Recv and Put between the same ranks
(osu_bw / osu_latency shapes), how fast a Python thread of an even PE runs
while its partner keeps its proxy busy, and p from many threads of a kernel at
once.
"""

import json
import os
import statistics
import sys
import time
import warnings

import numpy as np

import numba_shmem as shmem  # first: on a machine without a GPU it picks the simulator
from mpi4py import MPI
from numba import cuda
from numba_shmem._transport import _engine
from numba_shmem._transport._mpi_c import library_version

# (its kernels of one block are meant: on stderr, where the rows of bandwidth go
# as they are measured, numba-cuda's warning at each launch was noise)
warnings.filterwarnings("ignore", message=".*Grid size .* under-utilization")

WINDOW = 16  # messages in flight per bandwidth round, as osu_bw's window
ROUNDS = 3


def best_of(rounds, run):
    """The fastest of ``rounds`` timings of ``run()`` (seconds), and all of them."""
    times = [run() for _ in range(rounds)]
    return min(times), times


def partner(me):
    """The other PE of ``me``'s pair."""
    return me ^ 1


def on_senders(me, work):
    """Seconds this PE takes to run ``work()`` where it is the even PE of its
    pair, between two barriers of every PE (the odd ones only wait)."""
    shmem.barrier_all()
    start = time.perf_counter()
    if me % 2 == 0:
        work()
    elapsed = time.perf_counter() - start
    shmem.barrier_all()
    return elapsed


def shmem_bandwidth(me, dest, source, size):
    """Seconds for WINDOW puts of ``size`` bytes into the partner and their quiet."""
    def puts():
        for _ in range(WINDOW):
            shmem.put(dest[:size], source[:size], partner(me))
        shmem.quiet()
    return lambda: on_senders(me, puts)


@cuda.jit
def put_blocks(dest, source, size, window, nbi, pe):
    """One block: ``window`` put_blocks (``nbi``: put_nbi_blocks) of ``size``
    bytes into PE ``pe``, then quiet."""
    for _ in range(window):
        if nbi:
            shmem.put_nbi_block(dest[:size], source[:size], pe)
        else:
            shmem.put_block(dest[:size], source[:size], pe)
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        shmem.quiet()


def device_bandwidth(me, dest, source, size, nbi=False):
    """Seconds for WINDOW put_blocks (``nbi``: put_nbi_blocks) of ``size`` bytes
    into the partner from one block of a kernel (256 threads), and their quiet."""
    def kernel(window=WINDOW):
        put_blocks[1, 256](dest, source, size, window, nbi, partner(me))
        cuda.synchronize()
    if me % 2 == 0:
        kernel(1)  # (compiled before it is timed)
    return lambda: on_senders(me, kernel)


def checked(me, run, dest, want):
    """``run`` with ``dest`` zeroed on the odd PEs before each round and
    checked after it: every round's puts arrived whole (not an earlier round's)."""
    def round_checked():
        if me % 2 == 1:
            dest.copy_to_device(np.zeros(dest.size, np.uint8))
        elapsed = run()
        if me % 2 == 1:
            assert (dest.copy_to_host() == want).all(), "a round's puts did not arrive whole"
        return elapsed
    return round_checked


def mpi_bandwidth(comm, me, buf, size, one_sided, win):
    def run():
        comm.Barrier()
        start = time.perf_counter()
        other = partner(me)
        if one_sided:
            if me % 2 == 0:
                win.Lock(other)
                for _ in range(WINDOW):
                    win.Put(buf[:size], other)
                win.Unlock(other)  # complete at the target
        else:
            if me % 2 == 0:
                requests = [comm.Isend(buf[:size], other, tag=5) for _ in range(WINDOW)]
                MPI.Request.Waitall(requests)
                comm.Recv(buf[:1], other, tag=6)  # the receiver's ack: all arrived
            else:
                requests = [comm.Irecv(buf[:size], other, tag=5) for _ in range(WINDOW)]
                MPI.Request.Waitall(requests)
                comm.Send(buf[:1], other, tag=6)
        elapsed = time.perf_counter() - start
        comm.Barrier()
        return elapsed
    return run


@cuda.jit
def ping_pong(flag, sig, data, payload, iters, kind):
    """PE 0 sends, PE 1 answers, ``iters`` times: with p of a flag (kind 0) or
    put_signal of 8 bytes (kind 1); each side waits for the other's."""
    if cuda.grid(1) != 0:
        return
    me = shmem.my_pe()
    other = me ^ 1
    for i in range(1, iters + 1):
        if me % 2 == 1:
            if kind == 0:
                shmem.wait_until(flag, shmem.CMP_GE, i)
            else:
                shmem.signal_wait_until(sig, shmem.CMP_GE, i)
        if kind == 0:
            shmem.p(flag, i, other)
        else:
            payload[0] = i
            shmem.put_signal(data, payload, sig, i, shmem.SIGNAL_SET, other)
        if me % 2 == 0:
            if kind == 0:
                shmem.wait_until(flag, shmem.CMP_GE, i)
            else:
                shmem.signal_wait_until(sig, shmem.CMP_GE, i)


#: the steps of one hop of a ping-pong (p, put_signal) from the PE that sends
#: (0) to the other (1), each the next event of its kind after the step
#: before: (PE, event, tag or None, what the time up to it is)
HOP = [(0, _engine.TAKEN, None, "the origin's loop took the request"),
       (0, _engine.SENT_BATCH, _engine.TAG_REQ, "origin: taken -> its batch sent"),
       (1, _engine.RECEIVED, _engine.TAG_REQ, "MPI and the target's loop: sent -> received"),
       (1, _engine.CALLED, None, "target: received -> applied (its call into the GPU ended)"),
       (1, _engine.TAKEN, None, "the target's kernel sees it and answers: applied -> the "
                                "answer's request taken by the target's loop")]
#: the steps of a fetching atomic's round trip, as HOP's
FETCH = HOP[:4] + [
    (1, _engine.SENT_BATCH, _engine.TAG_ANS, "target: applied -> the answer sent"),
    (0, _engine.RECEIVED, _engine.TAG_ANS, "MPI and the origin's loop: sent -> received"),
    (0, _engine.ANSWER_TAKEN, None, "origin: received -> recorded for the kernel"),
    (0, _engine.TAKEN, None, "the origin's kernel sees it and goes on: recorded -> its next "
                             "request taken")]


def chains(traces, steps, origins):
    """Each PE's proxy trace (``CompiledProxy.trace``; one clock: PEs on one
    host) followed along ``steps`` (HOP, FETCH) from every TAKEN of the
    origins' ``origins`` (PE numbers; step PE 0 is the origin, 1 the other of
    two): per step, its name and the median and mean us it took."""
    import bisect

    by = {}  # (pe, event, tag) -> sorted times
    for pe, trace in enumerate(traces):
        for event, _a, b, at in trace.tolist():
            by.setdefault((pe, event, None), []).append(at)
            if event in (_engine.SENT_BATCH, _engine.RECEIVED):
                by.setdefault((pe, event, b), []).append(at)
    for times in by.values():
        times.sort()
    if not any(key[1] == _engine.CALLED for key in by):  # (a heap in the loop's memory:
        steps = [step for step in steps if step[1] != _engine.CALLED]  # no calls into it)
    spans = [[] for _ in steps[1:]]
    for origin in origins:
        pes = (origin, origin ^ 1)
        for t in by.get((origin, _engine.TAKEN, None), []):
            at, gaps = t, []
            for pe, event, tag, _name in steps[1:]:
                times = by.get((pes[pe], event, tag), [])
                k = bisect.bisect_right(times, at)
                if k == len(times):
                    break
                gaps.append(times[k] - at)
                at = times[k]
            if len(gaps) == len(spans):
                for span, gap in zip(spans, gaps):
                    span.append(gap)
    return [(name, float(np.median(span)) / 1e3, float(np.mean(span)) / 1e3, len(span))
            for (_pe, _event, _tag, name), span in zip(steps[1:], spans) if span]


def driver_calls(traces):
    """What each PE's loop spent in its target's functions in a traced round
    (``CompiledProxy.trace``): per PE, per function that was called (the copy
    into the heap and ``apply``: CALLED events; the others: DRIVER events,
    ``_engine.DRIVER_CALLS``), [median us, calls]."""
    named = {10: "copy in", 12: "apply"}  # (CALLED's numbers: CALLS' of those calls)
    spent = []
    for trace in traces:
        by = {}
        for event, a, b, _at in trace.tolist():
            if event == _engine.CALLED and b in named:
                by.setdefault(named[b], []).append(a / 1e3)
            elif event == _engine.DRIVER:
                by.setdefault(_engine.DRIVER_CALLS[a], []).append(b / 1e3)
        spent.append({name: [float(np.median(us)), len(us)] for name, us in by.items()})
    return spent


def put_stages(traces):
    """Where a window of large puts (PUT_FROM pieces, copied out of PE 0's heap)
    goes, from both proxies' traces (one clock): per piece, the median us of
    its copy out of the GPU (from the copy asked to the piece forwarded once
    it is done: the loop's other work meanwhile included); from its taking to
    its data landed at PE 1 (the batch through MPI, then its data fetched
    from PE 0's window, or its DATA message received, behind the pieces
    before it), and of that, where fetched, from the fetch's post to its
    begin (a fetcher's or the loop's own: how many the loop took) and the
    fetch itself; the first piece's taking to landed; from landed to
    answered (its copy into PE 1's heap and all the work asked before it
    done); and between two pieces taken (how often one goes). None where the
    puts staged their chunks in the ring instead."""
    origin, target = traces[0].tolist(), traces[1].tolist()
    copies = [a / 1e3 for event, a, call, _at in origin  # (call 11: CALLS[11], the copy out)
              if event == _engine.CALLED and call == 11]
    if not copies:  # (no PUT_FROM: the puts staged their chunks in the ring)
        return []

    def at(events, kind):
        return {rid: (b, when) for event, rid, b, when in events if event == kind}
    taken = {rid: when for rid, (_b, when) in at(origin, _engine.TAKEN).items()}
    landed = {rid: when for rid, (_b, when) in at(target, _engine.LANDED).items()}
    answered = {rid: when for rid, (_b, when) in at(target, _engine.ANSWERED).items()}
    began, ended = at(target, _engine.FETCH_BEGAN), at(target, _engine.FETCH_ENDED)
    moved = [(landed[rid] - when) / 1e3 for rid, when in taken.items() if rid in landed]
    first = [(landed[rid] - when) / 1e3 for rid, when in sorted(taken.items(),
                                                                 key=lambda item: item[1])
             if rid in landed][:1]
    waited = [wait / 1e3 for wait, _when in ended.values()]
    fetches = [(when - began[rid][1]) / 1e3 for rid, (_wait, when) in ended.items()
               if rid in began]
    by_loop = sum(who < 0 for who, _when in began.values())
    applied = [(answered[rid] - when) / 1e3 for rid, when in landed.items() if rid in answered]
    every = np.diff(sorted(when for rid, when in taken.items() if rid in landed)) / 1e3
    return [(name, float(np.median(span)), len(span))
            for name, span in (("copy out of the GPU (asked -> its piece forwarded)", copies),
                               ("taken -> its data landed at the target", moved),
                               (f"of it, the fetch posted -> begun ({by_loop} of {len(began)} "
                                "by the loop, the others by a fetcher)", waited),
                               ("the fetch (MPI_Rget)", fetches),
                               ("the first piece taken -> landed", first),
                               ("landed -> answered (its copy in and the work before done)",
                                applied),
                               ("one piece taken every", every)) if len(span)]


def runs_of(trace):
    """A trace (TRACE_WORDS int64 a record) as runs of one event: [event, how
    many, first and last us from the trace's first record]."""
    runs = []
    for event, _a, _b, at in trace.tolist():
        us = (at - trace[0, 3]) / 1e3
        if runs and runs[-1][0] == event:
            runs[-1][1] += 1
            runs[-1][3] = us
        else:
            runs.append([event, 1, us, us])
    return runs


def traced(proxy, comm, run):
    """``run()`` once with each PE's proxy tracing: the traces, on PE 0 (else
    None)."""
    comm.Barrier()
    proxy.trace(True)
    run()
    trace = proxy.trace(False)
    return comm.gather(trace, root=0)


def shmem_round_trip(me, iters, kind):
    """Seconds per round trip, timed around one kernel that runs them all."""
    flag, sig, data = (shmem.zeros(1, t) for t in (np.int64, np.uint64, np.int64))
    payload = cuda.to_device(np.zeros(1, np.int64))

    def run(n=iters):
        flag.copy_to_device(np.zeros(1, np.int64))
        sig.copy_to_device(np.zeros(1, np.uint64))
        shmem.barrier_all()
        start = time.perf_counter()
        ping_pong[1, 1](flag, sig, data, payload, n, kind)
        cuda.synchronize()  # (on the GPU the launch returns at once)
        elapsed = time.perf_counter() - start
        shmem.barrier_all()
        return elapsed / n
    run(2)  # (the kernel compiled and loaded before any timing)
    return run


@cuda.jit
def fetch_loop(counter, iters, other):
    """``iters`` fetching atomics on PE ``other``, one after another."""
    if cuda.grid(1) == 0:
        for _ in range(iters):
            shmem.atomic_fetch_add(counter, 1, other)


def fetch_round_trip(me, counter, iters):
    """Seconds per atomic_fetch_add on the other PE from one GPU thread of PE 0
    (each waits for its answer), timed around one kernel that runs them all."""
    def fetches(n=iters):
        fetch_loop[1, 1](counter, n, partner(me))
        cuda.synchronize()
    on_senders(me, lambda: fetches(2))  # (the kernel compiled and loaded before any timing)
    return lambda: on_senders(me, fetches) / iters


def host_put_round_trip(me, dest, iters):
    """Seconds per host put of 8 bytes into the other PE and the quiet that
    completes it (a round trip: the target answers once it has applied it)."""
    word = np.ones(1, np.int64)
    target = dest[:8].view(np.int64)

    def puts():
        for _ in range(iters):
            shmem.put(target, word, partner(me))
            shmem.quiet()
    return lambda: on_senders(me, puts) / iters


def mpi_probe_cost(comm, calls=20000):
    """Seconds per MPI_Iprobe that finds nothing (what one look at MPI costs
    the proxy's loop), through mpi4py."""
    comm.Barrier()
    start = time.perf_counter()
    for _ in range(calls):
        comm.Iprobe(MPI.ANY_SOURCE, 12345)
    return (time.perf_counter() - start) / calls


def mpi_round_trip(comm, me, iters):
    buf = np.zeros(1, np.uint64)

    def run():
        comm.Barrier()
        start = time.perf_counter()
        for _ in range(iters):
            if me % 2 == 0:
                comm.Send(buf, partner(me), tag=7)
                comm.Recv(buf, partner(me), tag=7)
            else:
                comm.Recv(buf, partner(me), tag=7)
                comm.Send(buf, partner(me), tag=7)
        elapsed = time.perf_counter() - start
        comm.Barrier()
        return elapsed / iters
    return run


@cuda.jit
def p_many(counter, per_thread, pe):
    """Every thread of the grid: ``per_thread`` p's into PE ``pe``, then quiet."""
    t = cuda.grid(1)
    for i in range(per_thread):
        shmem.p(counter[t:t + 1], i, pe)
    shmem.quiet()


def kernel_message_seconds(me, counter, threads, per_thread):
    """Seconds for ``per_thread`` p's into the partner from each of
    ``threads`` threads of one block of a kernel (on the simulator each a
    Python thread), quiet included, timed around the kernel (compiled before)."""
    def kernel(n=per_thread):
        p_many[1, threads](counter, n, partner(me))
        cuda.synchronize()
    if me % 2 == 0:
        kernel(1)
    return lambda: on_senders(me, kernel)


def python_speed(seconds):
    """Iterations per second of a plain Python loop on this thread."""
    count, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(1000):
            count += 1
    return count / seconds


def interpreter_kept(me, dest, windows=10, seconds=0.1, alone=False):
    """How fast a Python thread of an even PE runs while its partner keeps its
    proxy busy (puts of 4 KiB into it, one after another), against the same
    thread with the proxy idle, in ``windows`` pairs of windows of ``seconds``
    that alternate (idle, then busy), so that the host's own speed, which
    drifts from second to second, weighs on both alike. The median of the
    pairs' ratios, and the median speeds idle and busy. Every pair of PEs at
    once, or (``alone``) PE 0's pair only, the other PEs waiting in a
    barrier meanwhile."""
    source = np.ones(4096, np.uint8)
    measuring = me % 2 == 0 and (not alone or me < 2)
    putting = me % 2 == 1 and (not alone or me < 2)
    idle, busy = [], []
    for _ in range(windows):
        shmem.barrier_all()
        if measuring:
            idle.append(python_speed(seconds))
        shmem.barrier_all()
        if measuring:
            busy.append(python_speed(seconds))
        elif putting:
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                shmem.put(dest[:4096], source, partner(me))
            shmem.quiet()
    shmem.barrier_all()
    if not measuring:
        return 0.0, 0.0, 0.0
    ratios = [b / i for b, i in zip(busy, idle)]
    return statistics.median(ratios), statistics.median(idle), statistics.median(busy)


def mpi_window(comm, buf):
    """A window for MPI_Put into ``buf`` and how it was made; (None, why not)
    where this MPI has none (Open MPI 4.1 without a usable one-sided
    component fails MPI_Win_create with MPI_ERR_WIN)."""
    try:
        return MPI.Win.Create(buf, comm=comm), "MPI_Win_create over the buffer"
    except MPI.Exception as exc:
        why = f"MPI_Win_create failed ({exc.Get_error_string()})"
    try:
        return MPI.Win.Allocate(buf.nbytes, comm=comm), "MPI_Win_allocate"
    except MPI.Exception as exc:
        return None, f"{why}; MPI_Win_allocate failed ({exc.Get_error_string()})"


def main():
    max_bytes = int(sys.argv[1])
    shmem.init()
    me = shmem.my_pe()
    if shmem.n_pes() % 2 or shmem._runtime.current().proxy is None:
        raise SystemExit("benchmarks/proxy.py runs an even number of PEs on nodes of their "
                         "own (NUMBA_SHMEM_NODE_SIZE=1 under mpiexec)")
    comm = MPI.COMM_WORLD.Dup()
    dest = shmem.zeros(max_bytes, np.uint8)
    source = np.arange(max_bytes, dtype=np.uint64).astype(np.uint8)
    device_source = shmem.zeros(max_bytes, np.uint8)
    device_source.copy_to_device(source[::-1].copy())
    buf = np.zeros(max_bytes, np.uint8)
    win, put_window = mpi_window(comm, buf)
    results = {"backend": shmem._runtime.current().backend, "window": WINDOW,
               "npes": shmem.n_pes(),
               "mpi": library_version(), "bandwidth": [],
               "mpi_put_window": put_window,
               # the CPUs each rank may run on (its proxy thread shares them)
               "cpus": comm.allgather(sorted(os.sched_getaffinity(0)))}
    size = 4096
    while size <= max_bytes:
        row = {"bytes": size}
        runs = [("shmem_put_block_s", device_bandwidth(me, dest, device_source, size)),
                ("shmem_put_nbi_block_s", device_bandwidth(me, dest, device_source, size,
                                                           nbi=True)),
                ("shmem_put_s", shmem_bandwidth(me, dest, source, size)),
                ("mpi_send_s", mpi_bandwidth(comm, me, buf, size, False, win))]
        if win is not None:
            runs.append(("mpi_put_s", mpi_bandwidth(comm, me, buf, size, True, win)))
        for key, run in runs:
            if key.startswith("shmem_put_") and key != "shmem_put_s":
                run = checked(me, run, dest[:size], source[::-1][:size])
            elif me % 2 == 1 and key.startswith("shmem_"):  # (the checks see this kind's puts)
                dest[:size].copy_to_device(np.zeros(size, np.uint8))
            row[key], row[key + "_rounds"] = best_of(ROUNDS, run)
        results["bandwidth"].append(row)
        if me == 0:  # (progress, for a run stopped before its end)
            print(json.dumps({k: v for k, v in row.items() if not k.endswith("rounds")}),
                  file=sys.stderr, flush=True)
        size *= 4
    if me % 2 == 1:  # the puts arrived whole (the largest: host puts of the source's head)
        put = size // 4
        assert (dest.copy_to_host()[:put] == source[:put]).all()
    iters = 300
    counter = shmem.zeros(64, np.int64)
    proxy = shmem._runtime.current().proxy
    if hasattr(proxy, "trace"):  # the steps of one round of each kind of put, 1 MiB or less
        size = min(max_bytes, 1 << 20)
        for key, run in (("put_block", device_bandwidth(me, dest, device_source, size)),
                         ("put", shmem_bandwidth(me, dest, source, size))):
            traces = traced(proxy, comm, run)
            if me == 0:
                results.setdefault("bandwidth_traces", {})[key] = [t.tolist() for t in traces]
                if key == "put_block":
                    results["put_block_stages"] = [size, put_stages(traces)]
                    results["put_block_calls"] = driver_calls(traces)
    counted = getattr(proxy, "counters", None)  # (the compiled proxy's)
    before, start = counted and counted(), time.perf_counter()
    for key, run in (("p_round_trip_s", shmem_round_trip(me, iters, 0)),
                     ("put_signal_round_trip_s", shmem_round_trip(me, iters, 1)),
                     ("fetch_add_round_trip_s", fetch_round_trip(me, counter, iters)),
                     ("host_put_quiet_s", host_put_round_trip(me, dest, iters)),
                     ("mpi_round_trip_s", mpi_round_trip(comm, me, iters))):
        results[key], results[key + "_rounds"] = best_of(ROUNDS, run)
    if counted:  # each PE's proxy loop during the round trips
        spent = time.perf_counter() - start
        mine = {k: v - before[k] for k, v in counted().items()}
        mine["seconds"] = spent
        results["proxy_counters"] = comm.gather(mine, root=0)
    if hasattr(proxy, "trace"):  # where a round trip's time goes: one more run, traced
        results["stages"] = {}
        for key, run in (("p", shmem_round_trip(me, iters, 0)),
                         ("put_signal", shmem_round_trip(me, iters, 1)),
                         ("fetch_add", fetch_round_trip(me, counter, iters))):
            traces = traced(proxy, comm, run)
            if me == 0:
                steps, origins = (FETCH, (0,)) if key == "fetch_add" else (HOP, (0, 1))
                results["stages"][key] = chains(traces, steps, origins)
                results.setdefault("traces", {})[key] = [t.tolist() for t in traces]
    results["mpi_iprobe_s"] = mpi_probe_cost(comm)
    kept = [interpreter_kept(me, dest) for _ in range(ROUNDS)]
    results["python_speed_ratio"], results["python_speed_idle"], \
        results["python_speed_busy"] = min(kept)
    if shmem.n_pes() > 2:  # (PE 0's pair alone: its host's other PEs idle)
        kept = [interpreter_kept(me, dest, alone=True) for _ in range(ROUNDS)]
        results["python_speed_alone_ratio"], results["python_speed_alone_idle"], \
            results["python_speed_alone_busy"] = min(kept)
    total = 16000 if results["backend"] == "cuda" else 2000
    for threads in (1, 8, 32):
        run = kernel_message_seconds(me, counter, threads, total // threads)
        seconds, rounds = best_of(ROUNDS, run)
        results[f"p_rate_{threads}_threads"] = threads * (total // threads) / seconds
        results[f"p_rate_{threads}_threads_rounds"] = [threads * (total // threads) / t
                                                       for t in rounds]
        if hasattr(proxy, "trace"):  # how often PE 0's loop took a p, how many a batch held
            traces = traced(proxy, comm, run)
            if me == 0:
                taken = [at for event, _a, _b, at in traces[0].tolist()
                         if event == _engine.TAKEN]
                sent = sum(1 for event, _a, tag, _at in traces[0].tolist()
                           if event == _engine.SENT_BATCH and tag == _engine.TAG_REQ)
                gaps = np.diff(taken) / 1e3 if len(taken) > 1 else np.zeros(1)
                results[f"p_rate_{threads}_taken"] = [float(np.median(gaps)),
                                                      len(taken) / max(sent, 1)]
                results[f"p_rate_{threads}_steps"] = [runs_of(t) for t in traces]
    if win is not None:
        win.Free()
    comm.Free()
    if me == 0:
        sys.stdout.write(json.dumps(results) + "\n")
    shmem.finalize()


if __name__ == "__main__":
    main()
