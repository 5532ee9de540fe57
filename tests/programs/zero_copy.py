"""Symmetric arrays are zero-copy in CuPy and PyTorch.

    zero_copy.py plain|cupy|torch
"""

import sys

import numpy as np

import numba_shmem as shmem


def main():
    mode = sys.argv[1]
    shmem.init()
    me = shmem.my_pe()
    if mode == "plain":
        sys.stdout.write(f"PE {me} of {shmem.n_pes()}\n")
        shmem.finalize()
        return
    arr = shmem.zeros(1024, np.float32)
    address = arr.__cuda_array_interface__["data"][0]
    if mode == "cupy":
        import cupy

        view = cupy.asarray(arr)
        assert view.data.ptr == address
        view += me + 1
    else:
        import torch

        view = torch.as_tensor(arr, device="cuda")
        assert view.data_ptr() == address
        view += me + 1
        torch.cuda.synchronize()
    # the library sees what the framework wrote, and so does the right neighbour
    assert (arr.copy_to_host() == me + 1).all()
    shmem.barrier_all()
    left = (me - 1) % shmem.n_pes()
    assert (shmem.peer_array(arr, left).copy_to_host() == left + 1).all()
    shmem.free(arr)
    shmem.finalize()
    sys.stdout.write(f"PE {me}: zero-copy ok\n")


if __name__ == "__main__":
    main()
