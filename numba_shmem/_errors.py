"""The exceptions that numba-shmem raises.

Every error names what was wrong and what to do about it. ``ShmemError`` is the
base; catch it to catch them all.
"""


class ShmemError(RuntimeError):
    """Base class of every numba-shmem error."""


class ShmemUsageError(ShmemError):
    """The library was called the wrong way (bad argument, wrong order of calls)."""


class ShmemConfigError(ShmemUsageError):
    """An environment variable holds a value numba-shmem cannot use."""

    def __init__(self, variable, value, expected):
        self.variable = variable
        super().__init__(f"{variable}={value!r} is not valid: expected {expected}")


class ShmemDriverError(ShmemError):
    """A CUDA driver call failed; ``result`` is the CUresult name."""

    def __init__(self, call, result, hint=""):
        self.call = call
        self.result = result
        message = f"{call} failed with {result}"
        super().__init__(f"{message}: {hint}" if hint else message)


class ShmemBootstrapError(ShmemError):
    """The PEs could not find or talk to each other."""


class ShmemTimeoutError(ShmemError):
    """A wait that numba-shmem can observe ran past its timeout."""


class ShmemPerformanceWarning(UserWarning):
    """The job runs, but a setting outside the library costs it speed; the
    message says which and how to change it."""
