"""One process of benchmarks/target_paths.py: each way a proxy thread can make
a request seen by a kernel that waits for it, timed as a round trip, ``rounds``
times. Prints one JSON line.

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
import time

import numpy as np
from cuda.bindings import driver as cu

#: spin(flag, echo, n): for i in 1..n, wait (acquire, system scope) for
#: flag >= i, then store i to echo (release). service(inbox, flag, n): for i in
#: 1..n, wait for the host's word inbox >= i, then store it to flag: a
#: resident kernel that applies what the proxy writes into mapped host memory.
#: store(address, value): the one-thread kernel a proxy launches per request.
PTX = b"""
.version 7.0
.target sm_70
.address_size 64
.visible .entry spin(.param .u64 p0, .param .u64 p1, .param .u64 p2)
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
    st.release.sys.u64 [%rd2], %rd4;
    add.u64 %rd4, %rd4, 1;
    setp.le.u64 %p2, %rd4, %rd3;
    @%p2 bra $WAIT;
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


def launch(function, stream, *args):
    values = [ctypes.c_uint64(a) for a in args]
    pointers = (ctypes.c_void_p * len(values))(*[ctypes.addressof(v) for v in values])
    check(cu.cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, stream,
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


def main():
    rounds = int(sys.argv[1])
    check(cu.cuInit(0))
    device = check(cu.cuDeviceGet(0))
    primary = check(cu.cuDevicePrimaryCtxRetain(device))
    check(cu.cuCtxSetCurrent(primary))
    flag = vmm_flag(0)
    # mapped host memory: the echo, a copy's source, the service kernel's inbox
    host = int(check(cu.cuMemHostAlloc(
        4096, cu.CU_MEMHOSTALLOC_PORTABLE | cu.CU_MEMHOSTALLOC_DEVICEMAP)))
    words = np.ctypeslib.as_array((ctypes.c_uint64 * 512).from_address(host))
    on_gpu = int(check(cu.cuMemHostGetDevicePointer(host, 0)))
    echo, source, inbox = 0, 8, 16  # (word indices, a line apart)
    non_blocking = cu.CUstream_flags.CU_STREAM_NON_BLOCKING

    def load():
        module = check(cu.cuModuleLoadData(PTX))
        kernels = {name: check(cu.cuModuleGetFunction(module, name.encode()))
                   for name in ("spin", "service", "store")}
        return kernels, check(cu.cuStreamCreate(non_blocking))

    kernels, app_stream = load()
    service_stream = check(cu.cuStreamCreate(non_blocking))
    proxy_stream = check(cu.cuStreamCreate(non_blocking))
    # a context of the proxy's own, with its own module and stream
    try:
        own = check(cu.cuCtxCreate(None, 0, device))
    except TypeError:  # (cuda.bindings before 13)
        own = check(cu.cuCtxCreate(0, device))
    own_kernels, own_stream = load()
    check(cu.cuCtxSetCurrent(primary))
    contexts = {"own": (own, own_stream, own_kernels),
                "application's": (primary, proxy_stream, kernels)}

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

    def service(i):
        words[inbox] = i

    rows = []

    def measure(name, context, deliver):
        check(cu.cuCtxSetCurrent(primary))
        check(cu.cuMemsetD8(flag, 0, 8))
        check(cu.cuStreamSynchronize(app_stream))
        check(cu.cuCtxSynchronize())
        words[echo] = 0
        if name.startswith("resident"):
            words[inbox] = 0
            launch(kernels["service"], service_stream, on_gpu + 8 * inbox, flag, rounds)
        launch(kernels["spin"], app_stream, flag, on_gpu + 8 * echo, rounds)
        check(cu.cuCtxSetCurrent(contexts[context][0]))
        trips, issues = [], []
        deadline = time.monotonic() + 60
        for i in range(1, rounds + 1):
            t0 = time.perf_counter_ns()
            deliver(i)
            t1 = time.perf_counter_ns()
            while words[echo] < i:
                if time.monotonic() > deadline:
                    raise SystemExit(f"{name}: no echo of {i} within 60 s")
            trips.append(time.perf_counter_ns() - t0)
            issues.append(t1 - t0)
        check(cu.cuCtxSetCurrent(primary))
        check(cu.cuCtxSynchronize())
        rows.append({"way": name, "context": context,
                     "round_trip_us": [percentile(trips, q) for q in (0.1, 0.5, 0.9)],
                     "issue_us": [percentile(issues, q) for q in (0.1, 0.5, 0.9)]})

    for context in ("own", "application's"):
        measure("copy engine (cuMemcpyHtoDAsync + synchronize)", context, copy(context))
        measure("one-thread kernel (launch + synchronize)", context, kernel(context))
        measure("stream memory op (cuStreamWriteValue64 + synchronize)", context,
                write_value(context))
    measure("resident kernel polling mapped host memory (a host store)", "application's",
            service)
    name = check(cu.cuDeviceGetName(64, device)).split(b"\0")[0].decode()
    print(json.dumps({"device": name, "rounds": rounds, "rows": rows}), flush=True)


if __name__ == "__main__":
    main()
