"""A persistent kernel pulling tasks from symmetric work queues ("MegaKernel").

A task graph of LAYERS x WIDTH tasks: task (l, w) reads the results of tasks
(l - 1, w) and (l - 1, (w + 1) % WIDTH), which may have run on any PE, and
produces ELEMENTS float64s. Task t = l * WIDTH + w belongs to PE t % n_pes; each
PE's queue lists its tasks layer by layer.

One kernel per PE, launched once with ``collective_launch``, runs all of it:
every block claims the next task of its own PE's queue with
``atomic_fetch_add`` on the queue's head, and once that queue is empty steals
from the other PEs' queues the same way. A task waits for its inputs with
``signal_wait_until`` on local flags, computes, and sends its result to every
PE with ``put_signal_block``, whose signal tells each PE the result is there.
Claims follow each queue's order, so a task is claimed only after every
earlier-layer task of the same queue: whoever holds a task can finish it, and
the kernel cannot deadlock.

The same graph also runs the usual way, one kernel launch per task and a
barrier between layers; both results are checked against numpy, and PE 0
prints both times and their ratio.

    shmem-run -n 4 samples/task_queue.py [--layers 16] [--width 64] [--elements 256] [--work 64]
"""

import argparse
import os
import sys
import time

os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")

import numba_shmem as shmem  # noqa: E402
import numpy as np  # noqa: E402
from numba import config as numba_config, cuda  # noqa: E402


MAX_ELEMENTS = 1024  # a task's result, computed into shared memory and put from there


@cuda.jit(device=True)
def compute(results, layer, w, width, elements, work, k):
    """Element k of task (layer, w) from its inputs' results (already here)."""
    if layer == 0:
        v = (layer * width + w) + 0.001 * k
    else:
        a = results[((layer - 1) * width + w) * elements + k]
        b = results[((layer - 1) * width + (w + 1) % width) * elements + k]
        v = 0.5 * (a + b)
    for _ in range(work):
        v = v * 0.75 + 1.0
    return v


@cuda.jit
def persistent(heads, done, results, width, layers, elements, work, executed):
    me = shmem.my_pe()
    npes = shmem.n_pes()
    tasks = width * layers
    claim = cuda.shared.array(2, np.int64)  # task, whether it was stolen
    tid = cuda.threadIdx.x
    out = cuda.shared.array(MAX_ELEMENTS, np.float64)[:elements]
    victim = 0  # queues tried so far: this PE's own first
    while victim < npes:
        if tid == 0:
            pe = (me + victim) % npes
            queued = (tasks - pe + npes - 1) // npes  # tasks t with t % npes == pe
            index = shmem.atomic_fetch_add(heads, 1, pe)
            claim[0] = index * npes + pe if index < queued else -1
            claim[1] = victim
            if claim[0] >= 0:
                layer = claim[0] // width
                w = claim[0] % width
                if layer > 0:  # both inputs have arrived on this PE
                    shmem.signal_wait_until(done[(layer - 1) * width + w:], shmem.CMP_EQ, 1)
                    shmem.signal_wait_until(done[(layer - 1) * width + (w + 1) % width:],
                                            shmem.CMP_EQ, 1)
        cuda.syncthreads()
        t = claim[0]
        if t < 0:
            victim += 1  # that queue is empty: try the next PE's
            cuda.syncthreads()
            continue
        layer = t // width
        w = t % width
        for k in range(tid, elements, cuda.blockDim.x):
            out[k] = compute(results, layer, w, width, elements, work, k)
        cuda.syncthreads()
        for j in range(npes):  # the result, and its flag, to every PE
            pe = (me + j) % npes
            shmem.put_signal_block(results[t * elements:(t + 1) * elements], out,
                                   done[t:t + 1], 1, shmem.SIGNAL_SET, pe)
        if tid == 0:
            cuda.atomic.add(executed, 0, 1)
            if claim[1] > 0:
                cuda.atomic.add(executed, 1, 1)
        cuda.syncthreads()


@cuda.jit
def one_task(results, t, width, elements, work):
    layer = t // width
    w = t % width
    out = cuda.shared.array(MAX_ELEMENTS, np.float64)[:elements]
    for k in range(cuda.threadIdx.x, elements, cuda.blockDim.x):
        out[k] = compute(results, layer, w, width, elements, work, k)
    cuda.syncthreads()
    for j in range(shmem.n_pes()):
        pe = (shmem.my_pe() + j) % shmem.n_pes()
        shmem.put_block(results[t * elements:(t + 1) * elements], out, pe)


def reference(layers, width, elements, work):
    results = np.zeros((layers * width, elements))
    k = np.arange(elements)
    for t in range(layers * width):
        layer, w = divmod(t, width)
        if layer == 0:
            v = t + 0.001 * k
        else:
            v = 0.5 * (results[(layer - 1) * width + w] + results[(layer - 1) * width
                                                                   + (w + 1) % width])
        for _ in range(work):
            v = v * 0.75 + 1.0
        results[t] = v
    return results.ravel()


@cuda.jit
def reset(heads, done, results):
    for i in range(cuda.grid(1), done.size, cuda.gridsize(1)):
        done[i] = 0
    for i in range(cuda.grid(1), results.size, cuda.gridsize(1)):
        results[i] = 0.0
    if cuda.grid(1) == 0:
        heads[0] = 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # (defaults: the GPU's, and smaller on the simulator, where every thread is Python)
    parser.add_argument("--layers", type=int, help="16; 3 on the simulator")
    parser.add_argument("--width", type=int, help="64; 5 on the simulator")
    parser.add_argument("--elements", type=int, help="256; 32 on the simulator")
    parser.add_argument("--work", type=int, help="64; 4 on the simulator")
    parser.add_argument("--threads", type=int, help="128; 32 on the simulator")
    args = parser.parse_args()
    shmem.init()
    me, npes = shmem.my_pe(), shmem.n_pes()
    simulator = numba_config.ENABLE_CUDASIM  # (numba-shmem picked numba's simulator)
    for name, gpu, sim in (("layers", 16, 3), ("width", 64, 5), ("elements", 256, 32),
                           ("work", 64, 4), ("threads", 128, 32)):
        if getattr(args, name) is None:
            setattr(args, name, sim if simulator else gpu)
    width, layers, elements, work = args.width, args.layers, args.elements, args.work
    tasks = layers * width
    expected = reference(layers, width, elements, work)
    heads = shmem.zeros(1, np.int64)
    done = shmem.zeros(tasks, np.uint64)
    results = shmem.zeros(tasks * elements, np.float64)
    executed = cuda.to_device(np.zeros(2, np.int64))
    if not 0 < elements <= MAX_ELEMENTS:
        parser.error(f"--elements must be between 1 and {MAX_ELEMENTS}")

    def persistent_run():
        return shmem.collective_launch(persistent, 0, args.threads, heads, done, results,
                                       width, layers, elements, work, executed)

    def per_task_run():
        for layer in range(layers):
            for w in range(width):
                t = layer * width + w
                if t % npes == me:
                    one_task[1, args.threads](results, t, width, elements, work)
            shmem.barrier_all()  # this layer's results are on every PE

    times, lines = {}, []
    for name, run in (("persistent kernel", persistent_run),
                      ("one launch per task", per_task_run)):
        for attempt in range(2):  # the first run compiles
            if me == 0:  # (on the simulator each run takes seconds)
                sys.stderr.write(f"task_queue: {name}, run {attempt + 1} of 2"
                                 f"{' (it compiles)' if attempt == 0 else ''}\n")
                sys.stderr.flush()
            reset[32, 128](heads, done, results)
            executed.copy_to_device(np.zeros(2, np.int64))
            shmem.barrier_all()
            start = time.perf_counter()
            blocks = run()
            shmem.barrier_all()
            times[name] = time.perf_counter() - start
        # the GPU fuses a * b + c into one rounding (FMA), numpy rounds twice:
        # the last bit may differ, nothing more
        wrong = int(np.count_nonzero(~np.isclose(results.copy_to_host(), expected,
                                                 rtol=1e-13, atol=0)))
        line = f"PE {me}: {name}: {tasks} tasks, {wrong} wrong elements"
        if name == "persistent kernel":
            counts = executed.copy_to_host()
            line += (f"; {blocks} blocks ran {counts[0]} tasks here, {counts[1]} of them "
                     "stolen from other PEs' queues")
        lines.append(line)
    for line in lines:
        sys.stdout.write(line + "\n")
    sys.stdout.flush()
    shmem.barrier_all()
    if me == 0:
        ratio = times["one launch per task"] / times["persistent kernel"]
        sys.stdout.write(f"{npes} PEs, {layers} x {width} tasks of {elements} elements: "
                         f"persistent kernel {times['persistent kernel'] * 1e3:.2f} ms, one "
                         f"launch per task {times['one launch per task'] * 1e3:.2f} ms "
                         f"({ratio:.2f}x)\n")
    shmem.finalize()


if __name__ == "__main__":
    main()
