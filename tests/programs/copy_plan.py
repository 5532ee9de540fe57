"""Run the GPU copy loop's generated source in Python, one thread after another,
on random cases (addresses, sizes, group sizes, element widths), and check what
it writes: every byte of the destination exactly once, from the same offset of
the source, in pieces no narrower than an element and aligned to their width;
and where the plan promises it, no thread copies two pieces (small copies) or
two vectors, and only the last thread copies the head and the tail.

    copy_plan.py CASES SEED

Prints ``ok N cases`` or raises. Needs no GPU (the CUDA backend's source text only).
"""

import sys

import numpy as np

from numba_shmem._cuda import _source


def run(source, dst, src, nbytes, stride):
    """The pieces (dst, src, width) each thread of the group copies."""
    pieces = {}
    for start in range(stride):
        mine = pieces[start] = []

        def copier(width):
            return lambda d, s: mine.append((d, s, width))

        def vectors(count):
            return lambda d, s, step: mine.extend(
                (d + k * step, s + k * step, 16) for k in range(count))

        def loader(width):
            return lambda s: (s, width)  # what the store then writes: from where, how wide

        def storer(width):
            def store(d, loaded):
                assert loaded[1] == width, (d, loaded, width)
                mine.append((d, loaded[0], width))
            return store

        scope = {"_copy16": copier(16), **{f"_copy16x{n}": vectors(n) for n in (2, 3, 4)},
                 **{f"_copy{w}": copier(w) for w in (8, 4, 2, 1)},
                 **{f"_load{w}": loader(w) for w in (8, 4, 2, 1)},
                 **{f"_store{w}": storer(w) for w in (8, 4, 2, 1)},
                 "dst": dst, "src": src, "nbytes": nbytes, "start": start, "stride": stride}
        exec(source, scope)  # noqa: S102
    return pieces


def check(dst, src, nbytes, stride, width, source):
    pieces = run(source, dst, src, nbytes, stride)
    written = np.zeros(nbytes, np.int64)
    for d, s, w in (p for mine in pieces.values() for p in mine):
        where = (dst, src, nbytes, stride, width, d, w)
        assert w >= width and d % w == 0 and s % w == 0, where
        assert s - src == d - dst and dst <= d and d + w <= dst + nbytes, where
        written[d - dst:d - dst + w] += 1
    assert (written == 1).all(), (dst, src, nbytes, stride, width, np.flatnonzero(written != 1))
    # where the plan promises one memory latency per thread: at most 8 bytes
    # per thread, 8-byte aligned, in one 8-byte piece each; from addresses at
    # the same offset from a 16-byte boundary, with no more vectors than
    # threads, one vector per thread and the head and the tail on the last
    head = (16 - dst % 16) % 16
    if nbytes <= 8 * stride and (dst | src | nbytes) % 8 == 0:
        busiest = max(len(mine) for mine in pieces.values())
        assert busiest <= 1, (dst, src, nbytes, stride, width, busiest)
    elif (dst - src) % 16 == 0 and head <= nbytes and (nbytes - head) // 16 <= stride:
        vectors = [sum(w == 16 for _, _, w in mine) for mine in pieces.values()]
        assert max(vectors) <= 1, (dst, src, nbytes, stride, width, vectors)
        others = [len(mine) - v for k, (mine, v) in enumerate(zip(pieces.values(), vectors))
                  if k != stride - 1]
        assert not any(others), (dst, src, nbytes, stride, width, others)


def main():
    cases, seed = int(sys.argv[1]), int(sys.argv[2])
    rng = np.random.default_rng(seed)
    # the source is a function body: dedent it and compile it once per width,
    # for a group and for a lone thread (thread scope: stride 1)
    sources = {(w, alone): compile("".join(line[4:] + "\n" for line in
                                           _source._copy_source(w, alone).splitlines()),
                                   f"copy_source({w}, {alone})", "exec")
               for w in (1, 2, 4, 8) for alone in (False, True)}
    for _ in range(cases):
        width = int(rng.choice([1, 2, 4, 8]))
        base = 1 << 21
        dst = base + width * int(rng.integers(0, 64 // width))
        # half the cases share dst's offset from a 16-byte boundary
        src = base * 2 + (dst % 16 if rng.random() < 0.5 else width * int(rng.integers(0, 16)))
        nbytes = width * int(rng.choice([rng.integers(0, 48), rng.integers(0, 2000)]))
        stride = int(rng.choice([1, 3, 17, 32, 33, 64, 256]))
        check(dst, src, nbytes, stride, width, sources[width, False])
        check(dst, src, nbytes, 1, width, sources[width, True])
    sys.stdout.write(f"ok {cases} cases\n")


if __name__ == "__main__":
    main()
