"""numba-shmem: OpenSHMEM-style one-sided communication for numba-cuda kernels.

``import numba_shmem as shmem``, launch with ``shmem-run -n 4 script.py``.
"""

from . import _select

_select.prepare_numba()

from ._arrays import (  # noqa: E402
    array, cupy_array, free, peer_array, peer_cupy_array, peer_tensor, tensor, zeros,
)
from ._config import Config  # noqa: E402
from . import _device_api  # noqa: E402
from ._device_api import (  # noqa: E402
    CMP_EQ, CMP_GE, CMP_GT, CMP_LE, CMP_LT, CMP_NE, FUNCTIONS as _DEVICE_FUNCTIONS,
    SIGNAL_ADD, SIGNAL_SET,
)
from ._errors import (  # noqa: E402
    ShmemBootstrapError,
    ShmemConfigError,
    ShmemDriverError,
    ShmemError,
    ShmemPerformanceWarning,
    ShmemTimeoutError,
    ShmemUsageError,
)
from ._barriers import barrier, barrier_all, sync, sync_all  # noqa: E402
from ._launch import collective_launch  # noqa: E402
from ._current import my_pe, n_pes  # noqa: E402
from ._runtime import config, finalize, get_unique_id, init  # noqa: E402
from ._stream import HOST_FORMS as _HOST_FORMS  # noqa: E402
from ._stream._collectives import HOST_COLLECTIVES as _HOST_COLLECTIVES  # noqa: E402
from ._stream._rma import barrier_all_on_stream  # noqa: E402
from ._teams import (  # noqa: E402
    TEAM_INVALID, TEAM_SHARED, TEAM_WORLD, team_destroy, team_my_pe, team_n_pes,
    team_split_2d, team_split_strided, team_translate_pe,
)

globals().update(_DEVICE_FUNCTIONS)
globals().update(_HOST_COLLECTIVES)
_device_api.bind(host=_HOST_FORMS,
                 both={name: globals()[name] for name in _device_api.HOST_AND_DEVICE})

if not _select.numba_is_simulator():
    from ._cuda import _intrinsics  # noqa: E402,F401  (registers the device side)
else:
    from ._sim import _cache, _device as _sim_device, _shared_arrays  # noqa: E402

    _device_api.bind(simulator=_sim_device)
    _shared_arrays.install()
    _cache.install()

__version__ = "0.1.0"

__all__ = [
    "CMP_EQ",
    "CMP_GE",
    "CMP_GT",
    "CMP_LE",
    "CMP_LT",
    "CMP_NE",
    "Config",
    "SIGNAL_ADD",
    "SIGNAL_SET",
    "TEAM_INVALID",
    "TEAM_SHARED",
    "TEAM_WORLD",
    "ShmemBootstrapError",
    "ShmemConfigError",
    "ShmemDriverError",
    "ShmemError",
    "ShmemPerformanceWarning",
    "ShmemTimeoutError",
    "ShmemUsageError",
    "array",
    "barrier",
    "barrier_all",
    "barrier_all_on_stream",
    "collective_launch",
    "config",
    "cupy_array",
    "finalize",
    "free",
    "get_unique_id",
    "init",
    "my_pe",
    "n_pes",
    "peer_array",
    "peer_cupy_array",
    "peer_tensor",
    "sync",
    "sync_all",
    "team_destroy",
    "team_my_pe",
    "team_n_pes",
    "team_split_2d",
    "team_split_strided",
    "team_translate_pe",
    "tensor",
    "zeros",
    *sorted(_DEVICE_FUNCTIONS),
    *sorted(_HOST_COLLECTIVES),
]
