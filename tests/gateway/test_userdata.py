"""gateway/userdata.py: what a user's export starts from."""

from __future__ import annotations

from pathlib import Path

from gateway.chattitles import ChatTitles
from gateway.sessions import SessionStore
from gateway.userdata import UserData
from memory import ManualClock, MemoryEngine, NewMemory, Provenance
from memory.service import SqliteMemory
from memory.sharing import share


async def test_an_export_knows_the_titles_of_the_groups_the_user_shared_with(
    engine: MemoryEngine, tmp_path: Path, clock: ManualClock
) -> None:
    """Those groups alone: the titles of other groups are not the user's."""
    m = await engine.add(NewMemory(owner="alice", content="alice hikes", provenance=Provenance(channel="telegram",
                                                                                               chat_id="7")))
    old = await engine.add(NewMemory(owner="alice", content="alice hiked", provenance=Provenance(shared=("telegram:-3",))))
    await engine.set_status(old.id, "superseded", superseded_by=m.id)
    await share(engine, "alice", [m.id], ("telegram", "-1"))
    await engine.add(NewMemory(owner="bob", content="bob rows", provenance=Provenance(shared=("telegram:-2",))))
    async with await SessionStore.open(tmp_path / "g.db", clock) as store:
        titles = ChatTitles(store.db)
        for chat, title in (("-1", "Hiking club"), ("-2", "Rowing club"), ("-3", "Old hikers")):
            await titles.seen("telegram", chat, title, at="2026-03-01T12:00:00Z")
        export, _ = await UserData(SqliteMemory(engine), store, titles=titles).export("alice")
    assert dict(export.groups) == {"telegram:-1": "Hiking club", "telegram:-3": "Old hikers"}
