"""One process of benchmarks/target_paths.py: each way a proxy thread can make
a request seen by a kernel that waits for it, timed as a round trip, ``rounds``
times; then whether each gets through while the application's thread loads a
module. Prints a JSON line for each part.

A kernel of the application (one thread, in the primary context, on a stream
of its own) waits for a flag in GPU memory mapped as the heap is (CUDA VMM) to
reach 1, 2, 3, ... and echoes each value into mapped host memory. The host
thread delivers each value one way and waits for the echo: the time from the
start of the delivery to the echo is the round trip; the delivery's own call
time is the 'issue' time.

    python benchmarks/target_paths_pe.py ROUNDS
"""

import ctypes
import json
import sys
import threading
import time

import numpy as np
from cuda.bindings import driver as cu

#: spin(flag, echo, n, abort): for i in 1..n, wait (acquire, system scope)
#: for flag >= i, then store i to echo (release); it returns early once the
#: host sets abort. service(inbox, flag, n): for i in
#: 1..n, wait for the host's word inbox >= i, then store it to flag: a
#: resident kernel that applies what the proxy writes into mapped host memory.
#: store(address, value): the one-thread kernel a proxy launches per request.
PTX = b"""
.version 7.0
.target sm_70
.address_size 64
.visible .entry spin(.param .u64 p0, .param .u64 p1, .param .u64 p2, .param .u64 p3)
{
    .reg .b64 %rd<8>;
    .reg .pred %p<4>;
    ld.param.u64 %rd1, [p0];
    ld.param.u64 %rd2, [p1];
    ld.param.u64 %rd3, [p2];
    ld.param.u64 %rd6, [p3];
    mov.u64 %rd4, 1;
$WAIT:
    ld.acquire.sys.u64 %rd5, [%rd1];
    setp.ge.u64 %p1, %rd5, %rd4;
    @%p1 bra $SEEN;
    ld.acquire.sys.u64 %rd7, [%rd6];
    setp.ne.u64 %p3, %rd7, 0;
    @%p3 bra $END;
    bra $WAIT;
$SEEN:
    st.release.sys.u64 [%rd2], %rd4;
    add.u64 %rd4, %rd4, 1;
    setp.le.u64 %p2, %rd4, %rd3;
    @%p2 bra $WAIT;
$END:
    ret;
}
.visible .entry service(.param .u64 p0, .param .u64 p1, .param .u64 p2)
{
    .reg .b64 %rd<8>;
    .reg .pred %p<3>;
    ld.param.u64 %rd1, [p0];
    ld.param.u64 %rd2, [p1];
    ld.param.u64 %rd3, [p2];
    mov.u64 %rd4, 1;
$WAIT:
    ld.acquire.sys.u64 %rd5, [%rd1];
    setp.lt.u64 %p1, %rd5, %rd4;
    @%p1 bra $WAIT;
    st.release.sys.u64 [%rd2], %rd5;
    add.u64 %rd4, %rd4, 1;
    setp.le.u64 %p2, %rd4, %rd3;
    @%p2 bra $WAIT;
    ret;
}
.visible .entry store(.param .u64 p0, .param .u64 p1)
{
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [p0];
    ld.param.u64 %rd2, [p1];
    st.release.sys.u64 [%rd1], %rd2;
    ret;
}
"""


def check(result):
    """The values of a cuda.bindings call, or an error naming its status."""
    status, *values = result
    if status != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"CUDA call failed: {status}")
    return values[0] if len(values) == 1 else values


def launch(function, stream, *args, threads=1):
    """Launch ``function`` on ``stream``: one block of ``threads``, its
    parameters ``args`` (each a uint64)."""
    values = [ctypes.c_uint64(a) for a in args]
    pointers = (ctypes.c_void_p * len(values))(*[ctypes.addressof(v) for v in values])
    check(cu.cuLaunchKernel(function, 1, 1, 1, threads, 1, 1, 0, stream,
                            ctypes.addressof(pointers), 0))


def vmm_flag(device):
    """2 MiB of GPU memory mapped as the heap is (cuMemCreate, cuMemMap,
    access for ``device``): its address."""
    prop = cu.CUmemAllocationProp()
    prop.type = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    prop.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    prop.location.id = device
    size = 2 << 20
    handle = check(cu.cuMemCreate(size, prop, 0))
    base = int(check(cu.cuMemAddressReserve(size, 0, 0, 0)))
    check(cu.cuMemMap(base, size, 0, handle, 0))
    access = cu.CUmemAccessDesc()
    access.location = prop.location
    access.flags = cu.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
    check(cu.cuMemSetAccess(base, size, [access], 1))
    return base


def percentile(samples, q):
    return sorted(samples)[round(q * (len(samples) - 1))] / 1e3


def green_context(device):
    """A green context on ``device`` with the smallest SM partition it allows,
    its own stream and module: (context, stream, kernels), or the reason there
    is none."""
    try:
        sms = check(cu.cuDeviceGetDevResource(
            device, cu.CUdevResourceType.CU_DEV_RESOURCE_TYPE_SM))
        groups, _count, _rest = check(cu.cuDevSmResourceSplitByCount(
            1, sms, 0, getattr(sms.sm, "minSmPartitionSize", 0) or 8))
        desc = check(cu.cuDevResourceGenerateDesc([groups[0]], 1))
        green = check(cu.cuGreenCtxCreate(
            desc, device, cu.CUgreenCtxCreate_flags.CU_GREEN_CTX_DEFAULT_STREAM))
        context = check(cu.cuCtxFromGreenCtx(green))
        check(cu.cuCtxSetCurrent(context))
        stream = check(cu.cuGreenCtxStreamCreate(
            green, cu.CUstream_flags.CU_STREAM_NON_BLOCKING, 0))
        return context, stream, load_kernels()
    except (RuntimeError, AttributeError, TypeError) as exc:
        return f"no green context: {exc}"


def load_kernels(ptx=PTX):
    module = check(cu.cuModuleLoadData(ptx))
    return {name: check(cu.cuModuleGetFunction(module, name.encode()))
            for name in ("spin", "service", "store")}


def main():
    rounds = int(sys.argv[1])
    check(cu.cuInit(0))
    device = check(cu.cuDeviceGet(0))
    primary = check(cu.cuDevicePrimaryCtxRetain(device))
    check(cu.cuCtxSetCurrent(primary))
    flag = vmm_flag(0)
    # mapped host memory: the echo, a copy's source, the service kernel's
    # inbox, the spinning kernel's abort word
    host = int(check(cu.cuMemHostAlloc(
        4096, cu.CU_MEMHOSTALLOC_PORTABLE | cu.CU_MEMHOSTALLOC_DEVICEMAP)))
    words = np.ctypeslib.as_array((ctypes.c_uint64 * 512).from_address(host))
    words[:] = 0
    on_gpu = int(check(cu.cuMemHostGetDevicePointer(host, 0)))
    echo, source, inbox, abort = 0, 8, 16, 24  # (word indices, a line apart)
    non_blocking = cu.CUstream_flags.CU_STREAM_NON_BLOCKING

    kernels = load_kernels()
    app_stream, service_stream, proxy_stream = (check(cu.cuStreamCreate(non_blocking))
                                                for _ in range(3))
    contexts = {"application's": (primary, proxy_stream, kernels)}
    try:  # a context of the proxy's own, with its own module and stream
        own = check(cu.cuCtxCreate(None, 0, device))
    except TypeError:  # (cuda.bindings before 13)
        own = check(cu.cuCtxCreate(0, device))
    contexts["own"] = (own, check(cu.cuStreamCreate(non_blocking)), load_kernels())
    check(cu.cuCtxSetCurrent(primary))
    green = green_context(device)
    check(cu.cuCtxSetCurrent(primary))
    notes = []
    if isinstance(green, str):
        notes.append(green)
    else:
        contexts["green"] = green

    def copy(context):
        _, stream, _ = contexts[context]

        def deliver(i):
            words[source] = i
            check(cu.cuMemcpyHtoDAsync(flag, host + 8 * source, 8, stream))
            check(cu.cuStreamSynchronize(stream))
        return deliver

    def kernel(context):
        _, stream, their_kernels = contexts[context]

        def deliver(i):
            launch(their_kernels["store"], stream, flag, i)
            check(cu.cuStreamSynchronize(stream))
        return deliver

    def write_value(context):
        _, stream, _ = contexts[context]

        def deliver(i):
            check(cu.cuStreamWriteValue64(stream, flag, i, 0))
            check(cu.cuStreamSynchronize(stream))
        return deliver

    def reduce_add(context):
        """An atomic add of 1 as a stream memory operation: the flag counts up."""
        _, stream, _ = contexts[context]
        kind = cu.CUstreamBatchMemOpType.CU_STREAM_MEM_OP_ATOMIC_REDUCTION
        op = cu.CUstreamBatchMemOpParams()
        op.operation = op.atomicReduction.operation = kind
        op.atomicReduction.flags = 0
        op.atomicReduction.reductionOp = \
            cu.CUstreamAtomicReductionOpType.CU_STREAM_ATOMIC_REDUCTION_OP_ADD
        op.atomicReduction.dataType = \
            cu.CUstreamAtomicReductionDataType.CU_STREAM_ATOMIC_REDUCTION_UNSIGNED_64
        op.atomicReduction.address = flag
        op.atomicReduction.value = 1

        def deliver(i):
            check(cu.cuStreamBatchMemOp(stream, 1, [op], 0))
            check(cu.cuStreamSynchronize(stream))
        return deliver

    def service(i):
        words[inbox] = i

    def start_waiting(n):
        """The application's kernel, waiting for the flag to count to ``n``."""
        check(cu.cuCtxSetCurrent(primary))
        check(cu.cuMemsetD8(flag, 0, 8))
        check(cu.cuCtxSynchronize())
        words[echo] = words[abort] = 0
        launch(kernels["spin"], app_stream, flag, on_gpu + 8 * echo, n, on_gpu + 8 * abort)

    rows = []
    failed = set()  # the (way, context) this driver cannot do

    def measure(name, context, way):
        try:
            deliver = way(context)
            measured(name, context, deliver)
        except (RuntimeError, AttributeError) as exc:  # (a driver without the operation)
            words[abort] = 1
            check(cu.cuCtxSetCurrent(primary))
            check(cu.cuCtxSynchronize())
            notes.append(f"{name}, {context} context: {exc}")
            failed.add((name, context))

    def measured(name, context, deliver):
        start_waiting(rounds)
        if name.startswith("resident"):  # (on a stream of its context)
            words[inbox] = 0
            their_context, their_stream, their_kernels = contexts[context]
            check(cu.cuCtxSetCurrent(their_context))
            launch(their_kernels["service"],
                   service_stream if context == "application's" else their_stream,
                   on_gpu + 8 * inbox, flag, rounds)
        check(cu.cuCtxSetCurrent(contexts[context][0]))
        trips, issues = [], []
        deadline = time.monotonic() + 60
        for i in range(1, rounds + 1):
            t0 = time.perf_counter_ns()
            deliver(i)
            t1 = time.perf_counter_ns()
            while words[echo] < i:
                if time.monotonic() > deadline:
                    words[abort] = 1  # (the waiting kernel ends: the process can exit)
                    raise SystemExit(f"{name}: no echo of {i} within 60 s")
            trips.append(time.perf_counter_ns() - t0)
            issues.append(t1 - t0)
        check(cu.cuCtxSetCurrent(primary))
        check(cu.cuCtxSynchronize())
        rows.append({"way": name, "context": context,
                     "round_trip_us": [percentile(trips, q) for q in (0.1, 0.5, 0.9)],
                     "issue_us": [percentile(issues, q) for q in (0.1, 0.5, 0.9)]})

    ways = {"copy": ("copy engine (cuMemcpyHtoDAsync + synchronize)", copy),
            "kernel": ("one-thread kernel (launch + synchronize)", kernel),
            "memop": ("stream memory op (cuStreamWriteValue64 + synchronize)", write_value),
            "reduce": ("stream atomic add (cuStreamBatchMemOp + synchronize)", reduce_add)}
    for context in contexts:
        for name, way in ways.values():
            measure(name, context, way)
    for context in ("application's", "own"):  # (own: as the proxy's, beside the application)
        measure("resident kernel polling mapped host memory (a host store)", context,
                lambda context: service)

    name = check(cu.cuDeviceGetName(64, device)).split(b"\0")[0].decode()
    print(json.dumps({"device": name, "rounds": rounds, "rows": rows, "notes": notes}),
          flush=True)

    # While the application's thread loads a module and its kernel waits for
    # a request, does the request get through from each context?
    hazards = []
    for context in contexts:
        for key in ways:
            if (ways[key][0], context) in failed:
                continue
            start_waiting(1)
            loaded, delivered = threading.Event(), threading.Event()

            def load_module():
                check(cu.cuCtxSetCurrent(primary))
                check(cu.cuModuleLoadData(PTX.replace(b"entry store", b"entry other")))
                loaded.set()

            def deliver(context=context, key=key):
                check(cu.cuCtxSetCurrent(contexts[context][0]))
                ways[key][1](context)(1)
                delivered.set()

            loader = threading.Thread(target=load_module, daemon=True)
            loader.start()
            time.sleep(0.2)
            load_waited = not loaded.is_set()
            sender = threading.Thread(target=deliver, daemon=True)
            t0 = time.perf_counter()
            sender.start()
            got_through = delivered.wait(2.0)
            deadline = time.monotonic() + 0.1
            while got_through and words[echo] < 1 and time.monotonic() < deadline:
                pass
            got_through = got_through and words[echo] >= 1
            ms = (time.perf_counter() - t0) * 1e3 if got_through else None
            if not got_through:
                words[abort] = 1  # (the kernel gives up: the load and the call go on)
            loader.join(10)
            sender.join(10)
            hazards.append({"context": context, "way": ways[key][0],
                            "load_waited_for_the_kernel": load_waited,
                            "got_through": bool(got_through),
                            "ms": ms})
    check(cu.cuCtxSetCurrent(primary))
    check(cu.cuCtxSynchronize())
    print(json.dumps({"hazards": hazards}), flush=True)


if __name__ == "__main__":
    main()
