"""PEs started by ``torchrun``: a unique id (``_uid``) handed from rank 0 to
the others through torch.distributed's store.

torchrun numbers its workers in ``RANK``/``WORLD_SIZE`` and points them at a
store (``MASTER_ADDR``/``MASTER_PORT``). The store is the default process
group's when the script has made one, else the one ``env://`` rendezvous
gives (the agent's under torchrun; no process group is made). Rank 0 puts a
unique id in it; every PE then bootstraps from that id and runs on GPU
``LOCAL_RANK``.
"""

import datetime
import itertools

from .._errors import ShmemTimeoutError, ShmemUsageError
from ._uid import UidBootstrap, make

#: torchrun's variables: this worker's rank, the job's size, its node-local rank
ENV_RANK, ENV_SIZE, ENV_LOCAL_RANK = "RANK", "WORLD_SIZE", "LOCAL_RANK"
#: what marks a torchrun worker, beside RANK and WORLD_SIZE
ENV_MARKERS = ("TORCHELASTIC_RUN_ID", "MASTER_ADDR")
#: a store's wait when the wait time-out is off (0): long enough to be for ever
_FOREVER = datetime.timedelta(days=365)

_inits = itertools.count()  # keys stay distinct across init()s in one process


def under_torchrun(environ):
    return ENV_RANK in environ and ENV_SIZE in environ and any(
        name in environ for name in ENV_MARKERS)


def _number(environ, name):
    value = environ.get(name, "").strip()
    if not value.isdigit():
        raise ShmemUsageError(
            f"this process looks started by torchrun but {name}={environ.get(name)!r} is "
            "not a number; start the job with torchrun, or unset RANK and WORLD_SIZE")
    return int(value)


def _store(rank, nranks, timeout):
    """torch.distributed's store for this job."""
    try:
        import torch.distributed as dist
    except ImportError as exc:
        raise ShmemUsageError(
            f"this process was started by torchrun but torch.distributed cannot be imported "
            f"({exc}); numba-shmem bootstraps a torchrun job through torch.distributed's "
            "store: run the job in the environment that has torch") from None
    if not dist.is_available():
        raise ShmemUsageError(
            "this process was started by torchrun but this torch was built without "
            "torch.distributed; install a torch that has it")
    if dist.is_initialized():
        return dist.distributed_c10d._get_default_store()
    store, _rank, _size = next(dist.rendezvous("env://", rank, nranks, timeout=timeout))
    return store


def start(wait_timeout, node_size, environ):
    """A ``UidBootstrap`` for this torchrun worker; ``gpu_index`` is LOCAL_RANK."""
    rank, nranks = _number(environ, ENV_RANK), _number(environ, ENV_SIZE)
    timeout = datetime.timedelta(seconds=wait_timeout) if wait_timeout else _FOREVER
    store = _store(rank, nranks, timeout)
    # one key per restart of the job and per init() of this process
    key = (f"numba_shmem/uid/{environ.get('TORCHELASTIC_RUN_ID', '')}/"
           f"{environ.get('TORCHELASTIC_RESTART_COUNT', '0')}/{next(_inits)}")
    if rank == 0:
        uid = make()
        store.set(key, uid)
    else:
        try:
            uid = store.get(key).decode()
        except Exception as exc:  # noqa: BLE001  (the store's time-out has no type of its own)
            raise ShmemTimeoutError(
                f"PE {rank} waited for rank 0's unique id in torch.distributed's store "
                f"(key {key}) and got none ({type(exc).__name__}: {exc}); rank 0 must "
                "call shmem.init() too. Raise NUMBA_SHMEM_WAIT_TIMEOUT if it is only "
                "slow") from None
    # (the store stays until every PE has connected with the id: the bootstrap's
    # first collective)
    bootstrap = UidBootstrap(wait_timeout, uid, rank, nranks, node_size, name="torchrun")
    if ENV_LOCAL_RANK in environ:
        bootstrap.gpu_index = _number(environ, ENV_LOCAL_RANK)
    return bootstrap
