from __future__ import annotations

import hashlib
import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from structlog.testing import capture_logs

from memory import Category, ManualClock, MemoryEngine, Provenance, Source, Status
from memory.backend import Turn
from memory.filestore import FileMemory, user_slug
from memory.engine import content_hash
from memory.filestore import MemoryFile, line_fact
from memory.migrate import EVENT_MAX_TOKENS, _ledger_key, _save_ledger, migrate_files
from memory.retrieval import Retriever
from memory.service import SqliteMemory
from memory.tokens import estimate_tokens
from tests.logjson import debug_json_log, lines

P = Provenance(channel="telegram", chat_id="1")
SECOND = 1_000_000_000


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
    """Files saved well before the import, untouched since, are trusted by
    their stat (size, mtime, ctime, inode): not read."""
    legacy_workspace(tmp_path)
    mem = tmp_path / "memory" / "MEMORY.md"
    later = mem.stat().st_mtime_ns + 60 * SECOND
    await migrate_files(tmp_path, engine, wall_ns=lambda: later)
    # A ledger hash that matches nothing: a run that read the file would rewrite it.
    key = _ledger_key(MemoryFile("_global", mem, None))
    entry = json.loads((await engine.db.fetchone("SELECT value FROM meta WHERE key = ?", (key,)))[0])
    async with engine.db.transaction() as conn:
        await _save_ledger(conn, key, entry | {"sha256": "0" * 64})
    r = await migrate_files(tmp_path, engine, wall_ns=lambda: later)
    assert not r.changed and r.files_unchanged == 3
    row = await engine.db.fetchone("SELECT value FROM meta WHERE key = ?", (key,))
    assert json.loads(row[0])["sha256"] == "0" * 64


def hand_edit(path: Path, text: str) -> None:
    """``text`` saved in place with the mtime put back (``touch -d``, ``rsync
    -t``), leaving only the ctime to move, which the kernel sets and no tool
    can; saved again until it has (it steps by a clock tick, a few ms)."""
    st = path.stat()
    while True:
        path.write_text(text, encoding="utf-8")
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        if path.stat().st_ctime_ns != st.st_ctime_ns:
            return
        time.sleep(0.005)


async def test_a_hand_edit_that_keeps_the_size_and_puts_the_mtime_back_is_imported(
    tmp_path: Path, engine: MemoryEngine
) -> None:
    """Size and mtime alone could not tell such an edit from no edit: the
    ctime moves with any write, and an editor's save to a new file moves
    the inode."""
    legacy_workspace(tmp_path)
    mem = tmp_path / "memory" / "MEMORY.md"
    later = mem.stat().st_mtime_ns + 60 * SECOND
    await migrate_files(tmp_path, engine, wall_ns=lambda: later)
    before = mem.read_text(encoding="utf-8")
    assert "atlas" in before
    hand_edit(mem, before.replace("atlas", "tulip"))
    r = await migrate_files(tmp_path, engine, wall_ns=lambda: later)
    assert r.changed and r.memories_added >= 1 and r.files_unchanged == 2
    assert any("tulip" in m.content for m in await engine.list_memories("_global"))
    # Saved as editors do, into a new file renamed over it: same size, mtime put back.
    st = mem.stat()
    fresh = mem.with_name("MEMORY.md.tmp")
    fresh.write_text(mem.read_text(encoding="utf-8").replace("tulip", "maple"), encoding="utf-8")
    os.utime(fresh, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(fresh, mem)
    assert mem.stat().st_ino != st.st_ino
    r = await migrate_files(tmp_path, engine, wall_ns=lambda: later)
    assert r.changed and any("maple" in m.content for m in await engine.list_memories("_global"))
    assert not (await migrate_files(tmp_path, engine, wall_ns=lambda: later)).changed  # and only once


def save(path: Path, text: str, mtime_ns: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(mtime_ns, mtime_ns))


async def test_a_save_in_the_tick_of_the_import_is_read_again(tmp_path: Path, engine: MemoryEngine) -> None:
    """Git's racy clean: a file whose mtime is about the time it was
    imported may change again within the same filesystem tick, keeping its
    size and mtime; the next run compares its content, not its stamp."""
    mem = tmp_path / "memory" / "MEMORY.md"
    t = 1_800_000_000 * SECOND
    save(mem, "- Prefers tea\n", t)
    await migrate_files(tmp_path, engine, wall_ns=lambda: t + SECOND // 2)
    save(mem, "- Prefers rum\n", t)  # same size, same timestamp
    r = await migrate_files(tmp_path, engine, wall_ns=lambda: t + SECOND)
    assert (r.memories_added, r.memories_archived) == (1, 1)
    assert [m.content for m in await engine.list_memories("_global")] == ["Prefers rum"]
    # Read once more well after the save, then trusted by its stamp again.
    assert not (await migrate_files(tmp_path, engine, wall_ns=lambda: t + 60 * SECOND)).changed
    hand_edit(mem, "- Prefers gin\n")  # only a tool that sets mtimes (touch -d, rsync -t) does this: its ctime moved
    assert (await migrate_files(tmp_path, engine, wall_ns=lambda: t + 61 * SECOND)).changed


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


async def test_a_file_saved_by_a_windows_editor_keeps_its_heading_out(tmp_path: Path, engine: MemoryEngine) -> None:
    """A byte-order mark, CRLF line ends and markdown furniture (code fences,
    table rules) are not facts; a fenced block is one, with its fences."""
    mem = tmp_path / "memory"
    mem.mkdir()
    (mem / "MEMORY.md").write_bytes(
        "\ufeff# About me\r\n\r\n- Lives in Berlin\r\n```\r\n| a | b |\r\n|---|:---:|\r\n```\r\n~~~\r\n".encode()
    )
    (mem / "2026-02-20.md").write_bytes("\ufeff# 2026-02-20\r\nDiscussed the atlas deploy.\r\n".encode())
    r = await migrate_files(tmp_path, engine)
    got = sorted((m.content, m.tier) for m in await engine.list_memories("_global"))
    assert got == [("Lives in Berlin", 1), ("```\n| a | b |\n|---|:---:|\n```", 2)]
    assert [e.summary for e in await engine.events("_global")] == ["Discussed the atlas deploy."]
    assert r.problems == []


async def test_a_file_not_in_utf8_is_reported_not_imported_as_mojibake(tmp_path: Path, engine: MemoryEngine) -> None:
    mem = tmp_path / "memory"
    mem.mkdir()
    (mem / "MEMORY.md").write_bytes("- 喜欢喝乌龙茶\n- Works on atlas\n".encode("gbk"))
    (mem / "2026-02-20.md").write_bytes("讨论了部署\n".encode("gbk"))
    r = await migrate_files(tmp_path, engine)
    assert (r.memories_added, r.events_added) == (0, 0)
    assert r.problems == [
        "MEMORY.md: not UTF-8 text (line 1); skipped (save it as UTF-8 and migrate again)",
        "2026-02-20.md: not UTF-8 text (line 1); skipped (save it as UTF-8 and migrate again)",
    ]
    assert await engine.list_memories("_global") == [] and await engine.events("_global") == []
    # converted by the user, the next run takes them
    (mem / "MEMORY.md").write_text("- 喜欢喝乌龙茶\n- Works on atlas\n", encoding="utf-8")
    (mem / "2026-02-20.md").write_text("讨论了部署\n", encoding="utf-8")
    r = await migrate_files(tmp_path, engine)
    assert (r.memories_added, r.events_added, r.problems) == (2, 1, [])
    assert sorted(m.content for m in await engine.list_memories("_global")) == ["Works on atlas", "喜欢喝乌龙茶"]


async def test_other_markdown_files_are_named_not_skipped_silently(tmp_path: Path, engine: MemoryEngine) -> None:
    legacy_workspace(tmp_path)
    r = await migrate_files(tmp_path, engine)
    assert r.problems == [
        "2026-02-30.md: not imported (only MEMORY.md and YYYY-MM-DD.md files with a real date are)",
        "notes.md: not imported (only MEMORY.md and YYYY-MM-DD.md files with a real date are)",
    ]


async def test_a_huge_daily_file_becomes_events_a_memory_model_can_read(tmp_path: Path, engine: MemoryEngine) -> None:
    mem = tmp_path / "memory"
    mem.mkdir()
    lines = [f"{i:05d} user: we talked about the atlas deploy and the database again" for i in range(20_000)]
    (mem / "2026-02-20.md").write_text("\n".join(lines) + "\n" + "z" * 30_000 + "\n", encoding="utf-8")
    r = await migrate_files(tmp_path, engine)
    events = await engine.events("_global", limit=10_000)
    assert r.events_added == len(events) > 100
    assert max(estimate_tokens(e.summary) for e in events) <= EVENT_MAX_TOKENS
    # nothing lost, nothing doubled: the pieces joined are the file
    ordered = sorted(events, key=lambda e: e.id)
    assert "\n".join(e.summary for e in ordered[:-4]) == "\n".join(lines)
    assert "".join(e.summary for e in ordered[-4:]) == "z" * 30_000
    again = await migrate_files(tmp_path, engine)
    assert not again.changed and len(await engine.events("_global", limit=10_000)) == len(events)


HAND_WRITTEN = """# About me

- Prefers answers in Chinese
- Works on project atlas,
  which ships in May
- Projects:
  - atlas: the billing rewrite
  - hermes: the chat gateway
<!-- written by hand,
not a fact -->
> Ship small,
> ship often.

Deploy command:
```sh
cd /srv/atlas
make deploy
```

| tool | version |
|------|---------|
| python | 3.12 |
"""


async def test_hand_written_markdown_becomes_whole_facts(tmp_path: Path, engine: MemoryEngine) -> None:
    """A wrapped item, a nested list, a quote, a table and a code block are
    each read as what they say, not line by line."""
    mem = tmp_path / "memory"
    mem.mkdir()
    (mem / "MEMORY.md").write_text(HAND_WRITTEN)
    r = await migrate_files(tmp_path, engine)
    got = {m.content: (m.tier, m.category) for m in await engine.list_memories("_global")}
    profile = (1, Category.IDENTITY)
    assert got == {
        "Prefers answers in Chinese": profile,
        "Works on project atlas, which ships in May": profile,
        "Projects: atlas: the billing rewrite": profile,
        "Projects: hermes: the chat gateway": profile,
        "Ship small, ship often.": profile,
        "tool: python; version: 3.12": profile,
        # Reference, not profile: recalled when asked about, not in every prompt.
        "Deploy command:\n```sh\ncd /srv/atlas\nmake deploy\n```": (2, Category.CONFIG),
    }
    assert r.memories_added == 7
    hits = await Retriever(engine).retrieve("_global", "what is the deploy command again?")
    assert hits and hits[0].content.startswith("Deploy command:")


async def test_a_file_imported_line_by_line_before_is_not_imported_again(tmp_path: Path, engine: MemoryEngine) -> None:
    """An older migration stored each line of a block on its own; when the
    file changes, the block whose lines it already took is not added again."""
    mem = tmp_path / "memory"
    mem.mkdir()
    path = mem / "MEMORY.md"
    path.write_text("- Works on project atlas,\n  which ships in May\n")
    old = [x for ln in path.read_text().splitlines() if (x := line_fact(ln))]
    async with engine.db.transaction() as conn:
        key = _ledger_key(MemoryFile("_global", path, None))
        await _save_ledger(conn, key, {"size": 0, "lines": [content_hash(x) for x in old]})
    path.write_text(path.read_text() + "- Likes tea\n")
    r = await migrate_files(tmp_path, engine)
    assert [m.content for m in await engine.list_memories("_global")] == ["Likes tea"]
    assert (r.memories_added, r.memories_skipped) == (1, 1)


async def test_a_fact_forgotten_in_the_files_does_not_come_back_with_sqlite(
    tmp_path: Path, engine: MemoryEngine, clock: ManualClock
) -> None:
    """memory on, off, on (seed 000 §12.3): a profile line imported once and
    then forgotten while the file store ran (or deleted from MEMORY.md by
    hand) leaves the prompt; the file is the truth (seed 004). Kept lines
    stay, and a line written back later is imported again."""
    files = FileMemory(tmp_path, clock)
    await files.remember("alice", "Alice's locker code is 4321", provenance=P)
    await files.remember("alice", "Alice's cat is called Miso", provenance=P)
    await migrate_files(tmp_path, engine)
    sql = SqliteMemory(engine)
    assert "4321" in await sql.profile("alice")

    [hit] = [h for h in (await files.overview("alice")).profile if "4321" in h.content]
    assert (await files.forget("alice", [hit.ref])).erased
    r = await migrate_files(tmp_path, engine)
    assert r.memories_archived == 1
    profile = await sql.profile("alice")
    assert "4321" not in profile and "Miso" in profile
    [gone] = [m for m in await engine.list_memories("alice", status=None) if "4321" in m.content]
    assert gone.status == Status.ARCHIVED
    assert not (await migrate_files(tmp_path, engine)).changed

    await files.remember("alice", "Alice's locker code is 4321", provenance=P)  # said again
    assert (await migrate_files(tmp_path, engine)).memories_added == 1
    assert "4321" in await sql.profile("alice")


async def test_an_emptied_memory_md_archives_nothing(tmp_path: Path, engine: MemoryEngine) -> None:
    """A MEMORY.md cut to nothing (an editor crash, a bad sync) is more
    likely an accident than a wish to forget everything: reported, kept."""
    legacy_workspace(tmp_path)
    await migrate_files(tmp_path, engine)
    (tmp_path / "memory" / "MEMORY.md").write_text("")
    r = await migrate_files(tmp_path, engine)
    assert r.memories_archived == 0 and any("MEMORY.md" in p for p in r.problems)
    assert len(await engine.list_memories("_global")) == 2


async def test_a_drastic_shrink_is_held_and_said(tmp_path: Path, engine: MemoryEngine, clock: ManualClock) -> None:
    """``myclaw memory migrate`` (and the start-up import) after most of
    MEMORY.md went in one save: nothing archived, the file and the time the
    removal will be done named; run again after SHRINK_HOLD, it is done."""
    from memory.clock import format_ts
    from memory.migrate import SHRINK_HOLD

    mem = tmp_path / "memory" / "MEMORY.md"
    save(mem, "".join(f"- Fact {i} of the user\n" for i in range(6)), 1)
    await migrate_files(tmp_path, engine)
    save(mem, "- Fact 0 of the user\n- Fact 1 of the user\n", 2)
    r = await migrate_files(tmp_path, engine)
    assert not r.changed and r.held == {"MEMORY.md": format_ts(clock.now() + SHRINK_HOLD)}
    assert any("MEMORY.md: a save removed 4 of its 6 facts; held" in p for p in r.problems)
    assert (await migrate_files(tmp_path, engine)).held  # still held; the same file is no new hold
    clock.advance(SHRINK_HOLD)
    r = await migrate_files(tmp_path, engine)
    assert r.memories_archived == 4 and not r.held and not r.problems
    assert not (await migrate_files(tmp_path, engine)).changed


async def test_date_comments_are_not_part_of_the_imported_facts(tmp_path: Path, engine: MemoryEngine) -> None:
    """The file store's ``<!-- YYYY-MM-DD -->`` line dates stay out of the
    memories; a line imported before it had one (or after its date was
    deleted by hand) is the same fact, neither imported again nor archived."""
    mem = tmp_path / "memory" / "MEMORY.md"
    save(mem, "- Prefers tea\n- Lives in Lisbon <!-- 2026-02-01 -->\n", 1)
    await migrate_files(tmp_path, engine)
    assert sorted(m.content for m in await engine.list_memories("_global")) == ["Lives in Lisbon", "Prefers tea"]
    save(mem, "- Prefers tea <!-- 2026-03-01 -->\n- Lives in Lisbon\n", 2)
    r = await migrate_files(tmp_path, engine)
    assert not r.changed and r.memories_skipped == 2


async def test_an_imported_line_is_dated_by_its_own_day(
    tmp_path: Path, engine: MemoryEngine, clock: ManualClock
) -> None:
    """A MEMORY.md line's ``<!-- YYYY-MM-DD -->`` is when it was said: the
    memory is dated by it (decay and "when did I say that" read the date),
    on that day in any time zone; a line without one is dated today."""
    clock.set("2026-03-01T08:00:00Z")
    save(tmp_path / "memory" / "MEMORY.md",
         "- Lives in Lisbon <!-- 2026-02-01 -->\n- Prefers tea\n- Started pottery <!-- 2026-03-01 -->\n", 1)
    with capture_logs() as logs:
        await migrate_files(tmp_path, engine)
    by = {m.content: m for m in await engine.list_memories("_global")}
    lisbon = by["Lives in Lisbon"]
    assert lisbon.created_at.startswith("2026-02-01") and lisbon.last_accessed == lisbon.created_at
    for zone in ("America/Los_Angeles", "Asia/Tokyo", "UTC"):
        assert lisbon.to_hit(tz=ZoneInfo(zone)).date == "2026-02-01"
    assert by["Prefers tea"].created_at == "2026-03-01T08:00:00Z"
    assert by["Started pottery"].created_at == "2026-03-01T08:00:00Z"  # today, and never later than now
    assert not [e for e in logs if "date" in e["event"]]  # nothing to distrust


async def test_a_future_or_nonsense_line_date_is_not_trusted(
    tmp_path: Path, engine: MemoryEngine, clock: ManualClock
) -> None:
    """A date after today (a clock or a hand gone wrong) or before any
    memory file could exist is not believed: the memory is dated now and
    the log says how many, not what they said."""
    save(tmp_path / "memory" / "MEMORY.md",
         "- Has a cat <!-- 2031-05-05 -->\n- Owns a bike <!-- 0001-01-01 -->\n- Speaks Dutch <!-- 2025-12-24 -->\n", 1)
    with capture_logs() as logs:
        r = await migrate_files(tmp_path, engine)
    assert r.memories_added == 3
    by = {m.content: m.created_at for m in await engine.list_memories("_global")}
    assert by == {"Has a cat": "2026-03-01T12:00:00Z", "Owns a bike": "2026-03-01T12:00:00Z",
                  "Speaks Dutch": "2025-12-24T12:00:00Z"}
    [warned] = [e for e in logs if e["log_level"] == "warning" and "date" in e["event"]]
    assert warned["untrusted"] == 2 and warned["file"] == "MEMORY.md"
    assert not any(w in str(e) for e in logs for w in ("cat", "bike", "2031", "0001"))


async def test_the_log_names_files_without_the_users_or_their_files_names(
    tmp_path: Path, engine: MemoryEngine, clock: ManualClock
) -> None:
    """A memory file's path holds its user's name (the directory's slug)
    and, for a file not imported, whatever its name says ("quokka-party.md"):
    the log names a user's directory by its slug's hash, which a glob finds
    (``users/*-<hash>``), a stray file by its name's hash, and a problem
    by its kind; the report (the CLI's, the operator's own files) is whole."""
    await FileMemory(tmp_path, clock).remember("QUOKKA Smith", "Has a cat", provenance=P)
    home = tmp_path / "memory" / "users" / user_slug("QUOKKA Smith")
    (home / "MEMORY.md").write_text((home / "MEMORY.md").read_text() + "- Sails <!-- 2031-05-05 -->\n")
    (home / "quokka-party.md").write_text("- notes\n")
    stray = tmp_path / "memory" / "users" / "QUOKKA-copy"
    stray.mkdir()
    (stray / ".owner").write_text('"QUOKKA other"\n')
    with debug_json_log() as stream:
        r = await migrate_files(tmp_path, engine)
    assert r.memories_added == 2 and any("quokka-party.md" in p for p in r.problems)
    assert "quokka" not in stream.getvalue().lower()
    digest = user_slug("QUOKKA Smith").rsplit("-", 1)[1]
    [dated] = lines(stream, "memory file lines dated after today or before 1970; dated now")
    assert dated["file"] == f"users/*-{digest}/MEMORY.md"
    left = {(p["problem"], p["file"]) for p in lines(stream, "migration left a file or directory out")}
    name_hash = hashlib.sha256(b"quokka-party.md").hexdigest()[:12]
    dir_hash = hashlib.sha256(b"QUOKKA-copy").hexdigest()[:12]
    assert left == {("not_a_memory_file", f"users/*-{digest}/file-{name_hash}.md"),
                    ("owner_mismatch", f"users/#{dir_hash}")}
    assert "QUOKKA" not in json.dumps(r.log_fields())
    assert r.log_fields() == {"memories_added": 2, "memories_skipped": 0, "memories_archived": 0,
                              "memories_filed": 0, "memories_cut": 0, "memories_erased": 0, "events_added": 0,
                              "events_replaced": 0, "events_skipped": 0, "files_seen": 1, "files_unchanged": 0,
                              "owners": 2, "problems": 2, "held": 0}


async def test_a_fact_saved_with_terms_comes_back_found_by_them(
    tmp_path: Path, engine: MemoryEngine, clock: ManualClock
) -> None:
    """memory.enabled=false: the file store writes a saved fact's terms in
    its line (``<!-- terms: ... -->``); on again, migrate imports them, so a
    Chinese question finds an English fact as it would have in SQLite."""
    files = FileMemory(tmp_path, clock)
    await files.remember("alice", "We picked Postgres over MySQL", provenance=P,
                         search_terms=["数据库", "database", "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"])
    text = (tmp_path / "memory" / "users" / user_slug("alice") / "MEMORY.md").read_text()
    assert "- We picked Postgres over MySQL <!-- terms: 数据库, database --> <!-- 2026-03-01 -->" in text
    await migrate_files(tmp_path, engine)
    [m] = await engine.list_memories("alice")
    assert (m.content, m.search_terms) == ("We picked Postgres over MySQL", ("数据库", "database"))
    [hit] = await Retriever(engine).retrieve("alice", "数据库我们最后选了什么？")
    assert hit.id == m.id


async def test_terms_written_by_hand_are_imported_and_added_later_reach_the_fact(
    tmp_path: Path, engine: MemoryEngine
) -> None:
    mem = tmp_path / "memory" / "MEMORY.md"
    save(mem, "- We picked Postgres <!-- terms: 数据库, database -->\n- Prefers tea\n"
              "```\nmake <!-- terms: build -->\n```\n", 1)
    await migrate_files(tmp_path, engine)
    by = {m.content: m for m in await engine.list_memories("_global")}
    assert by["We picked Postgres"].search_terms == ("数据库", "database")
    assert by["Prefers tea"].search_terms == ()
    assert by["```\nmake <!-- terms: build -->\n```"].search_terms == ()  # code is as written
    # Terms added to an imported line find its memory too; the fact is not imported again.
    save(mem, "- We picked Postgres <!-- terms: 选型 -->\n- Prefers tea <!-- terms: 茶, tea -->\n"
              "```\nmake <!-- terms: build -->\n```\n", 2)
    r = await migrate_files(tmp_path, engine)
    assert r.memories_added == 0 and r.memories_archived == 0
    by = {m.content: m for m in await engine.list_memories("_global")}
    assert by["We picked Postgres"].search_terms == ("数据库", "database", "选型")  # none taken away
    assert by["Prefers tea"].search_terms == ("茶", "tea")
