"""Benchmark: what numba-shmem adds to a kernel's compile time (numba's typing
and lowering of the device API's generated code, NVVM), for sm_90 on the CPU:
no GPU is needed, and a GPU machine's first launch of a kernel pays the same.
Each kernel compiles in a fresh process, after a plain numba kernel that warms
numba's own machinery, in a job on one node and in a job that spans nodes (the
path to other nodes compiled in: NUMBA_SHMEM_NODE_SIZE=1). Prints seconds,
median of the rounds (best-worst), against the plain kernel's own time.

    python benchmarks/compile_time.py [--rounds 3] [--kernels p_quiet,put_block,...]
                                      [--json F.json]
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

#: kernel -> (its body, over ``dest``: a 1-d array of ``dtype``, and ``pe``);
#: ``plain`` calls nothing of numba-shmem
KERNELS = {
    "plain": ("dest[0] = pe", "int64"),
    "p_quiet": ("shmem.p(dest, 1, pe)\n    shmem.quiet()", "int64"),
    "put_block": ("shmem.put_block(dest, dest, pe)", "int64"),
    "put_signal_block": ("shmem.put_signal_block(dest, dest, dest, 1, shmem.SIGNAL_ADD, pe)",
                         "uint64"),
    "atomic_fetch_add": ("dest[1] = shmem.atomic_fetch_add(dest, 1, pe)", "int64"),
    "wait_until": ("shmem.wait_until(dest, shmem.CMP_GE, pe)", "int64"),
    "barrier_all_block": ("shmem.barrier_all_block()", "int64"),
    "sum_reduce_block": ("shmem.sum_reduce_block(shmem.TEAM_WORLD, dest, dest, pe)", "int64"),
    "fcollect_block": ("shmem.fcollect_block(shmem.TEAM_WORLD, dest, dest, pe)", "int64"),
}


def one(name):
    """Compile the plain kernel, then ``name``'s; print the second's seconds."""
    from numba import cuda, types

    import numba_shmem as shmem

    for kernel in ("plain", name):
        body, dtype = KERNELS[kernel]
        scope = {"shmem": shmem}
        exec(f"def kernel(dest, pe):\n    {body}\n", scope)  # noqa: S102  (the table above)
        start = time.perf_counter()
        cuda.compile_ptx(scope["kernel"], (getattr(types, dtype)[::1], types.int64), cc=(9, 0))
        seconds = time.perf_counter() - start
    print(f"{seconds:.4f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kernels", default=",".join(KERNELS),
                        help="comma-separated, of: " + ", ".join(KERNELS))
    parser.add_argument("--json", help="also write every round's seconds here")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        return one(args.one)
    names = args.kernels.split(",")
    unknown = [name for name in names if name not in KERNELS]
    if unknown or args.rounds < 1:
        parser.error(f"--kernels: unknown {', '.join(unknown)}; choose of {', '.join(KERNELS)}"
                     if unknown else "--rounds: at least 1")
    import numba_cuda

    machine = (f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python "
               f"{platform.python_version()}, numba-cuda {numba_cuda.__version__}")
    print(f"compile time for sm_90 on {machine}; seconds, median of {args.rounds} (best-worst)")
    rounds = {}
    env = {key: value for key, value in os.environ.items()
           if key not in ("NUMBA_ENABLE_CUDASIM", "NUMBA_SHMEM_NODE_SIZE")}
    env["NUMBA_SHMEM_BACKEND"] = "cuda"
    print(f"{'kernel':<20} {'one node':>22} {'spanning nodes':>22}")
    for name in names:
        cells = []
        for node_size in ("", "1"):
            times = []
            for _ in range(args.rounds):
                run_env = dict(env, **({"NUMBA_SHMEM_NODE_SIZE": node_size} if node_size else {}))
                result = subprocess.run([sys.executable, __file__, "--one", name], env=run_env,
                                        capture_output=True, text=True, timeout=600)
                if result.returncode != 0:
                    sys.exit(f"benchmarks/compile_time.py: {name} did not compile:\n"
                             + result.stderr)
                times.append(float(result.stdout))
            cells.append(f"{statistics.median(times):.2f} ({min(times):.2f}-{max(times):.2f})")
            rounds.setdefault(name, {})["spanning" if node_size else "one_node"] = times
        print(f"{name:<20} {cells[0]:>22} {cells[1]:>22}", flush=True)
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"machine": machine, "seconds": rounds}, out, indent=1)


if __name__ == "__main__":
    sys.exit(main())
