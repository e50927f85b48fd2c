"""A batch the memory model can never take (its reply cut at ``max_tokens``,
or the prompt over its context) is split until it fits; a single line that
still does not is set aside, kept and counted, never retried for ever nor
holding up the lines behind it."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

from structlog.testing import capture_logs

from memory import ManualClock, MemoryEngine
from memory.changelog import read_log
from memory.extraction import BACKOFF, ExtractionService, retry_set_aside
from memory.llm import EXTRACT_SYSTEM, MemoryLLM
from memory.service import SqliteMemory
from tests.fakes.openai_server import FakeOpenAI, Reply, _tokens

from ._writepath import fake, llm, reply, turns, user_prompt  # noqa: F401

CUT = '{"facts": [{"content": "The user said'  # a reply cut at max_tokens
_USER_LINE = re.compile(r"^L\d+ \[[^\]]+\] user: (.*)$", re.M)


def said_lines(body: dict[str, Any]) -> list[str]:
    """The user's lines in an extraction prompt, as the model reads them."""
    return _USER_LINE.findall(user_prompt(body))


def line_count(body: dict[str, Any]) -> int:
    return len(re.findall(r"^L\d+ ", user_prompt(body), re.M))


def facts_of(body: dict[str, Any]) -> Reply:
    """A model that learns each user line as a fact."""
    return Reply(reply([{"content": f"User said: {s}"} for s in said_lines(body)], "a chat"))


async def learnt(engine: MemoryEngine, owner: str = "alice") -> list[str]:
    return sorted(m.content for m in await engine.list_memories(owner))


async def waiting(engine: MemoryEngine) -> list[tuple[Any, ...]]:
    rows = await engine.db.fetchall(
        "SELECT content, attempts, next_attempt_at, set_aside_at FROM extraction_buffer ORDER BY id")
    return [tuple(r) for r in rows]


PAIRS = tuple((f"note number {i}", "ok") for i in range(1, 5))  # 8 lines


async def test_a_reply_cut_at_max_tokens_is_split_until_it_fits(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    sizes: list[int] = []

    def model(body: dict[str, Any]) -> Reply:
        sizes.append(line_count(body))
        if line_count(body) > 4:  # more facts than max_tokens holds
            return Reply(CUT, finish_reason="length")
        return facts_of(body)

    fake.responder = model
    await SqliteMemory(engine).buffer(turns("alice", *PAIRS))
    clock.advance(timedelta(minutes=3))
    reports = await ExtractionService(engine, llm).tick()
    assert sizes == [8, 4, 4]
    assert [(r.rows, r.ok) for r in reports] == [(4, True), (4, True)]
    assert await learnt(engine) == [f"User said: note number {i}" for i in range(1, 5)]
    assert len(await engine.events("alice")) == 2 and await waiting(engine) == []


async def test_a_prompt_over_the_context_is_split_until_it_fits(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    long = [(f"note {i}: " + "word " * 200, "ok") for i in range(1, 5)]  # ~250 tokens a user line
    # The window holds the system prompt, max_tokens and about two of them, not four.
    fake.context_windows["mem-model"] = _tokens(EXTRACT_SYSTEM) + llm.max_tokens + 800
    fake.responder = facts_of
    await SqliteMemory(engine).buffer(turns("alice", *long))
    clock.advance(timedelta(minutes=3))
    reports = await ExtractionService(engine, llm).tick()
    assert len(fake.refused) == 1 and [line_count(b) for b in fake.requests] == [4, 4]
    assert [(r.rows, r.ok) for r in reports] == [(4, True), (4, True)]
    assert len(await learnt(engine)) == 4 and await waiting(engine) == []


async def test_a_line_the_model_can_never_take_is_set_aside_and_the_rest_learnt(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    secret = "LOCKER-4242"

    def model(body: dict[str, Any]) -> Reply:
        if secret in user_prompt(body):
            return Reply(CUT + secret, finish_reason="length")  # a reply that never ends
        return facts_of(body)

    fake.responder = model
    mem = SqliteMemory(engine)
    svc = ExtractionService(engine, llm)
    pairs = list(PAIRS)
    pairs[2] = (f"my locker code is {secret}", "ok")
    await mem.buffer(turns("alice", *pairs))
    clock.advance(timedelta(minutes=3))
    with capture_logs() as logs:
        reports = await svc.tick()
    # 8 -> 4 + 4; the bad 4 -> 2 + 2; the bad 2 -> 1 (set aside) + 1.
    assert [r.rows for r in reports] == [4, 1, 1, 2]
    assert [r.set_aside for r in reports] == [False, True, False, False]
    assert await learnt(engine) == sorted(f"User said: note number {i}" for i in (1, 2, 4))
    [kept] = await waiting(engine)
    assert kept[0] == f"my locker code is {secret}" and kept[3] is not None and kept[2] is None
    [entry] = await read_log(engine.db, actions=["set-aside"])
    assert entry.owner == "alice" and json.loads(entry.detail)["rows"] == 1
    assert secret not in repr(logs) and secret not in entry.detail and secret not in (reports[1].error or "")
    assert len([e for e in logs if e["log_level"] in ("warning", "error")]) == 1  # one line for the batch

    # Never asked again, nor holding up what is said later.
    n = len(fake.requests)
    clock.advance(BACKOFF[-1] * 3)
    assert await svc.tick() == [] and await svc.flush_now("alice") == [] and len(fake.requests) == n
    await mem.buffer(turns("alice", ("note number 5", "ok"), start=10))
    clock.advance(timedelta(minutes=3))
    [rep] = await svc.tick()
    assert rep.ok and "User said: note number 5" in await learnt(engine)

    # Counted apart from the lines still waiting: kept, shown, not "stuck".
    backlog = await engine.backlog()
    assert (backlog.lines, backlog.set_aside, backlog.stuck) == (0, 1, 0)
    assert (await engine.stats("alice")).set_aside == 1
    # /forget all still finds it: it is the user's, kept, not lost.
    assert [r[0] for r in await waiting(engine)] == [f"my locker code is {secret}"]


async def test_a_half_that_fails_otherwise_backs_off_whole(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """Split, then the endpoint goes down: nothing is set aside for an
    outage, the lines keep their order and the usual backoff."""
    await SqliteMemory(engine).buffer(turns("alice", *PAIRS))
    clock.advance(timedelta(minutes=3))
    fake.queue(Reply(CUT, finish_reason="length"))
    fake.queue_error(500)
    svc = ExtractionService(engine, llm)
    reports = await svc.tick()
    assert [(r.rows, r.error is not None, r.set_aside) for r in reports] == [(4, True, False)]
    rows = await waiting(engine)
    assert len(rows) == 8 and all(r[3] is None for r in rows) and rows[0][1] == 1
    assert len(fake.requests) == 2
    clock.advance(BACKOFF[0])
    fake.responder = facts_of
    reports = await svc.tick()
    assert all(r.ok for r in reports) and len(await learnt(engine)) == 4 and await waiting(engine) == []


async def test_set_aside_lines_retried_by_hand_are_learnt_by_the_next_run(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """After a switch to a bigger memory model: ``retry_set_aside`` clears
    the mark (of one user, or everyone's), and the next run learns them."""
    big = {"alice": "ALICE-LONG", "bob": "BOB-LONG"}
    takes_long = [False]

    def model(body: dict[str, Any]) -> Reply:
        if not takes_long[0] and any(w in user_prompt(body) for w in big.values()):
            return Reply(CUT, finish_reason="length")
        return facts_of(body)

    fake.responder = model
    mem, svc = SqliteMemory(engine), ExtractionService(engine, llm)
    for owner, word in big.items():
        await mem.buffer(turns(owner, (f"a long story {word}", "ok")))
    clock.advance(timedelta(minutes=3))
    await svc.tick()
    assert (await engine.backlog()).set_aside == 2

    takes_long[0] = True  # the bigger model
    assert await retry_set_aside(engine, "alice", job="cli") == 1
    assert await retry_set_aside(engine, "alice", job="cli") == 0  # nothing left to clear
    assert ((await engine.backlog()).set_aside, (await engine.backlog()).lines) == (1, 1)
    [entry] = await read_log(engine.db, actions=["retry-set-aside"])
    assert (entry.owner, entry.job, json.loads(entry.detail)) == ("alice", "cli", {"rows": 1})
    await svc.flush_all()
    assert await learnt(engine) == ["User said: a long story ALICE-LONG"] and await learnt(engine, "bob") == []

    assert await retry_set_aside(engine, None, job="web") == 1  # everyone's
    await svc.flush_all()
    assert await learnt(engine, "bob") == ["User said: a long story BOB-LONG"]
    assert await waiting(engine) == [] and (await engine.backlog()).set_aside == 0


async def test_a_users_data_counts_lines_set_aside_apart_from_those_waiting(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    fake.responder = lambda body: Reply(CUT, finish_reason="length")
    mem = SqliteMemory(engine)
    await mem.buffer(turns("alice", ("a long story", "ok")))
    clock.advance(timedelta(minutes=3))
    await ExtractionService(engine, llm).tick()
    await mem.buffer(turns("alice", ("said later", "ok"), start=10))
    data, index = await mem.owner_data("alice"), await mem.owner_index("alice")
    assert (data.waiting, data.set_aside) == (2, 2) and (index.waiting, index.set_aside) == (2, 2)
    assert (await mem.owner_data("bob")).set_aside == 0
