"""A renamed project's facts are filed under its current name (memory/projects.py)."""

from __future__ import annotations

import pytest

from memory import GLOBAL_OWNER, Category, MemoryEngine, NewMemory, Provenance
from memory.retrieval import Retriever


async def add(engine: MemoryEngine, owner: str, content: str, **kw: object) -> int:
    return (await engine.add(NewMemory(owner=owner, content=content, **kw))).id  # type: ignore[arg-type]


async def projects(engine: MemoryEngine, *ids: int) -> list[str]:
    got = await engine.get_many(list(ids))
    return [got[i].project for i in ids]


async def test_a_rename_files_the_owners_old_facts_under_the_new_name_and_back(engine: MemoryEngine) -> None:
    """"/project atlas orion": the facts stayed filed under atlas, so
    /memories, the memory page, exports and Core Memory went on showing a
    name the user no longer uses. Every tier and status of the owner's moves
    in the rename's transaction; another user's and _global's stay."""
    fact = await add(engine, "alice", "atlas stores its data in Postgres", project="atlas")
    old = await add(engine, "alice", "atlas stores its data in SQLite", project="atlas")
    await engine.set_status(old, "superseded", superseded_by=fact)
    entry = await add(engine, "alice", "Works on atlas", project="atlas", tier=1, category=Category.IDENTITY,
                      provenance=Provenance(refs=("weekly", f"m:{fact}")))
    other = await add(engine, "alice", "webshop stores its data in MySQL", project="webshop")
    bobs = await add(engine, "bob", "atlas stores its data in Redis", project="atlas")
    shared = await add(engine, GLOBAL_OWNER, "atlas is the team's codename", project="atlas")
    assert "atlas" in await engine.known_projects("alice")  # cached before the rename

    await engine.set_project_alias("alice", "atlas", "orion", source="user")
    assert await projects(engine, fact, old, entry, other, bobs, shared) == [
        "orion", "orion", "orion", "webshop", "atlas", "atlas"]
    assert [m.id for m in await engine.list_memories("alice", project="orion")] == [entry, fact]
    assert (await engine.get(entry)).project == "orion"  # type: ignore[union-attr]
    # The index follows (the project is no FTS column): both names still find it.
    r = Retriever(engine)
    for q in ("where does orion store its data?", "where does atlas store its data?", "Postgres"):
        assert (await r.retrieve("alice", q))[0].id == fact, q
    assert "orion" in await engine.known_projects("alice")

    await engine.set_project_alias("alice", "orion", "atlas", source="user")  # renamed back: back they go
    assert await projects(engine, fact, old, entry, other) == ["atlas", "atlas", "atlas", "webshop"]
    assert await engine.project_aliases("alice") == {"orion": "atlas"}


async def test_a_rename_refused_moves_nothing_and_globals_alias_moves_globals_facts(engine: MemoryEngine) -> None:
    fact = await add(engine, "alice", "atlas stores its data in Postgres", project="atlas")
    shared = await add(engine, GLOBAL_OWNER, "atlas is the team's codename", project="atlas")
    with pytest.raises(ValueError, match="not a project name"):
        await engine.set_project_alias("alice", "atlas", "!!", source="user")
    assert await projects(engine, fact, shared) == ["atlas", "atlas"]
    assert await engine.project_aliases("alice") == {}
    assert "orion" not in await engine.known_projects("bob")  # cached

    await engine.set_project_alias(GLOBAL_OWNER, "atlas", "orion", source="manual")  # the operator's
    assert await projects(engine, fact, shared) == ["atlas", "orion"]
    assert "orion" in await engine.known_projects("bob")  # every owner's cached projects include _global's
