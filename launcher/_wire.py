"""Framing for the socket messages of a job's rendezvous (``_rendezvous``) and
of the PEs of a node (``numba_shmem/_bootstrap/_local.py``).

A message is a fixed header (two lengths), a small JSON object and an opaque
payload; file descriptors ride along with the header through SCM_RIGHTS. The
launcher and the library both import it, the launcher nothing of the library
(``shmem-run`` starts without importing numba).
"""

import json
import socket
import struct
import tempfile

_HEADER = struct.Struct("!II")
#: The most descriptors one message may carry.
MAX_FDS = 1024
#: What a PE's bye says it did: the two ways of leaving that the others'
#: finalize() need not wait for (other reasons are free text).
FINALIZED = "called shmem.finalize()"
EXITED = "exited"
#: A Unix socket's path must fit in 108 bytes: the private directories that hold
#: sockets (a few names deep) go in TMPDIR only when its path is this short.
MAX_SOCKET_PARENT = 40


class ConnectionClosed(EOFError):
    """The other end closed the connection."""


def socket_parent():
    """Where a private directory for Unix sockets goes: TMPDIR (or tempfile's
    default) when its path is short, else /tmp."""
    parent = tempfile.gettempdir()
    return parent if len(parent) <= MAX_SOCKET_PARENT else "/tmp"


def send(sock, meta, payload=b"", fds=()):
    """Send one message: ``meta`` (a JSON-able dict), ``payload`` bytes and ``fds``."""
    body = json.dumps(meta).encode()
    header = _HEADER.pack(len(body), len(payload))
    if fds:
        socket.send_fds(sock, [header], list(fds))
    else:
        sock.sendall(header)
    sock.sendall(body)
    if payload:
        sock.sendall(payload)


def _recv_exact(sock, count):
    chunks = []
    while count:
        chunk = sock.recv(min(count, 1 << 20))
        if not chunk:
            raise ConnectionClosed("connection closed in the middle of a message")
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)


def recv(sock):
    """Receive one message; returns ``(meta, payload, fds)``."""
    data, fds, _flags, _addr = socket.recv_fds(sock, _HEADER.size, MAX_FDS)
    if not data:
        raise ConnectionClosed("connection closed")
    if len(data) < _HEADER.size:
        data += _recv_exact(sock, _HEADER.size - len(data))
    body_len, payload_len = _HEADER.unpack(data)
    meta = json.loads(_recv_exact(sock, body_len))
    payload = _recv_exact(sock, payload_len) if payload_len else b""
    return meta, payload, fds


def peer_credentials(sock):
    """``(pid, uid)`` of the process at the other end of a Unix socket, as the
    kernel recorded them when it connected."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", creds)
    return pid, uid


def pack_list(items):
    """Join a list of bytes into one payload that ``unpack_list`` splits again."""
    return struct.pack(f"!I{len(items)}I", len(items), *map(len, items)) + b"".join(items)


def unpack_list(payload):
    (count,) = struct.unpack_from("!I", payload)
    sizes = struct.unpack_from(f"!{count}I", payload, 4)
    items, offset = [], 4 + 4 * count
    for size in sizes:
        items.append(payload[offset:offset + size])
        offset += size
    return items
