"""The DLPack exporter on host memory, against numpy as the consumer."""

import gc

import numpy as np
import pytest

from numba_shmem import ShmemUsageError, _dlpack


class Exporter:
    """Exports a numpy array through numba-shmem's DLPack code."""

    def __init__(self, ary):
        self.ary = ary

    def __dlpack_device__(self):
        return (_dlpack.DEVICE_CPU, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        _dlpack.check_request(copy, dl_device, self.__dlpack_device__())
        a = self.ary
        return _dlpack.capsule(self, a.ctypes.data, a.shape, a.strides, a.dtype,
                               self.__dlpack_device__(), max_version)


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int32, np.int64, np.float32,
                                   np.float64, np.complex64, np.bool_])
def test_round_trip_shares_memory(dtype):
    source = np.arange(24).reshape(4, 6).astype(dtype)
    view = np.from_dlpack(Exporter(source))
    assert view.dtype == source.dtype and view.shape == source.shape
    assert np.shares_memory(view, source) and (view == source).all()


def test_strided_views_keep_their_strides():
    source = np.arange(60, dtype=np.float64).reshape(6, 10)[::2, 1::3]
    view = np.from_dlpack(Exporter(source))
    assert view.strides == source.strides and (view == source).all()


class LegacyExporter(Exporter):
    def __dlpack__(self, **kwargs):
        return super().__dlpack__(**{**kwargs, "max_version": None})


def test_versioned_export_is_writable_and_legacy_is_read_only():
    source = np.zeros(4, np.int32)
    versioned = np.from_dlpack(Exporter(source))
    versioned[1] = 7
    assert source[1] == 7
    legacy = np.from_dlpack(LegacyExporter(source))
    assert np.shares_memory(legacy, source) and not legacy.flags.writeable


def test_exports_are_released():
    gc.collect()
    assert not _dlpack._alive
    views = [np.from_dlpack(Exporter(np.ones(3))) for _ in range(3)]
    unused = Exporter(np.ones(3)).__dlpack__(max_version=(1, 0))
    assert len(_dlpack._alive) == 4
    del views, unused
    gc.collect()
    assert not _dlpack._alive


def test_dtype_dlpack_cannot_describe():
    with pytest.raises(ShmemUsageError, match="DLPack cannot describe dtype datetime64"):
        Exporter(np.zeros(2, "datetime64[s]")).__dlpack__()


def test_strides_that_are_not_whole_elements():
    record = np.zeros(4, dtype=[("a", np.int32), ("b", np.int8)])
    with pytest.raises(ShmemUsageError, match=r"byte strides \(5,\) are not multiples of the "
                                              r"item size 4"):
        Exporter(record["a"]).__dlpack__()


def test_copy_and_other_devices_are_refused():
    exporter = Exporter(np.zeros(2))
    with pytest.raises(BufferError, match="exported without copying"):
        exporter.__dlpack__(copy=True)
    with pytest.raises(BufferError, match=r"lives on DLPack device \(1, 0\), not \(2, 0\)"):
        exporter.__dlpack__(dl_device=(2, 0))
