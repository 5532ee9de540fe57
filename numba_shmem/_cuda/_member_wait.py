"""The wait of the library's own kernels for a word that one member sends:
the waits' spin and back-off, and, between sleeps, a look at that member's
departure word (``_heap/_symmetric.departures``), so that a member that left
the job stops the kernel (``_stop_for``: the host then says which PE left)
instead of leaving it to spin for ever.

``member_wait(word, mark, gone, pe)`` returns ``word[0]`` once it is at least
``mark`` (an acquire load: what was written before it is visible); ``gone``
is this PE's departure word of PE ``pe``. Used by the host reductions in lines
(``_stream/_kernels.line_reduce_kernel``); the simulator's twin is in
``_sim/_device.py``.
"""

import functools

from numba.cuda.extending import intrinsic

from ._source import (
    _BACKOFF, _BACKOFF_START, _compile_source, _debug_timeout, _indent, _spin_namespace,
)
from ._primitives import _addr, _load_acquire, _stop_for

_SOURCE = """def impl(word, mark, gone, pe):
BACKOFF_START
    start = _now() if DEBUG else 0
    while True:
        seen = _load_acquire(word, _addr(word))
        if seen >= mark:
            return seen
BACKOFF
        # (and the word once more: it may have arrived before the member left)
        if polls % GONE_POLLS == 0 and _load_acquire(gone, _addr(gone)) != 0 and \
                _load_acquire(word, _addr(word)) < mark:
            if DEBUG:
                print('numba-shmem: PE', _my_pe(), 'waited for the part of PE', pe,
                      'in a host reduction, but PE', pe, 'left the job')
            _stop_for(pe)
        if DEBUG and _now() - start > TIMEOUT:
            print('numba-shmem: PE', _my_pe(), 'timed out in a host reduction waiting for',
                  'the part of PE', pe, ': word', _addr(word), 'below', mark, 'last seen', seen)
            _trap()
"""


@functools.cache
def _implementation(debug, timeout_ns):
    source = _SOURCE.replace("BACKOFF_START\n", _indent(_BACKOFF_START, 1)).replace(
        "BACKOFF\n", _indent(_BACKOFF, 2))
    return _compile_source(source, {**_spin_namespace(debug, timeout_ns),
                                    "_load_acquire": _load_acquire, "_addr": _addr,
                                    "_stop_for": _stop_for})


@intrinsic
def member_wait(typingctx, word, mark, gone, pe):
    """Compiled into the caller (as the device API's lowerings are), with the
    debug checks of the running job."""
    def codegen(context, builder, sig, args):
        return context.compile_internal(builder, _implementation(*_debug_timeout()), sig, args)
    return word.dtype(word, mark, gone, pe), codegen
