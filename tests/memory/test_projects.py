"""A renamed project's facts are filed under its current name (memory/projects.py)."""

from __future__ import annotations

import pytest

from memory import GLOBAL_OWNER, Category, MemoryEngine, NewMemory, Provenance
from memory.retrieval import Retriever, named_projects


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


async def test_removing_an_alias_files_the_facts_the_rename_moved_under_their_old_name_again(
    engine: MemoryEngine,
) -> None:
    """"/project atlas orion" by mistake (orion is another project): atlas's
    facts went under orion, and "/project remove atlas" dropped the alias
    but left them there, mixed with orion's own, asked about as orion's and
    found under atlas by no name; renaming orion back would take orion's own
    facts along. The rename remembers which facts it moved (``renamed_from``);
    removing the alias files those, and only those, under the old name again."""
    fact = await add(engine, "alice", "atlas stores its data in Postgres", project="atlas")
    entry = await add(engine, "alice", "Works on atlas", project="atlas", tier=1, category=Category.IDENTITY)
    own = await add(engine, "alice", "orion ships on Fridays", project="orion")
    bobs = await add(engine, "bob", "atlas stores its data in Redis", project="atlas")
    await engine.set_project_alias("alice", "atlas", "orion", source="user")
    later = await add(engine, "alice", "orion uses Rust", project="orion")  # said after the rename
    assert await projects(engine, fact, entry, own) == ["orion", "orion", "orion"]
    assert "orion" in await engine.known_projects("alice")  # cached before the removal

    gone = await engine.remove_project_alias("alice", "atlas")
    assert gone is not None and gone.moved == 2
    assert await projects(engine, fact, entry, own, later, bobs) == ["atlas", "atlas", "orion", "orion", "atlas"]
    assert await engine.project_aliases("alice") == {}
    assert "atlas" in await engine.known_projects("alice")
    assert [m.id for m in await engine.list_memories("alice", project="atlas")] == [entry, fact]
    assert (await Retriever(engine).retrieve("alice", "where does atlas store its data?"))[0].id == fact
    assert await engine.remove_project_alias("alice", "atlas") is None  # no such alias now


async def test_a_chain_of_renames_and_a_rename_back_keep_where_each_fact_came_from(engine: MemoryEngine) -> None:
    a = await add(engine, "alice", "atlas stores its data in Postgres", project="atlas")
    o = await add(engine, "alice", "orion ships on Fridays", project="orion")
    await engine.set_project_alias("alice", "atlas", "orion", source="user")
    await engine.set_project_alias("alice", "orion", "nova", source="user")
    assert await projects(engine, a, o) == ["nova", "nova"]
    assert (await engine.remove_project_alias("alice", "orion")).moved == 1  # type: ignore[union-attr]
    assert await projects(engine, a, o) == ["nova", "orion"]
    assert (await engine.remove_project_alias("alice", "atlas")).moved == 1  # type: ignore[union-attr]
    assert await projects(engine, a, o) == ["atlas", "orion"]

    # Renamed back: the facts are home, and nothing remembers a move.
    await engine.set_project_alias("alice", "atlas", "orion", source="user")
    await engine.set_project_alias("alice", "orion", "atlas", source="user")
    assert await projects(engine, a, o) == ["atlas", "atlas"]
    assert (await engine.remove_project_alias("alice", "orion")).moved == 1  # type: ignore[union-attr]
    assert await projects(engine, a, o) == ["atlas", "orion"]
    # A fact the operator filed elsewhere by hand since stays where they put it.
    await engine.set_project_alias("alice", "atlas", "orion", source="user")
    await engine.update(a, project="webshop")
    assert (await engine.remove_project_alias("alice", "atlas")).moved == 0  # type: ignore[union-attr]
    assert await projects(engine, a, o) == ["webshop", "orion"]


async def test_named_projects_reads_partitions_and_aliases_once_and_names_either_name(engine: MemoryEngine) -> None:
    # named_projects used project_aliases and known_projects (which reads the
    # aliases again); projects_and_aliases gives both from one read each.
    await add(engine, "alice", "atlas stores its data in Postgres", project="atlas")
    await add(engine, "alice", "webshop caches in Redis", project="webshop")
    await engine.set_project_alias("alice", "atlas", "orion", source="user")
    known, aliases = await engine.projects_and_aliases("alice")
    assert known == {"orion", "webshop"} and aliases == {"atlas": "orion"}
    assert await engine.known_projects("alice") == {"orion", "webshop", "atlas"}
    assert await named_projects(engine, "alice", "what does Atlas store?") == {"atlas", "orion"}
    assert await named_projects(engine, "alice", "webshop cache?", ["webshop"]) == {"webshop"}
    assert await named_projects(engine, "bob", "what does atlas store?") == frozenset()
