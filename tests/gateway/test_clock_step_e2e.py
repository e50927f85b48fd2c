"""A clock an NTP correction steps back an hour, where a user or the
operator confirms something within minutes: a ``/forget all`` code, the
memory page's sign-in and its lockout after wrong tokens. Each lasts its
minutes, not those plus the hour, and none ends at once because the time
it was given is now "ahead" (test_time_walk_e2e.py has the scheduler's,
the outbox's, the rate limit's and the extraction's)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx

from gateway.http import HttpServer
from gateway.web import AdminAuth, MemoryAdmin, MemoryWeb
from memory import ManualClock, MemoryEngine
from memory.retrieval import Retriever
from tests.gateway.test_remembering_e2e import Model, running, say
from tests.gateway.test_web import TOKEN, login
from tests.gateway.test_web_walk import WRONG, _locked_out


async def test_a_forget_all_code_lasts_its_five_minutes_across_a_clock_stepped_back_an_hour(tmp_path: object) -> None:
    """The code was valid until five minutes after it was given on the
    clock that gave it: stepped back an hour, it stayed good for 65
    minutes. Its five minutes are now also counted on the machine's
    monotonic clock, which no correction steps; the code still works
    within them."""
    model, clock = Model(), ManualClock("2026-03-02T10:00:00Z")
    ticks = [0.0]  # the machine's monotonic seconds
    async with running(tmp_path, model, clock) as (app, _):  # type: ignore[arg-type]
        app.loop.commands.monotonic = lambda: ticks[0]  # type: ignore[union-attr]
        await say(app, clock, "my locker is number 4471", "alice")

        code = re.findall(r"/forget all (\d{4})", await say(app, clock, "/forget all", "alice"))[-1]
        clock.advance(-3600)  # NTP: the machine's clock was an hour fast
        clock.advance(301)
        ticks[0] += 301
        late = await say(app, clock, f"/forget all {code}", "alice")
        assert "wrong or has expired" in late, late
        assert await app.sessions.owned("echo:alice") > 0  # type: ignore[union-attr]

        code = re.findall(r"/forget all (\d{4})", await say(app, clock, "/forget all", "alice"))[-1]
        clock.advance(-3600)
        clock.advance(30)
        ticks[0] += 30
        done = await say(app, clock, f"/forget all {code}", "alice")
        assert done.startswith("Erased for good"), done


@asynccontextmanager
async def page(engine: MemoryEngine, now: list[float], ttl: float = 600) -> AsyncIterator[httpx.AsyncClient]:
    http = HttpServer("127.0.0.1", 0)
    MemoryWeb(MemoryAdmin(engine, Retriever(engine)), AdminAuth(TOKEN, session_ttl=ttl, clock=lambda: now[0])).mount(http)
    await http.start()
    try:
        async with httpx.AsyncClient(base_url=http.url, timeout=10) as c:
            yield c
    finally:
        await http.stop()


async def test_a_clock_stepped_back_an_hour_does_not_sign_the_operator_out(engine: MemoryEngine) -> None:
    """The cookie's time of issue, ahead of a clock stepped back, read as a
    session not yet begun: the operator was signed out at once, a form
    being typed lost. It lasts its time on the clock that signed it in."""
    now = [1_000_000.0]
    async with page(engine, now) as c:
        csrf = await login(c)
        now[0] -= 3600  # NTP: the machine's clock was an hour fast
        assert (await c.get("/memory", params={"user": "alice"})).status_code == 200
        r = await asyncio.wait_for(c.post("/memory/add", data={"csrf": csrf, "user": "alice",
                                                               "content": "alice keeps bees"}), 10)
        assert r.status_code == 303, r.text
        now[0] += 3600 + 601  # its ten minutes are over on the clock that signed it in
        assert (await c.get("/memory", params={"user": "alice"})).status_code == 401
    assert [m.content for m in await engine.list_memories("alice")] == ["alice keeps bees"]


async def test_a_clock_stepped_back_an_hour_does_not_lock_an_address_out_for_that_hour(engine: MemoryEngine) -> None:
    """Ten wrong tokens lock an address out for five minutes from the
    first; stepped back an hour, the wait said was 65 minutes."""
    now = [1_000_000.0]
    async with page(engine, now) as c:
        await _locked_out(c)
        r = await c.post("/memory/login", data={"token": TOKEN})
        assert r.status_code == 429 and int(r.headers["Retry-After"]) <= 300
        now[0] -= 3600
        r = await c.post("/memory/login", data={"token": TOKEN})
        assert r.status_code == 429 and int(r.headers["Retry-After"]) <= 300, r.headers["Retry-After"]
        now[0] += 301
        assert (await c.post("/memory/login", data={"token": TOKEN})).status_code == 303
        assert (await c.post("/memory/login", data={"token": WRONG})).status_code == 401  # counted afresh


async def test_a_session_issued_more_than_a_day_ahead_of_the_clock_is_refused() -> None:
    """A clock once set far ahead, then corrected: its cookies are not good
    until that far time; a step back of up to a day is taken for NTP's."""
    now = [1_000_000.0]
    auth = AdminAuth(TOKEN, session_ttl=600, clock=lambda: now[0])
    s = await auth.new_session()
    now[0] -= 23 * 3600
    assert auth.session_ok(s)
    now[0] -= 2 * 3600
    assert not auth.session_ok(s)
