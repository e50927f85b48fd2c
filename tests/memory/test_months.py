"""Four months of one user, on a clock passed in: daily extraction, the
daily and weekly compression, decay, corrections, changes and /forget, the
memory model played by the fake OpenAI server over HTTP. What the prompt
gets at the end (Core Memory and the recalled <memories>) holds the
current truth only; long-lived facts survive, chit-chat and debugging fade."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from memory import ManualClock, MemoryEngine
from memory.compression import Compressor
from memory.engine import content_hash
from memory.extraction import ExtractionService
from memory.format import format_hits
from memory.llm import MemoryLLM
from memory.service import SqliteMemory
from tests.fakes.openai_server import FakeOpenAI, Reply

from ._writepath import fake, llm, reply, turns, user_prompt  # noqa: F401


@dataclass(frozen=True)
class Says:
    """A line holding ``words`` gives ``fact``; it replaces the shown
    memory holding ``replaces`` (the model's ``updates``), if any."""

    words: str
    fact: str
    category: str = "identity"
    topic: str = "_general"
    replaces: str = ""


# Checked in order: a correction names the old value too.
SAYINGS = [
    Says("peanuts not shrimp", "User is allergic to peanuts", replaces="allergic to shrimp"),
    Says("allergic to shrimp", "User is allergic to shrimp"),
    Says("birthday", "User's birthday is May 3"),
    Says("moved to Berlin", "User moved to Berlin", topic="home", replaces="Shanghai"),
    Says("live in Shanghai", "User lives in Shanghai", topic="home"),
    Says("manager is now Zhang", "User's manager is now Zhang", replaces="manager is Li"),
    Says("manager is Li", "User's manager is Li"),
    Says("locker code", "User's locker code is 4711"),
    # Other one-at-a-time things, filed under another category than their
    # successor and sharing no telling word (memory/slots.py).
    Says("Pixel 8", "User switched to a Pixel 8", replaces="iPhone"),
    Says("iPhone 12", "User's phone is an iPhone 12", category="config", topic="devices"),
    Says("tea for me", "User now prefers tea", replaces="coffee"),
    Says("coffee", "User likes coffee", category="decision"),
    Says("weather", "User chatted about the weather", category="temp"),
    Says("debugging", "User is debugging a flaky test", category="debug"),
]


def memory_model(body: dict[str, Any]) -> Reply:
    system, prompt = body["messages"][0]["content"], user_prompt(body)
    if system.startswith("You consolidate"):  # the weekly merge: every fact kept as it is
        facts = re.findall(r"^(\d+)\. \[[^\]]*\] (.*)$", prompt, re.M)
        return Reply(json.dumps({"facts": [{"content": c, "from": [int(n)]} for n, c in facts], "drop": []}))
    if system.startswith("You maintain"):  # the profile: every important fact
        facts = re.findall(r"^(\d+)\. \[([a-z]+)[^\]]*\] (.*)$", prompt, re.M)
        return Reply(json.dumps({"entries": [{"content": c, "category": k, "facts": [int(n)]} for n, k, c in facts]}))
    shown = re.findall(r"^(\d+)\. \[[^\]]*\] (.*)$", prompt.split("Existing memories:")[1].split("\n\n")[0], re.M)
    lines = re.findall(r"^L(\d+) (.*)$", prompt, re.M)
    facts = []
    for i, line in lines:
        if "] user: " not in line and not line.startswith("- "):
            continue  # the assistant's lines say nothing of the user
        says = next((s for s in SAYINGS if s.words in line), None)
        if says is None:
            continue
        old = next((int(n) for n, c in shown if says.replaces and says.replaces in c), None)
        facts.append({"content": says.fact, "category": says.category, "topic": says.topic,
                      "lines": [int(i)], "updates": old})
    said = [line.split("] user: ", 1)[-1] for _, line in lines if "] user: " in line]
    return Reply(reply(facts, summary="; ".join(said)[:200] or "a chat"))


async def test_four_months_keep_the_current_truth_and_what_lasts(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    fake.responder = memory_model
    mem, svc, comp = SqliteMemory(engine), ExtractionService(engine, llm), Compressor(engine, llm)
    n = 0

    async def say(*lines: str) -> None:
        nonlocal n
        await mem.buffer(turns("alice", *((line, "ok") for line in lines), start=n))
        n += len(lines)
        assert all(r.ok for r in await svc.flush_now("alice"))

    def _current(text: str) -> str:
        """Without the lines under a recalled fact that say what it
        replaced, marked as no longer true (memory/format.py)."""
        return "\n".join(line for line in text.splitlines() if not line.startswith("  ("))

    async def prompt(question: str) -> str:
        return await mem.profile("alice") + "\n<memories>\n" + format_hits(await mem.recall("alice", question))

    await say("my birthday is May 3", "I'm allergic to shrimp", "I live in Shanghai", "my manager is Li")
    for day in range(1, 120):
        clock.advance(timedelta(days=1))
        if day == 10:
            await say("my phone is an iPhone 12", "I love coffee")
        elif day == 20:
            await say("no, that's wrong, I'm allergic to peanuts not shrimp")
        elif day == 45:
            await say("I moved to Berlin last week")  # no word of "lives in Shanghai"
        elif day == 60:
            await say("Li left the company, my manager is now Zhang")
        elif day == 70:
            await say("I switched to a Pixel 8", "these days it's tea for me")
        elif day == 80:
            await say("my locker code is 4711")
            [code] = [m for m in await engine.list_memories("alice") if "locker" in m.content]
            assert (await mem.forget("alice", [f"m{code.id}"])).erased
        elif day % 2 and day < 60:  # then she stops chatting about it
            await say(f"nice weather today, day {day}", "I'm debugging the login test again")
        await comp.daily()
        if day % 7 == 0:
            await comp.weekly()

    active = await engine.list_memories("alice", limit=1000)
    facts = {m.content for m in active if m.tier == 2}
    assert {"User is allergic to peanuts", "User's birthday is May 3", "User moved to Berlin",
            "User's manager is now Zhang", "User switched to a Pixel 8", "User now prefers tea"} <= facts
    gone = {"User is allergic to shrimp", "User lives in Shanghai", "User's manager is Li", "User's locker code is 4711",
            "User's phone is an iPhone 12", "User likes coffee"}
    assert not gone & {m.content for m in active}
    # Chit-chat and debugging faded (archived by decay), none of it current.
    assert "User chatted about the weather" not in facts and "User is debugging a flaky test" not in facts
    # One row per wording and tier: the daily and weekly runs reinforce, never copy.
    assert len({(m.tier, content_hash(m.content)) for m in active}) == len(active)
    # Nothing forgotten came back, in any status.
    assert not [m for m in await engine.list_memories("alice", status=None, limit=1000) if "locker" in m.content]

    core = await mem.profile("alice")
    assert "allergic to peanuts" in core and "May 3" in core and "Berlin" in core and "Zhang" in core
    assert "shrimp" not in core and "Shanghai" not in core and "manager is Li" not in core
    assert len(await engine.profile("alice", limit=1000)) <= 100
    # Not as current: only on the line under the move, marked as what it replaced.
    assert [line for line in (await prompt("where do I live?")).splitlines() if "Shanghai" in line] == [
        "  (it replaced what was said on 2026-03-01, no longer true: User lives in Shanghai)"]
    # The move is recalled by the words of what it replaced (docs/RETRIEVAL.md §6a).
    for q in ("where do I live?", "do I still live in Shanghai?"):
        assert "User moved to Berlin" in format_hits(await mem.recall("alice", q)), q
    assert "shrimp" not in _current(await prompt("what am I allergic to?"))
    assert "manager is Li" not in _current(await prompt("who is my manager?"))
    assert "4711" not in await prompt("what is my locker code?")
