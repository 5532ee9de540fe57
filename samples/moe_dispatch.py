"""MoE token dispatch and combine across PEs.

Every PE holds TOKENS tokens of HIDDEN values, each routed to one expert;
experts are spread over the PEs. Dispatch: for each token, one block reserves a
slot on the expert's PE (atomic_fetch_add), puts the token there and records
where it came from; then every PE signals every PE that it is done. The experts
(here: scale by expert number + 1) run on what arrived, and combine puts each
result back into its origin PE's slot for that token. The result is checked
against a single-process reference.

    shmem-run -n 4 samples/moe_dispatch.py [--tokens 64] [--hidden 256]
"""

import argparse
import os
import sys

os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")

import numba_shmem as shmem  # noqa: E402
import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402

EXPERTS_PER_PE = 2


def routing(pe, tokens, experts):
    """Which expert each of PE ``pe``'s tokens goes to (the same on every PE)."""
    return np.random.default_rng(1000 + pe).integers(0, experts, tokens)


@cuda.jit
def dispatch(tokens, experts, inbox, origin, count):
    t = cuda.blockIdx.x
    expert = experts[t]
    target = expert // EXPERTS_PER_PE
    slot = cuda.shared.array(1, np.int64)
    if cuda.threadIdx.x == 0:
        slot[0] = shmem.atomic_fetch_add(count[0:1], 1, target)
        shmem.p(origin[slot[0] * 3:slot[0] * 3 + 1], shmem.my_pe(), target)
        shmem.p(origin[slot[0] * 3 + 1:slot[0] * 3 + 2], t, target)
        shmem.p(origin[slot[0] * 3 + 2:slot[0] * 3 + 3], expert, target)
    cuda.syncthreads()
    hidden = tokens.shape[1]
    s = slot[0]
    shmem.put_block(inbox[s * hidden:(s + 1) * hidden], tokens[t], target)


@cuda.jit
def announce(arrived):
    # after every dispatch block of this PE: complete them, then tell every PE
    if cuda.grid(1) == 0:
        shmem.quiet()
        for pe in range(shmem.n_pes()):
            shmem.signal_op(arrived, 1, shmem.SIGNAL_ADD, pe)


@cuda.jit
def experts_and_combine(inbox, origin, count, arrived, outbox, hidden):
    # every block waits until every PE has dispatched, then runs its tokens'
    # experts and sends the results home
    if cuda.threadIdx.x == 0:
        shmem.signal_wait_until(arrived, shmem.CMP_EQ, shmem.n_pes())
    cuda.syncthreads()
    for s in range(cuda.blockIdx.x, count[0], cuda.gridDim.x):
        home = origin[s * 3]
        t = origin[s * 3 + 1]
        scale = np.float32(origin[s * 3 + 2] + 1)
        for i in range(cuda.threadIdx.x, hidden, cuda.blockDim.x):
            inbox[s * hidden + i] *= scale
        cuda.syncthreads()
        shmem.put_block(outbox[t * hidden:(t + 1) * hidden], inbox[s * hidden:(s + 1) * hidden],
                        home)


@cuda.jit
def finish(done):
    if cuda.grid(1) == 0:
        shmem.quiet()
        for pe in range(shmem.n_pes()):
            shmem.signal_op(done, 1, shmem.SIGNAL_ADD, pe)
        shmem.signal_wait_until(done, shmem.CMP_EQ, shmem.n_pes())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=256)
    args = parser.parse_args()
    shmem.init()
    me, npes = shmem.my_pe(), shmem.n_pes()
    experts = npes * EXPERTS_PER_PE
    tokens_host = (np.arange(args.tokens * args.hidden, dtype=np.float32)
                   .reshape(args.tokens, args.hidden) / 64 + me)
    route = routing(me, args.tokens, experts)
    capacity = args.tokens * npes  # the most tokens one PE can receive
    inbox = shmem.zeros(capacity * args.hidden, np.float32)
    origin = shmem.zeros(capacity * 3, np.int64)
    count = shmem.zeros(1, np.int64)
    arrived = shmem.zeros(1, np.uint64)
    done = shmem.zeros(1, np.uint64)
    outbox = shmem.zeros(args.tokens * args.hidden, np.float32)
    shmem.barrier_all()
    dispatch[args.tokens, 64](cuda.to_device(tokens_host), cuda.to_device(route), inbox, origin,
                              count)
    announce[1, 1](arrived)
    experts_and_combine[4, 64](inbox, origin, count, arrived, outbox, args.hidden)
    finish[1, 1](done)
    cuda.synchronize()
    reference = tokens_host * (route[:, None] + 1).astype(np.float32)  # float32, as on the GPU
    result = outbox.copy_to_host().reshape(args.tokens, args.hidden)
    wrong = int((result != reference).sum())
    received = int(count.copy_to_host()[0])
    sys.stdout.write(f"PE {me}: sent {args.tokens} tokens, its experts took {received}, "
                     f"combined results wrong: {wrong}\n")
    shmem.barrier_all()
    shmem.finalize()
    if wrong:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
