"""Photos reach the model (``agent.vision``), end to end: the App built from
a config, the fake Telegram and Feishu servers, the OpenAI-compatible fake
(which refuses malformed content parts as the real API does), SQLite files.
The picture goes to the model with its message only; the history and memory
keep "[photo]" and learn what it showed from the reply."""

from __future__ import annotations

import asyncio
import base64
import json
import sqlite3
from pathlib import Path
from typing import Any

from channels.base import UNREADABLE_REPLY
from gateway.app import App
from gateway.bus import Image, InboundMessage
from memory import ManualClock
from tests.fakes.feishu_server import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI, Reply, images, said, text_of
from tests.fakes.telegram_server import FakeTelegram

from .test_e2e_feishu import ENCRYPT_KEY, _app, _feishu_section, _until
from .test_remembering_e2e import Model, fact, running

JPEG_HEAD = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00"
PHOTO = JPEG_HEAD + bytes(range(256)) * 1200  # ~300 KB
THUMB = JPEG_HEAD + bytes(500)
VISION = {"model": "test-model", "vision": True}


def seeing(body: dict[str, Any]) -> Reply:
    """Answers as a vision model would: what it was shown, then the words."""
    shown = images(body)
    return Reply(content=(f"I see {len(shown)} picture(s). " if shown else "") + f"re: {said(body)}")


def _rows(tmp_path: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(tmp_path / "data" / "gateway.db") as db:
        return [(r, c) for r, c in db.execute("SELECT role, content FROM session_messages ORDER BY id")]


def _db_bytes(tmp_path: Path) -> int:
    return sum(p.stat().st_size for p in (tmp_path / "data").glob("gateway.db*"))


def _telegram(tg: FakeTelegram) -> dict[str, Any]:
    return {"enabled": True, "token": tg.token, "baseUrl": tg.base_url, "pollTimeout": 1}


async def test_a_telegram_photo_with_caption_reaches_the_model_and_only_its_mark_is_kept(
    tmp_path: Path, clock: ManualClock
) -> None:
    async with FakeOpenAI(api_key="sk-vision-e2e-0123456789", responder=seeing) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, agent=VISION)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            tg.push_photo(42, 42, [THUMB, PHOTO], caption="what is the wifi password on this note?")
            [reply] = await tg.wait_sent(1, timeout=10)
            assert reply.text == "I see 1 picture(s). re: [photo] what is the wifi password on this note?"
            [request] = llm.requests
            text_part, image_part = request["messages"][-1]["content"]
            assert text_part == {"type": "text", "text": "<time>12:00</time>\n[photo] what is the wifi password on this note?"}
            assert image_part["type"] == "image_url"
            assert image_part["image_url"]["url"] == "data:image/jpeg;base64," + base64.b64encode(PHOTO).decode()
            assert images(request) == [("image/jpeg", PHOTO)]  # the largest size, byte for byte
            # Only the latest message: the next request's history has the mark, never the picture.
            tg.push_text(42, 42, "thanks")
            await tg.wait_sent(2, timeout=10)
            history = llm.chat_requests()[1]["messages"]
            assert images(llm.chat_requests()[1]) == [] and all(isinstance(m["content"], str) for m in history)
            assert {"role": "user", "content": "[photo] what is the wifi password on this note?"} in history
            assert app.loop is not None and await app.loop.drain(5)
        finally:
            await asyncio.wait_for(app.close(), 15)
    rows = _rows(tmp_path)
    assert rows[0] == ("user", "[photo] what is the wifi password on this note?")
    assert [r for r, _ in rows] == ["user", "assistant", "user", "assistant"]
    encoded = base64.b64encode(PHOTO[:3000]).decode()[:200]
    assert not any(encoded in c for _, c in rows)
    assert _db_bytes(tmp_path) < len(PHOTO)  # a 300 KB photo does not grow gateway.db by its size


async def test_what_the_photo_showed_is_learnt_from_the_reply_and_recalled_later(tmp_path: Path) -> None:
    """The memory write path sees "[photo] caption" and the reply describing
    the picture; asked a day later, the fact comes back. A photo without a
    caption does not trigger retrieval."""
    model = Model()
    clock = ManualClock("2026-03-02T10:00:00Z")
    async with running(tmp_path, model, clock, agent=VISION, by_hand=True) as (app, fake):
        echo = app.channels["echo"]
        assert app.loop is not None

        async def send(text: str, *pictures: Image) -> None:
            echo.got.clear()  # type: ignore[attr-defined]
            await echo.publish(InboundMessage(
                channel="echo", chat_id="c-alice", sender_id="alice", text=text, timestamp=clock.now(),
                images=pictures, placeholder="[photo]" if pictures else ""))
            await asyncio.wait_for(echo.got.wait(), 5)  # type: ignore[attr-defined]
            assert app.loop is not None and await app.loop.drain(5)

        retrievals = app.loop.stats.retrievals
        await send("", Image(PHOTO, "image/jpeg"))
        assert app.loop.stats.retrievals == retrievals  # a photo alone: no recall noise
        assert images(fake.last_chat()) == [("image/jpeg", PHOTO)]
        fake.responder = lambda body: Reply(content="The note says: wifi password is hunter2-blue")
        await send("what is the wifi password?", Image(PHOTO, "image/jpeg"))
        fake.responder = model

        model.extractions.append(("hunter2-blue", {"facts": [fact("The wifi password is hunter2-blue",
                                                                   category="credential")], "summary": "wifi"}))
        clock.advance(200)
        assert app.extraction is not None
        reports = await app.extraction.tick()  # type: ignore[attr-defined]
        assert [r.ok for r in reports] == [True] and model.extractions == []
        [prompt] = model.extraction_prompts
        assert "[photo] what is the wifi password?" in prompt and "hunter2-blue" in prompt
        assert base64.b64encode(PHOTO[:300]).decode()[:100] not in prompt
        assert "[photo]" in prompt and "counts as stated by the user" in prompt

        clock.advance(86400)
        await send("/new")
        await send("what was the wifi password on the photo I sent yesterday?")
        recalled = text_of(fake.last_chat()["messages"][-1]["content"])
        assert "The wifi password is hunter2-blue" in recalled


async def test_without_vision_a_photo_gets_the_note_as_before(tmp_path: Path, clock: ManualClock) -> None:
    async with FakeOpenAI(api_key="sk-vision-e2e-0123456789", responder=seeing) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            tg.push_photo(42, 42, [PHOTO])
            tg.push_photo(42, 42, [PHOTO], caption="and this one?")
            await tg.wait_sent(2, timeout=10)
            assert tg.texts(42) == [UNREADABLE_REPLY, "re: and this one?"]
            assert images(llm.chat_requests()[0]) == [] and tg.file_downloads == []
        finally:
            await asyncio.wait_for(app.close(), 15)


async def test_a_photo_too_large_gets_a_clear_note_and_its_caption_is_answered(
    tmp_path: Path, clock: ManualClock
) -> None:
    async with FakeOpenAI(api_key="sk-vision-e2e-0123456789", responder=seeing) as llm, FakeTelegram() as tg:
        agent = {**VISION, "maxImageBytes": 100_000}
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, agent=agent)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            tg.push_document(42, 42, PHOTO, mime_type="image/jpeg", file_name="scan.jpg", caption="my receipt")
            note, answer = await tg.wait_sent(2, timeout=10)
            assert note.text.startswith("That picture is too large for me to read (the limit is 97 KB).")
            assert answer.text == "re: [photo not read] my receipt" and images(llm.chat_requests()[0]) == []
            assert app.loop is not None and await app.loop.drain(5)
        finally:
            await asyncio.wait_for(app.close(), 15)
    assert _rows(tmp_path)[0] == ("user", "[photo not read] my receipt") and tg.file_downloads == []


async def test_a_group_photo_without_mention_is_ignored_as_group_messages_are(
    tmp_path: Path, clock: ManualClock
) -> None:
    async with FakeOpenAI(api_key="sk-vision-e2e-0123456789", responder=seeing) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, agent=VISION)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            tg.push_photo(-100, 42, [PHOTO], chat_type="group")
            tg.push_photo(-100, 42, [PHOTO], caption="nice view", chat_type="group")
            tg.push_photo(-100, 42, [THUMB], caption="what is this?", chat_type="group", mention=True)
            [reply] = await tg.wait_sent(1, timeout=10)
            assert reply.text == "I see 1 picture(s). re: [photo] what is this?" and reply.reply_to is not None
            assert len(llm.requests) == 1 and images(llm.chat_requests()[0]) == [("image/jpeg", THUMB)]
            assert len(tg.file_downloads) == 1
            assert app.loop is not None and await app.loop.drain(5) and app.loop.stats.ignored == 1
        finally:
            await asyncio.wait_for(app.close(), 15)


async def test_a_feishu_image_message_reaches_the_model(tmp_path: Path, clock: ManualClock) -> None:
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40
    async with FakeOpenAI(api_key="sk-vision-e2e-0123456789", responder=seeing) as llm, FakeFeishu() as feishu:
        app = _app(tmp_path, clock, llm, {"feishu": _feishu_section(feishu, "webhook")}, agent=VISION)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            assert app.http is not None
            key = feishu.add_image(png, "image/png")
            event = feishu.message_event(message_type="image", content={"image_key": key}, chat_id="oc_alice",
                                         open_id="ou_alice")
            r = await feishu.push_event(app.http.url + "/feishu/events", event, encrypt_key=ENCRYPT_KEY)
            assert r.status_code == 200
            await _until(lambda: len(feishu.sent) == 1)
            assert feishu.texts() == ["I see 1 picture(s). re: [photo]"]
            assert images(llm.chat_requests()[0]) == [("image/png", png)] and llm.refused == []
            assert app.loop is not None and await app.loop.drain(5)
        finally:
            await asyncio.wait_for(app.close(), 30)
    assert _rows(tmp_path)[0] == ("user", "[photo]")
    assert json.dumps(_rows(tmp_path)).count("PNG") == 0


async def test_a_model_that_cannot_see_answers_the_caption_and_says_it_cannot_see(
    tmp_path: Path, clock: ManualClock
) -> None:
    """agent.vision on, but the model refuses pictures (OpenAI's 400): the
    user gets an answer to the caption from a model told it could not see
    the photo, not the apology, and the next photo is not refused again."""

    def answering(body: dict[str, Any]) -> Reply:
        said_ = said(body)
        cannot = "cannot read pictures; tell the user" in said_
        return Reply(content=("I can't see pictures with this model. " if cannot else "") + "re: "
                     + said_.split("\n\n")[0])

    async with FakeOpenAI(api_key="sk-vision-e2e-0123456789", responder=answering) as llm, FakeTelegram() as tg:
        llm.blind_models = {"test-model": "openai"}
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, agent=VISION)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            tg.push_photo(42, 42, [PHOTO], caption="what is the wifi password on this note?")
            tg.push_photo(42, 42, [PHOTO], caption="and on this one?")
            await tg.wait_sent(2, timeout=10)
            assert tg.texts(42) == [
                "I can't see pictures with this model. re: [photo] what is the wifi password on this note?",
                "I can't see pictures with this model. re: [photo] and on this one?",
            ]
            assert len(llm.refused) == 1 and len(llm.requests) == 2  # the second photo: one request, no refusal
            assert images(llm.chat_requests()[1]) == [] and all(isinstance(m["content"], str)
                                                         for m in llm.chat_requests()[1]["messages"])
            # Nobody saw the first photo: the next prompt's history, and memory, say so.
            assert {"role": "user", "content": "[photo not read] what is the wifi password on this note?"} \
                in llm.chat_requests()[1]["messages"]
            assert app.loop is not None and await app.loop.drain(5)
            engine = app.backend.engine  # type: ignore[attr-defined]
            waiting = [r["content"] for r in await engine.db.fetchall(
                "SELECT content FROM extraction_buffer WHERE role = 'user' ORDER BY id")]
            assert waiting == ["[photo not read] what is the wifi password on this note?",
                               "[photo not read] and on this one?"]
        finally:
            await asyncio.wait_for(app.close(), 15)
    assert [c for r, c in _rows(tmp_path) if r == "user"] == [
        "[photo not read] what is the wifi password on this note?", "[photo not read] and on this one?"]


async def test_an_edited_album_caption_keeps_the_albums_mark(tmp_path: Path, clock: ManualClock) -> None:
    """Telegram tells only that the edited message has a picture; the
    history keeps the album's "[3 photos]" (and a photo nobody saw its
    "[photo not read]") with the new words."""
    async with FakeOpenAI(api_key="sk-vision-e2e-0123456789", responder=seeing) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, agent={**VISION, "maxImageBytes": 100_000})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            captioned = {}
            for i in range(3):
                part = tg.push_photo(42, 42, [THUMB], caption="wich is best?" if i == 0 else None, media_group_id="a1")
                captioned = captioned or part
            [reply] = await tg.wait_sent(1, timeout=10)
            assert reply.text == "I see 3 picture(s). re: [3 photos] wich is best?"
            unread = tg.push_photo(42, 42, [PHOTO], caption="and thsi one?")  # over maxImageBytes
            await tg.wait_sent(3, timeout=10)  # the note, then the answer to the caption
            assert app.loop is not None and await app.loop.drain(5)
            tg.push_edit(42, captioned["message_id"], "which is best?")
            tg.push_edit(42, unread["message_id"], "and this one?")
            await _until(lambda: app.loop is not None and app.loop.stats.revised == 2)
            assert await app.loop.drain(5)
        finally:
            await asyncio.wait_for(app.close(), 15)
    assert [c for r, c in _rows(tmp_path) if r == "user"] == ["[3 photos] which is best?",
                                                              "[photo not read] and this one?"]
