"""Host-initiated put and get on a stream, and barrier_all_on_stream."""

import pytest

from conftest import BACKEND, shmem_run
from numba_shmem import ShmemUsageError
from numba_shmem._stream._handles import as_stream, handle_of


def test_host_put_get_and_stream_barrier():
    result = shmem_run(2, "host_rma.py")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = sorted(result.stdout.splitlines())
    assert lines[:2] == ["EXPECTED ShmemUsageError: shmem.put: the source's 40 elements do not "
                         "fit in the 32 of dest; pass a smaller source or a larger dest"] * 2
    assert lines[2:] == ["PE 0: host put/get ok", "PE 1: host put/get ok"]


class _Stream:
    def __init__(self, **attributes):
        self.__dict__.update(attributes)


@pytest.mark.parametrize("stream,handle", [
    (7, 7), (0, 0),
    (_Stream(ptr=12), 12),                                # CuPy
    (_Stream(cuda_stream=13), 13),                        # PyTorch
    (_Stream(__cuda_stream__=lambda: (0, 14)), 14),       # cuda.core
    (True, None), ("fast", None), (_Stream(ptr="x"), None), (_Stream(), None),
    (_Stream(__cuda_stream__=lambda: 14), None),
])
def test_the_handle_of_each_kind_of_stream(stream, handle):
    assert handle_of(stream) == handle


@pytest.mark.parametrize("stream", ["fast", -1, True, _Stream()])
def test_what_is_not_a_stream_is_refused_by_name(stream):
    with pytest.raises(ShmemUsageError) as error:
        as_stream(stream, "fcollect", "cuda")
    assert str(error.value) == (
        f"shmem.fcollect: stream={stream!r} is not a CUDA stream; pass a numba stream, a "
        "CUstream handle (an int, 0 for the default stream), or a CuPy, PyTorch or cuda.core "
        "stream")


def test_streams_from_every_library():
    """put, barrier_all_on_stream, fcollect and collective_launch on each kind of
    stream (on the simulator: stand-ins with the attributes CuPy, PyTorch and
    cuda.core streams have; on the GPU: those libraries' streams where installed)."""
    result = shmem_run(2, "foreign_streams.py", timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    expected = [line for line in lines if line.startswith("EXPECTED ShmemUsageError")]
    assert len(expected) == 2 and "stream='fast' is not a CUDA stream" in expected[0]
    # on the GPU, a made-up CUstream handle is refused, never a crash (before: SIGSEGV)
    made_up = [line for line in lines if line.startswith("EXPECTED made-up handle")]
    assert len(made_up) == (4 if BACKEND == "cuda" else 0), lines
    assert all("is not a CUDA stream of this PE: it does not point to memory of this process"
               in line for line in made_up), made_up
    kinds = [line for line in lines if not line.startswith("EXPECTED")]
    assert all(line.endswith(" ok") for line in kinds), lines
    per_pe = [sorted(line.split(": ", 1)[1] for line in kinds if line.startswith(f"PE {pe}:"))
              for pe in (0, 1)]
    assert per_pe[0] == per_pe[1] and "int handle ok" in per_pe[0], lines
    if BACKEND == "sim":
        assert len(per_pe[0]) == 4
