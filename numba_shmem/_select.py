"""Pick numba's CUDA target or its simulator before ``numba.cuda`` is imported.

numba decides once, at its import, from ``NUMBA_ENABLE_CUDASIM``. This module
runs first inside ``import numba_shmem``: where the job asked for the simulator
(``NUMBA_SHMEM_BACKEND=sim``), or asked for ``auto`` on a machine with no CUDA
driver, it sets that variable. ``init()`` checks that the two agree.
"""

import ctypes
import os
import sys


def cuda_driver_present():
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


def prepare_numba(environ=os.environ):
    if "numba.cuda" in sys.modules or "NUMBA_ENABLE_CUDASIM" in environ:
        return
    backend = environ.get("NUMBA_SHMEM_BACKEND", "auto").strip().lower()
    if backend == "sim" or (backend == "auto" and not cuda_driver_present()):
        environ["NUMBA_ENABLE_CUDASIM"] = "1"


def numba_is_simulator():
    from numba.cuda import config

    return bool(config.ENABLE_CUDASIM)
