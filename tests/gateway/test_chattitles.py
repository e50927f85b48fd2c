"""gateway/chattitles.py: groups' titles as the gateway last saw them."""

from __future__ import annotations

from pathlib import Path

from gateway.chattitles import MAX_TITLE_CHARS, ChatTitles, group_name
from gateway.sessions import SessionStore
from memory import ManualClock


async def test_a_title_is_kept_as_last_seen_and_a_group_without_one_keeps_its_id(
    tmp_path: Path, clock: ManualClock
) -> None:
    async with await SessionStore.open(tmp_path / "g.db", clock) as store:
        titles = ChatTitles(store.db)
        await titles.seen("telegram", "-1", "Hiking   club\n", at="2026-03-01T12:00:00Z")
        await titles.seen("telegram", "-1", "Hiking club", at="2026-03-02T12:00:00Z")  # the same: not written
        await titles.seen("telegram", "-2", "x" * 500, at="2026-03-01T12:00:00Z")
        await titles.seen("telegram", "-3", "  ", at="2026-03-01T12:00:00Z")  # no title: nothing
        rows = await store.db.fetchall("SELECT chat_id, title, seen_at FROM chat_titles ORDER BY chat_id")
        assert [tuple(r) for r in rows] == [("-1", "Hiking club", "2026-03-01T12:00:00Z"),
                                            ("-2", "x" * MAX_TITLE_CHARS, "2026-03-01T12:00:00Z")]
        # Renamed: seen under the new title from then on, by another process's store too.
        await ChatTitles(store.db).seen("telegram", "-1", "Hikers", at="2026-03-03T12:00:00Z")
        names = await ChatTitles(store.db).names(["telegram:-1", "telegram:-3", "feishu:-1", "*"])
        assert names == {"telegram:-1": "Hikers"}
        assert [group_name(p, names) for p in ("telegram:-1", "telegram:-3")] == ["Hikers", "telegram:-3"]
