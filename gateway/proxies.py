"""Who a request came from when a reverse proxy stands in front
(``gateway.trustedProxies``).

Only a peer in the trusted set may name the client, in ``X-Forwarded-For``,
and the scheme and host the client used, in ``X-Forwarded-Proto`` and
``X-Forwarded-Host`` (:func:`forwarded_value`: the right-most value, the one
that peer wrote).
The header is read from the right: each proxy appends the address it saw,
so the right-most entry not itself a trusted proxy is the client; what is
to its left was written by the client and may be anything. From any other
peer the header is ignored: anyone can send it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence

__all__ = ["Network", "client_address", "forwarded_value", "trusted_networks"]

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def trusted_networks(values: Iterable[str]) -> tuple[Network, ...]:
    """``"127.0.0.1"``, ``"::1"``, ``"10.0.0.0/8"``...; ValueError naming the bad one."""
    out: list[Network] = []
    for value in values:
        try:
            out.append(ipaddress.ip_network(value.strip(), strict=True))
        except ValueError as exc:
            raise ValueError(f"not an IP address or network: {value!r} ({exc})") from None
    return tuple(out)


def _trusted(address: str, networks: Sequence[Network]) -> bool | None:
    """True/False, or None when ``address`` is no IP address at all."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # a dual-stack socket reports ::ffff:127.0.0.1
    return any(ip in net for net in networks)


def client_address(peer: str | None, forwarded_for: Sequence[str], networks: Sequence[Network]) -> str | None:
    """The client's address: ``peer`` unless it is a trusted proxy that
    forwarded one. ``forwarded_for``: every ``X-Forwarded-For`` header, in order."""
    if peer is None or not networks or not _trusted(peer, networks):
        return peer
    hops = [h.strip() for value in forwarded_for for h in value.split(",")]
    hops = [h for h in hops if h]
    if not hops:
        return peer
    for hop in reversed(hops):
        trusted = _trusted(hop, networks)
        if trusted is None:
            # Our own proxy writes addresses only: this one came through
            # unchecked, so it tells nothing; the peer is all we know.
            return peer
        if not trusted:
            return hop
    return hops[0]  # every hop a proxy of ours: the request began on one


def forwarded_value(peer: str | None, values: Sequence[str], networks: Sequence[Network]) -> str | None:
    """What a trusted ``peer`` says in a one-value header (``X-Forwarded-Proto``,
    ``X-Forwarded-Host``), else None. Right-most: a proxy that appends
    rather than sets leaves the client's own value on the left."""
    if peer is None or not networks or not _trusted(peer, networks):
        return None
    hops = [h.strip() for value in values for h in value.split(",")]
    hops = [h for h in hops if h]
    return hops[-1] if hops else None
