"""The store of ``env://`` rendezvous and of the default process group, as a
directory (``TORCH_STAND_IN_STORE``): ``set`` writes a file, ``get`` waits for
it until the time-out, then raises as torch's store does (a RuntimeError)."""

import os
import time

from . import distributed_c10d

_initialized = []


class FileStore:
    def __init__(self, path, timeout):
        self._path, self._timeout = path, timeout

    def _file(self, key):
        return os.path.join(self._path, key.replace("/", "%"))

    def set(self, key, value):
        value = value.encode() if isinstance(value, str) else bytes(value)
        temporary = self._file(key) + ".tmp"
        with open(temporary, "wb") as f:
            f.write(value)
        os.rename(temporary, self._file(key))

    def get(self, key):
        deadline = time.monotonic() + self._timeout.total_seconds()
        while not os.path.exists(self._file(key)):
            if time.monotonic() > deadline:
                raise RuntimeError(f"Socket Timeout: wait timeout for key {key}")
            time.sleep(0.01)
        with open(self._file(key), "rb") as f:
            return f.read()


def is_available():
    return True


def is_initialized():
    return bool(_initialized)


def rendezvous(url, rank, world_size, timeout):
    assert url == "env://" and os.environ["MASTER_ADDR"] and os.environ["MASTER_PORT"]
    yield FileStore(os.environ["TORCH_STAND_IN_STORE"], timeout), rank, world_size


def init_process_group(backend, timeout=None):
    import datetime

    store = FileStore(os.environ["TORCH_STAND_IN_STORE"], timeout or datetime.timedelta(seconds=60))
    distributed_c10d._default_store = store
    _initialized.append(backend)
