"""Benchmark: the floor of a request's last steps at a target whose resident
warp polls a mailbox in mapped host memory, as round trips from the host: the
host writes the mailbox, the warp sees it and writes a flag in GPU memory, the
application's kernel (waiting for the flag) sees it and answers into mapped
host memory, and the host sees the answer. Each row changes one thing: the scope
of the warp's release of the flag (system, as a release must be where its
readers may be elsewhere; GPU) and how the kernel answers (one release store;
six stores and a release store, as a request's descriptor; eight stores with
no fence, as a marked descriptor); the last rows keep 2, 4 or 8 reads of the
mailbox in flight instead of one. No proxy, no MPI: the GPU and one host
thread, compiled.

    python benchmarks/target_poll.py [--rounds 4000] [--json out.json]
"""
from _machine import require_gpu

if __name__ == "__main__":  # (before any CUDA import)
    require_gpu("target_poll.py", "how fast a resident warp can see the host's mailbox")

import argparse  # noqa: E402
import ctypes  # noqa: E402
import json  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from cuda.bindings import driver as cu  # noqa: E402
from numba import njit  # noqa: E402

from target_paths_pe import check, launch  # noqa: E402

#: word indices in the mapped host page, a line (16 words) apart
INBOX, ECHO, ABORT = 0, 32, 64
#: echo modes: one release store; six stores and a release (a descriptor);
#: eight stores, no fence (the host waits for the last)
ANSWERS = ("one release store", "descriptor: 6 stores + release", "8 stores, no fence")


def echo_ptx():
    """echo(flag, echo, n, abort, mode): for i in 1..n, wait (acquire, system
    scope, GPU memory) for flag >= i, then answer i into ``echo`` (mapped
    host memory) as ``mode`` says; every 256th poll reads ``abort``."""
    stores6 = "".join(f"    st.relaxed.sys.u64 [%rd2+{8 * k}], %rd4;\n" for k in range(1, 7))
    stores8 = "".join(f"    st.relaxed.sys.u64 [%rd2+{8 * k}], %rd4;\n" for k in range(8))
    return (".visible .entry echo(.param .u64 p0, .param .u64 p1, .param .u64 p2,"
            " .param .u64 p3, .param .u64 p4)\n{\n"
            "    .reg .b64 %rd<16>;\n    .reg .pred %p<8>;\n    .reg .b32 %r<8>;\n"
            "    ld.param.u64 %rd1, [p0];\n    ld.param.u64 %rd2, [p1];\n"
            "    ld.param.u64 %rd3, [p2];\n    ld.param.u64 %rd6, [p3];\n"
            "    ld.param.u64 %rd8, [p4];\n    mov.u64 %rd4, 1;\n"
            "$NEXT:\n    mov.u32 %r1, 0;\n"
            "$WAIT:\n    ld.acquire.sys.u64 %rd5, [%rd1];\n"
            "    setp.ge.u64 %p1, %rd5, %rd4;\n    @%p1 bra $SEEN;\n"
            "    add.u32 %r1, %r1, 1;\n    and.b32 %r2, %r1, 255;\n"
            "    setp.ne.u32 %p2, %r2, 0;\n    @%p2 bra $WAIT;\n"
            "    ld.relaxed.sys.u64 %rd7, [%rd6];\n    setp.ne.u64 %p3, %rd7, 0;\n"
            "    @%p3 bra $END;\n    bra $WAIT;\n"
            "$SEEN:\n    setp.eq.u64 %p4, %rd8, 0;\n    @%p4 bra $ONE;\n"
            "    setp.eq.u64 %p4, %rd8, 1;\n    @%p4 bra $DESC;\n"
            + stores8 + "    bra $DONE;\n"
            "$DESC:\n" + stores6 + "    st.release.sys.u64 [%rd2], %rd4;\n    bra $DONE;\n"
            "$ONE:\n    st.release.sys.u64 [%rd2], %rd4;\n"
            "$DONE:\n    add.u64 %rd4, %rd4, 1;\n    setp.le.u64 %p5, %rd4, %rd3;\n"
            "    @%p5 bra $NEXT;\n$END:\n    ret;\n}\n")


def _serve_head(name, registers):
    """The entry of a serve(inbox, flag, n) kernel, up to its loop: each
    thread's mailbox word at %rd9, the flag at %rd2, n in %r8, lane 0 in %p4,
    the round awaited (1) in %r7; ``registers`` 64-bit registers."""
    return (f".visible .entry {name}(.param .u64 p0, .param .u64 p1, .param .u64 p2)\n{{\n"
            f"    .reg .b64 %rd<{registers}>;\n    .reg .pred %p<8>;\n    .reg .b32 %r<16>;\n"
            "    ld.param.u64 %rd1, [p0];\n    ld.param.u64 %rd2, [p1];\n"
            "    ld.param.u64 %rd3, [p2];\n    cvt.u32.u64 %r8, %rd3;\n"
            "    mov.u32 %r4, %tid.x;\n    setp.eq.u32 %p4, %r4, 0;\n"
            "    mul.wide.u32 %rd9, %r4, 8;\n    add.u64 %rd9, %rd9, %rd1;\n")


def serve_ptx(name, scope):
    """serve(inbox, flag, n): one warp; each thread reads its word of the
    mailbox (``inbox``, mapped host memory) relaxed, one read at a time, as
    the proxy's resident warp does; once the first word (as lane 0 read it)
    reaches i, lane 0 writes it to ``flag`` with a release at ``scope`` (as
    the warp applies a signal), for i in 1..n."""
    return (_serve_head(name, 16) + "    mov.u32 %r7, 1;\n"
            "$LOOP:\n    ld.relaxed.sys.u64 %rd5, [%rd9];\n    cvt.u32.u64 %r5, %rd5;\n"
            "    shfl.sync.idx.b32 %r6, %r5, 0, 31, 0xffffffff;\n"
            "    setp.lt.u32 %p1, %r6, %r7;\n    @%p1 bra $LOOP;\n"
            "    cvt.u64.u32 %rd11, %r7;\n"
            f"    @%p4 st.release.{scope}.u64 [%rd2], %rd11;\n"
            "    add.u32 %r7, %r7, 1;\n    setp.le.u32 %p3, %r7, %r8;\n    @%p3 bra $LOOP;\n"
            "    ret;\n}\n")


def rolling_ptx(name, reads, copies, pause):
    """serve(inbox, flag, n) as ``serve_ptx`` (flag released at system scope),
    but with ``reads`` reads of the mailbox in flight, started ``pause`` ns
    (asked of nanosleep) apart: each is looked at once it has landed and
    started again at once, so they stay apart and a post is seen about a
    read's latency / ``reads`` sooner. ``copies``: read ``reads`` copies of
    the mailbox (a line apart each; the host writes them all), else the one."""
    regs = range(reads)
    start = "".join(f"    ld.relaxed.sys.u64 %rd{20 + j}, [%rd{30 + j}];\n"
                    + (f"    nanosleep.u32 {pause};\n" if j < reads - 1 else "")
                    for j in regs)
    look = "".join(
        f"    cvt.u32.u64 %r5, %rd{20 + j};\n"
        "    shfl.sync.idx.b32 %r6, %r5, 0, 31, 0xffffffff;\n"
        "    setp.ge.u32 %p1, %r6, %r7;\n    and.pred %p2, %p1, %p4;\n"
        "    cvt.u64.u32 %rd11, %r7;\n    @%p2 st.release.sys.u64 [%rd2], %rd11;\n"
        "    @%p1 add.u32 %r7, %r7, 1;\n"
        f"    ld.relaxed.sys.u64 %rd{20 + j}, [%rd{30 + j}];\n" for j in regs)
    where = "".join(f"    add.u64 %rd{30 + j}, %rd9, {8 * LINE_WORDS * j if copies else 0};\n"
                    for j in regs)
    return (_serve_head(name, 48) + where + "    mov.u32 %r7, 1;\n" + start +
            "$LOOP:\n" + look +
            "    setp.le.u32 %p3, %r7, %r8;\n    @%p3 bra $LOOP;\n    ret;\n}\n")


SCOPES = {"serve_sys": "sys", "serve_gpu": "gpu"}
#: the mailbox's copies for the rolling reads start here, LINE_WORDS words apart
COPIES, LINE_WORDS = 128, 32
#: rolling readers: name -> (reads in flight, copies, nanosleep asked between starts)
ROLLING = {"roll2_copies": (2, True, 256), "roll4_copies": (4, True, 128),
           "roll4_same": (4, False, 128), "roll8_copies": (8, True, 64)}
#: naps(out, ns): 1000 nanosleeps of ``ns`` asked; the ns they took in all
#: (the global timer) into ``out``
NAPS = (".visible .entry naps(.param .u64 p0, .param .u64 p1)\n{\n"
        "    .reg .b64 %rd<8>;\n    .reg .b32 %r<4>;\n    .reg .pred %p<2>;\n"
        "    ld.param.u64 %rd1, [p0];\n    ld.param.u64 %rd2, [p1];\n"
        "    cvt.u32.u64 %r2, %rd2;\n    mov.u32 %r1, 0;\n"
        "    mov.u64 %rd3, %globaltimer;\n"
        "$NAP:\n    nanosleep.u32 %r2;\n    add.u32 %r1, %r1, 1;\n"
        "    setp.lt.u32 %p1, %r1, 1000;\n    @%p1 bra $NAP;\n"
        "    mov.u64 %rd4, %globaltimer;\n    sub.u64 %rd5, %rd4, %rd3;\n"
        "    st.u64 [%rd1], %rd5;\n    ret;\n}\n")
PTX = (".version 7.0\n.target sm_70\n.address_size 64\n\n" + echo_ptx() + NAPS
       + "".join(serve_ptx(name, scope) for name, scope in SCOPES.items())
       + "".join(rolling_ptx(name, *how) for name, how in ROLLING.items())).encode()


_clock = np.zeros(2, np.int64)
_gettime = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p)(
    ("clock_gettime", ctypes.CDLL(None)))


@njit(nogil=True)
def trips(words, gettime, clock, rounds, wait_at, out, copies=0):
    """Write 1..rounds into the mailbox (and its ``copies`` copies, at COPIES),
    each once the last was answered (at ``wait_at``): each round trip's ns
    into ``out``; False on a 1 s stall."""
    for i in range(1, rounds + 1):
        gettime(1, clock.ctypes.data)
        t0 = clock[0] * 1_000_000_000 + clock[1]
        for j in range(copies):
            words[COPIES + LINE_WORDS * j] = i
        words[INBOX] = i
        while True:
            gettime(1, clock.ctypes.data)
            t = clock[0] * 1_000_000_000 + clock[1]
            if words[wait_at] >= i:
                break
            if t - t0 > 1_000_000_000:
                return False
        out[i - 1] = t - t0
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    check(cu.cuInit(0))
    device = check(cu.cuDeviceGet(0))
    context = check(cu.cuDevicePrimaryCtxRetain(device))
    check(cu.cuCtxSetCurrent(context))
    name = check(cu.cuDeviceGetName(64, device)).split(b"\0")[0].decode()
    flag = int(check(cu.cuMemAlloc(4096)))
    host = int(check(cu.cuMemHostAlloc(
        4096, cu.CU_MEMHOSTALLOC_PORTABLE | cu.CU_MEMHOSTALLOC_DEVICEMAP)))
    words = np.ctypeslib.as_array((ctypes.c_uint64 * 512).from_address(host))
    on_gpu = int(check(cu.cuMemHostGetDevicePointer(host, 0)))
    module = check(cu.cuModuleLoadData(PTX))
    kernels = {k: check(cu.cuModuleGetFunction(module, k.encode()))
               for k in ("echo", "naps", *SCOPES, *ROLLING)}
    flags = cu.CUstream_flags.CU_STREAM_NON_BLOCKING
    app, service = check(cu.cuStreamCreate(flags)), check(cu.cuStreamCreate(flags))
    out = np.zeros(args.rounds, np.int64)
    rows = []
    words[ECHO] = 1
    trips(words, _gettime, _clock, 1, ECHO, out)  # (compiled before the timing; no kernel yet)

    def round_trips(serve, mode, copies, what):
        """The 10th, 50th and 90th percentile of the round trips (us) with the
        warp ``serve`` (reading ``copies`` copies of the mailbox, or none but
        the one) and the kernel answering in ``mode``."""
        check(cu.cuMemsetD8(flag, 0, 8))
        check(cu.cuCtxSynchronize())
        words[:] = 0
        launch(kernels["echo"], app, flag, on_gpu + 8 * ECHO, args.rounds,
               on_gpu + 8 * ABORT, mode)
        at = on_gpu + 8 * (COPIES if copies else INBOX)
        launch(kernels[serve], service, at, flag, args.rounds, threads=32)
        ok = trips(words, _gettime, _clock, args.rounds, ECHO + (7 if mode == 2 else 0), out,
                   copies)
        if not ok:
            words[ABORT] = 1
            words[COPIES:COPIES + LINE_WORDS * copies:LINE_WORDS] = args.rounds + 1
            words[INBOX] = args.rounds + 1  # (the warp ends)
        check(cu.cuCtxSynchronize())
        if not ok:
            raise SystemExit(f"{what}: no answer within 1 s")
        us = np.sort(out[args.rounds // 10:]) / 1e3  # (the first tenth: warming)
        return [round(float(us[int(q * (len(us) - 1))]), 2) for q in (0.1, 0.5, 0.9)]

    for serve, scope in SCOPES.items():
        for mode, answer in enumerate(ANSWERS):
            row = {"flag released at": scope, "answer": answer,
                   "round_trip_us": round_trips(serve, mode, 0,
                                                f"release at {scope}, {answer}")}
            rows.append(row)
            print(f"flag released at {scope}, {answer:32s}: "
                  "median {1} us ({0}-{2})".format(*row["round_trip_us"]), flush=True)
    for serve, (reads, copies, pause) in ROLLING.items():  # (eight stores, no fence)
        row = {"flag released at": "sys", "answer": ANSWERS[2], "reads_in_flight": reads,
               "copies": copies, "pause_ns": pause,
               "round_trip_us": round_trips(serve, 2, reads if copies else 0, serve)}
        rows.append(row)
        print(f"{reads} reads in flight ({'a copy each' if copies else 'one word'}, started"
              f" {pause} ns apart), {ANSWERS[2]}: "
              "median {1} us ({0}-{2})".format(*row["round_trip_us"]), flush=True)
    print(f"{name}, {args.rounds} rounds, the 10th, 50th and 90th percentile of the last 90%")
    naps = {}
    for asked in (32, 256, 1000):  # (what a wait's back-off asks, and more)
        launch(kernels["naps"], app, on_gpu + 8 * ABORT, asked)
        check(cu.cuCtxSynchronize())
        naps[asked] = int(words[ABORT]) / 1000
    print("a nanosleep takes, asked 32 / 256 / 1000 ns: "
          + " / ".join(f"{ns:.0f}" for ns in naps.values()) + " ns (mean of 1000)")
    if args.json:
        args.json.write_text(json.dumps({"device": name, "rows": rows, "nanosleep_ns": naps}))


if __name__ == "__main__":
    main()
