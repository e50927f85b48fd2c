"""gateway/commands.py's ``/share`` listing: where each fact is read."""

from __future__ import annotations

from pathlib import Path

from gateway.chattitles import ChatTitles
from gateway.commands import UserCommands
from gateway.sessions import SessionStore
from memory import ManualClock, MemoryEngine, NewMemory, Provenance
from memory.service import SqliteMemory
from memory.sharing import share


async def test_the_listing_names_groups_and_where_a_groups_newer_fact_is_used_instead(
    engine: MemoryEngine, tmp_path: Path, clock: ManualClock
) -> None:
    """A group fact that replaced a shared one there (memory/consolidate.py)
    is what that group reads: the owner's listing says so, by the group's
    title; once that fact is erased it no longer does."""
    acme = await engine.add(NewMemory(owner="alice", content="Alice works at Acme",
                                      provenance=Provenance(channel="telegram", chat_id="7")))
    chess = await engine.add(NewMemory(owner="alice", content="Alice plays chess",
                                       provenance=Provenance(channel="telegram", chat_id="7")))
    await share(engine, "alice", [acme.id], None)
    await share(engine, "alice", [chess.id], ("telegram", "-1"))
    await share(engine, "alice", [chess.id], ("telegram", "-2"))
    globex = await engine.add(NewMemory(owner="alice", content="Alice works at Globex",
                                        provenance=Provenance(channel="telegram", chat_id="-1", group=True)))
    await engine.db.write("UPDATE memories SET provenance = ? WHERE id = ?", (Provenance(
        channel="telegram", chat_id="7", shared=("*",), replaced_in=(("telegram:-1", globex.id),)).to_json(), acme.id))
    async with await SessionStore.open(tmp_path / "g.db", clock) as store:
        titles = ChatTitles(store.db)
        await titles.seen("telegram", "-1", "Work crew", at="2026-03-01T12:00:00Z")
        cmds = UserCommands(SqliteMemory(engine), projects=engine, titles=titles)
        listing = await cmds.run("share", "", user="alice", private=True)
        assert f"- [m{chess.id} · Work crew, telegram:-2] Alice plays chess" in listing
        assert (f"- [m{acme.id} · every group where you ask; in Work crew m{globex.id} is used instead] "
                "Alice works at Acme") in listing
        await engine.delete(globex.id)
        listing = await cmds.run("share", "", user="alice", private=True)
        assert f"- [m{acme.id} · every group where you ask] Alice works at Acme" in listing
