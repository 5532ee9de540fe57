"""What the device side compiles to (no GPU needed: PTX for sm_90)."""

import re

import pytest

from conftest import python


@pytest.fixture(scope="module")
def ptx():
    result = python("ptx_check.py", env={"NUMBA_SHMEM_BACKEND": "cuda"})
    assert result.returncode == 0, result.stderr
    return result.stdout


def state_loads(ptx):
    """Byte offsets of numba_shmem_state that the PTX loads, directly or through
    a register that holds the symbol's address plus an offset."""
    offsets = {int(m.group(1) or 0)
               for m in re.finditer(r"ld\.const(?:\.v\d)?\.u\d+\s+[^;]*"
                                    r"\[numba_shmem_state(?:\+(\d+))?\]", ptx)}
    bases = set(re.findall(r"mov\.u64\s+(%rd\d+), numba_shmem_state;", ptx))
    at = {m.group(1): int(m.group(3)) for m in
          re.finditer(r"add\.s64\s+(%rd\d+), (%rd\d+), (\d+);", ptx) if m.group(2) in bases}
    for m in re.finditer(r"ld\.const\.u\d+\s+%r\w*\d+, \[(%rd\d+)\];", ptx):
        if m.group(1) in at:
            offsets.add(at[m.group(1)])
    return offsets


def test_state_is_an_external_symbol_in_constant_memory(ptx):
    """Linked, not compiled in: the values are copied in when a module loads.
    Constant memory: its cache survives the L1 invalidation of acquire loads."""
    assert ".extern .const .align 8 .b8 numba_shmem_state[64];" in ptx
    assert ".extern .const .align 8 .b8 numba_shmem_peers[16384];" in ptx
    # my_pe and n_pes (offsets 0 and 4) are read from the state
    assert re.search(r"ld\.const\.v2\.u32\s+\{%r\d+, %r\d+\}, \[numba_shmem_state\];", ptx) \
        or {0, 4} <= state_loads(ptx)


def test_peer_array_translates_through_the_constant_peer_table(ptx):
    assert 8 in state_loads(ptx)  # heap_base
    assert re.search(r"ld\.const\.u64\s+%rd\d+, \[numba_shmem_peers\+8\];", ptx)  # PE 1


def test_a_job_larger_than_the_constant_peer_table_is_refused_at_init():
    result = python("too_many_pes.py", env={"NUMBA_SHMEM_BACKEND": "cuda"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        "EXPECTED ShmemUsageError: this job has 2049 PEs; on the GPU numba-shmem supports up "
        "to 2048 (their heap addresses live in constant memory); start at most 2048 PEs")


def test_the_copy_loop_writes_every_byte_once_in_whole_elements():
    """The source of every put/get loop, run in Python thread by thread on
    random addresses, sizes, group sizes and element widths."""
    result = python("copy_plan.py", 2000, 1, env={"NUMBA_SHMEM_BACKEND": "cuda"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok 2000 cases"
