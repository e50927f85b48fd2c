"""The gateway's own erasures beside a running ``myclaw chat``: ``/forget
all`` and the memory page's erase-all.

``myclaw memory forget --user`` refuses while a chat runs on the home (the
chat would write back what it holds of the user: gateway/datalock.py
``ChatLock``), but the gateway's ``/forget all`` and the page's erase-all
erased beside one. Now both refuse, nothing erased, and say so in the
user's language; the ``/forget all`` code stays good for a retry once the
chat has ended. The chat is its lock, held as ``myclaw chat`` holds it
(test_erasure_chat_e2e.py runs a real one against the CLI)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import httpx
import pytest

from gateway.datalock import ChatLock, ChatRunning
from memory import ManualClock
from tests.gateway.test_remembering_e2e import Model, fact, running, say

SECRET = "QUOKKA7731"
ADMIN = "admin-token-0123456789abcdef"


async def _remembered(app: object, model: Model, clock: ManualClock, user: str, words: str) -> None:
    await say(app, clock, words, user)  # type: ignore[arg-type]
    model.extractions.append((SECRET, {"facts": [fact(f"{user}'s locker code is {SECRET}")], "summary": "a code"}))
    clock.advance(200)
    assert await app.loop.drain(5)  # type: ignore[attr-defined]
    await app.extraction.flush_all()  # type: ignore[attr-defined]


async def test_forget_all_beside_a_running_chat_refuses_and_the_code_works_once_it_ends(tmp_path: Path) -> None:
    model, clock = Model(), ManualClock("2026-03-02T10:00:00Z")
    async with running(tmp_path, model, clock) as (app, fake):
        await _remembered(app, model, clock, "alice", f"my locker code is {SECRET}")
        engine = app.backend.engine  # type: ignore[union-attr]
        assert [m for m in await engine.list_memories("echo:alice") if SECRET in m.content]
        code = re.findall(r"\b\d{4}\b", await say(app, clock, "/forget all", "alice"))[-1]

        chat = ChatLock(tmp_path / "data")
        chat.share()  # `myclaw chat` runs on this home
        try:
            refused = await say(app, clock, f"/forget all {code}", "alice")
            assert refused.startswith("I cannot erase now: a terminal chat (myclaw chat)"), refused
            assert "Nothing was erased" in refused and f"/forget all {code} again" in refused
            assert [m for m in await engine.list_memories("echo:alice") if SECRET in m.content]
            assert not app.erasures.since("echo:alice", 0)  # the loop was never told she is erased
        finally:
            chat.release()

        done = await say(app, clock, f"/forget all {code}", "alice")  # the same code, the chat gone
        assert done.startswith("Erased for good"), done
        assert await engine.list_memories("echo:alice", status=None) == []
        # The erasure let go of the lock: a chat starts again.
        chat = ChatLock(tmp_path / "data")
        chat.share()
        chat.release()


async def test_forget_all_in_chinese_beside_a_chat_is_refused_in_chinese(tmp_path: Path) -> None:
    model, clock = Model(), ManualClock("2026-03-02T10:00:00Z")
    async with running(tmp_path, model, clock) as (app, fake):
        await _remembered(app, model, clock, "li", f"我的储物柜密码是 {SECRET}")
        code = re.findall(r"\b\d{4}\b", await say(app, clock, "/forget 全部", "li"))[-1]
        chat = ChatLock(tmp_path / "data")
        chat.share()
        try:
            refused = await say(app, clock, f"/forget 全部 {code}", "li")
        finally:
            chat.release()
        assert refused.startswith("现在无法删除") and "什么也没有删除" in refused and f"/forget 全部 {code}" in refused
        assert len(await app.backend.engine.list_memories("echo:li")) == 1  # type: ignore[union-attr]


async def test_the_memory_pages_erase_all_beside_a_running_chat_refuses(tmp_path: Path) -> None:
    model, clock = Model(), ManualClock("2026-03-02T10:00:00Z")
    admin = {"port": 0, "admin": {"enabled": True, "token": ADMIN}}
    async with running(tmp_path, model, clock, gateway=admin) as (app, fake):
        await _remembered(app, model, clock, "alice", f"my locker code is {SECRET}")
        engine = app.backend.engine  # type: ignore[union-attr]
        form = {"user": "echo:alice", "confirm": "yes", "typed": "echo:alice"}
        async with httpx.AsyncClient(base_url=app.http.url, headers={"Authorization": f"Bearer {ADMIN}"},  # type: ignore[union-attr]
                                     timeout=10) as c:
            chat = ChatLock(tmp_path / "data")
            chat.share()
            try:
                r = await asyncio.wait_for(c.post("/memory/erase-all", data=form), 10)
                assert r.status_code == 409, r.text
                assert "A terminal chat (myclaw chat)" in r.text and "Nothing was erased" in r.text
                assert 'name="typed"' in r.text  # the confirmation again, to retry from
                assert len(await engine.list_memories("echo:alice")) == 1
                r = await asyncio.wait_for(c.post("/memory/erase-all", data=form,
                                                  headers={"Accept-Language": "zh-CN"}), 10)
                assert r.status_code == 409 and "什么也没有删除" in r.text
            finally:
                chat.release()
            r = await asyncio.wait_for(c.post("/memory/erase-all", data=form), 10)
            assert r.status_code == 303, r.text
        assert await engine.list_memories("echo:alice", status=None) == []


async def test_a_chats_own_forget_all_beside_another_chat_refuses_then_erases_once_it_ended(tmp_path: Path) -> None:
    """``myclaw chat``'s own ``/forget all`` (its lock turned exclusive for
    the erasure): another chat on the home would write back what it holds
    of the user, so refused; once that one ended, the same code erases."""
    import io
    import json

    from channels.terminal import TerminalChannel
    from gateway.app import App
    from gateway.config import Paths, load_config
    from tests.fakes.openai_server import FakeOpenAI, Reply, said

    async with FakeOpenAI() as fake:
        fake.responder = lambda body: Reply(content="noted: " + said(body)[-10:])
        (tmp_path / "config.json").write_text(json.dumps({"provider": {"baseUrl": fake.url, "maxRetries": 0}}),
                                              encoding="utf-8")
        clock = ManualClock("2026-03-02T10:00:00Z")
        app = App(load_config(tmp_path / "config.json", env={}), Paths(tmp_path), clock=clock, config_channels=False)
        reader, out = asyncio.StreamReader(), io.StringIO()
        terminal = TerminalChannel(app.bus, reader=reader, output=out, sender_id="ada", prompt="you> ")
        app.add_channel(terminal)

        async def answer(line: str) -> str:
            before = out.getvalue().count("myclaw> ")
            reader.feed_data(line.encode() + b"\n")
            for _ in range(500):
                if out.getvalue().count("myclaw> ") > before and out.getvalue().endswith("you> "):
                    return out.getvalue().rsplit("myclaw> ", 1)[1]
                await asyncio.sleep(0.01)
            raise AssertionError(out.getvalue())

        try:
            await app.open()
            await app.start()
            await answer(f"my locker code is {SECRET}")
            code = re.findall(r"\b\d{4}\b", await answer("/forget all"))[-1]
            other = ChatLock(tmp_path / "data")
            other.share()  # a second `myclaw chat` on the home
            try:
                refused = await answer(f"/forget all {code}")
            finally:
                other.release()
            assert refused.startswith("I cannot erase now") and "Nothing was erased" in refused, refused
            assert await app.sessions.owned("terminal:ada") > 0  # type: ignore[union-attr]
            done = await answer(f"/forget all {code}")
            assert done.startswith("Erased for good"), done
            assert await app.sessions.owned("terminal:ada") == 0  # type: ignore[union-attr]
            # Its share is back: an erasure from outside still sees this chat.
            with pytest.raises(ChatRunning, match="myclaw chat is running on this home"):
                ChatLock(tmp_path / "data").exclusive()
            reader.feed_eof()
            await asyncio.wait_for(terminal.wait_closed(), 10)
        finally:
            await app.close()


async def test_two_users_forget_all_confirmed_at_once_are_both_erased(tmp_path: Path) -> None:
    """Found by a walk: Alice's and Bob's confirmations, sent at the same
    moment, ran in their chats' workers side by side; the second was told
    "a terminal chat (myclaw chat) or another erasure is running", nothing
    erased, though no chat ran: the first erasure held the lock."""
    from gateway.bus import InboundMessage

    model, clock = Model(), ManualClock("2026-03-02T10:00:00Z")
    async with running(tmp_path, model, clock) as (app, fake):
        codes = {}
        for who in ("alice", "bob"):
            await say(app, clock, f"my locker is {who}-{SECRET}", who)
            codes[who] = re.findall(r"/forget all (\d{4})", await say(app, clock, "/forget all", who))[-1]
        echo = app.channels["echo"]
        echo.got.clear()  # type: ignore[attr-defined]
        before = len(echo.sent)  # type: ignore[attr-defined]
        for who, code in codes.items():
            await echo.publish(InboundMessage(channel="echo", chat_id=f"c-{who}", sender_id=who,  # type: ignore[attr-defined]
                                              text=f"/forget all {code}", timestamp=clock.now()))
        assert await app.loop.drain(10)  # type: ignore[union-attr]
        answers = {m.chat_id: m.text for m in echo.sent[before:]}  # type: ignore[attr-defined]
        assert all(answers[f"c-{who}"].startswith("Erased for good") for who in codes), answers
        for who in codes:
            assert await app.sessions.owned(f"echo:{who}") == 0  # type: ignore[union-attr]
