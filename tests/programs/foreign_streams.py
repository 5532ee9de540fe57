"""Host calls on streams of every kind: a CUstream handle as an int, and CuPy,
PyTorch and cuda.core streams where those libraries are installed (on the
simulator, stand-ins with their attributes). Each kind: a put to the right
neighbour, barrier_all_on_stream, an fcollect and a collective_launch, all on
that stream, then the data is checked. Prints ``PE n: <kind> ok`` per kind and
one ``EXPECTED`` line for a stream that is not one."""

import sys

import numba_shmem as shmem  # first: on a machine without a GPU it picks the simulator
import numpy as np
from numba import cuda


class _Attribute:
    """A stand-in for another library's stream on the simulator."""

    def __init__(self, **attributes):
        self.__dict__.update(attributes)


def stream_kinds(backend):
    if backend == "sim":
        yield "int handle", 0
        yield "CuPy-like (ptr)", _Attribute(ptr=0)
        yield "PyTorch-like (cuda_stream)", _Attribute(cuda_stream=0)
        yield "cuda.core-like (__cuda_stream__)", _Attribute(__cuda_stream__=lambda: (0, 0))
        return
    own = cuda.stream()
    yield "int handle", int(getattr(own.handle, "value", own.handle))
    try:
        import cupy
        yield "CuPy", cupy.cuda.Stream(non_blocking=True)
    except ImportError:
        pass
    try:
        import torch
        if torch.cuda.is_available():
            yield "PyTorch", torch.cuda.Stream()
    except ImportError:
        pass
    try:
        try:
            from cuda.core import Device
        except ImportError:
            from cuda.core.experimental import Device
        device = Device(cuda.get_current_device().id)
        device.set_current()
        yield "cuda.core", device.create_stream()
    except ImportError:
        pass


@cuda.jit
def add_one(arr):
    i = cuda.grid(1)
    if i < arr.size:
        arr[i] += 1


def main():
    shmem.init()
    me, n = shmem.my_pe(), shmem.n_pes()
    right, left = (me + 1) % n, (me - 1) % n
    backend = shmem._runtime.current().backend
    data = shmem.zeros(64, np.int64)
    gathered = shmem.zeros(64 * n, np.int64)
    for round_, (kind, stream) in enumerate(stream_kinds(backend)):
        values = np.arange(64, dtype=np.int64) + 1000 * me + 100000 * round_
        shmem.put(data, values, right, stream=stream)
        shmem.barrier_all_on_stream(stream)
        shmem.fcollect(shmem.TEAM_WORLD, gathered, data, 64, stream=stream)
        shmem.collective_launch(add_one, 1, 64, data, stream=stream)
        cuda.synchronize()
        shmem.barrier_all()
        got = data.copy_to_host()
        want = np.arange(64) + 1000 * left + 100000 * round_ + 1
        everyone = gathered.copy_to_host().reshape(n, 64)
        sent = np.stack([np.arange(64) + 1000 * ((pe - 1) % n) + 100000 * round_
                         for pe in range(n)])
        ok = (got == want).all() and (everyone == sent).all()
        sys.stdout.write(f"PE {me}: {kind} {'ok' if ok else 'WRONG'}\n")
        sys.stdout.flush()
        shmem.barrier_all()
    try:
        shmem.put(data, np.zeros(64, np.int64), right, stream="fast")
    except shmem.ShmemUsageError as error:
        sys.stdout.write(f"EXPECTED ShmemUsageError: {error}\n")
    if backend == "cuda":
        # a made-up handle: an address nothing is mapped at (before: SIGSEGV in
        # the driver). (One that points to memory of this process that is not
        # a stream reaches the driver, which reads it as one: on the H200 that
        # failed with CUDA_ERROR_INVALID_HANDLE, and once ended the process.)
        for handle in (0x1234567,):
            for call in (lambda: shmem.put(data, np.zeros(64, np.int64), right, stream=handle),
                         lambda: shmem.collective_launch(add_one, 1, 64, data, stream=handle)):
                try:
                    call()
                    sys.stdout.write(f"PE {me}: stream={handle:#x} WRONG: accepted\n")
                except shmem.ShmemUsageError as error:
                    sys.stdout.write(f"EXPECTED made-up handle: {error}\n")
    shmem.finalize()


if __name__ == "__main__":
    main()
