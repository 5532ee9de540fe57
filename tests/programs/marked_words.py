"""A kernel's marked descriptor (_cuda/_far.py's ``_publish_marked``, the
source the kernel compiles), run as Python over a ring of int64 words, against
the proxy's side (_transport/_engine.py's ``marked_whole`` and ``unmarked``)
and the ring module's own encoding (``_ring.marked``, which the host's tests
post with): every field posted comes back with every bit, the words are the
ring module's, and the slot's next lap does not take them as its own; a word
not yet written leaves the descriptor not whole. Property-tested. Prints
``ok``."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from numba_shmem._cuda import _far, _proxied
from numba_shmem._transport import _engine, _ring

SLOTS = _ring.SLOTS
SOURCE = compile(_far._publish_marked("code", "pe", "arg", "cond"), "_publish_marked", "exec")
CONSTANTS = {k: v for k, v in _proxied._NAMESPACE.items() if k.startswith("RING_")}
CODES = ([_ring.code(_ring.PUT), _ring.code(_ring.GET)]
         + [_ring.code(_ring.ATOMIC, d, o, f) for d in range(len(_ring.DTYPES))
            for o in range(len(_ring.ATOMIC_OPS)) for f in (0, 1)]
         + [_ring.code(_ring.SIGNAL, 0, op) for op in (0, 1, _ring.SIGNAL_MAX)])
INT64 = st.integers(-2**63, 2**63 - 1)


def posted(t, code, pe, offset, arg, cond, skip=None):
    """The ring's words once the kernel's source has posted ticket ``t`` (its
    store of word ``skip`` left out)."""
    words = np.zeros(SLOTS * 8, np.int64)

    def store(address, value):
        if address // 8 % 8 != skip:
            words[address // 8] = (value + 2**63) % 2**64 - 2**63  # (as an int64 holds it)

    exec(SOURCE, {**CONSTANTS, "_store_word": store, "ring": 0, "slot": t % SLOTS, "t": t,
                  "m_off": offset, "code": code, "pe": pe, "arg": arg, "cond": cond})
    return words


@settings(max_examples=3000, deadline=None)
@given(st.integers(0, 2**42), st.sampled_from(CODES), st.integers(0, 2**24),
       st.integers(-_ring.MARKED_OFFSET, _ring.MARKED_OFFSET - 1), INT64, INT64,
       st.sampled_from([None, *_ring.MARKED]))
def check(t, code, pe, offset, arg, cond, skip):
    words = posted(t, code, pe, offset, arg, cond, skip)
    d = t % SLOTS * 8
    if skip is not None:
        assert not _engine.marked_whole(words, t, d), (t, skip)
        return
    assert _engine.marked_whole(words, t, d)
    assert tuple(int(x) for x in _engine.unmarked(words, d)) == (code, pe, offset, arg, cond)
    assert [int(words[d + k]) for k in _ring.MARKED] == _ring.marked(t, code, pe, offset, arg,
                                                                     cond)
    assert not _engine.marked_whole(words, t + SLOTS, d)
    assert not _engine.marked_whole(words, t - SLOTS, d) or t < SLOTS


check()
print("ok")
