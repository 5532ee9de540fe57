"""Benchmark: the ways a proxy can apply a request from another node to a GPU
whose kernel waits for it, as round trips: the copy engine, a one-thread
kernel, a stream memory operation (each from a context of the proxy's own and
from the application's), and a resident kernel polling mapped host memory
(no CUDA call per request). Run twice: one process alone on the GPU, as a PE
with a GPU of its own (no MPS), and as a client of an MPS daemon, as PEs that
share a GPU.

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
    done = subprocess.run([sys.executable, str(HERE / "target_paths_pe.py"), str(rounds)],
                          capture_output=True, text=True, timeout=900, env=env)
    if done.returncode != 0:
        raise SystemExit(f"benchmark failed:\n{done.stdout}\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


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
    for k, row in enumerate(alone["rows"]):
        line = f"{row['way']:58} {row['context']:>14}"
        for key in setups:
            theirs = results[key]["rows"][k]
            low, mid, high = theirs["round_trip_us"]
            line += f" {mid:>12.2f} ({low:.2f}-{high:.2f})".rjust(30) + \
                f" {theirs['issue_us'][1]:>7.2f}"
        print(line)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
