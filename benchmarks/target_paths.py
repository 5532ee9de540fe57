"""Benchmark: the ways a proxy can apply a request from another node to a GPU
whose kernel waits for it, as round trips: the copy engine, a one-thread
kernel, stream memory operations (a write, an atomic add; each from a context
of the proxy's own, from the application's and from a green context), and a
resident kernel polling mapped host memory (no CUDA call per request); then
whether each way from each context gets through while the application's thread
loads a module and its kernel waits for them. Run twice: one process alone on
the GPU, as a PE with a GPU of its own (no MPS), and as a client of an MPS
daemon, as PEs that share a GPU.

    python benchmarks/target_paths.py [--rounds 2000] [--json out.json]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _machine import mps_daemon, require_gpu

HERE = Path(__file__).resolve().parent


def run(rounds, env=None):
    """One process's JSON: its rows and (unless it hung) its module-load checks."""
    command = [sys.executable, str(HERE / "target_paths_pe.py"), str(rounds)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
        stdout, stderr = done.stdout, done.stderr
    except subprocess.TimeoutExpired as hung:  # (what it printed before still counts)
        stdout, stderr = hung.stdout or "", "it ran past 300 s"
        if isinstance(stdout, bytes):
            stdout = stdout.decode()
    lines = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise SystemExit(f"benchmark failed:\n{stdout}\n{stderr}")
    result = lines[0]
    result["hazards"] = lines[1]["hazards"] if len(lines) > 1 else None
    if result["hazards"] is None:  # why the module-load checks did not finish
        result["unfinished"] = (stderr.strip().splitlines() or ["no error printed"])[-1]
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    require_gpu("target_paths.py", "how fast a request from a proxy reaches a kernel")
    results = {"alone": run(args.rounds)}
    with tempfile.TemporaryDirectory() as jobdir:
        daemon = mps_daemon(jobdir)
        if daemon is not None:
            try:
                results["mps"] = run(args.rounds, {**os.environ, **daemon.env})
            finally:
                daemon.stop()
    alone = results["alone"]
    print(f"{alone['device']}: a kernel waits for a flag in GPU memory mapped as the heap is and "
          "echoes it into mapped host memory; the host delivers each value one way and waits "
          f"for its echo. us per round trip (issue: the delivering calls alone), median "
          f"(10th-90th percentile) of {args.rounds}")
    setups = [key for key in ("alone", "mps") if key in results]
    header = f"{'way':58} {'context':>14}"
    for key in setups:
        label = {"alone": "alone", "mps": "under MPS"}[key]
        header += f" {label + ': round trip':>29} {'issue':>7}"
    print(header)
    for row in alone["rows"]:
        line = f"{row['way']:58} {row['context']:>14}"
        for key in setups:
            theirs = next((r for r in results[key]["rows"] if r["way"] == row["way"]
                           and r["context"] == row["context"]), None)
            if theirs is None:
                line += f"{'-':>30} {'-':>7}"
                continue
            low, mid, high = theirs["round_trip_us"]
            line += f" {mid:>12.2f} ({low:.2f}-{high:.2f})".rjust(30) + \
                f" {theirs['issue_us'][1]:>7.2f}"
        print(line)
    for key in setups:
        hazards = results[key]["hazards"]
        print(f"{'alone' if key == 'alone' else 'under MPS'}: while the application's thread "
              "loads a module and its kernel waits for the request:")
        if hazards is None:
            print(f"  the checks did not finish ({results[key]['unfinished']}): no figures")
            continue
        for h in hazards:
            print(f"  {h['way']:54} {h['context']:>14}: "
                  + (f"got through in {h['ms']:.1f} ms" if h["got_through"] else
                     "blocked (the kernel had to give up)")
                  + ("" if h["load_waited_for_the_kernel"] else
                     " (the load did not wait for the kernel)"))
    for key in setups:
        for note in results[key]["notes"]:
            print(f"{key}: {note}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
