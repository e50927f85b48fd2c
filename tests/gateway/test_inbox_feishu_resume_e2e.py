"""Feishu messages the durable inbox held when the gateway was killed are
answered after the restart as the live ones would have been: a group
member's turn still says who spoke, and a picture or file whose bytes were
never kept is read again from Feishu (its message id and key) instead of
the user being asked to send it again."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import sqlite3
from pathlib import Path
from typing import Any

from channels.feishu import FeishuChannel
from gateway.app import App
from memory import ManualClock
from tests.fakes.feishu_server import FakeFeishu, RecordMessage
from tests.fakes.openai_server import FakeOpenAI, text_of

from .killed import killed, quiet, running
from .test_e2e_feishu import ENCRYPT_KEY, _app, _feishu_section, feishu  # noqa: F401 (a fixture)
from .test_e2e_feishu_outbox import Gateway, until
from .test_resume_e2e import KEY, _echo, _history
from .test_vision_e2e import PHOTO

BOB = "ou_bob00000000000000000000000000002"
CAROL = "ou_carol000000000000000000000000003"


def _users(body: dict[str, Any]) -> list[str]:
    return [text_of(m["content"]) for m in body["messages"] if m["role"] == "user"]


def _names(home: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(home / "data" / "gateway.db") as db:
        return list(db.execute("SELECT sender_id, sender_name FROM session_messages WHERE role = 'user' ORDER BY id"))


async def test_a_feishu_group_message_resumed_from_the_inbox_keeps_its_speakers_name(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu  # noqa: F811
) -> None:
    """Bob's question holds the model; Carol's, queued behind it, is in the
    inbox when the gateway is killed. After the restart Carol's turn reads
    `<said by="Carol Li">`, as it would have live, not an anonymous label."""
    feishu.contacts[BOB] = "Bob Chen"
    feishu.contacts[CAROL] = "Carol Li"
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm:
        g = Gateway(tmp_path, clock, feishu, llm)
        try:
            app = await g.start()
            llm.queue_hold()
            events = [feishu.message_event(f"@_user_1 {w}", chat_id="oc_team", chat_type="group", open_id=who,
                                           mentions=[feishu.mention()])
                      for who, w in ((BOB, "who owns the deck?"), (CAROL, "and when is it due?"))]
            await g.push(events[0])
            await until(lambda: len(llm.requests) == 1, timeout=15)
            await g.push(events[1])
            assert app.inbox is not None
            await until(lambda: app.bus.inbound.qsize() == 0 and feishu.contact_requests.count(CAROL) == 1, timeout=15)
            await until(lambda: app.loop is not None and app.loop.stats.received == 2, timeout=15)
            await app.inbox.flush()
            await killed(app, tmp_path)
            clock.advance(60)
            app = await g.start()
            await until(lambda: len(feishu.sent) == 2, timeout=15)
            await g.settled()
            assert app.redelivered is not None and len(app.redelivered.answered) == 1
        finally:
            await g.stop()
    carol = llm.last_chat()
    assert _users(carol)[-1].endswith('<said by="Carol Li">\nand when is it due?\n</said>')
    assert 'The latest message is from "Carol Li".' in text_of(carol["messages"][0]["content"])
    assert CAROL not in llm.prompts_text()
    assert _names(tmp_path) == [(BOB, "Bob Chen"), (CAROL, "Carol Li")]


async def test_a_group_message_killed_while_its_senders_name_was_looked_up_gets_it_after_the_restart(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu  # noqa: F811
) -> None:
    feishu.contacts[CAROL] = "Carol Li"
    feishu.contact_gate = asyncio.Event()  # the directory is slow: the kill comes first
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm:
        g = Gateway(tmp_path, clock, feishu, llm)
        try:
            app = await g.start()
            await g.push(feishu.message_event("@_user_1 and when is it due?", chat_id="oc_team", chat_type="group",
                                              open_id=CAROL, mentions=[feishu.mention()]))
            await until(lambda: CAROL in feishu.contact_requests, timeout=15)
            assert app.inbox is not None and await app.inbox.count() == 1
            await killed(app, tmp_path)
            feishu.sent.clear()
            feishu.contact_gate.set()
            clock.advance(60)
            app = await g.start()
            await until(lambda: len(feishu.sent) == 1, timeout=15)
            await g.settled()
        finally:
            await g.stop()
    [carol] = llm.requests
    assert _users(carol)[-1].endswith('<said by="Carol Li">\nand when is it due?\n</said>')
    assert _names(tmp_path) == [(CAROL, "Carol Li")]


# -- pictures and files read again -----------------------------------------------

ALICE = "ou_alice0000000000000000000000000"
_NOTE = "Sorry, I restarted before I could answer, and the photo you sent is no longer with me. Please send it again."


def _feishu_app(home: Path, clock: ManualClock, llm: FakeOpenAI, feishu: FakeFeishu,  # noqa: F811
                *, drain: float = 0.0) -> contextlib.AbstractAsyncContextManager[App]:
    """A Feishu gateway (webhook, pictures read) on ``home``; stopped as a
    crash stops it, or with ``drain`` seconds to answer what it holds."""
    return running(_app(home, clock, llm, {"feishu": _feishu_section(feishu, "webhook")},
                        agent={"model": "test-model", "vision": True}), drain=drain)


async def _restarted(home: Path, clock: ManualClock, llm: FakeOpenAI, feishu: FakeFeishu, *,  # noqa: F811
                     sent: int = 1, inbox_empty: bool = False, once_more: bool = False) -> None:
    """Start again until ``sent`` messages went out in all and the gateway is
    quiet; ``inbox_empty``: nothing left in the inbox; ``once_more``: a third
    start, which must answer nothing again (the caller's counts say so)."""
    async with _feishu_app(home, clock, llm, feishu) as again:
        await until(lambda: len(feishu.sent) == sent, timeout=15)
        await quiet(again)
        if inbox_empty:
            assert again.inbox is not None and await again.inbox.count() == 0
    if once_more:
        async with _feishu_app(home, clock, llm, feishu) as third:
            await quiet(third)


async def _push(app: App, feishu: FakeFeishu, event: dict[str, Any]) -> None:  # noqa: F811
    assert app.http is not None
    assert (await feishu.push_event(app.http.url + "/feishu/events", event, encrypt_key=ENCRYPT_KEY)).status_code == 200


def _images(body: dict[str, Any]) -> list[str]:
    content = body["messages"][-1]["content"]
    return [p["image_url"]["url"] for p in content if p.get("type") == "image_url"] if isinstance(content, list) else []


async def test_a_feishu_picture_whose_download_a_kill_cut_is_downloaded_again_after_the_restart(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu  # noqa: F811
) -> None:
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm:
        key = feishu.add_image(PHOTO)
        release = feishu.hold_resource(key)
        event = feishu.message_event(message_type="image", content={"image_key": key}, chat_id="oc_alice",
                                     open_id=ALICE)
        async with _feishu_app(tmp_path, clock, llm, feishu) as app:
            await _push(app, feishu, event)  # kept with its key, the download held
            assert app.inbox is not None and await app.inbox.count() == 1
            await killed(app, tmp_path)
        feishu.sent.clear()  # what the test's stop (not a kill) sent
        release.set()
        clock.advance(60)
        await _restarted(tmp_path, clock, llm, feishu, inbox_empty=True, once_more=True)
    mid = event["event"]["message"]["message_id"]
    assert feishu.resource_downloads[-1] == (mid, key) and len(llm.requests) == 1
    assert _images(llm.chat_requests()[0]) == ["data:image/jpeg;base64," + base64.b64encode(PHOTO).decode()]
    assert feishu.texts() == ["re: [photo]"]
    assert [r for r, _, _ in _history(tmp_path)] == ["user", "assistant"]


async def test_a_feishu_picture_taken_whole_but_queued_when_killed_is_downloaded_again(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu  # noqa: F811
) -> None:
    """Its bytes were read before the kill but are never kept: its key is."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm:
        key = feishu.add_image(PHOTO)
        async with _feishu_app(tmp_path, clock, llm, feishu) as app:
            llm.queue_hold()
            await _push(app, feishu, feishu.message_event("is the launch on Thursday?", chat_id="oc_alice",
                                                          open_id=ALICE))
            await until(lambda: len(llm.requests) == 1, timeout=15)
            event = feishu.message_event(message_type="post", chat_id="oc_alice", open_id=ALICE, content={
                "title": "", "content": [[{"tag": "img", "image_key": key}], [{"tag": "text", "text": "what does it say?"}]]})
            await _push(app, feishu, event)
            await until(lambda: len(feishu.resource_downloads) == 1 and app.bus.inbound.qsize() == 0, timeout=15)
            assert app.loop is not None
            await until(lambda: app.loop is not None and app.loop.stats.received == 2, timeout=15)
            assert app.inbox is not None
            await app.inbox.flush()
            await killed(app, tmp_path)
        clock.advance(60)
        await _restarted(tmp_path, clock, llm, feishu, sent=2)
    assert len(feishu.resource_downloads) == 2 and _NOTE not in feishu.texts()
    assert _images(llm.last_chat()) == ["data:image/jpeg;base64," + base64.b64encode(PHOTO).decode()]
    assert feishu.texts()[-1].startswith("re: ") and "what does it say?" in feishu.texts()[-1]


async def test_a_feishu_file_whose_download_a_kill_cut_is_read_again_after_the_restart(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu  # noqa: F811
) -> None:
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm:
        key = feishu.add_file("launch: Thursday 10:00, owner Dana".encode(), "text/plain")
        release = feishu.hold_resource(key)
        event = feishu.message_event(message_type="file", content={"file_key": key, "file_name": "plan.txt"},
                                     chat_id="oc_alice", open_id=ALICE)
        async with _feishu_app(tmp_path, clock, llm, feishu) as app:
            await _push(app, feishu, event)
            assert app.inbox is not None and await app.inbox.count() == 1
            await killed(app, tmp_path)
        feishu.sent.clear()  # what the test's stop (not a kill) sent
        release.set()
        clock.advance(60)
        await _restarted(tmp_path, clock, llm, feishu)
    assert "owner Dana" in json.dumps(llm.chat_requests()[0]["messages"][-1]) and len(llm.requests) == 1
    assert "no longer with me" not in feishu.texts()[0]
    [(role, _, words)] = _history(tmp_path)[:1]
    assert role == "user" and "plan.txt" in words


async def test_a_feishu_picture_feishu_will_not_give_again_gets_the_note_once(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu  # noqa: F811
) -> None:
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm:
        key = feishu.add_image(PHOTO)
        release = feishu.hold_resource(key)
        event = feishu.message_event(message_type="image", content={"image_key": key}, chat_id="oc_alice",
                                     open_id=ALICE)
        async with _feishu_app(tmp_path, clock, llm, feishu) as app:
            await _push(app, feishu, event)
            await killed(app, tmp_path)
        feishu.sent.clear()  # what the test's stop (not a kill) sent
        release.set()
        feishu.fail_next(234003, "File not in msg.", on="resource")
        clock.advance(60)
        await _restarted(tmp_path, clock, llm, feishu, inbox_empty=True, once_more=True)
    assert feishu.texts() == [_NOTE] and llm.requests == []


# -- a graceful stop does as well as a kill ------------------------------------------

async def _stopped_with_the_download_held(home: Path, clock: ManualClock, llm: FakeOpenAI, feishu: FakeFeishu,  # noqa: F811
                                          event: dict[str, Any]) -> None:
    """Push ``event`` (its download held by the fake) and stop gracefully
    while it is held: the stop cuts the download short."""
    async with _feishu_app(home, clock, llm, feishu, drain=2.0) as app:
        await _push(app, feishu, event)
        assert app.inbox is not None and await app.inbox.count() == 1
        await until(lambda: len(feishu.resource_requests) == 1, timeout=15)


def _inbox_rows(home: Path) -> list[str]:
    with sqlite3.connect(home / "data" / "gateway.db") as db:
        return [str(r[0]) for r in db.execute("SELECT message_id FROM inbox")]


async def test_a_feishu_picture_whose_download_a_graceful_stop_cut_is_left_for_the_next_start(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu  # noqa: F811
) -> None:
    """A stop while a picture is being downloaded leaves its row (as a kill
    does) and tells the user nothing; the next start downloads it again by
    its kept keys and answers it once, with the picture."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm:
        key = feishu.add_image(PHOTO)
        release = feishu.hold_resource(key)
        event = feishu.message_event("what does it say?", message_type="post", chat_id="oc_alice", open_id=ALICE,
                                     content={"title": "", "content": [[{"tag": "img", "image_key": key}],
                                                                       [{"tag": "text", "text": "what does it say?"}]]})
        await _stopped_with_the_download_held(tmp_path, clock, llm, feishu, event)
        mid = event["event"]["message"]["message_id"]
        assert feishu.sent == [] and llm.requests == []  # no "could not download" note, no turn without it
        assert _inbox_rows(tmp_path) == [mid]
        release.set()
        clock.advance(60)
        await _restarted(tmp_path, clock, llm, feishu, inbox_empty=True, once_more=True)
    assert feishu.resource_downloads[-1] == (mid, key) and len(llm.requests) == 1
    assert _images(llm.chat_requests()[0]) == ["data:image/jpeg;base64," + base64.b64encode(PHOTO).decode()]
    assert len(feishu.texts()) == 1 and "what does it say?" in feishu.texts()[0] and _NOTE not in feishu.texts()


async def test_a_feishu_picture_recalled_while_a_graceful_stop_cut_its_download_is_not_answered_later(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu  # noqa: F811
) -> None:
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm:
        key = feishu.add_image(PHOTO)
        release = feishu.hold_resource(key)
        event = feishu.message_event(message_type="image", content={"image_key": key}, chat_id="oc_alice",
                                     open_id=ALICE)
        mid = event["event"]["message"]["message_id"]
        async with _feishu_app(tmp_path, clock, llm, feishu, drain=2.0) as app:
            await _push(app, feishu, event)
            await until(lambda: len(feishu.resource_requests) == 1, timeout=15)
            await _push(app, feishu, feishu.recall_event(mid, chat_id="oc_alice"))  # withdrawn mid-download
        assert _inbox_rows(tmp_path) == [] and feishu.sent == []
        release.set()
        clock.advance(60)
        async with _feishu_app(tmp_path, clock, llm, feishu) as again:
            await quiet(again)
    assert feishu.sent == [] and llm.requests == []


async def test_a_feishu_picture_alone_that_could_not_be_downloaded_leaves_no_row_to_answer_again(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu  # noqa: F811
) -> None:
    """It got its note live and has no words to answer: the next start
    neither downloads it again nor sends the note twice."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm:
        key = feishu.add_image(PHOTO)
        feishu.fail_next(234003, "File not in msg.", on="resource")
        async with _feishu_app(tmp_path, clock, llm, feishu) as app:
            await _push(app, feishu, feishu.message_event(message_type="image", content={"image_key": key},
                                                          chat_id="oc_alice", open_id=ALICE))
            await until(lambda: len(feishu.sent) == 1, timeout=15)
            assert app.inbox is not None
            await app.inbox.flush()
            assert await app.inbox.count() == 0
        clock.advance(60)
        async with _feishu_app(tmp_path, clock, llm, feishu) as again:
            await quiet(again)
    assert len(feishu.sent) == 1 and len(feishu.resource_requests) == 1 and llm.requests == []


# -- a quote or chat record read again -----------------------------------------------

_UNREAD = "Sorry, I restarted before I could read your message. Please send it again."


async def test_a_feishu_reply_whose_quote_a_kill_cut_is_read_again_after_the_restart(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu  # noqa: F811
) -> None:
    """The message it replied to was being read when the gateway was
    killed: the next start reads it again by its kept id and answers the
    reply with it, instead of asking for the message again."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm:
        earlier = feishu.message_event("the launch moved to Thursday 14:00", chat_id="oc_alice", open_id=ALICE)
        parent = earlier["event"]["message"]["message_id"]
        release = feishu.hold_read(parent)
        event = feishu.message_event("what does that mean for us?", chat_id="oc_alice", open_id=ALICE,
                                     parent_id=parent)
        async with _feishu_app(tmp_path, clock, llm, feishu) as app:
            await _push(app, feishu, event)  # kept with its parent's id, the read held
            assert app.inbox is not None and await app.inbox.count() == 1
            await killed(app, tmp_path)
        feishu.sent.clear()  # what the test's stop (not a kill) did
        llm.requests.clear()
        release.set()
        clock.advance(60)
        await _restarted(tmp_path, clock, llm, feishu, inbox_empty=True)
    assert feishu.texts() != [_UNREAD] and len(llm.requests) == 1
    assert "Thursday 14:00" in json.dumps(llm.chat_requests()[0]["messages"][-1])
    assert "what does that mean for us?" in feishu.texts()[0]


async def test_a_feishu_reply_whose_quote_cannot_be_read_again_gets_the_note(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu  # noqa: F811
) -> None:
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm:
        earlier = feishu.message_event("the launch moved to Thursday 14:00", chat_id="oc_alice", open_id=ALICE)
        parent = earlier["event"]["message"]["message_id"]
        release = feishu.hold_read(parent)
        event = feishu.message_event("what does that mean for us?", chat_id="oc_alice", open_id=ALICE,
                                     parent_id=parent)
        async with _feishu_app(tmp_path, clock, llm, feishu) as app:
            await _push(app, feishu, event)
            await killed(app, tmp_path)
        feishu.sent.clear()
        llm.requests.clear()
        release.set()
        await until(lambda: feishu.message_reads == 1, timeout=15)  # the held read ends first
        feishu.fail_next(230001, "invalid message_id", on="read")
        clock.advance(60)
        await _restarted(tmp_path, clock, llm, feishu, inbox_empty=True)
    assert feishu.texts() == [_UNREAD] and llm.requests == []


async def test_a_feishu_chat_record_whose_read_a_kill_cut_is_read_again_after_the_restart(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu  # noqa: F811
) -> None:
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm:
        event = feishu.chat_record_event([RecordMessage(BOB, "The launch moves to Thursday 14:00"),
                                          RecordMessage(CAROL, "QA needs the build by Wednesday")],
                                         chat_id="oc_alice", open_id=ALICE)
        release = feishu.hold_read(event["event"]["message"]["message_id"])
        async with _feishu_app(tmp_path, clock, llm, feishu) as app:
            await _push(app, feishu, event)  # kept with its id, its messages' read held
            assert app.inbox is not None and await app.inbox.count() == 1
            await killed(app, tmp_path)
        feishu.sent.clear()
        llm.requests.clear()
        release.set()
        clock.advance(60)
        await _restarted(tmp_path, clock, llm, feishu, inbox_empty=True)
    assert feishu.texts() != [_UNREAD] and len(llm.requests) == 1
    asked = json.dumps(llm.chat_requests()[0]["messages"][-1])
    assert "Thursday 14:00" in asked and "by Wednesday" in asked


async def test_a_feishu_reply_whose_quote_a_graceful_stop_cut_is_left_for_the_next_start(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu  # noqa: F811
) -> None:
    """Not answered blind at the stop (without what it replied to): left
    in the inbox, and answered with its quote after the restart."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm:
        earlier = feishu.message_event("the launch moved to Thursday 14:00", chat_id="oc_alice", open_id=ALICE)
        parent = earlier["event"]["message"]["message_id"]
        release = feishu.hold_read(parent)
        event = feishu.message_event("what does that mean for us?", chat_id="oc_alice", open_id=ALICE,
                                     parent_id=parent)
        async with _feishu_app(tmp_path, clock, llm, feishu) as app:  # stopped at once: within the quote's own timeout
            # The stop, not the quote's own 2 s, must end the read: on a
            # loaded box the stop came later, and the reply went out blind.
            channel = app.channels["feishu"]
            assert isinstance(channel, FeishuChannel)
            channel.quote_timeout = 60.0
            await _push(app, feishu, event)
            await until(lambda: ("GET", f"/open-apis/im/v1/messages/{parent}") in feishu.requests, timeout=15)
        assert feishu.sent == [] and llm.requests == []
        assert _inbox_rows(tmp_path) == [event["event"]["message"]["message_id"]]
        release.set()
        clock.advance(60)
        await _restarted(tmp_path, clock, llm, feishu)
    assert len(llm.requests) == 1 and "Thursday 14:00" in json.dumps(llm.chat_requests()[0]["messages"][-1])
    assert "what does that mean for us?" in feishu.texts()[0]


async def test_a_feishu_chat_record_whose_read_a_graceful_stop_cut_is_left_for_the_next_start(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu  # noqa: F811
) -> None:
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm:
        event = feishu.chat_record_event([RecordMessage(BOB, "The launch moves to Thursday 14:00")],
                                         chat_id="oc_alice", open_id=ALICE)
        mid = event["event"]["message"]["message_id"]
        release = feishu.hold_read(mid)
        async with _feishu_app(tmp_path, clock, llm, feishu, drain=2.0) as app:
            await _push(app, feishu, event)
            await until(lambda: ("GET", f"/open-apis/im/v1/messages/{mid}") in feishu.requests, timeout=15)
        assert feishu.sent == [] and llm.requests == [] and _inbox_rows(tmp_path) == [mid]  # no "could not read" note
        release.set()
        clock.advance(60)
        await _restarted(tmp_path, clock, llm, feishu)
    assert len(llm.requests) == 1 and "Thursday 14:00" in json.dumps(llm.chat_requests()[0]["messages"][-1])
