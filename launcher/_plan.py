"""A pure plan of the job: what to start, with which environment. No processes."""

import dataclasses
import sys

#: NVLink multicast can take a multi-GPU host down; keep it off in every PE.
MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "NVSHMEM_DISABLE_NVLS": "1",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
}


@dataclasses.dataclass(frozen=True)
class Plan:
    npes: int
    command: tuple
    backend: str          # "cuda" or "sim"
    gpus: int
    use_mps: bool
    tag_output: bool
    timeout: float
    grace: float
    notes: tuple          # lines to print before the job starts
    base_env: tuple       # (name, value) pairs every PE gets

    def pe_env(self, pe, rendezvous_env):
        env = dict(self.base_env)
        env.update(rendezvous_env)
        env["SHMEM_RUN_PE"] = str(pe)
        return env


def make_plan(args, gpus, mps_control, environ):
    """Decide backend, GPU sharing and MPS from the arguments and the node."""
    backend = args.backend or "auto"
    notes = []
    if backend == "auto":
        backend = "cuda" if gpus > 0 else "sim"
        if backend == "sim":
            notes.append(f"shmem-run: no CUDA GPU found; running {args.npes} PE"
                         f"{'s' if args.npes != 1 else ''} on the CPU simulator")
    pes_per_gpu = -(-args.npes // gpus) if backend == "cuda" else 0
    shared = pes_per_gpu > 1
    user_mps = "CUDA_MPS_PIPE_DIRECTORY" in environ
    use_mps = shared and not args.no_mps and not user_mps and mps_control is not None
    if shared and not args.no_mps and not user_mps and mps_control is None:
        notes.append(
            f"shmem-run: warning: {pes_per_gpu} PEs share each GPU but "
            "nvidia-cuda-mps-control was not found; without MPS their kernels "
            "time-slice (a flag round trip takes milliseconds instead of "
            "microseconds) and kernels that wait on each other can deadlock")
    if args.module is not None:
        command = (sys.executable, "-m", args.module, *args.program)
    else:
        command = (sys.executable, *args.program)
    env = dict(environ)
    env.update(MULTICAST_OFF)
    env["NUMBA_SHMEM_BACKEND"] = backend
    env["SHMEM_RUN_NPES"] = str(args.npes)
    if backend == "sim":
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    else:
        env.pop("NUMBA_ENABLE_CUDASIM", None)
    return Plan(
        npes=args.npes,
        command=command,
        backend=backend,
        gpus=gpus,
        use_mps=use_mps,
        tag_output=args.tag_output,
        timeout=args.timeout,
        grace=args.grace,
        notes=tuple(notes),
        base_env=tuple(sorted(env.items())),
    )
