"""scripts/fakes.py, as the README's "Trying it without any account" uses
it: the config it prints, put in MYCLAW_HOME, runs the real gateway
against the fakes, and a line typed for Telegram or Feishu gets an answer."""

from __future__ import annotations

import asyncio
import functools
import json
import socket
from datetime import UTC, datetime, timedelta
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Literal

import pytest

from gateway.app import App
from gateway.config import Paths, load_config
from memory import Provenance
from memory.llm import Candidate, MemoryLLM
from tests.fakes.feishu_server import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.gateway.test_e2e_feishu import _shown
from tests.procs import with_sigint
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
        # A demo learns half a minute after the user stops, not three: /memory then shows it while they watch.
        assert cfg.memory.extraction.quiet_gap == timedelta(seconds=30)
        app = App(cfg, Paths(tmp_path))
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 30)
            assert sorted(app.channels) == ["feishu", "telegram"]

            event = fs.message_event("你好", chat_id=fakes.DEMO_FEISHU_CHAT, open_id=fakes.DEMO_FEISHU_USER)
            r = await fs.push_event(webhook, event)
            assert r.status_code == 200, r.text
            # The reply, not the first message's words: one that outlasts
            # agent.streaming.delay (1 s, a loaded machine) is first a draft ("You").
            await _shown(fs, ["You said: 你好"])

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


async def test_asking_the_demo_bot_to_forget_erases_that_memory_and_nothing_unrelated(tmp_path: Path) -> None:
    """The fake model calls memory_forget as a real one would: the README's
    "ask it to forget something" can be tried without an account."""
    async with FakeTelegram(strict_chats=False) as tg, FakeOpenAI(api_key=fakes.API_KEY, responder=fakes.responder) as llm:
        (tmp_path / "config.json").write_text(fakes.config_snippet(tg, None, llm, webhook=None), encoding="utf-8")
        cfg = load_config(tmp_path / "config.json", env={"MYCLAW_HOME": str(tmp_path)}, require=True)
        app = App(cfg, Paths(tmp_path))
        user = f"telegram:{fakes.DEMO_TELEGRAM_USER}"
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 30)
            assert app.backend is not None
            cat = await app.backend.remember(user, "My cat is called Miso", provenance=Provenance(channel="telegram"))
            await app.backend.remember(user, "I drink oat milk", provenance=Provenance(channel="telegram"))
            city = await app.backend.remember(user, "我在上海工作", provenance=Provenance(channel="telegram"))

            async def say(text: str) -> str:
                before = len(tg.texts(fakes.DEMO_TELEGRAM_USER))
                tg.push_text(fakes.DEMO_TELEGRAM_USER, fakes.DEMO_TELEGRAM_USER, text, username="demo_user")
                await _until(lambda: len(tg.texts(fakes.DEMO_TELEGRAM_USER)) > before)
                return tg.texts(fakes.DEMO_TELEGRAM_USER)[-1]

            assert await say("please forget that my cat is called Miso") == f"Done. Erased for good: {cat.ref} My cat is called Miso"
            assert await say("forget my bank account number") == "I found nothing stored about that, so there is nothing to forget."
            assert (await say("忘记我在上海工作")).startswith(f"Done. Erased for good: {city.ref} 我在上海工作")
            assert (await say("what do I drink?")).startswith("You said: what do I drink?")
            left = [h.content for h in await app.backend.search(user, "cat oat milk 上海", limit=10)]
            assert left == ["I drink oat milk"]
        finally:
            await asyncio.wait_for(app.close(), 15)


async def test_with_a_pace_the_demo_reply_shows_while_it_is_written(tmp_path: Path) -> None:
    """--pace: the echo streams word by word, slower than streaming's 1 s
    delay, so the demo shows the reply's drafts before the reply."""
    slow = functools.partial(fakes.responder, pace=0.2)
    async with FakeTelegram(strict_chats=False) as tg, FakeOpenAI(api_key=fakes.API_KEY, responder=slow) as llm:
        (tmp_path / "config.json").write_text(fakes.config_snippet(tg, None, llm, webhook=None), encoding="utf-8")
        cfg = load_config(tmp_path / "config.json", env={"MYCLAW_HOME": str(tmp_path)}, require=True)
        app = App(cfg, Paths(tmp_path))
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 30)
            words = "one two three four five six seven eight"
            tg.push_text(fakes.DEMO_TELEGRAM_USER, fakes.DEMO_TELEGRAM_USER, words, username="demo_user")
            await tg.wait_sent(1, timeout=15)
            reply = f"You said: {words}"
            assert tg.texts(fakes.DEMO_TELEGRAM_USER) == [reply]
            shown = [d.text for d in tg.drafts if d.text]
            assert shown and all(reply.startswith(t) for t in shown), shown  # the reply so far, each time
        finally:
            await asyncio.wait_for(app.close(), 15)


async def test_the_demo_model_extracts_a_fact_from_each_user_line_and_still_merges() -> None:
    """The README's demo "runs the write path too": what the demo user says
    becomes memories. The extraction prompt names "from" (project renames),
    which must not make the fake answer it as the weekly merge, with no facts."""
    async with FakeOpenAI(api_key=fakes.API_KEY, responder=fakes.responder) as llm:
        client = MemoryLLM(base_url=llm.url, model="fake-model", api_key=fakes.API_KEY, timeout=5.0, retries=0)
        try:
            got = await asyncio.wait_for(client.extract([
                "[2026-11-23 11:07] user: my cat is called Miso",
                "[2026-11-23 11:07] assistant: You said: my cat is called Miso",
                "[2026-11-23 11:08] user: 我在上海工作",
            ]), 10)
            assert [(f.content, f.lines) for f in got.facts] == [("my cat is called Miso", (1,)), ("我在上海工作", (3,))]
            assert got.summary == "my cat is called Miso"
            merged = await asyncio.wait_for(client.merge([Candidate(1, "I drink oat milk"), Candidate(2, "I live in Berlin")]), 10)
            assert [(f.fact.content, f.sources) for f in merged.facts] == [("I drink oat milk", (1,)), ("I live in Berlin", (2,))]
        finally:
            await client.aclose()


async def test_the_demo_terminal_tries_a_group_a_second_user_a_file_an_edit_and_a_recall(tmp_path: Path) -> None:
    """The README's demo reaches what a newcomer wants to try beyond one
    private chat: a group with two members, a second user, a file, an edit
    and a Feishu recall, each by a line typed in the fakes' terminal."""
    async with FakeTelegram(strict_chats=False) as tg, FakeFeishu() as fs, \
            FakeOpenAI(api_key=fakes.API_KEY, responder=fakes.responder) as llm:
        (tmp_path / "config.json").write_text(fakes.config_snippet(tg, fs, llm, webhook=None), encoding="utf-8")
        cfg = load_config(tmp_path / "config.json", env={"MYCLAW_HOME": str(tmp_path)}, require=True)
        app = App(cfg, Paths(tmp_path))
        demo = fakes.Demo(tg, fs, webhook=None)

        async def type_line(line: str) -> str | None:
            return await asyncio.wait_for(demo.handle(line), 10)

        try:
            await app.open()
            await asyncio.wait_for(app.start(), 30)
            await fs.wait_ws_connected()
            group, bob = fakes.DEMO_TELEGRAM_GROUP, fakes.DEMO_TELEGRAM_USER_2

            assert await type_line("tg: the release is on Friday") is None  # a member talks; nobody asked the bot
            await type_line("tg2: @myclaw_bot when is the release?")
            await tg.wait_sent(1, timeout=10)
            assert tg.texts(group) == ["You said: when is the release?"]

            await type_line("t2: hello, I am Bob")
            await _until(lambda: tg.texts(bob) == ["You said: hello, I am Bob"])

            terms = tmp_path / "terms.txt"
            terms.write_text("The rent is 1450 EUR a month.\n", encoding="utf-8")
            await type_line(f"tfile: {terms} what is the rent?")
            user = fakes.DEMO_TELEGRAM_USER
            await _until(lambda: tg.texts(user) == ["You said: [file terms.txt] what is the rent?"])

            await type_line("t: my favourite colour is green")
            await _until(lambda: len(tg.texts(user)) == 2)
            await type_line("tedit: my favourite colour is blue")
            assert app.sessions is not None
            await _until_async(lambda: _said(app, f"telegram:{user}", "my favourite colour is blue"))

            await type_line("f: 我最喜欢的水果是芒果")
            await _until(lambda: len(fs.sent) == 1)
            await type_line("frecall:")
            await _until_async(lambda: _gone(app, f"feishu:{fakes.DEMO_FEISHU_CHAT}", "芒果"))

            assert "no file" in str(await type_line("tfile: /nonexistent/nothing.txt"))
            assert "tedit" in str(await type_line("bogus: words"))  # the help names every kind of line
        finally:
            await asyncio.wait_for(app.close(), 15)


async def test_the_demo_clock_moves_a_day_on_and_the_daily_compression_runs(tmp_path: Path) -> None:
    """--gateway runs the gateway in the fakes' process on a clock the
    terminal moves: "clock: +1d" and the day the demo user talked is over,
    so what they said is learnt and that day's events compressed, as the
    next night would do."""
    async with FakeTelegram(strict_chats=False) as tg, FakeOpenAI(api_key=fakes.API_KEY, responder=fakes.responder) as llm:
        snippet = fakes.config_snippet(tg, None, llm, webhook=None)
        clock = fakes.DemoClock()
        app = await asyncio.wait_for(fakes.start_gateway(tmp_path / "home", snippet, clock), 30)
        assert (tmp_path / "home" / "config.json").read_text(encoding="utf-8") == snippet
        demo = fakes.Demo(tg, None, webhook=None, clock=clock, app=app)
        elsewhere = fakes.Demo(tg, None, webhook=None)  # the gateway in another process: its clock is the real one

        async def type_line(line: str) -> str | None:
            return await asyncio.wait_for(demo.handle(line), 20)

        try:
            assert "--gateway" in str(await elsewhere.handle("clock: +1d"))
            assert "+1d" in str(await type_line("clock: tomorrow"))  # bad input: how to say it, nothing moved
            assert abs(clock.now() - datetime.now(UTC)) < timedelta(minutes=1)

            await type_line("t: I moved to Lisbon last week")
            await tg.wait_sent(1, timeout=10)
            note = str(await type_line("clock: +1d"))
            assert clock.now() - datetime.now(UTC) > timedelta(hours=23)
            assert note.startswith("demo clock: ") and "1 day ahead" in note, note
            assert "learnt from 2 lines of chat" in note and "daily compression ran" in note, note
            engine = app.backend.engine  # type: ignore[union-attr]
            rows = await engine.db.fetchall("SELECT is_compressed FROM daily_events")
            assert [r[0] for r in rows] == [1]
            before = clock.now()
            assert str(await type_line("clock:")).startswith("demo clock: ")  # says the time, moves nothing
            assert clock.now() - before < timedelta(minutes=1)
            # A week on, both compressions are due at once; the one that found
            # the other holding the lease said "ran: busy", and ran unseen later.
            note = str(await type_line("clock: +7d"))
            assert "daily compression ran" in note and "weekly compression ran" in note, note
            assert "busy" not in note, note
        finally:
            await asyncio.wait_for(app.close(), 15)


async def test_the_demo_clock_runs_each_job_at_its_own_time_not_late(tmp_path: Path) -> None:
    """"clock: +1d" passes a reminder's 09:00: it is run at 09:00 on the
    demo clock, as a gateway left running would, not at the end of the
    jump with a "runs 15 h late" note the newcomer would take for a bug."""
    async with FakeTelegram(strict_chats=False) as tg, FakeOpenAI(api_key=fakes.API_KEY, responder=fakes.responder) as llm:
        snippet = fakes.config_snippet(tg, None, llm, webhook=None)
        clock = fakes.DemoClock()
        app = await asyncio.wait_for(fakes.start_gateway(tmp_path / "home", snippet, clock), 30)
        demo = fakes.Demo(tg, None, webhook=None, clock=clock, app=app)
        user = fakes.DEMO_TELEGRAM_USER
        try:
            assert isinstance(app.cron, fakes.CronScheduler)
            store = app.cron.store
            await store.add(message="stand up and stretch", channel="telegram", chat_id=str(user),
                            user=f"telegram:{user}", schedule="0 9 * * *", job_id="stretch", private=True)
            await store.add(message="call the dentist", channel="telegram", chat_id=str(user),
                            user=f"telegram:{user}", at=clock.now() + timedelta(hours=5), job_id="dentist", private=True)
            note = str(await asyncio.wait_for(demo.handle("clock: +1d"), 30))
            assert "stretch ran" in note and "dentist ran" in note, note
            await tg.wait_sent(2, timeout=10)
            texts = tg.texts(user)
            assert len(texts) == 2 and {t.split(" (")[0] for t in texts} == {
                "You said: stand up and stretch", "You said: call the dentist"}, texts
            assert not any("late" in t for t in texts), texts
            [job] = [j for j in await store.list() if j.id == "stretch"]
            assert job.last_run_at is not None and job.last_run_at.endswith("T09:00:00Z"), job.last_run_at
            assert clock.now() - datetime.now(UTC) > timedelta(hours=23)  # and on to where it was asked to go
        finally:
            await asyncio.wait_for(app.close(), 15)


async def _until_async(check: Callable[[], Awaitable[bool]], timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not await check():
            await asyncio.sleep(0.05)


async def _said(app: App, key: str, words: str) -> bool:
    assert app.sessions is not None
    return any(m.content == words for m in await app.sessions.window(key))


async def _gone(app: App, key: str, words: str) -> bool:
    assert app.sessions is not None
    return not any(words in m.content for m in await app.sessions.window(key))


@pytest.mark.parametrize("sigint", ["default", "ignored"])
def test_ctrl_c_stops_the_fakes_while_they_wait_for_a_line(sigint: Literal["default", "ignored"]) -> None:
    """The printed "Ctrl-C stops" did not: the line reader's thread, blocked
    in stdin's readline, held the process until Enter was pressed. Nor when
    started with SIGINT ignored (a script's background job, as the suite
    itself is in CI): Python keeps it ignored, and the fakes ran on."""
    import os
    import signal
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[2] / "scripts" / "fakes.py"
    ports = [str(_free_port()) for _ in range(3)]
    with subprocess.Popen(
        with_sigint(sigint, sys.executable, str(script), "--telegram", ports[0], "--feishu", ports[1], "--openai", ports[2]),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    ) as proc:
        try:
            assert proc.stdout is not None
            for line in proc.stdout:  # up and reading lines: its help is out
                if line.startswith("type a line"):
                    break
            proc.send_signal(signal.SIGINT)  # stdin stays open: nothing typed
            assert proc.wait(timeout=60) == 0  # a guard against the hang, not a speed bound
            assert "Traceback" not in proc.stdout.read()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
