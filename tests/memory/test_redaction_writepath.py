"""A user pastes credentials into chat: long-term memory never keeps the
machine ones (keys, tokens, private keys, card numbers); a password the
user tells it is theirs to have remembered (a ``credential`` fact).
The real engine on a real file and the memory model over HTTP (the fake
server, which echoes what it was shown into the facts it returns, as a
model that copies would): the buffer, the prompt, the facts and their
source text, the day's event, a ``memory_save`` fact, an edited message,
and the file store's markdown files hold none of the secrets."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from memory import ManualClock, MemoryEngine, Provenance
from memory.backend import Turn
from memory.extraction import ExtractionService
from memory.filestore import FileMemory
from memory.llm import MemoryLLM
from memory.service import SqliteMemory
from tests.fakes.openai_server import FakeOpenAI, Reply

from ._writepath import fake, llm, reply, user_prompt  # noqa: F401

KEY = "sk-proj-Zq8VbN3mK1pLx9RtY7wQ"
PASSWORD = "hunter2-Blue"
CARD = "4111 1111 1111 1111"
PEM = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7"
SECRETS = (KEY, CARD, "4111111111111111", PEM)

SAID = [
    f"here is my OpenAI key {KEY}, keep it handy",
    f"and the NAS login is password: {PASSWORD}",
    f"my card is {CARD}, call me on 13812345678 before 2026-03-05",
    f"-----BEGIN PRIVATE KEY-----\n{PEM}\n-----END PRIVATE KEY-----",
]


def _turns(owner: str = "alice") -> list[Turn]:
    out = []
    for i, text in enumerate(SAID, start=1):
        out.append(Turn(owner=owner, channel="telegram", chat_id="1", role="user", content=text, message_id=str(i)))
        out.append(Turn(owner=owner, channel="telegram", chat_id="1", role="assistant",
                        content=f"noted: {text[:60]}", message_id=str(i)))
    return out


def _clean(where: str, text: str) -> None:
    for s in SECRETS:
        assert s not in text, f"{where} keeps {s!r}: {text!r}"


async def _all_text(engine: MemoryEngine) -> str:
    parts = []
    for sql in ("SELECT content FROM extraction_buffer", "SELECT content, source_text FROM memories",
                "SELECT summary FROM daily_events", "SELECT text FROM memories_fts",
                "SELECT text FROM events_fts"):
        for row in await engine.db.fetchall(sql):
            parts += [str(v) for v in row]
    return "\n".join(parts)


def _echo_model(body: dict[str, Any]) -> Reply:
    """Facts that copy the lines it was shown: whatever it saw is kept."""
    shown = [ln for ln in user_prompt(body).splitlines() if "key" in ln or "password" in ln or "card" in ln]
    facts = [{"content": ln[-200:], "category": "credential"} for ln in shown[:6]]
    return Reply(reply(facts, summary=" / ".join(shown)[:400]))


async def test_sqlite_memory_keeps_no_credential_anywhere(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    mem = SqliteMemory(engine)
    await mem.buffer(_turns())
    buffered = [r[0] for r in await engine.db.fetchall("SELECT content FROM extraction_buffer ORDER BY id")]
    assert len(buffered) == 8
    _clean("the buffer", "\n".join(buffered))
    # What survives is the sentence around them, so the fact is still learnt.
    assert "here is my OpenAI key sk-***, keep it handy" in buffered
    assert f"and the NAS login is password: {PASSWORD}" in buffered  # the user's own, remembered
    assert "call me on 13812345678 before 2026-03-05" in buffered[4]

    fake.responder = _echo_model
    clock.advance(timedelta(minutes=5))
    [rep] = await ExtractionService(engine, llm).tick()
    assert rep.ok and rep.added, rep
    assert fake.requests, "the model was asked"
    _clean("the extraction prompt", "\n".join(str(b["messages"]) for b in fake.requests))

    # An explicit "remember this" and an edit of a message still waiting.
    hit = await mem.remember("alice", f"Alice's NAS key: {KEY}", category="credential",
                             provenance=Provenance(channel="telegram", chat_id="1", message_ids=("9",)),
                             source_text=f"remember my NAS key: {KEY}")
    assert hit.content == "Alice's NAS key: sk-***"
    await mem.buffer([Turn(owner="alice", channel="telegram", chat_id="1", role="user", content="typo", message_id="10")])
    assert await mem.revise(Turn(owner="alice", channel="telegram", chat_id="1", role="user",
                                 content=f"the key is {KEY}", message_id="10")) == "replaced"
    _clean("memory.db", await _all_text(engine))


async def test_the_file_store_keeps_no_credential_in_its_markdown(tmp_path: Path, clock: ManualClock) -> None:
    files = FileMemory(tmp_path / "ws", clock)
    await files.buffer(_turns())
    await files.remember("alice", f"NAS token: {KEY}", provenance=Provenance(channel="telegram", chat_id="1"))
    # An edit is found by its words as said (Tier 0 keeps them whole).
    assert await files.revise(
        Turn(owner="alice", channel="telegram", chat_id="1", role="user", content="my card is on file",
             message_id="3", at=clock.now()),
        before=SAID[2],
    ) == "replaced"
    written = "\n".join(p.read_text(encoding="utf-8") for p in (tmp_path / "ws").rglob("*.md"))
    _clean("the markdown files", written)
    assert "NAS token: [redacted]" in written and "my card is on file" in written
    assert "[private key redacted]" in written
