"""The product's promise end to end: what a user says is extracted in the
background and comes back, cited, when they ask later; a fact that replaces
an older one wins; another user never sees it. Through the real App, the real
bus, SQLite files and the OpenAI-compatible fake, with a controllable clock."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncio

from gateway.app import App
from gateway.bus import EDIT, MESSAGE, InboundMessage
from memory import ManualClock
from memory.clock import parse_ts
from memory.filestore import FileMemory
from tests.disk import on_disk
from tests.fakes.openai_server import FakeOpenAI, Reply, split_user_content, text_of
from tests.gateway import handtick
from tests.gateway.test_app import ECHO, EchoChannel, _config


NOTES_PROMPT = "learnt as the GROUP's own notes"
"""In the extraction prompt of a group's own batch only (memory/llm.py)."""


def _placed(result: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """A scripted extraction's facts may name their input by words: ``said``
    (the lines holding each of them: ``lines``) and ``replaces`` (the
    existing memory holding them: ``updates``), numbered as this prompt
    numbers them."""
    text = text_of(body["messages"][-1]["content"])
    lines = {int(m[1]): m[2] for m in re.finditer(r"^L(\d+) (.*)$", text, re.M)}
    known = text.split("Existing memories:", 1)[-1]
    cands = {int(m[1]): m[2] for m in re.finditer(r"^(\d+)\. (.*)$", known, re.M)}
    facts = []
    for f in result.get("facts", []):
        f = dict(f)
        said = f.pop("said", None)
        if said is not None:
            f["lines"] = [n for n, line in lines.items() if any(w in line for w in ([said] if isinstance(said, str) else said))]
            assert f["lines"], (said, lines)
        old = f.pop("replaces", None)
        if old is not None:
            f["updates"] = next(n for n, c in cands.items() if old in c)
        facts.append(f)
    return {**result, "facts": facts}


class Model:
    """Chat turns get a plain answer; extraction calls (JSON mode) get the
    facts this test decides the conversation contained."""

    def __init__(self) -> None:
        # (text the conversation must contain, the extraction to return)
        self.extractions: list[tuple[str, dict[str, Any]]] = []
        self.extraction_prompts: list[str] = []
        # The same for a group's own batch (its notes, memory/groupnotes.py),
        # told by its prompt: a member's needle never answers the group's.
        self.notes: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, body: dict[str, Any]) -> Reply:
        if body.get("response_format", {}).get("type") == "json_object":
            prompt = json.dumps(body["messages"], ensure_ascii=False)
            self.extraction_prompts.append(prompt)
            found = self.notes if NOTES_PROMPT in prompt else self.extractions
            for i, (needle, result) in enumerate(found):
                if needle in prompt:
                    del found[i]
                    return Reply(content=json.dumps(_placed(result, body), ensure_ascii=False))
            return Reply(content='{"facts": [], "summary": "small talk"}')
        return self.chat(body)

    def chat(self, body: dict[str, Any]) -> Reply:
        """A chat turn's answer (a walk that needs more overrides this)."""
        return Reply(content="好的，记住了。")


async def say(app: App, clock: ManualClock, text: str, sender: str) -> str:
    """A message stamped by the test's clock (as a platform would stamp it);
    returns the reply once the turn is answered and buffered."""
    echo = app.channels["echo"]
    assert isinstance(echo, EchoChannel) and app.loop is not None
    echo.got.clear()
    await echo.publish(InboundMessage(channel="echo", chat_id=f"c-{sender}", sender_id=sender, text=text,
                                      timestamp=clock.now()))
    await asyncio.wait_for(echo.got.wait(), 5)
    assert await app.loop.drain(5)
    return echo.sent[-1].text


@asynccontextmanager
async def running(
    tmp_path: Path, model: Model, clock: ManualClock, *, fake_options: dict[str, Any] | None = None,
    by_hand: bool = False, **config: Any
) -> AsyncIterator[tuple[App, FakeOpenAI]]:
    """The App on the fake model, opened and started; closed afterwards.
    ``by_hand``: its background extraction loop stopped, for a test that
    ticks extraction itself (tests/gateway/handtick.py)."""
    async with FakeOpenAI(api_key="sk-e2e-key-0123456789", responder=model, **(fake_options or {})) as fake:
        cfg, paths = _config(tmp_path, fake, **config)
        app = App(cfg, paths, clock=clock, channel_specs=(ECHO,))
        try:
            await app.open()
            await app.start()
            if by_hand:
                await handtick.by_hand(app)
            yield app, fake
        finally:
            await app.close()


def as_current(body: dict[str, Any]) -> str:
    """The recalled memories a request shows as current: the <memories>
    block's "- [" lines and the system prompt's Core Memory, not the
    indented line under a fact that says what it replaced, no longer true."""
    block = split_user_content(text_of(body["messages"][-1]["content"]))[0]
    shown = [line for line in block.splitlines() if line.startswith("- [")]
    return "\n".join([text_of(body["messages"][0]["content"]), *shown])


def fact(content: str, *, updates: int | None = None, category: str = "config") -> dict[str, Any]:
    return {"content": content, "project": "_global", "topic": "preferences", "category": category,
            "importance": 0.8, "updates": updates}


async def test_said_then_extracted_then_recalled_with_citation(tmp_path: Path) -> None:
    model = Model()
    clock = ManualClock("2026-03-02T10:00:00Z")
    async with running(tmp_path, model, clock, gateway={"timezone": "Asia/Shanghai"}, by_hand=True) as (app, fake):

        await say(app, clock, "我最近每天早上都喝燕麦拿铁，不加糖。", "alice")
        # Nothing is extracted while the conversation is going on.
        assert model.extraction_prompts == []

        # Three quiet minutes later the background flush runs (the loop's tick).
        model.extractions.append(("燕麦拿铁", {"facts": [fact("用户每天早上喝燕麦拿铁，不加糖")], "summary": "用户说了咖啡习惯"}))
        clock.advance(200)
        assert app.extraction is not None
        reports = await app.extraction.tick()  # type: ignore[attr-defined]
        assert [r.ok for r in reports] == [True]
        assert "燕麦拿铁" in model.extraction_prompts[0]
        assert model.extractions == []
        assert "same language" in model.extraction_prompts[0]

        # A week later, in a new conversation, the question brings it back.
        clock.advance(7 * 86400)
        await say(app, clock, "/new", "alice")
        await say(app, clock, "我之前说过我喜欢喝什么咖啡？", "alice")
        prompt = json.dumps(fake.last_chat()["messages"], ensure_ascii=False)
        assert "用户每天早上喝燕麦拿铁，不加糖" in prompt
        assert "2026-03-02" in prompt  # cited with its date

        # Another user asking the same question gets none of it.
        await say(app, clock, "我之前说过我喜欢喝什么咖啡？", "bob")
        assert "燕麦拿铁" not in json.dumps(fake.last_chat()["messages"], ensure_ascii=False)

        # The preference changes: the new fact supersedes the old one.
        await say(app, clock, "我现在改喝美式了，不再喝拿铁。", "alice")
        model.extractions.append(
            # A decision, recalled by its words (a config fact would sit in Core Memory instead, not recalled).
            ("改喝美式", {"facts": [fact("用户现在喝美式咖啡，不再喝拿铁", updates=1, category="decision")],
                       "summary": "用户改喝美式"})
        )
        clock.advance(200)
        reports = await app.extraction.tick()  # type: ignore[attr-defined]
        assert reports and all(r.ok for r in reports) and model.extractions == []
        await say(app, clock, "我之前说过我喜欢喝什么咖啡？", "alice")
        prompt = json.dumps(fake.last_chat()["messages"], ensure_ascii=False)
        assert "用户现在喝美式咖啡" in prompt
        assert "用户每天早上喝燕麦拿铁" not in as_current(fake.last_chat())  # superseded facts are not recalled as current
        # Recalling reinforces the memory, written in batches off the reply path.
        engine = app.backend.engine  # type: ignore[union-attr]
        assert any(t.get_name() == "memory-access" and not t.done() for t in app._tasks)
        await engine.flush_access()
        current = [m for m in await engine.list_memories("echo:alice") if "美式" in m.content]
        assert current and current[0].access_count >= 1


async def test_a_paraphrased_fact_is_found_by_the_words_the_user_said(tmp_path: Path) -> None:
    """The model writes the fact in its own words and cites the line it came
    from; asked later in the user's words, the fact comes back, and the words
    it was drawn from never reach the prompt."""
    model = Model()
    clock = ManualClock("2026-03-02T10:00:00Z")
    async with running(tmp_path, model, clock, by_hand=True) as (app, fake):
        said = "I've been doing kickboxing at the Eastside gym twice a week since spring"
        await say(app, clock, said, "alice")
        model.extractions.append(("kickboxing", {
            "facts": [{**fact("Alice trains in a combat sport", category="event"), "lines": ["L1"]}],
            "summary": "Alice talked about training",
        }))
        clock.advance(200)
        assert app.extraction is not None
        reports = await app.extraction.tick()  # type: ignore[attr-defined]
        assert [r.ok for r in reports] == [True] and model.extractions == []
        assert "L1 [" in model.extraction_prompts[0]

        clock.advance(86400)
        await say(app, clock, "/new", "alice")
        await say(app, clock, "which gym do I go to for kickboxing?", "alice")
        prompt = json.dumps(fake.last_chat()["messages"], ensure_ascii=False)
        assert "Alice trains in a combat sport" in prompt
        assert "Eastside" not in prompt  # the source words index the fact, they are not shown

        await say(app, clock, "which gym do I go to for kickboxing?", "bob")
        assert "combat sport" not in json.dumps(fake.last_chat()["messages"], ensure_ascii=False)


async def test_failed_extraction_keeps_the_buffer_and_retries(tmp_path: Path) -> None:
    model = Model()
    clock = ManualClock("2026-03-02T10:00:00Z")
    async with running(tmp_path, model, clock, by_hand=True) as (app, fake):
        await say(app, clock, "My deploy target is Fly.io in the ams region.", "carol")
        fake.queue_error(500)  # the memory model is down
        clock.advance(200)
        reports = await app.extraction.tick()  # type: ignore[attr-defined]
        assert reports and not any(r.ok for r in reports)
        engine = app.backend.engine  # type: ignore[union-attr]
        rows = await engine.db.fetchall("SELECT content FROM extraction_buffer WHERE owner = 'echo:carol'")
        assert [r[0] for r in rows][0] == "My deploy target is Fly.io in the ams region."

        # Ten minutes later (first backoff step) it is retried and succeeds.
        model.extractions.append(
            ("Fly.io", {"facts": [fact("Carol deploys to Fly.io, region ams", category="decision")],
                        "summary": "deploy target"})
        )
        clock.advance(11 * 60)
        reports = await app.extraction.tick()  # type: ignore[attr-defined]
        assert [r.ok for r in reports] == [True]
        assert await engine.db.fetchall("SELECT id FROM extraction_buffer WHERE owner = 'echo:carol'") == []
        assert [m.content for m in await engine.list_memories("echo:carol")] == ["Carol deploys to Fly.io, region ams"]


class LiteralModel:
    """A model that takes every user line it is given for a fact: the
    worst case for what reaches extraction. Chat turns answer "Noted.";
    scripted replies (``fake.queue_reply``) come first."""

    def __init__(self) -> None:
        self.extraction_prompts: list[str] = []

    def __call__(self, body: dict[str, Any]) -> Reply:
        if body.get("response_format", {}).get("type") != "json_object":
            return Reply(content="Noted.")
        text = body["messages"][-1]["content"]
        self.extraction_prompts.append(text)
        facts = []
        for line in text.splitlines():
            head, sep, said = line.partition(" user: ")
            if sep and head.startswith("L"):
                facts.append({**fact(said.strip()), "lines": [int(head[1:].split()[0])]})
        return Reply(content=json.dumps({"facts": facts, "summary": "talk"}, ensure_ascii=False))


async def _extract(app: App, clock: ManualClock, owner: str = "echo:alice") -> None:
    """The quiet gap passes and the background extraction runs."""
    clock.advance(200)
    assert app.extraction is not None
    reports = await app.extraction.tick()  # type: ignore[attr-defined]
    # The gateway's own background tick may have taken the user first (the
    # tick skips a busy user): wait for it, and flush whatever is left.
    reports += await app.extraction.flush_now(owner)  # type: ignore[attr-defined]
    assert all(r.ok for r in reports)


async def _memories_and_buffer(app: App, owner: str) -> tuple[list[str], list[str]]:
    engine = app.backend.engine  # type: ignore[union-attr]
    memories = [m.content for m in await engine.list_memories(owner)]
    rows = await engine.db.fetchall("SELECT content FROM extraction_buffer WHERE owner = ?", (owner,))
    return memories, [r["content"] for r in rows]


async def test_a_scheduled_jobs_prompt_and_reply_are_never_taken_for_what_the_user_said(tmp_path: Path) -> None:
    model = LiteralModel()
    clock = ManualClock("2026-03-02T10:00:00Z")
    async with running(tmp_path, model, clock) as (app, fake):
        assert app._cron_store is not None and app.cron is not None
        # Due within the hour: a day's wait would also cross the daily flush,
        # which extracts in the background, racing this test's own tick.
        await app._cron_store.add(schedule="30 * * * *", message="Remind me to drink water",
                                  channel="echo", chat_id="c-alice", user="echo:alice", job_id="water")
        clock.advance(3600)
        fake.queue_reply("Time to drink some water!", kind="chat")
        await app.cron.run_due()  # type: ignore[attr-defined]
        assert app.loop is not None and await app.loop.drain(5)
        echo = app.channels["echo"]
        assert isinstance(echo, EchoChannel) and echo.sent[-1].text == "Time to drink some water!"

        # The user's own next message is still remembered.
        await say(app, clock, "I moved to Lisbon last week", "alice")
        await _extract(app, clock)
        memories, buffered = await _memories_and_buffer(app, "echo:alice")
        assert memories == ["I moved to Lisbon last week"]
        assert buffered == []
        assert not any("water" in p for p in model.extraction_prompts)

        # The conversation still reads right: the job's turn is in the history.
        await say(app, clock, "thanks", "alice")
        history = json.dumps(fake.last_chat()["messages"], ensure_ascii=False)
        assert "Time to drink some water!" in history

        # A restart (the rows left looking unbuffered would be buffered again) changes nothing.
        assert app.sessions is not None
        assert await app.sessions.unbuffered("echo:c-alice") == []


async def test_asking_to_forget_a_fact_does_not_bring_it_back_through_extraction(tmp_path: Path) -> None:
    model = LiteralModel()
    clock = ManualClock("2026-03-02T10:00:00Z")
    async with running(tmp_path, model, clock) as (app, fake):
        await say(app, clock, "my cat is called Miso", "alice")
        await _extract(app, clock)
        engine = app.backend.engine  # type: ignore[union-attr]
        [miso] = await engine.list_memories("echo:alice")
        assert miso.content == "my cat is called Miso"

        fake.queue_reply(None, tool_calls=[{"name": "memory_forget", "arguments": {"ids": [miso.to_hit().ref]}}],
                         kind="chat")
        fake.queue_reply("Done, I have forgotten your cat's name.", kind="chat")
        assert await say(app, clock, "forget that my cat is called Miso", "alice") == (
            "Done, I have forgotten your cat's name."
        )
        await _extract(app, clock)
        memories, buffered = await _memories_and_buffer(app, "echo:alice")
        assert not any("Miso" in m for m in memories), memories
        assert not any("Miso" in b for b in buffered), buffered
        assert not any("Miso" in p for p in model.extraction_prompts[1:])

        # The next ordinary message is remembered as before.
        await say(app, clock, "I play the cello on Sundays", "alice")
        await _extract(app, clock)
        memories, buffered = await _memories_and_buffer(app, "echo:alice")
        assert memories == ["I play the cello on Sundays"] and buffered == []


async def _send(
    app: App, echo: EchoChannel, clock: ManualClock, text: str, mid: str, *, sender: str, kind: str
) -> None:
    """Message ``mid`` (or an EDIT of it) from ``sender`` in Alice's chat, handled
    to the end; a new message waits for its answer, an edit gets none."""
    echo.got.clear()
    await echo.publish(InboundMessage(channel="echo", chat_id="c-alice", sender_id=sender, text=text,
                                      message_id=mid, timestamp=clock.now(), kind=kind))
    if kind == MESSAGE:
        await asyncio.wait_for(echo.got.wait(), 5)
    assert app.loop is not None and await app.loop.drain(5)


async def test_an_edited_message_corrects_what_the_bot_remembers(tmp_path: Path) -> None:
    """"My birthday is 3 May" edited into "4 May": the next prompt's history
    says 4 May, and the fact extracted from the old words is superseded by
    the corrected one. Nothing is answered for the edit; another sender's
    edit of the same message id, or an unknown id, changes nothing."""
    model = Model()
    clock = ManualClock("2026-03-02T10:00:00Z")
    async with running(tmp_path, model, clock, by_hand=True) as (app, fake):
        echo = app.channels["echo"]
        assert isinstance(echo, EchoChannel) and app.loop is not None and app.extraction is not None

        def send(text: str, mid: str, *, sender: str = "alice", kind: str = MESSAGE) -> Awaitable[None]:
            return _send(app, echo, clock, text, mid, sender=sender, kind=kind)

        await send("my birthday is 3 May", "m1")
        model.extractions.append(("3 May", {"facts": [{**fact("Alice's birthday is 3 May", category="identity"),
                                                        "lines": [1]}], "summary": "birthday"}))
        clock.advance(200)
        assert [r.ok for r in await app.extraction.tick()] == [True]  # type: ignore[attr-defined]

        replies, calls = len(echo.sent), len(fake.requests)
        await send("my birthday is 4 May", "m1", kind=EDIT)
        await send("my birthday is 1 January", "m1", sender="mallory", kind=EDIT)  # not hers to edit
        await send("whatever", "m404", kind=EDIT)  # never stored
        assert (len(echo.sent), len(fake.requests)) == (replies, calls)  # no answer, no LLM call
        assert app.loop.stats.revised == 3

        await send("when is my birthday?", "m2")
        history = json.dumps(fake.last_chat()["messages"][1:-1], ensure_ascii=False)
        assert "my birthday is 4 May" in history
        assert "my birthday is 3 May" not in history and "1 January" not in history

        model.extractions.append(("(edited) my birthday is 4 May", {
            "facts": [{**fact("Alice's birthday is 4 May", category="identity", updates=1), "lines": [1]}],
            "summary": "birthday corrected"}))
        clock.advance(200)
        assert [r.ok for r in await app.extraction.tick()] == [True]  # type: ignore[attr-defined]
        assert model.extractions == []  # the correction was what the model read
        await send("/new", "m3")
        await send("when is my birthday?", "m4")
        prompt = json.dumps(fake.last_chat()["messages"], ensure_ascii=False)
        assert "Alice's birthday is 4 May" in prompt and "Alice's birthday is 3 May" not in prompt


async def test_an_edited_message_rewrites_the_file_stores_log(tmp_path: Path) -> None:
    """Memory disabled (FileMemory): an edit gives the logged line the new
    words and leaves no byte of the old ones; the next prompt (history and
    recent days) shows only the new. Another sender's edit changes nothing."""
    clock = ManualClock("2026-03-02T10:00:00Z")
    async with running(tmp_path, Model(), clock, memory={"enabled": False}) as (app, fake):
        echo = app.channels["echo"]
        assert isinstance(echo, EchoChannel) and app.loop is not None and isinstance(app.backend, FileMemory)

        def send(text: str, mid: str, *, sender: str = "alice", kind: str = MESSAGE) -> Awaitable[None]:
            return _send(app, echo, clock, text, mid, sender=sender, kind=kind)

        await send("call me on 555-0199", "m1")
        folder = app.backend.user_dir("echo:alice")
        assert on_disk(folder, "555-0199") == 1
        clock.advance(120)
        await send("call me on 555-0123", "m1", kind=EDIT)
        await send("call me on 555-6666", "m1", sender="mallory", kind=EDIT)  # not hers to edit
        assert app.loop.stats.revised == 2
        assert on_disk(folder, "555-0199") == 0 and on_disk(folder, "555-6666") == 0
        [day] = [f for f in folder.iterdir() if f.name.endswith(".md")]
        assert "- 10:00 user: call me on 555-0123\n" in day.read_text(encoding="utf-8")

        await send("what is my number?", "m2")
        prompt = json.dumps(fake.last_chat()["messages"], ensure_ascii=False)
        assert "555-0123" in prompt and "555-0199" not in prompt


async def test_a_user_in_another_time_zone_gets_their_date_and_their_nine_oclock(tmp_path: Path) -> None:
    """/timezone through the App: the prompt dates the conversation in the
    user's zone and a job they ask for runs at their 09:00, not the gateway's."""
    model = LiteralModel()
    clock = ManualClock("2026-11-22T20:00:00Z")  # gateway in UTC: Sunday; Shanghai: Monday 04:00
    async with running(tmp_path, model, clock) as (app, fake):
        assert app._cron_store is not None and app.cron is not None
        assert (await say(app, clock, "/timezone 上海", "alice")).startswith("好的，你的时区是 Asia/Shanghai")
        fake.queue_reply(None, tool_calls=[{"name": "cron_add", "arguments": {"schedule": "0 9 * * *",
                                                                              "message": "plan my day"}}], kind="chat")
        fake.queue_reply("Every day at 9 it is.", kind="chat")
        await say(app, clock, "every day at 9, help me plan my day", "alice")
        assert "Current date: 2026-11-23 Monday (Asia/Shanghai)" in fake.chat_requests()[-2]["messages"][0]["content"]
        [job] = await app._cron_store.list("echo:alice")
        assert (job.timezone, job.next_run_at) == ("Asia/Shanghai", "2026-11-23T01:00:00Z")
        # Bob set nothing: the gateway's zone, as before.
        await say(app, clock, "what day is it?", "bob")
        assert "Current date: 2026-11-22 Sunday (UTC)" in fake.last_chat()["messages"][0]["content"]
        # What she said is learnt on her clock too, and her day's event is her Monday.
        await _extract(app, clock)
        assert any("[2026-11-23 Mon 04:00] user: every day at 9" in p for p in model.extraction_prompts)
        events = await app.backend.engine.events("echo:alice")  # type: ignore[union-attr]
        assert [e.event_date for e in events] == ["2026-11-23"]
        # Her Monday ends at her midnight (16:00 UTC), not the gateway's.
        assert app.compressor is not None
        await app.compressor.daily(parse_ts("2026-11-23T15:59:00Z"))  # Bob's Sunday goes
        engine = app.backend.engine  # type: ignore[union-attr]
        assert [e.event_date for e in await engine.events("echo:alice", uncompressed_only=True)] == ["2026-11-23"]
        assert (await app.compressor.daily(parse_ts("2026-11-23T16:00:00Z"))).events == 1


class ProfilingModel(Model):
    """``Model`` that also answers the weekly profile refresh with
    ``profile`` (the entries the model would write)."""

    def __init__(self) -> None:
        super().__init__()
        self.profile: dict[str, Any] = {"entries": []}

    def __call__(self, body: dict[str, Any]) -> Reply:
        system = body["messages"][0]["content"]
        if body.get("response_format", {}).get("type") == "json_object" and "core profile" in system:
            return Reply(content=json.dumps(self.profile, ensure_ascii=False))
        return super().__call__(body)


async def test_a_decision_that_changes_is_not_kept_as_current_in_the_core_profile(tmp_path: Path) -> None:
    """The weekly refresh put "launches on February 10" into Core Memory;
    the user then moves the launch. The next prompt must not show February
    as current (in Core Memory or the recalled memories), nor /memory."""
    model = ProfilingModel()
    clock = ManualClock("2026-01-05T10:00:00Z")
    async with running(tmp_path, model, clock, by_hand=True) as (app, fake):
        assert app.extraction is not None and app.compressor is not None
        await say(app, clock, "Project Atlas launches on February 10. I'm the tech lead.", "alice")
        model.extractions.append(("Atlas", {"facts": [
            {"content": "Project Atlas launches on February 10", "project": "atlas", "topic": "launch",
             "category": "decision", "importance": 0.9},
            {"content": "Alice is the tech lead of Project Atlas", "project": "atlas", "topic": "team",
             "category": "identity", "importance": 0.9},
        ], "summary": "Atlas launch date"}))
        clock.advance(200)
        assert [r.ok for r in await app.extraction.tick()] == [True]  # type: ignore[attr-defined]

        clock.advance(3 * 86400)
        model.profile = {"entries": [
            {"content": "Atlas launches on February 10", "category": "decision", "facts": [1]},
            {"content": "Alice is tech lead of Atlas", "category": "identity", "facts": [2]},
        ]}
        assert (await app.compressor.weekly()).promoted == 2

        clock.advance(2 * 86400)
        await say(app, clock, "/new", "alice")
        await say(app, clock, "Update: we moved the Atlas launch to March 3.", "alice")
        model.extractions.append(("March 3", {"facts": [
            {"content": "Project Atlas launch moved to March 3", "project": "atlas", "topic": "launch",
             "category": "decision", "importance": 0.9, "updates": 1},
        ], "summary": "launch moved"}))
        clock.advance(200)
        reports = await app.extraction.tick()  # type: ignore[attr-defined]
        assert [r.ok for r in reports] == [True] and model.extractions == []

        clock.advance(86400)
        await say(app, clock, "/new", "alice")
        await say(app, clock, "When does Atlas launch?", "alice")
        prompt = json.dumps(fake.last_chat()["messages"], ensure_ascii=False)
        assert "Project Atlas launch moved to March 3" in prompt
        assert "February 10" not in as_current(fake.last_chat())
        assert "Alice is tech lead of Atlas" in prompt  # the entry on a fact that still holds stays
        shown = await say(app, clock, "/memory", "alice")
        assert "March 3" in shown and "February 10" not in shown

        # The retired entry keeps its history: replaced by the newer fact.
        engine = app.backend.engine  # type: ignore[union-attr]
        old = [m for m in await engine.list_memories("echo:alice", status=None) if m.tier == 1 and "February" in m.content]
        new = [m for m in await engine.list_memories("echo:alice") if "March 3" in m.content]
        assert len(old) == 1 and len(new) == 1 and old[0].superseded_by == new[0].id
