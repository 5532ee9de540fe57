"""Warp- and block-scope transfers from blocks that are not a multiple of 32
threads, at odd sizes and every element width; puts and gets that would run
past the symmetric array.

    transfers.py [quick]

Every PE moves data to (or from) its right neighbour; each check prints one
line ``PE n: <check> ok`` or raises.
"""

import os
import sys

import numba_shmem as shmem  # first: on a machine without a GPU it picks the simulator
import numpy as np
from numba import cuda

PUT, PUT_NBI, GET, GET_NBI, PUT_SIGNAL, PUT_SIGNAL_NBI = range(6)
KINDS = {"put": PUT, "put_nbi": PUT_NBI, "get": GET, "get_nbi": GET_NBI,
         "put_signal": PUT_SIGNAL, "put_signal_nbi": PUT_SIGNAL_NBI}


@cuda.jit
def warp_scope(dest, source, sig, size, peer, kind):
    """Every warp of the block moves its own slice of ``size`` elements."""
    tid = cuda.threadIdx.x + cuda.blockDim.x * cuda.threadIdx.y
    warp = tid // 32
    lo = warp * size
    d = dest[lo:lo + size]
    s = source[lo:lo + size]
    if kind == PUT:
        shmem.put_warp(d, s, peer)
    elif kind == PUT_NBI:
        shmem.put_nbi_warp(d, s, peer)
    elif kind == GET:
        shmem.get_warp(d, s, peer)
    elif kind == GET_NBI:
        shmem.get_nbi_warp(d, s, peer)
    elif kind == PUT_SIGNAL:
        shmem.put_signal_warp(d, s, sig[warp:warp + 1], 1, shmem.SIGNAL_ADD, peer)
    else:
        shmem.put_signal_nbi_warp(d, s, sig[warp:warp + 1], 1, shmem.SIGNAL_ADD, peer)
    shmem.quiet()


@cuda.jit
def block_scope(dest, source, sig, size, peer, kind):
    """The block moves ``size`` elements."""
    d = dest[:size]
    s = source[:size]
    if kind == PUT:
        shmem.put_block(d, s, peer)
    elif kind == PUT_NBI:
        shmem.put_nbi_block(d, s, peer)
    elif kind == GET:
        shmem.get_block(d, s, peer)
    elif kind == GET_NBI:
        shmem.get_nbi_block(d, s, peer)
    elif kind == PUT_SIGNAL:
        shmem.put_signal_block(d, s, sig[:1], 1, shmem.SIGNAL_ADD, peer)
    else:
        shmem.put_signal_nbi_block(d, s, sig[:1], 1, shmem.SIGNAL_ADD, peer)
    shmem.quiet()


@cuda.jit
def overrun(dest, source, peer, scope):
    """A put of all of ``source`` into the smaller ``dest`` (at three scopes)."""
    if scope == 0:
        if cuda.threadIdx.x == 0:
            shmem.put(dest, source, peer)
    elif scope == 1:
        if cuda.threadIdx.x < 32:
            shmem.put_warp(dest, source, peer)
    else:
        shmem.put_block(dest, source, peer)


@cuda.jit
def overrun_get(dest, source, peer):
    shmem.get_block(dest, source, peer)


def pattern(pe, count, dtype, offset=0):
    return ((np.arange(count) + (pe + 1) * 1000 + offset) % 120).astype(dtype)


def check_scopes(me, n, blocks, sizes, dtypes, kinds):
    right, left = (me + 1) % n, (me - 1) % n
    for dtype in dtypes:
        for shape in blocks:
            threads = int(np.prod(shape))
            warps = -(-threads // 32)
            for size in sizes:
                # an odd first element: the slices start off 16-byte alignment
                first = 1
                total = first + warps * size
                dest = shmem.zeros(total, dtype)
                source = shmem.zeros(total, dtype)
                sig = shmem.zeros(warps, np.uint64)
                for kind_name, kind in kinds.items():
                    for scope, kernel, count in (("warp", warp_scope, warps * size),
                                                 ("block", block_scope, size)):
                        source.copy_to_device(pattern(me, total, dtype, kind))
                        dest.copy_to_device(np.zeros(total, dtype))
                        sig.copy_to_device(np.zeros(warps, np.uint64))
                        shmem.barrier_all()
                        getting = kind in (GET, GET_NBI)
                        kernel[1, shape](dest[first:], source[first:], sig, size,
                                         left if getting else right, kind)
                        cuda.synchronize()
                        shmem.barrier_all()
                        got = dest.copy_to_host()
                        # a get reads the left neighbour's source; a put lands from it
                        want = np.zeros(total, dtype)
                        want[first:first + count] = pattern(left, total, dtype, kind)[
                            first:first + count]
                        where = f"{kind_name}_{scope} of {size} {np.dtype(dtype)} from a " \
                                f"{shape}-thread block"
                        if not np.array_equal(got, want):
                            bad = np.flatnonzero(got != want)
                            raise AssertionError(f"PE {me}: {where}: {bad.size} of {count} "
                                                 f"elements wrong, first at {bad[0] - first}")
                        if kind in (PUT_SIGNAL, PUT_SIGNAL_NBI):
                            signals = sig.copy_to_host()
                            want_sig = [1] * warps if scope == "warp" else [1] + [0] * (warps - 1)
                            assert signals.tolist() == want_sig, (where, signals)
                shmem.free(sig)
                shmem.free(source)
                shmem.free(dest)
    say(f"PE {me}: scopes ok")


def check_overrun(me, n):
    """Non-debug: a put copies min(source, dest) elements; the neighbour of
    dest on the peer is never written. A get never reads past source."""
    right, left = (me + 1) % n, (me - 1) % n
    arena = shmem.zeros(96, np.int32)
    source = cuda.to_device(np.arange(1, 65, dtype=np.int32))
    for scope in range(3):
        arena.copy_to_device(np.zeros(96, np.int32))
        shmem.barrier_all()
        overrun[1, 64](arena[:16], source, right, scope)
        cuda.synchronize()
        shmem.barrier_all()
        got = arena.copy_to_host()
        assert got[:16].tolist() == list(range(1, 17)), (scope, got)
        assert not got[16:].any(), f"PE {me}: scope {scope} wrote past dest: {got[16:]}"
    arena.copy_to_device(np.arange(96, dtype=np.int32))
    local = cuda.to_device(np.full(64, -1, np.int32))
    shmem.barrier_all()
    overrun_get[1, 64](local, arena[:16], left)
    cuda.synchronize()
    got = local.copy_to_host()
    assert got[:16].tolist() == list(range(16)) and (got[16:] == -1).all(), got
    shmem.barrier_all()
    say(f"PE {me}: overrun ok")


def say(line):
    os.write(1, (line + "\n").encode())


def main():
    quick = "quick" in sys.argv[1:]
    shmem.init()
    me, n = shmem.my_pe(), shmem.n_pes()
    if quick:  # the simulator runs every lane as a thread: a few cases
        check_scopes(me, n, [(33,)], [5], [np.int16], {"put": PUT, "get": GET})
    else:
        check_scopes(me, n, [(16,), (33,), (48,), (8, 6), (64,)], [1, 7, 33, 1027],
                     [np.int8, np.int16, np.int32, np.int64, np.float64], KINDS)
    check_overrun(me, n)
    shmem.finalize()


if __name__ == "__main__":
    main()
