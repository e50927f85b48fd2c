"""``myclaw memory flush|compress|search`` date what they touch on each
user's calendar, as the gateway's own runs do: the user's ``/timezone``
(gateway.db, read only), the zones they left, and for those with none the
gateway's old zones (memory.db ``meta``). Before, a hand-run flush or
compression read everyone on ``gateway.timezone``: a New Yorker's
evening line went into the next day's log. The real click commands on
real files under a temporary MYCLAW_HOME (gateway.timezone Asia/Shanghai);
the memory model the fake server over HTTP."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from memory import Category, ManualClock, MemoryEngine, NewMemory
from memory.backend import Turn
from memory.clock import format_ts
from memory.service import SqliteMemory
from memory.types import Provenance
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.gateway.test_cli_cron import cli, fake_llm, home  # noqa: F401

NY = ZoneInfo("America/New_York")
SHANGHAI = ZoneInfo("Asia/Shanghai")
# 02:00 UTC on 4 May: 10:00 on 4 May in Shanghai, 22:00 on 3 May in New York.
SAID = datetime(2026, 5, 4, 2, 0, tzinfo=UTC)


def set_zone(home: Path, owner: str, tz: ZoneInfo) -> None:
    """``owner``'s /timezone, as the gateway keeps it (gateway.db)."""
    from gateway.sessions import SessionStore
    from gateway.timezones import UserTimezones

    async def go() -> None:
        async with await SessionStore.open(home / "data" / "gateway.db") as sessions:
            await UserTimezones(sessions.db).set(owner, tz, at=SAID)

    asyncio.run(go())


def on_memory(home: Path, fn: Any, *, at: datetime = SAID) -> Any:
    async def go() -> Any:
        engine = await MemoryEngine.open(home / "data" / "memory.db", clock=ManualClock(at))
        try:
            return await fn(engine)
        finally:
            await engine.close()

    return asyncio.run(go())


def buffer(owner: str, said: str) -> Any:
    async def go(engine: MemoryEngine) -> None:
        await SqliteMemory(engine).buffer([
            Turn(owner=owner, channel="telegram", chat_id=owner, role="user", content=said, message_id="1", at=SAID),
            Turn(owner=owner, channel="telegram", chat_id=owner, role="assistant", content="noted", message_id="1",
                 at=SAID),
        ])
    return go


def days(home: Path, owner: str) -> list[str]:
    with sqlite3.connect(home / "data" / "memory.db") as conn:
        return [r[0] for r in conn.execute("SELECT event_date FROM daily_events WHERE owner = ? ORDER BY id", (owner,))]


def summary_only(body: dict[str, Any]) -> Reply:
    return Reply(json.dumps({"facts": [], "summary": "the evening"}))


def test_flush_dates_her_lines_in_the_zone_she_set_not_the_gateways(home: Path, fake_llm: FakeOpenAI) -> None:
    """Alice set New York: her line at 22:00 on 3 May there is read by the
    memory model at that time and goes into 3 May's log, as the gateway's
    flush has it (not Shanghai's 10:00 on 4 May)."""
    set_zone(home, "alice", NY)
    on_memory(home, buffer("alice", "booked the dentist for Friday"))
    fake_llm.responder = summary_only
    r = cli("memory", "flush")
    assert r.exit_code == 0, r.output
    [prompt] = [json.dumps(q["messages"], ensure_ascii=False) for q in fake_llm.requests]
    assert "2026-05-03 Sun 22:00] user: booked the dentist" in prompt, prompt
    assert days(home, "alice") == ["2026-05-03"]


def test_flush_dates_lines_of_one_without_a_zone_in_the_gateways_zone_then(home: Path, fake_llm: FakeOpenAI) -> None:
    """Bob set no zone; the gateway ran on UTC until 10 May, on Shanghai
    since. His line of 4 May, 20:00 UTC (5 May in Shanghai), flushed by
    hand: 4 May's log, the gateway's zone then, as the gateway's own flush
    dates it."""
    said = datetime(2026, 5, 4, 20, 0, tzinfo=UTC)

    async def history(engine: MemoryEngine) -> None:
        await engine.gateway_zone(UTC, at=datetime(2026, 5, 1, tzinfo=UTC))
        await engine.gateway_zone(SHANGHAI, at=datetime(2026, 5, 10, tzinfo=UTC))
        await SqliteMemory(engine).buffer([
            Turn(owner="bob", channel="telegram", chat_id="bob", role="user", content="the car is at the garage",
                 message_id="1", at=said)])

    on_memory(home, history, at=said)
    fake_llm.responder = summary_only
    r = cli("memory", "flush", "--user", "bob")
    assert r.exit_code == 0, r.output
    [prompt] = [json.dumps(q["messages"], ensure_ascii=False) for q in fake_llm.requests]
    assert "2026-05-04 Mon 20:00] user: the car is at the garage" in prompt, prompt
    assert days(home, "bob") == ["2026-05-04"]


def test_compress_dates_a_days_facts_at_noon_where_she_lived_it(home: Path, fake_llm: FakeOpenAI) -> None:
    """A day log with no line time: its facts are dated (as said) at that
    day's noon on her calendar (New York's), not the gateway's (04:00 UTC)."""
    set_zone(home, "alice", NY)

    async def seed(engine: MemoryEngine) -> None:
        await engine.add_event("alice", "2026-05-03", "Alice booked the dentist for Friday",
                               channel="telegram", chat_id="alice", provenance=Provenance())

    on_memory(home, seed)
    fake_llm.responder = lambda body: Reply(json.dumps(
        {"facts": [{"content": "Alice has a dentist appointment on Friday", "category": "decision"}]}))
    r = cli("memory", "compress", "daily")
    assert r.exit_code == 0, r.output

    async def dated(engine: MemoryEngine) -> list[str]:
        rows = await engine.db.fetchall("SELECT created_at FROM memories WHERE owner = 'alice'")
        return [str(r[0]) for r in rows]

    assert on_memory(home, dated) == [format_ts(datetime(2026, 5, 3, 12, 0, tzinfo=NY))]


def test_a_gateway_db_that_cannot_be_read_leaves_the_gateways_zone_with_a_warning(
    home: Path, fake_llm: FakeOpenAI
) -> None:
    """A damaged gateway.db costs the users' zones, not the flush: the
    warning names the file, no user's words."""
    (home / "data").mkdir(parents=True, exist_ok=True)
    (home / "data" / "gateway.db").write_bytes(b"not a database at all" * 100)
    on_memory(home, buffer("alice", "booked the dentist for Friday"))
    fake_llm.responder = summary_only
    r = cli("memory", "flush")
    assert r.exit_code == 0, r.output
    assert f"warning: user time zones not read from {home / 'data' / 'gateway.db'}" in r.stderr, r.stderr
    assert "dentist" not in r.stderr
    assert days(home, "alice") == ["2026-05-04"]  # Shanghai's


def test_search_reads_a_named_day_where_one_without_a_zone_lived_it(home: Path) -> None:
    """Bob set no zone; the gateway ran on UTC until 10 May. What he told
    it at 20:00 UTC on 4 May (5 May in Shanghai, today's zone) is found
    by "2026年5月4日", as the bot's own recall finds it. The year is named:
    the CLI reads the real clock, and a bare "5月4日" is the latest 4 May,
    2027's from May 2027 on."""
    said = datetime(2026, 5, 4, 20, 0, tzinfo=UTC)

    async def history(engine: MemoryEngine) -> None:
        await engine.gateway_zone(UTC, at=datetime(2026, 5, 1, tzinfo=UTC))
        await engine.gateway_zone(SHANGHAI, at=datetime(2026, 5, 10, tzinfo=UTC))
        stamp = format_ts(said)
        await engine.add(NewMemory(owner="bob", content="Bob parked the van in the underground garage",
                                   category=Category.DECISION, importance=0.8,
                                   provenance=Provenance(date_from=stamp, date_to=stamp)))

    on_memory(home, history, at=said)
    r = cli("memory", "search", "2026年5月4日我跟你说了什么", "--user", "bob", "--json")
    assert r.exit_code == 0, r.output
    assert [h["content"] for h in json.loads(r.stdout)] == ["Bob parked the van in the underground garage"], r.stdout
