"""Compile a kernel per device function with one argument of the wrong type
and print ``NAME message`` (no GPU needed)."""

import sys

from numba import cuda, types

import numba_shmem as shmem
from numba_shmem import _device_api as api

ARGS = {"dest": types.int64[::1], "source": types.int64[::1], "sig": types.uint64[::1],
        "ivar": types.int64[::1], "ivars": types.int64[::1], "status": types.int32[::1],
        "indices": types.int64[::1], "values": types.int64[::1]}


def compile_error(name, params, argtypes):
    namespace = {"shmem": shmem}
    exec(f"def kernel({', '.join(params)}):\n    shmem.{name}({', '.join(params)})\n",  # noqa: S102
         namespace)
    try:
        cuda.compile_ptx(namespace["kernel"], argtypes, cc=(9, 0))
    except Exception as exc:  # the typing error is the output
        return " ".join(str(exc).split())
    return "compiled"


for name, (params, _doc) in api.TABLE.items():
    params = params.split()
    if "pe" in params:
        argtypes = tuple(types.float64 if p == "pe" else ARGS.get(p, types.int64) for p in params)
        sys.stdout.write(f"{name} {compile_error(name, params, argtypes)}\n")
    if name in api.ATOMICS and name not in api.FLOAT_ATOMICS:
        argtypes = tuple(types.float32[::1] if p == "dest" else ARGS.get(p, types.int64)
                         for p in params)
        sys.stdout.write(f"{name}:dtype {compile_error(name, params, argtypes)}\n")
