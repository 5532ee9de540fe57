"""Every public function of numba_shmem called before init(): one line each,
``NAME ERROR-TYPE MESSAGE``. Arrays are numpy placeholders, everything else 0:
the runtime check must come before any argument is looked at."""

import inspect

import numpy as np

import numba_shmem as shmem
from numba_shmem import _device_api as api

BEFORE_INIT = {"init", "get_unique_id"}  # called before init() by design
ARRAYS = {"dest", "source", "sig", "ivar", "ivars", "arr", "status", "indices", "values"}


def placeholders(name, fn):
    if name in api.TABLE:
        params = api.TABLE[name][0].split()
    else:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind is p.POSITIONAL_OR_KEYWORD and p.default is p.empty]
    return [np.zeros(4) if p in ARRAYS else 0 for p in params]


def main():
    for name in sorted(shmem.__all__):
        fn = getattr(shmem, name)
        if name in BEFORE_INIT or not callable(fn) or isinstance(fn, type):
            continue
        try:
            fn(*placeholders(name, fn))
            print(name, "no error")
        except Exception as exc:  # noqa: BLE001  (the type is what is reported)
            print(name, type(exc).__name__, exc)


if __name__ == "__main__":
    main()
