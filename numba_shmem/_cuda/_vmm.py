"""The symmetric heap on the GPU, from CUDA virtual memory management.

Each PE reserves one address range holding a slot of ``heap_size`` bytes for
every PE on its node. Physical memory is created in chunks as allocations need
it (growth is collective): every PE creates a chunk on its own GPU, exports it
as a POSIX file descriptor, the descriptors are exchanged, and every PE maps
every peer's chunk at the same offset of that peer's slot, with access for its
own device. Each step registers its undo, so a failure part way and
``finalize()`` both leave no mapping, handle or descriptor behind.
"""

import ctypes
import json
import os
import time

import numpy as np
from numba import cuda
from numba.cuda.cudadrv import devicearray
from numba.cuda.cudadrv import driver as numba_driver

from .. import _dlpack
from .._errors import ShmemDriverError, ShmemUsageError
from .._resources import Lifetime, UndoStack
from ._driver import call, cu, device_location

_FD = cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR


def _round_up(value, align):
    return -(-value // align) * align


class CudaHeap:
    """Collective. Reserve the address space for every local peer's heap."""

    kind = "cuda"

    def __init__(self, bootstrap, config, device_id):
        self._bootstrap = bootstrap
        self._device_id = device_id
        self._chunk = config.heap_chunk
        self._undo = UndoStack()
        self._context = cuda.current_context()
        self._prop = cu.CUmemAllocationProp()
        self._prop.type = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        self._prop.location = device_location(device_id)
        self._prop.requestedHandleTypes = _FD
        self.granularity = int(call(
            "cuMemGetAllocationGranularity", self._prop,
            cu.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        self.capacity = _round_up(config.heap_size, self.granularity)
        self._peers = bootstrap.local_peers
        span = self.capacity * len(self._peers)
        try:
            region = call("cuMemAddressReserve", span, self.granularity, 0, 0,
                          hint=f"could not reserve {span} bytes of address space; "
                               "lower NUMBA_SHMEM_HEAP_SIZE")
            self._undo.push(call, "cuMemAddressFree", region, span)
            # what set_word_on_peers copies from, made now: at exit a busy GPU
            # must not hold the host up (freeing pinned memory waits for it)
            self._word = int(call("cuMemHostAlloc", 8, 0))
            self._undo.push(call, "cuMemFreeHost", self._word)
            self._word_stream = call("cuStreamCreate",
                                     cu.CUstream_flags.CU_STREAM_NON_BLOCKING)
            self._undo.push(call, "cuStreamDestroy", self._word_stream)
        except BaseException:
            self._undo.unwind()
            raise
        self.bases = {pe: int(region) + i * self.capacity for i, pe in enumerate(self._peers)}
        self.base = self.bases[bootstrap.rank]
        self.mapped = 0
        #: bytes from the heap's start that requests from other nodes may reach
        #: (``extent``), in an array the proxy's compiled loop reads
        self.extent_word = np.zeros(1, np.int64)
        self.lifetime = Lifetime()

    @property
    def extent(self):
        """``mapped``, and during a growth step what this PE has mapped for it
        (a peer may return from the step, and send, before this PE does)."""
        return int(self.extent_word[0])

    @extent.setter
    def extent(self, nbytes):
        self.extent_word[0] = nbytes

    def ensure_mapped(self, nbytes):
        """Collective. Map physical memory so that offsets below ``nbytes`` are
        backed on every local PE. The PEs agree on the outcome: if any PE
        fails any step, every PE undoes the step and raises, naming that PE."""
        if nbytes <= self.mapped:
            return
        size = _round_up(max(nbytes - self.mapped, self._chunk), self.granularity)
        size = min(size, self.capacity - self.mapped)
        mark = self._undo.depth
        try:
            error = self._grow(size)
            if error is None:
                self.extent = self.mapped + size
            report = json.dumps([error.call, error.result, str(error)] if error else None)
            reports = [json.loads(r) for r in self._bootstrap.allgather(
                report.encode(), "symmetric heap growth")]
        except BaseException:
            self.extent = self.mapped
            self._undo.unwind(to=mark)
            raise
        failed = [(pe, r) for pe, r in enumerate(reports) if r is not None]
        if failed:
            self.extent = self.mapped
            self._undo.unwind(to=mark)  # what was mapped before stays usable
            if error is not None:
                raise error
            pe, (call_name, result, message) = failed[0]
            raise ShmemDriverError(call_name, result,
                                   f"PE {pe} could not grow the symmetric heap: {message}")
        self.mapped += size

    def _grow(self, size):
        """This PE's part of one growth step: create a chunk, swap descriptors
        with the local peers, map every peer's chunk. Returns the first
        ShmemDriverError (None if all went well); the exchange happens whatever
        failed before it, so no peer waits for a PE that gave up."""
        error = fd = None
        try:
            handle = call("cuMemCreate", size, self._prop, 0,
                          hint=f"could not create {size} bytes of GPU memory for the heap")
            self._undo.push(call, "cuMemRelease", handle)
            fd = int(call("cuMemExportToShareableHandle", handle, _FD, 0))
        except ShmemDriverError as exc:
            error = exc
        try:
            peer_fds = self._bootstrap.exchange_fds([] if fd is None else [fd],
                                                    "symmetric heap growth")
        finally:
            if fd is not None:
                os.close(fd)
        me = self._peers.index(self._bootstrap.rank)
        received = [fd for index, fds in enumerate(peer_fds) if index != me for fd in fds]
        try:
            if error is None and all(len(fds) == 1 for fds in peer_fds):
                self._map_chunks(handle, peer_fds, size)
        except ShmemDriverError as exc:
            error = exc
        finally:
            for peer_fd in received:
                os.close(peer_fd)
        return error

    def _map_chunks(self, handle, peer_fds, size):
        access = cu.CUmemAccessDesc()
        access.location = device_location(self._device_id)
        access.flags = cu.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
        for index, pe in enumerate(self._peers):
            if pe == self._bootstrap.rank:
                peer_handle = handle
            else:
                peer_handle = call("cuMemImportFromShareableHandle", peer_fds[index][0], _FD)
                self._undo.push(call, "cuMemRelease", peer_handle)
            address = self.bases[pe] + self.mapped
            call("cuMemMap", address, size, 0, peer_handle, 0)
            self._undo.push(call, "cuMemUnmap", address, size)
            call("cuMemSetAccess", address, size, [access], 1,
                 hint=f"PE {self._bootstrap.rank} cannot access PE {pe}'s GPU memory")

    def view(self, pe, offset, shape, dtype, strides=None):
        address = self.bases[pe] + offset
        if strides is None:
            strides = _c_strides(shape, dtype.itemsize)
        nbytes = numba_driver.memory_size_from_info(shape, strides, dtype.itemsize)
        pointer = HeapPointer(self._context, address, nbytes, self.lifetime)
        return SymmetricArray(shape, strides, dtype, gpu_data=pointer)

    def address(self, arr):
        if callable(getattr(type(arr), "data_ptr", None)):  # a torch tensor, of any dtype
            return int(arr.data_ptr())
        interface = getattr(arr, "__cuda_array_interface__", None)
        if interface is None:
            raise ShmemUsageError(
                f"expected an array from shmem.array(), got {type(arr).__name__}")
        return int(interface["data"][0])

    def fill_zero(self, offset, nbytes):
        call("cuMemsetD8", self.base + offset, 0, nbytes)
        call("cuCtxSynchronize")

    def set_word_on_peers(self, offset, value, timeout=1.0):
        """Store the uint64 ``value`` at ``offset`` of every local PE's heap,
        with the copy engine on a stream of its own (so beside a kernel that
        still runs), waiting at most ``timeout`` seconds. Best effort: a
        context that has failed (a kernel trapped) takes no copies."""
        ctypes.c_uint64.from_address(self._word).value = value
        try:
            for pe in self._peers:
                call("cuMemcpyHtoDAsync", self.bases[pe] + offset, self._word, 8,
                     self._word_stream)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                (result,) = cu.cuStreamQuery(self._word_stream)
                if result != cu.CUresult.CUDA_ERROR_NOT_READY:
                    return
                time.sleep(0.001)
        except ShmemDriverError:
            pass

    def close(self):
        """Release every mapping, handle and reservation; the GPU must be idle."""
        self._undo.unwind()


def _c_strides(shape, itemsize):
    strides, step = [], itemsize
    for extent in reversed(shape):
        strides.append(step)
        step *= extent
    return tuple(reversed(strides))


class HeapPointer(numba_driver.MemoryPointer):
    """A pointer into the symmetric heap, and every view of it: each use
    checks that the heap is still there (numba reads an array's address
    through ``device_ctypes_pointer`` to launch, copy or export it)."""

    def __init__(self, context, address, size, lifetime):
        super().__init__(context, cu.CUdeviceptr(address), size)
        self._lifetime = lifetime

    @property
    def device_ctypes_pointer(self):
        self._lifetime.check()
        return numba_driver.MemoryPointer.device_ctypes_pointer.fget(self)

    def view(self, start, stop=None):
        self._lifetime.check()
        size = (self.size if stop is None else stop) - start
        if size < 0:
            raise RuntimeError("size cannot be negative")
        return HeapPointer(self.context, int(self.device_pointer) + start, size, self._lifetime)


class SymmetricArray(devicearray.DeviceNDArray):
    """A numba device array on the symmetric heap; also exported through DLPack."""

    def __dlpack_device__(self):
        return (_dlpack.DEVICE_CUDA, self.gpu_data.context.device.id)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        device = self.__dlpack_device__()
        _dlpack.check_request(copy, dl_device, device)
        if stream != -1:
            # kernels of any stream may have written it: complete them first
            self.gpu_data.context.synchronize()
        address = self.device_ctypes_pointer.value or 0
        return _dlpack.capsule(self, address, self.shape, self.strides, self.dtype, device,
                               max_version)
