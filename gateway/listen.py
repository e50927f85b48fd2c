"""Why the gateway cannot listen on ``gateway.host:gateway.port``, in the
operator's terms, for ``myclaw gateway`` (a failed start) and ``myclaw
doctor`` (a trial bind, before the start)."""

from __future__ import annotations

import errno
import socket

__all__ = ["bind_error", "cannot_listen"]


def cannot_listen(host: str, exc: OSError) -> tuple[str, str]:
    """(what is wrong, what to do) for a failed bind on ``host``."""
    if exc.errno == errno.EADDRINUSE:
        return "the port is taken", "change gateway.port, or stop what uses it (another myclaw gateway?)"
    if exc.errno == errno.EADDRNOTAVAIL:
        return (f"{host} is not an address of this machine",
                "set gateway.host to one of its addresses (127.0.0.1, or 0.0.0.0 for all)")
    if exc.errno == errno.EACCES:
        return "not allowed to use this port", "use a port above 1023, or give this account the right to bind it"
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve {host!r} ({exc.strerror})", "set gateway.host to an address or a name this machine knows"
    return str(exc.strerror or exc), "check gateway.host and gateway.port"


def bind_error(host: str, port: int) -> OSError | None:
    """Bind ``host:port`` for an instant, as the gateway's server would
    (every address the name resolves to, ``SO_REUSEADDR`` as asyncio sets
    it on POSIX), and let go: the error a start would meet, or None."""
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        return exc
    for family, kind, proto, _name, addr in infos:
        try:
            with socket.socket(family, kind, proto) as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)  # as asyncio does
                s.bind(addr)
        except OSError as exc:
            return exc
    return None
