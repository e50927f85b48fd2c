"""Session 37's privacy audit, end to end: paths where one person's words
could reach another's prompt that no earlier test walked through the App
(the echo channel, the OpenAI-compatible fake recording every request,
SQLite files on disk). The oracle is the fake's chat requests and what the
channel sent: none of the first person's unique words may be in them."""

from __future__ import annotations

import json
from pathlib import Path

from memory import ManualClock
from memory.filestore import user_slug
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway import test_remembering_e2e as remembering
from tests.gateway.test_redteam_e2e import send  # one user's message in a chat, its reply's text
from tests.gateway.test_remembering_e2e import Model, fact

ALICE, BOB = "echo:alice", "echo:bob"
GROUP = "g-team"


def chats_since(fake: FakeOpenAI, n: int) -> str:
    """Every chat request the model was sent from request ``n`` on."""
    return json.dumps([r["messages"] for r in fake.chat_requests()[n:]], ensure_ascii=False)


LEGACY_DAY = "2026-02-20"
LEGACY_LOG = ("- 21:04 user: my divorce lawyer is Mrs Vantablack, she charges 450 an hour\n"
              "- 21:05 assistant: noted\n")


async def test_a_legacy_top_level_day_log_never_reaches_a_users_prompt_even_after_compression(tmp_path: Path) -> None:
    """The file store's top-level ``YYYY-MM-DD.md`` logs are the legacy
    one-user layout's, "never shown to users" (memory/filestore.py). The
    import makes them ``_global`` events; the nightly compression must not
    retell them as ``_global`` facts, which every user and every group reads."""
    memory_dir = tmp_path / "workspace" / "memory"
    memory_dir.mkdir(parents=True)
    (memory_dir / f"{LEGACY_DAY}.md").write_text(LEGACY_LOG, encoding="utf-8")
    # Alice's own folder's log (the file store kept her private chat's days there).
    alices = memory_dir / "users" / user_slug(ALICE)
    alices.mkdir(parents=True)
    (alices / ".owner").write_text(ALICE, encoding="utf-8")
    (alices / f"{LEGACY_DAY}.md").write_text("- 09:12 user: my physiotherapist is Dr Quennell\n", encoding="utf-8")
    clock = ManualClock("2026-03-02T10:00:00Z")
    model = Model()
    # A real model asked to compress those days would keep each as a fact.
    model.extractions.append(("Vantablack", {"facts": [fact("The user's divorce lawyer is Mrs Vantablack",
                                                             category="identity")], "summary": ""}))
    model.extractions.append(("Quennell", {"facts": [fact("Alice's physiotherapist is Dr Quennell",
                                                           category="identity")], "summary": ""}))
    async with remembering.running(tmp_path, model, clock, by_hand=True) as (app, fake):
        engine = app.backend.engine  # type: ignore[union-attr]
        assert [e.event_date for e in await engine.events("_global")] == [LEGACY_DAY]  # imported at start
        assert app.compressor is not None
        await app.compressor.daily()
        n = len(fake.chat_requests())
        for who, chat, group in ((BOB, GROUP, True), (BOB, "c-bob", False), (ALICE, GROUP, True)):
            answer = await send(app, clock, "who is my divorce lawyer? and my physiotherapist?", who, chat, group=group)
            sent = chats_since(fake, n) + answer
            assert "Vantablack" not in sent and "Quennell" not in sent, (who, chat)
        listed = await send(app, clock, "/memory lawyer", BOB, "c-bob", group=False)
        assert "Vantablack" not in listed
        # The day stays the operator's record: an event of _global's, not a fact anyone reads.
        assert [m.content for m in await engine.list_memories("_global", limit=10)] == []
        # The oracle: Alice's own day became her fact, read in her private chat.
        await send(app, clock, "who is my physiotherapist?", ALICE, "c-alice", group=False)
        assert "Dr Quennell" in chats_since(fake, n)


OLD_SALARY, NEW_SALARY = "Alice's salary at Brightwave is 51000 a year", "Alice's salary at Brightwave is 80000 a year"


async def test_a_shared_fact_is_read_in_a_group_without_the_private_fact_it_replaced(tmp_path: Path) -> None:
    """Alice's salary, told privately, then changed; she shares the current
    fact with her groups (/share). Asked there, recall shows the fact it
    replaced under a current one (memory/format.py): in a group only what
    that group may read, and the old salary was never said nor shared there."""
    clock = ManualClock("2026-03-02T10:00:00Z")
    model = Model()
    model.extractions.append(("51000", {"facts": [fact(OLD_SALARY, category="identity")], "summary": ""}))
    model.extractions.append(("80000", {"facts": [{**fact(NEW_SALARY, category="identity"), "replaces": "51000"}],
                                        "summary": ""}))
    async with remembering.running(tmp_path, model, clock, by_hand=True) as (app, fake):
        engine = app.backend.engine  # type: ignore[union-attr]
        assert app.extraction is not None
        for said in ("my salary at Brightwave is 51000 a year", "I got a raise: my Brightwave salary is 80000 now"):
            await send(app, clock, said, ALICE, "c-alice", group=False)
            clock.advance(200)
            assert [r.ok for r in await app.extraction.tick()] == [True]  # type: ignore[attr-defined]
        [current] = [m for m in await engine.list_memories(ALICE, limit=10) if m.content == NEW_SALARY]
        n = len(fake.chat_requests())
        await send(app, clock, "what is my salary at Brightwave?", ALICE, "c-alice", group=False)
        sent = chats_since(fake, n)
        assert "80000" in sent and "51000" in sent  # the oracle: her private chat shows what it replaced
        await send(app, clock, f"/share m{current.id}", ALICE, "c-alice", group=False)
        n = len(fake.chat_requests())
        await send(app, clock, "what is my salary at Brightwave?", ALICE, GROUP, group=True)
        sent = chats_since(fake, n)
        assert "80000" in sent and "51000" not in sent, sent
        n = len(fake.chat_requests())
        await send(app, clock, "what is Alice's salary at Brightwave?", BOB, GROUP, group=True)
        assert "Brightwave is" not in chats_since(fake, n)  # shared for her asking, not for Bob
