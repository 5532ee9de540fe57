"""Benchmark: the overlapped samples against their unfused paths, in one run.

For each shape, ``samples/allgather_matmul.py --time`` and
``samples/matmul_reducescatter.py --time``: GPU milliseconds per step of the
fused path (copy-engine puts with signals, cuBLAS waiting per chunk on
``signal_wait_until(stream=)``), the unfused path (the collective, then one
matmul), the collective alone (its share of the unfused step), and NCCL's
collective + the same matmul where every PE has a GPU of its own. Each path
both enqueued step by step and replayed from a CUDA graph of one step (the
host's time per step then no longer counts).

    python benchmarks/overlap.py [--pes 2] [--reps 20] [--json out.json]
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

from _machine import require_gpu

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
#: (sample, its shape arguments): AllGather shards m x k, B k x n; ReduceScatter
#: C is m x n, each PE's A shard m x k
SHAPES = [("allgather_matmul", {"m": 4096, "k": 8192, "n": 512, "chunks": 2}),
          ("allgather_matmul", {"m": 4096, "k": 8192, "n": 1024, "chunks": 2}),
          ("allgather_matmul", {"m": 4096, "k": 8192, "n": 2048, "chunks": 2}),
          ("matmul_reducescatter", {"m": 8192, "k": 2048, "n": 4096}),
          ("matmul_reducescatter", {"m": 8192, "k": 4096, "n": 4096})]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pes", type=int, default=2)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    require_gpu("overlap.py", "the overlapped samples' GPU time per step")
    runs = []
    for sample, shape in SHAPES:
        command = [sys.executable, "-m", "shmem_run", "-n", str(args.pes),
                   str(SAMPLES / f"{sample}.py"), "--time", "--reps", str(args.reps),
                   *[f"--{key}={value}" for key, value in shape.items()]]
        run = subprocess.run(command, capture_output=True, text=True, timeout=900)
        lines = [line for line in run.stdout.splitlines() if line.startswith("JSON ")]
        if run.returncode != 0 or not lines:
            raise SystemExit(f"{' '.join(command)} failed:\n{run.stdout}\n{run.stderr}")
        runs.append(json.loads(lines[-1][len("JSON "):]))
    first = runs[0]
    print(f"{first['npes']} PEs on {first['gpus']} GPU{'s' if first['gpus'] > 1 else ''}; GPU "
          f"ms per step, median (min-max) of 3 rounds of {first['reps']} steps, PE 0; each "
          "path enqueued step by step ('eager') and replayed from a CUDA graph of one step")
    print(f"  {'sample':<21} {'M x K x N':>16} {'path':>6} {'fused':>20} {'unfused':>20} "
          f"{'collective':>20} {'share':>6} {'unfused/fused':>14} {'NCCL + matmul':>20}")
    span = "{:.3f} ({:.3f}-{:.3f})".format
    for r in runs:
        ms = r["ms"]
        collective = ms.get("fcollect") or ms.get("reducescatter")
        nccl = span(*ms["nccl"]) if "nccl" in ms else "not run: GPU shared"
        for path, suffix in (("eager", ""), ("graph", " graph")):
            fused, unfused = ms["fused" + suffix], ms["unfused" + suffix]
            print(f"  {r['sample']:<21} {'x'.join(map(str, r['shape'])):>16} {path:>6}"
                  f" {span(*fused):>20} {span(*unfused):>20} {span(*collective):>20}"
                  f" {collective[0] / unfused[0]:>6.0%} {unfused[0] / fused[0]:>14.2f}"
                  f" {nccl:>20}")
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
