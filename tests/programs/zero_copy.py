"""Symmetric arrays are zero-copy in CuPy, PyTorch and NumPy.

    zero_copy.py plain | cupy | torch | cupy-dlpack | torch-dlpack | numpy-dlpack

``numpy-dlpack`` is the simulator's case (its device memory is host memory).
"""

import gc
import sys

import numpy as np

import numba_shmem as shmem
from numba_shmem import _dlpack


def framework_view(mode, arr):
    """A view of ``arr`` in the framework, and its data address."""
    if mode == "cupy":
        import cupy
        view = cupy.asarray(arr)
        return view, view.data.ptr
    if mode == "cupy-dlpack":
        import cupy
        view = cupy.from_dlpack(arr)
        return view, view.data.ptr
    if mode in ("torch", "torch-dlpack"):
        import torch
        view = torch.as_tensor(arr, device="cuda") if mode == "torch" else torch.from_dlpack(arr)
        return view, view.data_ptr()
    view = np.from_dlpack(arr)
    return view, view.ctypes.data


def synchronize(mode):
    if mode.startswith("torch"):
        import torch
        torch.cuda.synchronize()
    elif mode.startswith("cupy"):
        import cupy
        cupy.cuda.Device().synchronize()


def main():
    mode = sys.argv[1]
    shmem.init()
    me = shmem.my_pe()
    if mode == "plain":
        sys.stdout.write(f"PE {me} of {shmem.n_pes()}\n")
        shmem.finalize()
        return
    arr = shmem.zeros((16, 64), np.float32)
    view, address = framework_view(mode, arr)
    expected = arr._ary.ctypes.data if mode == "numpy-dlpack" else \
        arr.__cuda_array_interface__["data"][0]
    assert address == expected, (hex(address), hex(expected))
    assert tuple(view.shape) == (16, 64)
    view += me + 1
    synchronize(mode)
    # the library sees what the framework wrote, and so does the left neighbour
    assert (arr.copy_to_host() == me + 1).all()
    shmem.barrier_all()
    left = (me - 1) % shmem.n_pes()
    assert (shmem.peer_array(arr, left).copy_to_host() == left + 1).all()
    del view
    gc.collect()
    assert not _dlpack._alive, "a DLPack export outlived its consumer"
    shmem.free(arr)
    shmem.finalize()
    sys.stdout.write(f"PE {me}: zero-copy ok\n")


if __name__ == "__main__":
    main()
