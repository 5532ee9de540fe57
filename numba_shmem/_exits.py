"""The code this process exits with, as far as a library can see it.

A PE that leaves an MPI job without ``finalize()`` ends the job with its own
exit code (``MPI_Abort``): otherwise ``MPI_Finalize`` at its exit waits for
the other PEs, which wait for it. Python tells exit handlers nothing of the
code, so ``watch()`` notes it as it goes by: an uncaught exception is 1 (the
runtime's excepthook notes that); a ``SystemExit`` that leaves the program's
outermost frame (``sys.exit(3)``, ``raise SystemExit(3)``, ``exit(3)``) is
seen with ``sys.monitoring`` (Python 3.12 and later; its PY_UNWIND event is
global, so every frame that an exception leaves calls ``unwound``, a compare
and a return). Before 3.12, only ``sys.exit`` calls on the main thread are
seen, and one that the program catches and then ends normally counts too
(nothing lets a library tell the two apart there). A code not seen is 0.
"""

import sys
import threading

_code = None  # the code of the SystemExit the program ends with, once seen
_hooks = []  # how to undo what watch() installed


def status(exc):
    """The exit status Python gives a ``SystemExit``: its int code, 0 for
    None, 1 for anything else (a message)."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    return 1


def code():
    """The exit code noted so far, or None."""
    return _code


def watch():
    """Start noting the code of a SystemExit that ends the program."""
    global _code
    _code = None
    if _hooks:
        return
    monitoring = getattr(sys, "monitoring", None)
    tool = _free_tool(monitoring) if monitoring is not None else None
    if tool is None:
        _wrap_sys_exit()
        return
    outermost = sys._getframe()
    while outermost.f_back is not None:
        outermost = outermost.f_back
    outer_code = outermost.f_code

    def unwound(code, _offset, exc):
        global _code
        if code is outer_code and isinstance(exc, SystemExit):
            _code = status(exc)

    monitoring.use_tool_id(tool, "numba-shmem")
    monitoring.register_callback(tool, monitoring.events.PY_UNWIND, unwound)
    monitoring.set_events(tool, monitoring.events.PY_UNWIND)

    def undo():
        monitoring.set_events(tool, 0)
        monitoring.register_callback(tool, monitoring.events.PY_UNWIND, None)
        monitoring.free_tool_id(tool)
    _hooks.append(undo)


def _free_tool(monitoring):
    """A sys.monitoring tool id nobody uses (of those PEP 669 leaves to
    others than debuggers, coverage, profilers and optimizers), or None."""
    for tool in (3, 4):
        if monitoring.get_tool(tool) is None:
            return tool
    return None


def _wrap_sys_exit():
    original = sys.exit

    def exit(status_=None):  # noqa: A001  (stands in for sys.exit)
        global _code
        try:
            original(status_)
        except SystemExit as exc:
            # (in another thread it ends only that thread)
            if threading.current_thread() is threading.main_thread():
                _code = status(exc)
            raise
    exit.__doc__ = original.__doc__
    sys.exit = exit

    def undo():
        if sys.exit is exit:
            sys.exit = original
    _hooks.append(undo)


def unwatch():
    """Remove what ``watch()`` installed."""
    while _hooks:
        _hooks.pop()()
