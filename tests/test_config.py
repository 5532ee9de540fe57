"""The configuration read from NUMBA_SHMEM_* variables: defaults, sizes, and an
error naming the variable for every bad value (no PEs, no launcher)."""

import pytest

from numba_shmem import Config, ShmemConfigError
from numba_shmem._config import FIELDS, from_env, parse_size


def test_defaults_without_variables():
    assert from_env({}) == Config()


@pytest.mark.parametrize("text,expected", [
    ("4096", 4096), ("512M", 512 << 20), ("2g", 2 << 30), ("1T", 1 << 40),
    ("64KiB", 64 << 10), (" 3 MB ", 3 << 20),
])
def test_sizes(text, expected):
    assert parse_size("X", text) == expected


def test_every_field_has_a_variable():
    assert set(FIELDS) == {f for f in Config.__dataclass_fields__}


def test_variables_override():
    config = from_env({"NUMBA_SHMEM_BACKEND": "SIM", "NUMBA_SHMEM_HEAP_SIZE": "1G",
                       "NUMBA_SHMEM_HEAP_CHUNK": "2M", "NUMBA_SHMEM_DEBUG": "1",
                       "NUMBA_SHMEM_WAIT_TIMEOUT": "2.5"})
    assert config == Config(backend="sim", heap_size=1 << 30, heap_chunk=2 << 20,
                            debug=True, wait_timeout=2.5)


@pytest.mark.parametrize("variable,value,expected", [
    ("NUMBA_SHMEM_BACKEND", "gpu", "auto or cuda or sim"),
    ("NUMBA_SHMEM_HEAP_SIZE", "lots", "a size in bytes"),
    ("NUMBA_SHMEM_HEAP_SIZE", "0", "a size greater than 0"),
    ("NUMBA_SHMEM_HEAP_CHUNK", "0", "a size greater than 0"),
    ("NUMBA_SHMEM_DEBUG", "maybe", "0 or 1"),
    ("NUMBA_SHMEM_WAIT_TIMEOUT", "-1", "a number of seconds >= 0"),
    ("NUMBA_SHMEM_WAIT_TIMEOUT", "nan", "a number of seconds >= 0"),
    ("NUMBA_SHMEM_WAIT_TIMEOUT", "soon", "a number of seconds >= 0"),
])
def test_bad_value_names_the_variable(variable, value, expected):
    with pytest.raises(ShmemConfigError) as info:
        from_env({variable: value})
    message = str(info.value)
    assert message.startswith(f"{variable}={value!r} is not valid")
    assert expected in message
    assert info.value.variable == variable
