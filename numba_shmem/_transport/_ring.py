"""The ring that GPU threads post proxy requests into, and its host side.

One block of pinned host memory, mapped into the GPU's address space, laid out
as below (every word a uint64). A thread that posts takes a ticket ``t`` from a
counter in device memory (an atomic add: tickets number this PE's requests in
the order they were taken); its slot is ``t % SLOTS``. It waits until the
slot's FREE word reads ``t`` (the slot's previous request is done with it),
writes its data into the slot's staging area, the descriptor's fields, and
last, with a release store, SEQ = ``t + 1``.

A request with nothing staged before it (an element's put, whose value it
carries, a get, an atomic, a signal) is posted marked instead, with no
release (a release store at system scope waits for a read over the bus, 1.4
us on an H200): the thread writes MARKED words in any order, each with the
ticket's ``mark`` in its top byte (the slot's previous request carried the
mark before it, or none) and its fields below (``marked``); a put's value
goes in COND. The proxy takes the descriptor once every one of them carries
the mark. A released descriptor writes all eight words, so that no word of
a marked one before it stays.

The proxy thread reads the slots in ticket order: slot ``t % SLOTS`` once its
SEQ reads ``t + 1``. It copies the request out and, for a request that
expects no answer, gives the slot to ticket ``t + SLOTS`` at once (FREE). An
answer (a get's data into the staging area, a fetching atomic's old value
into ANSWER) is followed by DONE = ``t + 1``; the waiting thread reads it and
frees the slot itself. COMPLETE holds the number of tickets whose requests are
all complete at their targets (the first one still outstanding): ``quiet`` on
the GPU waits until it reaches the ticket counter.

Memory is bounded (SLOTS descriptors and CHUNK bytes of data each); a thread
that finds its slot taken waits, it never overwrites. Larger transfers are cut
into CHUNK-byte requests; or, a put from this PE's heap of FROM_MIN bytes or
more, into PUT_FROM requests of up to PIECE bytes whose data stays where it
is: the descriptor's ADDR word holds its address on the GPU, the proxy copies
it out itself and answers DONE once it has (the thread may then write the
source again, and gives the slot back). The proxy says whether it does so in
the FROM word (threads read a copy of it kept in GPU memory): where its copies
would wait for the application's time slice (no MPS daemon shares the GPU), it
does not.

A blocking put of a warp or a block from the heap of up to STAGE_PIECE bytes
does not wait for the proxy: the group copies it into one of STAGE_SEGS
staging segments that the proxy keeps in this PE's heap (a staging ticket
``u`` from a second counter, segment ``u % STAGE_SEGS``, free once its
STAGE_FREE word reads ``u``) and posts a non-blocking PUT_FROM from there,
COND = ``u + 1``; the proxy writes STAGE_FREE = ``u + STAGE_SEGS`` once it has
copied the data out.

A thread need not read its slot's FREE word over the bus (about 1.3 us on an
H200): the proxy keeps FREED, the first ticket whose slot is not yet given
back (every ticket below it is), and STAGES_FREED, the same of the staging
tickets; threads keep the last values they read of both in GPU memory. Ticket
``t``'s slot is free where ``t < FREED + SLOTS``: a thread reads the words
over the bus only where its copy says otherwise (once in SLOTS tickets while
the ring keeps up), and then waits for FREE itself only where the proxy's
word says it is still taken.
"""

import numpy as np

SLOTS = 1024  # a power of two
CHUNK = 8192  # bytes of data a request carries, staged in its slot
PIECE = 1 << 20  # the most bytes one request moves
FROM_MIN = 4 * CHUNK  # a put from the heap this large goes as PUT_FROM requests
AHEAD = 4  # PUT_FROM requests of one call in the ring at once (each up to PIECE)
STAGE_SEGS = 8  # a power of two
STAGE_PIECE = 256 << 10  # the most bytes of a staged put
STAGE_STRIDE = STAGE_PIECE + 64  # (data lands at its source's offset from a 16-byte boundary)
STAGE_BYTES = STAGE_SEGS * STAGE_STRIDE  # of the heap, where the proxy stages

# the descriptor of slot s: words at s * DESCRIPTOR
DESCRIPTOR = 64
SEQ, CODE, PE, OFFSET, ARG, COND, ADDR = range(7)  # word indexes in a descriptor
FREE = SLOTS * DESCRIPTOR            # then SLOTS words: the ticket each slot waits for
DONE = FREE + 8 * SLOTS              # SLOTS words: t + 1 once ticket t is answered
ANSWER = DONE + 8 * SLOTS            # SLOTS words: a fetching atomic's old value
COMPLETE = ANSWER + 8 * SLOTS        # one word
FROM = COMPLETE + 8                  # one word: FROM_MIN where PUT_FROM is used, else 0
STAGE_FREE = FROM + 8                # STAGE_SEGS words: the staging ticket each waits for
FREED = STAGE_FREE + 8 * STAGE_SEGS  # one word: every ticket below it has its slot back
STAGES_FREED = FREED + 8             # one word: the same of the staging tickets
STAGING = COMPLETE + 128             # SLOTS areas of CHUNK bytes
assert STAGES_FREED + 8 <= STAGING
NBYTES = STAGING + SLOTS * CHUNK

#: a marked descriptor's words: CODE | PE << PE_SHIFT; OFFSET (56 bits, signed);
#: ARG's low and high halves; COND's low and high halves. The released form
#: never leaves a mark in any of them (its ARG and COND words, which may hold
#: any bits, are not among them)
MARKED = (0, 1, 2, 3, 6, 7)
MARK_SHIFT, PE_SHIFT = 56, 25
LOW56 = (1 << MARK_SHIFT) - 1
#: the most a marked OFFSET holds (a larger one, no heap's, goes as the nearest
#: it holds: the target refuses it all the same)
MARKED_OFFSET = 1 << 55


def mark(ticket):
    """Ticket ``ticket``'s mark: 0x80 to 0xBF, the slot's lap; never the top
    byte of a released word (a heap offset, a PE, a code, an address)."""
    return 0x80 | (ticket // SLOTS) & 0x3F


def marked(ticket, code, pe, offset, arg, cond):
    """The MARKED words of ticket ``ticket``'s marked descriptor (int64s, as
    the GPU writes them)."""
    m = mark(ticket) << MARK_SHIFT
    low, mask = (1 << 32) - 1, (1 << 64) - 1
    words = (m | code | pe << PE_SHIFT, m | offset & LOW56, m | arg & low, m | arg >> 32 & low,
             m | cond & low, m | cond >> 32 & low)
    return [w - (1 << 64) if w & (1 << 63) else w for w in (w & mask for w in words)]


#: the CODE word: kind | dtype << 8 | op << 16 | fetch << 24 (PUT_FROM: only
#: in the GPU's ring; the proxy sends it as a PUT; op FROM_NBI: nobody waits
#: for its DONE, the proxy gives its slot back once its data is copied out)
PUT, GET, ATOMIC, SIGNAL, PUT_FROM = 1, 2, 3, 4, 5
FROM_NBI = 1
DTYPES = ("int32", "uint32", "int64", "uint64", "float32", "float64")
ATOMIC_OPS = ("fetch", "set", "swap", "compare_swap", "add", "and", "or", "xor")
#: the ops of ATOMIC_OPS that apply to floating-point values
FLOAT_OPS = ("fetch", "set", "swap", "add")
#: a signal's op: SIGNAL_SET (0), SIGNAL_ADD (1), or MAX (a barrier's epoch)
SIGNAL_MAX = 2


def code(kind, dtype=0, op=0, fetch=0):
    return kind | dtype << 8 | op << 16 | fetch << 24


class DeviceRing:
    """One PE's ring, as the proxy's loop (``_engine``) takes it: ``memory`` is
    the ring's uint8 host view (zeroed here, every slot free for its first
    ticket); ``posted()`` reads the ticket counter (requests posted so far,
    from the GPU)."""

    def __init__(self, memory, posted):
        assert memory.size == NBYTES
        self.memory = memory
        words = memory[:STAGING].view(np.uint64)
        words[:] = 0
        words[FREE // 8:FREE // 8 + SLOTS] = np.arange(SLOTS, dtype=np.uint64)
        words[STAGE_FREE // 8:STAGE_FREE // 8 + STAGE_SEGS] = np.arange(STAGE_SEGS,
                                                                        dtype=np.uint64)
        self.posted = posted

    @property
    def from_min(self):
        """The FROM word: FROM_MIN where the proxy takes PUT_FROM, else 0."""
        return int(self.memory[FROM:FROM + 8].view(np.uint64)[0])

    @from_min.setter
    def from_min(self, value):
        self.memory[FROM:FROM + 8].view(np.uint64)[0] = value


def _value(bits, dtype):
    """The ``dtype`` value whose bits are the low bits of the uint64 ``bits``."""
    return np.array([bits], np.uint64).view(np.uint8)[:dtype.itemsize].view(dtype)[0].item()


def _bits(value):
    """The uint64 holding ``value``'s bits (a numpy scalar), zero-extended."""
    raw = np.zeros(8, np.uint8)
    data = np.asarray(value).reshape(1).view(np.uint8)
    raw[:data.size] = data
    return raw.view(np.uint64)[0]
