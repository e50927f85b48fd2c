"""The extraction buffer in its own file (memory/buffer.py, memory/schema.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

from memory import Category, ManualClock, MemoryEngine, NewMemory
from memory.db import Database
from memory.extraction import ExtractionService
from memory.llm import MemoryLLM
from memory.schema import MIGRATIONS
from memory.service import SqliteMemory
from tests.disk import on_disk
from tests.fakes.openai_server import FakeOpenAI, Reply

from ._writepath import fake, llm, reply, turns  # noqa: F401

_INSERT = (
    "INSERT INTO extraction_buffer (id, owner, channel, chat_id, message_id, role, content, token_count, created_at) "
    "VALUES (?, 'alice', 'telegram', '1', ?, 'user', ?, 3, '2026-03-01T10:00:00Z')"
)


async def lines(engine: MemoryEngine) -> list[tuple[int, str]]:
    return [(r[0], r[1]) for r in await engine.db.fetchall("SELECT id, content FROM extraction_buffer ORDER BY id")]


async def counts(engine: MemoryEngine) -> tuple[int, int, int]:
    rows = [
        await engine.db.fetchone(f"SELECT COUNT(*) FROM {t}")
        for t in ("memories", "daily_events", "extraction_buffer")
    ]
    return tuple(r[0] for r in rows)  # type: ignore[index, return-value]


def lose_last_commit_of_buffer_file(folder: Path, saved: Path) -> None:
    """Put back the buffer file as it was before the last session: what a
    crash between memory.db's commit and the buffer file's would leave."""
    for f in folder.glob("memory.buffer.db*"):
        f.unlink()
    shutil.copy(saved, folder / "memory.buffer.db")


async def test_upgrade_moves_the_lines_keeping_their_ids_and_the_id_sequence(
    tmp_path: Path, clock: ManualClock
) -> None:
    path = tmp_path / "memory.db"
    old = await Database.open(path, MIGRATIONS[:4])  # a memory.db of before the move
    async with old.transaction() as conn:
        for i, text in ((1, "first zebra line"), (2, "second zebra line"), (3, "third zebra line")):
            await conn.execute(_INSERT, (i, str(i), text))
        await conn.execute("DELETE FROM extraction_buffer WHERE id = 3")  # extracted: a fact cites buf:3
    await old.close()

    engine = await MemoryEngine.open(path, clock)
    try:
        assert await lines(engine) == [(1, "first zebra line"), (2, "second zebra line")]
        tables = {r[0] for r in await engine.db.fetchall("SELECT name FROM main.sqlite_master")}
        assert "extraction_buffer" not in tables
        await SqliteMemory(engine).buffer(turns("alice", ("new line", "ok"), start=9))
        ids = [i for i, _ in await lines(engine)]
        assert ids[2:] == [4, 5]  # never 3: buf:3 still names the old line's batch
    finally:
        await engine.close()
    # The words left memory.db's pages, not only its tables (secure_delete).
    assert path.read_bytes().count(b"zebra") == 0
    assert (tmp_path / "memory.buffer.db").read_bytes().count(b"zebra") == 2


async def test_an_interrupted_upgrade_copies_again_and_loses_nothing(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "memory.db"
    old = await Database.open(path, MIGRATIONS[:4])
    async with old.transaction() as conn:
        await conn.execute(_INSERT, (7, "7", "a line"))
    await old.close()
    # The copy committed to the buffer file, then the process died before
    # memory.db let go of its table: run the copy alone, then open again.
    from memory.db import Attachment
    from memory.schema import BUFFER_MIGRATIONS, _adopt_buffer, buffer_path

    half = await Database.open(path, MIGRATIONS[:4], attach=Attachment("buffer", buffer_path(path), BUFFER_MIGRATIONS))
    async with half.transaction() as conn:
        await _adopt_buffer(conn)
    await half.close()
    engine = await MemoryEngine.open(path, clock)
    try:
        assert await lines(engine) == [(7, "a line")]
    finally:
        await engine.close()


async def test_a_buffer_file_before_set_aside_keeps_its_lines_all_waiting(tmp_path: Path, clock: ManualClock) -> None:
    from memory.db import Attachment
    from memory.schema import BUFFER_MIGRATIONS, buffer_path

    path = tmp_path / "memory.db"
    old = await Database.open(path, MIGRATIONS, attach=Attachment("buffer", buffer_path(path), BUFFER_MIGRATIONS[:1]))
    async with old.transaction() as conn:
        await conn.execute(_INSERT, (7, "7", "a line"))
    await old.close()
    engine = await MemoryEngine.open(path, clock)
    try:
        assert await lines(engine) == [(7, "a line")]
        assert [tuple(r) for r in await engine.db.fetchall("SELECT set_aside_at FROM extraction_buffer")] == [(None,)]
        assert (await engine.backlog()).lines == 1 and (await engine.backlog()).set_aside == 0
        assert tuple(await engine.db.fetchone("PRAGMA buffer.user_version") or ()) == (len(BUFFER_MIGRATIONS),)
    finally:
        await engine.close()


async def test_a_buffer_file_before_chat_kinds_knows_its_telegram_groups(tmp_path: Path, clock: ManualClock) -> None:
    """Lines waiting from before the buffer kept the chat's kind: a Telegram
    group's (negative id) are known as a group's; others as before."""
    from memory.db import Attachment
    from memory.schema import BUFFER_MIGRATIONS, buffer_path

    path = tmp_path / "memory.db"
    old = await Database.open(path, MIGRATIONS, attach=Attachment("buffer", buffer_path(path), BUFFER_MIGRATIONS[:2]))
    async with old.transaction() as conn:
        await conn.execute(_INSERT, (7, "7", "a private line"))
        await conn.execute(_INSERT.replace("'1'", "'-100'"), (8, "8", "a group's line"))
    await old.close()
    engine = await MemoryEngine.open(path, clock)
    try:
        kinds = [tuple(r) for r in await engine.db.fetchall("SELECT id, in_group FROM extraction_buffer ORDER BY id")]
        assert kinds == [(7, 0), (8, 1)]
    finally:
        await engine.close()


async def test_a_buffered_message_does_not_reset_the_read_path_cache(engine: MemoryEngine) -> None:
    # Another connection's commit to a WAL file makes SQLite drop the
    # reader's whole page cache; ``data_version`` counts those commits.
    reader = engine.db.reader

    async def version() -> int:
        return int((await reader.execute_fetchall("PRAGMA data_version"))[0][0])

    before = await version()
    await SqliteMemory(engine).buffer(turns("alice", ("I moved to Berlin", "noted")))
    assert await version() == before
    await engine.add(NewMemory(owner="alice", content="Alice lives in Berlin", category=Category.IDENTITY))
    assert await version() != before


async def test_lines_recorded_gone_are_never_extracted(engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM) -> None:
    mem = SqliteMemory(engine)
    await mem.buffer(turns("alice", ("I drink oolong", "nice"), ("I live in Hangzhou", "ok")))
    first, second = [i for i, _ in await lines(engine)][:2]
    # memory.db committed their deletion, the buffer file's half was lost.
    async with engine.db.transaction() as conn:
        await conn.executemany("INSERT INTO buffer_gone (id) VALUES (?)", [(first,), (second,)])
    fake.responder = lambda body: Reply(reply([{"content": "Alice lives in Hangzhou"}], "home"))
    [rep] = await ExtractionService(engine, llm).flush_now("alice")
    assert rep.ok and rep.rows == 2
    prompt = fake.requests[0]["messages"][-1]["content"]
    assert "oolong" not in prompt and "Hangzhou" in prompt


async def test_an_extracted_batch_whose_buffer_commit_was_lost_is_not_extracted_twice(
    tmp_path: Path, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    folder = tmp_path / "data"
    path = folder / "memory.db"
    engine = await MemoryEngine.open(path, clock)
    await SqliteMemory(engine).buffer(turns("alice", ("I live in Hangzhou and drink oolong", "nice")))
    await engine.close()
    saved = shutil.copy(folder / "memory.buffer.db", tmp_path / "saved.db")

    fake.responder = lambda body: Reply(reply([{"content": "Alice lives in Hangzhou"}], "tea talk"))
    engine = await MemoryEngine.open(path, clock)
    [rep] = await ExtractionService(engine, llm).flush_now("alice")
    assert rep.ok and await counts(engine) == (1, 1, 0)
    await engine.close()

    lose_last_commit_of_buffer_file(folder, Path(saved))
    engine = await MemoryEngine.open(path, clock)  # restart: the lines are deleted on open
    try:
        assert await counts(engine) == (1, 1, 0)
        assert await ExtractionService(engine, llm).flush_now("alice") == []
        assert len(fake.requests) == 1
        assert await engine.db.fetchall("SELECT id FROM buffer_gone") == []
    finally:
        await engine.close()


async def test_lines_of_a_forgotten_fact_stay_gone_when_the_buffer_commit_was_lost(
    tmp_path: Path, clock: ManualClock
) -> None:
    folder = tmp_path / "data"
    path = folder / "memory.db"
    engine = await MemoryEngine.open(path, clock)
    mem = SqliteMemory(engine)
    fact = await engine.add(NewMemory(owner="alice", content="my bank PIN is 4921", category=Category.CREDENTIAL))
    await mem.buffer(turns("alice", ("my bank PIN is 4921", "ok"), ("I like tea", "ok"), start=1))
    await engine.close()
    saved = shutil.copy(folder / "memory.buffer.db", tmp_path / "saved.db")

    engine = await MemoryEngine.open(path, clock)
    gone = await SqliteMemory(engine).forget("alice", [f"m{fact.id}"])
    assert gone.buffered_lines == 1
    await engine.close()

    lose_last_commit_of_buffer_file(folder, Path(saved))
    engine = await MemoryEngine.open(path, clock)
    try:
        assert [t for _, t in await lines(engine)] == ["ok", "I like tea", "ok"]
    finally:
        await engine.close()
    assert on_disk(folder, "4921") == 0


async def test_forgetting_a_user_records_the_lines_gone_with_the_rest(engine: MemoryEngine) -> None:
    await SqliteMemory(engine).buffer(turns("alice", ("hello", "hi")) + turns("bob", ("hey", "yo")))
    alice = [r[0] for r in await engine.db.fetchall("SELECT id FROM extraction_buffer WHERE owner = 'alice'")]
    counts_ = await engine.forget_owner("alice")
    assert counts_["buffered"] == 2
    gone = {r[0] for r in await engine.db.fetchall("SELECT id FROM buffer_gone")}
    assert set(alice) <= gone
    assert [r[0] for r in await engine.db.fetchall("SELECT owner FROM extraction_buffer")] == ["bob", "bob"]


async def test_a_buffer_file_that_starts_over_never_reuses_a_cited_id(
    tmp_path: Path, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    folder = tmp_path / "data"
    path = folder / "memory.db"
    engine = await MemoryEngine.open(path, clock)
    await SqliteMemory(engine).buffer(turns("alice", ("I live in Hangzhou", "nice"), ("I drink oolong", "ok")))
    fake.responder = lambda body: Reply(reply([{"content": "Alice lives in Hangzhou"}], "tea talk"))
    [rep] = await ExtractionService(engine, llm).flush_now("alice")
    assert rep.ok
    [fact] = await engine.list_memories("alice")
    assert fact.provenance.refs == ("buf:1", "buf:2", "buf:3", "buf:4")
    await engine.close()

    for f in folder.glob("memory.buffer.db*"):  # memory.db restored from a backup without it
        f.unlink()
    engine = await MemoryEngine.open(path, clock)
    try:
        await SqliteMemory(engine).buffer(turns("alice", ("new", "ok"), start=5))
        assert [i for i, _ in await lines(engine)] == [5, 6]
    finally:
        await engine.close()
    engine = await MemoryEngine.open(path, clock)  # the sequence is the file's own from now on: no scan
    try:
        await SqliteMemory(engine).buffer(turns("alice", ("newer", "ok"), start=7))
        assert [i for i, _ in await lines(engine)] == [5, 6, 7, 8]
    finally:
        await engine.close()
