"""Bad input to every public host function that takes symmetric arrays, on every
PE: one line per case, ``NAME BAD ERROR-TYPE MESSAGE``; then ``usable`` once a
put and a collective have worked after all of them.

    host_bad_input.py
"""

import numpy as np
from numba import cuda

import numba_shmem as shmem
from numba_shmem._stream._collectives import HOST_COLLECTIVES


def calls(good, bad, npes):
    """name -> a call with ``bad`` where the symmetric array goes."""
    host = np.zeros(4, np.int64)
    table = {"put": lambda pe=0: shmem.put(bad, host, pe),
             "get": lambda pe=0: shmem.get(host, bad, pe),
             "peer_array": lambda pe=0: shmem.peer_array(bad, pe),
             "free": lambda pe=0: shmem.free(bad)}
    for name in HOST_COLLECTIVES:
        root = (0,) if name == "broadcast" else ()
        table[name] = (lambda name=name, root=root, pe=0:
                       getattr(shmem, name)(shmem.TEAM_WORLD, bad, good, 1, *root))
    return table


def main():
    shmem.init()
    me, npes = shmem.my_pe(), shmem.n_pes()
    good = shmem.zeros(4 * npes, np.int64)
    other = shmem.zeros(4 * npes, np.int64)
    freed = shmem.zeros(4 * npes, np.int64)
    shmem.free(freed)  # allocate nothing after this: it would take freed's place
    plain = cuda.device_array(4 * npes, np.int64)
    for bad, arr in (("use_after_free", freed), ("not_symmetric", plain)):
        for name, call in sorted(calls(good, arr, npes).items()):
            try:
                call()
                print(name, bad, "no error")
            except Exception as exc:  # noqa: BLE001  (the type is what is reported)
                print(name, bad, type(exc).__name__, exc)
    for name in ("put", "get", "peer_array"):
        try:
            calls(good, good, npes)[name](pe=npes)
            print(name, "pe_out_of_range", "no error")
        except Exception as exc:  # noqa: BLE001
            print(name, "pe_out_of_range", type(exc).__name__, exc)
    for name, call in (("put", lambda: shmem.put(good, np.zeros(4 * npes + 1, np.int64), 0)),
                       ("get", lambda: shmem.get(np.zeros(4 * npes + 1, np.int64), good, 0)),
                       ("fcollect", lambda: shmem.fcollect(shmem.TEAM_WORLD, good, other, 5))):
        try:
            call()
            print(name, "size_mismatch", "no error")
        except Exception as exc:  # noqa: BLE001
            print(name, "size_mismatch", type(exc).__name__, exc)
    # the local side of a transfer: not an array, another dtype, a strided
    # device array; a strided part of a symmetric array
    strided_device = cuda.device_array(8 * npes, np.int64)[::2]
    for name, bad, call in (
            ("put", "list", lambda: shmem.put(good, [1, 2], 0)),
            ("put", "scalar", lambda: shmem.put(good, 3, 0)),
            ("get", "none", lambda: shmem.get(None, good, 0)),
            ("put", "dtype", lambda: shmem.put(good, np.ones(4, np.float64), 0)),
            ("get", "dtype", lambda: shmem.get(np.ones(4, np.int32), good, 0)),
            ("put", "strided_device", lambda: shmem.put(good, strided_device, 0)),
            ("get", "strided_symmetric", lambda: shmem.get(np.ones(2, np.int64), good[::2], 0)),
            ("fcollect", "strided_symmetric",
             lambda: shmem.fcollect(shmem.TEAM_WORLD, good[::2], other, 1)),
            ("broadcast", "none", lambda: shmem.broadcast(shmem.TEAM_WORLD, good, None, 1, 0))):
        try:
            call()
            print(name, bad, "no error")
        except Exception as exc:  # noqa: BLE001
            print(name, bad, type(exc).__name__, exc)
    # strided numpy arrays are filled and read as they are
    shmem.put(good, np.arange(8 * npes, dtype=np.int64)[::2] + 100 * me, me)
    shmem.barrier_all()
    columns = np.zeros((4 * npes, 3), np.int64)
    shmem.get(columns[:, 1], good, me)
    assert columns[:, 1].tolist() == [2 * i + 100 * me for i in range(4 * npes)], columns
    assert not columns[:, 0].any() and not columns[:, 2].any()
    shmem.barrier_all()
    print("strided", "numpy", "filled")
    # the job goes on
    shmem.put(good, np.full(4 * npes, me + 1, np.int64), (me + 1) % npes)
    shmem.barrier_all()
    assert good.copy_to_host()[0] == (me - 1) % npes + 1
    shmem.sum_reduce(shmem.TEAM_WORLD, other, good, 4)
    cuda.synchronize()
    assert other.copy_to_host()[0] == sum(range(1, npes + 1))
    print("usable")
    shmem.finalize()


if __name__ == "__main__":
    main()
