from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from memory import Category, ManualClock, MemoryEngine, MemoryNotFound, NewMemory, Provenance, Source, Status
from memory.db import Database, SchemaTooNew
from memory.schema import MIGRATIONS
from memory.tokenize import index_text
from tests.disk import on_disk


async def fts_ids(engine: MemoryEngine) -> set[int]:
    return {r[0] for r in await engine.db.fetchall("SELECT rowid FROM memories_fts")}


async def test_schema_version_and_tables(engine: MemoryEngine) -> None:
    row = await engine.db.fetchone("PRAGMA user_version")
    assert row[0] == len(MIGRATIONS)
    names = {r[0] for r in await engine.db.fetchall("SELECT name FROM sqlite_master")}
    tables = {"memories", "memories_fts", "daily_events", "events_fts", "buffer_gone", "job_leases", "memory_log"}
    assert tables <= names
    # The extraction buffer is a file of its own (memory/db.py says why).
    assert "extraction_buffer" not in names
    side = {r[0] for r in await engine.db.fetchall("SELECT name FROM buffer.sqlite_master")}
    assert {"extraction_buffer", "idx_buffer_owner", "idx_buffer_message"} <= side
    assert (engine.db.path.parent / "memory.buffer.db").is_file()
    for schema in ("main", "buffer"):
        mode = await engine.db.fetchone(f"PRAGMA {schema}.journal_mode")
        assert mode[0] == "wal"


async def test_add_keeps_provenance_and_times(engine: MemoryEngine, clock: ManualClock) -> None:
    prov = Provenance(channel="telegram", chat_id="42", message_ids=("7", "8"), refs=("buf:1",))
    m = await engine.add(NewMemory(owner="alice", content="  Alice prefers pnpm  ", category=Category.CONFIG,
                                   importance=0.9, project="myclaw", topic="tools", source=Source.MANUAL, provenance=prov))
    got = await engine.get(m.id)
    assert got is not None
    assert got.content == "Alice prefers pnpm"
    assert got.provenance == prov
    assert got.created_at == "2026-03-01T12:00:00Z"
    assert (got.project, got.topic, got.category, got.source, got.status) == ("myclaw", "tools", Category.CONFIG, Source.MANUAL, Status.ACTIVE)


@pytest.mark.parametrize("content", ["", "   ", "\x00"])
async def test_empty_content_is_rejected(engine: MemoryEngine, content: str) -> None:
    with pytest.raises(ValueError, match="empty"):
        await engine.add(NewMemory(owner="a", content=content))


async def test_importance_out_of_range_is_rejected(engine: MemoryEngine) -> None:
    with pytest.raises(ValueError, match="importance"):
        await engine.add(NewMemory(owner="a", content="x", importance=1.5))


async def test_only_active_rows_are_indexed(engine: MemoryEngine) -> None:
    a = await engine.add(NewMemory(owner="u", content="lives in Beijing"))
    b = await engine.add(NewMemory(owner="u", content="lives in Shanghai"))
    await engine.set_status(a.id, Status.SUPERSEDED, superseded_by=b.id)
    assert await fts_ids(engine) == {b.id}
    old = await engine.get(a.id)
    assert old is not None and old.status is Status.SUPERSEDED and old.superseded_by == b.id
    await engine.set_status(a.id, Status.ACTIVE)
    assert await fts_ids(engine) == {a.id, b.id}


async def test_update_content_reindexes(engine: MemoryEngine) -> None:
    m = await engine.add(NewMemory(owner="u", content="uses npm"))
    await engine.update(m.id, content="uses pnpm", importance=0.8)
    rows = await engine.db.fetchall("SELECT text FROM memories_fts WHERE rowid = ?", (m.id,))
    assert rows[0][0] == index_text("uses pnpm")  # the FTS row follows the new content
    got = await engine.get(m.id)
    assert got is not None and got.importance == 0.8


async def test_delete_erases_row_and_index(engine: MemoryEngine) -> None:
    m = await engine.add(NewMemory(owner="u", content="secret thing"))
    await engine.delete(m.id)
    assert await engine.get(m.id) is None
    assert await fts_ids(engine) == set()
    with pytest.raises(MemoryNotFound):
        await engine.delete(m.id)


async def test_failed_transaction_leaves_nothing(engine: MemoryEngine) -> None:
    with pytest.raises(RuntimeError):
        async with engine.db.transaction() as conn:
            await engine.add(NewMemory(owner="u", content="half written"), conn=conn)
            raise RuntimeError("crash between steps")
    assert await engine.list_memories("u") == []
    assert await fts_ids(engine) == set()


async def test_profile_is_scoped_to_owner_plus_global(engine: MemoryEngine) -> None:
    await engine.add(NewMemory(owner="alice", tier=1, content="Alice is a Go developer", importance=0.9, category=Category.IDENTITY))
    await engine.add(NewMemory(owner="bob", tier=1, content="Bob is a designer", importance=1.0, category=Category.IDENTITY))
    await engine.add(NewMemory(owner="_global", tier=1, content="The team deploys on Fridays", importance=0.5))
    await engine.add(NewMemory(owner="alice", tier=2, content="Alice had coffee", importance=1.0))
    text = await engine.profile_markdown("alice")
    assert text == "- Alice is a Go developer\n- The team deploys on Fridays"
    assert "Bob" not in text
    assert await engine.profile_markdown("alice", include_global=False) == "- Alice is a Go developer"


async def test_profile_caps_at_limit_by_importance(engine: MemoryEngine) -> None:
    await engine.add_many(
        (NewMemory(owner="u", tier=1, content=f"fact {i}", importance=i / 200), None) for i in range(150)
    )
    prof = await engine.profile("u")
    assert len(prof) == 100
    assert prof[0].content == "fact 149"


async def test_access_is_batched_and_flushed(engine: MemoryEngine, clock: ManualClock) -> None:
    m = await engine.add(NewMemory(owner="u", content="x"))
    clock.advance(3600)
    engine.note_access([m.id, m.id])
    before = await engine.get(m.id)
    assert before is not None and before.access_count == 0  # nothing written on the read path
    assert await engine.flush_access() == 1
    after = await engine.get(m.id)
    assert after is not None and after.access_count == 2 and after.last_accessed == "2026-03-01T13:00:00Z"


async def test_close_on_a_full_disk_closes_without_the_last_access_counts(tmp_path: Path, clock: ManualClock) -> None:
    """Found by scripts/chaos_kill.py --disk-full: the gateway's stop on a
    full disk ended in a traceback (exit 1) from the last access flush, and
    what App.close() had still to do was skipped. The counts only say how
    often a memory was recalled: they are given up, the file is closed."""
    engine = await MemoryEngine.open(tmp_path / "memory.db", clock)
    m = await engine.add(NewMemory(owner="u", content="x"))
    with sqlite3.connect(tmp_path / "memory.db") as db:  # the update fails for real, as on a full disk
        db.execute("CREATE TRIGGER full BEFORE UPDATE OF access_count ON memories "
                   "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")
    engine.note_access([m.id])
    await engine.close()
    assert engine.db.closed
    with sqlite3.connect(tmp_path / "memory.db") as db:
        assert db.execute("SELECT content, access_count FROM memories").fetchall() == [("x", 0)]


async def test_events_roundtrip_and_compression_flag(engine: MemoryEngine) -> None:
    e1 = await engine.add_event("u", "2026-02-28", "Discussed the deploy", channel="telegram", raw_tokens=120)
    await engine.add_event("u", "2026-03-01", "Chose SQLite")
    await engine.add_event("v", "2026-02-28", "Someone else's day")
    evs = await engine.events("u", date_from="2026-02-28", date_to="2026-02-28")
    assert [e.id for e in evs] == [e1.id]
    await engine.mark_events_compressed([e1.id])
    assert [e.summary for e in await engine.events("u", uncompressed_only=True)] == ["Chose SQLite"]
    with pytest.raises(ValueError):
        await engine.add_event("u", "28/02/2026", "bad date")


async def test_reopen_keeps_everything(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "m.db"
    async with await MemoryEngine.open(path, clock) as eng:
        await eng.add(NewMemory(owner="u", content="persisted"))
    async with await MemoryEngine.open(path, clock) as eng:
        assert [m.content for m in await eng.list_memories("u")] == ["persisted"]


async def test_tokenizer_change_triggers_reindex(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "m.db"
    async with await MemoryEngine.open(path, clock) as eng:
        await eng.add(NewMemory(owner="u", content="部署密码"))
        async with eng.db.transaction() as conn:
            await conn.execute("UPDATE meta SET value = 'old' WHERE key = 'tokenizer'")
            await conn.execute("DELETE FROM memories_fts")
    async with await MemoryEngine.open(path, clock) as eng:
        assert len(await eng.db.fetchall("SELECT rowid FROM memories_fts")) == 1


async def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    con = sqlite3.connect(path)
    con.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    con.close()
    with pytest.raises(SchemaTooNew):
        await Database.open(path, MIGRATIONS)


async def test_stats_counts(engine: MemoryEngine) -> None:
    a = await engine.add(NewMemory(owner="u", content="a", category=Category.DECISION))
    await engine.add(NewMemory(owner="u", content="b", tier=1, category=Category.IDENTITY))
    await engine.set_status(a.id, Status.ARCHIVED)
    await engine.add_event("u", "2026-03-01", "e")
    s = await engine.stats("u")
    assert s.total == 2 and s.by_status == {"active": 1, "archived": 1}
    assert s.by_tier == {"1": 1} and s.events == 1 and s.events_uncompressed == 1


async def test_close_is_idempotent(tmp_path: Path) -> None:
    eng = await MemoryEngine.open(tmp_path / "m.db")
    await eng.close()
    await eng.close()
    with pytest.raises(RuntimeError):
        await eng.db.fetchall("SELECT 1")


async def test_erasing_a_memory_scrubs_its_words_from_the_change_log(engine: MemoryEngine) -> None:
    from memory.changelog import read_log, write_log

    m = await engine.add(NewMemory(owner="u", content='my "old" PIN is 4921'))
    keep = await engine.add(NewMemory(owner="u", content="likes tea"))
    async with engine.db.transaction() as conn:
        await write_log(conn, at=engine.now(), job="weekly", owner="u", action="merged", memory_id=keep.id,
                        detail={"from": ['my "old" PIN is 4921', "likes tea"]})
        await write_log(conn, at=engine.now(), job="web", owner="u", action="edit", memory_id=m.id, detail="x")
        await write_log(conn, at=engine.now(), job="weekly", owner="u", action="promoted", memory_id=keep.id,
                        detail={"content": "likes tea"})
    await engine.delete(m.id)
    details = [e.detail for e in await read_log(engine.db)]
    assert not any("4921" in d for d in details)
    assert details.count('{"erased":true}') == 2 and '{"content":"likes tea"}' in details


async def test_forget_owner_erases_everything_of_that_user_only(engine: MemoryEngine) -> None:
    from memory.backend import Turn
    from memory.service import SqliteMemory

    old = await engine.add(NewMemory(owner="alice", content="lives in Beijing"))
    new = await engine.add(NewMemory(owner="alice", content="lives in Shanghai"))
    await engine.set_status(old.id, Status.SUPERSEDED, superseded_by=new.id)
    await engine.add_event("alice", "2026-03-01", "talked about moving")
    await SqliteMemory(engine).buffer([Turn(owner="alice", channel="t", chat_id="1", role="user", content="hi")])
    bob = await engine.add(NewMemory(owner="bob", content="lives in Hangzhou"))
    await engine.add_event("bob", "2026-03-01", "bob's day")

    counts = await engine.forget_owner("alice")
    assert counts == {"memories": 2, "events": 1, "buffered": 1, "log": 0}
    for table in ("memories", "daily_events", "extraction_buffer"):
        rows = await engine.db.fetchall(f"SELECT owner FROM {table}")
        assert {r[0] for r in rows} <= {"bob"}
    assert {r[0] for r in await engine.db.fetchall("SELECT rowid FROM memories_fts")} == {bob.id}
    assert len(await engine.db.fetchall("SELECT rowid FROM events_fts")) == 1


async def test_inline_reader_sees_every_commit_and_only_reads(tmp_path: Path) -> None:
    # Database.reader runs retrieval's short queries on the event loop's
    # thread (memory/db.py); it must read what the writer committed.
    import threading

    db = await Database.open(tmp_path / "x.db", MIGRATIONS)
    try:
        await db.write("INSERT INTO meta(key, value) VALUES ('k', 'v1')")
        rows = await db.reader.execute_fetchall("SELECT value FROM meta WHERE key = ?", ("k",))
        assert [r["value"] for r in rows] == ["v1"]
        await db.write("UPDATE meta SET value = 'v2' WHERE key = 'k'")
        assert [r[0] for r in await db.reader.execute_fetchall("SELECT value FROM meta WHERE key = 'k'")] == ["v2"]
        seen: list[str] = []
        db.reader._conn.create_function("who", 0, lambda: seen.append(threading.current_thread().name) or 1)  # type: ignore[union-attr]
        await db.reader.execute_fetchall("SELECT who()")
        assert seen == [threading.current_thread().name]  # no hop to another thread
        with pytest.raises(sqlite3.OperationalError):
            await db.reader.execute_fetchall("DELETE FROM meta")
    finally:
        await db.close()
    with pytest.raises(RuntimeError, match="closed"):
        db.reader  # noqa: B018


async def test_single_writes_never_land_inside_an_open_transaction(tmp_path: Path) -> None:
    # Database.write does not take the writer lock when no transaction is
    # open; one started meanwhile must neither include nor lose it.
    import asyncio

    db = await Database.open(tmp_path / "w.db", MIGRATIONS)
    try:
        before = db.write("INSERT INTO meta(key, value) VALUES ('before', '1')")
        task = asyncio.ensure_future(before)
        await asyncio.sleep(0)  # queued to the writer thread
        with pytest.raises(RuntimeError):
            async with db.transaction() as conn:
                await conn.execute("INSERT INTO meta(key, value) VALUES ('inside', '1')")
                during = asyncio.ensure_future(db.write("INSERT INTO meta(key, value) VALUES ('during', '1')"))
                await asyncio.sleep(0.05)
                assert not during.done()  # waits for the transaction to end
                raise RuntimeError("roll back")
        await task
        await during
        keys = {r[0] for r in await db.fetchall("SELECT key FROM meta")}
        assert {"before", "during"} <= keys and "inside" not in keys
    finally:
        await db.close()


async def test_source_text_is_indexed_with_the_memory_and_follows_it(engine: MemoryEngine) -> None:
    said = "we finally moved the deploys from Jenkins over to Drone"
    m = await engine.add(NewMemory(owner="u", content="CI runs on Drone", source_text=f"  {said}\x00 "))
    got = await engine.get(m.id)
    assert got is not None and got.content == "CI runs on Drone" and got.source_text == said

    async def fts_text() -> str | None:
        rows = await engine.db.fetchall("SELECT text FROM memories_fts WHERE rowid = ?", (m.id,))
        return rows[0][0] if rows else None

    assert await fts_text() == index_text(f"CI runs on Drone\n{said}")
    await engine.update(m.id, content="CI runs on Drone since May")  # an edit keeps the words said
    assert await fts_text() == index_text(f"CI runs on Drone since May\n{said}")
    await engine.update(m.id, source_text="")
    assert await fts_text() == index_text("CI runs on Drone since May")
    await engine.update(m.id, source_text="Jenkins was too slow")
    await engine.set_status(m.id, Status.ARCHIVED)
    assert await fts_text() is None
    await engine.set_status(m.id, Status.ACTIVE)  # restored with its source words
    assert await fts_text() == index_text("CI runs on Drone since May\nJenkins was too slow")
    async with engine.db.transaction() as conn:
        await conn.execute("DELETE FROM memories_fts")
    await engine.reindex()
    assert await fts_text() == index_text("CI runs on Drone since May\nJenkins was too slow")


async def test_source_text_is_cut_at_a_word(engine: MemoryEngine) -> None:
    from memory.engine import MAX_SOURCE_CHARS

    m = await engine.add(NewMemory(owner="u", content="a long story", source_text="word " * 1000))
    got = await engine.get(m.id)
    assert got is not None and len(got.source_text) <= MAX_SOURCE_CHARS and got.source_text.endswith("word")


async def test_a_database_from_before_source_text_is_migrated(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "m.db"
    db = await Database.open(path, MIGRATIONS[:2])  # the schema as shipped before source_text
    async with db.transaction() as conn:
        await conn.execute(
            "INSERT INTO memories (owner, content, content_hash, created_at, updated_at, last_accessed) "
            "VALUES ('u', 'uses pnpm', 'h', 't', 't', 't')"
        )
        await conn.execute("INSERT INTO memories_fts(rowid, owner, text) VALUES (1, 'o', 'uses pnpm')")
    await db.close()
    async with await MemoryEngine.open(path, clock) as eng:
        [m] = await eng.list_memories("u")
        assert (m.content, m.source_text) == ("uses pnpm", "")
        await eng.update(m.id, source_text="switched from npm to pnpm")
        got = await eng.get(m.id)
        assert got is not None and got.source_text == "switched from npm to pnpm"


async def test_reworded_words_leave_the_change_log_and_the_file(tmp_path: Path, clock: ManualClock) -> None:
    # Extraction (and an add by hand) logs a fact's words; an operator's edit
    # that takes a secret out of it must take it out of the log as well.
    from memory.changelog import read_log, write_log

    engine = await MemoryEngine.open(tmp_path / "memory.db", clock)
    try:
        m = await engine.add(NewMemory(owner="alice", content="alice's door code is zqxjkv4711"))
        other = await engine.add(NewMemory(owner="bob", content="bob's note: alice's door code is zqxjkv4711"))
        async with engine.db.transaction() as conn:
            await write_log(conn, at=engine.now(), job="extraction", owner="alice", action="add", memory_id=m.id,
                            detail=m.content)
            await write_log(conn, at=engine.now(), job="extraction", owner="bob", action="add", memory_id=other.id,
                            detail=other.content)
        await engine.update(m.id, content="alice's door code is in her password manager")
        await engine.purge_erased()
        [alice] = await read_log(engine.db, owner="alice")
        assert (alice.action, alice.memory_id, alice.detail) == ("add", m.id, '{"reworded":true}')
        [bob] = await read_log(engine.db, owner="bob")
        assert bob.detail == other.content  # another user's log is theirs: untouched
        await engine.update(other.id, content="bob's note")
        await engine.purge_erased()
    finally:
        await engine.close()
    assert on_disk(tmp_path, "zqxjkv4711") == 0


async def test_erased_words_are_gone_from_the_file_not_only_from_the_tables(tmp_path: Path, clock: ManualClock) -> None:
    """FTS5 keeps a deleted row's words in its index segments until they
    merge, and SQLite leaves deleted bytes in free pages: "erase for good"
    has to mean the disk too."""
    folder = tmp_path / "db"
    folder.mkdir()
    engine = await MemoryEngine.open(folder / "memory.db", clock)
    try:
        for i in range(200):
            await engine.add(NewMemory(owner="alice", content=f"alice note {i} about the weather and green tea"))
        door = await engine.add(NewMemory(owner="alice", content="alice's door code is zqxjkv4711"))
        await engine.add(NewMemory(owner="bob", content="bob's bank pin is wvutsr1234"))
        await engine.add_event("bob", "2026-03-01", "bob read his pin wvutsr1234 aloud")
        await engine.delete(door.id)
        await engine.db.compact()  # the free pages alone are not enough:
        assert on_disk(folder, "zqxjkv4711") > 0  # the index still holds the word
        await engine.purge_erased()
        assert on_disk(folder, "zqxjkv4711") == 0
        await engine.forget_owner("bob")  # purges by itself
        assert on_disk(folder, "wvutsr1234") == 0
        # What was not erased is still there and still found.
        assert (await engine.db.fetchone("SELECT count(*) FROM memories WHERE owner = 'alice'"))[0] == 200
        assert len(await engine.db.fetchall("SELECT rowid FROM memories_fts WHERE memories_fts MATCH 'tea'")) == 200
    finally:
        await engine.close()
    assert on_disk(folder, "zqxjkv4711") == 0 and on_disk(folder, "wvutsr1234") == 0


async def test_the_per_owner_projects_cache_is_capped_and_forgets_nothing(tmp_path: Path, clock: ManualClock) -> None:
    # A gateway meets thousands of users over months: a capped cache.
    engine = await MemoryEngine.open(tmp_path / "memory.db", clock, owners_kept=4)
    try:
        await engine.add(NewMemory(owner="telegram:1", content="we ship Atlas on Friday", project="atlas"))
        assert await engine.known_projects("telegram:1") == frozenset({"atlas"})
        for i in range(2, 22):
            assert await engine.known_projects(f"telegram:{i}") == frozenset()
        assert len(engine._projects) <= 4
        assert await engine.known_projects("telegram:1") == frozenset({"atlas"})  # read again
    finally:
        await engine.close()


async def _fact(engine: MemoryEngine, owner: str, content: str, source_text: str = "") -> int:
    m = await engine.add(NewMemory(owner=owner, content=content, category=Category.IDENTITY, importance=1.0,
                                   source_text=source_text))
    return m.id


async def test_a_fact_that_replaced_another_is_found_by_the_old_facts_words(engine: MemoryEngine) -> None:
    """"User moved to Berlin" shares no word with "where do I live?": the
    fact it replaced did ("User lives in Shanghai"), so its FTS row carries
    those words (never shown), and so does a later replacement's."""
    from memory.retrieval import Retriever

    r = Retriever(engine)
    old = await _fact(engine, "alice", "User lives in Shanghai", "I live in Shanghai")
    zh_old = await _fact(engine, "alice", "用户住在上海")
    await _fact(engine, "alice", "User has a cat named Miso")
    await _fact(engine, "bob", "Bob lives in Paris")  # another user's words never reach alice's rows
    new = await _fact(engine, "alice", "User moved to Berlin", "I moved to Berlin last week")
    zh_new = await _fact(engine, "alice", "用户搬到了柏林")
    assert not [h for h in await r.retrieve("alice", "where do I live?") if h.id == new]  # before: no shared word
    await engine.set_status(old, "superseded", superseded_by=new)
    await engine.set_status(zh_old, "superseded", superseded_by=zh_new)

    for q in ("where do I live?", "do I still live in Shanghai?"):
        hits = await r.retrieve("alice", q)
        assert hits[0].id == new and hits[0].content == "User moved to Berlin", q
    assert (await r.retrieve("alice", "我住在哪里？"))[0].id == zh_new
    # A second move carries both older facts' words.
    newer = await _fact(engine, "alice", "User relocated to Munich")
    await engine.set_status(new, "superseded", superseded_by=newer)
    assert (await r.retrieve("alice", "do I still live in Shanghai?"))[0].id == newer
    assert (await r.retrieve("alice", "am I in Berlin?"))[0].id == newer
    # The words survive an edit and a reindex, and go when the old fact is erased.
    await engine.update(newer, source_text="we found a flat")
    await engine.reindex()
    assert (await r.retrieve("alice", "do I still live in Shanghai?"))[0].id == newer
    await engine.delete(old)
    assert "shanghai" not in (await engine.db.fetchone(
        "SELECT text FROM memories_fts WHERE rowid = ?", (newer,)))[0]
    assert not await r.retrieve("alice", "Shanghai")
    assert "paris" not in " ".join(r[0] for r in await engine.db.fetchall(
        "SELECT text FROM memories_fts WHERE rowid <> (SELECT id FROM memories WHERE owner = 'bob')"))


async def test_an_index_written_before_replaced_words_is_rebuilt_on_open(tmp_path: Path, clock: ManualClock) -> None:
    """A file indexed by older code (``meta.tokenizer`` without
    ``+replaced``) has its replacing facts' rows without the old words:
    opening it reindexes, and "where do I live?" finds the move."""
    from memory.engine import INDEX_VERSION
    from memory.retrieval import Retriever
    from memory.tokenize import TOKENIZER_VERSION

    path = tmp_path / "m.db"
    async with await MemoryEngine.open(path, clock) as eng:
        old = await _fact(eng, "alice", "User lives in Shanghai")
        new = await _fact(eng, "alice", "User moved to Berlin")
        await eng.set_status(old, "superseded", superseded_by=new)
        async with eng.db.transaction() as conn:  # as the older code left them
            await conn.execute("UPDATE memories_fts SET text = ? WHERE rowid = ?",
                               (index_text("User moved to Berlin"), new))
            await conn.execute("UPDATE meta SET value = ? WHERE key = 'tokenizer'", (TOKENIZER_VERSION,))
        assert not await Retriever(eng).retrieve("alice", "where do I live?")
    async with await MemoryEngine.open(path, clock) as eng:
        assert (await eng.db.fetchone("SELECT value FROM meta WHERE key = 'tokenizer'"))[0] == INDEX_VERSION
        assert [h.id for h in await Retriever(eng).retrieve("alice", "where do I live?")] == [new]
