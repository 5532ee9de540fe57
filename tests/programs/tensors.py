"""PyTorch tensors and CuPy arrays on the symmetric heap, with 2 or more PEs:
``tensors.py torch`` or ``tensors.py cupy``. Each PE fills its array with its
PE number, reads its right neighbour's through the peer view, writes into the
left neighbour's, moves the bytes of a bfloat16 tensor with a kernel's
put_block (as int16), frees, and checks that a library array not on the heap
is refused as ``dest``. Prints ``PE n: <what> ok`` lines and ``EXPECTED
<message>`` for each refusal."""

import sys

import numpy as np
from numba import cuda

import numba_shmem as shmem


def say(*parts):
    """One line in one write (print writes the line and its end apart: the
    PEs' lines would interleave where stdout is unbuffered)."""
    sys.stdout.write(" ".join(map(str, parts)) + "\n")
    sys.stdout.flush()


@cuda.jit
def put_right(dest, source, pe):
    shmem.put_block(dest, source, pe)


def torch_case(me, npes):
    import torch

    right, left = (me + 1) % npes, (me - 1) % npes
    dtypes = [torch.bfloat16, torch.float16, torch.float32, torch.float64, torch.int8,
              torch.uint8, torch.int16, torch.int32, torch.int64, torch.bool, torch.complex64]
    dtypes += [getattr(torch, name) for name in ("float8_e4m3fn", "float8_e5m2")
               if hasattr(torch, name)]
    for dtype in dtypes:
        t = shmem.tensor((3, 5), dtype)
        assert t.dtype == dtype and t.shape == (3, 5) and t.is_contiguous(), (dtype, t.shape)
        t.copy_(torch.full((3, 5), me % 2 if dtype == torch.bool else me).to(dtype))
        torch.cuda.synchronize() if t.is_cuda else None
        shmem.barrier_all()
        theirs = shmem.peer_tensor(t, right)
        expected = torch.full((3, 5), right % 2 if dtype == torch.bool else right).to(dtype)
        assert theirs.dtype == dtype and torch.equal(theirs.cpu().view(torch.uint8),
                                                     expected.view(torch.uint8)), dtype
        # a strided view of it: the same view of the peer's copy
        column = shmem.peer_tensor(t[:, 1], right)
        # (a byte view of a strided column needs a contiguous copy first)
        assert column.stride() == (5,) and torch.equal(
            column.cpu().contiguous().view(torch.uint8),
            expected[:, 1].contiguous().view(torch.uint8)), dtype
        shmem.barrier_all()
        shmem.free(t)
    say(f"PE {me}: torch dtypes ok")

    # writes into a neighbour's copy, seen there after a barrier
    t = shmem.tensor(64, torch.float32)
    t.zero_()
    shmem.barrier_all()
    shmem.peer_tensor(t, left)[me % 64] = me + 1
    torch.cuda.synchronize() if t.is_cuda else None
    shmem.barrier_all()
    assert t[right % 64].item() == right + 1, t
    shmem.free(t)
    say(f"PE {me}: torch peer writes ok")

    # a kernel moves a bfloat16 tensor's bytes, seen as int16
    if t.is_cuda:
        dest = shmem.tensor(1000, torch.bfloat16)
        source = torch.arange(1000, device=dest.device).to(torch.bfloat16) + me
        shmem.barrier_all()
        put_right[1, 256](cuda.as_cuda_array(dest.view(torch.int16)),
                          cuda.as_cuda_array(source.view(torch.int16)), right)
        cuda.synchronize()
        shmem.barrier_all()
        expected = torch.arange(1000, device=dest.device).to(torch.bfloat16) + left
        assert torch.equal(dest, expected), dest
        shmem.free(dest)
        say(f"PE {me}: torch bfloat16 through a kernel ok")

    # a tensor that is not on the heap, as dest
    plain = torch.zeros(8, device="cuda" if t.is_cuda else "cpu")
    for call in (lambda: shmem.put(plain, np.zeros(8, np.float32), right),
                 lambda: shmem.peer_tensor(plain, right),
                 lambda: shmem.free(plain)):
        try:
            call()
        except shmem.ShmemUsageError as exc:
            say("EXPECTED", exc)
    for bad in (lambda: shmem.tensor(4, np.float32), lambda: shmem.tensor((2, -1))):
        try:
            bad()
        except shmem.ShmemUsageError as exc:
            say("EXPECTED", exc)


def cupy_case(me, npes):
    import cupy

    right, left = (me + 1) % npes, (me - 1) % npes
    for dtype in (np.float16, np.float32, np.float64, np.int8, np.uint16, np.int64,
                  np.complex128):
        a = shmem.cupy_array((4, 6), dtype)
        assert isinstance(a, cupy.ndarray) and a.dtype == dtype and a.shape == (4, 6)
        a[...] = me
        cupy.cuda.get_current_stream().synchronize()
        shmem.barrier_all()
        theirs = shmem.peer_cupy_array(a, right)
        assert (theirs.get() == right).all(), (dtype, theirs)
        assert (shmem.peer_cupy_array(a[1:, ::2], right).get() == right).all(), dtype
        shmem.barrier_all()
        shmem.free(a)
    a = shmem.cupy_array(16, np.int32)
    a[...] = 0
    cupy.cuda.get_current_stream().synchronize()
    shmem.barrier_all()
    shmem.peer_cupy_array(a, left)[me % 16] = me + 1
    cupy.cuda.get_current_stream().synchronize()
    shmem.barrier_all()
    assert int(a[right % 16]) == right + 1, a
    shmem.free(a)
    say(f"PE {me}: cupy ok")
    plain = cupy.zeros(8, np.float32)
    for call in (lambda: shmem.put(plain, np.zeros(8, np.float32), right),
                 lambda: shmem.peer_cupy_array(plain, right)):
        try:
            call()
        except shmem.ShmemUsageError as exc:
            say("EXPECTED", exc)


def main():
    shmem.init()
    me, npes = shmem.my_pe(), shmem.n_pes()
    {"torch": torch_case, "cupy": cupy_case}[sys.argv[1]](me, npes)
    shmem.finalize()


if __name__ == "__main__":
    main()
