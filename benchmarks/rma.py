"""Benchmark: put_block / put_nbi_block bandwidth, put_warp, thread-scope put and
get_block bandwidth, put_signal ping-pong, p and atomic latencies, atomic_add
throughput, with 2 PEs (on one GPU through MPS, or one per GPU), each beside a
baseline measured in the same run.

    python benchmarks/rma.py [--max-bytes 268435456] [--json out.json] [--png out.png]
                             [--nvshmem nvshmem.json] [--span-nodes]
    python benchmarks/rma.py --plot out.json --png out.png   # the plot of an earlier run

With ``--nvshmem``, the output of ``benchmarks/nvshmem/run.sh scopes_bw`` (NVSHMEM doing the
scope rows' work on the same grid), the scope rows print NVSHMEM's figures and
the ratio beside ours. With ``--span-nodes``, PEs 0 and 1 run it again in a job
of two emulated nodes (4 PEs under mpiexec, NUMBA_SHMEM_NODE_SIZE=2, PEs 2 and 3
the other node), where every kernel carries the path to other nodes while PE 0
reaches PE 1 directly: the direct path's figures there against the one-node
job's, the two jobs run in turn.
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

from _machine import emulated_nodes, require_gpu

HERE = Path(__file__).resolve().parent


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-bytes", type=int, default=256 << 20)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--png", type=Path)
    parser.add_argument("--nvshmem", type=Path,
                        help="the output of benchmarks/nvshmem/run.sh scopes_bw, for the "
                        "scope rows")
    parser.add_argument("--span-nodes", action="store_true",
                        help="also run PEs 0 and 1 in a job of two emulated nodes (4 PEs, "
                        "mpiexec) and print the direct path's figures there against these")
    parser.add_argument("--plot", type=Path, help="a --json of an earlier run: plot it "
                        "into --png (no GPU needed)")
    args = parser.parse_args()
    if args.plot:
        if not args.png:
            raise SystemExit("--plot needs --png: where to write the plot")
        plot(json.loads(args.plot.read_text()), args.png)
        return
    require_gpu("rma.py", "the put bandwidth and latencies of GPU threads")
    r = one_node(args.max_bytes)
    gpus = r["pe_gpus"]
    where = "sharing one GPU (MPS)" if gpus[0] == gpus[1] else \
        "one GPU each"
    print(f"RMA between 2 PEs on {r['device']}, {where}; PE 0 puts into PE 1")
    print("GB/s of bytes delivered; each kernel repeats its copy `reps` times in one launch, "
          "timed on the GPU (the launch is queued behind a held stream, so the host's launch "
          "time does not count). "
          "put: put_block into PE 1; nbi: put_nbi_block + quiet; self: put_block into PE 0's "
          "own heap; local: the same kernel shape copying into cudaMalloc memory; local-heap: "
          "into PE 0's heap; DtoD: cuMemcpyDtoD (copy engine; 20 calls queued behind a held "
          "stream, the GPU's time) into local memory; DtoD-peer: cuMemcpyDtoD into PE 1's "
          "heap, where put_block writes; nvrtc: a CUDA C copy kernel of the same grid (16-byte "
          "vectors, compiled by NVRTC through CuPy) into PE 1's heap, the best copy loop we "
          "could write.")
    columns = (("put", "put_block_s"), ("nbi", "put_block_nbi_s"), ("self", "put_block_self_s"),
               ("local", "local_kernel_s"), ("local-heap", "local_kernel_heap_s"),
               ("DtoD", "memcpy_dtod_s"), ("DtoD-peer", "memcpy_peer_s"))
    if "nvrtc_copy_s" in r["bandwidth"][0]:
        columns += (("nvrtc", "nvrtc_copy_s"),)
    print(f"{'bytes':>11} {'reps':>5}" + "".join(f" {name:>10}" for name, _ in columns)
          + f" {'put/local':>9} {'put/DtoD-peer':>13}"
          + (f" {'put/nvrtc':>9}" if columns[-1][0] == "nvrtc" else ""))
    for row in r["bandwidth"]:
        size = row["bytes"]
        gbs = {key: size / row[key] / 1e9 for _, key in columns}
        print(f"{size:>11} {row['reps']:>5}" + "".join(f" {gbs[key]:>10.1f}" for _, key in columns)
              + f" {gbs['put_block_s'] / gbs['local_kernel_s']:>9.2f}"
              + f" {gbs['put_block_s'] / gbs['memcpy_peer_s']:>13.2f}"
              + (f" {gbs['put_block_s'] / gbs['nvrtc_copy_s']:>9.2f}" if "nvrtc_copy_s" in gbs
                 else ""))
    theirs = {}
    if args.nvshmem:
        # the JSON line of benchmarks/nvshmem/run.sh scopes_bw, run in the same hour
        twin = json.loads(args.nvshmem.read_text().strip().splitlines()[-1])
        theirs = {row["bytes"]: row for row in twin["bandwidth"]}
        print(f"NVSHMEM {twin['nvshmem']} beside it (benchmarks/nvshmem/scopes_bw.cu, same grid "
              "and chunks)")
    print("put_warp: every warp puts its own chunk; put: every thread its own chunk (thread "
          "scope); get_block: every block gets its chunk of PE 1's copy into local memory. GB/s"
          + ("; ratio: ours / NVSHMEM's" if theirs else ""))
    keys = (("put_warp", "put_warp_s"), ("put", "put_thread_s"), ("get_block", "get_block_s"))
    print(f"{'bytes':>11}" + "".join(f" {name:>10}" + (f" {'NVSHMEM':>10} {'ratio':>6}"
                                                         if theirs else "")
                                     for name, _ in keys))
    for row in r["bandwidth"]:
        size, line = row["bytes"], f"{row['bytes']:>11}"
        for _, key in keys:
            line += f" {size / row[key] / 1e9:>10.1f}"
            if theirs:
                other = theirs.get(size, {}).get(key)
                line += (f" {size / other / 1e9:>10.1f} {other / row[key]:>6.2f}" if other
                         else f" {'-':>10} {'-':>6}")
        print(line)
    bare, relaxed, data, op, lib = (
        r[f"pingpong_{k}_us"]
        for k in ("bare_ptx", "bare_relaxed", "bare_ptx_data", "signal_op", "put_signal"))
    print(f"ping-pong round trip over {r['pingpong_iters']} iterations: signal_op + "
          f"signal_wait_until {op:.2f} us against bare PTX flag ping-pongs: release/acquire "
          f"{bare:.2f} us ({op / bare:.2f}x), relaxed {relaxed:.2f} us; put_signal of 8 bytes + signal_wait_until {lib:.2f} us against "
          f"bare PTX storing 8 bytes, then the flag {data:.2f} us ({lib / data:.2f}x)")
    print(f"p + quiet: {r['p_quiet_us']:.2f} us; atomic_fetch_add round trip: "
          f"{r['fetch_add_us']:.2f} us")
    print(f"atomic_add, every thread of both PEs: one counter {r['atomic_add_spread1_mops']:.0f} "
          f"Mops/s, 4096 counters {r['atomic_add_spread4096_mops']:.0f} Mops/s "
          f"(no lost update: {r['atomic_add_total_ok']})")
    if args.span_nodes:
        r["span_nodes"] = spanning(args.max_bytes)
        r["one_node_again"] = one_node(args.max_bytes)
        print_span(r, r["span_nodes"], r["one_node_again"])
    if args.json:
        args.json.write_text(json.dumps(r, indent=1))
    if args.png:
        plot(r, args.png)


def _result(run):
    """PE 0's JSON line of a finished job (a launcher may print lines after it)."""
    if run.returncode != 0:
        raise SystemExit(f"benchmark failed:\n{run.stdout}\n{run.stderr}")
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise SystemExit(f"benchmark printed no result:\n{run.stdout}\n{run.stderr}")
    return json.loads(lines[-1])


def one_node(max_bytes):
    """rma_pe.py's figures from 2 PEs of one node (shmem-run)."""
    return _result(subprocess.run([sys.executable, "-m", "shmem_run", "-n", "2",
                                   str(HERE / "rma_pe.py"), str(max_bytes)],
                                  capture_output=True, text=True, timeout=900))


def spanning(max_bytes):
    """rma_pe.py's figures from PEs 0 and 1 of a job of two emulated nodes of
    2 PEs each (mpiexec -n 4, NUMBA_SHMEM_NODE_SIZE=2; on one GPU the PEs
    share it through a private MPS daemon, as shmem-run's would)."""
    run = emulated_nodes(4, 2, [str(HERE / "rma_pe.py"), str(max_bytes)], timeout=900)
    r = _result(run)
    if not r["spans_nodes"]:
        raise SystemExit("the job of two emulated nodes ran without the path to other nodes")
    return r


#: the figures compared between the two jobs: (JSON key, label, True where
#: larger is better)
SPAN_ROWS = (("p_quiet_us", "p + quiet, us", False),
             ("fetch_add_us", "atomic_fetch_add round trip, us", False),
             ("pingpong_signal_op_us", "signal_op + wait round trip, us", False),
             ("pingpong_put_signal_us", "put_signal 8 B + wait round trip, us", False),
             ("atomic_add_spread1_mops", "atomic_add, one counter, Mops/s", True),
             ("atomic_add_spread4096_mops", "atomic_add, 4096 counters, Mops/s", True))


def print_span(first, span, again):
    """The direct path in a job that spans nodes against the one-node job's,
    run before and after it: each figure and how much slower it is there."""
    print("the direct path (PE 0 into PE 1, one node) where the job spans two emulated nodes "
          "(every kernel carries the path to other nodes), against the same PEs in a job of "
          "one node, run before and after it; slower: spanning against the better of the two")
    print(f"{'':>40} {'one node':>10} {'spanning':>10} {'again':>10} {'slower':>8}")
    rows = [(label, first[key], span[key], again[key], more)
            for key, label, more in SPAN_ROWS]
    for a, b, c in zip(first["bandwidth"], span["bandwidth"], again["bandwidth"]):
        rows.append((f"put_block {a['bytes']} B, GB/s", a["bytes"] / a["put_block_s"] / 1e9,
                     b["bytes"] / b["put_block_s"] / 1e9, c["bytes"] / c["put_block_s"] / 1e9,
                     True))
    for label, one, there, two, more in rows:
        best = max(one, two) if more else min(one, two)
        slower = best / there - 1 if more else there / best - 1
        print(f"{label:>40} {one:>10.3f} {there:>10.3f} {two:>10.3f} {slower:>+8.1%}")


#: the round trips and latencies of a run's JSON, as plotted
LATENCIES = (("pingpong_bare_ptx_us", "bare PTX\nflag"),
             ("pingpong_signal_op_us", "signal_op\n+ wait"),
             ("pingpong_bare_ptx_data_us", "bare PTX\n8 B + flag"),
             ("pingpong_put_signal_us", "put_signal\n8 B + wait"),
             ("p_quiet_us", "p +\nquiet"), ("fetch_add_us", "fetch_add\nround trip"))


def plot(r, path):
    """Two panels into ``path``: put bandwidth against the baselines of the same
    run by size, and the round trips and latencies beside the bare PTX ones."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gpus = r["pe_gpus"]
    figure, (bandwidth, latency) = plt.subplots(1, 2, figsize=(14, 5.5),
                                                gridspec_kw={"width_ratios": [3, 2]})
    sizes = [row["bytes"] for row in r["bandwidth"]]
    for key, label in (("put_block_s", "put_block"), ("put_block_nbi_s", "put_nbi_block"),
                       ("put_block_self_s", "put_block to self"),
                       ("local_kernel_s", "local copy kernel"),
                       ("memcpy_dtod_s", "cuMemcpyDtoD"),
                       ("memcpy_peer_s", "cuMemcpyDtoD into PE 1"),
                       ("nvrtc_copy_s", "NVRTC copy kernel into PE 1")):
        if key in r["bandwidth"][0]:
            bandwidth.plot(sizes, [row["bytes"] / row[key] / 1e9 for row in r["bandwidth"]],
                           marker="o", label=label)
    bandwidth.set_xscale("log", base=2)
    bandwidth.set_xlabel("bytes")
    bandwidth.set_ylabel("GB/s")
    bandwidth.set_title("put bandwidth, PE 0 into PE 1")
    bandwidth.legend()
    shown = [(key, label) for key, label in LATENCIES if key in r]
    values = [r[key] for key, _ in shown]
    bars = latency.bar(range(len(shown)), values,
                       color=["0.6" if "bare" in key else "C0" for key, _ in shown])
    latency.bar_label(bars, labels=[f"{v:.2f}" for v in values])
    latency.set_xticks(range(len(shown)), [label for _, label in shown], fontsize=8)
    latency.set_ylabel("us")
    latency.set_title("round trips and latencies (grey: bare PTX)")
    figure.suptitle(f"2 PEs, {r['device']}, {'one GPU' if gpus[0] == gpus[1] else 'two GPUs'}")
    figure.tight_layout()
    figure.savefig(path, dpi=110)

if __name__ == "__main__":
    main()
