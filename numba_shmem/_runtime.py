"""The runtime state: one object that ``init()`` creates and ``finalize()`` tears down."""

import atexit
import os
import sys

import numpy as np

from . import _bootstrap, _config
from ._bootstrap import _wire
from ._errors import ShmemUsageError
from ._heap._symmetric import SymmetricHeap
from ._resources import UndoStack
from ._select import cuda_driver_present, numba_is_simulator

_current = None
_finalized = False
#: at exit, how long this PE gives its GPU work to finish before it releases the
#: heap anyway (a kernel may wait for a PE that will never come)
EXIT_GPU_WAIT_S = 10.0


def current():
    """The running ``Runtime``, or None before ``init()``."""
    return _current


def require(what):
    if _current is None:
        if _finalized:
            raise ShmemUsageError(
                f"shmem.{what}() was called after shmem.finalize(); numba-shmem cannot be "
                "used (or initialized again) once finalized: finalize at the end of the "
                "program")
        raise ShmemUsageError(
            f"shmem.{what}() needs the runtime: call shmem.init() first, and "
            "launch several PEs with shmem-run -n N script.py")
    return _current


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

    def __init__(self, config):
        self.config = config
        self.backend = _resolve_backend(config)
        self._undo = UndoStack()
        self.why = "failed in shmem.init()"  # how this PE leaves, for the others' errors
        self.gpu = "idle"  # at teardown: "idle", "busy" or "failed" (wait_idle)
        self.stream_tier = None  # made by the first stream-tier call (_stream/_tier.py)
        self.proxy = None  # how this PE reaches PEs on other nodes (_transport)
        self.bootstrap = _bootstrap.start(config)
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
            self.proxy = _transport.start(self)
            if self.proxy is not None:
                self._undo.push(self.proxy.close)
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
        self.device_id = self.bootstrap.local_rank % count
        cuda.select_device(self.device_id)
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
        self._leaving = cuda.mapped_array(1, np.int32)
        self._leaving[0] = 0
        state["leaving"] = self._leaving.device_ctypes_pointer.value
        self.device_state = state
        # kernels' modules get their state through this stream: non-blocking, so
        # that loading one never waits for (or joins) a stream being captured
        self.setup_stream = call("cuStreamCreate", cu.CUstream_flags.CU_STREAM_NON_BLOCKING)
        self._undo.push(call, "cuStreamDestroy", self.setup_stream)
        return heap

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
            finally:
                self.heap.backend.lifetime.ended = True
                self._undo.unwind()


def init():
    """Collective. Start this PE: read the configuration, find the other PEs,
    bind the GPU and create the symmetric heap."""
    global _current
    if _current is not None:
        raise ShmemUsageError("shmem.init() was already called; call it once per process")
    if _finalized:
        raise ShmemUsageError(
            "shmem.init() after shmem.finalize() is not supported; initialize once per process")
    _current = Runtime(_config.from_env())
    global _previous_excepthook
    if sys.excepthook is not _note_uncaught:
        _previous_excepthook, sys.excepthook = sys.excepthook, _note_uncaught


def finalize():
    """Collective. Wait for every PE, then release the heap and the bootstrap.
    Also runs (without the wait) when the process exits."""
    runtime = require("finalize")
    runtime.synchronize("shmem.finalize")
    runtime.bootstrap.barrier("shmem.finalize")
    _teardown(_wire.FINALIZED)


def _teardown(why, gpu_wait=None):
    global _current, _finalized
    runtime, _current = _current, None
    _finalized = True
    if runtime is not None:
        runtime.close(why, gpu_wait)


_uncaught = []  # the uncaught exception the interpreter is exiting with, if any


def _note_uncaught(kind, value, traceback):
    _uncaught.append(kind.__name__)
    (_previous_excepthook or sys.__excepthook__)(kind, value, traceback)


_previous_excepthook = None


@atexit.register
def _finalize_at_exit():
    """A PE that exits without finalize(): leave at once, so that PEs waiting for
    it fail now, and never wait long for a kernel that may wait for them."""
    if _current is not None:
        why = f"{_wire.EXITED} (uncaught {_uncaught[-1]})" if _uncaught else _wire.EXITED
        runtime = _current
        _teardown(why, gpu_wait=EXIT_GPU_WAIT_S)
        if _uncaught and runtime.bootstrap.name == "MPI":
            # MPI_Finalize at exit would wait for the other PEs, which wait for
            # this one: end the job on every node instead, saying who and why
            from mpi4py import MPI

            print(f"numba-shmem: PE {runtime.bootstrap.rank} of {runtime.bootstrap.size} "
                  f"exits with an uncaught {_uncaught[-1]}: aborting the MPI job (code 1)",
                  file=sys.stderr, flush=True)
            sys.stdout.flush()
            MPI.COMM_WORLD.Abort(1)
        if runtime.gpu == "busy":
            # a kernel still runs outside the library's waits; the CUDA driver's
            # own exit would wait for it for ever: leave now
            print(f"numba-shmem: PE {runtime.bootstrap.rank} exits (code 1) without "
                  "waiting for its kernels", file=sys.stderr, flush=True)
            sys.stdout.flush()
            os._exit(1)


def my_pe():
    """This PE's number, 0 to ``n_pes() - 1``. Host and device."""
    return require("my_pe").bootstrap.rank


def n_pes():
    """The number of PEs in the job. Host and device."""
    return require("n_pes").bootstrap.size


def config():
    """The ``Config`` this job runs with."""
    return require("config").config
