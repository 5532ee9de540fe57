"""Benchmark: barrier_all latency for 1, 2 and 4 PEs against a bare PTX ping-pong,
host fcollect/alltoall/sum_reduce against a local copy of the same bytes, the
collectives inside a kernel at block, warp and thread scope (against NVSHMEM's
with --nvshmem), and the fused AllGather + GEMM against fcollect then the same GEMM, measured in the same runs.

    python benchmarks/collectives.py [--pes 1 2 4] [--max-bytes 67108864] [--json out.json]
                                     [--nvshmem coll2.json coll4.json]
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
    parser.add_argument("--pes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--max-bytes", type=int, default=64 << 20)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--nvshmem", type=Path, nargs="*", default=[],
                        help="outputs of benchmarks/nvshmem/run.sh coll_block (one per PE count)")
    args = parser.parse_args()
    require_gpu("collectives.py", "the device barriers and the collectives' GPU time")
    nvshmem = {}  # PE count -> bytes -> NVSHMEM's row
    for path in args.nvshmem:
        twin = json.loads(path.read_text().strip().splitlines()[-1])
        nvshmem[twin["npes"]] = {row["bytes"]: row for row in twin["block_collectives"]}
    runs = []
    for npes in args.pes:
        run = subprocess.run([sys.executable, "-m", "shmem_run", "-n", str(npes),
                              str(HERE / "collectives_pe.py"), str(args.max_bytes)],
                             capture_output=True, text=True, timeout=900)
        if run.returncode != 0:
            raise SystemExit(f"{npes} PEs failed:\n{run.stdout}\n{run.stderr}")
        runs.append(json.loads(run.stdout.strip().splitlines()[-1]))
    print(f"{runs[0]['device']}; " + "; ".join(
        f"{r['npes']} PE{'s' if r['npes'] > 1 else ''} on {r['gpus']} GPU"
        f"{'s' if r['gpus'] > 1 else ''}" for r in runs)
        + " (PEs sharing a GPU run through MPS, each with its share of the SMs)")
    print("barrier_all, one thread per PE, 9,900 barriers timed inside one kernel")
    for r in runs:
        bare = r.get("bare_ping_pong_us")
        ratio = f", {r['barrier_all_us'] / bare:.2f}x the bare PTX ping-pong of {bare:.2f} us" \
            if bare else ""
        print(f"  {r['npes']} PEs: {r['barrier_all_us']:.2f} us{ratio}")
    for r in runs:
        npes = r["npes"]
        print(f"host collectives with {npes} PEs, GB/s of the {npes} parts each PE moves "
              f"(a part is 'bytes'), from the GPU's time: {r['collective_reps']} calls queued behind "
              "a held stream, "
              "so the host's time between calls does not count; 'DtoD copy' copies the same "
              "bytes locally (cuMemcpyDtoD). 'host us' is the time per call that the host "
              "sees, one call after another")
        print(f"  {'bytes':>10} {'fcollect':>9} {'alltoall':>9} {'sum_reduce':>11} {'DtoD copy':>10}"
              f" {'fcollect/copy':>14} {'host us: fcollect':>18} {'alltoall':>9} {'sum_reduce':>11}")
        for row in r["collectives"]:
            moved = row["bytes"] * npes
            print(f"  {row['bytes']:>10}" + "".join(
                f" {moved / row[k] / 1e9:>{w}.1f}" for k, w in (
                    ("fcollect_s", 9), ("alltoall_s", 9), ("sum_reduce_s", 11),
                    ("local_copy_s", 10)))
                + f" {row['local_copy_s'] / row['fcollect_s']:>14.2f}" + "".join(
                f" {row[k] * 1e6:>{w}.0f}" for k, w in (
                    ("fcollect_host_s", 18), ("alltoall_host_s", 9), ("sum_reduce_host_s", 11))))
        kinds = ("fcollect", "alltoall", "broadcast", "sum_reduce")
        theirs = nvshmem.get(npes, {})
        for scope, threads in (("_block", "one block of 256 threads"), ("_warp", "one warp"),
                               ("", "one thread")):
            print(f"  {kinds[0]}{scope} and the others inside a kernel ({threads} per PE, team "
                  f"world, float64), us per call over {r['block_rounds']} calls"
                  + ("; [NVSHMEM's, benchmarks/nvshmem/coll_block.cu] and ours / NVSHMEM's"
                     if theirs else ""))
            print(f"  {'bytes':>10}" + "".join(f" {k + scope:>25}" for k in kinds))
            for row in r["block_collectives"]:
                other = theirs.get(row["bytes"], {})
                cells = []
                for k in kinds:
                    key = f"{k}{scope}_us"
                    cell = f"{row[key]:.2f}"
                    if key in other:
                        cell += f" [{other[key]:.2f}] {row[key] / other[key]:.2f}x"
                    cells.append(f" {cell:>25}")
                print(f"  {row['bytes']:>10}" + "".join(cells))
        shape = "x".join(map(str, r["gemm_shape"]))
        fused, registers = r["fused_s"], r["registers"]
        print(f"  AllGather + GEMM ({shape}), GPU time per call, {r['gemm_reps']} calls queued "
              f"behind a held stream: unfused (fcollect, then the tile multiply, "
              f"{registers['unfused']} registers) {r['unfused_s'] * 1e3:.2f} ms; fused (zero "
              f"the signals, barrier_all_on_stream, the kernel):")
        for cap, seconds in fused.items():
            print(f"    register cap {cap:>8}: {registers['fused'][cap]:>3} registers, "
                  f"{seconds * 1e3:.2f} ms (unfused/fused {r['unfused_s'] / seconds:.2f})")
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
