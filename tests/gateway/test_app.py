from __future__ import annotations

import asyncio
import io
import logging
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from channels.base import BaseChannel, ChannelFatalError
from gateway.app import SEND_GRACE, App, ChannelSpec, config_secrets
from gateway.bus import InboundMessage, MessageBus, OutboundMessage
from gateway.config import ConfigError, Paths, load_config
from gateway.logging import configure_logging
from memory import ManualClock, Provenance
from tests.fakes.openai_server import FakeOpenAI, Reply, said
from tests.disk import on_disk
from tests.fakes.telegram_server import FakeTelegram
from tests.logjson import debug_json_log, lines
from tests.procs import finished

REPO = Path(__file__).resolve().parents[2]


class EchoChannel(BaseChannel):
    """A channel of this test module, built through the registry."""

    name = "echo"
    fail_start: type[Exception] | None = None

    def __init__(self, config: Any, bus: MessageBus, **kw: Any) -> None:
        super().__init__(bus, config.allow_from)
        self.kw = kw
        self.sent: list[OutboundMessage] = []
        self.got = asyncio.Event()
        self.started = self.stopped = False
        self.stop_timeout: float | None = None
        self._failed = asyncio.Event()
        self.failure: ChannelFatalError | None = None

    async def start(self) -> None:
        if self.fail_start is not None:
            raise self.fail_start("token rejected by the platform")
        self.started = True

    async def stop(self, timeout: float | None = None) -> None:
        self.stopped = True
        self.stop_timeout = timeout

    async def send(self, msg: OutboundMessage) -> None:
        self.sent.append(msg)
        self.got.set()

    async def wait_failed(self) -> ChannelFatalError:
        await self._failed.wait()
        assert self.failure is not None
        return self.failure

    def fail_now(self) -> None:
        self.failure = ChannelFatalError("token revoked")
        self._failed.set()

    async def say(self, text: str, sender: str = "100") -> OutboundMessage:
        self.got.clear()
        await self.publish(InboundMessage(channel=self.name, chat_id="c1", sender_id=sender, text=text))
        await asyncio.wait_for(self.got.wait(), 5)
        return self.sent[-1]


class BrokenChannel(EchoChannel):
    name = "broken"
    fail_start = ChannelFatalError


ECHO = ChannelSpec("echo", __name__, "EchoChannel", lambda c: c.channels.telegram)
BROKEN = ChannelSpec("broken", __name__, "BrokenChannel", lambda c: c.channels.feishu)


def _config(tmp_path: Path, fake: FakeOpenAI, *, env: dict[str, str] | None = None, **doc: Any) -> tuple[Any, Paths]:
    base: dict[str, Any] = {
        "provider": {"baseUrl": fake.url, "apiKey": fake.api_key, "maxRetries": 0, "timeout": "5s"},
        "agent": {"model": "test-model"},
        "channels": {"telegram": {"enabled": True, "token": "123:abcdefghijklmnop"}},
    }
    base.update(doc)
    (tmp_path / "config.json").write_text(json.dumps(base), encoding="utf-8")
    env = {"MYCLAW_HOME": str(tmp_path), **(env or {})}
    return load_config(tmp_path / "config.json", env=env, require=True), Paths(tmp_path)


async def test_registry_builds_enabled_channels_and_replies_flow(tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI) -> None:
    cfg, paths = _config(tmp_path, fake_llm)
    fake_llm.queue_reply("hello from the app")
    app = App(cfg, paths, clock=clock, channel_specs=[ECHO, BROKEN])  # feishu (BROKEN) is disabled
    try:
        await app.open()
        await app.start()
        echo = app.channels["echo"]
        assert isinstance(echo, EchoChannel) and echo.started and list(app.channels) == ["echo"]
        out = await echo.say("hi")
        assert (out.chat_id, out.text) == ("c1", "hello from the app")
        assert (paths.data_dir / "gateway.db").exists() and (paths.data_dir / "memory.db").exists()
        assert [t["function"]["name"] for t in fake_llm.chat_requests()[0]["tools"]] == [
            "memory_search", "memory_save", "memory_forget", "cron_add", "cron_list", "cron_remove"
        ]
        # the write path and the scheduler were built and started with the gateway
        assert app.extraction is not None and app.cron is not None and app.compressor is not None
        assert (paths.data_dir / "cron.db").exists()
    finally:
        await app.close()
        await app.close()  # safe twice
    assert echo.stopped


async def test_a_stop_hands_the_channels_what_is_left_of_its_timeout_and_the_grace(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    """The channels' waits on their platforms at stop (Telegram's offset,
    Feishu's withdrawals) end by the stop's deadline plus the send grace."""
    cfg, paths = _config(tmp_path, fake_llm)
    app = App(cfg, paths, clock=clock, channel_specs=[ECHO])
    try:
        await app.open()
        await app.start()
        echo = app.channels["echo"]
        assert isinstance(echo, EchoChannel)
    finally:
        await asyncio.wait_for(app.close(timeout=2.0), 30)
    assert echo.stop_timeout is not None and 0.0 < echo.stop_timeout <= 2.0 + SEND_GRACE


async def test_the_gateway_logs_an_unread_task_error_without_its_text(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    """A task nobody awaits that fails (a bug in fire-and-forget work):
    asyncio's default handler would log its repr, the error's text in it."""
    from gateway.logging import loop_exception_handler

    cfg, paths = _config(tmp_path, fake_llm)
    app = App(cfg, paths, clock=clock, channel_specs=[ECHO])
    loop = asyncio.get_running_loop()
    saved = loop.get_exception_handler()
    try:
        await app.open()
        await app.start()
        assert loop.get_exception_handler() is loop_exception_handler
    finally:
        await app.close()
    assert loop.get_exception_handler() is saved  # the loop is the caller's again


async def test_a_memory_the_model_saves_keeps_the_message_it_came_from(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    cfg, paths = _config(tmp_path, fake_llm)
    fake_llm.queue_reply(None, tool_calls=[{"name": "memory_save", "arguments": {"content": "User's cat is Miso"}}])
    fake_llm.queue_reply("Noted!")
    app = App(cfg, paths, clock=clock, channel_specs=[ECHO])
    try:
        await app.open()
        await app.start()
        said = "please remember my tabby is called Miso"
        assert (await app.channels["echo"].say(said)).text == "Noted!"  # type: ignore[attr-defined]
        engine = app.backend.engine  # type: ignore[attr-defined]
        [m] = await engine.list_memories(None)
        assert (m.content, m.source_text) == ("User's cat is Miso", said)
    finally:
        await app.close()


async def test_a_channel_failing_at_start_leaves_the_others_running(tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI) -> None:
    cfg, paths = _config(tmp_path, fake_llm, channels={"telegram": {"enabled": True}, "feishu": {"enabled": True}})
    app = App(cfg, paths, clock=clock, channel_specs=[ECHO, BROKEN])
    try:
        await app.open()
        await app.start()
        assert list(app.channels) == ["echo"] and "token rejected" in app.failed_channels["broken"]
        stop = asyncio.Event()
        waiter = asyncio.create_task(app.wait(stop))
        await app.channels["echo"].say("still here?")
        # ... until the last channel fails for good: exit code 1
        app.channels["echo"].fail_now()  # type: ignore[attr-defined]
        assert await asyncio.wait_for(waiter, 5) == 1
        assert app.failed_channels["echo"] == "token revoked"
    finally:
        await app.close()


class CrashingChannel(EchoChannel):
    """A channel with a bug: its error quotes a message it was handling."""

    name = "crashing"

    async def start(self) -> None:
        raise KeyError("Okonkwo's biopsy results came back")


CRASHING = ChannelSpec("crashing", __name__, "CrashingChannel", lambda c: c.channels.feishu)


async def test_a_channel_that_crashes_is_logged_by_type_and_place_not_its_text(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    cfg, paths = _config(tmp_path, fake_llm, channels={"telegram": {"enabled": True}, "feishu": {"enabled": True}})
    app = App(cfg, paths, clock=clock, channel_specs=[ECHO, CRASHING])
    try:
        with debug_json_log() as out:
            await app.open()
            await app.start()
            assert list(app.channels) == ["echo"]
            app.channels["echo"].fail_now()  # type: ignore[attr-defined]
            assert await asyncio.wait_for(app.wait(asyncio.Event()), 5) == 1
    finally:
        await app.close()
    [line] = lines(out, "channel crashing failed")
    assert line["error"] == "KeyError" and line["at"].endswith(" in start"), line
    assert app.failed_channels["crashing"] == "KeyError"  # kept for "no channel is left running"
    assert lines(out, "no channel is left running; stopping")
    for words in ("Okonkwo", "biopsy"):
        assert words not in out.getvalue()


async def test_only_channel_failing_means_exit_1(tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI) -> None:
    cfg, paths = _config(tmp_path, fake_llm, channels={"feishu": {"enabled": True}})
    app = App(cfg, paths, clock=clock, channel_specs=[ECHO, BROKEN])
    try:
        await app.open()
        await app.start()
        assert await asyncio.wait_for(app.wait(asyncio.Event()), 5) == 1
    finally:
        await app.close()


async def test_stop_signal_exits_0_and_hooks_start_and_stop(tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI) -> None:
    calls: list[str] = []

    class Hook:
        def __init__(self, name: str) -> None:
            self.name = name

        async def start(self) -> None:
            calls.append(f"start {self.name}")

        async def stop(self, timeout: float | None = None) -> None:
            calls.append(f"stop {self.name}")

    cfg, paths = _config(tmp_path, fake_llm)
    app = App(cfg, paths, clock=clock, channel_specs=[ECHO])
    try:
        await app.open()
        app.extraction, app.cron = Hook("extraction"), Hook("cron")
        await app.start()
        stop = asyncio.Event()
        stop.set()
        assert await app.wait(stop) == 0
    finally:
        await app.close()
    assert calls == ["start extraction", "start cron", "stop cron", "stop extraction"]


async def test_no_enabled_channel_is_a_config_error(tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI) -> None:
    cfg, paths = _config(tmp_path, fake_llm, channels={})
    app = App(cfg, paths, clock=clock)
    try:
        with pytest.raises(ConfigError, match="no channel is enabled"):
            await app.open()  # before any file is made
        assert not paths.data_dir.exists()
    finally:
        await app.close()


async def test_memory_disabled_uses_the_file_store(tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI) -> None:
    cfg, paths = _config(tmp_path, fake_llm, env={"MYCLAW_MEMORY_ENABLED": "false"})
    assert cfg.memory.enabled is False
    app = App(cfg, paths, clock=clock, channel_specs=[ECHO])
    try:
        await app.open()
        assert app.backend is not None and app.backend.kind == "files"
        await app.start()
        echo = app.channels["echo"]
        user = "echo:100"
        coffee = await app.backend.remember(user, "I drink oat milk flat white", provenance=Provenance(channel="echo"))
        await echo.say("which coffee do I like? do you remember?")  # type: ignore[attr-defined]
        assert app.loop is not None and await app.loop.drain(5)
        body = fake_llm.last_chat()
        # The file store's MEMORY.md as Core Memory, each line with the id it is forgotten by.
        assert f"- [{coffee.ref}] I drink oat milk flat white" in body["messages"][0]["content"]
        offered = {t["function"]["name"] for t in body.get("tools", [])}
        assert {"memory_search", "memory_save", "memory_forget"} <= offered  # the fallback answers them too
        assert not (paths.data_dir / "memory.db").exists()
        logged = "".join(p.read_text(encoding="utf-8") for p in (paths.home / "workspace" / "memory").rglob("2026-*.md"))
        assert "user: which coffee do I like?" in logged and "assistant: ok" in logged

        # Forgetting works on the files: the line leaves MEMORY.md and the next prompt.
        fake_llm.queue_reply(None, tool_calls=[{"name": "memory_forget", "arguments": {"ids": [coffee.ref]}}])
        fake_llm.queue_reply("Forgotten.")
        await echo.say("please forget how I take my coffee")  # type: ignore[attr-defined]
        assert await app.loop.drain(5)
        result = fake_llm.last_chat()["messages"][-1]["content"]
        assert result.startswith(f"Erased for good: {coffee.ref} I drink oat milk flat white")
        await echo.say("hello again")  # type: ignore[attr-defined]
        assert await app.loop.drain(5)
        assert "oat milk" not in fake_llm.last_chat()["messages"][0]["content"]
        memory_md = app.backend.user_dir(user) / "MEMORY.md"  # type: ignore[attr-defined]
        assert "oat milk" not in memory_md.read_text(encoding="utf-8")
    finally:
        await app.close()


async def test_a_hand_edit_of_memory_md_reaches_the_running_gateways_prompt(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    """Seed 004's file-to-database sync: no restart, no `myclaw memory migrate`."""
    cfg, paths = _config(tmp_path, fake_llm)
    app = App(cfg, paths, clock=clock, channel_specs=[ECHO])
    try:
        await app.open()
        await app.start()
        sync = app.file_sync
        assert sync is not None and sync in app._started_services
        memory_md = paths.home / "workspace" / "memory" / "MEMORY.md"
        memory_md.parent.mkdir(parents=True, exist_ok=True)
        memory_md.write_text("- The team standup is at 09:30\n", encoding="utf-8")
        for _ in range(2):  # noted, then imported once it stayed put
            await asyncio.wait_for(sync.poll(), 10)  # type: ignore[attr-defined]
        await app.channels["echo"].say("when is standup?")  # type: ignore[attr-defined]
        assert app.loop is not None and await app.loop.drain(5)
        assert "The team standup is at 09:30" in fake_llm.last_chat()["messages"][0]["content"]
    finally:
        await app.close()


async def test_a_daily_file_not_utf8_is_warned_about_at_start_and_not_again_by_the_file_sync(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    from structlog.testing import capture_logs

    cfg, paths = _config(tmp_path, fake_llm)
    day = paths.home / "workspace" / "memory" / "2026-03-01.md"
    day.parent.mkdir(parents=True, exist_ok=True)
    day.write_bytes("- 买了咖啡\n".encode("gbk"))
    app = App(cfg, paths, clock=clock, channel_specs=[ECHO])
    try:
        with capture_logs() as logs:
            await app.open()
            await app.start()
            sync = app.file_sync
            assert sync is not None
            for _ in range(3):  # its first full pass included
                await asyncio.wait_for(sync.poll(), 10)  # type: ignore[attr-defined]
        assert len([e for e in logs if e.get("problem") == "not_utf8"]) == 1, logs
    finally:
        await app.close()


async def test_memory_forget_leaves_no_trace_in_the_files_of_the_running_gateway(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    cfg, paths = _config(tmp_path, fake_llm)
    app = App(cfg, paths, clock=clock, channel_specs=[ECHO])
    try:
        await app.open()
        await app.start()
        echo = app.channels["echo"]
        assert app.backend is not None and app.loop is not None
        for i in range(12):
            await echo.say(f"an ordinary line {i}")  # type: ignore[attr-defined]
            clock.advance(10)  # a person's pace, inside the rate limit
        await echo.say("my locker code is zqxjkv4711")  # type: ignore[attr-defined]
        code = await app.backend.remember("echo:100", "my locker code is zqxjkv4711", provenance=Provenance(channel="echo"))
        # For the turn's calls only: thirteen lines are due for extraction,
        # and the background flush's model call would take a reply queued for anyone.
        fake_llm.queue_reply(None, tool_calls=[{"name": "memory_forget", "arguments": {"ids": [code.ref]}}],
                             kind="chat")
        fake_llm.queue_reply("Forgotten.", kind="chat")
        assert (await echo.say("please forget my locker code")).text == "Forgotten."  # type: ignore[attr-defined]
        assert await app.loop.drain(5)
        assert on_disk(paths.data_dir, "zqxjkv4711") == 0  # gateway.db and memory.db, WAL included
    finally:
        await app.close()


async def _due_jobs(paths: Paths, clock: ManualClock, *channels: str) -> None:
    """A job per channel, due (clock moved past its run) when the app starts."""
    from gateway.cron import CronStore

    store = await CronStore.open(paths.data_dir / "cron.db", clock)
    try:
        for ch in channels:
            await store.add(schedule="0 9 * * *", message=f"reminder for {ch}", channel=ch, chat_id="c1",
                            user="echo:100", job_id=f"to-{ch}")
    finally:
        await store.close()
    clock.advance(24 * 3600)


async def _runs(app: App) -> dict[str, tuple[str | None, str | None]]:
    assert app._cron_store is not None
    return {j.id: (j.last_status, j.last_error) for j in await app._cron_store.list() if not j.internal}


async def test_myclaw_chat_leaves_the_gateways_scheduled_jobs_to_the_gateway(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    """Run by `myclaw chat` (its own process, only the terminal), a job for a
    Telegram chat was marked done and its reply reached nobody."""
    cfg, paths = _config(tmp_path, fake_llm)
    paths.data_dir.mkdir(parents=True)
    await _due_jobs(paths, clock, "telegram")
    app = App(cfg, paths, clock=clock, config_channels=False)
    app.add_channel(EchoChannel(cfg.channels.telegram, app.bus))
    try:
        await app.open()
        await app.start()
        assert app.cron is not None
        await app.cron.run_due()  # type: ignore[attr-defined]
        assert await _runs(app) == {"to-telegram": (None, None)}  # still due, for the gateway
        assert fake_llm.requests == []
    finally:
        await app.close()


async def test_a_job_for_a_channel_this_gateway_does_not_run_is_an_error_not_a_lost_reply(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    cfg, paths = _config(tmp_path, fake_llm)
    paths.data_dir.mkdir(parents=True)
    await _due_jobs(paths, clock, "echo", "feishu")
    app = App(cfg, paths, clock=clock, channel_specs=[ECHO])
    try:
        await app.open()
        await app.start()  # runs the jobs missed while down
        echo = app.channels["echo"]
        await asyncio.wait_for(echo.got.wait(), 5)  # type: ignore[attr-defined]
        assert [m.text for m in echo.sent] == ["ok"]  # type: ignore[attr-defined]
        runs = await _runs(app)
        assert runs["to-echo"] == ("ok", None)
        assert runs["to-feishu"][0] == "error"
        assert "channel 'feishu' is not running in this gateway" in (runs["to-feishu"][1] or "")
        assert len(fake_llm.requests) == 1  # no LLM call for a reply that could go nowhere
    finally:
        await app.close()


async def test_a_scheduled_job_uses_private_memory_only_when_made_for_the_users_private_chat(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    """A job made in a group ran with its creator's private profile and
    credentials, and its reply went to the group."""
    from gateway.cron import CronStore
    from memory import Category, MemoryEngine, NewMemory

    cfg, paths = _config(tmp_path, fake_llm)
    paths.data_dir.mkdir(parents=True)
    async with await MemoryEngine.open(paths.data_dir / "memory.db", clock) as engine:
        await engine.add(NewMemory(owner="echo:100", tier=1, content="works at Globex on the zorblat project",
                                   category=Category.IDENTITY))
    store = await CronStore.open(paths.data_dir / "cron.db", clock)
    try:
        await store.add(schedule="0 9 * * *", message="my morning brief", channel="echo", chat_id="c1",
                        user="echo:100", job_id="mine", private=True)
        await store.add(schedule="0 9 * * *", message="the team's morning brief", channel="echo", chat_id="g1",
                        user="echo:100", job_id="team")
    finally:
        await store.close()
    clock.advance(24 * 3600)
    app = App(cfg, paths, clock=clock, channel_specs=[ECHO])
    try:
        await app.open()
        await app.start()  # runs the jobs missed while down
        assert app.loop is not None and app.cron is not None
        for _ in range(100):
            if len(app.channels["echo"].sent) == 2:  # type: ignore[attr-defined]
                break
            await asyncio.sleep(0.05)
        assert {m.chat_id for m in app.channels["echo"].sent} == {"c1", "g1"}  # type: ignore[attr-defined]
        # Run a day late (missed while down), each prompt says so after the job's words.
        by_job = {said(r).split("\n")[0]: json.dumps(r) for r in fake_llm.requests}
        assert "zorblat" in by_job["my morning brief"]
        assert "zorblat" not in by_job["the team's morning brief"]
    finally:
        await app.close()


async def test_a_handle_mapped_after_it_stored_memories_is_named_at_start(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    from structlog.testing import capture_logs

    from memory import MemoryEngine, NewMemory

    cfg, paths = _config(tmp_path, fake_llm)
    paths.data_dir.mkdir(parents=True)
    async with await MemoryEngine.open(paths.data_dir / "memory.db", clock) as engine:  # before the mapping
        await engine.add(NewMemory(owner="echo:100", content="my cat is called Miso"))
        await engine.add(NewMemory(owner="echo:200", content="bob's own memory"))
    for identities, expected in [({"alice": ["echo:100", "feishu:ou_a"]}, {"echo:100": "alice"}), ({}, None)]:
        cfg, paths = _config(tmp_path, fake_llm, memory={"identities": identities})
        app = App(cfg, paths, clock=clock, channel_specs=[ECHO])
        try:
            with capture_logs() as logs:
                await app.open()
        finally:
            await app.close()
        warned = [x for x in logs if x["event"].startswith("memory.identities maps handles that still own")]
        assert [x["stranded"] for x in warned] == ([expected] if expected else [])
        assert all("myclaw memory merge-identities" in x["event"] for x in warned)  # what to run


async def test_the_gateway_does_not_start_while_identities_are_merged(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    from gateway.app import StorageError
    from gateway.datalock import DataBusy, DataLock

    cfg, paths = _config(tmp_path, fake_llm)
    merge = DataLock(paths.data_dir)
    merge.exclusive("`myclaw memory merge-identities`")  # it is running
    try:
        app = App(cfg, paths, clock=clock, channel_specs=[ECHO])
        with pytest.raises(StorageError, match="merge-identities"):
            await app.open()
        await app.close()
    finally:
        merge.release()
    app = App(cfg, paths, clock=clock, channel_specs=[ECHO])
    try:
        await app.open()
        with pytest.raises(DataBusy, match="is running"):
            DataLock(paths.data_dir).exclusive("test")
    finally:
        await app.close()
    after = DataLock(paths.data_dir)
    after.exclusive("test")  # closed: free again
    after.release()


async def test_history_cache_rows_reaches_the_session_store(tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI) -> None:
    cfg, paths = _config(tmp_path, fake_llm, gateway={"historyCacheRows": 0})
    app = App(cfg, paths, clock=clock, channel_specs=[ECHO])
    try:
        await app.open()
        await app.start()
        assert app.sessions is not None and app.sessions.cache_rows == 0
        await app.channels["echo"].say("hello")  # type: ignore[attr-defined]
        await app.channels["echo"].say("and again")  # type: ignore[attr-defined]
        assert app.loop is not None and await app.loop.drain(5)
        history = [m["content"] for m in fake_llm.last_chat()["messages"][1:]]
        assert history == ["hello", "ok", "<time>12:00</time>\nand again"]  # read from gateway.db, nothing cached
        assert app.sessions._windows == {}
    finally:
        await app.close()


def test_config_secrets_are_collected(tmp_path: Path) -> None:
    cfg = load_config(tmp_path / "none.json", env={"MYCLAW_PROVIDER_API_KEY": "sk-abcdef123", "MYCLAW_TELEGRAM_TOKEN": "1:tok-secret"})
    assert set(config_secrets(cfg)) == {"sk-abcdef123", "1:tok-secret"}


def test_importing_the_gateway_loads_no_channel_sdk() -> None:
    code = "import sys, gateway.cli, gateway.app; print(sorted(m for m in ('lark_oapi', 'telegram') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def _cli_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MYCLAW_")}
    env.update({"MYCLAW_HOME": str(tmp_path), **extra})
    return env


async def test_cli_gateway_without_config_exits_2(tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "from gateway.cli import main; main()", "gateway",
        cwd=REPO, env=_cli_env(tmp_path), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    _, err = await finished(proc)
    assert proc.returncode == 2 and "no config file" in err.decode()


async def test_cli_chat_answers_piped_lines(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    fake_llm.responder = lambda body: Reply(content="re: " + said(body))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "from gateway.cli import main; main()", "chat", "--user", "ada",
        cwd=REPO,
        env=_cli_env(tmp_path, MYCLAW_PROVIDER_BASE_URL=fake_llm.url, MYCLAW_PROVIDER_API_KEY=fake_llm.api_key or ""),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await finished(proc, "hello\n\nhow are you\n".encode())
    assert proc.returncode == 0, err.decode()
    assert out.decode().splitlines() == ["myclaw> re: hello", "myclaw> re: how are you"]
    assert fake_llm.api_key not in err.decode()


# -- the real Telegram channel, through the default registry ----------------------


def _telegram_config(tmp_path: Path, fake: FakeOpenAI, tg: FakeTelegram, token: str | None = None) -> tuple[Any, Paths]:
    telegram = {"enabled": True, "token": token or tg.token, "baseUrl": tg.base_url, "pollTimeout": 1}
    return _config(tmp_path, fake, channels={"telegram": telegram})


async def test_telegram_message_gets_an_llm_reply_end_to_end(tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI) -> None:
    fake_llm.queue_reply("hi from the LLM")
    async with FakeTelegram() as tg:
        cfg, paths = _telegram_config(tmp_path, fake_llm, tg)
        app = App(cfg, paths, clock=clock)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            tg.push_text(42, 42, "hello bot")
            await tg.wait_sent(1, timeout=10)
            assert tg.texts(42) == ["hi from the LLM"]
            assert fake_llm.chat_requests()[0]["messages"][-1]["content"] == "<time>12:00</time>\nhello bot"
        finally:
            await asyncio.wait_for(app.close(), 15)


async def test_rejected_telegram_token_as_the_only_channel_exits_1(tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI) -> None:
    async with FakeTelegram() as tg:
        cfg, paths = _telegram_config(tmp_path, fake_llm, tg, token="999:not-the-right-token-abcdefg")
        app = App(cfg, paths, clock=clock)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            assert "telegram" in app.failed_channels and not app.channels
            assert await asyncio.wait_for(app.wait(asyncio.Event()), 5) == 1
        finally:
            await asyncio.wait_for(app.close(), 15)


async def test_debug_log_has_timings_and_never_the_key(tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI) -> None:
    cfg, paths = _config(tmp_path, fake_llm)
    stream = io.StringIO()
    configure_logging(level="DEBUG", secrets=config_secrets(cfg), stream=stream, json_output=True)
    fake_llm.queue_error(500)  # a failure path logs too
    app = App(cfg, paths, clock=clock, channel_specs=[ECHO])
    try:
        await app.open()
        await app.start()
        await app.channels["echo"].say("hello")  # type: ignore[attr-defined]
        await app.channels["echo"].say("hello again")  # type: ignore[attr-defined]
        assert app.loop is not None and await app.loop.drain(5)
    finally:
        await app.close()
        logging.getLogger().handlers.clear()
        logging.getLogger().setLevel(logging.WARNING)
    lines = [json.loads(line) for line in stream.getvalue().splitlines() if line.startswith("{")]
    handled = [e for e in lines if e["event"] == "message handled"]
    assert len(handled) == 2 and {"retrieval_ms", "llm_ms", "total_ms"} <= handled[0].keys()
    assert [e["ok"] for e in handled] == [False, True]
    assert [e.get("model") for e in handled] == [None, "agent"]  # which candidate answered (agent.fallbacks[i])
    assert fake_llm.api_key is not None and fake_llm.api_key not in stream.getvalue()


async def test_a_second_gateway_on_the_same_home_is_refused_and_myclaw_chat_is_not(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    # Two gateways would both poll Telegram and run every job twice.
    from gateway.app import StorageError
    from gateway.datalock import running_pid

    cfg, paths = _config(tmp_path, fake_llm)
    first = App(cfg, paths, clock=clock, channel_specs=[ECHO])
    await first.open()
    try:
        assert running_pid(paths.data_dir) == os.getpid()
        second = App(cfg, paths, clock=clock, channel_specs=[ECHO])
        with pytest.raises(StorageError, match=rf"another gateway is running on {tmp_path} \(pid {os.getpid()}\)"):
            await second.open()
        chat = App(cfg, paths, clock=clock, channel_specs=[ECHO], config_channels=False)
        await chat.open()  # `myclaw chat` shares the files with a running gateway
        await chat.close()
    finally:
        await first.close()
    assert running_pid(paths.data_dir) is None
    again = App(cfg, paths, clock=clock, channel_specs=[ECHO])
    await again.open()
    await again.close()


async def test_a_migration_the_disk_cannot_hold_is_said_so_and_the_next_start_finishes_it(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    """An upgrade on a nearly full disk: the start stops, saying the disk is
    full (not that the file is damaged, which would have the operator
    restore a backup over a good file); the file keeps its rows at the last
    version that fitted, and once there is room the next start finishes."""
    import resource
    import sqlite3

    from gateway.app import StorageError
    from gateway.sessions import MIGRATIONS
    from memory.db import Database

    cfg, paths = _config(tmp_path, fake_llm, memory={"enabled": False})
    old = await Database.open(paths.gateway_db(), MIGRATIONS[:1])
    await old.write("INSERT INTO sessions (key, channel, chat_id, started_at) VALUES ('t:1', 't', '1', '2025-01-01T00:00:00Z')")
    await old.close()
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (40_000, hard))  # writes past it fail with EFBIG (SIGXFSZ is ignored)
    try:
        app = App(cfg, paths, clock=clock, channel_specs=[ECHO])
        with pytest.raises(StorageError) as err:
            await app.open()
        await app.close()
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    said = str(err.value)
    assert str(paths.gateway_db()) in said and "full" in said and "start again" in said, said
    assert "restore it from a backup" not in said
    with sqlite3.connect(paths.gateway_db()) as conn:
        # The steps that fitted stay (each is its own transaction); the one cut is rolled back.
        assert 1 <= conn.execute("PRAGMA user_version").fetchone()[0] < len(MIGRATIONS)
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("SELECT key FROM sessions").fetchall() == [("t:1",)]
    conn.close()
    app = App(cfg, paths, clock=clock, channel_specs=[ECHO])
    try:
        await app.open()
        assert app.sessions is not None
        assert (await app.sessions.db.fetchone("PRAGMA user_version"))[0] == len(MIGRATIONS)
    finally:
        await app.close()


async def test_a_data_file_another_process_keeps_locked_is_not_called_damaged(tmp_path: Path) -> None:
    # A long `myclaw memory` job holding the write lock through the start's
    # busy timeout: wait and start again, not "restore it from a backup".
    import sqlite3

    from gateway.app import StorageError, _storage

    path = tmp_path / "gateway.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    late = sqlite3.connect(path, timeout=0)
    try:
        with pytest.raises(StorageError) as err:
            async with _storage(path):
                late.execute("SELECT * FROM t")
    finally:
        late.close()
        holder.close()
    said = str(err.value)
    assert "locked" in said and "start again" in said and "restore it from a backup" not in said, said


async def test_a_memory_db_path_that_cannot_be_made_names_the_setting_and_the_fix(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    """``memory.dbPath`` (or MYCLAW_MEMORY_DB_PATH) under a folder that
    cannot be made: the error names the setting, not only the errno."""
    from gateway.app import StorageError

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    cfg, paths = _config(tmp_path, fake_llm, memory={"dbPath": str(blocker / "memory.db")})
    app = App(cfg, paths, clock=clock, channel_specs=[ECHO])
    try:
        with pytest.raises(StorageError) as err:
            await app.open()
    finally:
        await app.close()
    said = str(err.value)
    assert str(blocker / "memory.db") in said and "memory.dbPath" in said and "MYCLAW_MEMORY_DB_PATH" in said, said
    assert blocker.read_text() == "x"


async def test_opening_labels_old_feishu_facts_of_chats_known_private(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    """gateway/privatechat.py's ``label_private_chats`` runs at open, on the real files."""
    from gateway.sessions import SessionStore
    from memory.engine import MemoryEngine
    from memory.types import NewMemory, Provenance

    cfg, paths = _config(tmp_path, fake_llm)
    paths.data_dir.mkdir(parents=True, exist_ok=True)
    engine = await MemoryEngine.open(paths.memory_db(cfg), clock)
    old = Provenance.from_json('{"channel":"feishu","chat_id":"oc_dm"}')
    mid = (await engine.add(NewMemory(owner="alice", content="Alice drinks tea", provenance=old))).id
    await engine.close()
    async with await SessionStore.open(paths.gateway_db(), clock) as store:
        await store.append("feishu:oc_dm", channel="feishu", chat_id="oc_dm", role="user", content="hi",
                           owner="alice", context='{"g": false}')
    app = App(cfg, paths, clock=clock, channel_specs=[ECHO])
    try:
        await app.open()
        got = await app.backend.engine.get_many([mid])  # type: ignore[attr-defined]
        assert got[mid].provenance.group is False
    finally:
        await app.close()


async def test_a_chat_request_tells_when_to_save_or_forget_once_not_in_the_rules_and_the_tools_too(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    """The system prompt's tool rules say when to call memory_save and how
    to find what memory_forget takes; the tools' descriptions said it again
    in every chat request (~60 tokens, scripts/bench_cost.py). They now say
    what each tool does and takes; the rules say when and how."""
    cfg, paths = _config(tmp_path, fake_llm)
    fake_llm.queue_reply("hello")
    app = App(cfg, paths, clock=clock, channel_specs=[ECHO])
    try:
        await app.open()
        await app.start()
        echo = app.channels["echo"]
        assert isinstance(echo, EchoChannel)
        await echo.say("hi")
    finally:
        await app.close()
    body = fake_llm.chat_requests()[0]
    system = body["messages"][0]["content"]
    tools = {t["function"]["name"]: t["function"]["description"] for t in body["tools"]}
    sent = system + "\n" + "\n".join(tools.values())
    for said in ("asks you to remember something", "only what they asked to forget", "that says it"):
        assert sent.count(said) == 1 and said in system, said
    # The citation's form is the rules' to explain too (a search's results show it).
    assert "[id · date recorded · where]" in system and "citation" not in "\n".join(tools.values())
    # What only the tools say stays: what each does, and the form of an id.
    assert "Save a fact to the long-term memory" in tools["memory_save"]
    assert '([m12 · ...] -> "m12"; events "e3")' in tools["memory_forget"] and "for good" in tools["memory_forget"]
