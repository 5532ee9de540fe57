"""Benchmark: put_block / put_block_nbi bandwidth, put_signal ping-pong, p and
atomic latencies, atomic_add throughput, with 2 PEs (on one GPU through MPS, or
one per GPU), each beside a baseline measured in the same run.

    python benchmarks/rma.py [--max-bytes 268435456] [--json out.json] [--png out.png]
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-bytes", type=int, default=256 << 20)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--png", type=Path)
    args = parser.parse_args()
    run = subprocess.run([sys.executable, "-m", "shmem_run", "-n", "2",
                          str(HERE / "rma_pe.py"), str(args.max_bytes)],
                         capture_output=True, text=True, timeout=900)
    if run.returncode != 0:
        raise SystemExit(f"benchmark failed:\n{run.stdout}\n{run.stderr}")
    r = json.loads(run.stdout.strip().splitlines()[-1])
    print(f"RMA between 2 PEs on {r['device']} (PE 0 puts into PE 1)")
    print(f"{'bytes':>11} {'reps':>4} {'put_block GB/s':>15} {'put_nbi GB/s':>13} "
          f"{'local kernel GB/s':>18} {'DtoD memcpy GB/s':>17} {'put/local':>9}")
    for row in r["bandwidth"]:
        size = row["bytes"]
        gbs = {k: size / row[k] / 1e9 for k in ("put_block_s", "put_block_nbi_s",
                                                 "local_kernel_s", "memcpy_dtod_s")}
        print(f"{size:>11} {row['reps']:>4} {gbs['put_block_s']:>15.1f} "
              f"{gbs['put_block_nbi_s']:>13.1f} {gbs['local_kernel_s']:>18.1f} "
              f"{gbs['memcpy_dtod_s']:>17.1f} {gbs['put_block_s'] / gbs['local_kernel_s']:>9.2f}")
    bare, lib = r["pingpong_bare_ptx_us"], r["pingpong_put_signal_us"]
    print(f"ping-pong round trip over {r['pingpong_iters']} iterations: bare PTX {bare:.2f} us, "
          f"signal_op + signal_wait_until {lib:.2f} us ({lib / bare:.2f}x)")
    print(f"p + quiet: {r['p_quiet_us']:.2f} us; atomic_fetch_add round trip: "
          f"{r['fetch_add_us']:.2f} us")
    print(f"atomic_add, every thread of both PEs: one counter {r['atomic_add_spread1_mops']:.0f} "
          f"Mops/s, 4096 counters {r['atomic_add_spread4096_mops']:.0f} Mops/s "
          f"(no lost update: {r['atomic_add_total_ok']})")
    if args.json:
        args.json.write_text(json.dumps(r, indent=1))
    if args.png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        sizes = [row["bytes"] for row in r["bandwidth"]]
        for key, label in (("put_block_s", "put_block"), ("put_block_nbi_s", "put_block_nbi"),
                           ("local_kernel_s", "local copy kernel"),
                           ("memcpy_dtod_s", "cuMemcpyDtoD")):
            plt.plot(sizes, [row["bytes"] / row[key] / 1e9 for row in r["bandwidth"]],
                     marker="o", label=label)
        plt.xscale("log", base=2)
        plt.xlabel("bytes")
        plt.ylabel("GB/s")
        plt.title(f"put bandwidth, 2 PEs, {r['device']}")
        plt.legend()
        plt.savefig(args.png, dpi=120)


if __name__ == "__main__":
    main()
