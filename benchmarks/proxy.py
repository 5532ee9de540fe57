"""Benchmark: the proxy (PEs on other nodes) against MPI between the same
ranks, in pairs: put bandwidth, 4 KiB to 64 MiB, against mpi4py's Send/Recv and Put (a
window of 16 messages, as osu_bw); p and put_signal round trips, a fetching
atomic's and a host put + quiet's, against a Send/Recv ping-pong (osu_latency);
how fast a Python thread runs while the proxy is busy; p's per second from many
threads.

    python benchmarks/proxy.py [--npes 2] [--max-bytes 67108864] [--json out.json]
                               [--mpiexec-args "--bind-to none"]

Runs ``mpiexec -n NPES`` with NUMBA_SHMEM_NODE_SIZE=1 (every PE a node of its
own), on the backend numba-shmem picks here; with one GPU, the PEs share it
through a private MPS daemon, as shmem-run's would. The PEs work in pairs (0
and 1, 2 and 3, ...), every pair at once, each with MPI's figures between the
same two ranks: the figures are PE 0's pair's.
"""

import argparse
import json
from pathlib import Path

from _machine import emulated_nodes

HERE = Path(__file__).resolve().parent


#: the bandwidth table's figures: (name, the JSON row's key of its seconds)
COLUMNS = (("put_block", "shmem_put_block_s"), ("nbi_block", "shmem_put_nbi_block_s"),
           ("put", "shmem_put_s"), ("Send", "mpi_send_s"), ("Put", "mpi_put_s"))


def _cpus(cpus):
    """``cpus`` (sorted ints) as ranges: "0-3,8"."""
    runs, start = [], None
    for i, c in enumerate(cpus):
        if start is None:
            start = c
        if i + 1 == len(cpus) or cpus[i + 1] != c + 1:
            runs.append(str(start) if start == c else f"{start}-{c}")
            start = None
    return ",".join(runs)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--npes", type=int, default=2,
                        help="PEs, each a node of its own, in pairs (an even number)")
    parser.add_argument("--max-bytes", type=int, default=64 << 20)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--mpiexec-args", default="--bind-to none",
                        help="mpiexec's binding arguments (default: every rank may use every "
                        "CPU, as a PE and its proxy thread need two or more)")
    args = parser.parse_args()
    if args.npes < 2 or args.npes % 2:
        parser.error(f"--npes takes an even number of PEs, 2 or more (got {args.npes})")
    if args.max_bytes < 4096:
        parser.error(f"--max-bytes takes 4096 or more: the sizes run from 4 KiB up, four "
                     f"times larger each, while they fit (got {args.max_bytes})")
    # (the ranks' stderr as they write it: PE 0's rows of bandwidth as it measures
    # them, which a run stopped before its end keeps)
    run = emulated_nodes(args.npes, 1, [str(HERE / "proxy_pe.py"), str(args.max_bytes)],
                         args.mpiexec_args, stderr=None)
    if run.returncode != 0:
        raise SystemExit(f"benchmark failed (the ranks' stderr above):\n{run.stdout}")
    # PE 0's one JSON line (mpiexec may print lines of its own after it)
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise SystemExit(f"benchmark printed no result (the ranks' stderr above):\n{run.stdout}")
    r = json.loads(lines[-1])
    print(f"proxy between {r['npes']} PEs on nodes of their own, in pairs, every pair at once "
          f"(PE 0's pair's figures; {r['backend']} backend), {r['mpi']}")
    print("CPUs each PE may run on (its proxy thread among them): "
          + "; ".join(f"PE {pe}: {_cpus(c)}" for pe, c in enumerate(r["cpus"])))
    print(f"bandwidth, MB/s: {r['window']} messages of 'bytes' each, best of 3 rounds; "
          "put_block (nbi_block: put_nbi_block): from one block of a kernel (256 threads) "
          "through the proxy, then quiet; "
          "put: from the host, then quiet; Send: mpi4py Isend/Irecv + ack; Put: MPI_Put in a "
          "lock epoch")
    put = r["bandwidth"][0].get("mpi_put_s") is not None
    print(f"MPI Put: {r['mpi_put_window']}")
    print(f"{'bytes':>10} {'put_block':>10} {'nbi_block':>10} {'put':>10} {'MPI Send':>10} "
          f"{'MPI Put':>10} {'block/Send':>11} {'nbi/Send':>9} {'put/Send':>9} {'put/Put':>8}")
    spreads = []  # (each size's figures' worst and best rounds, printed after the table)
    for row in r["bandwidth"]:
        def mbs_of(seconds, row=row):
            return r["window"] * row["bytes"] / seconds / 1e6
        mbs = {k: mbs_of(row[k]) for _name, k in COLUMNS if row.get(k)}
        block, ours, send = mbs["shmem_put_block_s"], mbs["shmem_put_s"], mbs["mpi_send_s"]
        nbi = mbs["shmem_put_nbi_block_s"]
        if put:
            mpi_put, versus_put = f"{mbs['mpi_put_s']:.0f}", f"{ours / mbs['mpi_put_s']:.2f}"
        else:
            mpi_put = versus_put = "-"
        print(f"{row['bytes']:>10} {block:>10.0f} {nbi:>10.0f} {ours:>10.0f} {send:>10.0f} "
              f"{mpi_put:>10} {block / send:>11.2f} {nbi / send:>9.2f} {ours / send:>9.2f} "
              f"{versus_put:>8}")
        spreads.append(f"{row['bytes']}: " + ", ".join(
            f"{name} {mbs_of(max(row[k + '_rounds'])):.0f}-{mbs_of(min(row[k + '_rounds'])):.0f}"
            for name, k in COLUMNS if row.get(k + "_rounds")))
    print("the rounds, MB/s, worst-best: " + "; ".join(spreads))
    size, stages = r.get("put_block_stages") or (0, [])
    if stages:
        print(f"a window of put_blocks of {size} bytes, one more round with both proxies "
              "tracing, per piece (median us): "
              + "; ".join(f"{name} {us:.1f}" for name, us, _seen in stages))
        calls = r.get("put_block_calls") or []
        print("  each loop's calls into its target in that round (the stream's query "
              "aside), median us (calls): "
              + "; ".join(f"PE {pe}: " + (", ".join(f"{name} {us:.1f} ({n})"
                                                   for name, (us, n) in sorted(spent.items()))
                                          or "none")
                          for pe, spent in enumerate(calls)))
    mpi = r["mpi_round_trip_s"] * 1e6
    print(f"round trip, best of 3 rounds of 300 in one kernel: p of a flag "
          f"{r['p_round_trip_s'] * 1e6:.1f} us, put_signal of 8 bytes "
          f"{r['put_signal_round_trip_s'] * 1e6:.1f} us; MPI Send/Recv {mpi:.1f} us "
          f"(ours - MPI's: {r['p_round_trip_s'] * 1e6 - mpi:.1f} and "
          f"{r['put_signal_round_trip_s'] * 1e6 - mpi:.1f} us)")
    print(f"round trip of a fetching atomic (atomic_fetch_add from one kernel thread, 300 in one "
          f"kernel): {r['fetch_add_round_trip_s'] * 1e6:.1f} us; of a host put of 8 bytes + quiet: "
          f"{r['host_put_quiet_s'] * 1e6:.1f} us (ours - MPI's: "
          f"{r['fetch_add_round_trip_s'] * 1e6 - mpi:.1f} and "
          f"{r['host_put_quiet_s'] * 1e6 - mpi:.1f} us)")
    for pe, c in enumerate(r.get("proxy_counters") or []):
        calls = c["target_calls"]
        print(f"PE {pe}'s proxy loop during the round trips ({c['seconds']:.1f} s): "
              f"{c['loops']} turns, asleep {c['slept_ns'] / 1e9 / c['seconds']:.0%} of the time, "
              f"{c['batches_sent']} batches sent, {c['request_batches_in']} batches of "
              f"{c['requests_in']} requests received"
              + (f", {calls} calls into the GPU's heap of {c['target_ns'] / calls / 1e3:.1f} us "
                 "each" if calls else "")
              + (f" ({c['memop_batches']} batches of atomics and signals as stream memory "
                 f"operations, {c['kernel_batches']} by a kernel)" if "memop_batches" in c else ""))
    print(f"an MPI_Iprobe that finds nothing (mpi4py, 20,000 calls): "
          f"{r['mpi_iprobe_s'] * 1e6:.2f} us each")
    for name, rows in r.get("stages", {}).items():
        what = "one hop (either way)" if name != "fetch_add" else "the round trip"
        print(f"{name}, {what}, step by step (one more run of 300 with both proxies tracing; "
              f"median and mean us): {sum(row[1] for row in rows):.1f} and "
              f"{sum(row[2] for row in rows):.1f} in all")
        for step, median, mean, seen in rows:
            print(f"  {median:7.1f} {mean:7.1f}  {step} ({seen} times)")
    print(f"a Python thread of PE 0 while PE 1's puts keep its proxy busy, against the proxy "
          f"idle (worst of 3 rounds, each the median of 10 pairs of 0.1 s windows, idle then busy): "
          f"{r['python_speed_ratio']:.2f} "
          f"({r['python_speed_busy'] / 1e6:.1f} against {r['python_speed_idle'] / 1e6:.1f} "
          "million loop iterations per second, medians)")
    if "python_speed_alone_ratio" in r:
        print(f"  the same with PE 0's pair alone at work (the other PEs wait in a barrier): "
              f"{r['python_speed_alone_ratio']:.2f} ({r['python_speed_alone_busy'] / 1e6:.1f} "
              f"against {r['python_speed_alone_idle'] / 1e6:.1f})")
    print("p through the proxy, per second, from 1 / 8 / 32 threads of a kernel (one block) "
          "of PE 0, best of 3 rounds: "
          + " / ".join(f"{r[f'p_rate_{t}_threads']:.0f}" for t in (1, 8, 32)))
    if "p_rate_1_taken" in r:
        print("  PE 0's loop took a p every (median us) / requests per batch it sent: "
              + "; ".join("{:.2f} / {:.1f}".format(*r[f"p_rate_{t}_taken"]) for t in (1, 8, 32)))
    if args.json:
        args.json.write_text(json.dumps(r, indent=1))


if __name__ == "__main__":
    main()
