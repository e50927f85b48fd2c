"""Who a message's sender is, for memory purposes.

One person may talk to myclaw on Telegram and on Feishu; the identity map in
config (``memory.identities: {"alice": ["telegram:777", "feishu:ou_x"]}``)
lets both handles share one memory. Anyone not in the map is their own user,
named ``<channel>:<sender_id>``, so two strangers never share rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["IdentityMap"]


class IdentityMap:
    def __init__(self, identities: Mapping[str, Sequence[str]] | None = None) -> None:
        self._by_handle: dict[str, str] = {}
        for user, handles in (identities or {}).items():
            for h in handles:
                self._by_handle[h] = user

    def resolve(self, channel: str, sender_id: str) -> str:
        handle = f"{channel}:{sender_id}"
        return self._by_handle.get(handle, handle)

    def mapped(self) -> dict[str, str]:
        """Every handle named in the map -> the user it belongs to."""
        return dict(self._by_handle)

    def handles(self, user: str) -> list[str]:
        found = [h for h, u in self._by_handle.items() if u == user]
        return found or ([user] if ":" in user else [])
