"""The runtime through the real launcher: ring, symmetry, zero-copy, errors."""

import re
import sys

import pytest

from conftest import (BACKEND, GPUS, ROOT, needs_gpu, python, run_hard, shm_entries, shm_left,
                      shmem_run)
from numba_shmem._heap._symmetric import sync_bytes

FIRST = sync_bytes(1, lines=True)  # where the first allocation of a 1-PE job starts
FIRST2 = sync_bytes(2, lines=True)  # and of a 2-PE job


@pytest.mark.parametrize("npes", [1, 2, 4])
def test_ring_sample(npes):
    before = shm_entries()
    result = shmem_run(npes, str(ROOT / "samples" / "ring.py"))
    assert result.returncode == 0, result.stderr
    lines = sorted(result.stdout.splitlines())
    assert lines == [f"PE {pe} of {npes} received {(pe - 1) % npes}" for pe in range(npes)]
    assert not shm_left(before)
    if BACKEND == "sim":
        assert "running %d PE" % npes in result.stderr and "CPU simulator" in result.stderr


@pytest.mark.parametrize("npes", [2, 4])
def test_allocation_symmetry_and_reuse(npes):
    result = shmem_run(npes, "alloc_symmetry.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(result.stdout.splitlines()) == [f"PE {pe}: symmetric ok" for pe in range(npes)]


@pytest.mark.skipif(BACKEND != "cuda", reason="on the simulator the calls of one node complete "
                    "before they return: nothing is in flight at free (test_nodes.py has the "
                    "proxy's case)")
def test_free_completes_what_was_issued_before_it():
    """A host put still on its stream, a kernel's put_nbi without quiet, a
    signal on a stream: none lands in the next array after free (before, on
    one H200: after a kernel's put_nbi, 89,975,408 of 3 x 33,554,432 elements
    of the next arrays held the freed one's data)."""
    result = shmem_run(2, "free_completes.py", 10, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(result.stdout.splitlines()) == [
        f"PE 1: free after {way} ok" for way in ("host put", "host signal", "kernel put_nbi")]


def test_plain_python_is_one_pe():
    result = python("zero_copy.py", "plain")
    assert result.returncode == 0, result.stderr
    assert "PE 0 of 1" in result.stdout


@needs_gpu
@pytest.mark.parametrize("mode", ["cupy", "torch", "cupy-dlpack", "torch-dlpack"])
def test_zero_copy_into_frameworks(mode):
    pytest.importorskip(mode.split("-")[0])
    result = shmem_run(2, "zero_copy.py", mode)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("zero-copy ok") == 2


@pytest.mark.parametrize("library", ["torch", "cupy"])
def test_tensors_and_cupy_arrays_on_the_heap(library):
    """shmem.tensor (every torch dtype, bfloat16 and float8 included) and
    shmem.cupy_array: peer views of the same dtype, shape and strides read and
    write the neighbour's copy, a kernel moves a bfloat16 tensor's bytes, free
    releases them, and an array of the library that is not on the heap is
    refused as dest."""
    pytest.importorskip(library)
    if library == "cupy" and BACKEND != "cuda":
        pytest.skip("CuPy needs a GPU")
    result = shmem_run(2, "tensors.py", library, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    oks = {"torch": ["torch dtypes ok", "torch peer writes ok"]
           + (["torch bfloat16 through a kernel ok"] if BACKEND == "cuda" else []),
           "cupy": ["cupy ok"]}[library]
    assert sorted(line for line in lines if not line.startswith("EXPECTED")) == sorted(
        f"PE {pe}: {ok}" for pe in range(2) for ok in oks), lines
    refused = [line for line in lines if line.startswith("EXPECTED")]
    heap = "not on the symmetric heap; allocate it with shmem.array() or shmem.zeros() " \
           "(shmem.tensor() or shmem.cupy_array() for PyTorch and CuPy)"
    if library == "torch":
        assert len(refused) == 10, lines
        assert sum(heap in line for line in refused) == 6, refused
        assert sum("shmem.tensor: dtype must be a torch.dtype" in line for line in refused) == 2
        assert sum("shmem.tensor: shape must not have negative extents, got (2, -1)" in line
                   for line in refused) == 2
    else:
        assert len(refused) == 4 and all(heap in line for line in refused), lines


@pytest.mark.skipif(BACKEND != "sim", reason="the simulator exports host memory; on the GPU "
                                             "the framework tests cover DLPack")
def test_dlpack_on_the_simulator_is_zero_copy_and_released():
    result = shmem_run(2, "zero_copy.py", "numpy-dlpack")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("zero-copy ok") == 2


def _expect(result, error, *fragments, pes=1):
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    found = re.findall(rf"^EXPECTED {error}: (.*)$", result.stdout, re.MULTILINE)
    assert len(found) == pes, output
    for message in found:
        for fragment in fragments:
            assert re.search(fragment, message), (fragment, message)
    return output


SINGLE = [
    ("before_init", "ShmemUsageError", r"shmem\.my_pe\(\) needs the runtime: call shmem\.init\(\) first"),
    ("array_before_init", "ShmemUsageError", r"shmem\.array\(\) needs the runtime"),
    ("init_twice", "ShmemUsageError", r"already called; call it once per process"),
    ("init_after_finalize", "ShmemUsageError", r"after shmem\.finalize\(\) is not supported"),
    ("after_finalize", "ShmemUsageError", r"shmem\.n_pes\(\) was called after shmem\.finalize\(\)"),
    ("put_after_finalize", "ShmemUsageError", r"shmem\.put\(\) was called after shmem\.finalize\(\)"),
    ("array_after_finalize", "ShmemUsageError", r"a symmetric array was used after shmem\.finalize\(\)"),
    ("slice_after_finalize", "ShmemUsageError", r"a symmetric array was used after shmem\.finalize\(\)"),
    ("kernel_after_finalize", "ShmemUsageError", r"a symmetric array was used after shmem\.finalize\(\)"),
    ("heap_smaller_than_its_reserve", "ShmemConfigError", r"NUMBA_SHMEM_HEAP_SIZE='512' is not valid: expected more than the \d+ bytes"),
    ("bad_config", "ShmemConfigError", r"NUMBA_SHMEM_HEAP_SIZE='lots' is not valid"),
    ("kernel_before_init", "ShmemUsageError", r"call shmem\.init\(\)"),
    ("exhaustion", "ShmemUsageError", r"heap exhausted: asked for 8388608 bytes.*NUMBA_SHMEM_HEAP_SIZE"),
    ("bad_shape", "ShmemUsageError", r"shape must not have negative extents, got \(4, -1\)"),
    ("shape_not_int", "ShmemUsageError", r"shape must be an int or a tuple of ints, got 2\.5"),
    ("bad_dtype", "ShmemUsageError", r"dtype 'not-a-dtype' is not a numpy dtype"),
    ("object_dtype", "ShmemUsageError", r"holds Python objects"),
    ("bad_align", "ShmemUsageError", r"align must be a power of two, got 48"),
    ("free_foreign", "ShmemUsageError", r"shmem\.free: the array is not on the symmetric heap"),
    ("free_not_array", "ShmemUsageError", r"expected an array from shmem\.array\(\), got list"),
    ("double_free", "ShmemUsageError", rf"the array at heap offset {FIRST} is not in a live allocation; was it used after shmem\.free\(\)\?"),
    ("free_slice", "ShmemUsageError", rf"the array at heap offset {FIRST + 2048} is not a live allocation.*not a slice"),
    ("peer_out_of_range", "ShmemUsageError", r"shmem\.peer_array: pe=2 is out of range for 2 PEs \(0\.\.1\)"),
    ("peer_not_int", "ShmemUsageError", r"shmem\.peer_array: pe must be an int, got 0\.5"),
    ("peer_not_heap", "ShmemUsageError", r"shmem\.peer_array: the array is not on the symmetric heap"),
    ("backend_mismatch", "ShmemUsageError", r"NUMBA_SHMEM_BACKEND=(cuda|sim) but numba\.cuda"),
    ("launcher_env_malformed", "ShmemBootstrapError", r"'SHMEM_RUN_PE' is missing or malformed; start the job with shmem-run"),
    ("launcher_unreachable", "ShmemBootstrapError", r"could not reach the shmem-run rendezvous at /nonexistent/socket"),
    ("mpi_without_mpi4py", "ShmemUsageError", r"mpi4py cannot be imported.*pip install 'numba-shmem\[mpi\]'"),
]

_TWO_PE = {"peer_out_of_range"}
_STILL_USABLE = {"exhaustion"}
#: the GPU rounds the heap up to its granularity (2 MiB), more than the reserve
_SIM_ONLY = {"heap_smaller_than_its_reserve"}


@pytest.mark.parametrize("scenario,error,fragment", SINGLE, ids=[s[0] for s in SINGLE])
def test_single_pe_errors(scenario, error, fragment):
    if scenario in _SIM_ONLY and BACKEND != "sim":
        pytest.skip("the GPU heap is rounded up to at least 2 MiB")
    if scenario in _TWO_PE:
        result = shmem_run(2, "errors.py", scenario)
        output = _expect(result, error, fragment, pes=2)
    elif scenario.startswith(("before", "array_before", "launcher", "mpi", "backend")):
        output = _expect(python("errors.py", scenario), error, fragment)
    else:
        output = _expect(shmem_run(1, "errors.py", scenario), error, fragment)
    if scenario in _STILL_USABLE:
        assert "STILL USABLE" in output


@pytest.mark.parametrize("scenario,message", [
    ("alloc_mismatch", r"shmem\.array \(allocation #1\): PE 0 allocated 1024 bytes aligned to "
                       r"256 but PE 1 allocated 2048 bytes"),
    ("free_mismatch", rf"shmem\.free: PE 0 freed the 256-byte allocation at heap offset {FIRST2} "
                      rf"but PE 1 freed the 256-byte allocation at heap offset {FIRST2 + 256}"),
])
def test_mismatched_allocations_fail_on_every_pe_naming_both(scenario, message):
    output = _expect(shmem_run(2, "errors.py", scenario), "ShmemBootstrapError", message, pes=2)
    assert output.count("STILL USABLE") == 2


@pytest.mark.skipif(BACKEND != "sim", reason="the simulator's heap is the one in /dev/shm")
def test_a_full_dev_shm_is_the_heap_exhausted_error_on_every_pe():
    """Before: the allocation succeeded and the first store past /dev/shm's
    space killed the PE with SIGBUS."""
    output = _expect(shmem_run(2, "errors.py", "shm_exhausted"), "ShmemUsageError",
                     r"symmetric heap exhausted: PE 0 could not reserve \d+ more bytes of its "
                     r"simulator heap \(/dev/shm has \d+ bytes free\).*--shm-size", pes=2)
    assert output.count("STILL USABLE") == 2


@pytest.mark.skipif(BACKEND != "sim", reason="the simulator's heap is a file each PE maps")
def test_heap_sizes_that_differ_across_pes_are_an_error_naming_the_setting():
    """Before: mmap failed ("mmap length is greater than file size")."""
    _expect(shmem_run(2, "errors.py", "heap_size_mismatch"), "ShmemUsageError",
            r"PE 0's symmetric heap is \d+ bytes and PE 1's \d+: NUMBA_SHMEM_HEAP_SIZE must "
            r"be the same on every PE", pes=2)


def test_mismatched_collectives_fail_on_every_pe():
    result = shmem_run(2, "errors.py", "collective_mismatch")
    _expect(result, "ShmemBootstrapError",
            r"collective #\d+ does not match across PEs: PE 0 called shmem\.barrier_all, "
            r"PE 1 called shmem\.array", pes=2)


def test_wait_timeout_names_the_pe_and_the_collective():
    result = shmem_run(2, "errors.py", "wait_timeout")
    _expect(result, "ShmemTimeoutError", r"PE 0 waited 1 s in shmem\.barrier_all|PE 1 only slept",
            pes=2)
    assert "PE 0 waited 1 s in shmem.barrier_all" in result.stdout
    assert "NUMBA_SHMEM_WAIT_TIMEOUT" in result.stdout


def test_cache_true_is_refused():
    """The same error on both backends (before, the simulator ignored cache=True)."""
    _expect(shmem_run(1, "errors.py", "cache_true"), "ShmemUsageError",
            r"kernel 'kernel' calls numba-shmem and was declared with cache=True.*remove cache=True")


def test_cache_true_is_refused_through_a_device_function():
    """A kernel reaching numba-shmem through a device function cannot be cached
    either; one that does not call numba-shmem still runs with cache=True."""
    output = _expect(shmem_run(1, "errors.py", "cache_true_device_function"), "ShmemUsageError",
                     r"^kernel 'kernel' calls numba-shmem and was declared with cache=True; numba "
                     r"cannot cache kernels that link device state, remove cache=True$")
    assert "PLAIN RAN" in output


@needs_gpu
def test_no_visible_gpu_with_the_cuda_backend():
    result = python("errors.py", "no_visible_gpu", env={"CUDA_VISIBLE_DEVICES": ""})
    _expect(result, "ShmemUsageError", r"NUMBA_SHMEM_BACKEND=cuda chose the GPU but no CUDA GPU "
                                       r"is visible; check CUDA_VISIBLE_DEVICES")


@pytest.mark.skipif(GPUS > 0, reason="needs a machine without a CUDA driver")
def test_numba_imported_first_without_a_driver_says_what_to_do():
    _expect(python("numba_first.py"), "ShmemUsageError",
            r"no CUDA driver here, and numba\.cuda was imported before numba_shmem.*import "
            r"numba_shmem first, set NUMBA_ENABLE_CUDASIM=1, or launch with shmem-run")


@needs_gpu
def test_driver_error_carries_the_result_and_leaves_the_job_usable():
    output = _expect(shmem_run(2, "errors.py", "driver_out_of_memory"), "ShmemDriverError",
                     r"cuMemCreate failed with CUDA_ERROR_OUT_OF_MEMORY", pes=2)
    assert output.count("STILL USABLE") == 2


def test_gpu_count_matches_backend():
    assert (GPUS > 0) == (BACKEND == "cuda")


@needs_gpu
def test_a_heap_growth_that_fails_on_one_pe_fails_on_every_pe():
    """Before: only a cuMemCreate failure was agreed; a failing cuMemMap on PE 1
    left PE 0 with the allocation and PE 1 without (allocators diverged)."""
    result = shmem_run(2, "heap_growth.py", timeout=300, env={"NUMBA_SHMEM_HEAP_CHUNK": "2M"})
    assert result.returncode == 0, result.stdout + result.stderr
    lines = sorted(result.stdout.splitlines())
    assert "PE 1: cuMemMap failed with CUDA_ERROR_INJECTED: by the test" in lines, lines
    assert ("PE 0: cuMemMap failed with CUDA_ERROR_INJECTED: PE 1 could not grow the symmetric "
            "heap: cuMemMap failed with CUDA_ERROR_INJECTED: by the test") in lines, lines
    assert [line for line in lines if "descriptors" in line] == [
        "PE 0: descriptors left open: 0", "PE 1: descriptors left open: 0"]
    offsets = {line.split("offset ")[1].split(",")[0] for line in lines if "offset" in line}
    assert len(offsets) == 1 and all("data ok" in line for line in lines if "offset" in line), lines


def test_the_readmes_first_example_runs_as_a_plain_script(tmp_path):
    """Before: it imported numba.cuda first, so without a GPU numba_shmem could
    no longer pick the simulator and init() refused."""
    readme = (ROOT / "README.md").read_text()
    example = readme.split("```python\n", 1)[1].split("```", 1)[0]
    script = tmp_path / "example.py"
    script.write_text(example)
    result = run_hard([sys.executable, str(script)], 120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "0 [0]"


def test_the_readme_names_no_path_outside_the_repository():
    readme = (ROOT / "README.md").read_text()
    assert "../" not in readme and "shared/" not in readme


def test_simulated_threads_share_one_shared_array():
    """numba's simulator could hand two threads of a block different arrays for
    one cuda.shared.array line (its look-up is not atomic): the fused
    AllGather + GEMM sample read garbage once in 30 runs under load."""
    result = python("shared_race.py", env={"NUMBA_ENABLE_CUDASIM": "1"}, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "fixed: 1" in result.stdout, result.stdout
