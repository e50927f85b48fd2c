"""/healthz and /metrics: what they say about a running gateway, read over
real HTTP and, for /metrics, with Prometheus' own parser."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from gateway.app import App
from gateway.bus import MessageBus
from gateway.health import Health
from gateway.http import HttpServer
from gateway.loop import LoopStats
from gateway.sessions import SessionStore
from memory import ManualClock, MemoryEngine
from memory.backend import Turn
from memory.service import SqliteMemory
from tests.fakes.openai_server import FakeOpenAI

from .test_app import BROKEN, ECHO, _config


def _values(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample as (name, sorted labels) -> value; raises on a malformed exposition."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def test_a_running_gateway_reports_its_channels_traffic_and_write_path(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    cfg, paths = _config(tmp_path, fake_llm, channels={"telegram": {"enabled": True}, "feishu": {"enabled": True}},
                         gateway={"metrics": True, "port": 0})
    fake_llm.queue_reply("hello!")
    app = App(cfg, paths, clock=clock, channel_specs=[ECHO, BROKEN])
    try:
        await app.open()
        await app.start()
        assert await app.channels["echo"].say("hi there") is not None  # type: ignore[attr-defined]
        assert app.loop is not None and await app.loop.drain(5.0)
        async with httpx.AsyncClient(base_url=app.http.url) as client:
            health = await client.get("/healthz")
            assert health.status_code == 200
            body = health.json()
            assert body["status"] == "degraded" and body["problems"] == ["channel broken failed (see the log)"]
            assert body["channels"] == {"echo": "running", "broken": "failed"} and body["loop"] == "running"
            assert "token rejected" not in health.text  # a failure reason stays in the log

            metrics = await client.get("/metrics")
            assert metrics.headers["content-type"].startswith("text/plain; version=0.0.4")
            v = _values(metrics.text)
            assert v[("myclaw_up", ())] == 1 and v[("myclaw_healthy", ())] == 0
            assert v[("myclaw_channel_up", (("channel", "echo"),))] == 1
            assert v[("myclaw_channel_up", (("channel", "broken"),))] == 0
            assert v[("myclaw_messages_received_total", ())] == 1 and v[("myclaw_messages_replied_total", ())] == 1
            assert v[("myclaw_extraction_waiting", ())] == 2  # the message and the reply, waiting to be learnt
            assert v[("myclaw_llm_seconds", (("quantile", "0.5"),))] > 0

            # The process loop dies: nothing is answered any more.
            assert app._loop_task is not None
            app._loop_task.cancel()
            await asyncio.gather(app._loop_task, return_exceptions=True)
            down = await client.get("/healthz")
            assert down.status_code == 503 and down.json()["status"] == "down"
            assert "the process loop has stopped: messages are not answered" in down.json()["problems"]
            assert _values((await client.get("/metrics")).text)[("myclaw_up", ())] == 0
    finally:
        await app.close()


async def test_metrics_are_off_by_default_and_healthz_stays_where_the_server_runs(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    cfg, paths = _config(tmp_path, fake_llm)
    app = App(cfg, paths, clock=clock, channel_specs=[ECHO])
    try:
        await app.open()
        await app.start()
        assert app.http is None  # nothing needs an HTTP server: none is started
    finally:
        await app.close()
    cfg, paths = _config(tmp_path, fake_llm, gateway={"port": 0, "admin": {"enabled": True, "token": "t" * 32}})
    app = App(cfg, paths, clock=clock, channel_specs=[ECHO])
    try:
        await app.open()
        await app.start()
        async with httpx.AsyncClient(base_url=app.http.url) as client:
            assert (await client.get("/metrics")).status_code == 404
            assert (await client.get("/healthz")).json()["status"] == "ok"
    finally:
        await app.close()


async def test_extraction_that_keeps_failing_or_waits_a_day_degrades_health(
    engine: MemoryEngine, clock: ManualClock
) -> None:
    mem = SqliteMemory(engine)
    await mem.buffer([Turn(owner="alice", channel="telegram", chat_id="1", role="user", content="hi", message_id="1")])
    bus = MessageBus(10)
    health = Health(clock=clock, bus=bus, loop_running=lambda: True, stats=LoopStats(),
                    channels={"telegram": object()}, failed={}, backlog=engine.backlog)
    snap = await health.snapshot()
    assert (snap.status, snap.problems) == ("ok", [])

    clock.advance(timedelta(hours=27))  # the daily flush would have taken it
    snap = await health.snapshot()
    assert snap.status == "degraded" and snap.problems == ["a message has waited 27 h for extraction"]

    async with engine.db.transaction() as conn:  # as five failed extractions leave it
        await conn.execute("UPDATE extraction_buffer SET attempts = 5, last_error = 'HTTP 500'")
    snap = await health.snapshot()
    assert snap.problems == ["extraction failed 5 times or more for 1 waiting message(s): "
                             "check the memory model's endpoint (myclaw doctor)"]
    v = _values(health.metrics(snap))
    assert v[("myclaw_extraction_failing", ())] == 1 and v[("myclaw_extraction_retrying", ())] == 1
    assert v[("myclaw_extraction_oldest_waiting_seconds", ())] == 27 * 3600

    for _ in range(9):
        bus.inbound.put_nowait(object())  # type: ignore[arg-type]
    health.add_gauge("myclaw_outbox_waiting", "replies kept for redelivery", _three)
    snap = await health.snapshot()
    assert "the inbound queue is nearly full (9 of 10)" in snap.problems
    assert snap.to_json()["gauges"] == {"myclaw_outbox_waiting": 3.0}
    assert _values(health.metrics(snap))[("myclaw_outbox_waiting", ())] == 3


async def _three() -> float:
    return 3


async def test_healthz_without_a_health_source_still_answers(tmp_path: Path) -> None:
    async with HttpServer() as http, httpx.AsyncClient(base_url=http.url) as client:
        r = await client.get("/healthz")
        assert (r.status_code, r.json()) == (200, {"status": "ok"})


async def test_replies_waiting_in_the_outbox_show_and_degrade(clock: ManualClock) -> None:
    waiting = [0]
    health = Health(clock=clock, bus=MessageBus(10), loop_running=lambda: True, stats=None,
                    channels={"feishu": object()}, failed={}, outbox=lambda: waiting[0])
    async with HttpServer("127.0.0.1", 0) as server, httpx.AsyncClient(base_url=server.url) as client:
        server.health = health
        ok = (await client.get("/healthz")).json()
        assert ok["status"] == "ok" and ok["outbox"] == {"waiting": 0}
        waiting[0] = 3  # Feishu unreachable: three replies kept for redelivery
        r = await client.get("/healthz")
        assert r.status_code == 200 and r.json()["problems"] == ["3 replies wait in the outbox for redelivery"]
        metrics = _values(health.metrics(await health.snapshot()))
        assert metrics[("myclaw_outbox_waiting", ())] == 3


async def test_a_permission_the_platform_refused_shows_without_degrading(clock: ManualClock) -> None:
    """Group titles are a nicety: a refused scope is reported (the operator
    may grant it), not taken for a gateway that needs a look."""
    refused = {"feishu": "im:chat:readonly"}
    health = Health(clock=clock, bus=MessageBus(10), loop_running=lambda: True, stats=None,
                    channels={"feishu": object()}, failed={}, refused=lambda: refused)
    snap = await health.snapshot()
    assert (snap.status, snap.problems) == ("ok", [])
    assert snap.to_json()["refused"] == {"feishu": "im:chat:readonly"}
    v = _values(health.metrics(snap))
    assert v[("myclaw_permission_refused", (("channel", "feishu"), ("scope", "im:chat:readonly")))] == 1
    refused.clear()  # granted: a later lookup worked
    snap = await health.snapshot()
    assert "refused" not in snap.to_json()


async def test_healthz_reports_a_refusal_a_previous_run_met(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    cfg, paths = _config(tmp_path, fake_llm, gateway={"port": 0, "admin": {"enabled": True, "token": "t" * 32}})
    async with await SessionStore.open(paths.gateway_db(), clock) as store:  # as the last run left it
        await store.db.write("INSERT INTO refused_permissions (channel, scope, refused_at) VALUES (?, ?, ?)",
                             ("feishu", "im:chat:readonly", "2026-02-28T09:00:00Z"))
    app = App(cfg, paths, clock=clock, channel_specs=[ECHO])
    try:
        await app.open()
        await app.start()
        async with httpx.AsyncClient(base_url=app.http.url) as client:
            body = (await client.get("/healthz")).json()
        assert body["status"] == "ok" and body["refused"] == {"feishu": "im:chat:readonly"}
    finally:
        await app.close()
