"""Benchmark: is collective_launch's griddim=0 grid resident at once on every PE?

For 1, 2 and 4 PEs (sharing the GPU through MPS when there are more PEs than
GPUs), every block of every PE's grid waits up to 50 ms for the blocks of all
PEs to arrive; prints, per PE, how many of its blocks gave up and the fewest
arrivals any block saw (all PEs' blocks when all were resident), ten launches each, with 0 and
40 KiB of shared memory per block (8 and 5 blocks of 256 threads per SM).

    python benchmarks/residency.py [--pes 1 2 4]
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
    args = parser.parse_args()
    require_gpu("residency.py", "whether every PE's grid is resident at once")
    for sharedmem in (0, 40 << 10):
        for npes in args.pes:
            run = subprocess.run([sys.executable, "-m", "shmem_run", "-n", str(npes),
                                  str(HERE / "residency_pe.py"), str(sharedmem)],
                                 capture_output=True, text=True, timeout=300)
            if run.returncode != 0:
                raise SystemExit(f"{npes} PEs failed:\n{run.stdout}\n{run.stderr}")
            rows = sorted((json.loads(line) for line in run.stdout.splitlines()
                           if line.startswith("{")), key=lambda r: r["pe"])
            print(f"{npes} PE{'s' if npes > 1 else ''}, {sharedmem >> 10} KiB shared memory "
                  "per block:")
            for r in rows:
                short = [x for x in r["runs"] if x["gave_up"]]
                detail = "".join(f"; {x['gave_up']} gave up, fewest seen {x['fewest_seen']}"
                                 for x in short)
                print(f"  PE {r['pe']}: grid {r['grid']} of {r['total']}: all resident in "
                      f"{len(r['runs']) - len(short)} of {len(r['runs'])} launches{detail}")


if __name__ == "__main__":
    main()
