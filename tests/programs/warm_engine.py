"""Compile the compiled proxy's loop (``_transport/_engine.py``) once, so
that numba's cache on disk holds it: the PEs of the tests' jobs then load it,
instead of every PE of the first jobs compiling it at once (on two cores,
under the first tests' load, a job's PEs spent minutes there). Prints ``ok``.

    mpiexec -n 1 python warm_engine.py
"""

import numba
import numpy as np
from mpi4py import MPI

from numba_shmem._transport import _engine
from numba_shmem._transport._mpi_c import MPIC

comm = MPI.COMM_SELF.Dup()
state = _engine.state(MPIC(comm), 1, np.zeros(_engine.HOST_NBYTES, np.uint8),
                      np.zeros(8, np.uint8), np.zeros(1, np.int64), -1, -1)
_engine.serve.compile((numba.typeof(state),))  # (as CompiledProxy does)
print("ok")
