from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from memory import Category, ManualClock, MemoryEngine, Provenance, Source, Status
from memory.backend import Turn
from memory.filestore import FileMemory, user_slug
from memory.migrate import migrate_files
from memory.service import SqliteMemory

P = Provenance(channel="telegram", chat_id="1")


def turn(owner: str, content: str, at: str) -> Turn:
    return Turn(
        owner=owner,
        channel="telegram",
        chat_id="1",
        role="user",
        content=content,
        at=datetime.fromisoformat(at).replace(tzinfo=UTC),
    )


def legacy_workspace(ws: Path) -> None:
    """The layout the Go myclaw left behind (seed 12.2): one user, top level."""
    mem = ws / "memory"
    mem.mkdir(parents=True)
    (mem / "MEMORY.md").write_text("# About me\n\n- Prefers answers in Chinese\n- Works on project atlas\n\n")
    (mem / "2026-02-20.md").write_text("Discussed the atlas deploy.\n")
    (mem / "2026-02-21.md").write_text("\n  \n")  # empty day
    (mem / "notes.md").write_text("not a daily file")
    (mem / "2026-02-30.md").write_text("not a real date")


async def test_legacy_files_become_tier1_and_tier3(tmp_path: Path, engine: MemoryEngine) -> None:
    legacy_workspace(tmp_path)
    r = await migrate_files(tmp_path, engine)
    assert (r.memories_added, r.events_added, r.events_skipped) == (2, 1, 1)
    facts = await engine.list_memories("_global")
    assert sorted(m.content for m in facts) == ["Prefers answers in Chinese", "Works on project atlas"]
    for m in facts:
        assert (m.tier, m.category, m.importance, m.source) == (1, Category.IDENTITY, 1.0, Source.MIGRATION)
        assert m.provenance.refs == ("MEMORY.md",)
    [ev] = await engine.events("_global")
    assert (ev.event_date, ev.summary, ev.channel) == ("2026-02-20", "Discussed the atlas deploy.", "migration")
    assert ev.provenance.refs == ("2026-02-20.md",)

    again = await migrate_files(tmp_path, engine)
    assert not again.changed and again.files_unchanged == 3
    assert (await engine.stats()).total == 2 and len(await engine.events("_global")) == 1


async def test_round_trip_file_store_to_sqlite(tmp_path: Path, engine: MemoryEngine, clock: ManualClock) -> None:
    """memory.enabled=false writes files; re-enabled, migrate brings them in."""
    files = FileMemory(tmp_path, clock)
    await files.remember("alice", "Alice's cat is called Miso", provenance=P)
    await files.remember("telegram:9", "Bob is allergic to peanuts", provenance=P)
    await files.buffer([turn("alice", "booked flights to Osaka", "2026-02-28T09:00:00")])
    r = await migrate_files(tmp_path, engine)
    assert (r.memories_added, r.events_added) == (2, 1) and sorted(r.owners) == ["_global", "alice", "telegram:9"]

    sql = SqliteMemory(engine)
    assert "Miso" in await sql.profile("alice") and "peanuts" not in await sql.profile("alice")
    assert "peanuts" in await sql.profile("telegram:9")
    [ev] = await engine.events("alice")
    assert "booked flights to Osaka" in ev.summary and ev.event_date == "2026-02-28"
    assert ev.provenance.refs == (f"users/{user_slug('alice')}/2026-02-28.md",)
    assert await engine.events("telegram:9") == []

    # Off again the same day: the file grows; on again: only the new part comes in.
    await files.buffer([turn("alice", "hotel is near Namba", "2026-02-28T18:00:00")])
    await files.remember("alice", "Alice's cat is called Miso", provenance=P)  # no change
    r2 = await migrate_files(tmp_path, engine)
    assert (r2.memories_added, r2.events_added, r2.events_replaced) == (0, 1, 0)
    evs = await engine.events("alice")
    assert [e.summary for e in evs] == [ev.summary, "- 18:00 user: hotel is near Namba"]
    assert not (await migrate_files(tmp_path, engine)).changed


async def test_edited_daily_file_replaces_its_events(tmp_path: Path, engine: MemoryEngine) -> None:
    legacy_workspace(tmp_path)
    await migrate_files(tmp_path, engine)
    day = tmp_path / "memory" / "2026-02-20.md"
    day.write_text("Discussed the atlas deploy and rollback.\n")  # edited, not appended
    r = await migrate_files(tmp_path, engine)
    assert (r.events_added, r.events_replaced) == (0, 1)
    assert [e.summary for e in await engine.events("_global")] == ["Discussed the atlas deploy and rollback."]


async def test_deleted_or_archived_facts_do_not_come_back(tmp_path: Path, engine: MemoryEngine) -> None:
    legacy_workspace(tmp_path)
    await migrate_files(tmp_path, engine)
    a, b = await engine.list_memories("_global")
    await engine.set_status(a.id, Status.ARCHIVED)
    await engine.delete(b.id)
    mem = tmp_path / "memory" / "MEMORY.md"
    mem.write_text(mem.read_text() + "- Likes green tea\n")
    r = await migrate_files(tmp_path, engine)
    assert (r.memories_added, r.memories_skipped) == (1, 2)
    assert [m.content for m in await engine.list_memories("_global")] == ["Likes green tea"]


async def test_existing_wording_is_not_duplicated(tmp_path: Path, engine: MemoryEngine, clock: ManualClock) -> None:
    await SqliteMemory(engine).remember("alice", "Alice's cat is called Miso", provenance=P)
    await FileMemory(tmp_path, clock).remember("alice", "alice's cat is called  miso", provenance=P)
    r = await migrate_files(tmp_path, engine)
    assert (r.memories_added, r.memories_skipped) == (0, 1)


async def test_unowned_or_mismatched_user_dirs_are_skipped(tmp_path: Path, engine: MemoryEngine) -> None:
    users = tmp_path / "memory" / "users"
    (users / "stray").mkdir(parents=True)
    (users / "stray" / "MEMORY.md").write_text("- whose is this\n")
    copied = users / user_slug("alice")
    copied.mkdir()
    (copied / ".owner").write_text("bob\n")  # a copied directory must not be filed under bob
    (copied / "MEMORY.md").write_text("- secret of alice\n")
    r = await migrate_files(tmp_path, engine)
    assert r.memories_added == 0 and len(r.problems) == 2
    assert any("users/stray: no .owner" in p for p in r.problems)
    assert await engine.owners() == []


async def test_unchanged_run_reads_no_file(tmp_path: Path, engine: MemoryEngine) -> None:
    legacy_workspace(tmp_path)
    await migrate_files(tmp_path, engine)
    mem = tmp_path / "memory" / "MEMORY.md"
    # Same size and mtime but other bytes: only a run that reads would notice.
    st = mem.stat()
    mem.write_text(mem.read_text().replace("atlas", "ATLAS"))
    os.utime(mem, ns=(st.st_atime_ns, st.st_mtime_ns))
    r = await migrate_files(tmp_path, engine)
    assert not r.changed and r.files_unchanged == 3


async def test_missing_workspace_is_an_empty_report(tmp_path: Path, engine: MemoryEngine) -> None:
    r = await migrate_files(tmp_path / "nope", engine)
    assert r.files_seen == 0 and not r.changed and r.owners == []


async def test_any_owner_name_survives_the_round_trip(tmp_path: Path, engine: MemoryEngine, clock: ManualClock) -> None:
    names = ["飞书:ou_张三", " padded ", "two\nlines", '"quoted"']
    files = FileMemory(tmp_path, clock)
    for n in names:
        await files.remember(n, f"fact of {n!r}", provenance=P)
    r = await migrate_files(tmp_path, engine)
    assert r.problems == [] and sorted(r.owners) == sorted(["_global", *names])
    for n in names:
        assert [m.content for m in await engine.list_memories(n)] == [f"fact of {n!r}"]
