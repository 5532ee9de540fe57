"""The device API: behaviour through the launcher on both backends, the PTX it
compiles to, and its errors."""

import inspect
import re

import pytest

import numba_shmem as shmem
from conftest import BACKEND, ROOT, needs_gpu, python, shmem_run
from numba_shmem import _device_api
from numba_shmem._heap._symmetric import sync_bytes

FIRST = sync_bytes(1, lines=True)  # where a 1-PE job's first allocation starts

CHECKS = ["rma", "signal", "atomics", "waits"]
LITMUS_MODES = ("put_signal", "put_signal_nbi", "put_signal_warp", "put_signal_block",
                "put_fence_signal_op", "p_fence_signal_op", "put_nbi_quiet_signal_op",
                "put_block_barrier_all")  # tests/programs/litmus.py's MODES


@pytest.mark.parametrize("npes", [2, 4])
def test_device_api_on_every_pe(npes):
    result = shmem_run(npes, "device_api.py", *CHECKS, timeout=600,
                       env={"NUMBA_SHMEM_WAIT_TIMEOUT": "120"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(result.stdout.splitlines()) == sorted(
        f"PE {pe}: {check} ok" for pe in range(npes) for check in CHECKS)


def test_kv_transfer_sample():
    elements = 4096 if BACKEND == "sim" else 1 << 22
    result = shmem_run(4, str(ROOT / "samples/kv_transfer.py"), "--elements", elements,
                       timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = sorted(result.stdout.splitlines())
    assert lines == [f"PE 0 (prefill) sent {elements} elements to each of 3 decode PEs"] + [
        f"PE {pe} (decode) received {elements} elements, 0 wrong" for pe in (1, 2, 3)]


def test_documented_signatures_are_the_real_ones():
    for name, (params, doc) in _device_api.TABLE.items():
        fn = getattr(shmem, name)
        # positional or by name (the GPU's typing folds keywords by these names)
        positional = [p.name for p in inspect.signature(fn).parameters.values()
                      if p.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD]
        assert positional == params.split(), name
        assert fn.__doc__.startswith(doc) and doc.startswith(("Thread scope", "Warp scope",
                                                              "Block scope"))
    assert list(inspect.signature(shmem.put).parameters) == ["dest", "source", "pe", "stream"]
    for kind in _device_api.COLLECTIVE_KINDS:  # host functions, and thread forms in kernels
        both = getattr(shmem, kind)
        assert str(inspect.signature(both)) == "(team, dest, source, nelems{}, *, stream=0)".format(
            ", root" if kind == "broadcast" else ""), kind
        assert "In a kernel: Thread scope: one thread on each member calls it" in both.__doc__
    for name, params in _device_api.HOST_AND_DEVICE.items():
        positional = [p.name for p in inspect.signature(getattr(shmem, name)).parameters.values()
                      if p.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD]
        assert positional == params.split(), name


def test_the_simulators_device_functions_take_the_documented_parameters():
    """Keywords by the documented names reach the simulator's functions
    (before: its collectives took ``*rest``, so ``root=0`` was an unexpected
    keyword of ``_make_collective.<locals>.collective``)."""
    import sys

    from conftest import run_hard

    script = ("import inspect, numba_shmem; from numba_shmem import _device_api as api; "
              "from numba_shmem._sim import _device; "
              "print([name for name, (params, _doc) in api.TABLE.items() "
              "if list(inspect.signature(getattr(_device, name)).parameters) != params.split()])")
    result = run_hard([sys.executable, "-c", script], 120, {"NUMBA_SHMEM_BACKEND": "sim"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


#: the cases of ptx_device.py that the tests read compiled with debug checks,
#: and as in a job that spans nodes (each compiled only where read: the
#: spanning job's every case took 33 s on two cores, these 20)
DEBUG_CASES = ("put_block", "atomics", "iput_iget")
NODES_CASES = ("signal_op_set", "p_runtime_pe", "g_far", "atomics", "quiet_only", "put_block",
               "put_warp", "put_signal_add_block")


def _compile_sections(once_per_run, debug, nodes=False, names=()):
    """The cases ``names`` of ptx_device.py (all where none), compiled once in
    the run; with ``nodes``, as in a job that spans nodes (the path to other
    nodes compiled in)."""
    def make():
        env = {"NUMBA_SHMEM_BACKEND": "cuda", "NUMBA_SHMEM_DEBUG": "1" if debug else "0",
               **({"NUMBA_SHMEM_NODE_SIZE": "1"} if nodes else {})}
        result = python("ptx_device.py", *names, env=env, timeout=300)
        assert result.returncode == 0, result.stderr
        return result.stdout
    text = once_per_run(f"ptx_device-debug{int(debug)}-nodes{int(nodes)}", make)
    sections = re.split(r"^=== (\w+)\n", text, flags=re.MULTILINE)[1:]
    return dict(zip(sections[::2], sections[1::2]))


@pytest.fixture(scope="module")
def ptx(once_per_run):
    return _compile_sections(once_per_run, debug=False)


@pytest.fixture(scope="module")
def debug_ptx(once_per_run):
    return _compile_sections(once_per_run, debug=True, names=DEBUG_CASES)


@pytest.fixture(scope="module")
def nodes_ptx(once_per_run):
    return _compile_sections(once_per_run, debug=False, nodes=True, names=NODES_CASES)


def test_signal_wait_polls_with_acquire_at_system_scope_and_backs_off(ptx):
    code = ptx["wait_signal"]
    assert "ld.acquire.sys.b64" in code and "nanosleep.u32" in code
    # the acquire load is inside the loop: a branch goes back above it
    lines = code.splitlines()
    load = max(i for i, line in enumerate(lines) if "ld.acquire.sys" in line)
    back = [line for line in lines[load:] if re.search(r"bra\s+\$L__BB0_\d+;", line)]
    label = re.search(r"(\$L__BB0_\d+)", back[0]).group(1)
    assert any(line.startswith(label + ":") for line in lines[:load]), code


def test_signals_release_their_data(ptx):
    """put_signal's signal is a release: at GPU scope when the whole job is on
    one GPU (state field one_gpu), else at system scope. A block's or warp's
    data reaches the signalling thread through the synchronization; no full
    fence (before: fence.sc.sys, then a release)."""
    code = ptx["put_signal_set"]
    assert "st.release.gpu.b64" in code and "st.release.sys.b64" in code
    block = ptx["put_signal_add_block"]
    assert "bar.sync" in block and "fence." not in block
    assert "red.release.gpu.add.u64" in block and "red.release.sys.add.u64" in block


def test_signal_op_is_a_relaxed_atomic(ptx, nodes_ptx):
    """Like NVSHMEM's and OpenSHMEM's: fence() orders it after earlier puts.
    (Where the job spans nodes, toward a PE on another node, it is a marked
    descriptor in the proxy's ring, with no release either: keeping a newer
    copy of the ring's FREED word is the one release, at GPU scope.)"""
    code = ptx["signal_op_set"]
    assert "st.relaxed.sys.b64" in code
    assert not re.search(r"\b(st|red|atom)\.release", code) and "fence." not in code
    code = nodes_ptx["signal_op_set"]
    assert "st.relaxed.sys.b64" in code and "fence." not in code
    assert re.findall(r"\b(?:st|red|atom)\.release\.\w+\.\w+", code) == ["atom.release.gpu.max"]


def _store_runs(code):
    """The stores of each basic block of ``code`` (split at labels and
    branches) that has any, as lists of their instructions' names
    (``st.relaxed.sys.u64``, ...)."""
    runs, run = [], []
    for line in code.splitlines():
        words = line.split()
        if not words or words[0].endswith(":") or "bra" in words[0] or "bra" in words[1:2]:
            if run:
                runs.append(run)
            run = []
        elif words[0].startswith("st."):
            run.append(words[0])
    return runs + ([run] if run else [])


def test_toward_another_node_a_request_is_posted_marked(ptx, nodes_ptx):
    """Where the job spans nodes, a PE whose peer table entry is 0 gets a
    descriptor in the proxy's ring: a ticket (an atomic add at GPU scope), the
    slot's FREE word polled with acquire only where the copy of the ring's
    FREED word in GPU memory (an acquire at GPU scope) and then FREED itself
    say it may be taken. A p, g or atomic then writes its descriptor marked:
    six relaxed stores and no release (a release at system scope waits 1.4 us
    for the bus). A g polls for its answer with acquire and gives the slot
    back with a release (its data was read relaxed); a fetching atomic, whose
    answer it reads with an acquire, with a relaxed store. In a job on one
    node none of it is there."""
    code = nodes_ptx["p_runtime_pe"] + nodes_ptx["g_far"]
    assert "atom.relaxed.gpu.add.u64" in code and "ld.acquire.sys.b64" in code
    lines = nodes_ptx["p_runtime_pe"].splitlines()
    copy = [i for i, line in enumerate(lines) if "ld.acquire.gpu.b64" in line]
    over_bus = [i for i, line in enumerate(lines) if "ld.acquire.sys.b64" in line]
    # (FREED, then the slot's own word: its wait's loop may be rotated, one load twice)
    assert len(copy) == 1 and len(over_bus) >= 2 and copy[0] < min(over_bus)
    relaxed, release = "st.relaxed.sys.u64", "st.release.sys.u64"
    for section in ("p_runtime_pe", "g_far"):
        assert [relaxed] * 6 in _store_runs(nodes_ptx[section]), section
        assert ".u64 [" not in ptx[section].replace("ld.const.u64", "")
    assert release not in nodes_ptx["p_runtime_pe"]
    assert nodes_ptx["g_far"].count(release) == 1  # (the slot back)
    # five atomics, three of them fetching: no release; a relaxed store gives
    # each fetching one's slot back
    atomics = nodes_ptx["atomics"]
    assert release not in atomics and [relaxed] * 6 in _store_runs(atomics)
    assert len([run for run in _store_runs(atomics) if run == [relaxed]]) == 3


def test_a_quiet_reads_the_rings_complete_word_only_past_its_copy(ptx, nodes_ptx):
    """Where the job spans nodes, quiet reads the tickets taken and the copy
    of the ring's COMPLETE word in GPU memory, then fences (the direct path's
    fence.sc, which makes both reads acquires), then compares them: it reads
    COMPLETE over the bus only where requests may be outstanding, keeping
    what it saw (an atomic max with release), and fencing again. So a quiet
    with nothing posted toward other nodes since costs no read over the bus
    (1.3 us on an H200), and its reads are waited for with the direct path's
    stores. In a job on one node none of it is there."""
    lines = nodes_ptx["quiet_only"].splitlines()
    def at(word):
        return [i for i, line in enumerate(lines) if word in line]
    reads, fence = at("ld.relaxed.gpu.b64"), at("fence.sc.")
    over_bus, kept = at("ld.acquire.sys.b64"), at("atom.release.gpu.max.u64")
    # (fence.sc.gpu or .sys, as the job's GPUs say: one of the two runs, and
    # LLVM may place the other's block last)
    assert len(reads) == 2 and fence and over_bus and kept, nodes_ptx["quiet_only"]
    assert max(reads) < min(fence) < min(over_bus) < min(kept), nodes_ptx["quiet_only"]
    # (where it waited for COMPLETE, the fence again: what follows goes after)
    assert len(fence) >= 2 and max(fence) > min(kept), nodes_ptx["quiet_only"]
    for word in ("ld.acquire", "atom.", "ld.relaxed"):
        assert word not in ptx["quiet_only"]
    assert "fence.sc." in ptx["quiet_only"]


def _linked_registers(nodes):
    """{kernel: a thread's registers} of linked_registers.py's kernels, linked
    as for a GPU; with ``nodes``, as in a job that spans nodes."""
    result = python("linked_registers.py", timeout=300, env={
        "NUMBA_SHMEM_BACKEND": "cuda", **({"NUMBA_SHMEM_NODE_SIZE": "1"} if nodes else {})})
    assert result.returncode == 0, result.stderr
    return {name: int(count) for name, count in
            (line.split() for line in result.stdout.splitlines() if line.strip())}


def test_the_path_to_other_nodes_costs_the_direct_path_few_registers():
    """A kernel that calls a transfer or an atomic in a loop, linked as
    numba-cuda links it for a GPU (nvJitLink, link-time optimized where it
    can be), takes at most 16 registers more where the job spans nodes than
    in a job of one node (CUDA 13.5: 8 fewer to 10 more). The path to other
    nodes is inline, and what LLVM would hoist out of the caller's loop is
    computed at each call: as a function of its own, the path took the call
    ABI's registers (a block's put_block in a loop: 134 against 48), and
    values hoisted out of the loop stayed live through it (62 with the device
    state's reads hoisted)."""
    one, spanning = _linked_registers(False), _linked_registers(True)
    assert one.keys() == spanning.keys() and one
    for kernel, count in spanning.items():
        assert count <= one[kernel] + 16, (kernel, count, one[kernel])


def test_the_path_to_other_nodes_is_compiled_only_where_the_job_spans_nodes(ptx, nodes_ptx):
    """Its ring tickets (atomics at GPU scope) are taken in the kernel, inline,
    where the job spans nodes, and are not there at all in a job of one node."""
    for section in ("put_block", "put_warp", "put_signal_add_block"):
        assert "atom.relaxed.gpu.add" in nodes_ptx[section], section
        assert ".func" not in nodes_ptx[section], section
        assert "atom.relaxed.gpu.add" not in ptx[section], section


def test_peer_addresses_come_from_constant_memory(ptx):
    """The peer's base follows the acquire of a wait on a signal's round trip;
    before, it was a global load that the acquire's L1 invalidation sent to L2
    every time (0.36 us of a 0.74 us round trip)."""
    code = ptx["fence_and_quiet"]
    assert re.search(r"ld\.const\.u64\s+%rd\d+, \[numba_shmem_peers\+8\];", code), code
    assert not re.search(r"\bld(\.global)?(\.nc)?\.u64\b", code), code
    # a PE known only at run time: an indexed load of the constant table
    code = ptx["p_runtime_pe"]
    assert re.search(r"mov\.u64\s+%rd\d+, numba_shmem_peers;", code), code
    assert re.search(r"ld\.const\.u64\s+%rd\d+, \[%rd\d+\];", code), code


def test_bulk_copies_use_16_byte_vectors(ptx):
    """Also where both ends start off a 16-byte boundary by the same amount (a
    slice at an odd float64): the head up to the boundary goes first, then
    vectors; the test for it is an xor of the two addresses. A vector is two
    64-bit lanes, so that an 8-byte element in it is one access."""
    assert "ld.v2.u64" in ptx["put_block"] and "st.v2.u64" in ptx["put_block"]
    assert "bar.sync" in ptx["put_block"]
    assert re.search(r"xor\.b64\s+%rd\d+, %rd\d+, %rd\d+;", ptx["put_block"])


@pytest.mark.parametrize("npes", [2, 3])
def test_data_is_visible_once_its_signal_or_barrier_is(npes):
    """Message passing through every ordering the API offers (put_signal at each
    scope, put/p + fence + signal_op, put_nbi + quiet + signal_op, put_block +
    barrier_all_block), every element checked after every wait; on the GPU,
    3,000 rounds of each."""
    rounds = 3000 if BACKEND == "cuda" else 2
    result = shmem_run(npes, "litmus.py", rounds, timeout=600,
                       env={"NUMBA_SHMEM_WAIT_TIMEOUT": "120"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(line for line in result.stdout.splitlines() if "control" not in line) == \
        sorted(f"PE {pe}: {mode} ok" for pe in range(npes) for mode in LITMUS_MODES), \
        result.stdout


def test_fence_orders_and_quiet_completes(ptx):
    """At GPU scope when the whole job is on one GPU, else at system scope
    (a branch on the state field one_gpu)."""
    code = ptx["fence_and_quiet"]
    # the likely (one-GPU) path is laid out in line; the system-scope fences
    # are branched to from the same places
    assert code.index("st.relaxed.sys.b64") < code.index("fence.acq_rel.gpu")
    assert code.index("fence.acq_rel.gpu") < code.rindex("st.relaxed.sys.b64")
    assert code.rindex("st.relaxed.sys.b64") < code.index("fence.sc.gpu")
    assert "fence.acq_rel.sys" in code and "fence.sc.sys" in code


def test_atomics_are_system_scope_in_the_global_state_space(ptx):
    """A generic atomic waits for the one before it (182 ns each toward a peer
    on an H200, against 34 ns for global ones): the address is converted first."""
    code = ptx["atomics"]
    for instruction in ("atom.relaxed.sys.global.add.u64", "red.relaxed.sys.global.add.u64",
                        "atom.relaxed.sys.global.cas.b64", "atom.relaxed.sys.global.exch.b64",
                        "red.relaxed.sys.global.xor.b64"):
        assert instruction in code, instruction
    assert "cvta.to.global.u64" in code
    assert not re.search(r"\b(atom|red)\.relaxed\.sys\.(?!global)", code)


def test_an_element_is_never_split(ptx):
    """Before: what followed the 16-byte vectors went one byte at a time, so a
    peer polling the last int64 of a put could see it torn."""
    stores = lambda code, widths: re.findall(rf"\bst(?:\.global)?\.[bu](?:{widths})\b", code)
    assert not stores(ptx["put_int64"], "8|16|32") and stores(ptx["put_int64"], "64")
    assert not stores(ptx["put_int16"], "8") and stores(ptx["put_int16"], "16")


def test_warp_scope_synchronizes_the_lanes_the_warp_has(ptx):
    """Before: the warp forms strode by 32 and synchronized all 32 lanes, even in
    a block's last, partial warp."""
    assert re.search(r"bar\.warp\.sync\s+%r\d+;", ptx["put_warp"])
    assert not re.search(r"bar\.warp\.sync\s+-1;", ptx["put_warp"])


@pytest.mark.parametrize("case,message", [
    ("bad_cmp_literal", "shmem.wait_until: cmp=42 is not one of shmem.CMP_EQ, CMP_NE, CMP_GT, "
                        "CMP_LE, CMP_LT, CMP_GE"),
    ("bad_sig_op_literal", "shmem.signal_op: sig_op=7 is not shmem.SIGNAL_SET or "
                           "shmem.SIGNAL_ADD"),
    ("p_bool", "shmem.p: dest has dtype bool; p works on integer and float arrays"),
    ("g_complex", "shmem.g: source has dtype complex128; g works on integer and float arrays"),
    ("wait_bool", "shmem.wait_until: ivar has dtype bool; wait_until works on integer and float"),
    ("atomic_and_float", "shmem.atomic_and: dtype float32 is not supported; use int32, uint32, "
                         "int64 or uint64"),
    ("bad_signal_dtype", "shmem.put_signal: sig must be a uint64 array, got int64"),
    ("mismatched_put", "shmem.put: dest and source must have the same dtype, got float64 and "
                       "float32"),
    ("strided_put", "shmem.put: dest must be contiguous (a strided view like x[::2] is not)"),
])
def test_typing_errors_name_the_argument(ptx, case, message):
    assert "TypingError" in ptx[case] and message in ptx[case]


SIM_ERRORS = [
    ("host_call", "ShmemUsageError", r"shmem\.put_block\(\) is a device function: call it "
                                     r"inside a @cuda\.jit kernel"),
    ("bad_cmp", "ShmemUsageError", r"wait_until: cmp=42 is not one of shmem\.CMP_EQ"),
    ("bad_sig_op", "ShmemUsageError", r"shmem\.signal_op: sig_op=7 is not shmem\.SIGNAL_SET or shmem\.SIGNAL_ADD"),
    ("atomic_float_and", "ShmemUsageError", r"shmem\.atomic_and: dtype float32 is not supported"),
    ("float_and_reduce", "ShmemUsageError", r"shmem\.and_reduce_block: and needs an integer "
                                            r"dtype, got float64"),
    ("strided_put", "ShmemUsageError", r"shmem\.put: dest must be contiguous \(a strided view "
                                       r"like x\[::2\] is not\); use iput/iget"),
    ("put_pe_out_of_range", "ShmemUsageError",
     r"shmem\.put_block: pe=1 is out of range for 1 PEs \(0\.\.0\)"),
    ("atomic_off_heap", "ShmemUsageError",
     r"shmem\.atomic_add: the array is not on the symmetric heap"),
    ("signal_timeout", "ShmemTimeoutError",
     rf"PE 0 waited 1 s in shmem\.signal_wait_until for the signal at heap offset {FIRST} to be "
     r"CMP_GE 5; last value seen 2"),
    ("wait_all_timeout", "ShmemTimeoutError",
     rf"PE 0 waited 1 s in shmem\.wait_until_all for 2 values from heap offset {FIRST} to be "
     r"CMP_EQ 1; "
     r"last values seen \[1, 0\]"),
]


@pytest.mark.skipif(BACKEND != "sim", reason="simulator errors; the GPU checks these at compile "
                                             "time (typing) or traps (debug mode)")
@pytest.mark.parametrize("scenario,error,message", SIM_ERRORS, ids=[s[0] for s in SIM_ERRORS])
def test_simulator_errors(scenario, error, message):
    result = shmem_run(1, "device_errors.py", scenario, env={"NUMBA_SHMEM_WAIT_TIMEOUT": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(rf"^EXPECTED {error}: .*{message}", result.stdout, re.MULTILINE), \
        result.stdout + result.stderr


def test_debug_checks_are_compiled_in_only_when_asked(ptx, debug_ptx):
    for case in DEBUG_CASES:
        assert "trap;" not in ptx[case] and "vprintf" not in ptx[case]
        assert "trap;" in debug_ptx[case] and "vprintf" in debug_ptx[case]
    assert "numba-shmem: shmem.put_block: PE %ld called it with pe=%ld, outside 0..%ld" in \
        _strings(debug_ptx["put_block"])
    assert "shmem.atomic_fetch_add: PE %ld passed address 0x%lx, which is not on the symmetric " \
           "heap" in _strings(debug_ptx["atomics"])
    # the strided range of both arrays, in each of iput and iget
    # (numba's print makes a constant of each piece)
    strided = _strings(debug_ptx["iput_iget"])
    assert "\nelements of dest at stride\n" in strided and \
        "\nelements of source at stride\n" in strided and \
        "\n; pass a smaller nelems or stride\n" in strided, strided
    assert all(f"numba-shmem: shmem.{name}: PE\n" in strided for name in ("iput", "iget"))


def _strings(ptx):
    """The text of the PTX's byte-array string constants."""
    out = []
    for body in re.findall(r"\.b8 \S+\[\d+\] = \{([\d, ]+)\};", ptx):
        out.append(bytes(int(b) for b in body.split(",")).decode(errors="replace"))
    return "\n".join(out)


@needs_gpu
@pytest.mark.parametrize("scenario,message", [
    ("put_pe_out_of_range", r"numba-shmem: shmem\.put_block: PE 0 called it with pe=1, outside "
                            r"0\.\.0"),
    ("atomic_off_heap", r"numba-shmem: shmem\.atomic_add: PE 0 passed address 0x[0-9a-f]+, "
                        r"which is not on the symmetric heap"),
    ("runtime_cmp", r"numba-shmem: shmem\.wait_until: PE 0 got cmp = 42 which is not one of "
                    r"shmem\.CMP_EQ"),
    ("runtime_sig_op", r"numba-shmem: a signal got sig_op=7, which is not shmem\.SIGNAL_SET or "
                       r"shmem\.SIGNAL_ADD"),
    ("put_overrun", r"numba-shmem: shmem\.put_block: PE 0 asked to copy 20 elements but dest on "
                    r"PE 0 holds 16 ; pass a source no larger than dest"),
    ("get_overrun", r"numba-shmem: shmem\.get: PE 0 asked to copy 20 elements but source on "
                    r"PE 0 holds 16 ; pass a dest no larger than source"),
    ("iput_overrun", r"numba-shmem: shmem\.iput: PE 0 asked for 10 elements of dest at stride 2 "
                     r", up to element 18 , but dest holds 16 ; pass a smaller nelems or stride"),
    ("iget_overrun", r"numba-shmem: shmem\.iget: PE 0 asked for 6 elements of source at stride "
                     r"3 , up to element 15 , but source holds 8 ; pass a smaller nelems or "
                     r"stride"),
])
def test_debug_checks_stop_the_kernel_naming_the_function_and_pe(scenario, message):
    result = shmem_run(1, "device_errors.py", scenario, timeout=120,
                       env={"NUMBA_SHMEM_DEBUG": "1"})
    output = result.stdout + result.stderr
    assert result.returncode != 0 and re.search(message, output), output


@pytest.mark.skipif(BACKEND != "sim", reason="the simulator's debug mode; the GPU traps (above)")
@pytest.mark.parametrize("scenario,message", [
    ("put_overrun", r"shmem\.put_block: PE 0 asked to copy 20 elements but dest on PE 0 holds "
                    r"16; pass a source no larger than dest"),
    ("get_overrun", r"shmem\.get: PE 0 asked to copy 20 elements but source on PE 0 holds 16; "
                    r"pass a dest no larger than source"),
    ("iput_overrun", r"shmem\.iput: PE 0 asked for 10 elements of dest at stride 2, up to "
                     r"element 18, but dest holds 16; pass a smaller nelems or stride"),
    ("iget_overrun", r"shmem\.iget: PE 0 asked for 6 elements of source at stride 3, up to "
                     r"element 15, but source holds 8; pass a smaller nelems or stride"),
])
def test_debug_mode_refuses_a_transfer_past_the_symmetric_array(scenario, message):
    result = shmem_run(1, "device_errors.py", scenario, env={"NUMBA_SHMEM_DEBUG": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(rf"^EXPECTED ShmemUsageError: .*{message}", result.stdout, re.MULTILINE), \
        result.stdout + result.stderr


@pytest.mark.long
@pytest.mark.parametrize("npes", [2, 3])
def test_warp_and_block_transfers_move_every_element(npes):
    """Before, on the GPU: put_warp of 1,024 int32 from a 16-thread block copied
    512 (the warp scope strode by 32 lanes). On the simulator, the quick cases
    and the puts and gets past dest (before: an error from numpy)."""
    args = ("quick",) if BACKEND == "sim" else ()
    result = shmem_run(npes, "transfers.py", *args, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(result.stdout.splitlines()) == sorted(
        f"PE {pe}: {check} ok" for pe in range(npes) for check in ("scopes", "overrun"))


@needs_gpu
@pytest.mark.parametrize("scenario", ["runtime_cmp", "runtime_sig_op"])
def test_a_bad_cmp_or_sig_op_at_run_time_stops_the_kernel(scenario):
    """Without debug mode too: before, a wait with cmp=42 never ended and a
    signal with sig_op=7 silently added."""
    result = shmem_run(1, "device_errors.py", scenario, timeout=120,
                       env={"NUMBA_SHMEM_WAIT_TIMEOUT": "0"})
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "NO ERROR" not in output, output


@needs_gpu
def test_debug_mode_turns_a_hang_into_a_trap_naming_the_wait():
    result = shmem_run(1, "device_errors.py", "debug_timeout", timeout=120,
                       env={"NUMBA_SHMEM_DEBUG": "1", "NUMBA_SHMEM_WAIT_TIMEOUT": "1"})
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert re.search(r"numba-shmem: PE 0 timed out in signal_wait_until at address \d+ waiting "
                     r"for 5 last seen 2", output), output
