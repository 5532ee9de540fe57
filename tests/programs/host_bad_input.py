"""Bad input to every public host function that takes symmetric arrays, on every
PE: one line per case, ``NAME BAD ERROR-TYPE MESSAGE``; then ``usable`` once a
put and a collective have worked after all of them.

    host_bad_input.py
"""

import numpy as np
from numba import cuda

import numba_shmem as shmem
from numba_shmem._host_collectives import HOST_COLLECTIVES


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
