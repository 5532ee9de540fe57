"""Bad input to every public device function: the documented error, and a job
that still works afterwards. On the simulator the errors come at run time,
through a live group of PEs; on the GPU the type errors come at compile time.
And every public host function that takes symmetric arrays, and every public
function, host or device, before init(). And requests from other nodes that a
target's proxy refuses."""

import re

import numpy as np
import pytest

from conftest import BACKEND, python, shmem_run
from harness import PEGroup
from numba_shmem import ShmemUsageError, _device_api as api

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
    functions = [name for name in numba_shmem.__all__
                 if name not in ("init", "get_unique_id")  # both called before init()
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


def _team_handle(name, given, arg="team"):
    return (rf"ShmemUsageError shmem\.{name}: {arg} must be a team handle \(an int or numpy "
            rf"integer: shmem\.TEAM_WORLD, TEAM_SHARED or one team_split_\* returned\), got "
            rf"{re.escape(given)}; pass the handle itself")


COLLECTIVE_ARGS = {
    "broadcast_root_float": r"ShmemUsageError shmem\.broadcast: root must be a PE of the team, "
                            r"an int or numpy integer from 0 to 1, got 0\.5; pass the team "
                            r"number of the PE whose source is sent",
    "broadcast_root_str": r"ShmemUsageError shmem\.broadcast: root must be a PE .*, got '1';",
    "broadcast_root_bool": r"ShmemUsageError shmem\.broadcast: root must be a PE .*, got True;",
    "broadcast_team_float": _team_handle("broadcast", "0.7"),
    "fcollect_team_str": _team_handle("fcollect", "'0'"),
    "sum_reduce_team_bool": _team_handle("sum_reduce", "True"),
    "fcollect_stray": r"TypeError fcollect\(\) takes 4 positional arguments but 5 were given",
    "sum_reduce_stray": r"TypeError sum_reduce\(\) takes 4 positional arguments but 5 were given",
    "broadcast_stray": r"TypeError broadcast\(\) takes 5 positional arguments but 6 were given",
    "broadcast_no_root": r"TypeError broadcast\(\) missing 1 required positional argument: "
                         r"'root'",
    "barrier_team_float": _team_handle("barrier", "0.7"),
    "barrier_stream_team_str": _team_handle("barrier", "'0'"),
    "sync_team_bool": _team_handle("sync", "True"),
    "team_my_pe_str": _team_handle("team_my_pe", "'0'"),
    "team_n_pes_float": _team_handle("team_n_pes", "0.7"),
    "team_translate_pe_team_bool": _team_handle("team_translate_pe", "True", "src_team"),
    "team_translate_pe_pe_float": r"ShmemUsageError shmem\.team_translate_pe: src_pe must be an "
                                  r"int or numpy integer \(a PE number of src_team\), got 0\.5",
    "team_split_strided_parent_str": _team_handle("team_split_strided", "'0'", "parent"),
    "team_split_strided_start_bool": r"ShmemUsageError shmem\.team_split_strided: start=True, "
                                     r"stride=1, size=1 do not pick PEs of a parent team of 2 "
                                     r"\(need ints with",
    "team_split_2d_parent_float": _team_handle("team_split_2d", "0.7", "parent"),
    "team_split_2d_xrange_bool": r"ShmemUsageError shmem\.team_split_2d: xrange must be an int "
                                 r">= 1, got True",
    # (before: "TEAM_WORLD and TEAM_SHARED cannot be destroyed", True being 1)
    "team_destroy_bool": _team_handle("team_destroy", "True"),
    # the GPU refuses it when it compiles the kernel
    "device_stray": r"TypeError .*fcollect_block\(\) takes 4 positional arguments but 5 were "
                    r"given" if BACKEND == "sim" else r"TypingError .*fcollect_block.*too many "
                                                      r"positional arguments",
    "device_root_float": r"(ShmemUsageError|TypingError) .*shmem\.broadcast_block: root must be "
                         r"an integer, got (0\.5|float64)",
    "device_team_float": (r"ShmemUsageError .*" + _team_handle("broadcast_block", "0.7")[16:]
                          if BACKEND == "sim" else r"TypingError .*shmem\.broadcast_block: team "
                                                   r"must be an integer, got float64"),
    # (the GPU does not check the range: no member sends)
    "device_root_outside": r"ShmemUsageError .*shmem\.broadcast_block: root must be a PE of the "
                           r"team, from 0 to 1, got 2" if BACKEND == "sim" else "ok",
    "host_keywords": r"ok",
    "device_keywords": r"ok",
}


def test_collectives_and_team_calls_take_exact_integers_and_their_documented_keywords():
    """A float, string or bool team, root or team-split argument is an error
    naming it (before: 0.7 and '0' were TEAM_WORLD, True TEAM_SHARED, a root of
    0.5 moved nothing); a stray positional argument is a TypeError (before: it
    was ignored); numpy integers and the documented keywords work, in kernels
    too (before, on the simulator: an unexpected keyword 'root')."""
    result = shmem_run(2, "collective_args.py", launcher_args=["--tag-output"], timeout=300,
                       env={"NUMBA_SHMEM_WAIT_TIMEOUT": "60"})
    assert result.returncode == 0, result.stdout + result.stderr
    cases = {}
    for line in result.stdout.splitlines():
        _pe, rest = line.split("] ", 1)
        case, outcome = rest.split(" ", 1)
        cases.setdefault(case, []).append(outcome)
    assert set(cases) == set(COLLECTIVE_ARGS), set(cases) ^ set(COLLECTIVE_ARGS)
    for case, outcomes in cases.items():
        assert len(outcomes) == 2, (case, outcomes)  # on both PEs
        for outcome in outcomes:
            assert re.fullmatch(COLLECTIVE_ARGS[case] + ".*", outcome), (case, outcome)


def test_gpu_collectives_take_their_documented_keywords():
    """numba's typing folds keywords by the typer's parameter names: the
    keyword call compiles to the positional call's PTX; a stray argument and a
    misspelt keyword are typing errors naming the collective."""
    result = python("ptx_keywords.py", env={"NUMBA_SHMEM_BACKEND": "cuda"})
    assert result.returncode == 0, result.stderr
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert lines["broadcast_block"] == "same" and lines["sum_reduce_block"] == "same", lines
    assert re.search(r"fcollect_block.*too many positional arguments", lines["stray"])
    assert re.search(r"broadcast_block.*rooot=.*missing a required argument: 'root'",
                     lines["misspelt"])


def test_the_compiled_target_refuses_what_it_cannot_apply():
    """The compiled request path's checks (_engine.refusal, as the simulator's
    proxy runs them): the mapped part of the heap, alignment, known ops."""
    from numba_shmem._transport import _engine, _ring

    def code(kind, dtype=0, op=0):
        return _ring.code(kind, dtype, op)

    int64, float32 = _ring.DTYPES.index("int64"), _ring.DTYPES.index("float32")
    add, xor = _ring.ATOMIC_OPS.index("add"), _ring.ATOMIC_OPS.index("xor")
    refusal = _engine.refusal
    assert refusal(code(_ring.PUT), 4088, 8, 4096) == 0
    assert refusal(code(_ring.GET), 0, 4096, 4096) == 0
    assert refusal(code(_ring.PUT), 4088, 16, 4096) == _engine.OUTSIDE
    assert refusal(code(_ring.GET), -8, 8, 4096) == _engine.OUTSIDE
    assert refusal(code(_ring.PUT), 8, 1 << 62, 4096) == _engine.OUTSIDE  # (no overflow)
    assert refusal(code(_ring.ATOMIC, int64, add), 8, 1, 4096) == 0
    assert refusal(code(_ring.ATOMIC, int64, add), 4, 1, 4096) == _engine.MISALIGNED
    assert refusal(code(_ring.ATOMIC, float32, xor), 0, 1, 4096) == _engine.UNKNOWN
    assert refusal(code(_ring.ATOMIC, 9, add), 0, 1, 4096) == _engine.UNKNOWN
    assert refusal(code(_ring.SIGNAL, 0, 7), 0, 1, 4096) == _engine.UNKNOWN
    assert refusal(code(_ring.SIGNAL, 0, _ring.SIGNAL_MAX), 4088, 1, 4096) == 0
    assert refusal(code(_ring.SIGNAL), 12, 1, 4096) == _engine.MISALIGNED
    assert refusal(99, 0, 0, 4096) == _engine.MALFORMED


def test_the_compiled_proxys_refusals_are_raised_once_each_call():
    """The compiled loop's refusal records: the first, with the target's
    extent, and how many more; then none."""
    from types import SimpleNamespace

    from numba_shmem._transport import _compiled, _engine, _ring

    proxy = _compiled.CompiledProxy.__new__(_compiled.CompiledProxy)
    ctl = np.zeros(_engine.CONTROL_WORDS, np.int64)
    refusals = np.zeros((_engine.MAX_REFUSALS, _engine.REFUSAL_WORDS), np.int64)
    proxy._state = SimpleNamespace(ctl=ctl, refusals=refusals)
    proxy._refusals_seen = 0
    proxy._what = [("shmem.iput", 1)] * _ring.SLOTS
    refusals[0] = [6, 1, _ring.code(_ring.PUT), 8192, 8, _engine.OUTSIDE, 4096]
    refusals[1] = [9, 1, _ring.code(_ring.SIGNAL), 12, 8, _engine.MISALIGNED, 4096]
    ctl[_engine.REFUSED] = 2
    with pytest.raises(ShmemUsageError, match=(
            r"^shmem\.iput toward PE 1: PE 1 refused it: a put of 8 bytes at heap offset 8192 "
            r"runs outside the 4096 mapped bytes of its heap \(offsets 0 to 4095\); check the "
            r"array, nelems and strides .* \(and 1 more refused requests\)$")):
        proxy._raise_refused()
    proxy._raise_refused()  # nothing left
    refusals[2] = [9, 1, _ring.code(_ring.SIGNAL), 12, 8, _engine.MISALIGNED, 4096]
    ctl[_engine.REFUSED] = 3
    with pytest.raises(ShmemUsageError, match=r"^a kernel's signal \(ring ticket 4\) toward PE "
                       r"1: PE 1 refused it: a signal update at heap offset 12 is not aligned "
                       r"to its 8 bytes;"):
        proxy._raise_refused()
