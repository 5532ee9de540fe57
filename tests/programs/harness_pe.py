"""One PE of the test harness (tests/harness.py): runs collective requests.

    harness_pe.py CONTROL_SOCKET

Each request names a handler below and carries this PE's arguments; the reply
is the handler's JSON-able result.
"""

import socket
import sys

import numpy as np
from numba import cuda

import numba_shmem as shmem
from shmem_run import _wire

DTYPES = {"int32": np.int32, "int64": np.int64, "float64": np.float64, "uint8": np.uint8,
          "float32": np.float32}

# -- RMA programs ---------------------------------------------------------------
# One row per operation: kind, target PE, then operands (element offsets, counts).
PUT, GET, P, G, IPUT, IGET, PUT_BLOCK, GET_WARP = range(8)


@cuda.jit
def interpret(ops, heap, source, scratch, results):
    """Run ``ops`` in order: on thread 0 for thread-scope operations, on every
    thread for the cooperative ones."""
    for k in range(ops.shape[0]):
        kind = ops[k, 0]
        pe = ops[k, 1]
        a = ops[k, 2]
        b = ops[k, 3]
        n = ops[k, 4]
        s1 = ops[k, 5]
        s2 = ops[k, 6]
        if kind == PUT_BLOCK:
            shmem.put_block(heap[a:a + n], source[b:b + n], pe)
        elif kind == GET_WARP:
            if cuda.threadIdx.x < 32:
                shmem.get_warp(scratch[a:a + n], heap[b:b + n], pe)
        elif cuda.threadIdx.x == 0:
            if kind == PUT:
                shmem.put(heap[a:a + n], source[b:b + n], pe)
            elif kind == GET:
                shmem.get(scratch[a:a + n], heap[b:b + n], pe)
            elif kind == P:
                shmem.p(heap[a:a + 1], source[b], pe)
            elif kind == G:
                results[k] = shmem.g(heap[a:a + 1], pe)
            elif kind == IPUT:
                shmem.iput(heap[a:], source[b:], s1, s2, n, pe)
            elif kind == IGET:
                shmem.iget(scratch[a:], heap[b:], s1, s2, n, pe)
        cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        shmem.quiet()


def rma_program(dtype, size, initial, phases):
    """``phases``: for each phase, the ops this PE issues (empty on the others).
    Returns this PE's heap, scratch and g results after each phase."""
    dt = np.dtype(DTYPES[dtype])
    heap = shmem.array(size, dt)
    heap.copy_to_device(np.array(initial, dtype=dt))
    source = cuda.to_device((np.arange(size) * 7 + 3 + 1000 * shmem.my_pe()).astype(dt))
    scratch = cuda.to_device(np.zeros(size, dt))
    shmem.barrier_all()
    out = []
    for ops in phases:
        if ops:
            table = cuda.to_device(np.array(ops, dtype=np.int64).reshape(-1, 7))
            results = cuda.to_device(np.zeros(len(ops), dt))
            interpret[1, 64](table, heap, source, scratch, results)
            cuda.synchronize()
            g = results.copy_to_host().tolist()
        else:
            g = []
        shmem.barrier_all()
        out.append({"g": g})
    final = {"heap": heap.copy_to_host().tolist(), "scratch": scratch.copy_to_host().tolist(),
             "phases": out}
    shmem.barrier_all()
    shmem.free(heap)
    return final


# -- atomics ----------------------------------------------------------------------
A_FETCH_INC, A_FETCH_ADD, A_ADD, A_INC, A_OR, A_XOR, A_AND, A_CAS_TICKET = range(8)


@cuda.jit
def atomic_mix(ops, counters, fetched):
    """Every thread runs every op; op k targets counter ops[k, 1] on PE ops[k, 2]."""
    tid = cuda.grid(1)
    nthreads = cuda.gridsize(1)
    for k in range(ops.shape[0]):
        kind = ops[k, 0]
        c = ops[k, 1]
        pe = ops[k, 2]
        v = ops[k, 3] + tid
        slot = k * nthreads + tid
        target = counters[c:c + 1]
        if kind == A_FETCH_INC:
            fetched[slot] = shmem.atomic_fetch_inc(target, pe)
        elif kind == A_FETCH_ADD:
            fetched[slot] = shmem.atomic_fetch_add(target, v, pe)
        elif kind == A_ADD:
            shmem.atomic_add(target, v, pe)
        elif kind == A_INC:
            shmem.atomic_inc(target, pe)
        elif kind == A_OR:
            shmem.atomic_or(target, np.int64(1) << (v % 63), pe)
        elif kind == A_XOR:
            shmem.atomic_xor(target, v, pe)
        elif kind == A_AND:
            shmem.atomic_and(target, ~(np.int64(1) << (v % 63)), pe)
        elif kind == A_CAS_TICKET:
            while True:
                old = shmem.atomic_fetch(target, pe)
                if shmem.atomic_compare_swap(target, old, old + 1, pe) == old:
                    fetched[slot] = old
                    break


def atomics(ncounters, initial, ops, threads):
    counters = shmem.array(ncounters, np.int64)
    counters.copy_to_device(np.array(initial, dtype=np.int64))
    fetched = cuda.to_device(np.full(max(1, len(ops) * threads), -1, np.int64))
    shmem.barrier_all()
    if ops:
        atomic_mix[1, threads](cuda.to_device(np.array(ops, np.int64).reshape(-1, 4)), counters,
                               fetched)
        cuda.synchronize()
    shmem.barrier_all()
    result = {"counters": counters.copy_to_host().tolist(),
              "fetched": fetched.copy_to_host().tolist()}
    shmem.barrier_all()
    shmem.free(counters)
    return result


# -- signals --------------------------------------------------------------------------

@cuda.jit
def signal_rounds(data, source, sig, ack, sizes, scopes, ops, errors):
    me = shmem.my_pe()
    npes = shmem.n_pes()
    right = (me + 1) % npes
    left = (me - 1 + npes) % npes
    expected_sig = 0
    for r in range(sizes.size):
        n = sizes[r]
        if r > 0 and cuda.threadIdx.x == 0:
            shmem.signal_wait_until(ack, shmem.CMP_GE, r)
        cuda.syncthreads()
        for i in range(cuda.threadIdx.x, n, cuda.blockDim.x):
            source[i] = r * 100000 + me * 1000 + i
        cuda.syncthreads()
        op = ops[r]
        value = r + 1 if op == shmem.SIGNAL_SET else 1
        expected_sig = r + 1 if op == shmem.SIGNAL_SET else expected_sig + 1
        if scopes[r] == 0:
            if cuda.threadIdx.x == 0:
                shmem.put_signal(data[:n], source[:n], sig, value, op, right)
        elif scopes[r] == 1:
            if cuda.threadIdx.x < 32:
                shmem.put_signal_warp(data[:n], source[:n], sig, value, op, right)
        else:
            shmem.put_signal_block(data[:n], source[:n], sig, value, op, right)
        if cuda.threadIdx.x == 0:
            shmem.signal_wait_until(sig, shmem.CMP_GE, expected_sig)
        cuda.syncthreads()
        for i in range(cuda.threadIdx.x, n, cuda.blockDim.x):
            if data[i] != r * 100000 + left * 1000 + i:
                cuda.atomic.add(errors, 0, 1)
        cuda.syncthreads()
        if cuda.threadIdx.x == 0:
            shmem.signal_op(ack, 1, shmem.SIGNAL_ADD, left)


def signals(sizes, scopes, ops):
    capacity = max(sizes)
    data = shmem.zeros(capacity, np.int64)
    sig = shmem.zeros(1, np.uint64)
    ack = shmem.zeros(1, np.uint64)
    source = cuda.to_device(np.zeros(capacity, np.int64))
    errors = cuda.to_device(np.zeros(1, np.int64))
    shmem.barrier_all()
    signal_rounds[1, 64](data, source, sig, ack, cuda.to_device(np.array(sizes, np.int64)),
                         cuda.to_device(np.array(scopes, np.int64)),
                         cuda.to_device(np.array(ops, np.int64)), errors)
    cuda.synchronize()
    shmem.barrier_all()
    for arr in (ack, sig, data):
        shmem.free(arr)
    return int(errors.copy_to_host()[0])


# -- allocation -------------------------------------------------------------------------

def allocations(steps):
    """``steps``: ["alloc", nbytes, align] or ["free", index into the live list]."""
    heap = shmem._runtime.current().heap
    live, record = [], []
    for step in steps:
        if step[0] == "alloc":
            arr = shmem.array(step[1], np.uint8, align=step[2])
            live.append(arr)
            record.append(["alloc", heap.offset_of(arr, "test"), step[1], step[2]])
        elif live:
            arr = live.pop(step[1] % len(live))
            record.append(["free", heap.offset_of(arr, "test")])
            shmem.free(arr)
    for arr in live:
        shmem.free(arr)
    return {"record": record, "capacity": heap.allocator.capacity,
            "free": heap.allocator.empty}


# -- collectives ------------------------------------------------------------------------

def collective(name, form, dtype, nelems, team, root, chunk, sources, in_place):
    """Split ``team`` (start, stride, size) off the world, run collective ``name``
    on it (``form``: "block", "warp" or "thread" in a kernel, "host" on a
    stream, with ``chunk`` bytes per block; ``in_place``: dest is source),
    return this member's whole dest (None on non-members)."""
    from collectives import THREADS, block_kernel  # tests/programs/collectives.py

    dt = DTYPES[dtype]
    handle = shmem.team_split_strided(shmem.TEAM_WORLD, *team)
    length = max(1, team[2] * nelems)
    source = shmem.zeros(length, dt)
    dest = source if in_place else shmem.zeros(length, dt)
    member = handle != shmem.TEAM_INVALID
    if member:
        source.copy_to_device(np.array(sources[shmem.team_my_pe(handle)], dt))
    shmem.barrier_all()
    result = None
    if member:
        if form == "host":
            shmem._stream._collectives._CHUNK_BYTES = chunk
            stream = cuda.stream()
            extra = (root,) if name == "broadcast" else ()
            getattr(shmem, name)(handle, dest, source, nelems, *extra, stream=stream)
            stream.synchronize()
        else:
            scope = {"block": "_block", "warp": "_warp", "thread": ""}[form]
            block_kernel(f"{name}{scope}")[1, THREADS[scope]](handle, dest, source, nelems, root)
            cuda.synchronize()
        result = dest.copy_to_host().tolist()
    shmem.barrier_all()
    if not in_place:
        shmem.free(dest)
    shmem.free(source)
    if member:
        shmem.team_destroy(handle)
    return result


# -- bad input --------------------------------------------------------------------------

@cuda.jit
def call_once(fn, args):
    # simulator only: kernels there are Python, so any device function can be passed in
    fn(*args)


def remote_operand(name):
    """Which argument of ``name`` lives on the other PE."""
    if name == "signal_op":
        return "sig"
    if name.startswith("get") or name in ("g", "iget", "atomic_fetch"):
        return "source"
    return "dest"


def bad_call(name, bad):
    """Call device function ``name`` with one bad argument; report the error, then
    check that the job still works."""
    n = shmem.n_pes()
    arrays = {"dest": shmem.zeros(8, np.int64), "source": shmem.zeros(8, np.int64),
              "sig": shmem.zeros(1, np.uint64)}
    if bad == "use_after_free":
        stale = shmem.zeros(8, np.int64 if remote_operand(name) != "sig" else np.uint64)
        shmem.free(stale)
        arrays[remote_operand(name)] = stale
    elif bad == "not_symmetric":
        arrays[remote_operand(name)] = cuda.to_device(np.zeros(8, arrays[remote_operand(name)].dtype))
    elif bad == "wrong_dtype":
        if name.startswith("atomic"):
            arrays[remote_operand(name)] = shmem.zeros(8, np.float32)
        else:
            arrays["sig"] = shmem.zeros(1, np.int64)
    values = {"pe": n if bad == "pe_out_of_range" else (shmem.my_pe() + 1) % n,
              "value": 1, "cond": 0, "sig_op": shmem.SIGNAL_SET, "nelems": 2,
              "dst_stride": 1, "src_stride": 1}
    params = shmem._device_api.TABLE[name][0].split()
    args = tuple(arrays[p] if p in arrays else values[p] for p in params)
    shmem.barrier_all()
    try:
        call_once[1, 1](getattr(shmem, name), args)
        outcome = "no error"
    except Exception as exc:  # the error is what this handler reports
        outcome = f"{type(exc).__name__}: {exc}"
    shmem.barrier_all()
    # still usable: a put to the right neighbour and a barrier
    check = shmem.zeros(4, np.int64)
    call_once[1, 1](shmem.put, (check, cuda.to_device(np.full(4, 7, np.int64)), (shmem.my_pe() + 1) % n))
    shmem.barrier_all()
    usable = bool((check.copy_to_host() == 7).all())
    shmem.barrier_all()
    shmem.free(check)
    for arr in arrays.values():
        if hasattr(arr, "_ary") and shmem._runtime.current().heap._allocated_offset(arr) is not None:
            shmem.free(arr)
    return {"outcome": outcome, "usable": usable}


HANDLERS = {"rma_program": rma_program, "atomics": atomics, "signals": signals,
            "collective": collective,
            "allocations": allocations, "bad_call": bad_call}


def main():
    shmem.init()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(sys.argv[1])
    _wire.send(sock, {"pe": shmem.my_pe()})
    while True:
        request, _payload, _fds = _wire.recv(sock)
        if request["kind"] == "exit":
            break
        try:
            result = HANDLERS[request["kind"]](**request["args"])
            _wire.send(sock, {"ok": True, "result": result})
        except Exception as exc:  # reported to the test, which fails with it
            _wire.send(sock, {"ok": False, "error": f"{type(exc).__name__}: {exc}"})
    sock.close()
    shmem.finalize()


if __name__ == "__main__":
    main()
