"""The simulator's symmetric heap: one POSIX shared-memory segment per PE,
mapped by every PE of the node.

Each segment is unlinked as soon as every peer has mapped it, so a crashed job
leaves nothing in ``/dev/shm``.
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
from .._resources import UndoStack

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
        bootstrap.barrier("simulator heap creation")
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

    def ensure_mapped(self, nbytes):
        """The whole segment is mapped from the start (tmpfs keeps it sparse)."""

    def view(self, pe, offset, shape, dtype, strides=None):
        buffer = self._maps[self._peers.index(pe)]
        return SymmetricArray(np.ndarray(shape, dtype, buffer=buffer, offset=offset,
                                         strides=strides))

    def address(self, arr):
        return int(host_array(arr).ctypes.data)

    def fill_zero(self, offset, nbytes):
        self._views[self._own][offset:offset + nbytes] = 0

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
        self._close_fds()
        self._views = []
        for m in self._maps:
            try:
                m.close()
            except BufferError:
                # A user array still views it; the mapping goes when that array does.
                pass
        self._maps = []


class SymmetricArray(FakeCUDAArray):
    """A simulator device array on the symmetric heap; exported through DLPack
    as host memory (the simulator's "device" is the CPU)."""

    def __dlpack_device__(self):
        return (_dlpack.DEVICE_CPU, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        device = self.__dlpack_device__()
        _dlpack.check_request(copy, dl_device, device)
        ary = self._ary
        return _dlpack.capsule(self, ary.ctypes.data, ary.shape, ary.strides, ary.dtype, device,
                               max_version)
