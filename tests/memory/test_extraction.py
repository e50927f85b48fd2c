from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memory import ManualClock, MemoryEngine
from memory.changelog import read_log
from memory.extraction import BACKLOG_BACKOFF, BACKOFF, ExtractionService, FlushReport
from memory.llm import MemoryLLM
from memory.retrieval import Retriever
from memory.service import SqliteMemory
from tests.fakes.openai_server import FakeOpenAI, Reply

from ._writepath import fake, llm, reply, turns, user_prompt  # noqa: F401


def service(engine: MemoryEngine, llm: MemoryLLM, **kw: Any) -> ExtractionService:
    return ExtractionService(engine, llm, **kw)


async def buffered(engine: MemoryEngine) -> list[tuple[Any, ...]]:
    rows = await engine.db.fetchall("SELECT owner, role, content, attempts, next_attempt_at FROM extraction_buffer ORDER BY id")
    return [tuple(r) for r in rows]


async def counts(engine: MemoryEngine) -> tuple[int, int, int]:
    m = await engine.db.fetchone("SELECT COUNT(*) FROM memories")
    e = await engine.db.fetchone("SELECT COUNT(*) FROM daily_events")
    b = await engine.db.fetchone("SELECT COUNT(*) FROM extraction_buffer")
    return m[0], e[0], b[0]  # type: ignore[index]


ZH = (("我下个月要从北京搬到上海了", "好的，记住了。"), ("以后部署都用 pnpm", "明白。"))
EN = (("I moved to Berlin last week", "Noted!"), ("From now on we deploy with pnpm", "Got it."))


@pytest.mark.parametrize(
    "pairs, lang, facts, summary",
    [
        (ZH, "Chinese", [{"content": "用户下个月从北京搬到上海", "category": "identity", "importance": 1},
                         {"content": "部署使用 pnpm", "category": "decision", "project": "Deploy", "importance": "0.8"}],
         "用户聊了搬家和部署"),
        (EN, "English", [{"content": "User moved to Berlin", "category": "identity", "importance": 1},
                         {"content": "Deploys use pnpm", "category": "decision", "project": "Deploy", "importance": "0.8"}],
         "User talked about moving and deploys"),
    ],
)
async def test_quiet_gap_extracts_in_the_conversation_language(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM,
    pairs: Any, lang: str, facts: list[dict[str, Any]], summary: str,
) -> None:
    mem = SqliteMemory(engine)
    svc = service(engine, llm)
    svc.attach(mem)
    await mem.buffer(turns("alice", *pairs))
    assert await svc.tick() == [] and fake.requests == []  # still inside the quiet gap
    clock.advance(timedelta(minutes=2, seconds=59))
    assert await svc.tick() == []
    clock.advance(timedelta(seconds=1))
    fake.queue_reply(reply(facts, summary))
    [rep] = await svc.tick()
    assert rep.ok and rep.rows == 4 and len(rep.added) == 2
    prompt = user_prompt(fake.requests[0])
    assert f"mainly in {lang}" in prompt and pairs[0][0] in prompt and pairs[1][1] in prompt
    assert "same language as the conversation" in fake.requests[0]["messages"][0]["content"]
    stored = await engine.list_memories("alice")
    assert sorted((m.content, m.category.value, m.importance, m.project) for m in stored) == sorted(
        [(facts[0]["content"], "identity", 1.0, "_global"), (facts[1]["content"], "decision", 0.8, "deploy")]
    )
    prov = stored[0].provenance
    assert prov.channel == "telegram" and prov.chat_id == "1" and prov.message_ids == ("1", "2")
    assert len(prov.refs) == 4 and all(r.startswith("buf:") for r in prov.refs)
    [event] = await engine.events("alice")
    assert event.summary == summary and event.event_date == "2026-03-01" and event.raw_tokens > 0
    assert await buffered(engine) == []
    # The batch's facts and its event cite the same messages: forgetting a
    # fact names the event, and holds it from the daily compression, which
    # would turn it back into the fact.
    assert event.provenance.refs == prov.refs
    done = await mem.forget("alice", [f"m{stored[0].id}"])
    assert [h.ref for h in done.kept] == [f"e{event.id}"]
    assert await engine.events("alice") == [replace(event, is_compressed=True)]


async def test_token_budget_triggers_at_once_and_caps_the_batch(
    engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    mem = SqliteMemory(engine)
    svc = service(engine, llm, token_budget=100)
    fake.responder = lambda body: Reply(reply([], "s"))
    await mem.buffer(turns("bob", *[("word " * 60, "ok")] * 3))  # ~75 tokens per user turn
    reports = await svc.tick()
    assert [r.rows for r in reports] == [2, 2, 2] and await counts(engine) == (0, 3, 0)


async def test_a_batch_never_mixes_users_or_chats(engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM) -> None:
    mem = SqliteMemory(engine)
    svc = service(engine, llm)
    seen: list[str] = []

    def responder(body: dict[str, Any]) -> Reply:
        seen.append(user_prompt(body))
        return Reply(reply([], "s"))

    fake.responder = responder
    for i in range(3):
        await mem.buffer(turns("alice", (f"alice says {i}", "ok"), start=i * 10))
        await mem.buffer(turns("bob", (f"bob says {i}", "ok"), start=i * 10))
    await mem.buffer(turns("alice", ("alice in another chat", "ok"), chat="2", start=99))
    clock.advance(timedelta(minutes=5))
    reports = await svc.tick()
    assert sorted((r.owner, r.rows) for r in reports) == [("alice", 2), ("alice", 6), ("bob", 6)]
    assert len(seen) == 3
    for p in seen:
        assert not ("alice says" in p and "bob says" in p)
        assert not ("alice in another chat" in p and "alice says" in p)
    owners = sorted([(e.owner, e.chat_id) for e in await engine.events("alice")] +
                    [(e.owner, e.chat_id) for e in await engine.events("bob")])
    assert owners == [("alice", "1"), ("alice", "2"), ("bob", "1")]


async def test_interleaved_chats_of_one_user_make_one_batch_per_chat(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    mem = SqliteMemory(engine)
    svc = service(engine, llm)
    prompts: list[str] = []
    fake.responder = lambda body: (prompts.append(user_prompt(body)), Reply(reply([], "s")))[1]
    for i in range(3):  # private chat and a group, alternating
        await mem.buffer(turns("alice", (f"private {i}", "ok"), chat="1", start=i * 10))
        await mem.buffer(turns("alice", (f"group {i}", "ok"), chat="2", start=i * 10 + 5))
    clock.advance(timedelta(minutes=5))
    reports = await svc.tick()
    assert [r.rows for r in reports] == [6, 6]  # not six batches of two
    assert all(("private" in p) != ("group" in p) for p in prompts)
    assert "private 0" in prompts[0] and "private 2" in prompts[0]


async def test_failures_keep_the_buffer_and_back_off(engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM) -> None:
    mem = SqliteMemory(engine)
    svc = service(engine, llm)
    await mem.buffer(turns("alice", ("remember: my locker is 42", "ok")))
    clock.advance(timedelta(minutes=3))
    failures = [lambda: fake.queue_error(500), lambda: fake.queue_reply("{not json"), lambda: fake.queue_error(429),
                lambda: fake.queue_reply("Sorry, I can't."), lambda: fake.queue_error(502), lambda: fake.queue_error(500)]
    for attempt, fail in enumerate(failures, start=1):
        fail()
        [rep] = await svc.tick()
        assert rep.error is not None and await counts(engine) == (0, 0, 2)
        rows = await buffered(engine)
        wait = BACKOFF[attempt - 1] if attempt <= len(BACKOFF) else BACKLOG_BACKOFF
        assert {(r[3], r[4]) for r in rows} == {(attempt, _ts(clock.now() + wait))}
        n = len(fake.requests)
        clock.advance(wait - timedelta(seconds=1))
        assert await svc.tick() == [] and len(fake.requests) == n  # not before its time
        clock.advance(timedelta(seconds=1))
    [backlog] = await read_log(engine.db, actions=["backlog"])
    assert backlog.owner == "alice" and json.loads(backlog.detail)["attempts"] == 5
    fake.queue_reply(reply([{"content": "Alice's locker is 42", "category": "config"}], "locker"))
    [rep] = await svc.tick()
    assert rep.ok and await counts(engine) == (1, 1, 0)


async def test_after_the_backlog_the_backoff_lengthens_to_a_day(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """Seed 001: after the 5th failure (logged ``backlog``) an outage that
    lasts is asked every 24 h, not every 12 h; the buffer stays whole and
    the health figures keep counting it as failing."""
    mem = SqliteMemory(engine)
    svc = service(engine, llm)
    await mem.buffer(turns("alice", ("remember: my locker is 42", "ok")))
    clock.advance(timedelta(minutes=3))
    waits = [*BACKOFF, BACKLOG_BACKOFF, BACKLOG_BACKOFF]
    assert BACKLOG_BACKOFF == timedelta(hours=24)
    for attempt, wait in enumerate(waits, start=1):
        fake.queue_error(500)
        [rep] = await svc.tick()
        assert rep.error is not None
        rows = await buffered(engine)
        assert {(r[3], r[4]) for r in rows} == {(attempt, _ts(clock.now() + wait))} and len(rows) == 2
        n = len(fake.requests)
        clock.advance(wait - timedelta(seconds=1))
        assert await svc.tick() == [] and len(fake.requests) == n  # not before its time
        clock.advance(timedelta(seconds=1))
    backlog = await engine.backlog()
    assert (backlog.lines, backlog.retrying, backlog.stuck) == (2, 2, 2)
    assert len(await read_log(engine.db, actions=["backlog"])) == 1  # logged once, at the 5th
    fake.queue_reply(reply([{"content": "Alice's locker is 42", "category": "config"}], "locker"))
    [rep] = await svc.tick()
    assert rep.ok and await counts(engine) == (1, 1, 0)


def _ts(dt: Any) -> str:
    from memory.clock import format_ts

    return format_ts(dt)


async def test_timeout_keeps_the_buffer(engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI) -> None:
    client = MemoryLLM(base_url=fake.url, model="m", timeout=0.2, retries=0)
    try:
        svc = service(engine, client)
        await SqliteMemory(engine).buffer(turns("alice", ("hello", "hi")))
        fake.queue_delay(1.0, reply([{"content": "late fact"}]))
        [rep] = await svc.flush_now("alice")
        assert "timeout" in (rep.error or "") and await counts(engine) == (0, 0, 2)
        assert (await buffered(engine))[0][3] == 1
    finally:
        await client.aclose()


async def test_daily_flush_sweeps_inside_the_quiet_gap(tmp_path: Path, fake: FakeOpenAI, llm: MemoryLLM) -> None:
    clock = ManualClock("2026-03-01T18:58:00Z")  # 02:58 in Shanghai
    engine = await MemoryEngine.open(tmp_path / "m.db", clock)
    try:
        svc = service(engine, llm, timezone="Asia/Shanghai", quiet_gap=timedelta(minutes=30))
        await SqliteMemory(engine).buffer(turns("alice", ("late night chat", "ok")))
        clock.advance(timedelta(minutes=1))
        assert await svc.tick() == []
        clock.advance(timedelta(minutes=1, seconds=5))  # 03:00:05 local, 2 minutes after the message
        fake.queue_reply(reply([], "夜聊"))
        [rep] = await svc.tick()
        assert rep.ok and await counts(engine) == (0, 1, 0)
        [ev] = await engine.events("alice")
        assert ev.event_date == "2026-03-02"  # the local date of the conversation
    finally:
        await engine.close()


async def test_flush_now_before_tier0_trims_loses_nothing(engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM) -> None:
    mem = SqliteMemory(engine)
    svc = service(engine, llm)
    window = turns("alice", *[(f"message {i} about project atlas", f"reply {i}") for i in range(1, 11)])
    await mem.buffer(window)
    fake.queue_error(500)
    [rep] = await svc.flush_now("alice")  # the provider is down: still buffered
    assert rep.error and await counts(engine) == (0, 0, 20)
    fake.queue_reply(reply([{"content": "Alice works on project atlas", "project": "atlas"}], "atlas chat"))
    [rep] = await svc.flush_now("alice")  # ignores the backoff: Tier 0 is about to drop them
    assert rep.ok and rep.rows == 20 and await counts(engine) == (1, 1, 0)
    prompt = user_prompt(fake.requests[-1])
    assert all(t.content in prompt for t in window)
    [m] = await engine.list_memories("alice")
    assert m.provenance.message_ids == tuple(str(i) for i in range(1, 11))


STEPS = ["read", "candidates", "llm", "facts", "event", "delete"]


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("how", ["cancel", "raise"])
async def test_crash_at_any_step_loses_and_duplicates_nothing(
    tmp_path: Path, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM, step: str, how: str
) -> None:
    path = tmp_path / "crash.db"
    fake.responder = lambda body: Reply(reply([{"content": "Alice lives in Hangzhou", "category": "identity"},
                                               {"content": "Alice drinks oolong"}], "tea talk"))

    async def crash(name: str, owner: str) -> None:
        if name == step:
            if how == "cancel":
                asyncio.current_task().cancel()  # type: ignore[union-attr]
                await asyncio.sleep(0)
            raise RuntimeError(f"power cut at {name}")

    engine = await MemoryEngine.open(path, clock)
    try:
        await SqliteMemory(engine).buffer(turns("alice", ("I live in Hangzhou and drink oolong", "nice")))
        task = asyncio.create_task(service(engine, llm, on_step=crash).flush_now("alice"))
        with pytest.raises((asyncio.CancelledError, RuntimeError)):
            await asyncio.wait_for(task, 5)
    finally:
        await engine.close()
    engine = await MemoryEngine.open(path, clock)  # "restart"
    try:
        assert await counts(engine) == (0, 0, 2)
        [rep] = await service(engine, llm).flush_now("alice")
        assert rep.ok and await counts(engine) == (2, 1, 0)
        assert await service(engine, llm).flush_now("alice") == []  # redo: nothing left, nothing doubled
        assert await counts(engine) == (2, 1, 0)
    finally:
        await engine.close()


async def test_killed_while_waiting_for_the_llm(engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM) -> None:
    await SqliteMemory(engine).buffer(turns("alice", ("hello", "hi")))
    fake.queue_delay(5.0, reply([{"content": "x"}]))
    task = asyncio.create_task(service(engine, llm).flush_now("alice"))
    for _ in range(200):
        if fake.requests:
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await counts(engine) == (0, 0, 2) and (await buffered(engine))[0][3] == 0


async def test_two_workers_racing_on_the_same_rows_write_once(engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM) -> None:
    # Two services stand for the gateway and a hand-run `myclaw memory flush`.
    await SqliteMemory(engine).buffer(turns("alice", ("I use vim", "ok")))

    async def slow(body: dict[str, Any]) -> Reply:
        await asyncio.sleep(0.2)
        return Reply(reply([{"content": "Alice uses vim"}], "editor"))

    fake.responder = slow
    a, b = await asyncio.gather(service(engine, llm).flush_now("alice"), service(engine, llm).flush_now("alice"))
    assert sorted(r.ok for r in a + b) == [False, True]
    assert [r.skipped for r in a + b if not r.ok] == ["rows already flushed by another worker"]
    assert await counts(engine) == (1, 1, 0)


async def test_background_loop_flushes_over_budget_and_stops_cleanly(engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM) -> None:
    mem = SqliteMemory(engine)
    svc = service(engine, llm, token_budget=13, interval=60)  # the pair is 13 tokens
    svc.attach(mem)
    fake.responder = lambda body: Reply(reply([{"content": "Alice likes long messages"}], "s"))
    await svc.start()
    try:
        await mem.buffer(turns("alice", ("a fairly long message that is over the budget", "ok")))
        for _ in range(300):
            if (await counts(engine))[2] == 0:
                break
            await asyncio.sleep(0.01)
        assert await counts(engine) == (1, 1, 0)
    finally:
        await svc.stop()
    await svc.stop()  # twice is fine


class _BuggyOnce(ExtractionService):
    """A bug in finding who is due (not SQLite's, not the disk's): raised
    by the first tick only."""

    failed = 0

    async def _due(self, now: Any = None) -> list[tuple[str, bool]]:
        if not self.failed:
            self.failed += 1
            raise RuntimeError("a bug in _due")
        return await super()._due(now)


async def test_a_bug_in_one_tick_does_not_end_the_background_loop(
    engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """The loop is the write path's only driver: a tick that raised anything
    used to end it for the rest of the process, every later line kept in
    the buffer and never learnt. Now it is logged and the next tick runs."""
    mem = SqliteMemory(engine)
    svc = _BuggyOnce(engine, llm, token_budget=13, interval=0.05, wake_gap=0.01)
    svc.attach(mem)
    fake.responder = lambda body: Reply(reply([{"content": "Alice likes long messages"}], "s"))
    await svc.start()
    try:
        await mem.buffer(turns("alice", ("a fairly long message that is over the budget", "ok")))
        for _ in range(300):
            if (await counts(engine))[2] == 0:
                break
            await asyncio.sleep(0.01)
        assert svc.failed == 1
        assert await counts(engine) == (1, 1, 0)
    finally:
        await svc.stop()


class _BuggyFor(ExtractionService):
    """A bug (not the model's failure, which is recorded) in one user's flush."""

    async def _flush_owner(self, owner: str, *, force: bool) -> list[FlushReport]:
        if owner == "bob":
            raise RuntimeError("a bug in bob's flush")
        return await super()._flush_owner(owner, force=force)


async def test_flush_all_flushes_the_others_when_one_users_flush_raises(
    engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """`myclaw memory flush`: bob's bug is his report's error; alice, after
    him in the buffer, is still flushed, and bob's lines stay buffered."""
    mem = SqliteMemory(engine)
    svc = _BuggyFor(engine, llm)
    svc.attach(mem)
    fake.responder = lambda body: Reply(reply([{"content": "Alice likes tea"}], "s"))
    await mem.buffer(turns("bob", ("I like coffee", "ok")))
    await mem.buffer(turns("alice", ("I like tea", "ok")))
    reports = await svc.flush_all()
    assert [(r.owner, r.ok) for r in reports] == [("bob", False), ("alice", True)]
    assert reports[0].error == "RuntimeError"  # the type, never the words (a bug's may quote a line)
    assert reports[0].rows == 2  # his lines, all still waiting: the CLI says "bob: 2 messages, failed"
    assert [r[0] for r in await buffered(engine)] == ["bob", "bob"]
    # `myclaw memory flush --user bob`: his report, not a traceback.
    [again] = await svc.flush_user("bob")
    assert (again.owner, again.ok, again.rows, again.error) == ("bob", False, 2, "RuntimeError")


async def test_each_fact_is_indexed_with_the_lines_it_came_from(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """The model cites input lines (L1..LN); a fact keeps their words as its
    source_text, so a later question in the user's own words finds it."""
    mem = SqliteMemory(engine)
    svc = service(engine, llm)
    svc.attach(mem)
    pairs = (("I've been doing kickboxing twice a week since spring", "Nice!"), ("Our CI runs on Drone now", "Noted."))
    await mem.buffer(turns("alice", *pairs))
    clock.advance(timedelta(minutes=5))
    fake.queue_reply(reply([
        {"content": "Alice trains in a combat sport", "category": "event", "lines": ["L1"]},
        {"content": "The team's CI moved", "category": "decision", "lines": [3, 99]},  # 99: no such line
        {"content": "Alice chats with the bot", "category": "temp"},  # no lines: no source
    ]))
    [rep] = await svc.tick()
    assert rep.ok and len(rep.added) == 3
    prompt = user_prompt(fake.requests[0])
    assert "L1 [2026-03-01" in prompt and f"user: {pairs[0][0]}" in prompt and "L4 " in prompt
    got = {m.content: m.source_text for m in await engine.list_memories("alice")}
    assert got == {
        "Alice trains in a combat sport": pairs[0][0],
        "The team's CI moved": pairs[1][0],
        "Alice chats with the bot": "",
    }
    hits = await Retriever(engine).retrieve("alice", "how often do I go kickboxing?")
    assert hits[0].content == "Alice trains in a combat sport"  # found by the words said, shown as the fact
    assert "kickboxing" not in hits[0].content
    hits = await Retriever(engine).retrieve("alice", "what does Drone run for us?")
    assert hits[0].content == "The team's CI moved"


async def test_a_users_own_zone_times_their_lines_and_dates_their_day(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """At 20:00 UTC on the 1st it is 04:00 on the 2nd in Shanghai: the model
    reads her lines on her clock (so "tomorrow" means her 3rd) and her day's
    event is dated the 2nd; Bob, with no zone of his own, keeps the gateway's."""
    from datetime import tzinfo
    from zoneinfo import ZoneInfo

    clock.set("2026-03-01T20:00:00Z")
    mem = SqliteMemory(engine)
    svc = service(engine, llm, timezone="UTC")
    zones: dict[str, tzinfo] = {"alice": ZoneInfo("Asia/Shanghai")}

    async def zone_of(owner: str) -> tzinfo | None:
        return zones.get(owner)

    svc.zone_of = zone_of
    await mem.buffer(turns("alice", ("I fly to Berlin tomorrow", "Safe trip!")))
    await mem.buffer(turns("bob", ("I fly to Rome tomorrow", "Enjoy!"), chat="2"))
    fake.responder = lambda body: Reply(reply([], "travel plans"))
    await svc.flush_now("alice")
    await svc.flush_now("bob")
    alice_prompt, bob_prompt = (user_prompt(r) for r in fake.requests)
    assert "[2026-03-02 Mon 04:00] user: I fly to Berlin tomorrow" in alice_prompt
    assert "[2026-03-01 Sun 20:00] user: I fly to Rome tomorrow" in bob_prompt
    assert [e.event_date for e in await engine.events("alice")] == ["2026-03-02"]
    assert [e.event_date for e in await engine.events("bob")] == ["2026-03-01"]


async def test_broken_memory_model_output_keeps_the_buffer_and_never_logs_what_was_said(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """Invalid JSON, a reply cut inside its facts, prose, an object without
    facts, and facts without content: the buffer stays whole and is
    retried, nothing is half-written, and the log says what went wrong
    without the conversation's words (the model's reply repeats them)."""
    from structlog.testing import capture_logs

    secret = "4242-LOCKER"
    mem = SqliteMemory(engine)
    svc = service(engine, llm)
    await mem.buffer(turns("alice", (f"remember: my locker code is {secret}", "noted")))
    clock.advance(timedelta(minutes=3))  # the quiet gap
    broken = [
        '{"facts": [{"content": "Alice\'s locker code is ' + secret,  # cut at the length limit
        f'```json\n{{"facts": [{{"content": "locker code {secret}", "category": "credential"}},\n```',  # fenced, cut
        f"Sorry, I cannot store the locker code {secret}.",
        json.dumps({"note": f"locker code {secret}"}),
    ]
    with capture_logs() as logs:
        for attempt, text in enumerate(broken, start=1):
            fake.queue_reply(text)
            [rep] = await svc.tick()
            assert rep.error is not None and await counts(engine) == (0, 0, 2)
            assert {r[3] for r in await buffered(engine)} == {attempt}
            clock.advance(BACKOFF[attempt - 1])
        # Facts with missing fields: the one without words is dropped, the rest stored.
        fake.queue_reply("```json\n" + reply([{"category": "credential", "text_": f"code {secret}"},
                                              {"content": f"Alice's locker code is {secret}"}], "locker") + "\n```")
        [rep] = await svc.tick()
    assert rep.ok and await counts(engine) == (1, 1, 0)
    assert secret not in repr(logs)
    assert len([e for e in logs if e["log_level"] in ("warning", "error")]) <= 2  # no storm: one line a failure at most


async def test_a_users_lock_goes_once_their_flush_is_done_and_one_flush_at_a_time_holds(
    engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    # A lock per user ever flushed was kept for good: thousands over months.
    mem = SqliteMemory(engine)
    for i in range(12):
        await mem.buffer(turns(f"user{i}", (f"I use editor number {i}", "ok")))
    fake.responder = lambda body: Reply(reply([{"content": "uses an editor"}], "editor"))
    svc = service(engine, llm)
    for i in range(12):
        assert [r.ok for r in await svc.flush_now(f"user{i}")] == [True]
    assert svc._locks == {}

    await mem.buffer(turns("alice", ("I use vim", "ok")))
    started = asyncio.Event()

    async def slow(body: dict[str, Any]) -> Reply:
        started.set()
        await asyncio.sleep(0.2)
        return Reply(reply([{"content": "Alice uses vim"}], "editor"))

    fake.responder = slow
    first = asyncio.create_task(svc.flush_now("alice"))
    await started.wait()
    second = await svc.flush_now("alice")  # waits for the first, which took the rows
    assert [r.ok for r in await first] == [True] and second == []
    assert svc._locks == {}
    assert len([r for r in fake.requests if r.get("response_format")]) == 13


async def test_a_rename_the_user_states_is_learnt_and_old_facts_count_for_the_new_name(
    engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """"We renamed atlas to orion": the model says so (``renamed``), the
    alias is kept (logged), the old facts and a fact still labelled with
    the old name are filed under the new one, and answer for it."""
    def model(body: dict[str, Any]) -> Reply:
        prompt = user_prompt(body)
        if "renamed atlas" in prompt:
            return Reply(reply([{"content": "orion launches in May", "project": "atlas", "lines": [1]}],
                               renamed=[{"from": "atlas", "to": "orion"}, {"from": "x"}, "junk",
                                        {"from": "orion", "to": "Orion"}]))
        facts = [{"content": "atlas stores its data in Postgres", "project": "atlas", "lines": [1]},
                 {"content": "webshop stores its data in MySQL", "project": "webshop", "lines": [1]}]
        return Reply(reply(facts if "Postgres" in prompt else []))

    fake.responder = model
    mem, svc = SqliteMemory(engine), ExtractionService(engine, llm)
    for n, words in enumerate(["atlas uses Postgres, webshop MySQL", "we renamed atlas to orion, it launches in May"]):
        await mem.buffer(turns("alice", (words, "ok"), start=n * 2))
        assert all(r.ok for r in await svc.flush_now("alice"))
    assert "renamed" in fake.requests[0]["messages"][0]["content"]
    assert await engine.project_aliases("alice") == {"atlas": "orion"}
    projects = {m.content: m.project for m in await engine.list_memories("alice")}
    assert projects["orion launches in May"] == "orion" and projects["atlas stores its data in Postgres"] == "orion"
    assert projects["webshop stores its data in MySQL"] == "webshop"
    [logged] = await read_log(engine.db, actions=["alias"])
    assert logged.owner == "alice" and json.loads(logged.detail) == {"from": "atlas", "to": "orion"}
    hits = await Retriever(engine).retrieve("alice", "where does orion store its data?")
    assert hits[0].content == "atlas stores its data in Postgres"


async def test_a_fact_learnt_late_is_dated_the_day_it_was_said(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """Seed 002: an answer says when a thing was said. Said at 23:55, its
    extraction failed and ran again after the backoff, the next day: the
    fact is still dated the day it was said, and "yesterday" finds it."""
    clock.set("2026-03-01T23:55:00Z")
    mem = SqliteMemory(engine)
    svc = service(engine, llm)
    await mem.buffer(turns("alice", ("my locker number is 42", "ok")))
    clock.advance(timedelta(minutes=3))
    fake.queue_error(500)
    [rep] = await svc.tick()
    assert rep.error is not None
    clock.advance(BACKOFF[0])
    fake.queue_reply(reply([{"content": "Alice's locker number is 42", "category": "config", "lines": [1]}], "locker"))
    [rep] = await svc.tick()
    assert rep.ok
    [m] = await engine.list_memories("alice")
    assert m.created_at.startswith("2026-03-01T23:55")
    [hit] = await Retriever(engine).retrieve("alice", "what is my locker number?")
    assert hit.date == "2026-03-01" and "2026-03-01" in hit.citation()
    clock.advance(timedelta(hours=12))  # the 2nd, noon
    [hit] = await Retriever(engine).retrieve("alice", "what did I tell you yesterday about the locker?")
    assert hit.id == m.id


async def test_a_line_shows_its_weekday_and_the_model_is_told_to_date_relative_times(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """"星河下周三交付" said on Wednesday 11 March means the 18th: the model
    reads the line's weekday (a date alone leaves it to count the calendar)
    and is told to write the day a relative time means, so the fact still
    holds when recalled months later, not "next Wednesday"."""
    clock.set("2026-03-11T02:00:00Z")  # 10:00 in Shanghai
    mem = SqliteMemory(engine)
    svc = service(engine, llm, timezone="Asia/Shanghai")
    await mem.buffer(turns("alice", ("星河下周三交付第一个版本", "好的")))
    fake.responder = lambda body: Reply(reply([], "交付日期"))
    await svc.flush_now("alice")
    body = fake.requests[0]
    assert "[2026-03-11 Wed 10:00] user: 星河下周三交付第一个版本" in user_prompt(body)
    system = body["messages"][0]["content"]
    assert "下周三" in system and "as the date it means" in system


async def test_lines_that_left_their_chats_window_are_due_inside_the_quiet_gap(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """The pre-compaction flush: the gateway says where a chat's window now
    starts; the lines of that chat buffered before then are due at once,
    those still in the window (and another chat's) wait for the quiet gap."""
    from memory.clock import format_ts

    mem = SqliteMemory(engine)
    svc = service(engine, llm)
    await mem.buffer(turns("alice", ("my locker code is 4471", "Noted."), chat="1"))
    await mem.buffer(turns("bob", ("I like tea", "Noted."), chat="2"))
    clock.advance(10)
    start = format_ts(clock.now())
    svc.left_window("telegram", "1", format_ts(clock.now() - timedelta(seconds=20)))  # nothing of it left
    svc.left_window("telegram", "2", start)  # the window moved past bob's lines... of another chat
    assert await svc.due_owners() == ["bob"]
    svc.left_window("telegram", "1", start)
    assert await svc.due_owners() == ["alice"]
    assert await svc.due_owners() == []  # read once: the next move says it again
    fake.queue_reply(reply([{"content": "Alice's locker code is 4471", "category": "identity", "importance": 1}], "gym"))
    svc.left_window("telegram", "1", start)
    [rep] = await svc.tick()
    assert rep.ok and rep.owner == "alice"
    svc.left_window("telegram", "1", start)
    assert await svc.due_owners() == []  # nothing of alice's waits now


async def test_chats_whose_windows_moved_together_are_flushed_one_at_a_time_in_that_tick(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """Under load many chats' windows move within a second: their flushes
    (retrieval and model calls on the event loop) run one after another,
    not four at once in a burst that replies wait behind; each is still
    flushed in the tick that finds it due. A user due by the quiet gap is
    not queued behind them."""
    from memory.clock import format_ts

    mem = SqliteMemory(engine)
    await mem.buffer(turns("dave", ("I collect stamps", "Nice.")))
    clock.advance(timedelta(minutes=3))  # dave has paused: due by the quiet gap
    for n, who in enumerate(("alice", "bob", "carol"), start=2):
        await mem.buffer(turns(who, (f"{who} keeps bees", "Noted."), chat=str(n)))
    clock.advance(10)
    fake.responder = lambda body: Reply(reply([], "a chat"))
    running: set[str] = set()
    together: list[set[str]] = []
    began: list[str] = []

    async def on_step(name: str, owner: str) -> None:
        if name == "read":
            began.append(owner)
            running.add(owner)
            together.append(set(running))
        elif name == "delete":
            running.discard(owner)

    svc = service(engine, llm, on_step=on_step)
    for n in (2, 3, 4):
        svc.left_window("telegram", str(n), format_ts(clock.now()))
    reports = await svc.tick()
    assert sorted(r.owner for r in reports) == ["alice", "bob", "carol", "dave"] and all(r.ok for r in reports)
    assert await buffered(engine) == []
    assert not [s for s in together if len(s - {"dave"}) > 1], together  # the window's flushes: never two at once
    assert began[0] == "dave" or began.index("dave") < 2, began  # the paused user first or beside the first
    assert [o for o in began if o != "dave"] == ["alice", "bob", "carol"]  # in the order their lines came


async def test_one_users_failing_flush_does_not_cost_the_others_theirs(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """A flush that raises what it does not record itself (a bug; here at
    bob's candidates step) raised out of the tick: the paced wave's users
    after bob, due only because their window moved, waited for it to move
    again, and the paused user flushing beside them was cut off too. Now the
    others flush in that tick; bob's lines stay as they were, held for the
    backoff, and flush once it is over."""
    from structlog.testing import capture_logs

    from memory.clock import format_ts
    from memory.extraction import backoff

    mem = SqliteMemory(engine)
    await mem.buffer(turns("dave", ("I collect stamps", "Nice.")))
    clock.advance(timedelta(minutes=3))  # dave has paused: due by the quiet gap, flushed beside the wave
    for n, who in enumerate(("alice", "bob", "carol", "erin"), start=2):
        await mem.buffer(turns(who, (f"{who} keeps bees", "Noted."), chat=str(n)))
    clock.advance(10)
    fake.responder = lambda body: Reply(reply([], "a chat"))
    broken = {"bob", "dave"}

    async def on_step(name: str, owner: str) -> None:
        if name == "candidates" and owner in broken:
            raise KeyError(f"{owner} keeps bees")  # a bug, its text quoting a user's words

    svc = service(engine, llm, on_step=on_step)
    bobs = [r for r in await buffered(engine) if r[0] == "bob"]
    for n in (2, 3, 4, 5):
        svc.left_window("telegram", str(n), format_ts(clock.now()))
    with capture_logs() as logs:
        reports = await svc.tick()
    assert sorted((r.owner, r.ok) for r in reports) == [
        ("alice", True), ("bob", False), ("carol", True), ("dave", False), ("erin", True)]
    assert {r.error for r in reports if not r.ok} == {"KeyError"}
    assert [r for r in await buffered(engine) if r[0] == "bob"] == bobs  # intact, not marked
    assert {r[0] for r in await buffered(engine)} == {"bob", "dave"}
    failed = [e for e in logs if e["event"].startswith("extraction flush failed")]
    assert sorted(e["owner"] for e in failed) == ["bob", "dave"] and all(e["attempts"] == 1 for e in failed)
    assert "keeps bees" not in str(logs)

    broken.clear()  # fixed: but the backoff holds them until its time
    svc.left_window("telegram", "3", format_ts(clock.now()))
    assert [r for r in await svc.tick() if r.owner == "bob"] == []
    clock.advance(backoff(1) + timedelta(seconds=1))  # and dave's and bob's lines have paused long since
    reports = await svc.tick()
    assert sorted((r.owner, r.ok) for r in reports) == [("bob", True), ("dave", True)]
    assert await buffered(engine) == []


async def test_a_window_flush_is_followed_by_a_pause_as_long_as_it_took(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """Back to back, one flush after another still keeps the event loop
    busy for as long as the wave lasts; a pause as long as the last flush
    took (``window_pace`` 1) leaves replies at least half of it, and grows
    when they keep the loop busy. None after the last: a tick with one such
    flush ends with it."""
    from memory.clock import format_ts

    mem = SqliteMemory(engine)
    for n, who in enumerate(("alice", "bob", "carol"), start=1):
        await mem.buffer(turns(who, (f"{who} keeps bees", "Noted."), chat=str(n)))
    clock.advance(10)
    fake.responder = lambda body: Reply(reply([], "a chat"))
    loop = asyncio.get_running_loop()
    spans: dict[str, list[float]] = {}

    async def on_step(name: str, owner: str) -> None:
        if name in ("read", "delete"):
            spans.setdefault(owner, []).append(loop.time())

    svc = service(engine, llm, on_step=on_step, window_pace=1.0)
    for n in (1, 2, 3):
        svc.left_window("telegram", str(n), format_ts(clock.now()))
    reports = await svc.tick()
    assert [r.owner for r in reports] == ["alice", "bob", "carol"] and all(r.ok for r in reports)
    for first, then in (("alice", "bob"), ("bob", "carol")):
        took = spans[first][1] - spans[first][0]
        assert spans[then][0] - spans[first][1] >= took - 0.001, (first, spans)

    await mem.buffer(turns("dave", ("dave keeps bees", "Noted."), chat="4"))
    clock.advance(10)
    svc.window_pace = 50.0  # a pause after the last would be 50 times its flush
    svc.left_window("telegram", "4", format_ts(clock.now()))
    began = loop.time()
    [rep] = await svc.tick()
    assert rep.ok and rep.owner == "dave"
    assert loop.time() - began < 10 * (spans["dave"][1] - spans["dave"][0]), spans["dave"]


async def test_the_due_check_asks_about_every_moved_chat_however_many(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """The chats whose window moved are asked about in one query (a few
    hundred at a time): a chat of any of them is found, beyond the first
    hundreds too; one whose window still shows its lines is not due."""
    from memory.clock import format_ts
    from memory.extraction import _MOVED_CHUNK

    mem = SqliteMemory(engine)
    chats = _MOVED_CHUNK + 2
    for n in range(chats):
        await mem.buffer(turns(f"u{n}", (f"line of {n}", "ok"), chat=str(n)))
    clock.advance(10)
    moved = format_ts(clock.now())
    svc = service(engine, llm)
    for n in range(chats):
        svc.left_window("telegram", str(n), moved if n % 2 else format_ts(clock.now() - timedelta(seconds=30)))
    due = await svc.due_owners()
    assert due == [f"u{n}" for n in range(chats) if n % 2]  # the odd chats' windows moved past their lines


async def test_a_lines_day_is_written_once_where_the_day_changes_not_on_every_line(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """The date and weekday were repeated on every line of a batch, most of
    them the same day: ~4 of a line's ~7 label tokens (scripts/bench_cost.py).
    The day now heads the first line and the first of each later day; the
    others say the time, and the model is told they share the day above."""
    clock.set("2026-03-11T15:50:00Z")  # 23:50 in Shanghai, a Wednesday
    mem = SqliteMemory(engine)
    svc = service(engine, llm, timezone="Asia/Shanghai")
    first = turns("alice", ("星河下周三交付第一个版本", "好的"), ("测试环境用 k3s", "记下了"))
    for t in first:
        await mem.buffer([replace(t, at=clock.now())])
        clock.advance(60)
    clock.set("2026-03-11T16:05:00Z")  # past midnight there: Thursday
    await mem.buffer([replace(t, at=clock.now()) for t in turns("alice", ("明天开评审会", "好"), start=3)])
    fake.responder = lambda body: Reply(reply([], "交付日期"))
    await svc.flush_now("alice")
    # Each of her days is a batch of its own (its day log on that day), headed by its day.
    body, after = fake.requests
    lines = [ln for ln in user_prompt(body).splitlines() if ln.startswith("L")]
    assert lines == [
        "L1 [2026-03-11 Wed 23:50] user: 星河下周三交付第一个版本",
        "L2 [23:51] assistant: 好的",
        "L3 [23:52] user: 测试环境用 k3s",
        "L4 [23:53] assistant: 记下了",
    ]
    assert [ln for ln in user_prompt(after).splitlines() if ln.startswith("L")] == [
        "L1 [2026-03-12 Thu 00:05] user: 明天开评审会",
        "L2 [00:05] assistant: 好",
    ]
    system = body["messages"][0]["content"]
    assert "a line with the time only: the day of the line above" in system


async def test_facts_of_batches_committed_before_one_raised_are_embedded_at_once(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """A flush whose second batch raises (a bug at its first step) still
    tells its listeners of the first's committed fact: the gateway's
    vectorizer, idle for an hour, embeds it now."""
    from memory.embedding import CachedEmbedder, HttpEmbedder
    from memory.types import NewMemory
    from memory.vectorize import Vectorizer
    from memory.vectors import VectorIndex

    mem = SqliteMemory(engine)
    await mem.buffer(turns("alice", ("I moved to Berlin last week", "Noted!"), chat="1"))
    await mem.buffer(turns("alice", ("My sister is called Ann", "Nice."), chat="2"))
    fake.responder = lambda body: Reply(reply(
        [{"content": "Alice lives in Berlin", "category": "identity", "importance": 1}]
        if "Berlin" in user_prompt(body) else []))
    reads: list[str] = []

    async def on_step(name: str, owner: str) -> None:
        if name == "read":
            reads.append(owner)
            if len(reads) == 2:
                raise RuntimeError("a bug in the second batch")

    svc = service(engine, llm, on_step=on_step)
    raw = HttpEmbedder(base_url=fake.url, api_key="", model="m1", timeout=2.0)
    index = VectorIndex(engine.db, "m1")
    vz = Vectorizer(index, CachedEmbedder(raw, engine.db, clock), interval=3600, tick=3600)
    svc.on_memories_written(lambda _owner: vz.wake())  # as the gateway wires it
    await engine.add(NewMemory(owner="bob", content="Bob keeps bees"))
    await vz.start()
    try:
        for _ in range(3000):  # its first sweep done: it idles for the hour from here
            if await index.count() == 1:
                break
            await asyncio.sleep(0.01)
        assert await index.count() == 1
        with pytest.raises(RuntimeError):
            await svc.flush_now("alice")
        berlin = [m for m in await engine.list_memories("alice") if "Berlin" in m.content]
        assert len(berlin) == 1  # the first batch's fact was committed
        for _ in range(500):  # a bound for a loaded machine, far short of the hour
            if await index.count() == 2:
                break
            await asyncio.sleep(0.01)
        assert await index.count() == 2
    finally:
        await vz.stop()
        await raw.aclose()
