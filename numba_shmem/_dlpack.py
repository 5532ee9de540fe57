"""DLPack export for symmetric arrays (``__dlpack__``/``__dlpack_device__``).

Pure ctypes: a managed tensor that keeps the array alive until the consumer
calls its deleter, in a ``"dltensor_versioned"`` capsule (DLPack 1.0, writable)
for consumers that ask for it, else a legacy ``"dltensor"`` one.
"""

import ctypes

import numpy as np

from ._errors import ShmemUsageError

DEVICE_CPU = 1
DEVICE_CUDA = 2

# numpy kind -> DLDataTypeCode
_CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32),
                ("dtype", _DataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _ManagedTensor(ctypes.Structure):
    pass


class _ManagedTensorVersioned(ctypes.Structure):
    pass


_Deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_ManagedTensor._fields_ = [("dl_tensor", _Tensor), ("manager_ctx", ctypes.c_void_p),
                           ("deleter", _Deleter)]
_ManagedTensorVersioned._fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                                    ("manager_ctx", ctypes.c_void_p), ("deleter", _Deleter),
                                    ("flags", ctypes.c_uint64), ("dl_tensor", _Tensor)]

_alive = {}  # address of a managed tensor -> what it keeps alive


@_Deleter
def _delete(address):
    _alive.pop(address, None)


_CapsuleDestructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_pythonapi = ctypes.pythonapi
_pythonapi.PyCapsule_New.restype = ctypes.py_object
_pythonapi.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _CapsuleDestructor]
_pythonapi.PyCapsule_IsValid.restype = ctypes.c_int
_pythonapi.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_pythonapi.PyCapsule_GetPointer.restype = ctypes.c_void_p
_pythonapi.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]


@_CapsuleDestructor
def _capsule_gone(capsule):
    # A consumer renames the capsule when it takes the tensor; one that was
    # never consumed still owns it and must release it itself.
    for name in (b"dltensor", b"dltensor_versioned"):
        if _pythonapi.PyCapsule_IsValid(capsule, name):
            _alive.pop(_pythonapi.PyCapsule_GetPointer(capsule, name), None)


def capsule(owner, address, shape, strides, dtype, device, max_version=None):
    """A DLPack capsule over ``address`` that keeps ``owner`` alive; versioned
    (1.0) where the consumer's ``max_version`` allows it."""
    dtype = np.dtype(dtype)
    if dtype.kind not in _CODES:
        raise ShmemUsageError(f"DLPack cannot describe dtype {dtype}")
    if any(stride % dtype.itemsize for stride in strides):
        raise ShmemUsageError(
            f"DLPack strides count elements; byte strides {tuple(strides)} are not "
            f"multiples of the item size {dtype.itemsize}")
    ndim = len(shape)
    versioned = max_version is not None and tuple(max_version) >= (1, 0)
    managed = _ManagedTensorVersioned() if versioned else _ManagedTensor()
    if versioned:
        managed.major, managed.minor, managed.flags = 1, 0, 0  # writable, not a copy
    shape_buf = (ctypes.c_int64 * max(ndim, 1))(*shape)
    strides_buf = (ctypes.c_int64 * max(ndim, 1))(*(s // dtype.itemsize for s in strides))
    tensor = managed.dl_tensor
    tensor.data = address
    tensor.device = _Device(*device)
    tensor.ndim = ndim
    tensor.dtype = _DataType(_CODES[dtype.kind], dtype.itemsize * 8, 1)
    tensor.shape = shape_buf
    tensor.strides = strides_buf
    tensor.byte_offset = 0
    managed.deleter = _delete
    key = ctypes.addressof(managed)
    _alive[key] = (managed, shape_buf, strides_buf, owner)
    name = b"dltensor_versioned" if versioned else b"dltensor"
    return _pythonapi.PyCapsule_New(key, name, _capsule_gone)


def check_request(copy, dl_device, device):
    """Refuse what a symmetric array cannot give: a copy, or another device."""
    if copy:
        raise BufferError("a symmetric array is exported without copying; copy it yourself")
    if dl_device is not None and tuple(dl_device) != tuple(device):
        raise BufferError(f"a symmetric array lives on DLPack device {device}, not {dl_device}")
