"""memory.db's migrations that rewrite rows (tests/test_upgrade.py checks
that every other row of every version is kept as it was)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from memory import ManualClock, MemoryEngine
from memory.changelog import read_log
from memory.db import Attachment, Database
from memory.schema import BUFFER_MIGRATIONS, BUFFER_SCHEMA, MIGRATIONS, _adopt_buffer, buffer_path
from memory.schema import _v7_facts_under_current_project_name, _v8_small_talk_is_temp


async def _at(path: Path, version: int) -> Database:
    """memory.db as the code of ``version`` left it."""
    return await Database.open(path, MIGRATIONS[:version], before={5: _adopt_buffer},
                               attach=Attachment(BUFFER_SCHEMA, buffer_path(path), BUFFER_MIGRATIONS))


def _row(i: int, owner: str, content: str, *, project: str = "_global", category: str = "event",
         importance: float = 0.5, tier: int = 2, status: str = "active", source: str = "extraction") -> tuple[object, ...]:
    return (i, owner, tier, project, category, content, f"h{i}", importance, source, status, "{}",
            "2025-06-01T08:00:00Z", "2025-06-01T08:00:00Z", "2025-06-01T08:00:00Z")


async def _fill(db: Database, rows: list[tuple[object, ...]], aliases: Sequence[tuple[str, str, str]] = ()) -> None:
    async with db.transaction() as conn:
        for r in rows:
            await conn.execute(
                "INSERT INTO memories (id, owner, tier, project, category, content, content_hash, importance, source, "
                "status, provenance, created_at, updated_at, last_accessed) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)", r)
            if r[9] == "active":
                await conn.execute("INSERT INTO memories_fts (rowid, owner, text) VALUES (?, ?, ?)", (r[0], r[1], r[5]))
        for owner, alias, project in aliases:
            await conn.execute("INSERT INTO project_aliases (owner, alias, project, source, created_at) "
                               "VALUES (?, ?, ?, 'user', '2025-06-01T08:00:00Z')", (owner, alias, project))


async def test_facts_of_a_rename_made_before_are_filed_under_the_current_name(tmp_path: Path) -> None:
    """Before the rename moved facts, a project renamed atlas -> orion kept
    them under atlas: listings showed the old name and the second look did
    not find them under the new one."""
    assert MIGRATIONS.index(_v7_facts_under_current_project_name) == 6
    path = tmp_path / "memory.db"
    db = await _at(path, 6)
    await _fill(db, [
        _row(1, "alice", "atlas stores its data in Postgres", project="atlas"),
        _row(2, "alice", "atlas used SQLite", project="atlas", status="superseded"),
        _row(3, "alice", "nova deploys on Fridays", project="nova"),
        _row(4, "bob", "atlas is bob's game", project="atlas"),
        _row(5, "_global", "atlas is the team's codename", project="atlas"),
    ], [("alice", "atlas", "orion"), ("alice", "nova", "orion")])
    await db.close()
    async with await MemoryEngine.open(path, ManualClock("2026-01-01T00:00:00Z")) as engine:
        got = await engine.get_many([1, 2, 3, 4, 5])
        assert [got[i].project for i in range(1, 6)] == ["orion", "orion", "orion", "atlas", "atlas"]
        assert await engine.project_aliases("alice") == {"atlas": "orion", "nova": "orion"}


async def test_small_talk_filed_as_conversation_before_becomes_temp(tmp_path: Path) -> None:
    """Small talk filed as "conversation" before the prompt called it temp
    kept its 10 % floor and was never archived. What the model rated as the
    prompt's "temporary" (0.2) becomes temp, logged; the gist of a discussion
    (rated higher, or raised by restatements), a manual fact and old
    history stay as they are."""
    assert MIGRATIONS.index(_v8_small_talk_is_temp) == 7
    path = tmp_path / "memory.db"
    db = await _at(path, 7)
    await _fill(db, [
        _row(1, "alice", "User said hi and talked about the rain", category="conversation", importance=0.2),
        _row(2, "alice", "User and assistant weighed Postgres against MySQL", category="conversation", importance=0.6),
        _row(3, "alice", "User greeted the assistant", category="conversation", importance=0.1, source="compression"),
        _row(4, "alice", "User chatted about lunch", category="conversation", importance=0.2, source="manual"),
        _row(5, "alice", "User chatted about snow", category="conversation", importance=0.2, status="superseded"),
        _row(6, "bob", "User is tired today", category="conversation", importance=0.15),
        _row(7, "bob", "User lives in Berlin", category="identity", importance=0.2),
    ])
    await db.close()
    async with await MemoryEngine.open(path, ManualClock("2026-01-01T00:00:00Z")) as engine:
        got = await engine.get_many(list(range(1, 8)))
        assert [got[i].category.value for i in range(1, 8)] == [
            "temp", "conversation", "temp", "conversation", "conversation", "temp", "identity"]
        log = await read_log(engine.db, actions=["relabel"])
        assert sorted((e.owner, e.memory_id) for e in log) == [("alice", 1), ("alice", 3), ("bob", 6)]
        assert {e.detail if isinstance(e.detail, str) else json.dumps(e.detail) for e in log} == {
            '{"from":"conversation","to":"temp"}'}
        hits = await engine.db.fetchall("SELECT rowid FROM memories_fts WHERE memories_fts MATCH 'rain'")
        assert [h[0] for h in hits] == [1]  # still indexed (a category is no FTS column)
