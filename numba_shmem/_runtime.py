"""The runtime state: one object that ``init()`` creates and ``finalize()`` tears down."""

import atexit
import os
import sys
import threading

import numpy as np
from shmem_run import _wire

from . import _bootstrap, _config, _exits
from ._current import current, finalized, install, remove, require
from ._errors import ShmemUsageError
from ._heap._symmetric import SymmetricHeap
from ._resources import UndoStack
from ._select import cuda_driver_present, numba_is_simulator

#: at exit, how long this PE gives its GPU work to finish before it releases the
#: heap anyway (a kernel may wait for a PE that will never come)
EXIT_GPU_WAIT_S = 10.0


def _resolve_backend(config):
    simulator = numba_is_simulator()
    if config.backend == "auto" and not simulator and not cuda_driver_present():
        raise ShmemUsageError(
            "there is no CUDA driver here, and numba.cuda was imported before numba_shmem, "
            "so the CPU simulator could not be chosen: import numba_shmem first, set "
            "NUMBA_ENABLE_CUDASIM=1, or launch with shmem-run")
    if config.backend == "cuda" and simulator:
        raise ShmemUsageError(
            "NUMBA_SHMEM_BACKEND=cuda but numba.cuda is running its simulator "
            "(NUMBA_ENABLE_CUDASIM=1); unset NUMBA_ENABLE_CUDASIM")
    if config.backend == "sim" and not simulator:
        raise ShmemUsageError(
            "NUMBA_SHMEM_BACKEND=sim but numba.cuda was imported for the GPU; import "
            "numba_shmem before numba.cuda, set NUMBA_ENABLE_CUDASIM=1, or launch "
            "with shmem-run --backend sim")
    return "sim" if simulator else "cuda"


class Runtime:
    """Everything one PE holds between ``init()`` and ``finalize()``."""

    def __init__(self, config, join=None):
        """``join``: the bootstrap's arguments init() was given (comm=, uid=...)."""
        self.config = config
        self.backend = _resolve_backend(config)
        self._undo = UndoStack()
        self.why = "failed in shmem.init()"  # how this PE leaves, for the others' errors
        self.gpu = "idle"  # at teardown: "idle", "busy" or "failed" (wait_idle)
        self.stream_tier = None  # made by the first stream-tier call (_stream/_tier.py)
        #: per thread: whether it runs in this PE's CUDA context (enter_context)
        self.threads = threading.local()
        self.proxy = None  # how this PE reaches PEs on other nodes (_transport)
        self.bootstrap = _bootstrap.start(config, **(join or {}))
        self._undo.push(lambda: self.bootstrap.close(self.why))
        from ._teams import TeamTable

        self.teams = TeamTable(self.bootstrap)
        try:
            from . import _transport

            _transport.check_reachable(self)  # before the GPU is touched
            if self.backend == "cuda":
                backend = self._start_cuda()
            else:
                from ._sim._heap import SimHeap

                backend = SimHeap(self.bootstrap, config)
                self._undo.push(backend.close)
            self.heap = SymmetricHeap(backend, self.bootstrap, self.synchronize)
            self.proxy = start_proxy(self)
            if self.proxy is not None:
                self._undo.push(self._close_proxy)
            self.bootstrap.barrier("shmem.init")
        except BaseException:
            self._undo.unwind()
            raise

    def _start_cuda(self):
        from numba import cuda
        from numba.cuda.cudadrv.error import CudaSupportError

        from ._cuda._driver import call, cu
        from ._cuda._state import CONST_PEERS, STATE_DTYPE
        from ._cuda._vmm import CudaHeap

        if self.bootstrap.size > CONST_PEERS:
            raise ShmemUsageError(
                f"this job has {self.bootstrap.size} PEs; on the GPU numba-shmem supports up "
                f"to {CONST_PEERS} (their heap addresses live in constant memory); start at "
                f"most {CONST_PEERS} PEs")
        try:
            count = len(cuda.gpus)
        except CudaSupportError:  # no device at all: the driver refuses to start
            count = 0
        if count == 0:
            raise ShmemUsageError(
                f"NUMBA_SHMEM_BACKEND={self.config.backend} chose the GPU but no CUDA GPU is "
                "visible; check CUDA_VISIBLE_DEVICES or use NUMBA_SHMEM_BACKEND=sim")
        # the launcher's local rank (torchrun's LOCAL_RANK), else ours; PEs beyond
        # the node's GPUs share them
        index = self.bootstrap.gpu_index
        self.device_id = (self.bootstrap.local_rank if index is None else index) % count
        cuda.select_device(self.device_id)
        self.threads.in_context = True
        # which GPU each PE runs on: PEs that share one split its SMs between them
        gpu = cuda.get_current_device().uuid
        self.pe_gpus = [b.decode() for b in self.bootstrap.allgather(gpu.encode(), "shmem.init")]
        self.pes_on_my_gpu = self.pe_gpus.count(gpu)
        heap = CudaHeap(self.bootstrap, self.config, self.device_id)
        self._undo.push(self._release_gpu_heap, heap)
        peer_bases = np.zeros(max(self.bootstrap.size, 1), dtype=np.uint64)
        for pe, base in heap.bases.items():
            peer_bases[pe] = base
        self.peer_table = peer_bases  # copied into each kernel module's constant memory
        state = np.zeros((), dtype=STATE_DTYPE)
        state["my_pe"] = self.bootstrap.rank
        state["n_pes"] = self.bootstrap.size
        state["heap_base"] = heap.base
        state["heap_size"] = heap.capacity
        state["debug"] = int(self.config.debug)
        state["one_gpu"] = int(len(set(self.pe_gpus)) == 1)
        self.teams.device = cuda.to_device(self.teams.table())
        state["teams"] = self.teams.device.device_ctypes_pointer.value
        # [0]: 1 once this PE leaves; [1]: 1 + the PE whose departure stopped a
        # kernel's wait (_cuda/_primitives._stop_for)
        self._leaving = cuda.mapped_array(2, np.int32)
        self._leaving[:] = 0
        state["leaving"] = self._leaving.device_ctypes_pointer.value
        self.device_state = state
        # kernels' modules get their state through this stream: non-blocking, so
        # that loading one never waits for (or joins) a stream being captured
        self.setup_stream = call("cuStreamCreate", cu.CUstream_flags.CU_STREAM_NON_BLOCKING)
        self._undo.push(call, "cuStreamDestroy", self.setup_stream)
        return heap

    def enter_context(self):
        """Make this PE's CUDA context the calling thread's, where the thread
        has none yet (a thread of the application other than the one that
        called init(): numba would give it device 0's); once per thread."""
        from numba import cuda

        from ._cuda._driver import call

        if not int(call("cuCtxGetCurrent")):
            cuda.select_device(self.device_id)
        self.threads.in_context = True

    def synchronize(self, what):
        """Complete this PE's work: its GPU's, and what its proxy carries to
        other nodes."""
        if self.backend == "cuda":
            from numba import cuda

            cuda.synchronize()
        if self.proxy is not None:
            self.proxy.quiet(what)

    def stop_device_waits(self):
        """Make this PE's kernels that wait in the library stop (trap): it is
        leaving, or its proxy has failed."""
        self._leaving[0] = 1

    def _say_who_left(self):
        """One line if a kernel of this PE stopped because a PE it waited for
        had left the job (the kernel's error says only that it failed)."""
        gone = int(self._leaving[1])
        if gone:
            print(f"numba-shmem: PE {self.bootstrap.rank}: a kernel was stopped: it waited in "
                  f"the library for PE {gone - 1}, which left the job", file=sys.stderr,
                  flush=True)

    def _release_gpu_heap(self, heap):
        if self.gpu == "idle":
            heap.close()
            return
        # unmapping under a running kernel would fault it: the process's exit
        # releases the memory instead
        print(f"numba-shmem: PE {self.bootstrap.rank} left with GPU work still running or "
              "its CUDA context failed; the heap is released with the process",
              file=sys.stderr, flush=True)

    def close(self, why, gpu_wait=None):
        """Leave the job: tell the other PEs first (``why``), give this PE's
        GPU work ``gpu_wait`` seconds to finish (None: as long as it takes),
        then release everything, whatever failed on the way."""
        self.why = why
        try:
            self.bootstrap.close(why)
        finally:
            try:
                if self.backend == "cuda":
                    from ._cuda._driver import wait_idle

                    if gpu_wait is not None:
                        self.stop_device_waits()
                    self.gpu = wait_idle(gpu_wait)
                    self._say_who_left()
                if why != _wire.FINALIZED:
                    # after its own kernels (their last stores go first): the
                    # others' waits for this PE stop
                    self._leave_heap()
            finally:
                self.heap.backend.lifetime.ended = True
                self._undo.unwind()

    def _close_proxy(self):
        self.proxy.close(every_pe=self.why == _wire.FINALIZED)

    def _leave_heap(self):
        try:
            self.heap.leave(self.bootstrap.rank)
        except Exception as exc:  # noqa: BLE001  (best effort, and the exit goes on)
            print(f"numba-shmem: PE {self.bootstrap.rank} could not mark its departure on "
                  f"the PEs of its node ({type(exc).__name__}: {exc}); their waits for it "
                  "end at the wait time-out", file=sys.stderr, flush=True)


def start_proxy(runtime):
    """The proxy of a job that spans nodes, else None."""
    from ._transport import far_pes

    if not far_pes(runtime.bootstrap):
        return None
    if runtime.backend != "cuda":
        return sim_proxy(runtime)
    return _gpu_proxy(runtime)


def _gpu_proxy(runtime):
    """The compiled request path (``_transport/_compiled.py``) on the GPU: the
    heap through ``_cuda._target.FunctionTarget``, kernels' requests through
    the device ring."""
    from ._cuda._proxied import device_ring
    from ._cuda._target import FunctionTarget
    from ._transport import _ring
    from ._transport._compiled import CompiledProxy

    heap = runtime.heap.backend
    target = FunctionTarget(heap)
    lockfd = None
    try:
        # puts from the heap copied out by the proxy, where its copies need not
        # wait for the application's time slice
        device = device_ring(runtime, _ring.FROM_MIN if target.alongside else 0)
        lockfd = os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC)  # (atomics take no lock here)
        # the target goes with the proxy, once its loop has stopped
        return CompiledProxy(runtime.bootstrap, np.zeros(8, np.uint8), heap.extent_word, lockfd,
                             runtime.config.wait_timeout, runtime.config.debug, device=device,
                             stop_waiters=runtime.stop_device_waits, busy_poll=0.01,
                             target=target.target, attach=target.attach, pin=target.pin,
                             release=target.close, target_counts=target.counts)
    except BaseException:
        if lockfd is not None:
            os.close(lockfd)
        target.close()
        raise


def sim_proxy(runtime, device=None):
    """The proxy of a PE on the simulator: the compiled request path
    (``_compiled``), applying requests to the simulator's heap; ``device``: a
    ring in the GPU ring's layout that threads post into (a test's)."""
    from ._transport._compiled import CompiledProxy

    # numba's simulator polls its kernel threads in a loop that holds the
    # interpreter lock: a kernel thread waiting for an answer would get it once
    # per switch interval (5 ms by default)
    sys.setswitchinterval(min(sys.getswitchinterval(), 1e-4))
    backend = runtime.heap.backend
    lockfd = backend.lock_descriptor()
    try:
        target = None
        if os.environ.get("NUMBA_SHMEM_TEST_FUNCTION_TARGET") == "1":
            # the path a GPU's heap takes, on this one (the tests' switch)
            from ._sim._target import function_target

            target = function_target(backend.own_heap(), lockfd)
        return CompiledProxy(runtime.bootstrap, backend.own_heap(), backend.extent_word,
                             lockfd, runtime.config.wait_timeout, runtime.config.debug,
                             device=device, target=target)
    except BaseException:
        os.close(lockfd)
        raise


def init(*, comm=None, uid=None, rank=None, nranks=None):
    """Collective. Start this PE: read the configuration, find the other PEs,
    bind the GPU and create the symmetric heap.

    The PEs are those of the launcher that started the process (shmem-run,
    mpirun/srun, torchrun), or: ``comm``, an mpi4py communicator (its ranks are
    the PEs); ``uid``, the id ``get_unique_id()`` returned on rank 0, with this
    PE's ``rank`` and the number of PEs ``nranks``."""
    if current() is not None:
        raise ShmemUsageError("shmem.init() was already called; call it once per process")
    if finalized():
        raise ShmemUsageError(
            "shmem.init() after shmem.finalize() is not supported; initialize once per process")
    runtime = Runtime(_config.from_env(), _join(comm, uid, rank, nranks))
    install(runtime)
    if runtime.bootstrap.name == "MPI":
        _exits.watch()  # the code of an exit without finalize() ends the MPI job
    global _previous_excepthook
    if sys.excepthook is not _note_uncaught:
        _previous_excepthook, sys.excepthook = sys.excepthook, _note_uncaught


def _join(comm, uid, rank, nranks):
    """init()'s arguments for the bootstrap, or a usage error naming the one
    that does not fit."""
    if comm is not None and uid is not None:
        raise ShmemUsageError(
            "shmem.init: pass comm= (an MPI job) or uid= (a unique id's job), not both")
    if uid is None and (rank is not None or nranks is not None):
        given = "rank" if rank is not None else "nranks"
        raise ShmemUsageError(
            f"shmem.init: {given}= goes with uid=; pass uid=shmem.get_unique_id() from "
            "rank 0 too (under a launcher, or with comm=, the PEs are numbered for you)")
    if comm is not None:
        return {"comm": comm}
    if uid is not None:
        return {"uid": uid, "rank": rank, "nranks": nranks}
    return {}


def get_unique_id():
    """A new unique id for ``init(uid=..., rank=..., nranks=...)``: call it on
    rank 0, hand the string to the other PEs by any means, and call init() with
    it on every PE, rank 0 in this process."""
    from ._bootstrap import _uid

    return _uid.make()


def finalize():
    """Collective. Wait for every PE, then release the heap and the bootstrap.
    Also runs (without the wait) when the process exits."""
    runtime = require("finalize")
    runtime.synchronize("shmem.finalize")
    runtime.bootstrap.barrier("shmem.finalize")
    _teardown(_wire.FINALIZED)


def _teardown(why, gpu_wait=None):
    runtime = remove()
    if runtime is not None:
        try:
            runtime.close(why, gpu_wait)
        finally:
            _exits.unwatch()


_uncaught = []  # the uncaught exception the interpreter is exiting with, if any


def _note_uncaught(kind, value, traceback):
    _uncaught.append(kind.__name__)
    (_previous_excepthook or sys.__excepthook__)(kind, value, traceback)


_previous_excepthook = None


@atexit.register
def _finalize_at_exit():
    """A PE that exits without finalize(): leave at once, so that PEs waiting for
    it fail now, and never wait long for a kernel that may wait for them."""
    runtime = current()
    if runtime is not None:
        why = f"{_wire.EXITED} (uncaught {_uncaught[-1]})" if _uncaught else _wire.EXITED
        code = 1 if _uncaught else (_exits.code() or 0) & 0xFF  # (as the OS takes it)
        try:
            _teardown(why, gpu_wait=EXIT_GPU_WAIT_S)
        finally:
            _end_mpi_job(runtime, code)
        if runtime.gpu == "busy":
            # a kernel still runs outside the library's waits; the CUDA driver's
            # own exit would wait for it for ever: leave now
            print(f"numba-shmem: PE {runtime.bootstrap.rank} exits (code 1) without "
                  "waiting for its kernels", file=sys.stderr, flush=True)
            sys.stdout.flush()
            os._exit(1)


def _end_mpi_job(runtime, code):
    """Under MPI, a PE that exits with a non-zero ``code`` without finalize()
    ends the job with it, at once."""
    if not code or runtime.bootstrap.name != "MPI":
        return
    # MPI_Finalize at exit would wait for the other PEs, which wait for this
    # one: end the job on every node instead, saying who and why
    from mpi4py import MPI

    how = f"an uncaught {_uncaught[-1]}" if _uncaught else \
        f"code {code} without shmem.finalize()"
    print(f"numba-shmem: PE {runtime.bootstrap.rank} of {runtime.bootstrap.size} "
          f"exits with {how}: aborting the MPI job (code {code})", file=sys.stderr, flush=True)
    sys.stdout.flush()
    MPI.COMM_WORLD.Abort(code)


def config():
    """The ``Config`` this job runs with."""
    return require("config").config
