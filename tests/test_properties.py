"""Property tests: random programs run on a live group of PEs, checked against
plain Python reference models.

The group (tests/harness.py) stays up across examples, so hypothesis can try
many and shrink a failure without starting processes each time.
"""

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import mpi_missing
from harness import PEGroup

THOROUGH = os.environ.get("HYPOTHESIS_PROFILE") == "thorough"


def examples(n):
    """``n`` examples in CI; five times as many, not derandomized, in the thorough
    profile (sized for one 10-minute run on the GPU machine, where the CI profile's
    properties took 70 s)."""
    return settings(max_examples=n * 5 if THOROUGH else n, deadline=None)


@pytest.fixture(scope="module", params=[2, 4, pytest.param("nodes", marks=pytest.mark.nodes)],
                ids=["2pes", "4pes", "4pes-2nodes"])
def group(request, mpi_gpu_env_module):
    """2 or 4 PEs on one node; or 4 PEs in 2 emulated nodes under mpiexec, each
    with a neighbour reached directly and two through the proxy (on the GPU,
    sharing it through the module's MPS daemon)."""
    env = {"NUMBA_SHMEM_WAIT_TIMEOUT": "60", "NUMBA_SHMEM_HEAP_SIZE": "64M"}
    if request.param == "nodes":
        if mpi_missing():
            pytest.skip(mpi_missing())
        pes = PEGroup(4, env={**env, **mpi_gpu_env_module}, node_size=2)
    else:
        pes = PEGroup(request.param, env=env)
    yield pes
    pes.close()


# -- RMA programs ------------------------------------------------------------------

PUT, GET, P, G, IPUT, IGET, PUT_BLOCK, GET_WARP = range(8)
SIZE = 96
DTYPES = {"int32": np.int32, "int64": np.int64, "float64": np.float64, "uint8": np.uint8}


@st.composite
def rma_programs(draw, npes):
    dtype = draw(st.sampled_from(sorted(DTYPES)))
    initial = draw(st.lists(st.integers(0, 200), min_size=SIZE, max_size=SIZE))
    phases = []
    for _ in range(draw(st.integers(1, 4))):
        issuer = draw(st.integers(0, npes - 1))
        ops = []
        for _ in range(draw(st.integers(1, 5))):
            kind = draw(st.integers(PUT, GET_WARP))
            target = draw(st.integers(0, npes - 1))
            if kind in (IPUT, IGET):
                s1, s2 = draw(st.integers(1, 4)), draw(st.integers(1, 4))
                n = draw(st.integers(1, SIZE // max(s1, s2)))
                a = draw(st.integers(0, SIZE - 1 - (n - 1) * s1))
                b = draw(st.integers(0, SIZE - 1 - (n - 1) * s2))
            else:
                n = 1 if kind in (P, G) else draw(st.integers(1, SIZE))
                a = draw(st.integers(0, SIZE - n))
                b = draw(st.integers(0, SIZE - n))
                s1 = s2 = 1
            ops.append([kind, target, a, b, n, s1, s2])
        phases.append((issuer, ops))
    return dtype, initial, phases


def rma_model(npes, dtype, initial, phases):
    dt = np.dtype(DTYPES[dtype])
    heap = [np.array(initial).astype(dt) for _ in range(npes)]
    source = [(np.arange(SIZE) * 7 + 3 + 1000 * pe).astype(dt) for pe in range(npes)]
    scratch = [np.zeros(SIZE, dt) for _ in range(npes)]
    g = []
    for issuer, ops in phases:
        seen = [0] * len(ops)
        for k, (kind, pe, a, b, n, s1, s2) in enumerate(ops):
            if kind in (PUT, PUT_BLOCK):
                heap[pe][a:a + n] = source[issuer][b:b + n]
            elif kind in (GET, GET_WARP):
                scratch[issuer][a:a + n] = heap[pe][b:b + n]
            elif kind == P:
                heap[pe][a] = source[issuer][b]
            elif kind == G:
                seen[k] = heap[pe][a]
            elif kind == IPUT:
                heap[pe][a:a + n * s1:s1] = source[issuer][b:b + n * s2:s2]
            elif kind == IGET:
                scratch[issuer][a:a + n * s1:s1] = heap[pe][b:b + n * s2:s2]
        g.append(seen)
    return heap, scratch, g


@pytest.mark.long
@given(data=st.data())
@examples(30)
def test_rma_programs_leave_every_heap_as_the_model_says(group, data):
    dtype, initial, phases = data.draw(rma_programs(group.npes))
    args = [{"dtype": dtype, "size": SIZE, "initial": initial,
             "phases": [ops if issuer == pe else [] for issuer, ops in phases]}
            for pe in range(group.npes)]
    results = group.run("rma_program", args)
    heap, scratch, g = rma_model(group.npes, dtype, initial, phases)
    for pe, result in enumerate(results):
        assert result["heap"] == heap[pe].tolist(), f"PE {pe}'s heap"
        assert result["scratch"] == scratch[pe].tolist(), f"PE {pe}'s scratch"
    for index, (issuer, ops) in enumerate(phases):
        got = results[issuer]["phases"][index]["g"]
        for k, op in enumerate(ops):
            if op[0] == G:
                assert got[k] == g[index][k], f"g in phase {index}, op {k}"


# -- atomics -------------------------------------------------------------------------

A_FETCH_INC, A_FETCH_ADD, A_ADD, A_INC, A_OR, A_XOR, A_AND, A_CAS_TICKET = range(8)
FAMILIES = {"add": (A_FETCH_INC, A_FETCH_ADD, A_ADD, A_INC), "or": (A_OR,), "xor": (A_XOR,),
            "and": (A_AND,), "cas": (A_CAS_TICKET,)}
FETCHING = (A_FETCH_INC, A_FETCH_ADD, A_CAS_TICKET)


@st.composite
def atomic_programs(draw, npes):
    ncounters = draw(st.integers(1, 4))
    families = [draw(st.sampled_from(sorted(FAMILIES))) for _ in range(ncounters)]
    initial = [draw(st.integers(0, 1 << 20)) for _ in range(ncounters)]
    per_pe = []
    for _pe in range(npes):
        ops = []
        for _ in range(draw(st.integers(0, 4))):
            c = draw(st.integers(0, ncounters - 1))
            kind = draw(st.sampled_from(FAMILIES[families[c]]))
            ops.append([kind, c, draw(st.integers(0, npes - 1)), draw(st.integers(1, 1000))])
        per_pe.append(ops)
    threads = draw(st.sampled_from([1, 7, 32, 64]))
    return ncounters, families, initial, per_pe, threads


def atomic_model(npes, ncounters, initial, per_pe, threads):
    """Final counters on every PE; with all increments positive."""
    final = [list(initial) for _ in range(npes)]
    for ops in per_pe:
        for kind, c, pe, base in ops:
            for tid in range(threads):
                v = base + tid
                if kind in (A_FETCH_INC, A_INC, A_CAS_TICKET):
                    final[pe][c] += 1
                elif kind in (A_FETCH_ADD, A_ADD):
                    final[pe][c] += v
                elif kind == A_OR:
                    final[pe][c] |= 1 << (v % 63)
                elif kind == A_XOR:
                    final[pe][c] ^= v
                elif kind == A_AND:
                    final[pe][c] &= ~(1 << (v % 63))
    return final


@given(data=st.data())
@examples(50)
def test_atomics_lose_no_update_and_fetch_a_consistent_order(group, data):
    ncounters, families, initial, per_pe, threads = data.draw(atomic_programs(group.npes))
    args = [{"ncounters": ncounters, "initial": initial, "ops": per_pe[pe], "threads": threads}
            for pe in range(group.npes)]
    results = group.run("atomics", args)
    final = atomic_model(group.npes, ncounters, initial, per_pe, threads)
    for pe in range(group.npes):
        assert results[pe]["counters"] == final[pe], f"PE {pe}'s counters"
    # fetched values, gathered per (target PE, counter)
    fetched, kinds = {}, {}
    for pe, ops in enumerate(per_pe):
        values = results[pe]["fetched"]
        for k, (kind, c, target, base) in enumerate(ops):
            kinds.setdefault((target, c), set()).add(kind)
            if kind in FETCHING:
                got = values[k * threads:(k + 1) * threads]
                fetched.setdefault((target, c), []).extend(got)
    for (target, c), got in fetched.items():
        assert len(set(got)) == len(got), f"a duplicate fetch on PE {target} counter {c}: a lost update"
        assert all(initial[c] <= v < final[target][c] for v in got)
        if kinds[(target, c)] <= {A_FETCH_INC, A_CAS_TICKET}:
            # only unit increments: the fetches are exactly the values passed through
            assert sorted(got) == list(range(initial[c], initial[c] + len(got)))


# -- signals ---------------------------------------------------------------------------

@given(sizes=st.lists(st.integers(1, 600), min_size=1, max_size=5),
       data=st.data())
@examples(15)
def test_data_is_complete_whenever_its_signal_is_seen(group, sizes, data):
    scopes = data.draw(st.lists(st.integers(0, 2), min_size=len(sizes), max_size=len(sizes)))
    ops = data.draw(st.lists(st.integers(0, 1), min_size=len(sizes), max_size=len(sizes)))
    errors = group.run("signals", [{"sizes": sizes, "scopes": scopes, "ops": ops}] * group.npes)
    assert errors == [0] * group.npes


# -- collectives ------------------------------------------------------------------------

COLLECTIVE_NAMES = ["broadcast", "fcollect", "alltoall"] + [
    f"{op}_{what}" for op in ("sum", "prod", "min", "max", "and", "or", "xor")
    for what in ("reduce", "reducescatter")]
REDUCE = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum,
          "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}


@st.composite
def collective_calls(draw, npes):
    # every strided team of the world, the world itself first (what examples shrink to)
    teams = [(0, 1, npes)] + [(start, stride, size) for start in range(npes)
                              for stride in range(1, npes) for size in range(1, npes + 1)
                              if start + (size - 1) * stride < npes and
                              (start, stride, size) != (0, 1, npes)]
    start, stride, size = draw(st.sampled_from(teams))
    name = draw(st.sampled_from(COLLECTIVE_NAMES))
    bitwise = name.split("_")[0] in ("and", "or", "xor")
    dtype = draw(st.sampled_from(["int32", "int64"] if bitwise else
                                 ["int32", "int64", "float32", "float64"]))
    nelems = draw(st.one_of(st.integers(0, 8), st.integers(9, 40)))  # host forms: several blocks
    length = max(1, size * nelems)
    sources = [draw(st.lists(st.integers(0, 9), min_size=length, max_size=length))
               for _ in range(size)]
    form = draw(st.sampled_from(["host", "block", "warp", "thread"]))
    # reductions may run in place (dest is source), in their host form
    in_place = form == "host" and "reduce" in name and draw(st.booleans())
    return {"name": name, "form": form, "in_place": in_place, "dtype": dtype,
            "nelems": nelems, "team": [start, stride, size],
            "root": draw(st.integers(0, size - 1)),
            "chunk": draw(st.sampled_from([16, 64, 65536])), "sources": sources}


def collective_model(name, dtype, nelems, size, root, sources, in_place):
    """Every member's whole dest, in team order."""
    dt = np.dtype(dtype)
    src = [np.array(s, dt) for s in sources]
    out = []
    for rank in range(size):
        dest = src[rank].copy() if in_place else np.zeros(max(1, size * nelems), dt)
        if name == "broadcast":
            dest[:nelems] = src[root][:nelems]
        elif name == "fcollect":
            dest[:size * nelems] = np.concatenate([s[:nelems] for s in src])
        elif name == "alltoall":
            dest[:size * nelems] = np.concatenate([s[rank * nelems:(rank + 1) * nelems]
                                                   for s in src])
        else:
            op, what = name.split("_")
            block = rank if what == "reducescatter" else 0
            acc = src[0][block * nelems:(block + 1) * nelems]
            for s in src[1:]:
                acc = REDUCE[op](acc, s[block * nelems:(block + 1) * nelems])
            dest[:nelems] = acc
        out.append(dest.tolist())
    return out


@pytest.mark.long
@given(data=st.data())
@examples(40)
def test_collectives_on_random_teams_equal_numpy(group, data):
    call = data.draw(collective_calls(group.npes))
    results = group.run("collective", [call] * group.npes)
    start, stride, size = call["team"]
    members = [start + i * stride for i in range(size)]
    want = collective_model(call["name"], call["dtype"], call["nelems"], size, call["root"],
                            call["sources"], call["in_place"])
    for pe, result in enumerate(results):
        if pe in members:
            assert result == want[members.index(pe)], f"PE {pe} (member {members.index(pe)})"
        else:
            assert result is None


# -- allocation -------------------------------------------------------------------------

steps = st.lists(st.one_of(
    st.tuples(st.just("alloc"), st.integers(0, 100000), st.sampled_from([1, 256, 4096, 1 << 16])),
    st.tuples(st.just("free"), st.integers(0, 50))), max_size=25)


@given(program=steps)
@examples(100)
def test_allocations_stay_symmetric_aligned_and_disjoint(group, program):
    results = group.run("allocations", [{"steps": [list(s) for s in program]}] * group.npes)
    record = results[0]["record"]
    for pe, result in enumerate(results):
        assert result["record"] == record, f"PE {pe} placed arrays elsewhere than PE 0"
        assert result["free"], f"PE {pe}'s heap is not whole again after freeing everything"
    live = {}
    capacity = results[0]["capacity"]
    for entry in record:
        if entry[0] == "alloc":
            _, offset, nbytes, align = entry
            assert offset % max(align, 256) == 0
            end = offset + max(nbytes, 1)
            assert end <= capacity
            assert all(end <= start or stop <= offset for start, stop in live.values())
            live[offset] = (offset, end)
        else:
            del live[entry[1]]
