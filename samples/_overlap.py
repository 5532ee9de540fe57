"""What the two overlap samples share: the array library (PyTorch on the GPU, or
CuPy where PyTorch is not installed; numpy on the simulator), its streams, CUDA
graphs, and GPU timing of a step.

On the GPU the samples hand the library's streams straight to numba-shmem's
``stream=`` and run cuBLAS (``torch.matmul`` / ``cupy.matmul``) on them; on
the simulator every call runs at once, in call order, and numpy does the math.
"""

import os
import statistics
import time

os.environ.setdefault("CUPY_TF32", "1")  # float32 GEMMs on the tensor cores, as a user would


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


class Library:
    """The array library for this backend: ``name`` is "torch", "cupy" or "numpy"."""

    def __init__(self, backend):
        self.gpu = backend == "cuda"
        torch = _torch() if self.gpu else None
        if torch is not None:
            self.name, self.xp = "torch", torch
            torch.backends.cuda.matmul.allow_tf32 = True
        elif self.gpu:
            import cupy

            self.name, self.xp = "cupy", cupy
        else:
            import numpy

            self.name, self.xp = "numpy", numpy

    def dtype(self, name):
        return getattr(self.xp, name)

    def view(self, arr):
        """A symmetric (or other device) array as the library's array, no copy."""
        if self.name == "torch":
            return self.xp.as_tensor(arr, device="cuda")
        return self.xp.asarray(arr) if self.gpu else self.xp.from_dlpack(arr)

    def asarray(self, host):
        """A numpy array copied to the device."""
        if self.name == "torch":
            return self.xp.from_numpy(host).cuda()
        return self.xp.asarray(host)

    def empty(self, shape, dtype):
        if self.name == "torch":
            return self.xp.empty(shape, dtype=self.dtype(dtype), device="cuda")
        return self.xp.empty(shape, self.dtype(dtype))

    def copy(self, arr):
        return arr.clone() if self.name == "torch" else arr.copy()

    def stream(self):
        if self.name == "torch":
            return self.xp.cuda.Stream()
        return self.xp.cuda.Stream(non_blocking=True) if self.gpu else 0

    def _on(self, stream):
        return self.xp.cuda.stream(stream) if self.name == "torch" else stream

    def matmul(self, a, b, out, stream):
        if self.gpu:
            with self._on(stream):
                self.xp.matmul(a, b, out=out)
        else:
            self.xp.matmul(a, b, out=out)

    def add(self, a, b, out, stream):
        if self.gpu:
            with self._on(stream):
                self.xp.add(a, b, out=out)
        else:
            self.xp.add(a, b, out=out)

    def after(self, waiter, stream):
        """``waiter`` goes on once the work enqueued on ``stream`` so far is done."""
        if self.name == "torch":
            waiter.wait_stream(stream)
        elif self.gpu:
            waiter.wait_event(stream.record())

    def host(self, arr):
        if self.name == "torch":
            return arr.cpu().numpy()
        return self.xp.asnumpy(arr) if self.gpu else arr

    def pointer(self, arr):
        return arr.data_ptr() if self.name == "torch" else arr.data.ptr

    def stream_handle(self, stream):
        return stream.cuda_stream if self.name == "torch" else stream.ptr

    def synchronize(self):
        if self.name == "torch":
            self.xp.cuda.synchronize()
        elif self.gpu:
            self.xp.cuda.Device().synchronize()

    def graph(self, step, stream):
        """``step`` captured once into a CUDA graph on ``stream``; returns a step
        that replays it (PyTorch only: CuPy refuses cuBLAS during a capture)."""
        if self.name != "torch":
            return None
        torch = self.xp
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            step()

        def replay(_r=0):
            with torch.cuda.stream(stream):  # (a graph replays on the current stream)
                graph.replay()
        return replay

    def time_ms(self, step, stream, reps, rounds=3, between=None):
        """Milliseconds per ``step(r)`` on the GPU (events on ``stream`` around
        ``reps`` steps), median and range of ``rounds`` rounds; ``between``
        runs before each round (every PE starts together)."""
        results = []
        for _ in range(rounds):
            self.synchronize()
            if between is not None:
                between()
            if self.gpu:
                make = (lambda: self.xp.cuda.Event(enable_timing=True)) if self.name == "torch" \
                    else self.xp.cuda.Event
                start, stop = make(), make()
                start.record(stream)
                for r in range(reps):
                    step(r)
                stop.record(stream)
                stop.synchronize()
                results.append(start.elapsed_time(stop) / reps if self.name == "torch" else
                               self.xp.cuda.get_elapsed_time(start, stop) / reps)
            else:
                begin = time.perf_counter()
                for r in range(reps):
                    step(r)
                results.append((time.perf_counter() - begin) * 1e3 / reps)
        return statistics.median(results), min(results), max(results)


def time_paths(lib, stream, steps, reps, barrier, check):
    """GPU ms per step of each of ``steps`` (name -> step): enqueued step by step,
    and for ``fused`` and ``unfused`` also replayed from a CUDA graph of one step
    (``<name> graph``) where the library can capture one, its result checked
    (``check(what)`` returns whether it is right). Returns (times, all right)."""
    times, ok = {}, True
    for name, step in steps.items():
        times[name] = lib.time_ms(step, stream, reps, between=barrier)
        replay = lib.graph(step, stream) if name in ("fused", "unfused") else None
        if replay is not None:
            ok = check(f"{name}, enqueued") and ok  # (and clears the result)
            barrier()
            replay()
            ok = check(f"{name}, replayed from a graph") and ok
            times[f"{name} graph"] = lib.time_ms(replay, stream, reps, between=barrier)
    return times, ok
