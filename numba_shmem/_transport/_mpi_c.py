"""MPI's C functions, for compiled code: the proxy's engine calls them without
the interpreter (``_engine.py``).

mpi4py loads the MPI library; this module finds it among the process's
mappings, declares the few functions the engine needs as ctypes function
types (numba calls those from ``@njit`` code), and takes the handles it passes
as integers from mpi4py (``MPI._handleof``). Handle types differ between MPI
libraries (Open MPI's are pointers, MPICH's are ints): their width comes from
``MPI._sizeof``. The one struct the engine reads, ``MPI_Status``, has its
source and tag at offsets that differ too: they are found once, by a message
to this process itself.
"""

import ctypes

import numpy as np

from .._errors import ShmemUsageError

#: the names a shared MPI library goes by
_LIBRARIES = ("libmpi.so", "libmpich.so", "libmpi_ibm.so", "libmpi_cray.so")


def _library_path():
    """The path of the MPI library mpi4py loaded into this process."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if path.rsplit("/", 1)[-1].startswith(_LIBRARIES):
                return path
    raise ShmemUsageError(
        "the proxy (PEs on other nodes) calls MPI from compiled code, but no MPI shared "
        "library is mapped in this process; install mpi4py built against a shared MPI "
        "(pip install 'numba-shmem[mpi]')")


def library_version():
    """The first line of the MPI library's version string (Open MPI's ends in
    a NUL, which it leaves out)."""
    from mpi4py import MPI

    return MPI.Get_library_version().strip("\x00").splitlines()[0].strip()


def gpu_memory(lib):
    """Whether the MPI library ``lib`` (a ctypes library) says it can address
    CUDA GPU memory: True, False, or None where it has no query of it; and
    the query asked."""
    try:  # (Open MPI's extension)
        return bool(lib.MPIX_Query_cuda_support()), "MPIX_Query_cuda_support()"
    except AttributeError:
        pass
    try:  # (MPICH's, from 4.0; MPIX_GPU_SUPPORT_CUDA is 0)
        query = lib.MPIX_GPU_query_support
    except AttributeError:
        return None, ""
    supported = ctypes.c_int(0)
    if query(0, ctypes.byref(supported)) != 0:
        return None, ""
    return bool(supported.value), "MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA)"


class MPIC:
    """The functions and handles of MPI's C API the engine uses, for the
    communicator ``comm`` (an mpi4py communicator)."""

    def __init__(self, comm):
        from mpi4py import MPI

        lib = ctypes.CDLL(_library_path())
        handle = ctypes.c_void_p if MPI._sizeof(MPI.Comm) == 8 else ctypes.c_int
        i, p = ctypes.c_int, ctypes.c_void_p
        self.handle_type = handle
        #: bytes of an MPI_Request and an MPI_Status
        self.request_bytes = MPI._sizeof(MPI.Request)
        self.status_bytes = MPI._sizeof(MPI.Status)

        def function(name, *argtypes):
            return ctypes.CFUNCTYPE(i, *argtypes)((name, lib))

        # (buf, count, datatype, peer, tag, comm, request/status)
        self.isend = function("MPI_Isend", p, i, handle, i, i, handle, p)
        self.recv = function("MPI_Recv", p, i, handle, i, i, handle, p)
        self.irecv = function("MPI_Irecv", p, i, handle, i, i, handle, p)
        # (origin buf, count, datatype, target rank, displacement, count,
        # datatype, window, request)
        self.rget = function("MPI_Rget", p, i, handle, i, ctypes.c_ssize_t, i, handle,
                             handle, p)
        self.win_sync = function("MPI_Win_sync", handle)  # (window)
        # (source, tag, comm, flag, status)
        self.iprobe = function("MPI_Iprobe", i, i, handle, p, p)
        self.test = function("MPI_Test", p, p, p)  # (request, flag, status)
        self.get_count = function("MPI_Get_count", p, handle, p)  # (status, datatype, count)
        self.comm = MPI._handleof(comm)
        self.byte = MPI._handleof(MPI.BYTE)
        self.any_source = MPI.ANY_SOURCE
        self.any_tag = MPI.ANY_TAG
        self.source_at, self.tag_at = self._status_layout(comm)
        #: whether this MPI says it can address GPU memory (``gpu_memory``)
        self.gpu_memory, self.gpu_query = gpu_memory(lib)

    def _status_layout(self, comm):
        """The int32 indexes of MPI_SOURCE and MPI_TAG in an MPI_Status: a
        message of a known tag to this process, probed."""
        rank, tag = comm.Get_rank(), 0x5A5A
        comm.Isend(np.zeros(1, np.uint8), rank, tag).Wait()
        status = np.zeros(max(self.status_bytes // 4, 8), np.int32)
        flag = np.zeros(1, np.int32)
        while not flag[0]:
            self.iprobe(rank, tag, self.comm, flag.ctypes.data, status.ctypes.data)
        comm.Recv(np.zeros(1, np.uint8), rank, tag)
        # MPI_SOURCE comes right before MPI_TAG in every MPI known (Open MPI's
        # status begins with them, MPICH's after the count)
        tags = [k for k in range(1, status.size) if status[k] == tag]
        if len(tags) != 1 or status[tags[0] - 1] != rank:
            raise ShmemUsageError(
                f"the proxy could not read this MPI's MPI_Status (words {status.tolist()}); "
                "report the MPI library in use")
        return tags[0] - 1, tags[0]
