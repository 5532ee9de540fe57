"""The running runtime of this process, where every layer finds it.

``_runtime.init()`` makes the ``Runtime`` and installs it here; ``finalize()``
removes it. The layers below ``_runtime`` (the heap and teams, the transport,
the backends, the device API and the stream tier) look it up here when they are
called (``require``), so that none of them imports ``_runtime``, which imports
them. This module imports only the errors.
"""

from ._errors import ShmemUsageError

_state = {"runtime": None, "finalized": False}


def current():
    """The running ``Runtime``, or None before ``init()``."""
    return _state["runtime"]


def finalized():
    """Whether ``finalize()`` (or the exit's teardown) has run."""
    return _state["finalized"]


def install(runtime):
    """Make ``runtime`` the running one (``init()``)."""
    _state["runtime"] = runtime


def remove():
    """Take the running runtime out for good (``finalize()``); return it."""
    runtime, _state["runtime"] = _state["runtime"], None
    _state["finalized"] = True
    return runtime


def require(what):
    """The running runtime, entered into this thread's CUDA context on the GPU;
    else a usage error that says to call ``shmem.init()`` for ``shmem.<what>``."""
    runtime = _state["runtime"]
    if runtime is not None:
        if runtime.backend == "cuda" and not getattr(runtime.threads, "in_context", False):
            runtime.enter_context()
        return runtime
    if _state["finalized"]:
        raise ShmemUsageError(
            f"shmem.{what}() was called after shmem.finalize(); numba-shmem cannot be "
            "used (or initialized again) once finalized: finalize at the end of the "
            "program")
    raise ShmemUsageError(
        f"shmem.{what}() needs the runtime: call shmem.init() first, and "
        "launch several PEs with shmem-run -n N script.py")


def my_pe():
    """This PE's number, 0 to ``n_pes() - 1``. Host and device."""
    return require("my_pe").bootstrap.rank


def n_pes():
    """The number of PEs in the job. Host and device."""
    return require("n_pes").bootstrap.size
