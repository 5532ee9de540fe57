"""The device API from inside kernels, on every PE, checked on the host.

    device_api.py CHECK [CHECK ...]

Prints ``PE n: CHECK ok`` for each check that passed; a failed check raises.
"""

import sys

import numba
import numpy as np
from numba import cuda

import numba_shmem as shmem

N = 300  # elements per transfer: not a multiple of the vector width


@cuda.jit
def rma_thread(dest, source, single, strided):
    me = shmem.my_pe()
    npes = shmem.n_pes()
    right = (me + 1) % npes
    if cuda.threadIdx.x == 0 and cuda.blockIdx.x == 0:
        shmem.put(dest, source, right)
        shmem.p(single, me + 100, right)
        shmem.iput(strided, source, 2, 3, 10, right)
        shmem.quiet()


@cuda.jit
def rma_get(source, got, single, gathered):
    me = shmem.my_pe()
    npes = shmem.n_pes()
    left = (me - 1 + npes) % npes
    if cuda.threadIdx.x == 0 and cuda.blockIdx.x == 0:
        shmem.get(got, source, left)
        single[1] = shmem.g(single, left)
        shmem.iget(gathered, source, 1, 2, 8, left)


@cuda.jit
def rma_cooperative(dest_warp, dest_block, dest_nbi, source, got_block):
    me = shmem.my_pe()
    npes = shmem.n_pes()
    right = (me + 1) % npes
    left = (me - 1 + npes) % npes
    if cuda.threadIdx.x < 32:
        shmem.put_warp(dest_warp, source, right)
    shmem.put_block(dest_block, source, right)
    shmem.put_nbi_block(dest_nbi, source, right)
    shmem.quiet()
    shmem.get_block(got_block, source, left)


@cuda.jit
def rma_chunks(dest_block, dest_warp, source, got_block, shift):
    """Several of the ring's chunks and a part of one, by a block whose last
    warp is not whole and by a warp, one side shifted off 16-byte alignment."""
    me = shmem.my_pe()
    npes = shmem.n_pes()
    right = (me + 1) % npes
    left = (me - 1 + npes) % npes
    shmem.put_block(dest_block[shift:], source[:source.size - shift], right)
    if cuda.threadIdx.x >= 64:
        shmem.put_warp(dest_warp, source[shift:], right)
    shmem.quiet()
    shmem.get_block(got_block, source[shift:], left)


@cuda.jit
def put_then_write(dest, source, shift):
    """One block: put_block of ``source`` from its byte ``shift`` on to the
    right neighbour, then overwrite the source (it may be written once the
    call has returned)."""
    right = (shmem.my_pe() + 1) % shmem.n_pes()
    shmem.put_block(dest[:source.size - shift], source[shift:], right)
    cuda.syncthreads()
    for i in range(cuda.threadIdx.x, source.size, cuda.blockDim.x):
        source[i] = 0


@cuda.jit
def put_nbi_then_write(dest, source, shift):
    """One block: put_nbi_block as ``put_then_write``, then quiet, then
    overwrite the source (it may be written once the quiet has returned)."""
    right = (shmem.my_pe() + 1) % shmem.n_pes()
    shmem.put_nbi_block(dest[:source.size - shift], source[shift:], right)
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        shmem.quiet()
    cuda.syncthreads()
    for i in range(cuda.threadIdx.x, source.size, cuda.blockDim.x):
        source[i] = 0


@cuda.jit
def staged_rounds(dest, source, shift, size, rounds, warp):
    """``rounds`` put_blocks (``warp``: put_warps of the first warp) of
    ``size`` bytes of ``source`` from its byte ``shift`` on, in the heap, to
    round r's ``size`` bytes of ``dest`` on the right neighbour, the source
    written with the next round's bytes as soon as each call has returned
    (round r's byte i: (i * 7 + r + the PE) & 255); then quiet."""
    me = shmem.my_pe()
    right = (me + 1) % shmem.n_pes()
    for r in range(rounds):
        if not warp:
            shmem.put_block(dest[r * size:(r + 1) * size], source[shift:shift + size], right)
        elif cuda.threadIdx.x < 32:
            shmem.put_warp(dest[r * size:(r + 1) * size], source[shift:shift + size], right)
        cuda.syncthreads()
        for i in range(cuda.threadIdx.x, size, cuda.blockDim.x):
            source[shift + i] = (i * 7 + r + 1 + me) & 255
        cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        shmem.quiet()


@cuda.jit
def p_words(i32, u32, f32):
    """p of 4-byte values whose high bit is set, into the second element (an
    offset 4 bytes past 8-byte alignment), as the proxy pends such a put."""
    me = shmem.my_pe()
    right = (me + 1) % shmem.n_pes()
    if cuda.threadIdx.x == 0 and cuda.blockIdx.x == 0:
        shmem.p(i32[1:], np.int32(-1 - me), right)
        shmem.p(u32[1:], np.uint32(0x8000_0000 + me), right)
        shmem.p(f32[1:], np.float32(-2.5 - me), right)
        shmem.quiet()


def check_rma(me, n):
    left = (me - 1) % n
    source = shmem.array(N, np.float64)
    source.copy_to_device(np.arange(N, dtype=np.float64) + 1000 * me)
    dest = shmem.zeros(N, np.float64)
    single = shmem.zeros(2, np.int64)
    strided = shmem.zeros(20, np.float64)
    got = cuda.device_array(N, np.float64)
    gathered = cuda.to_device(np.zeros(8))
    shmem.barrier_all()
    rma_thread[1, 32](dest, source, single, strided)
    shmem.barrier_all()
    rma_get[1, 32](source, got, single, gathered)
    mine = np.arange(N) + 1000 * left
    theirs = np.arange(N) + 1000 * left
    assert (dest.copy_to_host() == mine).all()
    assert (got.copy_to_host() == theirs).all()
    s = single.copy_to_host()
    assert s[0] == left + 100 and s[1] == ((left - 1) % n) + 100, s
    expected = np.zeros(20)
    expected[0:20:2] = (np.arange(N) + 1000 * left)[0:30:3]
    assert (strided.copy_to_host() == expected).all()
    assert (gathered.copy_to_host() == (np.arange(N) + 1000 * left)[0:16:2]).all()
    words = [shmem.zeros(2, t) for t in (np.int32, np.uint32, np.float32)]
    shmem.barrier_all()
    p_words[1, 1](*words)
    shmem.barrier_all()
    assert [list(w.copy_to_host()) for w in words] == [
        [0, -1 - left], [0, 0x8000_0000 + left], [0, -2.5 - left]], words
    # warp and block scope, non-blocking
    outs = [shmem.zeros(N, np.float64) for _ in range(3)]
    got_block = cuda.device_array(N, np.float64)
    shmem.barrier_all()
    rma_cooperative[1, 64](*outs, source, got_block)
    shmem.barrier_all()
    for out in outs:
        assert (out.copy_to_host() == mine).all()
    assert (got_block.copy_to_host() == theirs).all()
    # more than the ring's chunks (8 KiB), by a block of 2.5 warps and a warp
    size, shift = 5 * 8192 + 777, 3
    bytes_source = shmem.array(size + shift, np.uint8)
    bytes_source.copy_to_device((np.arange(size + shift) * 7 + me).astype(np.uint8))
    bytes_outs = [shmem.zeros(size + shift, np.uint8) for _ in range(2)]
    bytes_got = cuda.to_device(np.zeros(size, np.uint8))
    shmem.barrier_all()
    rma_chunks[1, 80](*bytes_outs, bytes_source, bytes_got, shift)
    shmem.barrier_all()
    left_bytes = (np.arange(size + shift) * 7 + left).astype(np.uint8)
    assert (bytes_outs[0].copy_to_host()[shift:] == left_bytes[:size]).all()
    assert (bytes_outs[1].copy_to_host()[:size] == left_bytes[shift:]).all()
    assert (bytes_got.copy_to_host() == left_bytes[shift:]).all()
    # host put and get larger than the proxy's pieces (1 MiB) and not a
    # multiple of them, from host and from device memory
    right = (me + 1) % n
    big = (5 << 17) + 3  # 2.5 MiB and 24 bytes of float64
    pattern = np.arange(big, dtype=np.float64) + 1e7 * me
    big_dest, big_back = shmem.zeros(big, np.float64), shmem.zeros(big, np.float64)
    shmem.barrier_all()
    shmem.put(big_dest, pattern, right)
    shmem.put(big_back, cuda.to_device(pattern[::-1].copy()), right)
    shmem.barrier_all()
    assert (big_dest.copy_to_host() == np.arange(big) + 1e7 * left).all()
    assert (big_back.copy_to_host() == (np.arange(big) + 1e7 * left)[::-1]).all()
    got_big = np.zeros(big)
    shmem.get(got_big, big_dest, right)
    assert (got_big == pattern).all()
    if not numba.config.ENABLE_CUDASIM:  # (5 MiB a lane at a time: minutes there)
        # a kernel's put from the heap of more than the proxy's 1 MiB pieces,
        # more of them than it keeps in flight, its source written at once
        # after (blocking) or after a quiet (non-blocking)
        size, shift = (5 << 20) + 5, 3
        from_heap = shmem.array(size + shift, np.uint8)
        into = shmem.array(size, np.uint8)
        left_bytes = (np.arange(size + shift) * 7 + left).astype(np.uint8)
        for kernel in (put_then_write, put_nbi_then_write):
            from_heap.copy_to_device((np.arange(size + shift) * 7 + me).astype(np.uint8))
            into.copy_to_device(np.zeros(size, np.uint8))
            shmem.barrier_all()
            kernel[1, 256](into, from_heap, shift)
            shmem.barrier_all()
            assert (into.copy_to_host() == left_bytes[shift:]).all(), kernel
            assert not from_heap.copy_to_host().any()
        # a block's and a warp's blocking puts from the heap that are staged
        # (up to 256 KiB: copied into a staging segment, the call returns at
        # once), more rounds than there are segments, each source written
        # again at once; and one byte more than staged (copied out as it is)
        rounds = 20
        staged = shmem.array((256 << 10) + 1 + 3, np.uint8)
        into = shmem.array(rounds * ((256 << 10) + 1), np.uint8)
        for size, shift, warp in ((32 << 10) + 5, 3, False), (64 << 10, 0, False), \
                ((200 << 10) + 3, 3, True), (256 << 10, 0, False), ((256 << 10) + 1, 3, False):
            first = ((np.arange(staged.size) - shift) * 7 + me) & 255
            staged.copy_to_device(first.astype(np.uint8))
            into.copy_to_device(np.zeros(into.size, np.uint8))
            shmem.barrier_all()
            staged_rounds[1, 256](into, staged, shift, size, rounds, warp)
            shmem.barrier_all()
            got = into.copy_to_host()[:rounds * size].reshape(rounds, size)
            want = (np.arange(size)[None, :] * 7 + np.arange(rounds)[:, None] + left) & 255
            wrong = np.flatnonzero((got != want).any(axis=1))
            assert wrong.size == 0, f"puts of {size} bytes (warp {warp}): rounds {wrong} differ"


@cuda.jit
def ring_signal(data, source, sig, ack, rounds, seen):
    me = shmem.my_pe()
    npes = shmem.n_pes()
    right = (me + 1) % npes
    left = (me - 1 + npes) % npes
    for r in range(rounds):
        if r > 0 and cuda.threadIdx.x == 0:
            # the right neighbour has checked the previous round
            shmem.signal_wait_until(ack, shmem.CMP_GE, r)
        cuda.syncthreads()
        # every element carries the round number: when the signal says round r
        # arrived, all of round r must be there
        for i in range(cuda.threadIdx.x, source.size, cuda.blockDim.x):
            source[i] = r * 1000000 + me * 1000 + i
        cuda.syncthreads()
        shmem.put_signal_block(data, source, sig, r + 1, shmem.SIGNAL_SET, right)
        if cuda.threadIdx.x == 0:
            shmem.signal_wait_until(sig, shmem.CMP_GE, r + 1)
        cuda.syncthreads()
        for i in range(cuda.threadIdx.x, data.size, cuda.blockDim.x):
            if data[i] != r * 1000000 + left * 1000 + i:
                seen[0] = 1
        cuda.syncthreads()
        if cuda.threadIdx.x == 0:
            shmem.signal_op(ack, 1, shmem.SIGNAL_ADD, left)


def check_signal(me, n):
    data = shmem.zeros(N, np.int64)
    source = cuda.device_array(N, np.int64)
    sig = shmem.zeros(1, np.uint64)
    ack = shmem.zeros(1, np.uint64)
    seen = cuda.to_device(np.zeros(1, np.int64))
    shmem.barrier_all()
    ring_signal[1, 32](data, source, sig, ack, 4, seen)
    shmem.barrier_all()
    assert seen.copy_to_host()[0] == 0, "a signal arrived before its data"


@cuda.jit
def contend(counter, fetched, added, bits, pe0_value):
    tid = cuda.grid(1)
    me = shmem.my_pe()
    fetched[tid] = shmem.atomic_fetch_inc(counter[0:1], 0)
    shmem.atomic_add(counter[1:2], tid + 1, 0)
    shmem.atomic_add(added[0:1], 1.5, 0)
    shmem.atomic_or(bits[0:1], np.uint64(1) << np.uint64((me * 13 + tid) % 64), 0)
    if tid == 0:
        pe0_value[0] = shmem.atomic_fetch(counter[1:2], 0)


@cuda.jit
def cas_chain(counter, got, rounds):
    # every thread of every PE takes `rounds` distinct tickets with compare_swap
    tid = cuda.grid(1)
    for r in range(rounds):
        while True:
            old = shmem.atomic_fetch(counter[2:3], 0)
            if shmem.atomic_compare_swap(counter[2:3], old, old + 1, 0) == old:
                got[tid * rounds + r] = old
                break


def check_atomics(me, n, rounds=3):
    # on the simulator every thread is a Python thread, and across emulated
    # nodes every retry of the compare_swap chain a round trip through the
    # proxy: 16 threads a PE contend there (64 took 48 s of CI's 13 minutes)
    threads = 64 if shmem._runtime.current().backend == "cuda" else 16
    counter = shmem.zeros(3, np.int64)
    added = shmem.zeros(1, np.float64)
    bits = shmem.zeros(1, np.uint64)
    fetched = cuda.device_array(threads, np.int64)
    pe0_value = cuda.device_array(1, np.int64)
    got = cuda.device_array(threads * rounds, np.int64)
    shmem.barrier_all()
    contend[1, threads](counter, fetched, added, bits, pe0_value)
    cas_chain[1, threads](counter, got, rounds)
    shmem.barrier_all()
    everything = shmem.zeros((n, threads * (rounds + 1)), np.int64)
    row = np.concatenate([fetched.copy_to_host(), got.copy_to_host()])
    shmem.put(everything[me], row, 0)  # (PE 0 may be on another node)
    shmem.barrier_all()
    if me == 0:
        c = counter.copy_to_host()
        assert c[0] == n * threads, c
        assert c[1] == n * threads * (threads + 1) // 2, c
        assert c[2] == n * threads * rounds, c
        assert added.copy_to_host()[0] == 1.5 * n * threads
        table = everything.copy_to_host()
        tickets = np.sort(table[:, :threads].reshape(-1))
        assert (tickets == np.arange(n * threads)).all(), "fetch_inc gave a duplicate"
        chain = np.sort(table[:, threads:].reshape(-1))
        assert (chain == np.arange(n * threads * rounds)).all(), "compare_swap chain broke"
        expected_bits = 0
        for pe in range(n):
            for tid in range(threads):
                expected_bits |= 1 << ((pe * 13 + tid) % 64)
        assert int(bits.copy_to_host()[0]) == expected_bits


@cuda.jit
def waits(flags, status, excluded, indices, values, out):
    me = shmem.my_pe()
    npes = shmem.n_pes()
    if cuda.threadIdx.x == 0:
        for pe in range(npes):
            shmem.atomic_set(flags[me:me + 1], me + 1, pe)
        shmem.wait_until_all(flags, status, shmem.CMP_GT, 0)
        out[0] = shmem.test_all(flags, status, shmem.CMP_GT, 0)
        out[1] = shmem.wait_until_any(flags, status, shmem.CMP_EQ, npes)
        out[2] = shmem.wait_until_some(flags, indices, status, shmem.CMP_GE, 2)
        out[3] = shmem.test_any(flags, status, shmem.CMP_LT, 0)
        out[4] = shmem.test_some(flags, indices, status, shmem.CMP_NE, 1)
        shmem.wait_until_all_vector(flags, status, shmem.CMP_EQ, values)
        out[5] = shmem.test(flags, shmem.CMP_EQ, 1)
        shmem.wait_until(flags[npes - 1:npes], shmem.CMP_EQ, npes)
        # nothing to wait for (every element excluded, or none): at once, with
        # OpenSHMEM's answers (SIZE_MAX, as -1; 0)
        out[6] = shmem.wait_until_any(flags, excluded, shmem.CMP_EQ, 99)
        out[7] = shmem.wait_until_some(flags, indices, excluded, shmem.CMP_EQ, 99)
        out[8] = shmem.wait_until_any_vector(flags, excluded, shmem.CMP_EQ, values)
        out[9] = shmem.wait_until_some_vector(flags, indices, excluded, shmem.CMP_EQ, values)
        shmem.wait_until_all(flags, excluded, shmem.CMP_EQ, 99)
        out[10] = shmem.wait_until_any(flags[:0], excluded[:0], shmem.CMP_EQ, 99)
        out[11] = shmem.wait_until_some(flags[:0], indices, excluded[:0], shmem.CMP_EQ, 99)


def check_waits(me, n):
    flags = shmem.zeros(n, np.int64)
    status = cuda.to_device(np.zeros(n, np.int32))
    indices = cuda.to_device(np.zeros(n, np.int64))
    values = cuda.to_device(np.arange(1, n + 1, dtype=np.int64))
    excluded = cuda.to_device(np.ones(n, np.int32))
    out = cuda.to_device(np.full(12, 7, np.int64))
    shmem.barrier_all()
    waits[1, 1](flags, status, excluded, indices, values, out)
    shmem.barrier_all()
    o = out.copy_to_host()
    assert o[0] == 1 and o[1] == n - 1 and o[2] == n - 1 and o[3] == -1, o
    assert o[4] == n - 1 and o[5] == 1, o
    assert o[6:].tolist() == [-1, 0, -1, 0, -1, 0], o


CHECKS = {"rma": check_rma, "signal": check_signal, "atomics": check_atomics, "waits": check_waits}


def main():
    shmem.init()
    me, n = shmem.my_pe(), shmem.n_pes()
    for name in sys.argv[1:]:
        CHECKS[name](me, n)
        shmem.barrier_all()
        sys.stdout.write(f"PE {me}: {name} ok\n")
    shmem.finalize()


if __name__ == "__main__":
    main()
