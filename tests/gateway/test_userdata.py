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


async def test_forget_all_takes_what_a_handle_stored_before_it_was_mapped(
    engine: MemoryEngine, tmp_path: Path, clock: ManualClock
) -> None:
    """memory.identities maps telegram:777 to alice after telegram:777 had
    talked, and merge-identities was not run: /forget all from alice counts
    and erases those rows too, and nobody else's."""
    from memory import IdentityMap

    await engine.add(NewMemory(owner="telegram:777", content="my blood type is AB"))
    await engine.add(NewMemory(owner="alice", content="alice hikes"))
    await engine.add(NewMemory(owner="telegram:888", content="bob rows"))
    async with await SessionStore.open(tmp_path / "g.db", clock) as store:
        await store.append("telegram:777", channel="telegram", chat_id="777", role="user", content="hi",
                           owner="telegram:777")
        identities = IdentityMap({"alice": ["telegram:777", "feishu:ou_a"]})
        everything = UserData(SqliteMemory(engine), store, owner_of=identities.resolve, handles_of=identities.handles)
        kept = await everything.census("alice")
        assert (kept.memories, kept.messages) == (2, 1)
        gone = await everything.erase("alice")
        assert (gone.memories, gone.messages) == (2, 1)
        assert (await everything.census("alice")).empty
        assert await store.owned("telegram:777") == 0
    assert [m.owner for m in await engine.list_memories(status=None)] == ["telegram:888"]


async def test_an_export_holds_what_a_handle_stored_before_it_was_mapped(
    engine: MemoryEngine, tmp_path: Path, clock: ManualClock
) -> None:
    """Its rows' index (written under the handle's heading) and its history
    counted with hers; another person's handle, and a handle of hers that
    stored nothing, are not in it."""
    from memory import IdentityMap

    await engine.add(NewMemory(owner="telegram:777", content="my blood type is AB"))
    await engine.add(NewMemory(owner="alice", content="alice hikes"))
    await engine.add(NewMemory(owner="telegram:888", content="bob rows"))
    async with await SessionStore.open(tmp_path / "g.db", clock) as store:
        for owner in ("alice", "telegram:777", "telegram:888"):
            await store.append(owner, channel="telegram", chat_id="7", role="user", content="hi", owner=owner)
        identities = IdentityMap({"alice": ["telegram:777", "feishu:ou_a"], "bob": ["telegram:888"]})
        everything = UserData(SqliteMemory(engine), store, owner_of=identities.resolve, handles_of=identities.handles)
        export, index = await everything.export("alice")
    assert len(index.memory_ids) == 1 and export.history == 2
    [(handle, earlier)] = export.earlier
    assert handle == "telegram:777" and len(earlier.memory_ids) == 1
    assert [m.content async for m in SqliteMemory(engine).owner_rows(handle, earlier)] == ["my blood type is AB"]


async def test_an_export_names_the_groups_and_renamed_projects_of_a_handles_rows_too(
    engine: MemoryEngine, tmp_path: Path, clock: ManualClock
) -> None:
    """A fact telegram:777 shared with a group, and a project it renamed,
    before the mapping: the rows were in alice's /export (under the
    handle's heading), but the group was named by its id only and the
    rename not said, as both were read for alice's own rows alone."""
    from memory import IdentityMap

    await engine.add(NewMemory(owner="telegram:777", content="the hikers meet at 9", project="atlas",
                               provenance=Provenance(channel="telegram", chat_id="777", shared=("telegram:-5",))))
    await engine.set_project_alias("telegram:777", "atlas", "orion", source="user")
    await engine.add(NewMemory(owner="alice", content="alice hikes"))
    await engine.add(NewMemory(owner="telegram:888", content="bob rows",
                               provenance=Provenance(shared=("telegram:-6",))))
    async with await SessionStore.open(tmp_path / "g.db", clock) as store:
        titles = ChatTitles(store.db)
        await titles.seen("telegram", "-5", "Hikers", at="2026-03-03T12:00:00Z")
        await titles.seen("telegram", "-6", "Beekeepers", at="2026-03-03T12:00:00Z")
        identities = IdentityMap({"alice": ["telegram:777"], "bob": ["telegram:888"]})
        everything = UserData(SqliteMemory(engine), store, titles=titles, owner_of=identities.resolve,
                              handles_of=identities.handles)
        export, _ = await everything.export("alice")
    assert export.groups == {"telegram:-5": "Hikers"}
    assert export.projects == [("atlas", "orion")]
