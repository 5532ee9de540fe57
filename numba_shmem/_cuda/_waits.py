"""Waits and tests on the GPU: spin on acquire loads with the shared back-off."""

from ._primitives import _addr, _compare, _load_acquire, _valid_cmp
from ._source import (
    _BACKOFF, _BACKOFF_START, _compile_source, _debug_timeout, _factory, _indent, _inline,
    _register, _spin_namespace,
)


# -- waits -------------------------------------------------------------------------

def _wait_source(name, params, result):
    """A spin-wait with back-off; in debug mode, a timeout that prints what it
    waited for and traps. A cmp that is not a CMP_* code (possible only when it
    is not a constant) stops the kernel instead of waiting for ever."""
    return (
        f"def impl({params}):\n"
        "    if not _valid_cmp(cmp):\n"
        "        if DEBUG:\n"
        f"            print('numba-shmem: shmem.{name}: PE', _my_pe(), 'got cmp =', cmp,\n"
        "                  'which is not one of shmem.CMP_EQ, CMP_NE, CMP_GT, CMP_LE, CMP_LT, "
        "CMP_GE')\n"
        "        _trap()\n"
        f"{_indent(_BACKOFF_START, 1)}"
        "    start = _now() if DEBUG else 0\n"
        "    while True:\n"
        f"{result}"
        f"{_indent(_BACKOFF, 2)}"
        "        if DEBUG and _now() - start > TIMEOUT:\n"
        f"            print('numba-shmem: PE', _my_pe(), 'timed out in {name} at address',\n"
        "                  WHERE, 'waiting for', WANT, 'last seen', SEEN)\n"
        "            _trap()\n")


def _make_wait(name, debug, timeout_ns):
    namespace = {**_spin_namespace(debug, timeout_ns), "_compare": _compare,
                 "_load_acquire": _load_acquire, "_addr": _addr, "_valid_cmp": _valid_cmp}
    scalar = name in ("signal_wait_until", "wait_until")
    if scalar:
        body = ("        seen = _load_acquire(ivar, _addr(ivar))\n"
                "        if _compare(seen, cmp, value):\n"
                f"            return {'seen' if name == 'signal_wait_until' else ''}\n")
        src = _wait_source(name, "ivar, cmp, value", body)
        src = src.replace("WHERE", "_addr(ivar)").replace("WANT", "value").replace("SEEN", "seen")
    else:
        vector = name.endswith("_vector")
        kind = name.replace("wait_until_", "").replace("_vector", "")
        params = ("ivars, indices, status, cmp, values" if kind == "some"
                  else "ivars, status, cmp, values")
        scan = _SCAN.replace("WANT", "values[i]" if vector else "values").replace(
            "RECORD", "indices[hits] = i" if kind == "some" else "pass")
        scan = "".join("    " + line + "\n" if line else "\n" for line in scan.splitlines())
        # with every element excluded (or none at all) there is nothing to wait
        # for: OpenSHMEM 1.5 returns SIZE_MAX (-1 here, an int64) and 0
        done = {"all": "        if pending == 0:\n            return\n",
                "any": "        if first >= 0:\n            return first\n"
                       "        if pending == 0:\n            return -1\n",
                "some": "        if hits > 0 or pending == 0:\n            return hits\n"}[kind]
        src = _wait_source(name, params, scan + done)
        src = src.replace("WHERE", "_addr(ivars)").replace("WANT", "cmp").replace("SEEN", "pending")
    return _compile_source(src, namespace)


def _impl_test(ivar, cmp, value):
    return 1 if _compare(_load_acquire(ivar, _addr(ivar)), cmp, value) else 0


_SCAN = """
    hits = 0
    first = -1
    pending = 0
    for i in range(ivars.size):
        if status[i] != 0:
            continue
        if _compare(_load_acquire(ivars, _addr(ivars) + i * ivars.itemsize), cmp, WANT):
            RECORD
            hits += 1
            if first < 0:
                first = i
        else:
            pending += 1
"""


def _make_test(kind):
    """test_all (kind "all"), test_any ("any") or test_some ("some")."""
    params = "ivars, indices, status, cmp, value" if kind == "some" else "ivars, status, cmp, value"
    scan = _SCAN.replace("WANT", "value").replace(
        "RECORD", "indices[hits] = i" if kind == "some" else "pass")
    result = {"all": "    return 1 if pending == 0 else 0\n", "any": "    return first\n",
              "some": "    return hits\n"}[kind]
    return _compile_source(f"def impl({params}):\n{scan}{result}",
                           {"_compare": _compare, "_load_acquire": _load_acquire})


def _wait_factory(name):
    @_factory
    def make(sig):
        return _make_wait(name, *_debug_timeout())
    return make


for _name in ("signal_wait_until", "wait_until", "wait_until_all", "wait_until_any",
              "wait_until_some", "wait_until_all_vector", "wait_until_any_vector",
              "wait_until_some_vector"):
    _register(_name, _inline(_wait_factory(_name)))

for _name, _impl in (("test", _impl_test),
                     ("test_all", _make_test("all")), ("test_any", _make_test("any")),
                     ("test_some", _make_test("some"))):
    _register(_name, _inline(_impl))
