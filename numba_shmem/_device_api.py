"""The device API: one-sided RMA, signals, atomics, point-to-point sync, ordering.

Every name here is one Python function. Inside a ``@cuda.jit`` kernel on the
GPU it compiles to inline PTX (``_cuda/_device.py``); on the simulator the
kernel calls it as Python (``_sim/_device.py``). Element operations (``p``,
``g``, atomics, signals, waits) act on element 0 of the array they are given,
so ``x[i:i + 1]`` addresses element ``i``.
"""

import inspect

from ._errors import ShmemUsageError

SIGNAL_SET = 0
SIGNAL_ADD = 1

CMP_EQ = 0
CMP_NE = 1
CMP_GT = 2
CMP_LE = 3
CMP_LT = 4
CMP_GE = 5

_SCOPES = {"": "Thread scope.", "_warp": "Warp scope: every thread of the warp calls it "
           "with the same arguments.", "_block": "Block scope: every thread of the block calls "
           "it with the same arguments."}

_PUT = ("Copy ``source`` (any device array) into ``dest`` (symmetric) on PE ``pe``; "
        "``source.size`` elements, never more than ``dest.size`` (with NUMBA_SHMEM_DEBUG=1 a "
        "larger source is an error). {blocking}")
_GET = ("Copy ``source`` (symmetric) on PE ``pe`` into ``dest`` (any device array); "
        "``dest.size`` elements, never more than ``source.size`` (with NUMBA_SHMEM_DEBUG=1 a "
        "larger dest is an error). {blocking}")
_PUT_SIGNAL = ("Copy ``source`` into ``dest`` on PE ``pe``, then update the signal ``sig`` there "
               "with ``value`` by ``sig_op`` (SIGNAL_SET or SIGNAL_ADD). Whoever sees the "
               "signal sees the data. {blocking}")
_BLOCKING = "Returns when ``source`` may be reused; ``quiet()`` completes it at the target."
_NBI = "Non-blocking: returns at once; ``quiet()`` completes it."

#: name -> (parameters, docstring)
TABLE = {
    "p": ("dest value pe", "Thread scope. Store ``value`` into ``dest[0]`` on PE ``pe``."),
    "g": ("source pe", "Thread scope. Return ``source[0]`` on PE ``pe``."),
    "iput": ("dest source dst_stride src_stride nelems pe",
             "Thread scope. Strided put: ``dest[i * dst_stride] = source[i * src_stride]`` on PE "
             "``pe`` for ``i < nelems``. " + _BLOCKING),
    "iget": ("dest source dst_stride src_stride nelems pe",
             "Thread scope. Strided get: ``dest[i * dst_stride] = source[i * src_stride]`` of PE "
             "``pe``'s ``source``, for ``i < nelems``. Returns with the data in ``dest``."),
    "signal_op": ("sig value sig_op pe",
                  "Thread scope. Update ``sig[0]`` (uint64) on PE ``pe`` by ``sig_op`` "
                  "(SIGNAL_SET or SIGNAL_ADD), atomically. Like the other atomics it is "
                  "not ordered after earlier puts: call ``fence()`` between them (or use "
                  "``put_signal``)."),
    "signal_fetch": ("sig", "Thread scope. Return this PE's ``sig[0]``, read atomically."),
    "signal_wait_until": ("sig cmp value",
                          "Thread scope. Wait until this PE's ``sig[0]`` compares ``cmp`` "
                          "(CMP_EQ, ...) to ``value``; return the value seen. Data put with "
                          "the signal is visible when it returns."),
    "wait_until": ("ivar cmp value",
                   "Thread scope. Wait until this PE's ``ivar[0]`` compares ``cmp`` to ``value``."),
    "wait_until_all": ("ivars status cmp value",
                       "Thread scope. Wait until every ``ivars[i]`` whose ``status[i]`` is 0 "
                       "compares ``cmp`` to ``value``."),
    "wait_until_any": ("ivars status cmp value",
                       "Thread scope. Wait until some ``ivars[i]`` with ``status[i] == 0`` "
                       "compares ``cmp`` to ``value``; return such an ``i``, or -1 at once "
                       "(OpenSHMEM's SIZE_MAX) when every element is excluded."),
    "wait_until_some": ("ivars indices status cmp value",
                        "Thread scope. Wait until at least one ``ivars[i]`` with "
                        "``status[i] == 0`` compares ``cmp`` to ``value``; write every such "
                        "``i`` into ``indices`` and return how many (0 at once when every "
                        "element is excluded)."),
    "wait_until_all_vector": ("ivars status cmp values",
                              "Thread scope. ``wait_until_all`` with one value per element."),
    "wait_until_any_vector": ("ivars status cmp values",
                              "Thread scope. ``wait_until_any`` with one value per element."),
    "wait_until_some_vector": ("ivars indices status cmp values",
                               "Thread scope. ``wait_until_some`` with one value per element."),
    "test": ("ivar cmp value",
             "Thread scope. Return 1 if this PE's ``ivar[0]`` compares ``cmp`` to ``value``, else 0."),
    "test_all": ("ivars status cmp value",
                 "Thread scope. Return 1 if every ``ivars[i]`` with ``status[i] == 0`` compares "
                 "``cmp`` to ``value``, else 0."),
    "test_any": ("ivars status cmp value",
                 "Thread scope. Return an ``i`` with ``status[i] == 0`` whose ``ivars[i]`` "
                 "compares ``cmp`` to ``value``, or -1."),
    "test_some": ("ivars indices status cmp value",
                  "Thread scope. Write every ``i`` with ``status[i] == 0`` whose ``ivars[i]`` "
                  "compares ``cmp`` to ``value`` into ``indices``; return how many."),
    "fence": ("", "Thread scope. Order this PE's puts, atomics and signals to each PE: those "
                  "issued before arrive before those issued after."),
    "quiet": ("", "Thread scope. Complete every put, atomic and signal this PE issued, "
                  "non-blocking ones included."),
}

for _scope, _scope_doc in _SCOPES.items():
    for _nbi in ("", "_nbi"):
        _blocking = _NBI if _nbi else _BLOCKING
        TABLE[f"put{_nbi}{_scope}"] = ("dest source pe",
                                       f"{_scope_doc} {_PUT.format(blocking=_blocking)}")
        TABLE[f"get{_nbi}{_scope}"] = ("dest source pe", f"{_scope_doc} " + _GET.format(
            blocking=_NBI if _nbi else "Returns with the data in ``dest``."))
        TABLE[f"put_signal{_nbi}{_scope}"] = (
            "dest source sig value sig_op pe",
            f"{_scope_doc} {_PUT_SIGNAL.format(blocking=_blocking)}")

for _scope in ("_warp", "_block"):
    TABLE[f"barrier_all{_scope}"] = ("", f"{_SCOPES[_scope]} Collective over all PEs: complete "
                                         "this PE's puts, atomics and signals, then wait until "
                                         "every PE has arrived. Launch with collective_launch.")
    TABLE[f"sync_all{_scope}"] = ("", f"{_SCOPES[_scope]} Collective over all PEs: wait until "
                                      "every PE has arrived; orders memory, completes nothing. "
                                      "Launch with collective_launch.")
    TABLE[f"barrier{_scope}"] = ("team", f"{_SCOPES[_scope]} Collective over ``team``: "
                                         "``barrier_all`` for its members.")
    TABLE[f"sync{_scope}"] = ("team", f"{_SCOPES[_scope]} Collective over ``team``: "
                                      "``sync_all`` for its members.")

#: reduction name -> the expression combining ``a`` and ``b`` (also used as Python)
REDUCE_OPS = {"sum": "a + b", "prod": "a * b", "min": "min(a, b)", "max": "max(a, b)",
              "and": "a & b", "or": "a | b", "xor": "a ^ b"}
INT_ONLY_OPS = {"and", "or", "xor"}

#: the collectives over a team: kind -> (parameters, what it does); each is a
#: host-and-device name (thread scope in a kernel, ``_stream/_collectives`` on
#: the host) and has ``_warp`` and ``_block`` forms
COLLECTIVE_KINDS = {
    "broadcast": ("team dest source nelems root",
                  "Copy ``source[:nelems]`` of the team's PE ``root`` into ``dest`` on every "
                  "member."),
    "fcollect": ("team dest source nelems",
                 "Concatenate every member's ``source[:nelems]`` into ``dest`` on every member, "
                 "in team order."),
    "alltoall": ("team dest source nelems",
                 "Send block ``j`` (``nelems`` elements) of ``source`` to member ``j``, where it "
                 "lands as block ``i`` of ``dest`` for sender ``i``."),
}
for _op in REDUCE_OPS:
    COLLECTIVE_KINDS[f"{_op}_reduce"] = (
        "team dest source nelems",
        f"``dest[:nelems]`` on every member = the {_op} over members of ``source[:nelems]``, "
        "combined in team order.")
    COLLECTIVE_KINDS[f"{_op}_reducescatter"] = (
        "team dest source nelems",
        f"``dest[:nelems]`` on member ``i`` = the {_op} over members of block ``i`` (``nelems`` "
        "elements) of ``source``.")

#: the device-only forms: ``<kind>_warp`` and ``<kind>_block`` -> (parameters, what it does)
COLLECTIVES = {f"{kind}{scope}": entry for kind, entry in COLLECTIVE_KINDS.items()
               for scope in ("_warp", "_block")}


def collective_kind(name):
    """The kind of the collective ``name`` (``sum_reduce`` for ``sum_reduce``,
    ``sum_reduce_warp`` and ``sum_reduce_block``), or None."""
    for scope in ("_warp", "_block"):
        if name.endswith(scope) and name[:-len(scope)] in COLLECTIVE_KINDS:
            return name[:-len(scope)]
    return name if name in COLLECTIVE_KINDS else None


def collective_order(name):
    """What holds around the data of the collective ``name`` (any form):
    which members' arrays it reads and writes, and what synchronizes them."""
    if collective_kind(name).endswith(("_reduce", "_reducescatter")):
        return ("Starts with ``sync(team)`` (every member's ``source`` is ready), then reads "
                "every member's ``source`` and writes only this member's ``dest``.")
    return ("Stores into the members' ``dest`` at once, with no synchronization first: as "
            "OpenSHMEM requires, ``dest`` must be ready on every member before any member "
            "calls (after reading or writing a ``dest``, ``sync(team)`` before the next "
            "collective into it).")


def collective_doc(name):
    """The docstring of the device form ``name`` of a collective (the thread
    form's is its host function's, ``_stream/_collectives``)."""
    scope = name[len(collective_kind(name)):]
    threads = {"_warp": "warp", "_block": "block", "": "thread"}[scope]
    who = "one thread" if not scope else f"every thread of one {threads}"
    return (f"{threads.capitalize()} scope: {who} on each member calls it with the same "
            f"arguments. Collective over ``team``. {COLLECTIVE_KINDS[collective_kind(name)][1]} "
            f"{collective_order(name)} Ends with ``barrier(team)``: complete on every member "
            "when it returns.")


for _name, (_params, _doc) in COLLECTIVES.items():
    TABLE[_name] = (_params, collective_doc(_name))

#: atomic name -> (parameters, what it does); types: int32, uint32, int64, uint64,
#: and float32/float64 for fetch, set, swap, add and fetch_add
ATOMICS = {
    "atomic_fetch": ("source pe", "Return ``source[0]`` on PE ``pe``, read atomically."),
    "atomic_set": ("dest value pe", "Set ``dest[0]`` on PE ``pe`` to ``value``, atomically."),
    "atomic_swap": ("dest value pe", "Set ``dest[0]`` on PE ``pe`` to ``value``; return the old value."),
    "atomic_compare_swap": ("dest cond value pe",
                            "If ``dest[0]`` on PE ``pe`` equals ``cond``, set it to ``value``; "
                            "return the old value."),
    "atomic_inc": ("dest pe", "Add 1 to ``dest[0]`` on PE ``pe``."),
    "atomic_fetch_inc": ("dest pe", "Add 1 to ``dest[0]`` on PE ``pe``; return the old value."),
    "atomic_add": ("dest value pe", "Add ``value`` to ``dest[0]`` on PE ``pe``."),
    "atomic_fetch_add": ("dest value pe", "Add ``value`` to ``dest[0]`` on PE ``pe``; return the old value."),
    "atomic_and": ("dest value pe", "``dest[0] &= value`` on PE ``pe``."),
    "atomic_fetch_and": ("dest value pe", "``dest[0] &= value`` on PE ``pe``; return the old value."),
    "atomic_or": ("dest value pe", "``dest[0] |= value`` on PE ``pe``."),
    "atomic_fetch_or": ("dest value pe", "``dest[0] |= value`` on PE ``pe``; return the old value."),
    "atomic_xor": ("dest value pe", "``dest[0] ^= value`` on PE ``pe``."),
    "atomic_fetch_xor": ("dest value pe", "``dest[0] ^= value`` on PE ``pe``; return the old value."),
}
#: atomics that also take float32/float64; the rest take the four integer types
FLOAT_ATOMICS = {"atomic_fetch", "atomic_set", "atomic_swap", "atomic_add", "atomic_fetch_add"}


def atomic_returns_old(name):
    """Whether the atomic ``name`` returns the value it found."""
    return name in ("atomic_fetch", "atomic_swap", "atomic_compare_swap") or "_fetch_" in name


for _name, (_params, _doc) in ATOMICS.items():
    TABLE[_name] = (_params, "Thread scope. " + _doc + " Unordered with other operations "
                    "except through fence() and quiet().")


_ON_STREAM = "Host: enqueued on ``stream``, returns at once."

#: names that also work on the host, with a keyword-only ``stream``
HOST_FORMS = {"put": "Host: in the order of ``stream``, complete when the stream is.",
              "get": "Host: in the order of ``stream``, complete when the stream is.",
              "put_signal": _ON_STREAM + " The data goes on the copy engine, the signal after it.",
              "signal_op": _ON_STREAM + " After the stream's earlier work (puts included).",
              "signal_wait_until": _ON_STREAM + " Holds the stream, not the host.",
              "quiet": _ON_STREAM + " The stream goes on once this PE's operations before "
                                    "it are complete."}

#: names that are one Python function on the host and in kernels (thread scope
#: there), defined by the host layers -> the parameters of the device form
HOST_AND_DEVICE = {"barrier_all": "", "sync_all": "", "barrier": "team", "sync": "team",
                   "team_my_pe": "team", "team_n_pes": "team",
                   "team_translate_pe": "src_team src_pe dest_team",
                   **{kind: params for kind, (params, _doc) in COLLECTIVE_KINDS.items()}}

#: the Python implementations behind the names: the simulator's device functions,
#: the host forms, and the host-and-device functions, bound by the package
#: (``bind``) so that this table imports none of them
_BOUND = {"simulator": None, "host": {}, "both": {}}


def bind(host=None, simulator=None, both=None):
    """Give the names their host forms (name -> function, every name of
    HOST_FORMS), on the simulator its device functions (a module), and the
    host-and-device functions (name -> function, every name of HOST_AND_DEVICE)."""
    if host is not None:
        assert set(host) == set(HOST_FORMS), sorted(set(host) ^ set(HOST_FORMS))
        _BOUND["host"] = dict(host)
    if simulator is not None:
        _BOUND["simulator"] = simulator
    if both is not None:
        assert set(both) == set(HOST_AND_DEVICE), sorted(set(both) ^ set(HOST_AND_DEVICE))
        _BOUND["both"] = dict(both)


def host_and_device(name):
    """The function of the host-and-device name ``name`` (``bind``)."""
    return _BOUND["both"][name]


def simulated(name):
    """The simulator's device function ``name`` when called in a kernel on
    the simulator (its block threads run kernels), else None."""
    import threading

    simulator = _BOUND["simulator"]
    if simulator is not None and hasattr(threading.current_thread(), "blockIdx"):
        return getattr(simulator, name)
    return None


def _implementation(name):
    """The Python implementation of ``name`` for this call: the simulator's device
    function inside a simulated kernel, the host form on the host where one exists."""
    from . import _current

    _current.require(name)
    device = simulated(name)
    if device is not None:
        return device
    host = _BOUND["host"].get(name)
    if host is not None:
        return host
    raise ShmemUsageError(
        f"shmem.{name}() is a device function: call it inside a @cuda.jit kernel")


def cache_refused(kernel):
    """The error for the kernel named ``kernel``, which calls numba-shmem and
    was declared with ``cache=True``: the same on both backends (the GPU's
    lowering raises it, ``_cuda/_state.py``; the simulator's launch,
    ``_sim/_cache.py``)."""
    return ShmemUsageError(f"kernel {kernel!r} calls numba-shmem and was declared with "
                           "cache=True; numba cannot cache kernels that link device state, "
                           "remove cache=True")


def _make(name, params, doc):
    def device_function(*args, **kwargs):
        return _implementation(name)(*args, **kwargs)

    # positional or by the documented names, on both backends (the GPU's
    # typing folds keywords by the same names, _cuda/_typing.typer_for)
    parameters = [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD)
                  for p in params.split()]
    if name in HOST_FORMS:
        doc = f"{doc} {HOST_FORMS[name]}"
        parameters.append(inspect.Parameter("stream", inspect.Parameter.KEYWORD_ONLY, default=0))
    device_function.__name__ = device_function.__qualname__ = name
    device_function.__doc__ = doc
    device_function.__module__ = "numba_shmem"
    device_function.__signature__ = inspect.Signature(parameters)
    return device_function


FUNCTIONS = {name: _make(name, params, doc) for name, (params, doc) in TABLE.items()}
globals().update(FUNCTIONS)
