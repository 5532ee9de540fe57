"""The simulator's symmetric heap: one POSIX shared-memory segment per PE,
mapped by every PE of the node.

Each segment is unlinked as soon as every peer has mapped it, so a crashed job
leaves nothing in ``/dev/shm``. The segments are sparse; as allocations reach
further, each PE reserves the pages of its own (``posix_fallocate``), so that a
full ``/dev/shm`` is an error at allocation rather than a SIGBUS at first touch.
"""

import contextlib
import fcntl
import mmap
import os
import threading

import numpy as np
from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray, FakeWithinKernelCUDAArray

from .. import _dlpack
from .._errors import ShmemUsageError
from .._resources import Lifetime, UndoStack

SHM_DIR = "/dev/shm"


def segment_path(job_id, pe):
    return os.path.join(SHM_DIR, f"nshmem-{job_id}-{pe}")


def host_array(arr):
    """The numpy array behind a simulator device array (or a numpy array)."""
    if isinstance(arr, FakeWithinKernelCUDAArray):
        arr = arr.__dict__["_item"]
    if isinstance(arr, FakeCUDAArray):
        arr = arr._ary
    if not isinstance(arr, np.ndarray):
        raise ShmemUsageError(
            f"expected an array from shmem.array(), got {type(arr).__name__}")
    return arr


class SimHeap:
    """Collective. Create this PE's segment and map every local peer's."""

    kind = "sim"

    def __init__(self, bootstrap, config):
        self.capacity = config.heap_size
        self._chunk = config.heap_chunk
        self._bootstrap = bootstrap
        self.mapped = 0
        #: bytes from the heap's start that requests from other nodes may reach
        #: (``extent``), in an array the proxy's compiled loop reads
        self.extent_word = np.zeros(1, np.int64)
        self.lifetime = Lifetime()
        self._undo = UndoStack()
        self._peers = bootstrap.local_peers
        self._fds = {}
        try:
            self._maps = self._map_all(bootstrap)
        except BaseException:
            self._close_fds()
            self._undo.unwind()
            raise
        self._own = self._peers.index(bootstrap.rank)
        self._thread_locks = {pe: threading.Lock() for pe in self._peers}
        self._views = [np.frombuffer(m, dtype=np.uint8) for m in self._maps]
        self.bases = {pe: int(view.ctypes.data) for pe, view in zip(self._peers, self._views)}
        self.base = self.bases[bootstrap.rank]

    def _map_all(self, bootstrap):
        mine = segment_path(bootstrap.job_id, bootstrap.rank)
        fd = os.open(mine, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        self._undo.push(os.unlink, mine)
        self._fds = {bootstrap.rank: fd}
        os.ftruncate(fd, self.capacity)
        own = mmap.mmap(fd, self.capacity)
        # (every PE maps the others' segments at its own size: they must agree)
        sizes = [int(b) for b in bootstrap.allgather(str(self.capacity).encode(),
                                                     "simulator heap creation")]
        if len(set(sizes)) > 1:
            other = next(pe for pe, size in enumerate(sizes) if size != sizes[0])
            raise ShmemUsageError(
                f"PE 0's symmetric heap is {sizes[0]} bytes and PE {other}'s {sizes[other]}: "
                "NUMBA_SHMEM_HEAP_SIZE must be the same on every PE")
        maps = []
        for pe in self._peers:
            if pe == bootstrap.rank:
                maps.append(own)
                continue
            # kept open: atomics lock the target PE's segment (flock)
            self._fds[pe] = os.open(segment_path(bootstrap.job_id, pe), os.O_RDWR)
            maps.append(mmap.mmap(self._fds[pe], self.capacity))
        bootstrap.barrier("simulator heap mapping")
        # Every peer has it mapped: the name is no longer needed.
        self._undo.unwind()
        return maps

    @property
    def extent(self):
        """``mapped``, and during a growth step what this PE has reserved for it."""
        return int(self.extent_word[0])

    @extent.setter
    def extent(self, nbytes):
        self.extent_word[0] = nbytes

    def own_heap(self):
        """This PE's whole heap, as a uint8 array."""
        return self._views[self._own]

    def lock_descriptor(self):
        """A new descriptor of this PE's segment, on an open file of its own: a
        ``flock`` on it excludes ``locked()``'s holders in this process too
        (theirs is through the segment's first descriptor). The caller closes
        it."""
        return os.open(f"/proc/self/fd/{self._fds[self._bootstrap.rank]}", os.O_RDWR)

    def ensure_mapped(self, nbytes):
        """Collective. Reserve this PE's pages below ``nbytes``; the PEs agree
        on the outcome, and a PE that could not is an error on every PE."""
        if nbytes <= self.mapped:
            return
        size = min(max(nbytes - self.mapped, self._chunk), self.capacity - self.mapped)
        error = ""
        try:
            stats = os.statvfs(SHM_DIR)
            free = stats.f_bavail * stats.f_frsize
            if size > free:
                error = f"{SHM_DIR} has {free} bytes free"
            else:
                os.posix_fallocate(self._fds[self._bootstrap.rank], self.mapped, size)
                self.extent = self.mapped + size
        except OSError as exc:
            error = f"{SHM_DIR}: {exc.strerror or exc}"
        try:
            reports = self._bootstrap.allgather(error.encode(), "symmetric heap growth")
        except BaseException:
            self.extent = self.mapped
            raise
        failed = [(pe, r.decode()) for pe, r in enumerate(reports) if r]
        if failed:
            self.extent = self.mapped
            pe, why = failed[0]
            raise ShmemUsageError(
                f"symmetric heap exhausted: PE {pe} could not reserve {size} more bytes of its "
                f"simulator heap ({why}); free arrays with shmem.free(), or make {SHM_DIR} "
                "larger (a container's default is 64 MB: docker run --shm-size=8g)")
        self.mapped += size

    def view(self, pe, offset, shape, dtype, strides=None):
        buffer = self._maps[self._peers.index(pe)]
        return SymmetricArray(np.ndarray(shape, dtype, buffer=buffer, offset=offset,
                                         strides=strides), self.lifetime)

    def host(self, arr):
        """The numpy array behind the heap array ``arr``."""
        return host_array(arr)

    def address(self, arr):
        if callable(getattr(type(arr), "data_ptr", None)):  # a torch tensor (on the CPU)
            return int(arr.data_ptr())
        return int(host_array(arr).ctypes.data)

    def fill_zero(self, offset, nbytes):
        self._views[self._own][offset:offset + nbytes] = 0

    def set_word_on_peers(self, offset, value):
        """Store the uint64 ``value`` at ``offset`` of every local PE's heap."""
        for view in self._views:
            view[offset:offset + 8].view(np.uint64)[0] = value

    @contextlib.contextmanager
    def locked(self, pe):
        """Exclusive access to PE ``pe``'s heap for one atomic operation: against
        this process's other threads and against every other process."""
        with self._thread_locks[pe]:
            fcntl.flock(self._fds[pe], fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(self._fds[pe], fcntl.LOCK_UN)

    def _close_fds(self):
        for fd in self._fds.values():
            os.close(fd)
        self._fds = {}

    def close(self):
        # The mappings are not closed: an array (or a simulated kernel's thread,
        # at exit after Ctrl-C) may still point into them, and numpy arrays made
        # on a mapping do not keep it from being unmapped. Each goes when the
        # last array on it does, or with the process.
        self._close_fds()
        self._views = []
        self._maps = []


class SymmetricArray(FakeCUDAArray):
    """A simulator device array on the symmetric heap; exported through DLPack
    as host memory (the simulator's "device" is the CPU). Every use checks that
    the heap is still there; slices and views are symmetric arrays too."""

    def __init__(self, ary, lifetime, stream=0):
        self.__dict__["_lifetime"] = lifetime
        super().__init__(ary, stream)

    @property
    def _ary(self):
        self.__dict__["_lifetime"].check()
        return self.__dict__["_array"]

    @_ary.setter
    def _ary(self, value):
        self.__dict__["_array"] = value

    def _same_heap(self, result):
        if type(result) is FakeCUDAArray:
            return SymmetricArray(result.__dict__["_ary"], self.__dict__["_lifetime"],
                                  result.stream)
        return result

    def __getitem__(self, idx):
        return self._same_heap(super().__getitem__(idx))

    def bind(self, stream=0):
        return self._same_heap(super().bind(stream))

    def reshape(self, *args, **kwargs):
        return self._same_heap(super().reshape(*args, **kwargs))

    def ravel(self, *args, **kwargs):
        return self._same_heap(super().ravel(*args, **kwargs))

    def view(self, *args, **kwargs):
        return self._same_heap(super().view(*args, **kwargs))

    def transpose(self, axes=None):
        return self._same_heap(super().transpose(axes))

    def __dlpack_device__(self):
        return (_dlpack.DEVICE_CPU, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        device = self.__dlpack_device__()
        _dlpack.check_request(copy, dl_device, device)
        ary = self._ary
        return _dlpack.capsule(self, ary.ctypes.data, ary.shape, ary.strides, ary.dtype, device,
                               max_version)
