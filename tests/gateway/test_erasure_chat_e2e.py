"""``myclaw memory forget --user`` beside a running ``myclaw chat``.

The chat takes no erasure requests (it holds no gateway lock), so the CLI
erased the files beside it: a second writer, and what the chat held of the
user (its session's window, a turn at the model) was written back after.
Now the CLI refuses while a chat runs on the home, erasing nothing, and a
chat does not start while an erasure runs (gateway/datalock.py
``ChatLock``). Both as real processes, against the fake OpenAI server."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from pathlib import Path

from gateway.datalock import ChatLock, ChatRunning
from tests.fakes.openai_server import FakeOpenAI, Reply, said
from tests.procs import START, finished, killed

from .test_cli_gateway import REPO, _env
from .test_erasure_cli_e2e import _forget

SECRET = "QUOKKA7731"


def _history(home: Path) -> list[str]:
    with sqlite3.connect(home / "data" / "gateway.db") as db:
        return [str(r[0]) for r in db.execute("SELECT owner FROM session_messages")]


async def test_forget_beside_a_running_chat_refuses_and_erases_nothing(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    fake_llm.responder = lambda body: Reply(content="noted: " + said(body)[-12:])
    env = {"MYCLAW_PROVIDER_BASE_URL": fake_llm.url, "MYCLAW_PROVIDER_API_KEY": fake_llm.api_key or ""}
    (tmp_path / "config.json").write_text('{"memory": {"enabled": true}}', encoding="utf-8")
    chat = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "from gateway.cli import main; main()", "chat", "--user", "ada",
        cwd=REPO, env=_env(tmp_path, **env),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        assert chat.stdin is not None and chat.stdout is not None
        chat.stdin.write(f"my locker code is {SECRET}\n".encode())
        await chat.stdin.drain()
        reply = await asyncio.wait_for(chat.stdout.readuntil(SECRET.encode()), START)
        assert SECRET.encode() in reply

        code, out, err = await asyncio.wait_for(_forget(tmp_path, "terminal:ada"), START)
        assert code == 1, (out, err)
        assert "myclaw chat is running on this home" in err and "nothing was erased" in err, err
        assert _history(tmp_path).count("terminal:ada") == 2  # her turn and its answer, untouched

        chat.stdin.close()  # the chat ends at end of input
        await finished(chat)
        assert chat.returncode == 0
    finally:
        await killed(chat)

    code, out, err = await asyncio.wait_for(_forget(tmp_path, "terminal:ada"), START)
    assert code == 0, err
    assert "forgot terminal:ada: " in out and "2 history messages" in out, out
    assert _history(tmp_path) == []


def test_a_chat_does_not_start_while_an_erasure_runs(tmp_path: Path) -> None:
    erasing = ChatLock(tmp_path)
    erasing.exclusive()
    try:
        chat = ChatLock(tmp_path)
        try:
            chat.share()
            raise AssertionError("a chat started during the erasure")
        except ChatRunning as exc:
            assert "an erasure (myclaw memory forget) is running" in str(exc)
    finally:
        erasing.release()
    chat = ChatLock(tmp_path)
    chat.share()  # once it is done
    other = ChatLock(tmp_path)
    other.share()  # chats share the home
    try:
        try:
            ChatLock(tmp_path).exclusive()
            raise AssertionError("an erasure ran beside a chat")
        except ChatRunning as exc:
            assert "myclaw chat is running on this home" in str(exc)
    finally:
        chat.release()
        other.release()
