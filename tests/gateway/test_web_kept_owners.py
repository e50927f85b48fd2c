"""The memory page's list of users the gateway keeps rows of beside memory
(gateway/web/_kept_owners.py): gateway.db is read once a TTL, not on every
render; a user written meanwhile is listed once it has passed."""

from __future__ import annotations

from pathlib import Path

from gateway.sessions import SessionStore
from gateway.web._kept_owners import KeptOwners
from memory import ManualClock


async def test_the_history_owners_are_read_once_a_ttl(tmp_path: Path, clock: ManualClock) -> None:
    now = [0.0]
    async with await SessionStore.open(tmp_path / "gateway.db", clock, window=4) as store:
        await store.append("telegram:1", channel="telegram", chat_id="1", role="user", content="hi", owner="alice")
        kept = KeptOwners(store.owners, ttl=30, clock=lambda: now[0])
        assert await kept.get() == ["alice"]
        await store.append("telegram:2", channel="telegram", chat_id="2", role="user", content="hi", owner="bob")
        now[0] = 29.0
        assert await kept.get() == ["alice"] and kept.reads == 1  # within the TTL: not read again
        now[0] = 30.0
        assert await kept.get() == ["alice", "bob"] and kept.reads == 2
