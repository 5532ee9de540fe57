"""Benchmark: barrier_all latency for 1, 2 and 4 PEs against a bare PTX ping-pong,
fcollect/alltoall/sum_reduce against a local copy of the same bytes, and the fused
AllGather + GEMM against fcollect then GEMM, all measured in the same runs.

    python benchmarks/collectives.py [--pes 1 2 4] [--max-bytes 67108864] [--json out.json]
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--max-bytes", type=int, default=64 << 20)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    runs = []
    for npes in args.pes:
        run = subprocess.run([sys.executable, "-m", "shmem_run", "-n", str(npes),
                              str(HERE / "collectives_pe.py"), str(args.max_bytes)],
                             capture_output=True, text=True, timeout=900)
        if run.returncode != 0:
            raise SystemExit(f"{npes} PEs failed:\n{run.stdout}\n{run.stderr}")
        runs.append(json.loads(run.stdout.strip().splitlines()[-1]))
    print("barrier_all, one thread per PE, 9,900 barriers timed inside one kernel")
    for r in runs:
        bare = r.get("bare_ping_pong_us")
        ratio = f", {r['barrier_all_us'] / bare:.2f}x the bare PTX ping-pong of {bare:.2f} us" \
            if bare else ""
        print(f"  {r['npes']} PEs: {r['barrier_all_us']:.2f} us{ratio}")
    for r in runs:
        print(f"collectives with {r['npes']} PEs (one block per PE), GB/s of each PE's bytes")
        print(f"  {'bytes':>10} {'fcollect':>9} {'alltoall':>9} {'sum_reduce':>11} {'local copy':>11}")
        for row in r["collectives"]:
            size = row["bytes"]
            print(f"  {size:>10}" + "".join(
                f" {size / row[k] / 1e9:>{w}.2f}" for k, w in (
                    ("fcollect_s", 9), ("alltoall_s", 9), ("sum_reduce_s", 11),
                    ("local_copy_s", 11))))
        shape = "x".join(map(str, r["gemm_shape"]))
        print(f"  AllGather + GEMM ({shape}): fused {r['fused_s'] * 1e3:.2f} ms, "
              f"unfused {r['unfused_s'] * 1e3:.2f} ms ({r['unfused_s'] / r['fused_s']:.2f}x)")
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
