"""The stream tier: host calls that enqueue their work on a CUDA stream.

``_rma`` has put, get, the signals, quiet and the barriers; ``_collectives`` the
team collectives; ``_kernels`` the kernels they launch; ``_tier`` and
``_targets`` what a runtime keeps between calls; ``_handles`` turns every
library's stream into a handle. The GPU side of each call is one driver call
(``_cuda/_enqueue.py``).
"""

from . import _rma

#: the host forms of device names (``_device_api.HOST_FORMS``)
HOST_FORMS = {name: getattr(_rma, name)
              for name in ("put", "get", "put_signal", "signal_op", "signal_wait_until", "quiet")}
