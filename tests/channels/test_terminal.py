from __future__ import annotations

import asyncio
import io
import json
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from channels.base import DeliveryError
from channels.terminal import TerminalChannel, stdin_reader
from gateway.app import App
from gateway.bus import words_in_chinese
from gateway.config import Paths, load_config
from gateway.delivery import FILE_NOT_SENT
from gateway.export import exports_folder
from memory import ManualClock, Provenance
from tests.fakes.openai_server import FakeOpenAI, Reply, said
from tests.procs import START, finished


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as fake:
        yield fake


async def _chat_app(tmp_path: Path, clock: ManualClock, fake: FakeOpenAI, lines: bytes,
                    sender_id: str = "ada") -> tuple[App, TerminalChannel, io.StringIO]:
    (tmp_path / "config.json").write_text(json.dumps({"provider": {"baseUrl": fake.url, "maxRetries": 0}}), encoding="utf-8")
    cfg = load_config(tmp_path / "config.json", env={})
    app = App(cfg, Paths(tmp_path), clock=clock, config_channels=False)
    reader = asyncio.StreamReader()
    reader.feed_data(lines)
    reader.feed_eof()
    out = io.StringIO()
    terminal = TerminalChannel(app.bus, reader=reader, output=out, sender_id=sender_id, prompt="you> ")
    app.add_channel(terminal)
    return app, terminal, out


async def test_terminal_lines_are_answered_in_order(tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI) -> None:
    fake_llm.responder = lambda body: Reply(content="re: " + said(body))
    app, terminal, out = await _chat_app(tmp_path, clock, fake_llm, "hello\n\n你好\n/new\n/exit\nnever read\n".encode())
    try:
        await app.open()
        await app.start()
        await asyncio.wait_for(terminal.wait_closed(), 10)
    finally:
        await app.close()
    lines = out.getvalue().split("you> ")
    # /new in the chat's language: half of it, the latest line, Chinese.
    assert [ln for ln in lines if ln] == ["myclaw> re: hello\n", "myclaw> re: 你好\n", "myclaw> 已开始新的对话。之前告诉我的事我仍然记得。\n"]
    # the terminal user is its own memory owner, and Tier 0 kept the turns
    assert len(fake_llm.requests) == 2
    assert [m["content"] for m in fake_llm.requests[1]["messages"][1:]] == ["hello", "re: hello", "<time>12:00</time>\n你好"]


async def test_terminal_gets_an_apology_when_the_llm_is_down(tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI) -> None:
    fake_llm.queue_error(500)
    app, terminal, out = await _chat_app(tmp_path, clock, fake_llm, b"hello\n")
    try:
        await app.open()
        await app.start()
        await asyncio.wait_for(terminal.wait_closed(), 10)
    finally:
        await app.close()
    assert "myclaw> Sorry" in out.getvalue()


async def test_stdin_reader_reads_a_pipe_without_blocking_the_loop() -> None:
    r, w = os.pipe()
    with os.fdopen(r, "r", encoding="utf-8") as stream:
        reader = stdin_reader(stream)
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        ticker = asyncio.create_task(tick())
        await asyncio.sleep(0.1)  # the reader thread is blocked on the empty pipe; the loop is not
        assert ticks >= 5
        os.write(w, "第一行\nsecond\n".encode())
        os.close(w)
        assert await asyncio.wait_for(reader.readline(), 5) == "第一行\n".encode()
        assert await asyncio.wait_for(reader.readline(), 5) == b"second\n"
        assert await asyncio.wait_for(reader.readline(), 5) == b""  # EOF
        ticker.cancel()


async def test_a_person_at_a_terminal_is_told_how_to_leave_and_a_pipe_is_not(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    """`myclaw chat` on a real pseudo-terminal, then on a pipe."""
    import pty
    import sys

    from channels.terminal import BANNER

    fake_llm.responder = lambda body: Reply(content="re: " + said(body))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MYCLAW_")}
    env.update(MYCLAW_HOME=str(tmp_path), MYCLAW_PROVIDER_BASE_URL=fake_llm.url)
    repo = Path(__file__).resolve().parents[2]
    cmd = [sys.executable, "-c", "from gateway.cli import main; main()", "chat", "--user", "ada"]
    main_fd, tty = pty.openpty()
    proc = await asyncio.create_subprocess_exec(*cmd, cwd=repo, env=env, stdin=tty, stdout=tty, stderr=asyncio.subprocess.DEVNULL)
    os.close(tty)
    seen = b""
    try:
        async with asyncio.timeout(START):  # takes in the process's start
            while b"you> " not in seen:
                seen += await asyncio.to_thread(os.read, main_fd, 4096)
            os.write(main_fd, b"/exit\n")
            assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        os.close(main_fd)
    assert seen.decode().replace("\r\n", "\n").startswith(BANNER + "you> ")

    piped = await asyncio.create_subprocess_exec(*cmd, cwd=repo, env=env, stdin=asyncio.subprocess.PIPE,
                                                 stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, _ = await finished(piped, b"hello\n")
    assert out.decode() == "myclaw> re: hello\n"  # machine-readable: no banner, no prompt


async def _export_session(app: App, terminal: TerminalChannel) -> None:
    """Ada has a memory; the terminal's lines are read and answered."""
    try:
        await app.open()
        assert app.backend is not None
        await app.backend.remember("terminal:ada", "Ada keeps her notes in Obsidian", provenance=Provenance())
        await app.start()
        await asyncio.wait_for(terminal.wait_closed(), 10)
    finally:
        await app.close()


async def test_an_export_is_written_owner_only_and_its_path_printed(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    app, terminal, out = await _chat_app(tmp_path, clock, fake_llm, b"/export\n/export\n")
    terminal.exports = Paths(tmp_path).exports_dir
    await _export_session(app, terminal)
    # In her own folder there: /forget all erases it with the rest.
    path = exports_folder(tmp_path / "exports", "terminal:ada") / f"myclaw-memory-{clock.now().date().isoformat()}.md"
    first, second = [ln for ln in out.getvalue().split("you> ") if ln]
    assert first.startswith("myclaw> Everything I keep about you, as a Markdown file.") and first.endswith(f"(saved to {path})\n")
    assert second.startswith("myclaw> One export a minute")  # the same clock minute
    assert os.stat(path).st_mode & 0o777 == 0o600 and os.stat(path.parent).st_mode & 0o777 == 0o700
    assert os.stat(path.parent.parent).st_mode & 0o777 == 0o700
    assert "Ada keeps her notes in Obsidian" in path.read_text(encoding="utf-8")
    assert fake_llm.requests == []


async def test_the_saved_line_speaks_the_sessions_language(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    """A Chinese session's export reply is Chinese: the line after it said "(saved to …)"."""
    app, terminal, out = await _chat_app(tmp_path, clock, fake_llm, "/导出\n".encode())
    terminal.exports = Paths(tmp_path).exports_dir
    await _export_session(app, terminal)
    path = exports_folder(tmp_path / "exports", "terminal:ada") / f"myclaw-memory-{clock.now().date().isoformat()}.md"
    [reply] = [ln for ln in out.getvalue().split("you> ") if ln]
    assert words_in_chinese(reply.split("\n")[0]) and reply.endswith(f"（已保存到 {path}）\n")


async def test_forget_all_erases_the_users_exports_too(tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI) -> None:
    """The export ``myclaw chat`` wrote holds everything kept about the user:
    after /forget all said "Erased for good", it stayed in exports/."""
    (tmp_path / "config.json").write_text(json.dumps({"provider": {"baseUrl": fake_llm.url, "maxRetries": 0}}),
                                          encoding="utf-8")
    app = App(load_config(tmp_path / "config.json", env={}), Paths(tmp_path), clock=clock, config_channels=False)
    reader, out = asyncio.StreamReader(), io.StringIO()
    terminal = TerminalChannel(app.bus, reader=reader, output=out, sender_id="ada", prompt="you> ",
                               exports=Paths(tmp_path).exports_dir)
    app.add_channel(terminal)
    reader.feed_data(b"/export\n/forget all\n")
    try:
        await app.open()
        assert app.backend is not None
        await app.backend.remember("terminal:ada", "Ada keeps her notes in Obsidian", provenance=Provenance())
        await app.start()
        async with asyncio.timeout(10):
            while "/forget all " not in out.getvalue().split("To confirm")[-1]:
                await asyncio.sleep(0.01)
        assert any(b"Obsidian" in f.read_bytes() for f in (tmp_path / "exports").rglob("*.md"))
        code = re.findall(r"\b\d{4}\b", out.getvalue())[-1]
        reader.feed_data(f"/forget all {code}\n".encode())
        reader.feed_eof()
        await asyncio.wait_for(terminal.wait_closed(), 10)
    finally:
        await app.close()
    assert "Erased for good" in out.getvalue()
    assert [f for f in (tmp_path / "exports").rglob("*") if f.is_file() and b"Obsidian" in f.read_bytes()] == []


async def test_without_a_folder_the_file_is_not_written_and_the_user_is_told(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    app, terminal, out = await _chat_app(tmp_path, clock, fake_llm, b"/export\n")
    await _export_session(app, terminal)
    assert out.getvalue() == f"you> myclaw> {FILE_NOT_SENT}\nyou> "
    assert not (tmp_path / "exports").exists()


async def test_drafts_print_the_reply_as_it_grows_and_the_reply_ends_it() -> None:
    from gateway.bus import MessageBus, OutboundMessage

    out = io.StringIO()
    terminal = TerminalChannel(MessageBus(), reader=asyncio.StreamReader(), output=out, drafts=True)

    def draft(text: str, key: str = "k") -> OutboundMessage:
        return OutboundMessage("terminal", "local", text, send_key=key, draft=True)

    assert await terminal.send_draft(draft("The launch"))
    assert await terminal.send_draft(draft("The launch moved"))
    await terminal.send(OutboundMessage("terminal", "local", "The launch moved to Thursday.", send_key="k"))
    assert out.getvalue() == "myclaw> The launch moved to Thursday.\n"
    # The model started over (a retry): that draft is skipped and the reply comes on a line of its own.
    out.truncate(0), out.seek(0)
    await terminal.send_draft(draft("Wrong half", "k2"))
    assert await terminal.send_draft(draft("Right", "k2"))
    await terminal.send(OutboundMessage("terminal", "local", "Right answer.", send_key="k2"))
    assert out.getvalue() == "myclaw> Wrong half\nmyclaw> Right answer.\n"
    # Piped output (the default away from a terminal) shows no drafts.
    piped = TerminalChannel(MessageBus(), reader=asyncio.StreamReader(), output=io.StringIO())
    assert not await piped.send_draft(draft("x", "k3"))


async def _chat_as(tmp_path: Path, clock: ManualClock, fake: FakeOpenAI, user: str, lines: bytes) -> str:
    """One ``myclaw chat --user USER`` session on the home at ``tmp_path``: what it printed."""
    app, terminal, out = await _chat_app(tmp_path, clock, fake, lines, sender_id=user)
    try:
        await app.open()
        await app.start()
        await asyncio.wait_for(terminal.wait_closed(), 10)
        assert app.loop is not None and await app.loop.drain(10)
    finally:
        await app.close()
    return out.getvalue()


async def test_two_users_chatting_at_the_terminal_in_turn_never_see_each_others_conversation(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    """``myclaw chat --user alice`` then ``--user bob`` on one home: each
    is a private chat of its own. Bob's prompt holds no line of hers (the
    history of a chat both shared was the window the model read)."""
    fake_llm.responder = lambda body: Reply(content="re: " + said(body))
    await _chat_as(tmp_path, clock, fake_llm, "alice", b"my bank PIN is 83715, keep it\n")
    clock.advance(60)
    n = len(fake_llm.chat_requests())
    printed = await _chat_as(tmp_path, clock, fake_llm, "bob", b"what did I just tell you?\n")
    [asked] = fake_llm.chat_requests()[n:]
    assert "83715" not in json.dumps(asked["messages"]) and "83715" not in printed
    # Her own next session reads on where she left off.
    n = len(fake_llm.chat_requests())
    await _chat_as(tmp_path, clock, fake_llm, "alice", b"what did I just tell you?\n")
    assert "83715" in json.dumps(fake_llm.chat_requests()[n]["messages"])




async def test_a_reply_for_another_terminal_users_chat_is_not_printed_but_kept() -> None:
    """Whatever reaches the terminal for another user's chat (an outbox row
    of theirs) is refused as retryable, so the outbox keeps it for their
    session, and nothing of it is printed for whoever is here."""
    from gateway.bus import MessageBus, OutboundMessage

    out = io.StringIO()
    terminal = TerminalChannel(MessageBus(), reader=asyncio.StreamReader(), output=out, sender_id="bob", drafts=True)
    with pytest.raises(DeliveryError) as refused:
        await terminal.send(OutboundMessage("terminal", "alice", "your locker code is 83715"))
    assert refused.value.retryable and "83715" not in str(refused.value)
    assert not await terminal.send_draft(OutboundMessage("terminal", "alice", "your locker", send_key="k", draft=True))
    await terminal.send(OutboundMessage("terminal", "bob", "hello Bob"))
    assert out.getvalue() == "myclaw> hello Bob\n"
