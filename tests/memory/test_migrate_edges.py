"""A hand-written MEMORY.md's edges: an unclosed comment, a line too long
for a memory, a paste far larger than a Core Memory."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

from structlog.testing import capture_logs

from memory import ManualClock, MemoryEngine, Status
from memory.engine import MAX_CONTENT_CHARS
from memory.erasedlines import ERASED_HOLD
from memory.filestore import FileMemory, user_slug
from memory.migrate import PROFILE_IMPORT_LIMIT, migrate_files
from memory.retrieval import Retriever
from memory.service import SqliteMemory

SECOND = 1_000_000_000


def save(path: Path, text: str, mtime_s: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(mtime_s * SECOND, mtime_s * SECOND))


FACTS = "".join(f"- Fact {i} of the user\n" for i in range(5))


async def _active(engine: MemoryEngine) -> dict[str, int]:
    return {m.content: m.id for m in await engine.list_memories("_global", limit=10_000)}


async def test_an_unclosed_comment_on_its_own_line_archives_nothing(tmp_path: Path, engine: MemoryEngine) -> None:
    """A ``<!--`` typed on a line of its own hides every line after it (as
    Markdown renders it): the save is the file's problem, said by kind, and
    what was imported stays with its ids; closed again, the file imports."""
    mem = tmp_path / "memory" / "MEMORY.md"
    save(mem, FACTS, 1)
    await migrate_files(tmp_path, engine)
    before = await _active(engine)
    lines = FACTS.splitlines(keepends=True)
    save(mem, "".join(lines[:3]) + "<!-- a note about the last two\n" + "".join(lines[3:]) + "- A new fact\n", 2)
    with capture_logs() as logs:
        r = await migrate_files(tmp_path, engine)
    assert not r.changed and r.memories_archived == 0
    assert any("MEMORY.md: an unclosed <!-- comment (line 4)" in p for p in r.problems)
    assert any(e.get("problem") == "unclosed_comment" and e.get("file") == "MEMORY.md" for e in logs)
    assert await _active(engine) == before
    # Closed: the note is a comment again, the new fact comes in, nothing else moves.
    save(mem, "".join(lines[:3]) + "<!-- a note about the last two -->\n" + "".join(lines[3:]) + "- A new fact\n", 3)
    r = await migrate_files(tmp_path, engine)
    assert (r.memories_added, r.memories_archived, r.problems) == (1, 0, [])
    assert await _active(engine) == before | {"A new fact": (await _active(engine))["A new fact"]}


async def test_a_skipped_save_is_recorded_once_for_doctor_and_dropped_by_the_save_that_fixes_it(
    tmp_path: Path, engine: MemoryEngine, clock: ManualClock
) -> None:
    """A save skipped for a problem of the file is recorded in its ledger
    entry (``myclaw doctor`` lists it), once per save: the runs that read it
    again do not rewrite it; the save that fixes it imports and drops it,
    and the import's own record is kept meanwhile."""
    mem = tmp_path / "memory" / "MEMORY.md"
    save(mem, FACTS, 1)
    await migrate_files(tmp_path, engine)

    async def ledger() -> dict[str, object]:
        row = await engine.db.fetchone("SELECT value FROM meta WHERE key LIKE 'migrated:%'")
        assert row is not None
        return dict(json.loads(row["value"]))

    imported = await ledger()
    save(mem, FACTS + "<!-- unclosed\n", 2)
    await migrate_files(tmp_path, engine)
    first = await ledger()
    assert first["skipped"] == {"kind": "unclosed_comment", "file": "MEMORY.md", "line": 6,
                                "since": "2026-03-01T12:00:00Z", "sha256": first["skipped"]["sha256"]}  # type: ignore[index]
    assert {k: v for k, v in first.items() if k != "skipped"} == imported
    clock.advance(timedelta(hours=1))
    await migrate_files(tmp_path, engine)
    assert await ledger() == first  # the same save: not recorded again
    save(mem, FACTS + "<!-- unclosed -->\n", 3)
    r = await migrate_files(tmp_path, engine)
    assert not r.problems and "skipped" not in await ledger()


async def test_a_skipped_save_of_a_file_deleted_since_is_dropped_by_the_next_full_import(
    tmp_path: Path, engine: MemoryEngine
) -> None:
    """A daily file's save skipped (not UTF-8), then the file deleted: its
    record stayed in the ledger for good, and ``myclaw doctor`` kept listing
    a file that is not there. The next full import drops it (an entry that
    held only that record goes whole; an imported file's keeps its import
    record); a file still there keeps its record."""
    mem = tmp_path / "memory" / "MEMORY.md"
    day = mem.parent / "2026-02-20.md"
    other = mem.parent / "2026-02-21.md"
    save(mem, FACTS, 1)
    await migrate_files(tmp_path, engine)
    save(mem, FACTS + "<!-- unclosed\n", 2)
    day.write_bytes("- a day\n".encode() + "caf\u00e9".encode("latin-1"))
    other.write_bytes("- another day\n".encode() + "caf\u00e9".encode("latin-1"))
    await migrate_files(tmp_path, engine)

    async def skipped() -> list[str]:
        rows = await engine.db.fetchall("SELECT value FROM meta WHERE key LIKE 'migrated:%'")
        return sorted(json.loads(r["value"])["skipped"]["file"] for r in rows if "skipped" in json.loads(r["value"]))

    assert await skipped() == ["2026-02-20.md", "2026-02-21.md", "MEMORY.md"]
    rows_before = len(await engine.db.fetchall("SELECT key FROM meta WHERE key LIKE 'migrated:%'"))
    mem.unlink()
    day.unlink()
    await migrate_files(tmp_path, engine, only=[other])  # a sync of other files: not a full look
    assert await skipped() == ["2026-02-20.md", "2026-02-21.md", "MEMORY.md"]
    r = await migrate_files(tmp_path, engine)
    assert await skipped() == ["2026-02-21.md"]
    assert not r.changed
    keys = [row["key"] for row in await engine.db.fetchall("SELECT key FROM meta WHERE key LIKE 'migrated:%'")]
    assert len(keys) == rows_before - 1 and any("MEMORY.md" in k for k in keys)  # the day's went whole


async def test_a_comment_after_a_facts_words_closed_on_the_next_line_is_imported(
    tmp_path: Path, engine: MemoryEngine
) -> None:
    """A note typed after a fact and wrapped onto the next line before its
    ``-->`` was taken as unclosed: the save skipped with a warning, the new
    fact never imported. It is a comment; the save imports, and the
    wrapped line is no fact of its own."""
    mem = tmp_path / "memory" / "MEMORY.md"
    save(mem, FACTS, 1)
    await migrate_files(tmp_path, engine)
    save(mem, FACTS + "- Meets Ana on Fridays <!-- ask her about\nthe garden -->\n- A new fact\n", 2)
    r = await migrate_files(tmp_path, engine)
    assert r.problems == [] and r.memories_added == 2 and r.memories_archived == 0
    active = await _active(engine)
    assert "A new fact" in active and "Meets Ana on Fridays <!-- ask her about the garden -->" in active
    assert not [c for c in active if c.startswith("the garden")]
    row = await engine.db.fetchone("SELECT value FROM meta WHERE key LIKE 'migrated:%'")
    assert row is not None and "skipped" not in json.loads(row["value"])


async def test_an_unclosed_inline_terms_comment_is_not_made_words(tmp_path: Path, engine: MemoryEngine) -> None:
    """``- fact <!-- terms: a, b`` without its ``-->``: the comment's words
    would become the fact's; the save is skipped the same way."""
    mem = tmp_path / "memory" / "MEMORY.md"
    save(mem, FACTS, 1)
    await migrate_files(tmp_path, engine)
    save(mem, FACTS + "- Uses postgres at work <!-- terms: 数据库, database\n", 2)
    r = await migrate_files(tmp_path, engine)
    assert r.memories_added == 0 and any("unclosed <!-- comment (line 6)" in p for p in r.problems)
    assert not any("<!--" in c for c in await _active(engine))
    save(mem, FACTS + "- Uses postgres at work <!-- terms: 数据库, database -->\n", 3)
    r = await migrate_files(tmp_path, engine)
    assert r.memories_added == 1 and not r.problems
    [m] = [m for m in await engine.list_memories("_global") if m.content == "Uses postgres at work"]
    assert m.search_terms == ("数据库", "database")


async def test_a_file_imported_with_a_hidden_tail_is_left_as_it_is_on_upgrade(
    tmp_path: Path, engine: MemoryEngine
) -> None:
    """A file whose unclosed comment hid lines before this change was
    imported without them: upgrading neither imports them nor archives
    anything, touched or not, and an edit elsewhere is the file's problem."""
    from memory.engine import content_hash
    from memory.filestore import MemoryFile
    from memory.migrate import _ledger_key, _save_ledger

    mem = tmp_path / "memory" / "MEMORY.md"
    hidden = "- Fact A\n- Fact B\n<!-- unclosed\n- Fact C\n- Fact D\n"
    save(mem, hidden, 1)
    # What the import before this change left: Fact A and B, their ledger entry.
    for text in ("Fact A", "Fact B"):
        from memory import Category, NewMemory, Provenance, Source

        await engine.add(NewMemory(owner="_global", content=text, tier=1, category=Category.IDENTITY,
                                   importance=1.0, source=Source.MIGRATION, provenance=Provenance(refs=("MEMORY.md",))))
    st = mem.stat()
    import hashlib

    async with engine.db.transaction() as conn:
        await _save_ledger(conn, _ledger_key(MemoryFile("_global", mem, None)), {
            "size": st.st_size, "sha256": hashlib.sha256(mem.read_bytes()).hexdigest(), "mtime_ns": st.st_mtime_ns,
            "ctime_ns": st.st_ctime_ns, "ino": st.st_ino,
            "lines": sorted(content_hash(t) for t in ("Fact A", "Fact B"))})
    before = await _active(engine)
    r = await migrate_files(tmp_path, engine)
    assert r.files_unchanged == 1 and not r.changed and not r.problems
    os.utime(mem, ns=(5 * SECOND, 5 * SECOND))  # touched
    r = await migrate_files(tmp_path, engine)
    assert r.files_unchanged == 1 and not r.changed
    save(mem, hidden.replace("Fact A", "Fact A, edited"), 6)
    r = await migrate_files(tmp_path, engine)
    assert not r.changed and any("unclosed <!-- comment (line 3)" in p for p in r.problems)
    assert await _active(engine) == before


async def test_a_line_too_long_for_a_memory_is_cut_and_said(tmp_path: Path, engine: MemoryEngine) -> None:
    """A single 5 MB line is a memory of MAX_CONTENT_CHARS: not silently,
    a warning by kind (no words) and a count in the report."""
    mem = tmp_path / "memory" / "MEMORY.md"
    long = "secretword " * 1000  # 11,000 characters
    save(mem, f"- Short fact\n- {long}\n", 1)
    with capture_logs() as logs:
        r = await migrate_files(tmp_path, engine)
    assert (r.memories_added, r.memories_cut) == (2, 1)
    [cut] = [e for e in logs if e.get("cut") == 1]
    assert cut["file"] == "MEMORY.md" and cut["log_level"] == "warning"
    assert not any("secretword" in repr(e) for e in logs)
    assert max(len(c) for c in await _active(engine)) == MAX_CONTENT_CHARS
    assert r.log_fields()["memories_cut"] == 1


async def test_a_huge_paste_fills_core_memory_to_its_limit_and_files_the_rest(
    tmp_path: Path, engine: MemoryEngine
) -> None:
    """Thousands of pasted lines are not thousands of Core Memory entries:
    the first up to PROFILE_IMPORT_LIMIT (with those already there) are
    Tier 1, the rest Tier 2 facts that stay searchable; said in the report."""
    mem = tmp_path / "memory" / "MEMORY.md"
    save(mem, "- The user's name is Mira\n", 1)
    await migrate_files(tmp_path, engine)
    n = 1500
    save(mem, "- The user's name is Mira\n" + "".join(f"- log line {i} status ok code {i * 7}\n" for i in range(n)), 2)
    with capture_logs() as logs:
        r = await migrate_files(tmp_path, engine)
    assert r.memories_added == n and r.memories_filed == n - (PROFILE_IMPORT_LIMIT - 1)
    assert any(e.get("filed") == r.memories_filed and e.get("log_level") == "warning" for e in logs)
    tier1 = await engine.list_memories("_global", tier=1, limit=10_000)
    tier2 = await engine.list_memories("_global", tier=2, limit=10_000)
    assert (len(tier1), len(tier2)) == (PROFILE_IMPORT_LIMIT, r.memories_filed)
    assert "The user's name is Mira" in {m.content for m in tier1}
    assert {m.content for m in tier1} >= {f"log line {i} status ok code {i * 7}" for i in range(PROFILE_IMPORT_LIMIT - 1)}
    # The filed ones are found when asked about.
    hits = await Retriever(engine).retrieve("_global", "what was log line 1400 with code 9800?")
    assert hits and hits[0].content == "log line 1400 status ok code 9800"
    # Imported once: run again, nothing moves.
    assert not (await migrate_files(tmp_path, engine)).changed
    assert all(m.status is Status.ACTIVE for m in tier2)


async def test_an_erased_line_saved_back_by_a_stale_editor_is_not_imported_again(
    tmp_path: Path, engine: MemoryEngine, clock: ManualClock
) -> None:
    """/forget erases a fact imported from a user's MEMORY.md and its line
    there; the editor that had the file open then saves its old copy. The
    line's hash is in the erased-lines ledger: not imported again (counted,
    the count logged, never the words), for ERASED_HOLD; another user's
    same line is theirs; after the hold, a line written back is imported."""
    files = FileMemory(tmp_path, clock)
    for user in ("alice", "bob"):
        files.user_dir(user).mkdir(parents=True)
        (files.user_dir(user) / ".owner").write_text(user)
    md = files.user_dir("alice") / "MEMORY.md"
    stale = "- My locker code is 4921\n- I live in Hangzhou\n"
    save(md, stale, 1)
    await migrate_files(tmp_path, engine)
    [m] = [m for m in await engine.list_memories("alice") if "4921" in m.content]
    out = await SqliteMemory(engine, files=files).forget("alice", [f"m{m.id}"])
    assert [h.id for h in out.erased] == [m.id] and md.read_text() == "- I live in Hangzhou\n"
    r = await migrate_files(tmp_path, engine)  # the file as the erasure left it
    assert not r.changed
    save(md, stale, 2)  # the editor's stale buffer
    with capture_logs() as logs:
        r = await migrate_files(tmp_path, engine)
    assert (r.memories_added, r.memories_erased) == (0, 1)
    assert any(e.get("erased") == 1 and e.get("file") == f"users/*-{user_slug('alice')[-12:]}/MEMORY.md"
               for e in logs)
    assert not any("4921" in repr(e) for e in logs)
    assert not [m for m in await engine.list_memories("alice") if "4921" in m.content]
    assert not (await migrate_files(tmp_path, engine)).changed  # unchanged file: nothing read again
    assert "4921" not in json.dumps([r["value"] for r in await engine.db.fetchall("SELECT value FROM meta")])
    # Bob's file with the same words: his own line.
    save(files.user_dir("bob") / "MEMORY.md", "- My locker code is 4921\n", 3)
    assert (await migrate_files(tmp_path, engine)).memories_added == 1
    # Later, written back anew: removed and put back after the hold, it is imported.
    clock.advance(ERASED_HOLD + timedelta(days=1))
    save(md, "- I live in Hangzhou\n", 4)
    await migrate_files(tmp_path, engine)
    save(md, stale, 5)
    r = await migrate_files(tmp_path, engine)
    assert (r.memories_added, r.memories_erased) == (1, 0)
    # An owner erased whole: their erased lines' record goes with their ledger.
    await SqliteMemory(engine, files=files).forget("alice", [f"m{m.id}" for m in await engine.list_memories("alice")])
    assert await engine.db.fetchone("SELECT 1 FROM meta WHERE key LIKE 'erased_lines:%alice%'")
    await engine.forget_owner("alice")
    assert not await engine.db.fetchone("SELECT 1 FROM meta WHERE key LIKE 'erased_lines:%alice%'")


async def test_a_hand_written_line_beside_a_full_learnt_profile_is_still_core_memory(
    tmp_path: Path, engine: MemoryEngine
) -> None:
    """The cap counts the entries imported from files: a user whose profile
    the weekly refresh filled adds a line by hand, and it is Tier 1 as before."""
    from memory import Category, NewMemory, Source

    for i in range(PROFILE_IMPORT_LIMIT):
        await engine.add(NewMemory(owner="_global", content=f"learnt entry {i}", tier=1, category=Category.IDENTITY,
                                   importance=1.0, source=Source.COMPRESSION))
    save(tmp_path / "memory" / "MEMORY.md", "- Call me Mira\n", 1)
    r = await migrate_files(tmp_path, engine)
    assert (r.memories_added, r.memories_filed) == (1, 0)
    assert "Call me Mira" in {m.content for m in await engine.list_memories("_global", tier=1, limit=1000)}


async def test_a_huge_paste_lets_a_reply_write_between_its_batches(tmp_path: Path, engine: MemoryEngine) -> None:
    """The import is IMPORT_BATCH rows per transaction: a reply's fact saved
    meanwhile is written between them (its id falls among the imported
    ones), not after the whole paste."""
    import asyncio

    from memory import Category, NewMemory, Source
    from memory.migrate import IMPORT_BATCH

    save(tmp_path / "memory" / "MEMORY.md", "".join(f"- pasted line {i}\n" for i in range(IMPORT_BATCH * 5)), 1)
    done = asyncio.Event()
    replies: list[int] = []

    async def reply() -> None:
        while not done.is_set():
            m = await engine.add(NewMemory(owner="alice", content=f"reply {len(replies)}", tier=2,
                                           category=Category.DECISION, importance=0.5, source=Source.MANUAL))
            replies.append(m.id)
            await asyncio.sleep(0)

    task = asyncio.create_task(reply())
    r = await migrate_files(tmp_path, engine)
    done.set()
    await task
    imported = sorted(m.id for m in await engine.list_memories("_global", limit=10_000))
    assert r.memories_added == len(imported) == IMPORT_BATCH * 5
    assert any(imported[0] < rid < imported[-1] for rid in replies)
