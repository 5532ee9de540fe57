"""Benchmark: shmem.init() time and first-allocation time for 1, 2 and 4 PEs.

    python benchmarks/init_alloc.py [--pes 1 2 4] [--reps 3] [--bytes 1048576] [--json out.json]

Each repetition is a fresh job through shmem-run; a figure is the slowest PE of
a job, and the table gives the median over repetitions. The first allocation
maps the heap's first physical chunk on every PE (collective growth); the second
is a plain allocation, for comparison.
"""

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def device_name():
    try:
        probe = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                               capture_output=True, text=True)
    except FileNotFoundError:
        return "no GPU (simulator)"
    names = probe.stdout.strip().splitlines() if probe.returncode == 0 else []
    return f"{len(names)} x {names[0]}" if names else "no GPU (simulator)"


def one_job(npes, nbytes):
    result = subprocess.run([sys.executable, "-m", "shmem_run", "-n", str(npes),
                             str(HERE / "init_alloc_pe.py"), str(nbytes)],
                            capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        raise SystemExit(f"{npes} PEs failed:\n{result.stdout}\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--bytes", type=int, default=1 << 20)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    for npes in args.pes:
        runs = [one_job(npes, args.bytes) for _ in range(args.reps)]
        rows.append({
            "npes": npes, "backend": runs[0]["backend"], "reps": args.reps,
            **{key: statistics.median(run[key] for run in runs)
               for key in ("init_s", "first_alloc_s", "second_alloc_s")},
        })
    print(f"init/allocation on {device_name()}, allocation of {args.bytes} bytes, "
          f"median of {args.reps} jobs, slowest PE of each")
    print(f"{'PEs':>4} {'backend':>8} {'init ms':>10} {'1st alloc ms':>13} {'2nd alloc ms':>13}")
    for row in rows:
        print(f"{row['npes']:>4} {row['backend']:>8} {row['init_s'] * 1e3:>10.1f} "
              f"{row['first_alloc_s'] * 1e3:>13.2f} {row['second_alloc_s'] * 1e3:>13.3f}")
    if args.json:
        args.json.write_text(json.dumps({"device": device_name(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
