"""What the node has: GPUs and the MPS control program. Probed without
creating a CUDA context in the launcher."""

import ctypes
import shutil
import subprocess
import sys

_PROBE = """
from cuda.bindings import driver
err, = driver.cuInit(0)
err2, count = driver.cuDeviceGetCount()
print(count if int(err) == 0 and int(err2) == 0 else 0)
"""


def count():
    """The number of visible CUDA GPUs (0 where there is no driver)."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0
    # In a child process, so that the launcher itself never becomes a CUDA
    # client (an MPS daemon started afterwards must see all PEs as its clients).
    probe = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                           timeout=120)
    try:
        return int(probe.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return 0


def mps_control():
    """The path of nvidia-cuda-mps-control, or None."""
    return shutil.which("nvidia-cuda-mps-control")
