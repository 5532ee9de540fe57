"""Benchmark: barrier_all latency for 1, 2 and 4 PEs against a bare PTX ping-pong,
host fcollect/alltoall/sum_reduce against a local copy of the same bytes, and the
fused AllGather + GEMM against fcollect then the same GEMM, measured in the same runs.

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
    print(f"{runs[0]['device']}; the PEs of a run share it (MPS, each its share of the SMs)")
    print("barrier_all, one thread per PE, 9,900 barriers timed inside one kernel")
    for r in runs:
        bare = r.get("bare_ping_pong_us")
        ratio = f", {r['barrier_all_us'] / bare:.2f}x the bare PTX ping-pong of {bare:.2f} us" \
            if bare else ""
        print(f"  {r['npes']} PEs: {r['barrier_all_us']:.2f} us{ratio}")
    for r in runs:
        npes = r["npes"]
        print(f"host collectives with {npes} PEs, GB/s of the {npes} parts each PE moves "
              "(a part is 'bytes'), 10 calls each; 'DtoD copy' copies the same bytes locally")
        print(f"  {'bytes':>10} {'fcollect':>9} {'alltoall':>9} {'sum_reduce':>11} {'DtoD copy':>10}"
              f" {'fcollect/copy':>14}")
        for row in r["collectives"]:
            moved = row["bytes"] * npes
            print(f"  {row['bytes']:>10}" + "".join(
                f" {moved / row[k] / 1e9:>{w}.1f}" for k, w in (
                    ("fcollect_s", 9), ("alltoall_s", 9), ("sum_reduce_s", 11),
                    ("local_copy_s", 10)))
                + f" {row['local_copy_s'] / row['fcollect_s']:>14.2f}")
        shape = "x".join(map(str, r["gemm_shape"]))
        print(f"  AllGather + GEMM ({shape}): fused {r['fused_s'] * 1e3:.2f} ms, "
              f"unfused {r['unfused_s'] * 1e3:.2f} ms ({r['unfused_s'] / r['fused_s']:.2f}x); "
              f"registers per thread: fused {r['registers']['fused']}, "
              f"unfused {r['registers']['unfused']}")
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
