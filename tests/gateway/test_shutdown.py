"""Shutdown loses nothing: every message a channel took in is answered
before the gateway stops, and a message it did not take is delivered again
after a restart (its Telegram offset was never confirmed).

``App.close()`` first tells every channel to stop receiving, then drains
the bus and the process loop, sends the queued replies and only then
stops the channels (which confirms Telegram offsets)."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from channels.feishu import FeishuChannel
from gateway.app import App
from gateway.bus import MessageBus
from gateway.config import FeishuConfig, Paths, load_config
from gateway.http import HttpServer
from memory import ManualClock
from tests.fakes.feishu_server import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI, Reply, said
from tests.fakes.telegram_server import FakeTelegram

from .killed import quiet

CHATS = 6
CUT = "channel intake cut at shutdown: its share of the stop ran out"
PER_CHAT = 10


async def _echo(body: dict[str, Any]) -> Reply:
    await asyncio.sleep(0.02)  # slow enough that the bus fills up behind the loop
    return Reply(content="re: " + said(body))


@pytest.fixture
async def echo_llm() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(api_key="sk-test-shutdown-0123456789", responder=_echo) as fake:
        yield fake


def _config(tmp_path: Path, llm: FakeOpenAI, tg: FakeTelegram) -> tuple[Any, Paths]:
    doc = {
        "provider": {"baseUrl": llm.url, "apiKey": llm.api_key, "maxRetries": 0, "timeout": "5s"},
        "agent": {"model": "test-model"},
        "channels": {"telegram": {"enabled": True, "token": tg.token, "baseUrl": tg.base_url, "pollTimeout": 1}},
        # A small bus and few slots: most messages wait on the bus or in
        # Telegram when the gateway is told to stop.
        "gateway": {"queueSize": 4, "maxConcurrentChats": 2},
    }
    (tmp_path / "config.json").write_text(json.dumps(doc), encoding="utf-8")
    return load_config(tmp_path / "config.json", env={"MYCLAW_HOME": str(tmp_path)}, require=True), Paths(tmp_path)


async def test_close_answers_everything_taken_and_the_rest_is_redelivered(
    tmp_path: Path, clock: ManualClock, echo_llm: FakeOpenAI
) -> None:
    async with FakeTelegram() as tg:
        cfg, paths = _config(tmp_path, echo_llm, tg)
        texts = {chat: [f"chat {chat} message {i}" for i in range(PER_CHAT)] for chat in range(1, CHATS + 1)}
        app = App(cfg, paths, clock=clock)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            for i in range(PER_CHAT):
                for chat in texts:
                    tg.push_text(chat, 1000 + chat, texts[chat][i])
            await tg.wait_sent(5, timeout=15)
            assert app.bus.inbound.qsize() > 0  # messages wait on the bus as we close
        finally:
            await asyncio.wait_for(app.close(), 30)

        total = CHATS * PER_CHAT
        answered = tg.sent_count
        # Taken off Telegram means answered; the rest is still unconfirmed there.
        assert answered + tg.pending_updates == total
        assert 5 <= answered < total
        assert len(echo_llm.requests) == answered

        app = App(cfg, paths, clock=clock)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            await tg.wait_sent(total, timeout=30)
        finally:
            await asyncio.wait_for(app.close(), 30)
        assert tg.pending_updates == 0

    # Every message answered exactly once, and each chat in order.
    replies = Counter(m.text for m in tg.sent)
    assert replies == Counter(f"re: {t}" for chat in texts.values() for t in chat)
    for chat, sent in texts.items():
        assert tg.texts(chat) == [f"re: {t}" for t in sent]


async def test_feishu_webhook_refuses_events_once_it_stops_receiving() -> None:
    async with FakeFeishu() as fake, HttpServer("127.0.0.1", 0) as http:
        cfg = FeishuConfig(
            enabled=True,
            app_id=fake.app_id,
            app_secret=fake.app_secret,
            verification_token=fake.verification_token,
            mode="webhook",
            domain=fake.url,
        )
        ch = FeishuChannel(cfg, MessageBus(), http)
        await asyncio.wait_for(ch.start(), 10)
        url = http.url + cfg.webhook_path
        try:
            assert (await fake.push_event(url, fake.message_event("before"))).status_code == 200
            await asyncio.wait_for(ch.stop_receiving(), 10)
            late = fake.message_event("after")
            r = await fake.push_event(url, late)
            # Not 2xx: Feishu delivers the event again later (at least once).
            assert r.status_code == 503
            assert ch.bus.inbound.qsize() == 1 and ch.bus.inbound.get_nowait().text == "before"
        finally:
            await asyncio.wait_for(ch.stop(), 10)
        assert (await fake.push_event(url, fake.message_event("gone"))).status_code == 404


async def test_a_stop_with_sends_held_on_two_channels_ends_within_its_timeout_and_the_send_grace(
    tmp_path: Path, clock: ManualClock, echo_llm: FakeOpenAI
) -> None:
    """Telegram and Feishu each hold a reply's send unanswered: the stop
    waits for both channels' queued replies together, within its own
    timeout, then lets the sends under way end for the send grace at most.
    Before, it waited for each channel in turn, up to its timeout each, and
    then the grace: three timeouts for two channels."""
    from gateway.app import SEND_GRACE

    from .test_e2e_feishu import ENCRYPT_KEY, _app, _feishu_section
    from .test_quoted_e2e import _telegram

    stop = 2.0
    async with FakeTelegram() as tg, FakeFeishu() as fs:
        app = _app(tmp_path, clock, echo_llm, {"telegram": _telegram(tg), "feishu": _feishu_section(fs, "webhook")})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            tg.slow_next("sendMessage")  # taken, never answered (until the fake stops)
            feishu_took = fs.cut_next(accepted=True)
            tg.push_text(42, 42, "hello from telegram")
            assert app.http is not None
            event = fs.message_event("hello from feishu", chat_id="oc_alice", open_id="ou_alice")
            assert (await fs.push_event(app.http.url + "/feishu/events", event, encrypt_key=ENCRYPT_KEY)).status_code == 200
            await tg.wait_sent(1, timeout=15)
            await asyncio.wait_for(feishu_took.wait(), 15)
            began = time.monotonic()
            with capture_logs() as logs:
                await asyncio.wait_for(app.close(timeout=stop), 30)
            took = time.monotonic() - began
        finally:
            await asyncio.wait_for(app.close(), 30)
    # The channels' own stop comes after (Telegram confirms its offset): a second's room for it.
    assert took < stop + min(stop, SEND_GRACE) + 1.0, took
    assert not [e for e in logs if e["event"] == CUT]  # both stopped receiving in time: polling ended, not cut
    kept = "replies still queued at shutdown go to the outbox"
    assert sorted(e["channel"] for e in logs if e["event"] == kept) == ["feishu", "telegram"]


async def test_a_stop_with_no_time_left_cuts_the_intake_with_a_warning_not_an_error(
    tmp_path: Path, clock: ManualClock, echo_llm: FakeOpenAI
) -> None:
    """close(timeout=0) (a stop out of time, as the crash tests stage it)
    gives the channels no time to stop receiving: their intake is cut, as
    documented, what was pending staying with the platform. That is the
    stop's choice, not a channel failing: a warning naming the time it had,
    not "did not stop receiving cleanly" at error level."""
    async with FakeTelegram() as tg:
        cfg, paths = _config(tmp_path, echo_llm, tg)
        app = App(cfg, paths, clock=clock)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            tg.push_text(42, 42, "hello")
            await tg.wait_sent(1, timeout=15)
            # Its turn done too (marks written after the send): a turn cut by no time
            # left is "left unanswered", an error, and not what this test stages.
            await asyncio.wait_for(quiet(app), 30)
            with capture_logs() as logs:
                await asyncio.wait_for(app.close(timeout=0.0), 30)
        finally:
            await asyncio.wait_for(app.close(), 30)
    cut = [e for e in logs if e["event"] == CUT]
    assert [(e["log_level"], e["channel"], e["seconds"]) for e in cut] == [("warning", "telegram", 0.0)]
    assert not [e for e in logs if e["log_level"] == "error"], logs
