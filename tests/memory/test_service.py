from __future__ import annotations

from memory import Category, MemoryEngine, NewMemory, Provenance
from memory.backend import MemoryBackend, Turn
from memory.service import SqliteMemory


async def test_is_a_backend(engine: MemoryEngine) -> None:
    assert isinstance(SqliteMemory(engine), MemoryBackend)


async def test_group_chat_gets_no_private_profile_or_credentials(engine: MemoryEngine) -> None:
    mem = SqliteMemory(engine)
    await engine.add(NewMemory(owner="alice", tier=1, content="Alice lives in Hangzhou", category=Category.IDENTITY))
    await engine.add(NewMemory(owner="_global", tier=1, content="Team standup is at 10:00", category=Category.CONFIG))
    await engine.add(NewMemory(owner="alice", content="Alice's server password is hunter2", category=Category.CREDENTIAL))
    assert "Hangzhou" in await mem.profile("alice")
    group = await mem.profile("alice", private=False)
    assert "Hangzhou" not in group and "standup" in group
    assert [h.content for h in await mem.recall("alice", "server password")] == ["Alice's server password is hunter2"]
    assert await mem.recall("alice", "server password", private=False) == []


async def test_remember_twice_reinforces_instead_of_duplicating(engine: MemoryEngine) -> None:
    mem = SqliteMemory(engine)
    a = await mem.remember("u", "User prefers Chinese", provenance=Provenance(channel="telegram"), importance=0.6)
    b = await mem.remember("u", "user prefers  chinese", provenance=Provenance(channel="telegram"), importance=0.9)
    assert a.id == b.id
    rows = await engine.list_memories("u")
    assert len(rows) == 1 and rows[0].importance == 0.9 and rows[0].access_count == 1


async def test_buffer_is_durable_idempotent_and_notifies(engine: MemoryEngine) -> None:
    mem = SqliteMemory(engine)
    seen: list[str] = []
    mem.on_buffered(seen.append)
    turn = Turn(owner="u", channel="telegram", chat_id="1", role="user", content="我搬到上海了", message_id="9")
    await mem.buffer([turn, Turn(owner="u", channel="telegram", chat_id="1", role="assistant", content="好的", message_id="9")])
    await mem.buffer([turn])  # a retried write does not duplicate
    rows = await engine.db.fetchall("SELECT role, content, token_count FROM extraction_buffer ORDER BY id")
    assert [tuple(r) for r in rows] == [("user", "我搬到上海了", 6), ("assistant", "好的", 2)]
    assert seen == ["u", "u"]
