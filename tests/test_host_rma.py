"""Host-initiated put and get on a stream, and barrier_all_on_stream."""

from conftest import shmem_run


def test_host_put_get_and_stream_barrier():
    result = shmem_run(2, "host_rma.py")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = sorted(result.stdout.splitlines())
    assert lines[:2] == ["EXPECTED ShmemUsageError: shmem.put: the source's 40 elements do not "
                         "fit in the 32 of dest; pass a smaller source or a larger dest"] * 2
    assert lines[2:] == ["PE 0: host put/get ok", "PE 1: host put/get ok"]
