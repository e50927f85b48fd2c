"""An adversarial review of the recent read paths, end to end (the App, its
SQLite files, the OpenAI-compatible fake for chat, extraction and
embeddings): Bob, a legitimate user of the same bot, in a group with Alice
and in his own private chat, tries to get Alice's facts into what the model
is sent; Alice in a group must not get her own private facts or another
group's read there. Each path a recent feature added is tried: a vector
hit, a neighbour of a hit, the memory_search tool, the second look's
candidate list, a scheduled job's run. The fake model records every
request: the assertions are on what it was sent."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from gateway.app import App
from gateway.bus import InboundMessage
from memory import Category, ManualClock, NewMemory, Provenance
from memory.sharing import share
from tests.fakes.openai_server import FakeOpenAI, Reply, said, text_of
from tests.gateway import test_remembering_e2e as remembering
from tests.gateway.test_app import EchoChannel
from tests.fakes.telegram_server import FakeTelegram
from tests.gateway.test_remembering_e2e import Model, fact

from .killed import crash, killed, quiet
from .test_e2e_feishu_outbox import until
from .test_resume_e2e import KEY, _echo, _telegram_app

ALICE, BOB = "echo:alice", "echo:bob"
GROUP, OTHER = "g-team", "g-other"
# Alice, privately: a conversation of three turns (neighbours of each other).
PRIVATE = ("Alice asked which automobile to buy for the clinic visits",
           "Alice's automobile is a blue Tesla she drives to her chemotherapy",
           "Alice lives in Lisbon near the oncology ward")
SAID_HERE = "Alice's automobile for team trips is the grey office van"
SAID_ELSEWHERE = "Alice's automobile loan with the other team is 9000 euros"
BOB_PRIVATE = "Bob lives in Porto with his parents"
BOB_HERE = "Bob's apartment is in Madrid"  # said in the group
SHARED_BY_ALICE = "Alice's automobile insurance renews in May"  # shared with every group: hers to ask for
CONCEPTS = {"automobile": "car", "vehicle": "car"}


class Searching(Model):
    """Chat turns: "search: X" calls memory_search with X, and the tool's
    answer is repeated; extraction calls as :class:`Model`."""

    def __call__(self, body: dict[str, Any]) -> Reply:
        if body.get("response_format", {}).get("type") == "json_object":
            return super().__call__(body)
        last = body["messages"][-1]
        if last["role"] == "tool":
            return Reply(content="found: " + text_of(last["content"]))
        words = said(body)
        if words.startswith("search:"):
            return Reply(content=None, tool_calls=[{"name": "memory_search",
                                                    "arguments": {"query": words.removeprefix("search:").strip()}}])
        return Reply(content="noted")


def _alices_words() -> list[str]:
    return [*PRIVATE, SAID_ELSEWHERE]


async def _seed(app: App, *, vectors: bool = True) -> dict[str, int]:
    engine = app.backend.engine  # type: ignore[union-attr]
    ids: dict[str, int] = {}
    for text in PRIVATE:  # one conversation: consecutive ids, one chat and session
        ids[text] = (await engine.add(NewMemory(
            owner=ALICE, content=text, category=Category.EVENT,
            provenance=Provenance(channel="echo", chat_id="c-alice", session="s1", group=False)))).id
    for text, chat in ((SAID_HERE, GROUP), (SAID_ELSEWHERE, OTHER)):
        ids[text] = (await engine.add(NewMemory(
            owner=ALICE, content=text, category=Category.EVENT,
            provenance=Provenance(channel="echo", chat_id=chat, session="s2", group=True)))).id
    ids[SHARED_BY_ALICE] = (await engine.add(NewMemory(
        owner=ALICE, content=SHARED_BY_ALICE, category=Category.EVENT,
        provenance=Provenance(channel="echo", chat_id="c-alice", group=False)))).id
    assert (await share(engine, ALICE, [ids[SHARED_BY_ALICE]], None)).changed
    ids[BOB_PRIVATE] = (await engine.add(NewMemory(
        owner=BOB, content=BOB_PRIVATE, category=Category.IDENTITY,
        provenance=Provenance(channel="echo", chat_id="c-bob", group=False)))).id
    if vectors:
        assert app.vectorizer is not None
        assert await app.vectorizer.drain() == len(ids)  # every memory has its vector: recall by meaning is on
    return ids


async def _send(app: App, text: str, sender: str, chat: str, *, group: bool, clock: ManualClock) -> str:
    echo = app.channels["echo"]
    assert isinstance(echo, EchoChannel) and app.loop is not None
    echo.got.clear()
    await echo.publish(InboundMessage(channel="echo", chat_id=chat, sender_id=sender.split(":", 1)[1], text=text,
                                      timestamp=clock.now(), is_group=group, mentioned=group,
                                      sender_name=sender.split(":", 1)[1].title() if group else ""))
    await asyncio.wait_for(echo.got.wait(), 10)
    assert await app.loop.drain(10)
    return echo.sent[-1].text


def _hybrid() -> dict[str, Any]:
    """``remembering.running``'s options for vector recall on: the fake's concept embeddings, every hit kept."""
    return {"fake_options": {"embedding_concepts": CONCEPTS, "embedding_dim": 1024},
            "memory": {"embedding": {"enabled": True, "model": "fake-embed", "minSimilarity": 0.0}}}


def _sent(fake: FakeOpenAI, since: int) -> str:
    """Everything the model was sent from request ``since`` on."""
    return json.dumps([r["messages"] for r in fake.requests[since:]], ensure_ascii=False)


async def test_bob_gets_none_of_alices_facts_by_words_meaning_neighbours_or_the_tool(tmp_path: Path) -> None:
    clock = ManualClock("2026-03-02T10:00:00Z")
    model = Searching()
    async with remembering.running(tmp_path, model, clock, **_hybrid()) as (app, fake):
        await _seed(app)
        for chat, group in ((GROUP, True), ("c-bob", False)):
            n = len(fake.requests)
            await _send(app, "what vehicle do I drive, and where do I live?", BOB, chat, group=group, clock=clock)
            answer = await _send(app, "search: automobile Tesla Lisbon van chemotherapy loan insurance", BOB, chat,
                                 group=group, clock=clock)
            sent = _sent(fake, n) + answer
            for words in (*_alices_words(), SAID_HERE, SHARED_BY_ALICE):
                assert words not in sent, (chat, words)
            assert (BOB_PRIVATE in sent) is (not group)  # his own private fact: in his private chat only
        # /memory and /export in his private chat: his own only.
        listed = await _send(app, "/memory automobile Lisbon", BOB, "c-bob", group=False, clock=clock)
        assert "Alice" not in listed


async def test_alice_in_a_group_gets_what_she_said_there_not_its_private_neighbours_nor_another_groups(
    tmp_path: Path,
) -> None:
    clock = ManualClock("2026-03-02T10:00:00Z")
    model = Searching()
    async with remembering.running(tmp_path, model, clock, **_hybrid()) as (app, fake):
        await _seed(app)
        n = len(fake.requests)
        await _send(app, "which vehicle do I use? remind me", ALICE, GROUP, group=True, clock=clock)
        answer = await _send(app, "search: automobile Tesla Lisbon chemotherapy loan", ALICE, GROUP, group=True,
                             clock=clock)
        sent = _sent(fake, n) + answer
        assert SAID_HERE in sent and SHARED_BY_ALICE in sent
        for words in _alices_words():
            assert words not in sent, words
        # Her private chat still reads all of her own.
        n = len(fake.requests)
        await _send(app, "which automobile do I drive?", ALICE, "c-alice", group=False, clock=clock)
        assert PRIVATE[1] in _sent(fake, n)


async def test_a_groups_second_look_shows_only_the_members_facts_of_that_group(tmp_path: Path) -> None:
    """Bob says in the group that he moved, in words no stored fact shares:
    the second look (memory/slots.py: the facts about the same
    one-at-a-time thing) shows the memory model his home said in that
    group, and neither his private one nor Alice's; the fact is Bob's, of
    the group."""
    clock = ManualClock("2026-03-02T10:00:00Z")
    model = Searching()
    async with remembering.running(tmp_path, model, clock, by_hand=True) as (app, fake):
        ids = await _seed(app, vectors=False)
        engine = app.backend.engine  # type: ignore[union-attr]
        here = (await engine.add(NewMemory(
            owner=BOB, content=BOB_HERE, category=Category.IDENTITY,
            provenance=Provenance(channel="echo", chat_id=GROUP, group=True)))).id
        await _send(app, "I relocated to Berlin last week; Alice says hi", BOB, GROUP, group=True, clock=clock)
        moved = {"facts": [fact("Bob relocated to Berlin", category="identity")], "summary": "Bob moved"}
        model.extractions += [("Berlin", moved), ("Berlin", moved)]  # the first call, and the second look's
        clock.advance(200)
        assert app.extraction is not None
        reports = await app.extraction.tick()  # type: ignore[attr-defined]
        assert [r.ok for r in reports] == [True, True]  # Bob's batch, and the group's own (its notes)
        first, second = [p for p in model.extraction_prompts if remembering.NOTES_PROMPT not in p]  # the second look ran
        assert BOB_HERE not in first and BOB_HERE in second
        for words in (*_alices_words(), SAID_HERE, BOB_PRIVATE):
            assert all(words not in p for p in model.extraction_prompts), words
        mine = [m for m in await engine.list_memories(BOB, limit=20) if "Berlin" in m.content]
        assert len(mine) == 1 and mine[0].provenance.chat_id == GROUP
        alice = await engine.get_many([ids[t] for t in _alices_words()])
        assert all(m.status.value == "active" and m.owner == ALICE for m in alice.values())
        assert (await engine.get_many([ids[BOB_PRIVATE]]))[ids[BOB_PRIVATE]].status.value == "active"
        assert here in {m.id for m in await engine.list_memories(BOB, limit=20)}


async def test_a_members_job_in_a_group_reads_what_they_said_there_only(tmp_path: Path) -> None:
    """A scheduled job Alice made in the group runs as her, into the group
    (the scheduler's call): her private facts and another group's stay out."""
    clock = ManualClock("2026-03-02T10:00:00Z")
    model = Searching()
    async with remembering.running(tmp_path, model, clock, **_hybrid()) as (app, fake):
        await _seed(app)
        assert app.loop is not None
        n = len(fake.requests)
        reply = await asyncio.wait_for(app.loop.run_job(
            channel="echo", chat_id=GROUP, user=ALICE, text="remind me which automobile to take, Tesla or van?",
            private=False), 10)
        sent = _sent(fake, n) + reply.text
        assert SAID_HERE in sent
        for words in _alices_words():
            assert words not in sent, words


async def test_bob_cannot_share_or_unshare_alices_facts(tmp_path: Path) -> None:
    """/share and /unshare name memories by id, which are small numbers:
    Bob naming Alice's ids, in the group or privately, changes nothing and
    learns nothing of them; the group's listing of Bob's shares has none of hers."""
    clock = ManualClock("2026-03-02T10:00:00Z")
    model = Searching()
    async with remembering.running(tmp_path, model, clock) as (app, fake):
        ids = await _seed(app, vectors=False)
        engine = app.backend.engine  # type: ignore[union-attr]
        private, shared_one = ids[PRIVATE[1]], ids[SHARED_BY_ALICE]
        answers = [
            await _send(app, f"/share m{private}", BOB, GROUP, group=True, clock=clock),
            await _send(app, f"/share m{private}", BOB, "c-bob", group=False, clock=clock),
            await _send(app, f"/unshare m{shared_one}", BOB, "c-bob", group=False, clock=clock),
            await _send(app, f"/unshare m{shared_one}", BOB, GROUP, group=True, clock=clock),
            await _send(app, "/share", BOB, GROUP, group=True, clock=clock),
            await _send(app, "/share", BOB, "c-bob", group=False, clock=clock),
        ]
        for answer in answers[:4]:
            assert "no memory with id" in answer
        assert f"m{shared_one}" not in answers[4] and f"m{shared_one}" not in answers[5]
        for words in (*_alices_words(), SHARED_BY_ALICE):
            assert all(words not in a for a in answers)
        got = await engine.get_many([private, shared_one])
        assert got[private].provenance.shared == () and got[shared_one].provenance.shared == ("*",)
        # Alice in the group: still her shared fact, never the private one Bob named.
        n = len(fake.requests)
        await _send(app, "which automobile, Tesla or insurance? remind me", ALICE, GROUP, group=True, clock=clock)
        sent = _sent(fake, n)
        assert SHARED_BY_ALICE in sent and PRIVATE[1] not in sent


async def test_in_a_group_each_members_lines_are_learnt_as_theirs_alone(tmp_path: Path) -> None:
    """Alice and Bob talk in the group, one after the other: the memory
    model reads each member's lines in a batch of their own (the other's
    words never as the user's), and what it draws from Bob's is Bob's."""
    clock = ManualClock("2026-03-02T10:00:00Z")
    model = Searching()
    async with remembering.running(tmp_path, model, clock, by_hand=True) as (app, fake):
        await _send(app, "my daughter starts school in Coimbra in September", ALICE, GROUP, group=True, clock=clock)
        await _send(app, "I sold my motorbike to pay the Zagreb rent", BOB, GROUP, group=True, clock=clock)
        await _send(app, "and my son is allergic to penicillin", ALICE, GROUP, group=True, clock=clock)
        model.extractions += [
            ("Zagreb", {"facts": [fact("Bob sold his motorbike to pay his rent in Zagreb", category="event")],
                        "summary": "Bob's rent"}),
            ("Coimbra", {"facts": [fact("Alice's daughter starts school in Coimbra", category="event")],
                         "summary": "Alice's children"}),
        ]
        clock.advance(200)
        assert app.extraction is not None
        reports = await app.extraction.tick()  # type: ignore[attr-defined]
        assert sorted(r.ok for r in reports) == [True, True, True]  # Alice's, Bob's, and the group's own notes
        for prompt in model.extraction_prompts:
            if remembering.NOTES_PROMPT in prompt:
                continue  # the group's own batch: every member's lines, each under their name
            lines = prompt.split("Conversation:", 1)[1]
            assert ("Zagreb" in lines) != ("Coimbra" in lines or "penicillin" in lines)  # one member's lines a batch
        engine = app.backend.engine  # type: ignore[union-attr]
        bob = [m.content for m in await engine.list_memories(BOB, limit=20)]
        alice = [m.content for m in await engine.list_memories(ALICE, limit=20)]
        assert bob == ["Bob sold his motorbike to pay his rent in Zagreb"]
        assert alice == ["Alice's daughter starts school in Coimbra"]


@pytest.mark.parametrize("end", ["stop", "kill"])
async def test_group_turns_a_stop_cut_are_answered_after_the_restart_in_the_groups_scope(
    tmp_path: Path, clock: ManualClock, end: str
) -> None:
    """Alice asks in the group and the gateway stops while the model
    writes; Bob's message waits behind hers. After the restart (from Tier 0,
    or from the durable inbox after a kill) each is answered as a group
    turn of its own sender: Alice's with what she said in that group, not
    her private facts; Bob's with none of Alice's."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _telegram_app(tmp_path, clock, llm, tg) as app:
            engine = app.backend.engine  # type: ignore[union-attr]
            for text, chat in ((PRIVATE[1], "7"), (SAID_HERE, "-500"), (SAID_ELSEWHERE, "-600")):
                await engine.add(NewMemory(owner="telegram:7", content=text, category=Category.EVENT,
                                           provenance=Provenance(channel="telegram", chat_id=chat)))
            llm.queue_hold()
            tg.push_text(-500, 7, "which automobile do I take, Tesla or van?", chat_type="group",
                         first_name="Alice", mention=True)
            await until(lambda: len(llm.requests) == 1, timeout=15)
            tg.push_text(-500, 8, "remind me: automobile Tesla loan van chemotherapy?", chat_type="group",
                         first_name="Bob", mention=True)
            await until(lambda: tg.pending_updates == 0, timeout=15)
            await (crash(app) if end == "stop" else killed(app, tmp_path))
        clock.advance(60)
        n = len(llm.requests)
        async with _telegram_app(tmp_path, clock, llm, tg) as again:
            await tg.wait_sent(2, timeout=15)
            await quiet(again)
        alice, bob = llm.requests[n:n + 2]
        for body in (alice, bob):
            sent = json.dumps(body["messages"], ensure_ascii=False)
            assert PRIVATE[1] not in sent and SAID_ELSEWHERE not in sent
        assert SAID_HERE in json.dumps(alice["messages"], ensure_ascii=False)
        assert SAID_HERE not in text_of(bob["messages"][-1]["content"]).split("</memories>")[0]
