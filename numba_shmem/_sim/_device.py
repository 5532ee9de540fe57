"""The device API on the simulator: plain Python over the shared-memory heaps.

numba's simulator runs each CUDA thread as a Python thread and the blocks one
after another. Toward a PE of this node, stores land in shared memory at once,
so puts complete when they return; atomics lock the target PE's heap against
this process's threads and every other process. Toward a PE on another node,
each operation is a request to this PE's proxy (``_transport``), which the
target's proxy applies with the same operations; ``quiet`` (and the barriers)
wait for those to complete, and ``fence`` has nothing to do: the requests to
one PE are applied in order.
"""

import operator
import threading
import time

import numpy as np

from .. import _device_api as api
from .._arrays import peer_view
from .._current import require
from .._errors import ShmemTimeoutError, ShmemUsageError
from .._teams import is_integer
from .._transport import proxy_for
from .._transport._ring import _bits as _ring_bits, _value as _ring_value
from ._heap import host_array

_COMPARE = {
    api.CMP_EQ: ("CMP_EQ", operator.eq), api.CMP_NE: ("CMP_NE", operator.ne),
    api.CMP_GT: ("CMP_GT", operator.gt), api.CMP_LE: ("CMP_LE", operator.le),
    api.CMP_LT: ("CMP_LT", operator.lt), api.CMP_GE: ("CMP_GE", operator.ge),
}
_SIGNAL_OPS = {api.SIGNAL_SET: "SIGNAL_SET", api.SIGNAL_ADD: "SIGNAL_ADD"}
_ATOMIC_TYPES = {np.dtype(t) for t in (np.int32, np.uint32, np.int64, np.uint64)}


def _remote(arr, pe, name):
    return host_array(peer_view(arr, pe, f"shmem.{name}"))


def _far(pe, name):
    """The proxy when PE ``pe`` is on another node, else None."""
    return proxy_for(require(name), pe, f"shmem.{name}")


def _offset(arr, name, index=0):
    """The heap offset of element ``index`` of the symmetric ``arr``."""
    return require(name).heap.offset_of(arr, f"shmem.{name}") + index * host_array(arr).itemsize


def _store(arr, pe, start, values, name):
    """Elements ``start, start + 1, ...`` of PE ``pe``'s copy of ``arr`` (flat)
    become ``values``: directly, or through the proxy."""
    proxy = _far(pe, name)
    if proxy is None:
        _contiguous(_remote(arr, pe, name), name, "dest")[start:start + len(values)] = values
    else:
        proxy.put(pe, _offset(arr, name, start), values, f"shmem.{name}")


def _load(arr, pe, start, count, name):
    """Elements ``start .. start + count`` of PE ``pe``'s copy of ``arr`` (flat)."""
    proxy = _far(pe, name)
    if proxy is None:
        return _contiguous(_remote(arr, pe, name), name, "source")[start:start + count]
    dtype = host_array(arr).dtype
    return proxy.get(pe, _offset(arr, name, start), count * dtype.itemsize,
                     f"shmem.{name}").view(dtype)


def _compare(name, cmp):
    try:
        return _COMPARE[cmp][1]
    except (KeyError, TypeError):
        raise ShmemUsageError(f"{name}: cmp={cmp!r} is not one of shmem.CMP_EQ, CMP_NE, CMP_GT, "
                              "CMP_LE, CMP_LT, CMP_GE") from None


def _cast(value, dtype):
    return np.array(value).astype(dtype)[()]


def bits(like, value):
    """``value`` as ``like``'s dtype, its bits as a non-negative int (the
    simulator's form of the GPU's bit cast, ``_cuda/_proxied._bits``; the
    proxy's ring casts the same way)."""
    return int(_ring_bits(np.asarray(value, host_array(like).dtype)))


def from_bits(like, word):
    """The value of ``like``'s dtype whose bits are the low bits of ``word``."""
    dtype = host_array(like).dtype
    return dtype.type(_ring_value(np.uint64(int(word) & 0xFFFF_FFFF_FFFF_FFFF), dtype))


# -- cooperative scope ---------------------------------------------------------

_warp_barriers = {}
_warp_lock = threading.Lock()


def _thread():
    """(linear thread id in the block, threads in the block, the simulator thread)."""
    thread = threading.current_thread()
    dim = thread._manager._block_dim
    return thread.thread_id, dim[0] * dim[1] * dim[2], thread


def _scope_sync(scope):
    if scope == "":
        return
    tid, nthreads, thread = _thread()
    if scope == "_block":
        thread.syncthreads()
        return
    warp = tid // 32
    members = min(32, nthreads - warp * 32)
    key = (id(thread._manager), tuple(thread.blockIdx), warp, members)
    with _warp_lock:
        barrier = _warp_barriers.setdefault(key, threading.Barrier(members))
    barrier.wait()


def _leader(scope):
    if scope == "":
        return True
    tid, _n, _t = _thread()
    return (tid if scope == "_block" else tid % 32) == 0


def _cooperative(scope, action):
    """Run ``action`` once for the warp or block (or for this thread), with the
    scope's threads synchronized before and after."""
    _scope_sync(scope)
    if _leader(scope):
        action()
    _scope_sync(scope)


# -- RMA -----------------------------------------------------------------------

def p(dest, value, pe):
    _store(dest, pe, 0, np.array([_cast(value, host_array(dest).dtype)]), "p")


def g(source, pe):
    return _load(source, pe, 0, 1, "g")[0]


def _contiguous(arr, name, what):
    """``arr`` as a flat view; transfers copy from the first element on, so a
    strided view would be copied from the wrong places (or into a copy)."""
    if not (arr.flags.c_contiguous or arr.flags.f_contiguous):
        raise ShmemUsageError(f"shmem.{name}: {what} must be contiguous (a strided view like "
                              "x[::2] is not); use iput/iget with strides for strided data")
    return arr.reshape(-1, order="A")


def _count(dest, source, pe, name, local, remote):
    """``min(dest.size, source.size)``; in debug mode, an error where the local
    array is larger than the symmetric one it would run past."""
    runtime = require(name)
    sizes = {"dest": dest.size, "source": source.size}
    if runtime.config.debug and sizes[local] > sizes[remote]:
        raise ShmemUsageError(
            f"shmem.{name}: PE {runtime.bootstrap.rank} asked to copy {sizes[local]} elements "
            f"but {remote} on PE {pe} holds {sizes[remote]}; pass a {local} no larger than "
            f"{remote}")
    return min(dest.size, source.size)


def _put(dest, source, pe, name):
    # the local copy of dest has the shape (and contiguity) of PE pe's
    into = _contiguous(host_array(dest), name, "dest")
    out_of = _contiguous(host_array(source), name, "source")
    _store(dest, pe, 0, out_of[:_count(into, out_of, pe, name, "source", "dest")], name)


def _get(dest, source, pe, name):
    into = _contiguous(host_array(dest), name, "dest")
    out_of = _contiguous(host_array(source), name, "source")
    count = _count(into, out_of, pe, name, "dest", "source")
    into[:count] = _load(source, pe, 0, count, name)


def _check_strided(name, dest, source, dst_stride, src_stride, nelems):
    """In debug mode, an error where the strided elements reach outside dest
    or source (the GPU's debug check in _cuda/_copies.py says the same)."""
    runtime = require(name)
    if not runtime.config.debug or nelems <= 0:
        return
    for what, arr, stride in (("dest", dest, dst_stride), ("source", source, src_stride)):
        last, size = (nelems - 1) * stride, host_array(arr).size
        if not 0 <= last < size:
            raise ShmemUsageError(
                f"shmem.{name}: PE {runtime.bootstrap.rank} asked for {nelems} elements of "
                f"{what} at stride {stride}, up to element {last}, but {what} holds {size}; "
                "pass a smaller nelems or stride")


def iput(dest, source, dst_stride, src_stride, nelems, pe):
    _check_strided("iput", dest, source, dst_stride, src_stride, nelems)
    _contiguous(host_array(dest), "iput", "dest")  # (PE pe's copy has the same layout)
    values = _contiguous(host_array(source), "iput", "source")[:nelems * src_stride:src_stride]
    if _far(pe, "iput") is None:
        remote = _contiguous(_remote(dest, pe, "iput"), "iput", "dest")
        remote[:nelems * dst_stride:dst_stride] = values
        return
    for i in range(len(values)):
        _store(dest, pe, i * dst_stride, values[i:i + 1], "iput")


def iget(dest, source, dst_stride, src_stride, nelems, pe):
    _check_strided("iget", dest, source, dst_stride, src_stride, nelems)
    local = _contiguous(host_array(dest), "iget", "dest")
    if _far(pe, "iget") is None:
        local[:nelems * dst_stride:dst_stride] = \
            _contiguous(_remote(source, pe, "iget"), "iget", "source")[:nelems * src_stride:
                                                                      src_stride]
        return
    for i in range(nelems):
        local[i * dst_stride] = _load(source, pe, i * src_stride, 1, "iget")[0]


def _require_signal(sig, name):
    dtype = host_array(sig).dtype
    if dtype != np.uint64:
        raise ShmemUsageError(f"shmem.{name}: sig must be a uint64 array, got {dtype}")


def _signal(sig, value, sig_op, pe, name):
    _require_signal(sig, name)
    if sig_op not in _SIGNAL_OPS:
        raise ShmemUsageError(f"shmem.{name}: sig_op={sig_op!r} is not shmem.SIGNAL_SET or "
                              "shmem.SIGNAL_ADD")
    proxy = _far(pe, name)
    if proxy is not None:
        proxy.signal(pe, _offset(sig, name), sig_op, int(_cast(value, np.uint64)),
                     f"shmem.{name}")
        return
    remote = _remote(sig, pe, name)  # (checks pe before its lock is looked up)
    with require("signal_op").heap.backend.locked(pe):
        apply_signal(remote, sig_op, value)


def apply_signal(signal, sig_op, value):
    """SIGNAL_SET or SIGNAL_ADD on ``signal[0]`` (a uint64 array; the caller
    holds the heap's lock)."""
    if sig_op == api.SIGNAL_SET:
        signal[0] = _cast(value, np.uint64)
    else:
        signal[0:1] += np.array([value]).astype(np.uint64)


def signal_op(sig, value, sig_op, pe):
    _signal(sig, value, sig_op, pe, "signal_op")


def signal_fetch(sig):
    _require_signal(sig, "signal_fetch")
    return host_array(sig)[0]


def _make_rma(scope, nbi):
    put_name, get_name, signal_name = (f"{kind}{nbi}{scope}" for kind in ("put", "get",
                                                                           "put_signal"))

    def put(dest, source, pe):
        _cooperative(scope, lambda: _put(dest, source, pe, put_name))

    def get(dest, source, pe):
        _cooperative(scope, lambda: _get(dest, source, pe, get_name))

    def put_signal(dest, source, sig, value, sig_op, pe):
        def both():
            _put(dest, source, pe, signal_name)
            _signal(sig, value, sig_op, pe, signal_name)
        _cooperative(scope, both)

    return {put_name: put, get_name: get, signal_name: put_signal}


for _scope in ("", "_warp", "_block"):
    for _nbi in ("", "_nbi"):
        globals().update(_make_rma(_scope, _nbi))


def _make_barrier(name, scope):
    def barrier():
        def wait():
            runtime = require(name)
            if name.startswith("barrier") and runtime.proxy is not None:
                runtime.proxy.quiet(f"shmem.{name}")  # what went to other nodes is complete
            runtime.bootstrap.barrier(f"shmem.{name}")
        _cooperative(scope, wait)
    return barrier


def _make_team_barrier(name, scope):
    def barrier(team):
        def wait():
            _team_barrier(_members(team, name), name, complete=name.startswith("barrier"))
        _cooperative(scope, wait)
    barrier.__name__ = barrier.__qualname__ = name
    return barrier


for _scope in ("_warp", "_block"):
    globals()[f"barrier_all{_scope}"] = _make_barrier("barrier_all", _scope)
    globals()[f"sync_all{_scope}"] = _make_barrier("sync_all", _scope)
    globals()[f"barrier{_scope}"] = _make_team_barrier(f"barrier{_scope}", _scope)
    globals()[f"sync{_scope}"] = _make_team_barrier(f"sync{_scope}", _scope)


# -- collectives -------------------------------------------------------------------

def _members(team, name):
    return list(require(name).teams.get(team, f"shmem.{name}"))


def _team_barrier(members, name, complete=True):
    runtime = require(name)
    if complete and runtime.proxy is not None:
        runtime.proxy.quiet(f"shmem.{name}")
    runtime.bootstrap.barrier(f"shmem.{name}", members)


def _settle(team, members, name):
    """Before a collective that puts into members' arrays: if the team's last
    collective was a host reduction in lines, a member may still be writing its
    dest (``_stream/_kernels.line_reduce_kernel``): wait for every member."""
    from .._heap._symmetric import team_words

    runtime = require(name)
    offset, _size = team_words(team, runtime.bootstrap.size)
    flag = runtime.heap.backend.view(runtime.bootstrap.rank, offset + 8, (1,),
                                     np.dtype(np.uint64))
    if flag[0]:
        _team_barrier(members, name)
        flag[0] = 0


def _make_collective(name):
    kind = api.collective_kind(name)
    scope = name[len(kind):]

    def run(team, dest, source, nelems, root):
        members = _members(team, name)
        me = members.index(require(name).bootstrap.rank)
        # what the GPU's typing refuses (_cuda/_typing.py), and a root outside the team
        for what, value in (("nelems", nelems), ("root", root)):
            if value is not None and not is_integer(value):
                raise ShmemUsageError(f"shmem.{name}: {what} must be an integer, got {value!r}")
        if root is not None and not 0 <= root < len(members):
            raise ShmemUsageError(f"shmem.{name}: root must be a PE of the team, from 0 to "
                                  f"{len(members) - 1}, got {root}; pass the team number of "
                                  "the PE whose source is sent")

        def action():
            src = _contiguous(host_array(source), name, "source")
            op = kind.split("_")[0]
            if op in api.INT_ONLY_OPS and src.dtype.kind == "f":
                raise ShmemUsageError(f"shmem.{name}: {op} needs an integer dtype, got "
                                      f"{src.dtype}")
            if np.shares_memory(src, host_array(dest)):
                # a member's writes would race with the others' reads of its source
                raise ShmemUsageError(f"shmem.{name}: dest and source overlap; the device "
                                      "forms need separate arrays")
            _contiguous(host_array(dest), name, "dest")  # (every member's has its layout)
            if kind in ("broadcast", "fcollect", "alltoall"):
                _settle(team, members, name)
            if kind == "broadcast":
                if me == root:
                    for pe in members:
                        _store(dest, pe, 0, src[:nelems], name)
            elif kind == "fcollect":
                for pe in members:
                    _store(dest, pe, me * nelems, src[:nelems], name)
            elif kind == "alltoall":
                for j, pe in enumerate(members):
                    _store(dest, pe, me * nelems, src[j * nelems:(j + 1) * nelems], name)
            else:
                what = kind.split("_")[1]
                _team_barrier(members, name)  # every member's source is ready
                block = me if what == "reducescatter" else 0
                parts = [_load(source, pe, block * nelems, nelems, name) for pe in members]
                with np.errstate(over="ignore"):
                    result = parts[0].copy()
                    for part in parts[1:]:
                        result = _REDUCE[op](result, part)
                _contiguous(host_array(dest), name, "dest")[:nelems] = result
            _team_barrier(members, name)  # complete everywhere; sources may be reused

        _cooperative(scope, action)

    # the table's signature (keywords by its names; a stray argument is a
    # TypeError naming the collective), as the GPU's typing folds them
    if kind == "broadcast":
        def collective(team, dest, source, nelems, root):
            run(team, dest, source, nelems, root)
    else:
        def collective(team, dest, source, nelems):
            run(team, dest, source, nelems, None)
    collective.__name__ = collective.__qualname__ = name
    return collective


_REDUCE = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum,
           "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}

for _name in [*api.COLLECTIVES, *api.COLLECTIVE_KINDS]:  # (a kind: the thread form)
    globals()[_name] = _make_collective(_name)


def fence():
    pass  # stores reach shared memory in program order; the proxy applies in order


def quiet():
    # a direct put is complete when it returns; the proxy's, once answered
    proxy = require("quiet").proxy
    if proxy is not None:
        proxy.quiet()


# -- waits ---------------------------------------------------------------------

def _wait(name, ready, describe):
    """Spin with back-off until ``ready()``; past the wait timeout, an error
    saying which PE waited on what."""
    runtime = require(name)
    timeout = runtime.config.wait_timeout
    start = time.monotonic()
    pause = 1e-6
    while True:
        result = ready()
        if result is not None:
            return result
        waited = time.monotonic() - start
        if timeout and waited > timeout:
            raise ShmemTimeoutError(
                f"PE {runtime.bootstrap.rank} waited {waited:.0f} s in shmem.{name} for "
                f"{describe()}; raise NUMBA_SHMEM_WAIT_TIMEOUT if the job is only slow")
        time.sleep(pause)
        pause = min(pause * 2, 1e-3)


def _where(arr, index=0):
    offset = require("wait").heap.offset_of(arr, "wait") + index * host_array(arr).itemsize
    return f"heap offset {offset}"


def signal_wait_until(sig, cmp, value):
    _require_signal(sig, "signal_wait_until")
    local = host_array(sig)
    test_fn = _compare("signal_wait_until", cmp)
    target = _cast(value, np.uint64)
    return _wait("signal_wait_until", lambda: local[0] if test_fn(local[0], target) else None,
                 lambda: f"the signal at {_where(sig)} to be {_COMPARE[cmp][0]} {target}; "
                         f"last value seen {local[0]}")


def member_wait(word, mark, gone, pe, team, name):
    """The simulator's ``_cuda/_member_wait``: ``word[0]`` once it is at least
    ``mark``. If PE ``pe`` (a member of ``team``, a row of the team table)
    leaves the job meanwhile (``gone[0]``, its departure word), the error the
    team's other collectives give: under shmem-run the launcher's, which says
    what the PE did."""
    local, left = host_array(word), host_array(gone)
    target = _cast(mark, np.uint64)

    def ready():
        if local[0] >= target:
            return local[0]
        if left[0] and local[0] < target:  # (it may have sent the word, then left)
            runtime = require(name)
            row = host_array(team)
            if runtime.bootstrap.name == "shmem-run":  # fails at once, naming what PE pe did
                runtime.bootstrap.barrier(f"shmem.{name}", [int(m) for m in row[2:2 + row[0]]])
            raise ShmemUsageError(f"PE {pe} left the job before reaching shmem.{name}, which "
                                  f"PE {runtime.bootstrap.rank} waits in")
        return None
    return _wait(name, ready, lambda: f"the part of PE {pe} (a word of its own heap below "
                                      f"{target}; last value seen {local[0]})")


def wait_until(ivar, cmp, value):
    local = host_array(ivar)
    test_fn = _compare("wait_until", cmp)
    target = _cast(value, local.dtype)
    _wait("wait_until", lambda: True if test_fn(local[0], target) else None,
          lambda: f"the value at {_where(ivar)} to be {_COMPARE[cmp][0]} {target}; last value "
                  f"seen {local[0]}")


def _matches(name, ivars, status, cmp, values):
    local = host_array(ivars).reshape(-1)
    test_fn = _compare(name, cmp)
    mask = host_array(status).reshape(-1)[:local.size] == 0 if status is not None else \
        np.ones(local.size, bool)
    wanted = np.broadcast_to(np.array(values).astype(local.dtype), local.shape)
    hits = [i for i in range(local.size) if mask[i] and test_fn(local[i], wanted[i])]
    return local, mask, hits


def _describe_many(name, ivars, status, cmp, values):
    def describe():
        local, mask, _hits = _matches(name, ivars, status, cmp, values)
        return (f"{int(mask.sum())} values from {_where(ivars)} to be {_COMPARE[cmp][0]} "
                f"{values}; last values seen {local.tolist()}")
    return describe


def _wait_all(name, ivars, status, cmp, values):
    def ready():
        _local, mask, hits = _matches(name, ivars, status, cmp, values)
        return True if len(hits) == int(mask.sum()) else None
    _wait(name, ready, _describe_many(name, ivars, status, cmp, values))


def _wait_any(name, ivars, status, cmp, values):
    def ready():
        _local, mask, hits = _matches(name, ivars, status, cmp, values)
        if not mask.any():
            return -1  # nothing to wait for: OpenSHMEM's SIZE_MAX, as an int64
        return hits[0] if hits else None
    return _wait(name, ready, _describe_many(name, ivars, status, cmp, values))


def _wait_some(name, ivars, indices, status, cmp, values):
    def ready():
        _local, mask, hits = _matches(name, ivars, status, cmp, values)
        return hits if hits or not mask.any() else None
    hits = _wait(name, ready, _describe_many(name, ivars, status, cmp, values))
    host_array(indices).reshape(-1)[:len(hits)] = hits
    return len(hits)


def wait_until_all(ivars, status, cmp, value):
    _wait_all("wait_until_all", ivars, status, cmp, value)


def wait_until_any(ivars, status, cmp, value):
    return _wait_any("wait_until_any", ivars, status, cmp, value)


def wait_until_some(ivars, indices, status, cmp, value):
    return _wait_some("wait_until_some", ivars, indices, status, cmp, value)


def wait_until_all_vector(ivars, status, cmp, values):
    _wait_all("wait_until_all_vector", ivars, status, cmp, host_array(values))


def wait_until_any_vector(ivars, status, cmp, values):
    return _wait_any("wait_until_any_vector", ivars, status, cmp, host_array(values))


def wait_until_some_vector(ivars, indices, status, cmp, values):
    return _wait_some("wait_until_some_vector", ivars, indices, status, cmp, host_array(values))


def test(ivar, cmp, value):
    local = host_array(ivar)
    return int(_compare("test", cmp)(local[0], _cast(value, local.dtype)))


def test_all(ivars, status, cmp, value):
    _local, mask, hits = _matches("test_all", ivars, status, cmp, value)
    return int(len(hits) == int(mask.sum()))


def test_any(ivars, status, cmp, value):
    _local, _mask, hits = _matches("test_any", ivars, status, cmp, value)
    return hits[0] if hits else -1


def test_some(ivars, indices, status, cmp, value):
    _local, _mask, hits = _matches("test_some", ivars, status, cmp, value)
    host_array(indices).reshape(-1)[:len(hits)] = hits
    return len(hits)


# -- atomics -------------------------------------------------------------------

_UPDATES = {
    "fetch": None, "set": lambda old, v: v, "swap": lambda old, v: v,
    "inc": lambda old, v: old + np.array(1).astype(old.dtype),
    "add": lambda old, v: old + v, "and": lambda old, v: old & v,
    "or": lambda old, v: old | v, "xor": lambda old, v: old ^ v,
}


def _atomic(name, dest, pe, value=0, cond=None):
    dtype = host_array(dest).dtype
    if dtype not in _ATOMIC_TYPES and not (name in api.FLOAT_ATOMICS and dtype.kind == "f"):
        raise ShmemUsageError(f"shmem.{name}: dtype {dtype} is not supported; use int32, uint32, "
                              "int64 or uint64" + (" (or a float)" if name in api.FLOAT_ATOMICS else ""))
    op = name.replace("atomic_", "").replace("fetch_", "")
    proxy = _far(pe, name)
    if proxy is not None:
        fetch = op in ("fetch", "swap", "compare_swap") or name.startswith("atomic_fetch_")
        if op == "inc":  # the proxy's ops are the GPU ring's: an inc is an add of 1
            op, value = "add", 1
        old = proxy.atomic(pe, _offset(dest, name), dtype, op, _cast(value, dtype).item(),
                           None if cond is None else _cast(cond, dtype).item(), fetch,
                           f"shmem.{name}")
        return None if old is None else _cast(old, dtype)
    remote = _remote(dest, pe, name)
    with require(name).heap.backend.locked(pe):
        return apply_atomic(remote, op, value, cond)


def apply_atomic(target, op, value, cond):
    """``op`` on ``target[0]`` (the caller holds the heap's lock); the old value."""
    dtype = target.dtype
    with np.errstate(over="ignore"):
        old = target[0:1].copy()
        if op == "compare_swap":
            if old[0] == _cast(cond, dtype):
                target[0] = _cast(value, dtype)
        elif _UPDATES[op] is not None:
            target[0:1] = _UPDATES[op](old, np.array([value]).astype(dtype))
    return old[0]


def _make_atomic(name, params):
    if params == "source pe":
        return lambda source, pe: _atomic(name, source, pe)
    if params == "dest pe":
        return lambda dest, pe: _atomic(name, dest, pe)
    if params == "dest cond value pe":
        return lambda dest, cond, value, pe: _atomic(name, dest, pe, value, cond)
    return lambda dest, value, pe: _atomic(name, dest, pe, value)


for _name, (_params, _doc) in api.ATOMICS.items():
    globals()[_name] = _make_atomic(_name, _params)
