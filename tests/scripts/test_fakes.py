"""scripts/fakes.py, as the README's "Trying it without any account" uses
it: the config it prints, put in MYCLAW_HOME, runs the real gateway
against the fakes, and a line typed for Telegram or Feishu gets an answer."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable
from pathlib import Path

from gateway.app import App
from gateway.config import Paths, load_config
from tests.fakes.feishu_server import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.scripts._load import load_script

fakes = load_script("fakes")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.02)


async def test_the_printed_config_with_a_feishu_webhook_runs_the_gateway_where_the_events_go(tmp_path: Path) -> None:
    webhook = f"http://127.0.0.1:{_free_port()}/hooks/feishu"  # --feishu-webhook, not the default port or path
    async with FakeTelegram(strict_chats=False) as tg, FakeFeishu() as fs, \
            FakeOpenAI(api_key=fakes.API_KEY, responder=fakes.responder) as llm:
        snippet = fakes.config_snippet(tg, fs, llm, webhook=webhook)
        doc = json.loads(snippet)
        assert doc["gateway"] == {"host": "127.0.0.1", "port": int(webhook.split(":")[2].split("/")[0])}
        assert doc["channels"]["feishu"]["webhookPath"] == "/hooks/feishu"
        (tmp_path / "config.json").write_text(snippet, encoding="utf-8")
        cfg = load_config(tmp_path / "config.json", env={"MYCLAW_HOME": str(tmp_path)}, require=True)
        app = App(cfg, Paths(tmp_path))
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 30)
            assert sorted(app.channels) == ["feishu", "telegram"]

            event = fs.message_event("你好", chat_id=fakes.DEMO_FEISHU_CHAT, open_id=fakes.DEMO_FEISHU_USER)
            r = await fs.push_event(webhook, event)
            assert r.status_code == 200, r.text
            await _until(lambda: len(fs.sent) == 1)
            assert fs.sent[0]["text"] == "You said: 你好"

            tg.push_text(fakes.DEMO_TELEGRAM_USER, fakes.DEMO_TELEGRAM_USER, "hello", username="demo_user")
            await tg.wait_sent(1, timeout=10)
            assert tg.texts(fakes.DEMO_TELEGRAM_USER) == ["You said: hello"]
        finally:
            await asyncio.wait_for(app.close(), 15)


async def test_without_a_webhook_the_config_uses_the_long_connection_and_no_port() -> None:
    async with FakeFeishu() as fs:
        doc = json.loads(fakes.config_snippet(None, fs, None, webhook=None))
    assert "gateway" not in doc and doc["channels"]["feishu"]["mode"] == "websocket"
    assert "webhookPath" not in doc["channels"]["feishu"]
