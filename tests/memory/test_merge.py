from __future__ import annotations

import sqlite3
from pathlib import Path

from memory import ManualClock, MemoryEngine, NewMemory, Status
from memory.backend import Turn
from memory.engine import owner_key
from memory.merge import OWNED_TABLES, move_owner, survey
from memory.retrieval import Retriever
from memory.schema import buffer_path
from memory.service import SqliteMemory

HANDLE, USER, STRANGER = "telegram:777", "alice", "telegram:999"


def turn(owner: str, text: str, message_id: str = "") -> Turn:
    return Turn(owner=owner, channel="telegram", chat_id="777", role="user", content=text, message_id=message_id)


async def seed(engine: MemoryEngine) -> dict[str, int]:
    """The handle's rows from before it was mapped, alice's since, and a stranger's."""
    ids = {
        "boat": (await engine.add(NewMemory(owner=HANDLE, content="Alice keeps her sailboat Nimbus at Qingdao"))).id,
        "dup_old": (await engine.add(NewMemory(owner=HANDLE, content="Alice drinks oolong tea", importance=0.9))).id,
        "dup_new": (await engine.add(NewMemory(owner=USER, content="alice drinks  OOLONG tea", importance=0.4))).id,
        "t1_old": (await engine.add(NewMemory(owner=HANDLE, tier=1, content="Alice is a marine biologist"))).id,
        "t1_new": (await engine.add(NewMemory(owner=USER, tier=1, content="Alice is a marine biologist"))).id,
        "t1_other": (await engine.add(NewMemory(owner=HANDLE, tier=1, content="Alice speaks Norwegian"))).id,
        "stranger": (await engine.add(NewMemory(owner=STRANGER, content="Bob keeps his sailboat at Xiamen"))).id,
    }
    ids["event"] = (await engine.add_event(HANDLE, "2026-02-20", "talked about sailing the Nimbus")).id
    await engine.add_event(STRANGER, "2026-02-20", "bob's sailing day")
    backend = SqliteMemory(engine)
    await backend.buffer([turn(HANDLE, "the mast needs a new halyard", "m1"), turn(HANDLE, "same line twice", "m2")])
    await backend.buffer([turn(USER, "same line twice", "m2"), turn(STRANGER, "bob's line", "m3")])
    await engine.db.write(
        "INSERT INTO memory_vectors (memory_id, owner, model, content_hash, vector) VALUES (?, ?, 'm', 'h', x'00')",
        (ids["boat"], HANDLE),
    )
    await engine.db.write(
        "INSERT INTO memory_log (at, job, owner, action) VALUES ('2026-02-20', 'extraction', ?, 'add')", (HANDLE,)
    )
    # Project aliases: the handle's move, except one the user has already.
    await engine.set_project_alias(HANDLE, "nimbus", "cirrus", source="extraction")
    await engine.set_project_alias(HANDLE, "atlas", "orion", source="extraction")
    await engine.set_project_alias(USER, "atlas", "nova", source="manual")
    return ids


async def owners(engine: MemoryEngine, table: str) -> list[str]:
    return sorted(r[0] for r in await engine.db.fetchall(f"SELECT owner FROM {table}"))


async def test_every_table_with_an_owner_is_moved(engine: MemoryEngine) -> None:
    """A table added later with an owner column must be added to the move."""
    found = set()
    for path in (engine.db.path, buffer_path(engine.db.path)):
        conn = sqlite3.connect(path)
        try:
            for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
                if "owner" in {r[1] for r in conn.execute(f"PRAGMA table_info('{name}')")}:
                    found.add(name)
        finally:
            conn.close()
    assert found == set(OWNED_TABLES)


async def test_the_handles_rows_move_to_the_user_and_recall_finds_them(engine: MemoryEngine) -> None:
    ids = await seed(engine)
    assert await Retriever(engine).retrieve(USER, "where is my sailboat?") == []  # stranded

    planned = await survey(engine, HANDLE, USER)
    moved = await move_owner(engine, HANDLE, USER, job="cli")
    assert moved == planned == {
        "memories": 4, "duplicates": 2, "events": 1, "vectors": 1, "log entries": 1, "project aliases": 2,
        "buffered": 2, "buffered duplicates": 1,
    }  # fmt: skip
    assert await engine.project_aliases(USER) == {"atlas": "nova", "nimbus": "cirrus"}

    hits = await Retriever(engine).retrieve(USER, "where is my sailboat?")
    assert hits[0].id == ids["boat"]
    assert ids["stranger"] not in [h.id for h in hits]
    assert await Retriever(engine).retrieve(HANDLE, "where is my sailboat?") == []
    events = await engine.events(USER)
    assert [e.id for e in events] == [ids["event"]]
    fts = await engine.db.fetchall("SELECT owner FROM events_fts WHERE rowid = ?", (ids["event"],))
    assert [r[0] for r in fts] == [owner_key(USER)]

    for table in OWNED_TABLES:
        if table.endswith("_fts"):
            continue
        assert HANDLE not in await owners(engine, table), table
    assert await owners(engine, "extraction_buffer") == [USER, USER, STRANGER]
    assert await owners(engine, "memories") == [USER] * 6 + [STRANGER]


async def test_a_memory_the_user_already_has_is_kept_once(engine: MemoryEngine) -> None:
    ids = await seed(engine)
    await move_owner(engine, HANDLE, USER, job="cli")
    dup_old, dup_new = await engine.get(ids["dup_old"]), await engine.get(ids["dup_new"])
    assert dup_old is not None and dup_new is not None
    # The user's row stays (the one consolidation's find_same reinforces), with the higher importance.
    assert (dup_old.status, dup_old.superseded_by) == (Status.SUPERSEDED, dup_new.id)
    assert (dup_new.status, dup_new.importance) == (Status.ACTIVE, 0.9)
    assert (await engine.find_same(USER, "Alice drinks oolong tea")).id == dup_new.id  # type: ignore[union-attr]
    # Tier 1: the same entry once; a different one is kept for the weekly refresh to judge.
    profile = [m.id for m in await engine.profile(USER, include_global=False)]
    assert sorted(profile) == sorted([ids["t1_new"], ids["t1_other"]])
    indexed = {r[0] for r in await engine.db.fetchall("SELECT rowid FROM memories_fts")}
    assert ids["dup_old"] not in indexed and ids["t1_old"] not in indexed
    log = await engine.db.fetchall("SELECT owner, action, memory_id FROM memory_log WHERE job = 'cli' ORDER BY id")
    assert [tuple(r) for r in log] == [
        (USER, "supersede", ids["dup_old"]), (USER, "supersede", ids["t1_old"]), (USER, "merge_identity", None),
    ]  # fmt: skip


async def test_a_memory_kept_once_is_found_by_the_search_terms_of_both_copies(engine: MemoryEngine) -> None:
    kept = await engine.add(NewMemory(owner=USER, content="Alice drinks oolong tea", search_terms=("tea",)))
    await engine.add(NewMemory(owner=HANDLE, content="Alice drinks oolong tea", search_terms=("乌龙茶", "tea")))
    r = Retriever(engine)
    assert await r.retrieve(USER, "乌龙茶") == []
    await move_owner(engine, HANDLE, USER, job="cli")
    m = await engine.get(kept.id)
    assert m is not None and m.search_terms == ("tea", "乌龙茶") and m.updated_at == kept.updated_at
    assert [h.id for h in await r.retrieve(USER, "乌龙茶")] == [kept.id]


async def test_a_second_run_changes_nothing(tmp_path: Path, clock: ManualClock) -> None:
    engine = await MemoryEngine.open(tmp_path / "memory.db", clock)
    try:
        await seed(engine)
        await move_owner(engine, HANDLE, USER, job="cli")
        logged = len(await engine.db.fetchall("SELECT id FROM memory_log"))
        before = [tuple(r) for r in await engine.db.fetchall("SELECT * FROM memories ORDER BY id")]
        again = await move_owner(engine, HANDLE, USER, job="cli")
        assert set(again.values()) == {0}
        assert [tuple(r) for r in await engine.db.fetchall("SELECT * FROM memories ORDER BY id")] == before
        assert len(await engine.db.fetchall("SELECT id FROM memory_log")) == logged  # not even a log entry
    finally:
        await engine.close()
    # The dropped duplicate line is gone from the buffer file, not only tombstoned.
    reopened = await MemoryEngine.open(tmp_path / "memory.db", clock)
    try:
        lines = await reopened.db.fetchall("SELECT owner, content FROM extraction_buffer ORDER BY id")
        assert [tuple(r) for r in lines] == [
            (USER, "the mast needs a new halyard"), (USER, "same line twice"), (STRANGER, "bob's line"),
        ]  # fmt: skip
    finally:
        await reopened.close()
