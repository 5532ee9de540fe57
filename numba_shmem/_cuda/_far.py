"""Device code toward PEs on other nodes: requests into the proxy's ring."""

import re

from numba import cuda, types

from .. import _device_api as api
from . import _proxied
from ._primitives import (
    _addr, _heap_size, _load_relaxed, _per_call, _store_relaxed, _trap,
)
from ._source import (
    _BACKOFF_START, _BLOCK_RANK, _BLOCK_SIZE, _SCOPE, _backoff, _copy_source, _indent,
    _lean_copy_source, _widest,
)


# -- toward PEs on other nodes: requests into the proxy's ring ---------------------
#
# A PE whose peer table entry is 0 is on another node (_proxied.py). Requests
# go into this PE's ring in mapped host memory (_transport/_ring.py), in the
# order of their tickets: the proxy sends them in that order and the target
# applies them in it, which is fence's order; quiet waits until the ring's
# COMPLETE word reaches the tickets taken.

def _spin(condition):
    """Source: wait, with the waits' back-off, while ``condition`` holds."""
    return _BACKOFF_START + f"while {condition}:\n" + _indent(_backoff("_far_left"), 1)


def _free_wait(ticket, copy, keep, freed, waits, count):
    """Source: wait until ``ticket``'s place (of ``count``, the ring's words
    ``waits`` the ticket each waits for) is free: at once where the copy of
    the proxy's word ``freed`` in GPU memory (``copy()``) says so, else where
    the word itself, read over the bus and kept (``keep``), says so; only
    then by the place's own word."""
    return (f"if {ticket} >= {copy}() + {count}:\n"
            f"    freed = _load_word(ring + {freed})\n"
            f"    {keep}(freed)\n"
            f"    if {ticket} >= freed + {count}:\n"
            + _indent(_spin(f"_load_word(ring + {waits} + ({ticket} & ({count} - 1)) * 8)"
                            f" != {ticket}"), 2))


#: Source: wait until ticket ``t``'s slot in the ring at ``ring`` is free
_SLOT_WAIT = _free_wait("t", "_freed_copy", "_keep_freed", "RING_FREED", "RING_FREE",
                        "RING_SLOTS")


def _claim():
    """Source: take a ticket ``t`` and wait until its ``slot`` in this PE's
    ring (at ``ring``) is free."""
    return ("t = _ring_claim()\n"
            "slot = t & RING_MASK\n"
            "ring = _ring_base()\n"
            + _SLOT_WAIT)


def _publish(code, pe, offset, arg="0", cond="0", addr="0"):
    """Source: write ticket ``t``'s descriptor into its ``slot`` and publish it
    (a release: what the slot's staging area holds goes before it)."""
    return ("desc = ring + slot * 64\n"
            f"_store_word(desc + 8, {code})\n"
            f"_store_word(desc + 16, {pe})\n"
            f"_store_word(desc + 24, {offset})\n"
            f"_store_word(desc + 32, {arg})\n"
            f"_store_word(desc + 40, {cond})\n"
            f"_store_word(desc + 48, {addr})\n"
            # (and the last word: no word of a marked request before it stays)
            "_store_word(desc + 56, 0)\n"
            "_release_word(desc, t + 1)\n")


def _publish_marked(code, pe, arg, cond):
    """Source: write ticket ``t``'s descriptor into its ``slot`` marked
    (_transport/_ring.py: each word carries the ticket's mark, no release),
    its offset ``m_off`` (which fits: ``_post_marked``)."""
    return ("desc = ring + slot * 64\n"
            "m_mark = (0x80 | (t // RING_SLOTS) & 0x3F) << RING_MARK_SHIFT\n"
            "_store_word(desc + 8, m_mark | m_off & RING_LOW56)\n"
            f"m_word = {arg}\n"
            "_store_word(desc + 16, m_mark | m_word & 0xFFFFFFFF)\n"
            "_store_word(desc + 24, m_mark | (m_word >> 32) & 0xFFFFFFFF)\n"
            f"m_word = {cond}\n"
            "_store_word(desc + 48, m_mark | m_word & 0xFFFFFFFF)\n"
            "_store_word(desc + 56, m_mark | (m_word >> 32) & 0xFFFFFFFF)\n"
            f"_store_word(desc, m_mark | ({code}) | ({pe}) << RING_PE_SHIFT)\n")


def _post_marked(code, pe, offset, arg="0", cond="0"):
    """Source: post one request that stages nothing before it, marked (no
    release: a request's order after the thread's earlier stores is
    ``fence``'s to give, as on the direct path). An offset beyond what a
    marked word holds (no heap's) goes as the nearest it holds: the target
    refuses it all the same. Leaves ``t``, ``slot``, ``ring`` and
    ``stage_at``."""
    return (_claim() + "stage_at = ring + RING_STAGING + slot * RING_CHUNK\n"
            f"m_off = min(max({offset}, -RING_MARKED_OFFSET), RING_MARKED_OFFSET - 1)\n"
            + _publish_marked(code, pe, arg, cond))


def _post(code, pe, offset, arg="0", cond="0", stage=""):
    """Source: post one request into this PE's ring, once its slot is free.
    Leaves ``t`` (its ticket), ``slot``, ``ring`` and ``stage_at`` (the slot's
    data area, which the source ``stage`` fills before the descriptor is
    published)."""
    return (_claim() + "stage_at = ring + RING_STAGING + slot * RING_CHUNK\n"
            + stage + _publish(code, pe, offset, arg, cond))


#: Source: wait for the answer to ticket ``t``; then give its slot back
_ANSWER = _spin("_load_word(ring + RING_DONE + slot * 8) != t + 1")
_GIVE_BACK = "_release_word(ring + RING_FREE + slot * 8, t + RING_SLOTS)\n"
#: Source: give ticket ``t``'s slot back once its answer was read with an
#: acquire (which orders the store after it: no release)
_GIVE_BACK_ACQUIRED = "_store_word(ring + RING_FREE + slot * 8, t + RING_SLOTS)\n"

#: Source: quiet, both paths: the direct path's fence.sc (``_quiet``), and
#: every request this PE has posted complete at its target: at once where the
#: copy of COMPLETE in GPU memory says so (nothing posted since a quiet saw it
#: all complete, or nothing posted at all), else by the ring's word, read over
#: the bus, and then kept. The tickets and the copy are read before the fence
#: (which makes them acquires) and looked at after it, so that their reads
#: and the direct path's stores are waited for together: read after it, they
#: doubled a p + quiet between PEs of one node (0.24 to 0.50 us on an H200).
#: Where it waited for COMPLETE, the fence again after: what follows (a
#: barrier's relaxed epoch stores to the PEs of this node) is released after
#: the completion it saw
_RING_QUIET = ("ring = _ring_base()\n"
               "posted = 0\n"
               "seen = 0\n"
               "if ring != 0:\n"
               "    posted = _ring_posted()\n"
               "    seen = _complete_copy()\n"
               "_quiet()\n"
               "if seen < posted:\n"
               + _indent(_spin("_load_word(ring + RING_COMPLETE) < posted"), 1)
               + "    _keep_complete(posted)\n"
               "    _quiet()\n")


def _serial_copy(dst, src, nbytes, smallest):
    """Source: this thread copies ``nbytes`` from ``src`` to ``dst`` alone, in
    pieces of the widest width allowed, none narrower than ``smallest``."""
    widths = tuple(w for w in (8, 4, 2, 1) if w >= smallest)
    return (f"align = ({dst}) | ({src}) | ({nbytes})\n"
            + _widest(lambda w: f"    k = 0\n    while k < {nbytes}:\n"
                      f"        _copy{w}({dst} + k, {src} + k)\n        k += {w}\n", widths, 0))


_COPY_NAMES = re.compile(r"\b(dst|src|nbytes|start|stride|align|head|count|d|s|i|tail|tail_at)\b")


def _renamed(source):
    """``source`` (a copy loop from _copy_source) with its variables prefixed
    ``w_``."""
    return _COPY_NAMES.sub(r"w_\1", source)


def _from_heap(scope, nbi):
    """Source: the group's put of ``total`` bytes at ``near_at`` (in this PE's
    heap) to ``far_at`` on PE ``pe`` as PUT_FROM requests of up to RING_PIECE
    bytes, which the proxy copies out of the heap itself (the copy engine, at
    the speed of the bus; the threads' stores into the ring's mapped host
    memory were the transfer's bottleneck). One thread posts them, at most
    RING_AHEAD in the ring at once, and waits until each is copied out (its
    source may then be written again) before it gives the slot back;
    the group meets before (as for chunks: tickets only once every thread is
    here) and after. Non-blocking (``nbi``), it posts them all and waits for
    none: the proxy gives each slot back once it has copied the data out, and
    a quiet completes them."""
    _setup, _start, _stride, sync, leader = _SCOPE[scope]
    sync = sync.lstrip()  # (a statement of the impl's body there)
    which = ("t = first_t + {p}\n"
             "slot = t & RING_MASK\n"
             "ring = _ring_base()\n")
    post = (which.format(p="p")
            + _SLOT_WAIT
            + "at = p * RING_PIECE\n"
            "n = min(RING_PIECE, total - at)\n"
            + _publish("RING_PUT_FROM_NBI" if nbi else "RING_PUT_FROM", "pe", "far_at + at",
                       "n", addr="near_at + at"))
    if nbi:
        return (sync + f"if {leader}:\n"
                + _indent("npieces = (total + RING_PIECE - 1) // RING_PIECE\n"
                          "first_t = _ring_claim_many(npieces)\n"
                          "for p in range(npieces):\n" + _indent(post, 1), 1)
                + sync)
    collect = which.format(p="q") + _ANSWER + _GIVE_BACK
    return (sync + f"if {leader}:\n"
            + _indent("npieces = (total + RING_PIECE - 1) // RING_PIECE\n"
                      "first_t = _ring_claim_many(npieces)\n"
                      "p = 0\n"
                      "while p < npieces + RING_AHEAD:\n"
                      + _indent("q = p - RING_AHEAD\n"
                                "if q >= 0 and q < npieces:\n" + _indent(collect, 1)
                                + "if p < npieces:\n" + _indent(post, 1)
                                + "p += 1\n", 1), 1)
            + sync)


def _staged(scope, smallest):
    """Source: the group's blocking put of ``total`` bytes (at most
    RING_STAGE_PIECE) at ``near_at`` in this PE's heap to ``far_at`` on PE
    ``pe``, staged: its first thread takes a staging segment (in this PE's
    heap, _transport/_ring.py), the group copies the data into it at the
    source's offset from a 16-byte boundary (in pieces no narrower than
    ``smallest``, the element's width: the edges of every narrower width cost
    registers, 90 against 72 in a block's put_block of float64 in a loop),
    and the first thread posts a non-blocking PUT_FROM from there, which the
    proxy copies out and gives the segment back. The call returns once the
    group's copy is done, with no wait for the proxy (a blocking PUT_FROM
    waits for its copy out and DONE: on an H200 about 29 us a put of 64 KiB).
    The group meets before (tickets only once every thread is here) and
    between its copy and the post."""
    _setup, start, stride, sync, leader = _SCOPE[scope]
    sync = sync.lstrip()
    if scope == "_warp":
        keep = ""
        share = ("stage_to = cuda.shfl_sync(mask, stage_to, 0)\n"
                 "u = cuda.shfl_sync(mask, u, 0)\n")
    else:
        keep = "staged_at[0] = stage_to\nstaged_at[1] = u\n"
        share = "stage_to = staged_at[0]\nu = staged_at[1]\n"
    take = ("u = _stage_claim()\n"
            "ring = _ring_base()\n"
            "sseg = u & (RING_STAGE_SEGS - 1)\n"
            + _free_wait("u", "_stages_freed_copy", "_keep_stages_freed",
                         "RING_STAGES_FREED", "RING_STAGE_FREE", "RING_STAGE_SEGS")
            + "stage_to = _stage_base() + sseg * RING_STAGE_STRIDE + (near_at & 15)\n" + keep)
    copy = (f"w_dst = stage_to\nw_src = near_at\nw_nbytes = total\nw_start = {start}\n"
            f"w_stride = {stride}\nif True:\n" + _renamed(_copy_source(smallest)))
    post = (_claim()
            + _publish("RING_PUT_FROM_NBI", "pe", "far_at", "total", "u + 1", addr="stage_to"))
    return ("stage_to = 0\nu = 0\n"
            + ("" if scope == "_warp" else "staged_at = cuda.shared.array(2, _int64)\n")
            + sync + f"if {leader}:\n" + _indent(take, 1) + sync + share + copy + sync
            + f"if {leader}:\n" + _indent(post, 1))


def _far_copy(put, remote, local, nbytes, smallest, shift="", local_shift="", scope="",
              nbi=False):
    """Source: the calling group's part of a put (``put``) or get of ``nbytes``
    between the symmetric ``remote`` on PE ``pe`` and ``local``, through the
    ring; ``shift`` and ``local_shift`` add to the two addresses (bytes).

    A thread alone (``scope`` "") posts every chunk and copies it by itself.
    In a warp or a block each warp takes every ``nwarps``-th chunk: its first
    lane posts it, and all its lanes copy it between the heap and the slot's
    staging area in consecutive pieces, so that a warp's stores into the
    ring's mapped host memory cross PCIe as whole lines (one thread per chunk
    wrote 8-byte pieces 8 KiB apart, a bus transaction each).

    A put of RING_FROM_MIN bytes or more whose source lies in this PE's heap
    goes as PUT_FROM requests instead (``_from_heap``), where the proxy says
    it takes them (the ring's FROM word); a warp's or a block's blocking one
    of up to RING_STAGE_PIECE bytes staged first (``_staged``)."""
    # (the length computed at each call, as the direct path's is: a warp's
    # put_warp in a loop, 80 registers against 62)
    head = (f"total = _per_call({nbytes})\n"
            "heap_at = _far_heap_base()\n"
            f"far_at = _addr({remote}) - heap_at{shift}\n"
            f"near_at = _addr({local}){local_shift}\n")
    if put:
        from_heap = _from_heap(scope, nbi)
        if scope and not nbi:
            from_heap = ("if total <= RING_STAGE_PIECE:\n" + _indent(_staged(scope, smallest), 1)
                         + "else:\n" + _indent(from_heap, 1))
        return (head + "in_heap = near_at - heap_at\n"
                "if total >= RING_FROM_MIN and in_heap >= 0 and in_heap + total <= _heap_size() "
                "and _ring_from() != 0:\n"
                + _indent(from_heap, 1) + "else:\n"
                + _indent(_far_chunks(put, smallest, scope), 1))
    return head + _far_chunks(put, smallest, scope)


def _far_transfer(name, put, remote, local, nbytes, smallest, scope, nbi=False, shift="",
                  local_shift=""):
    """Source: the calling group's part (``scope``'s) of ``name``, a put
    (``put``) or get of ``nbytes`` between the symmetric ``remote`` on PE
    ``pe`` and ``local`` through the ring (``_far_copy``), inline. As a
    function of its own it cost more than inline: linked as numba-cuda links a
    kernel (nvJitLink, link-time optimized), the function kept the call ABI's
    registers, not the kernel's, and the kernel took them all (a block's
    put_block in a loop: 134 registers, 56 inline, 48 in a one-node job;
    CUDA 13.5, sm_90)."""
    return (f"_proxy_check(pe, {name!r})\n"
            + _far_copy(put, remote, local, nbytes, smallest, shift, local_shift, scope, nbi))


def _far_chunks(put, smallest, scope):
    """Source: ``_far_copy``'s transfer in chunks staged in the ring's slots."""
    chunk = ("at = c * RING_CHUNK\n"
             "n = min(RING_CHUNK, total - at)\n")
    if not scope:
        if put:
            chunk += _post("RING_PUT", "pe", "far_at + at", "n",
                           stage=_serial_copy("stage_at", "near_at + at", "n", smallest))
        else:
            chunk += (_post("RING_GET", "pe", "far_at + at", "n") + _ANSWER
                      + _serial_copy("near_at + at", "stage_at", "n", smallest) + _GIVE_BACK)
        loop = "c = start\nwhile c * RING_CHUNK < total:\n" + _indent(chunk, 1) + "    c += stride\n"
        if not put:
            return loop
        # a put of up to 8 bytes carries them, as a p its value (marked)
        small = ("m_bytes = cuda.local.array(1, _int64)\n"
                 "m_bytes[0] = 0\n"
                 "k = 0\n"
                 "while k < total:\n"
                 "    _copy1(_addr(m_bytes) + k, near_at + k)\n"
                 "    k += 1\n"
                 + _post_marked("RING_PUT", "pe", "far_at", "total", "m_bytes[0]"))
        return "if total > 0 and total <= 8:\n" + _indent(small, 1) + "else:\n" + _indent(loop, 1)
    # The group takes one ticket for each chunk at once, so that the ring holds
    # the chunks in order (the target joins their copies into one), whichever
    # warp posts each first. Only once every thread of the group is here: a
    # thread still in a quiet before this call would wait for the tickets
    # taken, which are published only once it has come (a deadlock on the GPU).
    # (And every thread has read the first ticket before the next call takes.)
    count = "nchunks = (total + RING_CHUNK - 1) // RING_CHUNK\n"
    if scope == "_warp":  # (lanes and mask come from the scope's set-up)
        tickets = (count + "warp = 0\nnwarps = 1\nfirst_t = 0\n"
                   "cuda.syncwarp(mask)\n"
                   "if cuda.laneid == 0 and nchunks > 0:\n"
                   "    first_t = _ring_claim_many(nchunks)\n"
                   "first_t = cuda.shfl_sync(mask, first_t, 0)\n")
    else:
        # (the warp's place and the lane's computed at each call, as the
        # group's place in the direct path's copy: hoisted out of the caller's
        # loop they kept registers through it)
        lanes = f"min(32, {_BLOCK_SIZE} - ({_BLOCK_RANK} - cuda.laneid))"
        tickets = (count
                   + f"lanes = _per_call({lanes})\n"
                   "mask = -1 if lanes == 32 else (1 << lanes) - 1\n"
                   f"warp = _per_call({_BLOCK_RANK} >> 5)\n"
                   f"nwarps = _per_call(({_BLOCK_SIZE} + 31) >> 5)\n"
                   "first_at = cuda.shared.array(1, _int64)\n"
                   "cuda.syncthreads()\n"
                   "if warp == 0 and cuda.laneid == 0 and nchunks > 0:\n"
                   "    first_at[0] = _ring_claim_many(nchunks)\n"
                   "cuda.syncthreads()\n"
                   "first_t = first_at[0]\n")
    # the group copy, this lane of the warp's lanes, in names of its own (the
    # caller's start, stride, dst, ... stay as they are)
    between = ("w_dst = {dst}\nw_src = {src}\nw_nbytes = n\nw_start = _per_call(cuda.laneid)\n"
               "w_stride = lanes\nif True:\n" + _renamed(_indent(_lean_copy_source(smallest), 1)))
    chunk += ("t = first_t + c\n"
              "slot = t & RING_MASK\n"
              "ring = _ring_base()\n"
              "stage_at = ring + RING_STAGING + slot * RING_CHUNK\n")
    if put:
        chunk += ("if cuda.laneid == 0:\n"
                  + _indent(_SLOT_WAIT, 1) +
                  # the warp's barrier orders the first lane's wait before the
                  # lanes' stores into the slot, and their stores before its post
                  "cuda.syncwarp(mask)\n"
                  + between.format(dst="stage_at", src="near_at + at") +
                  "cuda.syncwarp(mask)\n"
                  "if cuda.laneid == 0:\n"
                  + _indent(_publish("RING_PUT", "pe", "far_at + at", "n"), 1))
    else:
        chunk += ("if cuda.laneid == 0:\n"
                  + _indent(_SLOT_WAIT
                            + _publish("RING_GET", "pe", "far_at + at", "n") + _ANSWER, 1) +
                  # the first lane saw the answer: the warp reads the data after it
                  "cuda.syncwarp(mask)\n"
                  + between.format(dst="near_at + at", src="stage_at") +
                  "cuda.syncwarp(mask)\n"
                  "if cuda.laneid == 0:\n"
                  + _indent(_GIVE_BACK, 1))
    return (tickets + "c = warp\n"
            "while c < nchunks:\n" + _indent(chunk, 1) + "    c += nwarps\n")


def _far_signal(sig, value, sig_op, pe):
    """Source: post a signal update (sig_op SIGNAL_SET or SIGNAL_ADD; any other
    stops the kernel, as on the direct path) to ``sig`` on PE ``pe``."""
    return (f"if {sig_op} != {api.SIGNAL_SET} and {sig_op} != {api.SIGNAL_ADD}:\n    _trap()\n"
            + _post_marked(f"RING_SIGNAL + ({sig_op} << 16)", pe,
                           f"_addr({sig}) - _far_heap_base()", f"_bits({sig}, {value})"))


def _far_element(name, array, at, pe, put, value=None, result="v"):
    """Source: one element of ``array`` at address ``at`` (on this PE's heap),
    put (``value``) to or got (into ``result``) from PE ``pe``."""
    offset = f"{at} - _far_heap_base()"
    if put:  # (the value in COND)
        return _post_marked("RING_PUT", pe, offset, f"{array}.itemsize",
                            f"_bits({array}, {value})")
    return (_post_marked("RING_GET", pe, offset, f"{array}.itemsize") + _ANSWER
            + f"{result} = _load_relaxed({array}, stage_at)\n" + _GIVE_BACK)


def _far_namespace():
    """What the sources that may post refer to: in a job on one node, ``_far``
    is a constant false and the path to other nodes folds away
    (``_proxied.compiled_in``)."""
    return {**_proxied.namespace(), "_heap_size": _heap_size, "_per_call": _per_call,
            "_addr": _addr, "max": max,
            "_store_relaxed": _store_relaxed, "_load_relaxed": _load_relaxed, "_trap": _trap,
            "min": min, "cuda": cuda, "_int64": types.int64}
