"""PE 1 raises while the others wait for it in a barrier: under MPI the job
must end at once on every node, with one line naming the PE and why.

    NUMBA_SHMEM_NODE_SIZE=1 mpiexec -n 3 python pe_dies.py
"""

import time

import numba_shmem as shmem  # first: on a machine without a GPU it picks the simulator


def main():
    shmem.init()
    if shmem.my_pe() == 1:
        time.sleep(0.5)  # the others are in the barrier by now
        raise RuntimeError("PE 1 fails on purpose")
    shmem.barrier_all()
    print(f"PE {shmem.my_pe()}: the barrier returned", flush=True)


if __name__ == "__main__":
    main()
