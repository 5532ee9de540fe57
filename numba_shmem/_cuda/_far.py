"""Device code toward PEs on other nodes: requests into the proxy's ring."""

from .. import _device_api as api
from . import _proxied
from ._primitives import _addr, _heap_base, _load_relaxed, _store_relaxed, _trap
from ._source import _BACKOFF, _indent, _widest


# -- toward PEs on other nodes: requests into the proxy's ring ---------------------
#
# A PE whose peer table entry is 0 is on another node (_proxied.py). Requests
# go into this PE's ring in mapped host memory (_transport/_ring.py), in the
# order of their tickets: the proxy sends them in that order and the target
# applies them in it, which is fence's order; quiet waits until the ring's
# COMPLETE word reaches the tickets taken.

def _spin(condition):
    """Source: wait, with the waits' back-off, while ``condition`` holds."""
    return f"polls = 0\npause = 32\nwhile {condition}:\n" + _indent(_BACKOFF, 1)


def _post(code, pe, offset, arg="0", cond="0", stage=""):
    """Source: post one request into this PE's ring, once its slot is free.
    Leaves ``t`` (its ticket), ``slot``, ``ring`` and ``stage_at`` (the slot's
    data area, which the source ``stage`` fills before the descriptor is
    published)."""
    return ("t = _ring_claim()\n"
            "slot = t & RING_MASK\n"
            "ring = _ring_base()\n"
            + _spin("_load_word(ring + RING_FREE + slot * 8) != t") +
            "stage_at = ring + RING_STAGING + slot * RING_CHUNK\n"
            + stage +
            "desc = ring + slot * 64\n"
            f"_store_word(desc + 8, {code})\n"
            f"_store_word(desc + 16, {pe})\n"
            f"_store_word(desc + 24, {offset})\n"
            f"_store_word(desc + 32, {arg})\n"
            f"_store_word(desc + 40, {cond})\n"
            "_release_word(desc, t + 1)\n")


#: Source: wait for the answer to ticket ``t``; then give its slot back
_ANSWER = _spin("_load_word(ring + RING_DONE + slot * 8) != t + 1")
_GIVE_BACK = "_release_word(ring + RING_FREE + slot * 8, t + RING_SLOTS)\n"

#: Source: wait until every request this PE has posted is complete at its target
_RING_QUIET = ("ring = _ring_base()\n"
               "if ring != 0:\n"
               "    posted = _ring_posted()\n"
               + _indent(_spin("_load_word(ring + RING_COMPLETE) < posted"), 1))


def _serial_copy(dst, src, nbytes, smallest):
    """Source: this thread copies ``nbytes`` from ``src`` to ``dst`` alone, in
    pieces of the widest width allowed, none narrower than ``smallest``."""
    widths = tuple(w for w in (8, 4, 2, 1) if w >= smallest)
    return (f"align = ({dst}) | ({src}) | ({nbytes})\n"
            + _widest(lambda w: f"    k = 0\n    while k < {nbytes}:\n"
                      f"        _copy{w}({dst} + k, {src} + k)\n        k += {w}\n", widths, 0))


def _far_copy(put, remote, local, nbytes, smallest, shift="", local_shift=""):
    """Source: this thread's part (chunks ``start, start + stride, ...``) of a
    put (``put``) or get of ``nbytes`` between the symmetric ``remote`` on PE
    ``pe`` and ``local``, through the ring; ``shift`` and ``local_shift`` add
    to the two addresses (bytes)."""
    chunk = ("at = c * RING_CHUNK\n"
             "n = min(RING_CHUNK, total - at)\n")
    if put:
        chunk += _post("RING_PUT", "pe", "far_at + at", "n",
                       stage=_serial_copy("stage_at", "near_at + at", "n", smallest))
    else:
        chunk += (_post("RING_GET", "pe", "far_at + at", "n") + _ANSWER
                  + _serial_copy("near_at + at", "stage_at", "n", smallest) + _GIVE_BACK)
    return (f"total = {nbytes}\n"
            f"far_at = _addr({remote}) - _heap_base(){shift}\n"
            f"near_at = _addr({local}){local_shift}\n"
            "c = start\n"
            "while c * RING_CHUNK < total:\n"
            + _indent(chunk, 1) +
            "    c += stride\n")


def _far_signal(sig, value, sig_op, pe):
    """Source: post a signal update (sig_op SIGNAL_SET or SIGNAL_ADD; any other
    stops the kernel, as on the direct path) to ``sig`` on PE ``pe``."""
    return (f"if {sig_op} != {api.SIGNAL_SET} and {sig_op} != {api.SIGNAL_ADD}:\n    _trap()\n"
            + _post(f"RING_SIGNAL + ({sig_op} << 16)", pe, f"_addr({sig}) - _heap_base()",
                    f"_bits({sig}, {value})"))


def _far_element(name, array, at, pe, put, value=None, result="v"):
    """Source: one element of ``array`` at address ``at`` (on this PE's heap),
    put (``value``) to or got (into ``result``) from PE ``pe``."""
    offset = f"{at} - _heap_base()"
    if put:
        return _post("RING_PUT", pe, offset, f"{array}.itemsize",
                     stage=f"_store_relaxed(stage_at, {array}, {value})\n")
    return (_post("RING_GET", pe, offset, f"{array}.itemsize") + _ANSWER
            + f"{result} = _load_relaxed({array}, stage_at)\n" + _GIVE_BACK)


def _far_namespace():
    """What the sources that may post refer to: in a job on one node, ``_far``
    is a constant false and the path to other nodes folds away
    (``_proxied.compiled_in``)."""
    return {**_proxied.namespace(), "_heap_base": _heap_base, "_addr": _addr,
            "_store_relaxed": _store_relaxed, "_load_relaxed": _load_relaxed, "_trap": _trap,
            "min": min}
