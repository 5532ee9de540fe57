"""PE 1 leaves while the others wait for it in a barrier: under MPI the job
must end at once on every node with PE 1's code, in one line naming the PE
and why.

    NUMBA_SHMEM_NODE_SIZE=1 mpiexec -n 3 python pe_dies.py [HOW]

HOW: ``raise`` (an uncaught exception, code 1; the default), ``sys.exit`` (3)
or ``SystemExit`` (``raise SystemExit(3)``).
"""

import sys
import time

import numba_shmem as shmem  # first: on a machine without a GPU it picks the simulator


def main():
    how = sys.argv[1] if len(sys.argv) > 1 else "raise"
    shmem.init()
    if shmem.my_pe() == 1:
        time.sleep(0.5)  # the others are in the barrier by now
        if how == "sys.exit":
            sys.exit(3)
        if how == "SystemExit":
            raise SystemExit(3)
        raise RuntimeError("PE 1 fails on purpose")
    shmem.barrier_all()
    print(f"PE {shmem.my_pe()}: the barrier returned", flush=True)


if __name__ == "__main__":
    main()
