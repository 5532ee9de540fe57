"""Drive the compiled proxy's target functions (_cuda/_target.py) with a fake
driver (ctypes callbacks that record their calls) and check which batches go
as stream memory operations, and how each operation is laid out; that a copy
into the heap is asked for and not waited for, and that the marks (the landing
segments', then settle's) record, wait for and ask about their own events. No
GPU needed.

    python target_memops.py REDUCTIONS(0|1)
"""

import ctypes
import sys

import numpy as np

from numba_shmem._cuda import _target
from numba_shmem._transport import _engine, _ring

reductions = sys.argv[1] == "1"
calls = []
query_rc = [0]  # what the fake cuStreamQuery and cuEventQuery return


def recorder(name):
    def record(*args):
        if name == "cuStreamBatchMemOp_v2":  # the operations are read at the call
            stream, count, params, flags = args
            words = np.ctypeslib.as_array((ctypes.c_uint64 * (count * 6)).from_address(params))
            calls.append((name, args, words.reshape(count, 6).copy()))
        elif name == "cuMemcpy2DAsync_v2":  # (so are a 2D copy's parameters)
            words = np.ctypeslib.as_array((ctypes.c_uint64 * _target.COPY2D_WORDS)
                                          .from_address(args[0]))
            calls.append((name, args, words.copy()))
        else:
            calls.append((name, args, None))
        return query_rc[0] if name in ("cuStreamQuery", "cuEventQuery") else 0
    return record


fake = tuple(kind(recorder(name)) for name, kind in _target.DRIVER.items())
templates, where = _target._memop_templates()
if reductions and (where[2:, 0] < 0).any():
    print("skip: this cuda.bindings lacks atomic reductions of 4 or 8 bytes")
    sys.exit(0)
if not reductions:
    where[2:] = -1
memops = np.zeros((_engine.PEND_MAX, _target.MEMOP_WORDS), np.uint64)
count = np.zeros(1, np.int64)
counts = np.zeros(4, np.int64)  # batches each way; writes that may not have landed; work asked
events = np.arange(100, 100 + _engine.MARKS, dtype=np.uint64)  # (fake handles)
copy2d, copy2d_where = _target._copy2d_template()
functions = _target._functions(fake, 7, 9, 1234, count.ctypes.data, memops.ctypes.data,
                               templates, where, counts.ctypes.data, events.ctypes.data,
                               copy2d.ctypes.data, copy2d_where,
                               _engine.PEND_MAX + 1, 0, 0, 0)  # (memops for any batch; no service)
copy_in = _engine.COPY_IN(functions[0].address)
mark, reached, passed = (_engine.MARK(f.address) for f in functions[4:7])
apply = _engine.APPLY(functions[2].address)
settled = _engine.SETTLED(functions[3].address)
pend = np.zeros((_engine.PEND_MAX, _engine.PEND_WORDS), np.int64)

SET, ADD, MAX = 0, 1, _ring.SIGNAL_MAX
U32, I64, F64 = _ring.DTYPES.index("uint32"), _ring.DTYPES.index("int64"), \
    _ring.DTYPES.index("float64")
OP = {name: k for k, name in enumerate(_ring.ATOMIC_OPS)}


def run(records):
    """Apply ``records`` (address, code, value); the calls it made."""
    del calls[:]
    pend[:len(records), :3] = records
    pend[:len(records), 3:] = 0
    assert apply(pend.ctypes.data, len(records)) == 0
    return [(name, args, words) for name, args, words in calls]


def signal(op, address, value):
    return address, _ring.code(_ring.SIGNAL, 0, op), value


def atomic(dtype, op, address, value, fetch=0):
    return address, _ring.code(_ring.ATOMIC, dtype, OP[op], fetch), value


# writes: a signal set, a p of 8 and of 4 bytes (an atomic set of its width)
done = run([signal(SET, 0x1000, 5), atomic(I64, "set", 0x2000, -1),
            atomic(U32, "set", 0x3004, 0x1_0000_0007)])
# (no synchronize: the batch is complete once settled() says so, through cuStreamQuery)
(name, args, words), = done
assert name == "cuStreamBatchMemOp_v2" and args[:2] == (7, 3) and args[3] == 0, done
del calls[:]
query_rc[0] = 600  # CUDA_ERROR_NOT_READY: not yet
assert settled() == -1
query_rc[0] = 700  # an error: itself
assert settled() == 700
query_rc[0] = 0
assert settled() == 0 and [(name, args) for name, args, _ in calls] == [("cuStreamQuery", (7,))] * 3
del calls[:]
assert settled() == 0 and not calls, calls  # (seen idle and given nothing since: not asked)
W64 = int(_target.cu.CUstreamBatchMemOpType.CU_STREAM_MEM_OP_WRITE_VALUE_64)
W32 = int(_target.cu.CUstreamBatchMemOpType.CU_STREAM_MEM_OP_WRITE_VALUE_32)
assert [int(w) & 0xFFFF_FFFF for w in words[:, 0]] == [W64, W64, W32]
a, v = where[1]
assert words[0, a] == 0x1000 and words[0, v] == 5
assert words[1, a] == 0x2000 and words[1, v] == np.uint64(2**64 - 1)
a, v = where[0]
assert words[2, a] == 0x3004 and words[2, v] == 7  # (a 32-bit value's bits only)

# a full batch goes in calls of at most MEMOP_CALL operations
done = run([signal(SET, 0x1000 + 8 * k, k) for k in range(_engine.PEND_MAX)])
sizes = [args[1] for name, args, _ in done if name == "cuStreamBatchMemOp_v2"]
assert sizes == [_target.MEMOP_CALL] * (_engine.PEND_MAX // _target.MEMOP_CALL), done
assert len(done) == len(sizes)
assert [int(w) for w in done[1][2][:, where[1, 1]]] == list(range(128, 256))

# a reduction after writes of an earlier batch that may not have landed (no synchronize
# came after them, settled() has not said so) goes to the kernel; once settled, not
assert counts[2] == 1
done = run([signal(ADD, 0x1000, 3)])
assert [name for name, _, _ in done] == ["cuLaunchKernel", "cuStreamSynchronize"], done
assert counts[2] == 0  # (the kernel's synchronize)
run([signal(SET, 0x1000, 1)])
query_rc[0] = 600
assert settled() == -1 and counts[2] == 1
query_rc[0] = 0
assert settled() == 0 and counts[2] == 0

# a signal add and atomics that add, and, or: reductions where the GPU has them
batch = [signal(ADD, 0x1000, 3), atomic(U32, "add", 0x3000, 2),
         atomic(I64, "and", 0x2000, 6), atomic(I64, "or", 0x2008, 1)]
done = run(batch)
if reductions:
    assert done[0][0] == "cuStreamBatchMemOp_v2" and done[0][1][1] == 4, done
    words = done[0][2]
    for row, k in zip(words, (3, 2, 5, 7)):
        assert np.array_equal(np.where(np.arange(6) == where[k, 0], 0,
                                       np.where(np.arange(6) == where[k, 1], 0, row)),
                              templates[k]), (row, templates[k])
    assert words[0, where[3, 1]] == 3 and words[1, where[2, 0]] == 0x3000
else:
    assert [name for name, _, _ in done] == ["cuLaunchKernel", "cuStreamSynchronize"], done
    assert count[0] == 4 and done[0][1][0] == 9 and done[0][1][8] == 7

# a reduction after a write (a put_signal's data, then its signal added) goes to the kernel,
# whose release orders them; reductions, then writes, stay stream memory operations
done = run([atomic(I64, "set", 0x2000, 7), signal(ADD, 0x1000, 1)])
assert [name for name, _, _ in done] == ["cuLaunchKernel", "cuStreamSynchronize"], done
done = run([signal(ADD, 0x1000, 1), atomic(I64, "set", 0x2000, 7)])
assert done[0][0] == ("cuStreamBatchMemOp_v2" if reductions else "cuLaunchKernel"), done

# one record that no stream memory operation does sends the whole batch to the kernel
for odd in (signal(MAX, 0x1000, 9), atomic(I64, "add", 0x2000, 1, fetch=1),
            atomic(F64, "add", 0x2000, 1), atomic(I64, "xor", 0x2000, 1),
            atomic(I64, "compare_swap", 0x2000, 1, fetch=1)):
    done = run([signal(SET, 0x1000, 1), odd])
    assert [name for name, _, _ in done] == ["cuLaunchKernel", "cuStreamSynchronize"], odd
    assert count[0] == 2

# a copy into the heap is asked for on the stream and not waited for; its bytes may not
# have landed, so a reduction after it goes to the kernel; the marks are per segment
del calls[:]
assert copy_in(0x5000, 0x6000, 4096, 4096, 1) == 0 and counts[2] == 1
assert [(name, args) for name, args, _ in calls] == [("cuMemcpyHtoDAsync_v2",
                                                      (0x5000, 0x6000, 4096, 7))], calls
# runs of a batch's chunks, a pitch apart where they landed: one 2D copy, host to device
del calls[:]
assert copy_in(0x5000, 0x6000, 8192, 8240, 3) == 0
[(name, args, words)] = calls
assert name == "cuMemcpy2DAsync_v2" and args == (copy2d.ctypes.data, 7), calls
fields = dict(zip(_target.COPY2D_FIELDS, words[copy2d_where]))
assert fields == {"srcHost": 0x6000, "srcPitch": 8240, "dstDevice": 0x5000, "dstPitch": 8192,
                  "WidthInBytes": 8192, "Height": 3}, fields
assert words[2] == 1 and words[9] == 2  # (memory types: host, device)
done = run([signal(ADD, 0x1000, 1)])
assert [name for name, _, _ in done] == ["cuLaunchKernel", "cuStreamSynchronize"], done
del calls[:]
assert mark(2) == 0 and reached(2) == 0 and mark(0) == 0
assert [(name, args) for name, args, _ in calls] == [
    ("cuEventRecord", (102, 7)), ("cuEventSynchronize", (102,)), ("cuEventRecord", (100, 7))]
del calls[:]
last = _engine.MARKS - 1  # (the last out unit's mark)
assert mark(last) == 0 and passed(last) == 0
query_rc[0] = 600  # CUDA_ERROR_NOT_READY: not yet
assert passed(last) == -1
query_rc[0] = 700  # an error: itself
assert passed(last) == 700
query_rc[0] = 0
assert [(name, args) for name, args, _ in calls] == [
    ("cuEventRecord", (100 + last, 7))] + [("cuEventQuery", (100 + last,))] * 3

expected = (5, 8) if reductions else (3, 10)
assert tuple(counts[:2]) == expected, counts
print("ok", *counts[:2])
