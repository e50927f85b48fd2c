"""The erased-lines ledger holds keyed hashes: a short secret's line cannot
be found again by hashing guesses (memory/erasedlines.py).

It held a plain SHA-256 of each erased line for 30 days, so "my PIN is
4821" was one of ten thousand hashes away. Now each is an HMAC under a
random key kept in a file beside memory.db (not in it: a copy of the
database alone is not enough to guess with); entries written the old way
still match until they expire."""

from __future__ import annotations

import json
import stat
from datetime import timedelta
from pathlib import Path

from memory import ManualClock, MemoryEngine
from memory.clock import format_ts
from memory.engine import content_hash
from memory.erasedlines import ERASED_HOLD, KEY_FILE, erased_hashes
from memory.filestore import FileMemory
from memory.migrate import migrate_files
from memory.service import SqliteMemory

from .test_migrate_edges import save


async def _ledger(engine: MemoryEngine, owner: str) -> dict[str, str]:
    row = await engine.db.fetchone("SELECT value FROM meta WHERE key = ?", ("erased_lines:" + json.dumps(owner),))
    return dict(json.loads(row["value"])) if row else {}


async def _erased_pin(tmp_path: Path, engine: MemoryEngine, clock: ManualClock) -> tuple[FileMemory, Path, str]:
    files = FileMemory(tmp_path, clock)
    files.user_dir("alice").mkdir(parents=True)
    (files.user_dir("alice") / ".owner").write_text("alice")
    md = files.user_dir("alice") / "MEMORY.md"
    stale = "- My PIN is 4821\n- I live in Hangzhou\n"
    save(md, stale, 1)
    await migrate_files(tmp_path, engine)
    [m] = [m for m in await engine.list_memories("alice") if "4821" in m.content]
    await SqliteMemory(engine, files=files).forget("alice", [f"m{m.id}"])
    await migrate_files(tmp_path, engine)  # the file as the erasure left it
    return files, md, stale


async def test_an_erased_pin_cannot_be_guessed_from_the_ledger_and_its_stale_copy_is_still_refused(
    tmp_path: Path, engine: MemoryEngine, clock: ManualClock
) -> None:
    files, md, stale = await _erased_pin(tmp_path, engine, clock)
    ledger = await _ledger(engine, "alice")
    assert len(ledger) == 1
    guesses = {content_hash(f"My PIN is {n:04d}") for n in range(10_000)}
    assert not guesses & set(ledger), "the erased PIN is one plain hash among ten thousand guesses"
    assert not any(g in v for g in guesses for v in ledger)
    # The key: a file of its own beside memory.db, owner-only; not in the database.
    key = tmp_path / KEY_FILE
    assert key.is_file() and stat.S_IMODE(key.stat().st_mode) == 0o600
    assert len(bytes.fromhex(key.read_text().strip())) == 32
    assert not list(tmp_path.glob(f".{KEY_FILE}.*"))  # written aside, then linked: no leftover
    assert key.read_text().strip() not in json.dumps(
        [r["value"] for r in await engine.db.fetchall("SELECT value FROM meta")])
    # What the ledger is for still works: the editor's stale copy is not imported.
    save(md, stale, 2)
    r = await migrate_files(tmp_path, engine)
    assert (r.memories_added, r.memories_erased) == (0, 1)
    assert not [m for m in await engine.list_memories("alice") if "4821" in m.content]


async def test_the_key_is_made_once_and_kept_across_opens(tmp_path: Path, engine: MemoryEngine, clock: ManualClock) -> None:
    files, md, stale = await _erased_pin(tmp_path, engine, clock)
    key = (tmp_path / KEY_FILE).read_bytes()
    await engine.close()
    again = await MemoryEngine.open(tmp_path / "memory.db", clock)
    try:
        assert (tmp_path / KEY_FILE).read_bytes() == key
        assert content_hash("My PIN is 4821") in await erased_hashes(again.db, "alice", clock.now())
        save(md, stale, 2)
        assert (await migrate_files(tmp_path, again)).memories_erased == 1
    finally:
        await again.close()


async def test_an_entry_written_the_old_way_still_matches_until_it_expires(
    tmp_path: Path, engine: MemoryEngine, clock: ManualClock
) -> None:
    """A ledger from before keyed hashes: its plain entries are kept (and
    matched) beside new ones until the hold ends; none is rewritten."""
    files = FileMemory(tmp_path, clock)
    files.user_dir("alice").mkdir(parents=True)
    (files.user_dir("alice") / ".owner").write_text("alice")
    old = content_hash("My locker code is 4921")
    await engine.db.write("INSERT INTO meta(key, value) VALUES (?, ?)",
                          ("erased_lines:" + json.dumps("alice"), json.dumps({old: format_ts(clock.now())})))
    md = files.user_dir("alice") / "MEMORY.md"
    save(md, "- My locker code is 4921\n", 1)
    r = await migrate_files(tmp_path, engine)
    assert (r.memories_added, r.memories_erased) == (0, 1)
    # A new erasure beside it: both held, the old one as it was.
    save(md, "- My locker code is 4921\n- My PIN is 4821\n", 2)
    await migrate_files(tmp_path, engine)
    [m] = [m for m in await engine.list_memories("alice") if "4821" in m.content]
    await SqliteMemory(engine, files=files).forget("alice", [f"m{m.id}"])
    await migrate_files(tmp_path, engine)
    ledger = await _ledger(engine, "alice")
    assert old in ledger and len(ledger) == 2
    held = await erased_hashes(engine.db, "alice", clock.now())
    assert old in held and content_hash("My PIN is 4821") in held
    # Expired: the old way's entry goes, and its line written back is imported.
    clock.advance(ERASED_HOLD + timedelta(days=1))
    save(md, "- Likes green tea\n", 3)
    await migrate_files(tmp_path, engine)
    save(md, "- Likes green tea\n- My locker code is 4921\n", 4)
    r = await migrate_files(tmp_path, engine)
    assert (r.memories_added, r.memories_erased) == (1, 0)

