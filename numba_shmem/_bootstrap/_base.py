"""What every bootstrap provides: ranks, a byte allgather and descriptor exchange."""

import threading
import time

from shmem_run import _wire

from .._errors import ShmemBootstrapError, ShmemTimeoutError


class Bootstrap:
    """Collective plumbing among the PEs of one job.

    ``rank``/``size`` number the PEs of the job; ``local_peers`` lists, in
    node-local order, the ranks that share this node (and so can map each
    other's memory); ``local_rank`` is this PE's index in it.
    """

    name = "?"
    rank = 0
    size = 1
    local_peers = (0,)
    job_id = ""
    #: the GPU this PE runs on, where its launcher says (else its local rank's)
    gpu_index = None

    def __init__(self, wait_timeout):
        self.wait_timeout = wait_timeout
        # The host API may be called from several threads: one collective at a
        # time per PE goes to the other PEs, and its reply comes back to it.
        self._serial = threading.RLock()

    @property
    def local_rank(self):
        return self.local_peers.index(self.rank)

    @property
    def local_size(self):
        return len(self.local_peers)

    def serial(self):
        """The lock a host call holds across all of its collectives, so that
        another thread's call does not come between its steps (a re-entrant
        lock: ``with bootstrap.serial():``)."""
        return self._serial

    def allgather(self, data, what, members=None):
        """Collective over ``members`` (a sorted list of PEs; None: every PE).
        Return each member's ``data`` (bytes), in the order of ``members``.
        Threads of one PE take turns."""
        with self._serial:
            return self._allgather(bytes(data), what, members)

    def _allgather(self, data, what, members):
        raise NotImplementedError

    def barrier(self, what, members=None):
        """Collective over ``members``. Return once every member has called it."""
        self.allgather(b"", what, members)

    def exchange_fds(self, fds, what):
        """Collective over the node. Return each local peer's descriptors, in
        local order; this PE's own entry is ``fds`` itself, the others are new
        descriptors that the caller owns."""
        with self._serial:
            return self._exchange_fds(list(fds), what)

    def _exchange_fds(self, fds, what):
        raise NotImplementedError

    def close(self, why=_wire.FINALIZED):
        """Leave the job (``why`` says how, for the other PEs' errors) and
        release the bootstrap's sockets and communicators. Runs once."""
        if not getattr(self, "_left", False):
            self._left = True
            self._leave(why)

    def _leave(self, why):
        pass

    def timeout_error(self, what, waited):
        return ShmemTimeoutError(
            f"PE {self.rank} waited {waited:.0f} s in {what} for the other PEs "
            f"({self.name} bootstrap); some PE is stuck before it or called a "
            "different collective. Raise NUMBA_SHMEM_WAIT_TIMEOUT if the job is "
            "only slow (0 waits forever).")

    def poll(self, ready, what):
        """Spin on ``ready()`` with a short back-off until it is true or the
        wait timeout passes."""
        start = time.monotonic()
        pause = 1e-5
        while not ready():
            waited = time.monotonic() - start
            if self.wait_timeout and waited > self.wait_timeout:
                raise self.timeout_error(what, waited)
            time.sleep(pause)
            pause = min(pause * 2, 1e-3)


def check_same(what, values, describe):
    """Raise on every PE when the PEs passed different ``values`` to a collective."""
    first = values[0]
    for pe, value in enumerate(values):
        if value != first:
            raise ShmemBootstrapError(
                f"{what}: PE 0 {describe(first)} but PE {pe} {describe(value)}")
