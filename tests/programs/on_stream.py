"""The on-stream functions, checked with data after every wait.

    on_stream.py rounds [graphs REPLAYS | errors]

A ring: each round, every PE puts a block of values to its right neighbour
with ``put_signal(stream=)`` (SIGNAL_SET on odd rounds, SIGNAL_ADD on even
ones; every fourth round a block too large for put_signal's one-kernel form), holds its stream with ``signal_wait_until(stream=)`` until its left
neighbour's block is there, checks it in a kernel on the same stream, and
tells the left neighbour with ``signal_op(stream=)`` that the block may be
overwritten; waits use CMP_EQ (a stream memory operation) and CMP_GE / CMP_GT
(a one-thread kernel) by turns. Then ``quiet`` and ``barrier(team, stream=)``.
Prints ``PE n: on-stream ok (R rounds, E errors)``.

``graphs`` (GPU only): one round and every host collective, captured into a
CUDA graph by each way there is here (cuda.bindings on a numba stream,
cuda.core's GraphBuilder, torch.cuda.graph) and replayed REPLAYS times; prints
``PE n: graph <kind> ok (...)`` per kind, then ``EXPECTED`` for an in-place
reduction whose scratch would have to be made during a capture.

``errors``: bad arguments to each on-stream function, one ``EXPECTED`` line
each, then the ring again (the job goes on).
"""

import sys

import numba_shmem as shmem  # first: on a machine without a GPU it picks the simulator
import numpy as np
from numba import cuda
from numba_shmem._stream._rma import ONE_KERNEL_BYTES

N = 256


@cuda.jit
def fill(out, value):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = value + i


@cuda.jit
def check(data, value, errors):
    i = cuda.grid(1)
    if i < data.size and data[i] != value + i:
        cuda.atomic.add(errors, 0, 1)


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def rounds(count):
    me, n = shmem.my_pe(), shmem.n_pes()
    right, left = (me + 1) % n, (me - 1) % n
    data = shmem.zeros(N, np.int64)
    sig = shmem.zeros(2, np.uint64)
    ack = shmem.zeros(1, np.uint64)
    flag = shmem.zeros(1, np.uint64)
    src = cuda.device_array(N, np.int64)
    gpu = shmem._runtime.current().backend == "cuda"
    big_size = (ONE_KERNEL_BYTES // 8 + 2 * N) if gpu else N  # (the simulator copies alike)
    big = shmem.zeros(big_size, np.int64)
    big_src = cuda.device_array(big_size, np.int64)
    errors = cuda.to_device(np.zeros(1, np.int64))
    stream = cuda.stream()
    shmem.barrier_all()
    # a bare signal first: SET on the right neighbour, waited for as "not 0"
    shmem.signal_op(flag, 7 + me, shmem.SIGNAL_SET, right, stream=stream)
    shmem.signal_wait_until(flag, shmem.CMP_NE, 0, stream=stream)
    adds = 0
    for r in range(1, count + 1):
        if r > 1:  # the right neighbour has checked round r - 1: the block may be overwritten
            shmem.signal_wait_until(ack, shmem.CMP_GE if r % 2 else shmem.CMP_EQ, r - 1,
                                    stream=stream)
        # every fourth round a block larger than one kernel's put_signal: the copy engine
        dest, source = (big, big_src) if r % 4 == 0 else (data, src)
        blocks = -(-dest.size // N)
        fill[blocks, N, stream](source, 1000 * r + me)
        if r % 2:
            shmem.put_signal(dest, source, sig[0:1], r, shmem.SIGNAL_SET, right, stream=stream)
            shmem.signal_wait_until(sig[0:1], shmem.CMP_EQ, r, stream=stream)
        else:
            adds += 1
            shmem.put_signal(dest, source, sig[1:2], 1, shmem.SIGNAL_ADD, right, stream=stream)
            shmem.signal_wait_until(sig[1:2], shmem.CMP_GT, adds - 1, stream=stream)
        check[blocks, N, stream](dest, 1000 * r + left, errors)
        shmem.signal_op(ack, 1, shmem.SIGNAL_ADD, left, stream=stream)
    shmem.quiet(stream=stream)
    shmem.barrier(shmem.TEAM_WORLD, stream=stream)
    stream.synchronize()
    wrong = int(errors.copy_to_host()[0])
    seen = int(flag.copy_to_host()[0])
    ok = wrong == 0 and seen == 7 + left and int(ack.copy_to_host()[0]) == count
    say(f"PE {me}: on-stream {'ok' if ok else 'WRONG'} ({count} rounds, {wrong} errors, "
        f"flag {seen})")
    shmem.barrier_all()


# -- graphs (GPU) ---------------------------------------------------------------------

@cuda.jit
def advance(out, counter, me):
    """counter += 1, then out[i] = 1000 * counter + me + i (one block)."""
    if cuda.threadIdx.x == 0:
        counter[0] += 1
    cuda.syncthreads()
    for i in range(cuda.threadIdx.x, out.size, cuda.blockDim.x):
        out[i] = 1000 * counter[0] + me + i


@cuda.jit
def verify(data, counter, left, errors):
    """counter += 1, then data must be 1000 * counter + left + i (one block)."""
    if cuda.threadIdx.x == 0:
        counter[0] += 1
    cuda.syncthreads()
    for i in range(cuda.threadIdx.x, data.size, cuda.blockDim.x):
        if data[i] != 1000 * counter[0] + left + i:
            cuda.atomic.add(errors, 0, 1)


class Graphs:
    """What one captured round uses, made before the capture."""

    def __init__(self):
        from collectives import N as CN, source_of  # tests/programs/collectives.py

        self.me, self.n = shmem.my_pe(), shmem.n_pes()
        n = self.n
        self.data = shmem.zeros(N, np.int64)
        self.sig = shmem.zeros(1, np.uint64)
        self.ack = shmem.zeros(1, np.uint64)
        self.src = cuda.device_array(N, np.int64)
        self.counters = cuda.to_device(np.zeros(2, np.int64))
        self.errors = cuda.to_device(np.zeros(1, np.int64))
        # every host collective on int64, CN elements per member (one block; the
        # reductions in lines), plus a reduction of many blocks and one in place (in
        # lines: no scratch)
        self.source = shmem.array(n * CN, np.int64)
        self.source.copy_to_device(source_of(self.me, n, np.int64))
        self.dests = {name: shmem.zeros(n * CN, np.int64) for name in shmem._HOST_COLLECTIVES}
        self.big = shmem.array(n * 20000, np.int64)
        self.big.copy_to_device(np.arange(n * 20000, dtype=np.int64) + self.me)
        self.big_out = shmem.zeros(20000, np.int64)
        self.in_place = shmem.zeros(CN, np.int64)
        self.cn = CN
        # this test's own kernels are loaded before any capture (numba loads a module
        # at a kernel's first launch, which a capture in global mode refuses); the
        # library's kernels are not: the first capture prepares them
        scratch = [cuda.device_array(1, np.int64) for _ in range(3)]
        advance[1, 128](cuda.device_array(N, np.int64), scratch[0], 0)
        verify[1, 128](self.data, scratch[1], 0, scratch[2])
        cuda.synchronize()
        shmem.barrier_all()

    def reset(self):
        """Before each kind: zeros, and ack = 1 (the right neighbour is ready)."""
        cuda.synchronize()
        shmem.barrier_all()
        for arr in (self.data, self.sig, self.big_out, self.in_place, *self.dests.values()):
            arr.copy_to_device(np.zeros(arr.size, arr.dtype))
        self.counters.copy_to_device(np.zeros(2, np.int64))
        self.errors.copy_to_device(np.zeros(1, np.int64))
        self.ack.copy_to_device(np.ones(1, np.uint64))
        self.in_place.copy_to_device(np.full(self.cn, self.me + 1, np.int64))
        cuda.synchronize()
        shmem.barrier_all()

    def record(self, stream):
        """One round and every collective, enqueued on ``stream`` (being captured)."""
        from numba_shmem._stream._handles import handle_of

        me, n = self.me, self.n
        # numba launches its own kernels only on its own streams
        on = stream if isinstance(stream, type(cuda.default_stream())) else \
            cuda.external_stream(handle_of(stream))
        right, left = (me + 1) % n, (me - 1) % n
        shmem.signal_wait_until(self.ack, shmem.CMP_EQ, 1, stream=stream)
        shmem.signal_op(self.ack, 0, shmem.SIGNAL_SET, me, stream=stream)
        advance[1, 128, on](self.src, self.counters[0:1], me)
        shmem.put_signal(self.data, self.src, self.sig, 1, shmem.SIGNAL_SET, right, stream=stream)
        shmem.signal_wait_until(self.sig, shmem.CMP_EQ, 1, stream=stream)
        shmem.signal_op(self.sig, 0, shmem.SIGNAL_SET, me, stream=stream)
        verify[1, 128, on](self.data, self.counters[1:2], left, self.errors)
        shmem.signal_op(self.ack, 1, shmem.SIGNAL_SET, left, stream=stream)
        for name, dest in self.dests.items():
            root = (1 % n,) if name == "broadcast" else ()
            getattr(shmem, name)(shmem.TEAM_WORLD, dest, self.source, self.cn, *root,
                                 stream=stream)
        shmem.sum_reduce(shmem.TEAM_WORLD, self.big_out, self.big, 20000, stream=stream)
        shmem.max_reduce(shmem.TEAM_WORLD, self.in_place, self.in_place, self.cn, stream=stream)
        shmem.quiet(stream=stream)
        shmem.barrier(shmem.TEAM_WORLD, stream=stream)
        shmem.barrier_all_on_stream(stream)

    def verdict(self, kind, replays):
        from collectives import expected

        cuda.synchronize()
        me, n = self.me, self.n
        wrong = []
        if int(self.errors.copy_to_host()[0]):
            wrong.append(f"{int(self.errors.copy_to_host()[0])} stale elements")
        if self.counters.copy_to_host().tolist() != [replays, replays]:
            wrong.append(f"counters {self.counters.copy_to_host().tolist()}")
        for name, dest in self.dests.items():
            want = expected(f"{name}_block", me, n, np.int64)
            if not np.array_equal(dest.copy_to_host()[:want.size], want):
                wrong.append(name)
        big = sum(np.arange(20000, dtype=np.int64) + pe for pe in range(n))
        if not np.array_equal(self.big_out.copy_to_host(), big):
            wrong.append("sum_reduce of many blocks")
        if not (self.in_place.copy_to_host() == n).all():
            wrong.append("max_reduce in place")
        say(f"PE {me}: graph {kind} {'ok' if not wrong else 'WRONG: ' + ', '.join(wrong)} "
            f"({replays} replays)")
        shmem.barrier_all()


def capture_bindings(graphs, replays):
    """cuda.bindings stream capture of a numba stream, global mode (any call
    that is not allowed during a capture, from any thread, is an error)."""
    from cuda.bindings import driver as cu

    stream = cuda.stream()
    handle = int(stream.handle)
    (error,) = cu.cuStreamBeginCapture(handle, cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL)
    assert error == cu.CUresult.CUDA_SUCCESS, error
    graphs.record(stream)
    error, graph = cu.cuStreamEndCapture(handle)
    assert error == cu.CUresult.CUDA_SUCCESS, error
    error, executable = cu.cuGraphInstantiate(graph, 0)
    assert error == cu.CUresult.CUDA_SUCCESS, error
    shmem.barrier_all()
    for _ in range(replays):
        cu.cuGraphLaunch(executable, handle)
    stream.synchronize()


def capture_cuda_core(graphs, replays):
    try:
        from cuda.core import Device
    except ImportError:
        from cuda.core.experimental import Device
    device = Device(cuda.get_current_device().id)
    device.set_current()
    stream = device.create_stream()
    builder = stream.create_graph_builder()
    builder.begin_building("global")
    graphs.record(builder.stream)
    graph = builder.end_building().complete()
    shmem.barrier_all()
    for _ in range(replays):
        graph.launch(stream)
    stream.sync()


def capture_torch(graphs, replays):
    import torch

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        graphs.record(torch.cuda.current_stream())
    shmem.barrier_all()
    for _ in range(replays):
        graph.replay()
    torch.cuda.synchronize()


def kinds():
    yield "cuda.bindings", capture_bindings
    try:
        import cuda.core  # noqa: F401
        yield "cuda.core", capture_cuda_core
    except ImportError:
        pass
    try:
        import torch
        if torch.cuda.is_available():
            yield "torch", capture_torch
    except ImportError:
        pass


def graphs_run(replays):
    graphs = Graphs()
    for kind, capture in kinds():
        graphs.reset()
        with cuda.defer_cleanup():  # numba frees nothing during the capture
            capture(graphs, replays)
        graphs.verdict(kind, replays)
    # an in-place reduction too large for lines, of a size not seen before, needs
    # scratch: refused in a capture
    from cuda.bindings import driver as cu

    stream = cuda.stream()
    handle = int(stream.handle)
    fresh = shmem.zeros(600, np.int64)
    cu.cuStreamBeginCapture(handle, cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
    try:
        shmem.sum_reduce(shmem.TEAM_WORLD, fresh, fresh, 600, stream=stream)
    except shmem.ShmemUsageError as error:
        say(f"EXPECTED {error}")
    cu.cuStreamEndCapture(handle)
    shmem.barrier_all()


def errors():
    """Each bad argument is refused on every PE, before anything is enqueued."""
    n = shmem.n_pes()
    data = shmem.zeros(N, np.int64)
    sig = shmem.zeros(1, np.uint64)
    wrong = shmem.zeros(1, np.int64)
    src = cuda.device_array(N, np.int64)
    cases = [
        lambda: shmem.put_signal(data, src, wrong, 1, shmem.SIGNAL_SET, 0),
        lambda: shmem.put_signal(data, src, sig, 1, 7, 0),
        lambda: shmem.put_signal(data, src, sig, -1, shmem.SIGNAL_SET, 0),
        lambda: shmem.put_signal(data, src, sig, 1, shmem.SIGNAL_SET, n),
        lambda: shmem.put_signal(data, src, sig, 1, shmem.SIGNAL_SET, 0, stream="fast"),
        lambda: shmem.signal_op(sig, 1.5, shmem.SIGNAL_ADD, 0),
        lambda: shmem.signal_wait_until(sig, 9, 1),
        lambda: shmem.signal_wait_until(wrong, shmem.CMP_EQ, 1),
        lambda: shmem.quiet(stream=-3),
        lambda: shmem.barrier(12, stream=0),
    ]
    for case in cases:
        try:
            case()
        except shmem.ShmemUsageError as error:
            say(f"EXPECTED {error}")
        else:
            say("NO ERROR")
    cuda.synchronize()
    shmem.barrier_all()


if __name__ == "__main__":
    shmem.init()
    if sys.argv[2:3] == ["errors"]:
        errors()
    rounds(int(sys.argv[1]))
    if sys.argv[2:3] == ["graphs"]:
        graphs_run(int(sys.argv[3]))
    shmem.finalize()
