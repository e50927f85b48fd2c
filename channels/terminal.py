"""The terminal channel (``myclaw chat``): lines from stdin in, replies out.

It talks to the same bus and process loop as Telegram and Feishu, so a
newcomer can try myclaw (memory included) with only an LLM endpoint.

stdin is read by a daemon thread that hands lines to the event loop
(``call_soon_threadsafe``), so a blocking ``readline`` never stalls the
loop, the terminal stays in blocking mode (``connect_read_pipe`` would set
O_NONBLOCK on the tty that stdout shares), and a pending read never keeps
the process alive at exit. Tests hand in an ``asyncio.StreamReader``.

One line is one message; the next prompt appears once its reply is
printed, so piped input (``myclaw chat < questions.txt``) is answered in
order. ``/exit``, ``/quit`` or end of input close the channel.

Each user is a private chat of their own (the chat id is the sender id
unless one is given): ``myclaw chat --user alice`` and then ``--user bob``
on one home shared one chat, whose history Bob's prompt then read. A reply
for another terminal chat (an outbox row of theirs) is not printed here:
it is refused as retryable (:class:`DeliveryError`), so the outbox keeps it.

A reply with a file (``/export``) is written to the folder of the user it
is for in ``exports`` (``myclaw chat`` passes ``$MYCLAW_HOME/exports``),
readable by its owner only, and its path printed after the reply's text.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from typing import TextIO

from gateway.bus import Attachment, InboundMessage, MessageBus, OutboundMessage, words_in_chinese
from gateway.export import exports_folder

from .base import BaseChannel, DeliveryError

__all__ = ["BANNER", "TerminalChannel", "stdin_reader"]

_EXIT = frozenset({"/exit", "/quit", "exit", "quit"})
# Shown once to a person at a terminal: /help is the gateway's, shared with
# Telegram and Feishu, and does not know how to leave a terminal.
BANNER = "myclaw chat: one line is one message. /new starts over, /help lists the commands, /exit or Ctrl-D quits.\n"


def _saved_line(path: Path, reply: str) -> str:
    """Where the file went, in its reply's language: the reply's was chosen
    by the session's rule (gateway/commands.py), as every line of it is."""
    return f"（已保存到 {path}）\n" if words_in_chinese(reply) else f"(saved to {path})\n"


def stdin_reader(stream: TextIO | None = None) -> asyncio.StreamReader:
    """A StreamReader fed from ``stream`` (default stdin) by a daemon thread."""
    stream = stream or sys.stdin
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()

    def pump() -> None:
        try:
            while True:
                line = stream.buffer.readline() if hasattr(stream, "buffer") else stream.readline().encode()
                if not line:
                    break
                loop.call_soon_threadsafe(reader.feed_data, line)
        except (OSError, ValueError, RuntimeError):
            pass  # stdin closed or the event loop is gone: nothing left to read for
        try:
            loop.call_soon_threadsafe(reader.feed_eof)
        except RuntimeError:
            pass  # loop already closed

    threading.Thread(target=pump, name="myclaw-stdin", daemon=True).start()
    return reader


class TerminalChannel(BaseChannel):
    name = "terminal"

    def __init__(
        self,
        bus: MessageBus,
        *,
        reader: asyncio.StreamReader | None = None,
        output: TextIO | None = None,
        sender_id: str = "local",
        chat_id: str | None = None,
        prompt: str | None = None,
        reply_prefix: str = "myclaw> ",
        banner: str | None = None,
        exports: Path | None = None,
        drafts: bool | None = None,
    ) -> None:
        """``drafts``: a reply being written is printed as it grows
        (``send_draft``); None: only to a person at a terminal, so piped
        output holds each reply once, whole, as written."""
        super().__init__(bus)
        self.exports = exports
        self._reader = reader
        self.output = output or sys.stdout
        self.sender_id = sender_id
        self.chat_id = sender_id if chat_id is None else chat_id  # one user, one private chat
        # Show a prompt only to a person at a terminal, not to a pipe.
        interactive = self.output.isatty() and sys.stdin.isatty()
        self.prompt = prompt if prompt is not None else ("you> " if interactive else "")
        self.banner = banner if banner is not None else (BANNER if interactive else "")
        self.reply_prefix = reply_prefix
        self.drafts = interactive if drafts is None else drafts
        # The reply being printed as it is written: (its send_key, what is on screen).
        self._typing: tuple[str, str] | None = None
        self._replied = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._done = asyncio.Event()
        self.sent: int = 0

    async def start(self) -> None:
        if self._task is not None:
            raise RuntimeError("TerminalChannel cannot be started twice")
        if self._reader is None:
            self._reader = stdin_reader()
        self._task = asyncio.create_task(self._read(self._reader), name="terminal-read")

    async def stop(self, timeout: float | None = None) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait({task})
        self._done.set()

    async def wait_closed(self) -> None:
        """Return once input ended (EOF or /exit) and the last reply is out."""
        await self._done.wait()

    def _write(self, text: str) -> None:
        self.output.write(text)
        self.output.flush()

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            if self.banner:
                self._write(self.banner)
            while True:
                if self.prompt:
                    self._write(self.prompt)
                raw = await reader.readline()
                if not raw:
                    break
                text = raw.decode("utf-8", "replace").strip()
                if not text:
                    continue
                if text.lower() in _EXIT:
                    break
                self._replied.clear()
                await self.publish(
                    InboundMessage(channel=self.name, chat_id=self.chat_id, sender_id=self.sender_id, text=text)
                )
                # Every private message gets exactly one reply (an apology
                # when the LLM fails), so this wait ends.
                await self._replied.wait()
        finally:
            self._done.set()

    async def send(self, msg: OutboundMessage) -> None:
        if msg.chat_id != self.chat_id:
            # Another terminal user's: kept for their session, never shown to whoever is here.
            raise DeliveryError("terminal: a reply for another user's chat, kept for their session", retryable=True)
        try:
            saved = await asyncio.to_thread(self._save, msg.attachment, msg.owner) if msg.attachment is not None else None
        except OSError as exc:
            # The note that it failed comes next (gateway/delivery.py), and
            # only then is the prompt shown again.
            raise DeliveryError(f"file not written: {exc.strerror or type(exc).__name__}", retryable=False) from None
        typing, self._typing = self._typing, None
        if typing is not None and typing[0] == msg.send_key and msg.text.startswith(typing[1]):
            text = msg.text[len(typing[1]):]  # the rest of what is on screen
        else:
            # Nothing typed, or the model started over (a retry): the reply on a line of its own.
            text = ("\n" if typing is not None else "") + self.reply_prefix + msg.text
        self._write(f"{text}\n" + (_saved_line(saved, msg.text) if saved else ""))
        self.sent += 1
        self._replied.set()

    async def send_draft(self, msg: OutboundMessage) -> bool:
        """Print what the reply has grown by since the last draft. A draft
        that is not a continuation (the model started over) is skipped:
        the reply itself comes on a line of its own."""
        if not self.drafts or msg.chat_id != self.chat_id:
            return False
        if self._typing is None or self._typing[0] != msg.send_key:
            if self._typing is not None:
                self._write("\n")  # another reply's words were left mid-line
            self._write(self.reply_prefix + msg.text)
        elif msg.text.startswith(self._typing[1]):
            self._write(msg.text[len(self._typing[1]):])
        else:
            return True
        self._typing = (msg.send_key, msg.text)
        return True

    def _save(self, file: Attachment, owner: str = "") -> Path:
        """Write ``file`` into :attr:`exports`, in the folder of the user it
        is for (``/forget all`` erases it with the rest), made 0700 if new,
        as a 0600 file, atomically; an earlier export of the same name is replaced."""
        if self.exports is None:
            raise OSError(0, "no folder for files")
        folder = exports_folder(self.exports, owner) if owner else self.exports
        self.exports.mkdir(mode=0o700, parents=True, exist_ok=True)
        folder.mkdir(mode=0o700, exist_ok=True)
        path = folder / Path(file.filename).name  # never outside the folder
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")  # mode 0600
        try:
            with os.fdopen(fd, "wb") as f, file.open() as content:
                shutil.copyfileobj(content, f)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path
