"""``shmem-run`` command line: parse, plan, run (torchrun's shape)."""

import argparse
import math
import os
import sys

from . import _gpus

#: the library's own variable for the backend, read here when --backend is not given
BACKEND_VARIABLE = "NUMBA_SHMEM_BACKEND"
BACKENDS = ("auto", "cuda", "sim")
NODE_SIZE_VARIABLE = "NUMBA_SHMEM_NODE_SIZE"
from ._plan import make_plan
from ._run import run


def build_parser():
    parser = argparse.ArgumentParser(
        prog="shmem-run",
        description="Start N PEs of a numba-shmem program on this node.",
        usage="shmem-run [-n N] [options] (script.py | -m module) [args ...]")
    parser.add_argument("-n", "--npes", type=int, default=1, metavar="N",
                        help="number of PEs to start (default 1)")
    parser.add_argument("--backend", choices=BACKENDS, default=None,
                        help="cuda, sim (the CPU simulator), or auto: cuda where a GPU is "
                             f"visible, else sim (default: ${BACKEND_VARIABLE}, else auto)")
    parser.add_argument("--tag-output", action="store_true",
                        help="prefix every line a PE prints with [PE n]")
    parser.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                        help="stop the whole job after this many seconds (exit 124)")
    parser.add_argument("--grace", type=float, default=3.0, metavar="SECONDS",
                        help="time PEs get to exit after SIGTERM before SIGKILL (default 3)")
    parser.add_argument("--no-mps", action="store_true",
                        help="do not start an MPS daemon when PEs share a GPU")
    parser.add_argument("-m", dest="module", metavar="MODULE",
                        help="run a library module as the program, like python -m")
    parser.add_argument("program", nargs="*",
                        help="the script and its arguments (or the module's arguments)")
    return parser


_TAKES_VALUE = {"-n", "--npes", "--backend", "--timeout", "--grace"}


def parse_args(parser, argv):
    """Split at the program: everything after the script (or after ``-m MODULE``)
    belongs to the program, even where it looks like one of our options."""
    index = 0
    while index < len(argv):
        token = argv[index]
        if token == "-m" and index + 1 < len(argv):
            args = parser.parse_args(argv[:index])
            args.module, args.program = argv[index + 1], argv[index + 2:]
            return args
        if not token.startswith("-"):
            break
        index += 2 if token in _TAKES_VALUE else 1
    args = parser.parse_args(argv[:index])
    args.program = argv[index:]
    return args


def main(argv=None):
    parser = build_parser()
    args = parse_args(parser, sys.argv[1:] if argv is None else argv)
    if args.module is None and not args.program:
        parser.error("name a script to run, or -m MODULE")
    if args.npes < 1:
        parser.error(f"-n/--npes must be at least 1, got {args.npes}")
    if args.timeout is not None and not 0 < args.timeout < math.inf:
        parser.error(f"--timeout must be a positive number of seconds, got {args.timeout}")
    if not 0 <= args.grace < math.inf:
        parser.error(f"--grace must be a number of seconds >= 0, got {args.grace}")
    backend_from = "--backend"
    if args.backend is None:
        args.backend = os.environ.get(BACKEND_VARIABLE, "auto").strip().lower() or "auto"
        backend_from = f"{BACKEND_VARIABLE}={os.environ.get(BACKEND_VARIABLE)}"
        if args.backend not in BACKENDS:
            parser.error(f"{BACKEND_VARIABLE}={os.environ[BACKEND_VARIABLE]!r} is not valid: "
                         f"expected {' or '.join(BACKENDS)}")
    if os.environ.get(NODE_SIZE_VARIABLE, "0").strip() not in ("", "0"):
        parser.error(f"{NODE_SIZE_VARIABLE}={os.environ[NODE_SIZE_VARIABLE]} emulates nodes, "
                     "but shmem-run starts the PEs of one node; launch with mpirun -n N (or "
                     f"srun) to emulate nodes, or unset {NODE_SIZE_VARIABLE}")
    if args.module is None and not os.path.exists(args.program[0]):
        parser.error(f"script {args.program[0]!r} does not exist")
    gpus = _gpus.count() if args.backend != "sim" else 0
    if args.backend == "cuda" and gpus == 0:
        parser.error(f"{backend_from} asks for the GPU but no CUDA GPU is visible here; use "
                     "--backend sim or auto")
    plan = make_plan(args, gpus=gpus, mps_control=_gpus.mps_control(), environ=os.environ)
    return run(plan)
