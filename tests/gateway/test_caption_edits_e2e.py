"""An edited caption changes the caption's words only, end to end: the
App, the fake Telegram server (``edited_message``), the OpenAI-compatible
fake transcribing recordings and answering, SQLite files. What the stored
row holds besides the caption (a transcript, a file's or a picture's mark,
forwards) stays, in Tier 0, in what the model reads next and in what
memory learns."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

from memory import ManualClock
from tests.fakes.files import scanned_pdf
from tests.fakes.openai_server import FakeOpenAI, Reply, images, said
from tests.fakes.telegram_server import FakeTelegram, origin_user

from .test_e2e_feishu import _app, _until
from .test_telegram_forwards_e2e import FEB_27
from .test_vision_e2e import PHOTO, THUMB, _rows, _telegram

TRANSCRIBING = {"model": "test-model", "transcription": {"enabled": True, "model": "whisper-1"}}


def _recording(words: str) -> bytes:
    return b"OggS\x00\x02" + bytes(500) + b"SAY:" + words.encode()


def seeing(body: dict[str, Any]) -> Reply:
    shown = images(body)
    return Reply(content=(f"I see {len(shown)} picture(s). " if shown else "") + f"re: {said(body)}")


def _history(request: dict[str, Any]) -> list[str]:
    """The user's earlier turns as the model was sent them."""
    return [m["content"] for m in request["messages"][1:-1] if m["role"] == "user"]


def _buffered(tmp_path: Path) -> list[str]:
    """The user lines memory still has to learn from."""
    with sqlite3.connect(tmp_path / "data" / "memory.db") as db:
        db.execute("ATTACH DATABASE ? AS buffer", (str(tmp_path / "data" / "memory.buffer.db"),))
        return [c for (c,) in db.execute(
            "SELECT content FROM buffer.extraction_buffer WHERE role = 'user' AND id NOT IN (SELECT id FROM buffer_gone) "
            "ORDER BY id")]


async def _edited(app: Any, count: int) -> None:
    await _until(lambda: app.loop is not None and app.loop.stats.revised == count)
    assert await app.loop.drain(5)


async def test_an_edited_voice_caption_keeps_the_transcript(tmp_path: Path, clock: ManualClock) -> None:
    """A caption fixed, a caption added to a voice message sent without
    one: the transcript stays after the new words, in the history, in the
    model's next prompt and in what memory learns; after a restart too."""
    async with FakeOpenAI(api_key="sk-captions-e2e-0123456789", responder=seeing) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, agent=TRANSCRIBING)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            captioned = tg.push_voice(42, 42, _recording("call the plumber on Monday\nand the bank"), caption="to do fro me")
            bare = tg.push_voice(42, 42, _recording("my sister turns 30 on May 4"))
            await tg.wait_sent(2, timeout=10)
            assert app.loop is not None and await app.loop.drain(5)
        finally:
            await asyncio.wait_for(app.close(), 15)

        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, agent=TRANSCRIBING)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            tg.push_edit(42, captioned["message_id"], "to do for me")
            tg.push_edit(42, bare["message_id"], "remember this")
            await _edited(app, 2)
            tg.push_edit(42, captioned["message_id"], "to do for me\nthis week")  # from the first edit's words
            await _edited(app, 3)
            tg.push_text(42, 42, "what is on my list?")
            await tg.wait_sent(3, timeout=10)
            assert await app.loop.drain(5)
        finally:
            await asyncio.wait_for(app.close(), 15)
    first = "[voice] to do for me\nthis week\ncall the plumber on Monday\nand the bank"
    second = "[voice] remember this\nmy sister turns 30 on May 4"
    assert _history(llm.last_chat()) == [first, second]
    assert [c for r, c in _rows(tmp_path) if r == "user"] == [first, second, "what is on my list?"]
    buffered = _buffered(tmp_path)
    assert first in buffered and second in buffered
    assert not any("fro me" in c for c in buffered)


async def test_an_edited_audio_files_caption_keeps_its_transcript(tmp_path: Path, clock: ManualClock) -> None:
    async with FakeOpenAI(api_key="sk-captions-e2e-0123456789", responder=seeing) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, agent=TRANSCRIBING)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            sent = tg.push_audio(42, 42, _recording("we ship the beta on Friday"), title="Weekly sync",
                                 performer="Nina", file_name="sync.mp3", caption="what did we decdie?")
            await tg.wait_sent(1, timeout=10)
            tg.push_edit(42, sent["message_id"], "what did we decide?")
            tg.push_text(42, 42, "and who owns it?")
            await tg.wait_sent(2, timeout=10)
            assert app.loop is not None and await app.loop.drain(5)
        finally:
            await asyncio.wait_for(app.close(), 15)
    heard = "[audio Nina – Weekly sync] what did we decide?\n[transcript]\nwe ship the beta on Friday"
    assert _history(llm.last_chat()) == [heard]
    assert _rows(tmp_path)[0] == ("user", heard)
    assert heard in _buffered(tmp_path)


async def test_an_edited_caption_of_a_voice_not_heard_keeps_its_mark(tmp_path: Path, clock: ManualClock) -> None:
    async with FakeOpenAI(api_key="sk-captions-e2e-0123456789", responder=seeing) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, agent=TRANSCRIBING)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            llm.queue_transcription_error(500)
            sent = tg.push_voice(42, 42, _recording("lost"), caption="abuot my sister")
            await tg.wait_sent(2, timeout=10)  # the note, then the answer to the caption
            tg.push_edit(42, sent["message_id"], "about my sister")
            tg.push_text(42, 42, "well?")
            await tg.wait_sent(3, timeout=10)
            assert app.loop is not None and await app.loop.drain(5)
        finally:
            await asyncio.wait_for(app.close(), 15)
    assert _history(llm.last_chat()) == ["[voice not read] about my sister"]
    assert _rows(tmp_path)[0] == ("user", "[voice not read] about my sister")


async def test_a_voice_caption_whose_end_is_not_known_leaves_the_row_as_it_was(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Where the caption ends was lost (here: its record erased), and the
    transcript runs over lines: the stored row stays whole rather than
    lose part of the transcript to a guess."""
    async with FakeOpenAI(api_key="sk-captions-e2e-0123456789", responder=seeing) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, agent=TRANSCRIBING)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            sent = tg.push_voice(42, 42, _recording("first line\nsecond line"), caption="notse")
            await tg.wait_sent(1, timeout=10)
            assert app.loop is not None and await app.loop.drain(5)
        finally:
            await asyncio.wait_for(app.close(), 15)
        with sqlite3.connect(tmp_path / "data" / "gateway.db") as db:
            assert db.execute("DELETE FROM burst_comments").rowcount == 1
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, agent=TRANSCRIBING)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            tg.push_edit(42, sent["message_id"], "notes")
            await _edited(app, 1)
        finally:
            await asyncio.wait_for(app.close(), 15)
    assert _rows(tmp_path)[0] == ("user", "[voice] notse\nfirst line\nsecond line")


async def test_an_edited_comment_on_a_forwarded_voice_keeps_its_transcript(tmp_path: Path, clock: ManualClock) -> None:
    dana = origin_user(5, "Dana", date=FEB_27)
    async with FakeOpenAI(api_key="sk-captions-e2e-0123456789", responder=seeing) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, agent=TRANSCRIBING)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            comment = tg.push_text(42, 42, "what does she nede?")
            tg.push_voice(42, 42, _recording("bring the slides\non Friday"), caption="urgent", forward_origin=dana)
            await tg.wait_sent(1, timeout=10)
            assert app.loop is not None and await app.loop.drain(5)
            tg.push_edit(42, comment["message_id"], "what does she need?")
            tg.push_text(42, 42, "ok")
            await tg.wait_sent(2, timeout=10)
            assert await app.loop.drain(5)
        finally:
            await asyncio.wait_for(app.close(), 15)
    burst = "[forwarded from Dana, sent 2026-02-27]\n[voice] urgent\nbring the slides\non Friday\n\nwhat does she need?"
    assert _history(llm.last_chat()) == [burst]
    assert _rows(tmp_path)[0] == ("user", burst)


async def test_edited_captions_of_a_photo_and_a_scanned_pdf_keep_their_marks(tmp_path: Path, clock: ManualClock) -> None:
    """No description of a picture is stored with the user's words: what it
    showed is in the reply, which the edit leaves alone."""
    async with FakeOpenAI(api_key="sk-captions-e2e-0123456789", responder=seeing) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, agent={"model": "test-model", "vision": True})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            photo = tg.push_photo(42, 42, [THUMB, PHOTO], caption="whats the pasword?")
            scan = tg.push_document(42, 42, scanned_pdf(2, scans=True), mime_type="application/pdf",
                                    file_name="receipt.pdf", caption="totl?")
            await tg.wait_sent(2, timeout=10)
            tg.push_edit(42, photo["message_id"], "what's the password?")
            tg.push_edit(42, scan["message_id"], "total?")
            tg.push_text(42, 42, "thanks")
            await tg.wait_sent(3, timeout=10)
            assert app.loop is not None and await app.loop.drain(5)
        finally:
            await asyncio.wait_for(app.close(), 15)
    assert _history(llm.last_chat()) == ["[photo] what's the password?", "[file receipt.pdf] total?"]
    assert [c for r, c in _rows(tmp_path)][:4] == [
        "[photo] what's the password?", "I see 1 picture(s). re: [photo] whats the pasword?",
        "[file receipt.pdf] total?", "I see 2 picture(s). re: [file receipt.pdf] totl?"]
