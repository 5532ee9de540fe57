"""Benchmark: the stream tier's host time per call (4 KiB) against numba's launch
of an empty kernel and a bare cuLaunchKernel, and the GPU's time per call of the
barriers and host collectives, for 2 and 4 PEs.

    python benchmarks/stream.py [--pes 2 4] [--json out.json]
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

from _machine import require_gpu

HERE = Path(__file__).resolve().parent


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pes", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    require_gpu("stream.py", "the stream tier's host and GPU time per call")
    runs = []
    for npes in args.pes:
        run = subprocess.run([sys.executable, "-m", "shmem_run", "-n", str(npes),
                              str(HERE / "stream_pe.py")], capture_output=True, text=True,
                             timeout=900)
        if run.returncode != 0:
            raise SystemExit(f"{npes} PEs failed:\n{run.stdout}\n{run.stderr}")
        runs.append(json.loads(run.stdout.strip().splitlines()[-1]))
    first = runs[0]
    print(f"{first['device']}; " + "; ".join(
        f"{r['npes']} PEs on {r['gpus']} GPU{'s' if r['gpus'] > 1 else ''}" for r in runs)
        + f"; {first['bytes']} bytes per transfer and per member")
    print(f"host us per call: median (min-max) of {first['rounds']} rounds of "
          f"{first['calls']} calls, PE 0")
    labels = list(first["host_us"])
    print(f"  {'call':<30}" + "".join(f" {str(r['npes']) + ' PEs':>20}" for r in runs))
    for label in labels:
        print(f"  {label:<30}" + "".join(
            " {:>8.1f} ({:.1f}-{:.1f})".format(*r["host_us"][label]).rjust(21) for r in runs))
    print(f"GPU us per call: {first['gpu_reps']} calls queued behind a held stream, median "
          "(min-max) of 3 rounds")
    print(f"  {'call':<30}" + "".join(f" {str(r['npes']) + ' PEs':>20}" for r in runs))
    for label in first["gpu_us"]:
        print(f"  {label:<30}" + "".join(
            " {:>8.2f} ({:.2f}-{:.2f})".format(*r["gpu_us"][label]).rjust(21) for r in runs))
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
