"""What the device side compiles to (no GPU needed: PTX for sm_90)."""

import pytest

from conftest import python


@pytest.fixture(scope="module")
def ptx():
    result = python("ptx_check.py", env={"NUMBA_SHMEM_BACKEND": "cuda"})
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_state_is_an_external_symbol_not_a_constant(ptx):
    assert ".extern .global .align 8 .b8 numba_shmem_state[64];" in ptx
    # my_pe and n_pes are loads of the state, never immediates
    assert "ld.global.u32" in ptx and "[numba_shmem_state]" in ptx
    assert "[numba_shmem_state+4]" in ptx


def test_peer_array_translates_through_the_peer_table(ptx):
    assert "[numba_shmem_state+8]" in ptx   # heap_base
    assert "[numba_shmem_state+24]" in ptx  # peer_bases
