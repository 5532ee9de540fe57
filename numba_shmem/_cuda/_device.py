"""The device API on the GPU: typing and lowering of ``_device_api``'s names.

Element operations and atomics are lowered straight to inline PTX. Transfers,
waits, barriers and collectives are written in Python (generated source) and
compiled inline into the calling kernel with ``context.compile_internal``; the
primitives they call (``_addr``, ``_remote``, ``_copy16``, ...) are intrinsics
over ``_ptx``. Importing this module registers every name, each part from its
module: ``_copies`` (transfers, element operations, signals, fence, quiet),
``_waits``, ``_atomics``, ``_syncs`` (barriers), ``_collectives``; ``_far``
posts requests toward other nodes into the proxy's ring, and ``_source`` holds
what they share.
"""

from . import _atomics, _collectives, _copies, _syncs, _waits  # noqa: F401  (registration)
