"""Configuration: one object with a fixed set of fields, read once by ``init()``.

Each field can be overridden by the environment variable named in ``FIELDS``.
A value that cannot be parsed is a ``ShmemConfigError`` naming the variable.
"""

import dataclasses
import os
import re

from ._errors import ShmemConfigError

BACKENDS = ("auto", "cuda", "sim")

_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(variable, text):
    """Parse ``"512M"``, ``"2G"``, ``"4096"`` into bytes."""
    match = re.fullmatch(r"\s*(\d+)\s*([kmgt]?)(?:i?b)?\s*", text, re.IGNORECASE)
    if not match:
        raise ShmemConfigError(variable, text, "a size in bytes such as 4096, 512M or 2G")
    return int(match.group(1)) * _SIZE_UNITS[match.group(2).lower()]


def _parse_bool(variable, text):
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ShmemConfigError(variable, text, "0 or 1")


def _parse_seconds(variable, text):
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0.0:  # also rejects nan
        raise ShmemConfigError(variable, text, "a number of seconds >= 0 (0 waits forever)")
    return value


def _parse_count(variable, text):
    try:
        value = int(text.strip() or "0")
    except ValueError:
        value = -1
    if value < 0:
        raise ShmemConfigError(variable, text, "a whole number >= 0 (0: detect)")
    return value


def _parse_backend(variable, text):
    value = text.strip().lower()
    if value not in BACKENDS:
        raise ShmemConfigError(variable, text, " or ".join(BACKENDS))
    return value


@dataclasses.dataclass(frozen=True)
class Config:
    """The settings of one job. Build it with ``Config.from_env()``."""

    #: ``auto`` picks ``cuda`` where a CUDA driver is installed, else ``sim``.
    backend: str = "auto"
    #: Largest symmetric heap per PE. The CUDA backend reserves this much address
    #: space and maps physical memory as allocations need it.
    heap_size: int = 16 << 30
    #: Physical memory is mapped in chunks of at least this many bytes.
    heap_chunk: int = 64 << 20
    #: Device-side argument and address checks (issue-level debug mode).
    debug: bool = False
    #: Seconds a host-side collective or a device wait may block before it is an
    #: error naming the PE and what it waited on; 0 waits forever.
    wait_timeout: float = 300.0
    #: PEs per node; 0 detects the node. Under mpirun, k > 0 makes every k
    #: consecutive ranks a node of their own (nodes emulated on one machine).
    node_size: int = 0


#: field name -> (environment variable, parser)
FIELDS = {
    "backend": ("NUMBA_SHMEM_BACKEND", _parse_backend),
    "heap_size": ("NUMBA_SHMEM_HEAP_SIZE", parse_size),
    "heap_chunk": ("NUMBA_SHMEM_HEAP_CHUNK", parse_size),
    "debug": ("NUMBA_SHMEM_DEBUG", _parse_bool),
    "wait_timeout": ("NUMBA_SHMEM_WAIT_TIMEOUT", _parse_seconds),
    "node_size": ("NUMBA_SHMEM_NODE_SIZE", _parse_count),
}


def from_env(environ=None):
    """Return a ``Config`` with each field taken from its variable where set."""
    environ = os.environ if environ is None else environ
    values = {}
    for field, (variable, parse) in FIELDS.items():
        if variable in environ:
            values[field] = parse(variable, environ[variable])
    config = Config(**values)
    if config.heap_size <= 0:
        raise ShmemConfigError("NUMBA_SHMEM_HEAP_SIZE", environ.get("NUMBA_SHMEM_HEAP_SIZE"),
                               "a size greater than 0")
    if config.heap_chunk <= 0:
        raise ShmemConfigError("NUMBA_SHMEM_HEAP_CHUNK", environ.get("NUMBA_SHMEM_HEAP_CHUNK"),
                               "a size greater than 0")
    return config
