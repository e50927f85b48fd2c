"""A year of one user (and a second, the privacy control) through the real
App: the script of what they say, the memory model that extracts it as a
careful model would, and the walk that runs the background jobs as in
production on a moving clock. Shared by tests/gateway/test_year_e2e.py
(a shortened year) and scripts/walk_year.py (the whole year, measured)."""

from __future__ import annotations

import json
import re
import sqlite3
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from gateway.app import App
from memory import ManualClock
from memory.engine import MemoryEngine
from memory.retrieval import Retriever
from memory.service import SqliteMemory
from tests.fakes.openai_server import FakeOpenAI, Reply, split_user_content, text_of
from tests.gateway.handtick import by_hand, cron_by_hand
from tests.gateway.test_app import ECHO, _config
from tests.gateway.test_remembering_e2e import say

BERLIN = ZoneInfo("Europe/Berlin")
ALICE, BOB = "alice", "bob"
# Bob's words: none of them may ever reach a request made for Alice.
BOB_WORDS = ("lighthouse", "Zucchini", "Lisbon", "kayak")


@dataclass(frozen=True)
class Said:
    """One fact a line states: ``slot`` names what it is about, so a later
    fact of the same slot replaces it (rule 5: "updates": N)."""

    content: str
    category: str
    slot: str = ""
    project: str = "_global"
    topic: str = "_general"
    importance: float = 0.8


# What Alice says on a day (the year's story) and the facts a model takes from it.
STORY: dict[str, list[tuple[str, list[Said]]]] = {
    "01-05": [("I'm Alice, a backend engineer at Nordwind.",
               [Said("Alice is a backend engineer at Nordwind", "identity", "job", importance=1.0)]),
              ("I live in Berlin, in Kreuzberg.", [Said("Alice lives in Berlin", "identity", "city", importance=1.0)])],
    "01-07": [("I'm vegetarian, so no meat when you suggest recipes.",
               [Said("Alice is vegetarian: no meat in recipes", "config", "diet", importance=0.9)]),
              ("I like dark mode in every editor.",
               [Said("Alice prefers dark mode in editors", "config", "theme")])],
    "01-10": [("Starting a new project, Atlas: a billing service for Nordwind.",
               [Said("Atlas is Alice's current project: a billing service for Nordwind", "decision", "atlas",
                     "atlas", "status")])],
    "02-11": [("For Atlas we decided on Postgres instead of MySQL, because we need JSONB.",
               [Said("For Atlas the team chose Postgres over MySQL because it needs JSONB", "decision", "atlas-db",
                     "atlas", "database")])],
    "02-14": [("Atlas must ship by the end of April.",
               [Said("Atlas is due to ship by 2026-04-30", "decision", "atlas-due", "atlas", "schedule")])],
    "03-04": [("I switched my editor to light mode, dark strains my eyes in daylight.",
               [Said("Alice prefers light mode in editors", "config", "theme")])],
    "03-11": [("Let's go through the layout of the Atlas invoice PDF.",
               [Said("Alice and the assistant went through the Atlas invoice PDF layout", "conversation", "",
                     "atlas", "invoices", 0.5)])],
    "03-18": [("For Atlas we're moving from Postgres to MySQL after all: ops only run MySQL.",
               [Said("Atlas switched from Postgres to MySQL because ops only run MySQL", "decision", "atlas-db",
                     "atlas", "database")])],
    "04-15": [("I've gone vegan now, no dairy or eggs either.",
               [Said("Alice is vegan: no meat, dairy or eggs", "config", "diet", importance=0.9)])],
    "05-04": [("Atlas shipped last Friday, that project is done and closed.",
               [Said("Atlas shipped on 2026-05-01 and is finished, no longer an active project", "decision", "atlas",
                     "atlas", "status")])],
    "05-06": [("New project: Borealis, a data pipeline for the analytics team.",
               [Said("Borealis is Alice's current project: a data pipeline for analytics", "decision", "borealis",
                     "borealis", "status")])],
    "06-10": [("I moved to Munich last weekend, new flat in Schwabing.",
               [Said("Alice lives in Munich", "identity", "city", importance=1.0)])],
    "08-05": [("Back to dark mode, light mode was too bright at night.",
               [Said("Alice prefers dark mode in editors", "config", "theme")])],
    "09-09": [("Borealis got cancelled, budget cuts.",
               [Said("Borealis was cancelled in 2026-09, no longer an active project", "decision", "borealis",
                     "borealis", "status")])],
    "09-16": [("I got promoted to tech lead at Nordwind.",
               [Said("Alice is a tech lead at Nordwind", "identity", "job", importance=1.0)])],
    "10-14": [("I eat fish again now, pescatarian.",
               [Said("Alice is pescatarian: fish but no meat", "config", "diet", importance=0.9)])],
    "11-04": [("Starting project Cirrus: a mobile app for Nordwind's customers.",
               [Said("Cirrus is Alice's current project: a mobile app for Nordwind's customers", "decision",
                     "cirrus", "cirrus", "status")])],
}
WEATHER = ("rainy", "sunny", "windy", "foggy", "snowy", "mild", "humid")


def project_on(day: date) -> str:
    """The project Alice works on that day (none between Borealis and Cirrus)."""
    md = f"{day:%m-%d}"
    if md < "01-10":
        return ""
    if md < "05-04":
        return "atlas"
    if md < "05-06":
        return ""
    if md < "09-09":
        return "borealis"
    return "cirrus" if md >= "11-04" else ""


def lines_of(day: date, n: int) -> list[tuple[str, str, list[Said]]]:
    """(sender, words, facts) said on ``day``, the ``n``-th chat day."""
    out: list[tuple[str, str, list[Said]]] = [
        (ALICE, words, facts) for words, facts in STORY.get(f"{day:%m-%d}", [])]
    weather = WEATHER[n % len(WEATHER)]
    out.append((ALICE, f"The weather was {weather} here, evening {n}.",
                [Said(f"The weather was {weather} on evening {n}", "temp", importance=0.2)]))
    if p := project_on(day):
        out.append((ALICE, f"Worked on {p.capitalize()} today: task {n}.",
                    [Said(f"Alice worked on {p.capitalize()} task {n}", "event", "", p, "work", 0.5)]))
    out.append((BOB, f"My lighthouse shift on Zucchini Island, night {n}.",
                [Said(f"Bob kept the lighthouse on Zucchini Island, night {n}", "event", "", "_global", "work", 0.5)]))
    if n == 0:
        out.append((BOB, "I live in Lisbon and kayak on weekends.",
                    [Said("Bob lives in Lisbon and kayaks on weekends", "identity", "city", importance=1.0)]))
    return out


BY_WORDS: dict[str, list[Said]] = {}
SLOT_OF: dict[str, str] = {}


def _learn(day: date, n: int) -> None:
    for _, words, facts in lines_of(day, n):
        BY_WORDS[words] = facts
        for f in facts:
            if f.slot:
                SLOT_OF[f.content] = f.slot


_LINE = re.compile(r"^L(\d+) .*? user: (.*)$")
_CAND = re.compile(r"^(\d+)\. \[([^\]]*)\] (.*)$")


class YearModel:
    """Chat turns: "ok."; the memory model as a careful model: each user
    line's scripted facts, replacing the existing memory of the same slot
    (rule 5) and restating none; the daily compression finds nothing new
    in summaries; a weekly merge keeps every fact as it is; the profile
    refresh keeps the latest important fact of each slot and the entries
    no newer fact contradicts."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}

    def _count(self, kind: str) -> None:
        self.calls[kind] = self.calls.get(kind, 0) + 1

    def __call__(self, body: dict[str, Any]) -> Reply:
        if body.get("response_format", {}).get("type") != "json_object":
            self._count("chat")
            return Reply(content="ok.")
        system, user = text_of(body["messages"][0]["content"]), text_of(body["messages"][-1]["content"])
        if system.startswith("You are a memory extraction"):
            if "Event log:" in user:
                self._count("compress")
                return Reply(content=json.dumps({"facts": [], "summary": "the day's chats"}))
            self._count("extract")
            return Reply(content=json.dumps(self._extract(user)))
        if system.startswith("You consolidate"):
            self._count("merge")
            nums = re.findall(r"^(\d+)\. \[([a-z]+), ([\d.]+)[^\]]*\] (.*)$", user, re.M)
            return Reply(content=json.dumps({"facts": [
                {"content": text, "category": cat, "importance": float(imp), "from": [int(n)]}
                for n, cat, imp, text in nums], "drop": []}))
        if system.startswith("You maintain"):
            self._count("profile")
            return Reply(content=json.dumps({"entries": self._profile(user)}))
        raise AssertionError(f"unexpected memory-model call: {system[:60]}")

    def _extract(self, user: str) -> dict[str, Any]:
        existing, _, convo = user.partition("Conversation:")
        cands = [(int(m.group(1)), m.group(3)) for m in map(_CAND.match, existing.splitlines()) if m]
        facts: list[dict[str, Any]] = []
        topics: list[str] = []
        for m in map(_LINE.match, convo.splitlines()):
            if not m or m.group(2) not in BY_WORDS:
                continue
            for f in BY_WORDS[m.group(2)]:
                same = next((n for n, c in cands if c == f.content), None)
                old = [n for n, c in cands if f.slot and SLOT_OF.get(c) == f.slot and c != f.content]
                facts.append({"content": f.content, "project": f.project, "topic": f.topic, "category": f.category,
                              "importance": f.importance, "lines": [int(m.group(1))], "same_as": same,
                              "updates": old[-1] if old and same is None else None})
                topics.append(f.content)
        return {"facts": facts, "summary": ("talked about: " + "; ".join(topics))[:200] if topics else "small talk"}

    def _profile(self, user: str) -> list[dict[str, Any]]:
        cur_part, _, facts_part = user.partition("Important facts:")
        current = re.findall(r"^- (.*)$", cur_part, re.M)
        facts = [(int(m.group(1)), m.group(2), m.group(3)) for m in map(_CAND.match, facts_part.splitlines()) if m]
        latest: dict[str, tuple[int, str, str, str]] = {}  # slot -> newest (said, n, content, category)
        loose: list[dict[str, Any]] = []
        for n, label, content in facts:
            if not (label.startswith("identity") or label.startswith("config") or label.startswith("decision")):
                continue
            cat = label.split(",")[0]
            said = label.split(", ")[-1]
            slot = SLOT_OF.get(content, "")
            if not slot:
                loose.append({"content": content, "category": cat, "facts": [n]})
            elif slot not in latest or said >= latest[slot][0]:
                latest[slot] = (said, n, content, cat)  # type: ignore[assignment]
        entries = [{"content": c, "category": cat, "facts": [n]} for _, n, c, cat in latest.values()] + loose
        said_slots = {SLOT_OF.get(e["content"], "") for e in entries}
        for c in current:  # kept when no newer fact speaks of the same thing
            if c not in {e["content"] for e in entries} and SLOT_OF.get(c, "?") not in said_slots:
                entries.append({"content": c, "category": "identity", "facts": []})
        return entries


@dataclass
class Checkpoint:
    """What the model was given for each question at one point of the year."""

    label: str
    day: str
    asked: dict[str, dict[str, Any]] = field(default_factory=dict)  # question -> request body
    seconds: dict[str, float] = field(default_factory=dict)  # question -> the turn's wall time
    recall_ms: float = 0.0  # SqliteMemory.recall's median over the questions, on a copy (recall_ms)
    sizes: dict[str, int] = field(default_factory=dict)
    requests: list[int] = field(default_factory=list)  # their indexes in the fake's requests


QUESTIONS = (
    "Where do I live these days?",
    "What did we decide about the database for Atlas back in February?",
    "What did we talk about in March?",
    "Which project am I working on right now?",
    "Any idea for dinner tonight?",
    "What did we decide about the database for Atlas?",
)


def core_memory(body: dict[str, Any]) -> str:
    system = text_of(body["messages"][0]["content"])
    return system.split("# Core Memory\n", 1)[1].split("\n\n", 1)[0] if "# Core Memory\n" in system else ""


def memories_block(body: dict[str, Any]) -> str:
    return split_user_content(text_of(body["messages"][-1]["content"]))[0]


async def tick(app: App) -> None:
    """What the background loops (stopped: walk) do at this moment of the clock."""
    assert app.extraction is not None and app.cron is not None
    await app.extraction.tick()  # type: ignore[attr-defined]
    await app.cron.run_due()  # type: ignore[attr-defined]


async def _rows(app: App, sql: str, *args: Any) -> list[Any]:
    return list(await app.backend.engine.db.fetchall(sql, args))  # type: ignore[attr-defined]


async def sizes(app: App, data_dir: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for table in ("memories", "daily_events", "memory_log", "memories_fts", "events_fts"):
        out[table] = (await _rows(app, f"SELECT COUNT(*) FROM {table}"))[0][0]
    for status, n in await _rows(app, "SELECT status, COUNT(*) FROM memories WHERE owner = 'echo:alice' GROUP BY status"):
        out[f"alice {status}"] = n
    out["alice daily_events"] = (await _rows(
        app, "SELECT COUNT(*) FROM daily_events WHERE owner = 'echo:alice'"))[0][0]
    out["alice tier1 active"] = (await _rows(
        app, "SELECT COUNT(*) FROM memories WHERE owner = 'echo:alice' AND tier = 1 AND status = 'active'"))[0][0]
    for name in ("memory.db", "memory.db-wal"):
        out[f"{name} bytes"] = (data_dir / name).stat().st_size if (data_dir / name).exists() else 0
    return out


async def recall_ms(app: App, data_dir: Path) -> float:
    """``SqliteMemory.recall``'s median over the questions in turn, on a copy
    of memory.db: a recall counts as an access of what it returned (decay
    and ranking read it), and a hundred timing calls are no use of the
    memories (they made the walk's decay wrong)."""
    live: Any = app.backend
    with tempfile.TemporaryDirectory(prefix="yearwalk-timing-") as tmp:
        copy = Path(tmp) / "memory.db"
        src, dst = sqlite3.connect(data_dir / "memory.db"), sqlite3.connect(copy)
        try:
            src.backup(dst)  # a consistent copy, the WAL's pages included
        finally:
            src.close()
            dst.close()
        engine = await MemoryEngine.open(copy, live.engine.clock)
        try:
            r = live.retriever
            backend = SqliteMemory(engine, Retriever(engine, max_hits=r.max_hits, token_budget=r.token_budget,
                                                     max_chars=r.max_chars))
            times = []
            for i in range(100):  # the questions in turn; the first round warms the caches
                t = time.perf_counter()
                await backend.recall(f"echo:{ALICE}", QUESTIONS[i % len(QUESTIONS)], tz=BERLIN)
                times.append(time.perf_counter() - t)
        finally:
            await engine.close()
    rest = sorted(times[len(QUESTIONS):])
    return rest[len(rest) // 2] * 1000


async def checkpoint(app: App, fake: FakeOpenAI, clock: ManualClock, label: str, data_dir: Path) -> Checkpoint:
    cp = Checkpoint(label, clock.now().astimezone(BERLIN).date().isoformat())
    clock.set(datetime.combine(clock.now().astimezone(BERLIN).date(), datetime.min.time(), BERLIN)
              + timedelta(hours=12))
    await say(app, clock, "/new", ALICE)
    for q in QUESTIONS:
        before = len(fake.requests)
        t = time.perf_counter()
        await say(app, clock, q, ALICE)
        cp.seconds[q] = time.perf_counter() - t
        cp.asked[q] = fake.last_chat()
        cp.requests.extend(range(before, len(fake.requests)))
        clock.advance(60)
    cp.recall_ms = await recall_ms(app, data_dir)
    cp.sizes = await sizes(app, data_dir)
    await say(app, clock, "/new", ALICE)
    return cp


@dataclass
class Year:
    checkpoints: list[Checkpoint]
    alice_requests: list[dict[str, Any]]
    longest_job: tuple[str, float]
    model_calls: dict[str, int]
    log: list[Any]


OnDay = Callable[[App, date], Awaitable[None]]


async def walk(tmp_path: Path, *, days: int = 364, checkpoints: dict[int, str] | None = None,
               start: str = "2026-01-05", after: OnDay | None = None) -> Year:
    """Alice and Bob chat three evenings a week (Mon, Wed, Sat) from
    ``start`` for ``days`` days; the extraction runs after each evening, the
    cron jobs at 03:05 and 04:05 every night; ``checkpoints``: day number
    (from 0) -> label, asked the QUESTIONS on that day's noon."""
    points = checkpoints if checkpoints is not None else {27: "month 1", 86: "month 3", 178: "month 6", 361: "month 12"}
    model = YearModel()
    first = date.fromisoformat(start)
    clock = ManualClock(datetime.combine(first, datetime.min.time(), BERLIN) + timedelta(hours=8))
    out: list[Checkpoint] = []
    longest = ("", 0.0)
    async with FakeOpenAI(api_key="sk-year-key-0123456789", responder=model) as fake:
        cfg, paths = _config(tmp_path, fake, gateway={"timezone": "Europe/Berlin"})
        app = App(cfg, paths, clock=clock, channel_specs=(ECHO,))
        try:
            await app.open()
            await app.start()
            # The walk runs extraction and the cron jobs itself (tick): the
            # App's loops would race it for the due user and jobs (handtick.py).
            await cron_by_hand(await by_hand(app))
            n = 0
            mine: list[int] = []
            for i in range(days):
                day = first + timedelta(days=i)
                if i in points:
                    out.append(await checkpoint(app, fake, clock, points[i], paths.data_dir))
                    mine += out[-1].requests
                if day.weekday() in (0, 2, 5):
                    _learn(day, n)
                    clock.set(datetime.combine(day, datetime.min.time(), BERLIN) + timedelta(hours=19))
                    for who, words, _ in lines_of(day, n):
                        before = len(fake.requests)
                        await say(app, clock, words, who)
                        if who == ALICE:
                            mine += [j for j in range(before, len(fake.requests))
                                     if not fake.requests[j].get("response_format")]
                        clock.advance(30)
                    n += 1
                    clock.advance(300)  # past the quiet gap
                    await tick(app)
                # The nightly slot and Monday's weekly one, five minutes in.
                for hour in (3, 4) if (day + timedelta(days=1)).weekday() == 0 else (3,):
                    clock.set(datetime.combine(day + timedelta(days=1), datetime.min.time(), BERLIN)
                              + timedelta(hours=hour, minutes=5))
                    t = time.perf_counter()
                    await tick(app)
                    took = time.perf_counter() - t
                    if took > longest[1]:
                        longest = (f"{day + timedelta(days=1)} {hour:02d}:05", took)
            if after is not None:
                await after(app, first + timedelta(days=days))
            log = await _rows(app, "SELECT at, job, action, owner, memory_id, detail FROM memory_log ORDER BY id")
        finally:
            await app.close()
    return Year(out, [fake.requests[i] for i in mine] + [r for r in fake.requests if _alices_memory(r)],
                longest, model.calls, log)


def _alices_memory(body: dict[str, Any]) -> bool:
    """A memory-model request about Alice: it names her or quotes her."""
    if not body.get("response_format"):
        return False
    text = text_of(body["messages"][-1]["content"])
    return "Alice" in text or any(words in text for words in BY_WORDS if not words.startswith(("My lighthouse", "I live in Lisbon")))
