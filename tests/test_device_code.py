"""What the device side compiles to (no GPU needed: PTX for sm_90), and the
host's side of the proxy's resident kernel."""

import os
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


def test_a_job_on_one_node_compiles_none_of_the_path_to_other_nodes():
    """There ``_far`` is a constant false, so the sources compiled for it drop
    each branch that a plain ``_far(name)`` takes before numba types them: the
    same PTX (every PTX program of the tests, once its unused declarations
    are sorted), in two thirds of the time (ptx_collectives.py: 74 s to 47
    s). A test of anything else stays as it is."""
    import sys
    import textwrap

    from conftest import run_hard

    script = textwrap.dedent("""
        from numba_shmem._cuda._proxied import without_far_paths
        print(without_far_paths(
            "def impl(pe, q):\\n"
            "    if _far(pe):\\n        a = 1\\n    else:\\n        a = 2\\n"
            "    if not _far(pe):\\n        b = 3\\n"
            "    if q:\\n        b = 5\\n    elif _far(pe):\\n        b = 6\\n"
            "    else:\\n        b = 7\\n"
            "    if _far(pe):\\n        return 0\\n"
            "    if _far(f(q)):\\n        c = 4\\n"
            "    return a + b\\n"))""")
    result = run_hard([sys.executable, "-c", script], 120, {"NUMBA_SHMEM_BACKEND": "cuda"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "def impl(pe, q):", "    a = 2", "    b = 3", "    if q:", "        b = 5", "    else:",
        "        b = 7", "    pass", "    if _far(f(q)):", "        c = 4", "    return a + b"]


def test_the_copy_loop_writes_every_byte_once_in_whole_elements():
    """The source of every put/get loop, run in Python thread by thread on
    random addresses, sizes, group sizes and element widths."""
    result = python("copy_plan.py", 2000, 1, env={"NUMBA_SHMEM_BACKEND": "cuda"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok 2000 cases"


def test_the_proxy_applies_every_atomic_and_signal_with_a_kernel_that_assembles():
    """The target side of the proxy (_cuda/_target.py): apply_batch has a case
    for every op of each dtype (the four float ops for floats) and every signal
    op, each the direct path's system-scope instruction, picked by a jump
    table; nvJitLink must assemble it."""
    import subprocess
    import sys

    from conftest import run_hard

    script = ("import sys; from numba_shmem._cuda._target import _batch_source; "
              "sys.stdout.write(_batch_source().decode())")
    result = run_hard([sys.executable, "-c", script], 120, {"NUMBA_SHMEM_BACKEND": "cuda"})
    assert result.returncode == 0, result.stderr
    source = result.stdout
    # one case per (dtype, op) and per signal op: 8 ops on 4 integer types, 4 on 2 floats, 3;
    # in apply_batch and in serve_batches, the resident kernel that waits for batches
    assert len(re.findall(r"^\$(?:A\d+_\w+|S\d):$", source, re.M)) == 2 * (8 * 4 + 4 * 2 + 3)
    # each picked by one indirect branch: an atomic's table has an entry for every dtype
    # and op (none where a float has no such op), the signals' one for each op
    tables = re.findall(r"^\$(ATOMICS|SIGNALS): \.branchtargets (.*);$", source, re.M)
    assert [(name, len(targets.split(", "))) for name, targets in tables] == \
        [("ATOMICS", 6 * 8), ("SIGNALS", 3)] * 2
    atomics = tables[0][1].split(", ")
    assert atomics[2 * 8 + 4] == "$A2_add" and atomics[4 * 8 + 4] == "$A4_add"  # int64, float32
    assert atomics[4 * 8 + 5] == "$STORE" and tables[1][1] == "$S0, $S1, $S2"
    assert source.count("brx.idx %r30, $ATOMICS;") == 2 and "setp.eq.u64 %p1, %rd7," not in source
    serve = source.split(".visible .entry serve_batches")[1]
    # every thread reads its mailbox word in each poll; all carry the batch's number: a vote
    assert "@%p5 ld.relaxed.sys.u64 %rd25, [%rd24];" in serve
    assert "vote.sync.all.pred %p6, %p6, 0xffffffff;" in serve
    # then the count's SERVICE_MARKED bit apart from it, before the count is looked at
    split = ("vote.sync.all.pred %p6, %p6, 0xffffffff;\n    @!%p6 bra $WAIT;\n"
             "    and.b32 %r25, %r17, 1073741824;\n    and.b32 %r17, %r17, 1073741823;\n"
             "    setp.gt.u32 %p6, %r17, 4;\n")
    assert split in serve, serve
    # a larger batch's records after the mailbox (a fence); old values, then applied
    # (release), or, for a batch answered marked, with no release
    assert "$FROM_RECORDS:\n    fence.acq_rel.sys;" in serve
    assert "@!%p2 st.release.sys.u64 [%rd14+256], %rd16;" in serve
    assert "@%p2 st.relaxed.sys.u64 [%rd14+256], %rd16;" in serve
    # the warp puts the records into shared memory (the mailbox's halves, or copies of
    # the records), its first thread applies them from there
    assert serve.count("bar.warp.sync 0xffffffff;") == 2 and "st.shared.u64 [%rd21+24]" in serve
    assert "@!%p6 st.shared.u32 [%rd27], %r19;" in serve
    assert "ld.shared.u64 %rd3, [%rd21+24];" in serve and "ld.volatile.u64 %rd1" in serve
    # an old value goes back over the bus only where the request fetches (bit 24 of its
    # code): into its record, or, in serve_batches for a batch answered marked, as two
    # words (its halves, each with the batch's number above it) into the control block
    fetches = "and.b64 %rd9, %rd6, 16777216;\n    setp.eq.u64 %p1, %rd9, 0;\n    @%p1 bra $NEXT;\n"
    back = "st.volatile.u64 [%rd13+32], %rd5;"
    assert source.count(fetches) == 2 and source.count(fetches + "    " + back) == 1
    marked = serve.split(fetches)[1].split(back)[0]
    assert marked.startswith("    setp.ne.u32 %p2, %r25, 0;\n    @!%p2 bra $OLD;\n"), marked
    assert "st.relaxed.sys.u64 [%rd28+448], %rd30;" in marked and "st.relaxed" in marked
    assert "[%rd28+456], %rd31;" in marked and "release" not in marked and "fence" not in marked
    assert "atom.relaxed.sys.global.cas.b32 %r3, [%rd1], %r2, %r1;" in source  # cond, then value
    assert "atom.relaxed.sys.global.add.f64 %fd3, [%rd1], %fd1;" in source
    assert "red.release.sys.global.max.u64 [%rd1], %rd2;" in source
    assert "st.release.sys.global.b64 [%rd1], %rd2;" in source
    # and nvJitLink assembles it for a Hopper GPU, as the driver's JIT must when it loads it
    link = ("import sys; from cuda.core import Linker, LinkerOptions, ObjectCode; "
            "Linker(ObjectCode.from_ptx(sys.stdin.buffer.read(), name='target.ptx'), "
            "options=LinkerOptions(arch='sm_90')).link('cubin'); print('linked')")
    done = subprocess.run([sys.executable, "-c", link], input=source.encode(),
                          capture_output=True, timeout=120)
    assert done.stdout.decode().split() == ["linked"], done.stderr.decode()


@pytest.mark.parametrize("reductions", [0, 1])
def test_the_compiled_target_applies_batches_as_stream_memory_operations_where_it_can(
        reductions):
    """A batch of signals that set or add, p's and atomics that set, add, and,
    or and fetch nothing goes as one cuStreamBatchMemOp (reductions only where
    the GPU has them), each operation laid out as cuda.bindings lays it out;
    one record of another kind sends the batch to the kernel. The driver is
    faked (tests/programs/target_memops.py), so no GPU is needed."""
    result = python("target_memops.py", reductions, env={"NUMBA_SHMEM_BACKEND": "cuda"})
    assert result.returncode == 0, result.stderr
    if result.stdout.startswith("skip:"):
        pytest.skip(result.stdout[5:].strip())
    assert result.stdout.split()[0] == "ok"


def test_the_resident_kernels_host_side_posts_each_batch_once_and_sees_it_stop():
    """tests/programs/service_handshake.py: ``serve_batches``' control block
    against a thread playing the kernel, the driver's functions stood in for
    (the kernel itself runs on the GPU only, under MPS)."""
    result = python("service_handshake.py", env={**os.environ, "NUMBA_ENABLE_CUDASIM": "0"},
                    timeout=300)
    assert result.stdout.split() == ["ok"], result.stdout + result.stderr


def test_a_marked_descriptor_decodes_to_what_the_kernel_posted():
    """The source a kernel posts a marked request with, run as Python, against
    the proxy's decoding of it, every field to every bit
    (tests/programs/marked_words.py, property-tested)."""
    result = python("marked_words.py", env={"NUMBA_SHMEM_BACKEND": "cuda"}, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "ok"


def test_a_wait_spins_then_naps_and_looks_whether_its_pe_left():
    """The waits' back-off, its source run as Python against a fake clock: no
    nap within the first polls or the spin's time, naps doubling up to their
    most, the leaving flag looked at every so many polls and only there
    (tests/programs/backoff_plan.py, property-tested)."""
    result = python("backoff_plan.py", env={"NUMBA_SHMEM_BACKEND": "cuda"}, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "ok"
