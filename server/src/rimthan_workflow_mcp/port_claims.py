"""Linux: which rimthan-mcp servers hold a TCP port while bound but not yet listening.

``bind_socket`` binds with ``SO_REUSEADDR``, which on Linux also lets a second socket bind an address whose
first socket is bound but not yet listening (a follower pulling, a server verifying): the second would be let
through until one of the two listens, the other then failing after its pulls. So each server holds an abstract
Unix socket (one namespace per network namespace, as TCP ports are) named after the address it bound, and is
refused at bind when a claim it overlaps is held: the same address, or any address of the port a wildcard covers
(``0.0.0.0`` every IPv4 address, ``::`` every IPv6 address and, dual-stack, every IPv4 one too). Two different
addresses (``127.0.0.1`` and ``10.0.0.5``) may share a port, as TCP lets them.

The held claims are read from ``/proc/net/unix`` under a per-port lock (itself an abstract socket, held for the
check only), so of two servers starting together exactly one is refused. Where ``/proc/net/unix`` cannot be read,
only the same address is refused.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import time
from pathlib import Path

_PREFIX = "rimthan-mcp http "
_LOCK_TRIES = 500  # 10 ms apart: the lock is held for one read of /proc/net/unix
_UNIX_TABLE = Path("/proc/net/unix")
_CLAIMS: list[socket.socket] = []  # held for the life of the process; the kernel drops them as it exits

_Ip = ipaddress.IPv4Address | ipaddress.IPv6Address

IN_USE = "Address already in use (by another server starting there)"


def claim(address: str, port: int) -> None:
    """Hold the claim of ``address``:``port`` (as ``getsockname`` gives it); EADDRINUSE if one it overlaps is held."""
    lock = _lock(port)
    try:
        if any(_overlap(address, held) for held in _held(port)):
            raise OSError(errno.EADDRINUSE, IN_USE)
        mine = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            mine.bind(f"\0{_PREFIX}{address} {port}")
        except OSError as exc:
            mine.close()
            raise OSError(errno.EADDRINUSE, IN_USE) if exc.errno == errno.EADDRINUSE else exc from None
        _CLAIMS.append(mine)
    finally:
        lock.close()


def _lock(port: int) -> socket.socket:
    lock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    for _ in range(_LOCK_TRIES):
        try:
            lock.bind(f"\0{_PREFIX}lock {port}")
            return lock
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                lock.close()
                raise
        time.sleep(0.01)
    lock.close()
    raise OSError(errno.EADDRINUSE, IN_USE)  # another process keeps the lock: fail closed


def _held(port: int) -> list[str]:
    """The addresses claimed on ``port`` (none known when the table cannot be read: the bind of the claim decides)."""
    try:
        table = _UNIX_TABLE.read_text(errors="replace").splitlines()
    except OSError:
        return []
    suffix = f" {port}"
    held = []
    for line in table[1:]:
        fields = line.split(maxsplit=7)
        name = fields[7] if len(fields) == 8 else ""
        if name.startswith(f"@{_PREFIX}") and name.endswith(suffix) and not name.startswith(f"@{_PREFIX}lock "):
            held.append(name[len(_PREFIX) + 1 : -len(suffix)])
    return held


def _overlap(mine: str, held: str) -> bool:
    if mine == held:
        return True
    try:
        a, b = _plain(mine), _plain(held)
    except ValueError:  # not an address this module wrote: only the same name overlaps
        return False
    return a == b or _covers(a, b) or _covers(b, a)


def _plain(address: str) -> _Ip:
    """The address, an IPv4-mapped IPv6 one (``::ffff:127.0.0.1``) as the IPv4 address it is."""
    ip = ipaddress.ip_address(address)
    return ip.ipv4_mapped or ip if isinstance(ip, ipaddress.IPv6Address) else ip


def _covers(wide: _Ip, other: _Ip) -> bool:
    """A wildcard covers every address of its family; ``::`` IPv4 ones too (dual-stack unless bindv6only)."""
    return wide.is_unspecified and (wide.version == other.version or wide.version == 6)
