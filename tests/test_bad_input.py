"""Bad input to every public device function: the documented error, and a job
that still works afterwards. On the simulator the errors come at run time,
through a live group of PEs; on the GPU the type errors come at compile time.
And every public host function that takes symmetric arrays, and every public
function, host or device, before init()."""

import re

import pytest

from conftest import BACKEND, python, shmem_run
from harness import PEGroup
from numba_shmem import _device_api as api

REMOTE = sorted(name for name, (params, _doc) in api.TABLE.items() if "pe" in params.split())
SIGNALLING = sorted(name for name in api.TABLE if "signal" in name and name != "signal_fetch"
                    and "wait" not in name)
NO_FLOATS = sorted(set(api.ATOMICS) - api.FLOAT_ATOMICS)

CASES = ([(name, "pe_out_of_range") for name in REMOTE]
         + [(name, "not_symmetric") for name in REMOTE]
         + [(name, "use_after_free") for name in REMOTE]
         + [(name, "wrong_dtype") for name in NO_FLOATS + SIGNALLING])


def expected(name, bad, npes):
    return {
        "pe_out_of_range": rf"shmem\.{name}: pe={npes} is out of range for {npes} PEs "
                           rf"\(0\.\.{npes - 1}\)",
        "not_symmetric": rf"shmem\.{name}: the array is not on the symmetric heap",
        "use_after_free": rf"shmem\.{name}: the array at heap offset \d+ is not in a live "
                          r"allocation; was it used after shmem\.free\(\)\?",
        "wrong_dtype": (rf"shmem\.{name}: dtype float32 is not supported" if name in api.ATOMICS
                        else rf"shmem\.{name}: sig must be a uint64 array, got int64"),
    }[bad]


@pytest.fixture(scope="module")
def group():
    pes = PEGroup(2, env={"NUMBA_SHMEM_WAIT_TIMEOUT": "30"})
    yield pes
    pes.close()


@pytest.mark.skipif(BACKEND != "sim", reason="run-time argument errors are the simulator's; "
                                             "the GPU's are typing errors, tested below")
@pytest.mark.parametrize("name,bad", CASES, ids=[f"{n}-{b}" for n, b in CASES])
def test_simulator_bad_input_is_a_clear_error_and_the_job_goes_on(group, name, bad):
    results = group.run("bad_call", [{"name": name, "bad": bad}] * group.npes)
    for pe, result in enumerate(results):
        assert result["outcome"].startswith("ShmemUsageError"), (pe, result["outcome"])
        assert re.search(expected(name, bad, group.npes), result["outcome"]), result["outcome"]
        assert result["usable"], f"PE {pe}: the job is not usable after {name} with {bad}"
    assert group.starts == 1, "a bad call should not have cost the group its PEs"


def test_gpu_typing_errors_name_the_argument():
    result = python("typing_table.py", env={"NUMBA_SHMEM_BACKEND": "cuda"})
    assert result.returncode == 0, result.stderr
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    for name in REMOTE:
        assert f"shmem.{name}: pe must be an integer, got float64" in lines[name], lines[name]
    for name in NO_FLOATS:
        assert f"shmem.{name}: dtype float32 is not supported" in lines[f"{name}:dtype"]


def test_every_public_function_before_init_says_to_call_init():
    import numba_shmem

    result = python("before_init.py")
    assert result.returncode == 0, result.stderr
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    functions = [name for name in numba_shmem.__all__ if name != "init"
                 and callable(getattr(numba_shmem, name))
                 and not isinstance(getattr(numba_shmem, name), type)]
    assert sorted(lines) == sorted(functions)
    assert len(functions) > 100
    for name, outcome in lines.items():
        assert outcome.startswith(f"ShmemUsageError shmem.{name}() needs the runtime: call "
                                  "shmem.init() first"), (name, outcome)


HOST_BAD = {
    "use_after_free": r"the array at heap offset \d+ is not in a live allocation; was it used "
                      r"after shmem\.free\(\)\?",
    "not_symmetric": r"the array is not on the symmetric heap; allocate it with shmem\.array\(\)",
    "pe_out_of_range": r"pe={npes} is out of range for {npes} PEs",
}
HOST_SIZES = {
    "put": r"shmem\.put: the source's 9 elements do not fit in the 8 of dest",
    "get": r"shmem\.get: dest asks for 9 elements but the source holds 8",
    "fcollect": r"shmem\.fcollect: dest holds 8 elements but needs 10 for nelems=5 on 2 PEs",
}


LOCAL_BAD = {
    ("put", "list"): r"shmem\.put: source must be a numpy array or a device array, got list; "
                     r"pass numpy\.asarray\(\.\.\.\) with dtype int64",
    ("put", "scalar"): r"shmem\.put: source must be a numpy array or a device array, got int",
    ("get", "none"): r"shmem\.get: dest must be a numpy array or a device array, got NoneType",
    ("put", "dtype"): r"shmem\.put: source has dtype float64 but dest has int64; pass source as "
                      r"int64",
    ("get", "dtype"): r"shmem\.get: dest has dtype int32 but source has int64",
    ("put", "strided_device"): r"shmem\.put: source is a strided view of a device array",
    ("get", "strided_symmetric"): r"shmem\.get: source is a strided view \(like x\[::2\]\)",
    ("fcollect", "strided_symmetric"): r"shmem\.fcollect \(dest\): dest is a strided view",
    ("broadcast", "none"): r"shmem\.broadcast: source must be a numpy array or a device array, "
                           r"got NoneType",
}


def test_every_host_function_refuses_bad_arrays_and_the_job_goes_on():
    from numba_shmem._stream._collectives import HOST_COLLECTIVES

    result = shmem_run(2, "host_bad_input.py", launcher_args=["--tag-output"])
    assert result.returncode == 0, result.stdout + result.stderr
    cases = {}
    for line in result.stdout.splitlines():
        pe, rest = line.split("] ", 1)
        if rest not in ("usable", "strided numpy filled"):
            name, bad, outcome = rest.split(" ", 2)
            cases.setdefault((name, bad), []).append(outcome)
    names = {"put", "get", "peer_array", "free", *HOST_COLLECTIVES}
    expected = ({(n, b) for n in names for b in ("use_after_free", "not_symmetric")}
                | {(n, "pe_out_of_range") for n in ("put", "get", "peer_array")}
                | {(n, "size_mismatch") for n in HOST_SIZES} | set(LOCAL_BAD))
    assert set(cases) == expected
    for (name, bad), outcomes in cases.items():
        assert len(outcomes) == 2, (name, bad)  # on both PEs
        pattern = HOST_SIZES[name] if bad == "size_mismatch" else LOCAL_BAD.get((name, bad)) \
            or rf"shmem\.{name}( \(dest\))?: " + HOST_BAD[bad].format(npes=2)
        for outcome in outcomes:
            assert outcome.startswith("ShmemUsageError ") and re.search(pattern, outcome), \
                (name, bad, outcome)
    assert result.stdout.count("usable") == 2
    assert result.stdout.count("strided numpy filled") == 2  # before: get left it untouched
