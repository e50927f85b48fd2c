"""Feishu chat records (merge_forward) against the fake Feishu server: the
messages read by the record's id, with their authors (names from the
contact directory, or labels) and dates; a record in a record; a read that
fails; the group rules of a file."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from structlog.testing import capture_logs

from channels.feishu import FeishuApiError, FeishuChannel
from channels.feishu.records import Names
from gateway.bus import Forwarded, MessageBus, OutboundMessage
from gateway.http import HttpServer
from tests.channels.test_feishu import channel, config, fake, hook, http, next_inbound  # noqa: F401 (fixtures)
from tests.fakes.feishu_server import FakeFeishu, RecordMessage
from tests.logjson import debug_json_log, lines

DANA, BOB, ALICE = "ou_dana000000000000000000000000", "ou_bob0000000000000000000000000", "ou_alice00000000000000000000000"


def ms(day: int, hour: int, minute: int = 0) -> int:
    return int(datetime(2026, 2, day, hour, minute, tzinfo=UTC).timestamp() * 1000)


def at(day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 2, day, hour, minute, tzinfo=UTC)


def standup(fake: FakeFeishu) -> list[RecordMessage]:
    """Three messages by two people, the last a photo."""
    return [
        RecordMessage(DANA, "发布改到周四 14:00", sent_ms=ms(27, 9, 30)),
        RecordMessage(BOB, "OK, I'll tell QA", sent_ms=ms(27, 9, 31)),
        RecordMessage(DANA, msg_type="image", content={"image_key": fake.add_image(b"\xff\xd8\xff" + bytes(10))},
                      sent_ms=ms(27, 9, 32)),
    ]


async def test_a_chat_record_is_one_message_with_each_author_and_date(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel
) -> None:
    fake.contacts.update({DANA: "Dana", BOB: "Bob"})
    event = fake.chat_record_event(standup(fake), chat_id="oc_alice", open_id=ALICE)
    assert (await fake.push_event(hook(http, channel), event)).status_code == 200
    msg = await next_inbound(channel.bus)
    assert (msg.text, msg.sender_id, msg.metadata["message_type"]) == ("", ALICE, "merge_forward")
    assert msg.forwarded == (
        Forwarded("Dana", "发布改到周四 14:00", at(27, 9, 30)),
        Forwarded("Bob", "OK, I'll tell QA", at(27, 9, 31)),
        Forwarded("Dana", "[photo]", at(27, 9, 32)),
    )
    assert msg.history_text == ("[forwarded: 3 messages, sent 2026-02-27]\nDana: 发布改到周四 14:00\n"
                                "Bob: OK, I'll tell QA\nDana: [photo]")
    assert fake.message_reads == 1 and fake.resource_downloads == [] and fake.sent == []


async def test_the_bot_is_you_the_forwarder_the_user_and_every_kind_has_words(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel
) -> None:
    fake.contacts[DANA] = "Dana"
    record = [
        RecordMessage(ALICE, "can you check the deploy?"),
        RecordMessage(fake.app_id, "The deploy is green.", app=True),
        RecordMessage("cli_other_app", "build #42 passed", app=True),
        RecordMessage(DANA, msg_type="post", content={"title": "Plan", "content": [[{"tag": "text", "text": "ship"}]]}),
        RecordMessage(DANA, msg_type="file", content={"file_key": "file_v3_x", "file_name": "plan.pdf"}),
        RecordMessage(DANA, msg_type="audio", content={"file_key": "file_v3_y", "duration": 2000}),
        RecordMessage(DANA, msg_type="media", content={"file_key": "file_v3_z", "image_key": "img_z"}),
        RecordMessage(DANA, msg_type="sticker", content={"file_key": "file_v3_s"}),
        RecordMessage(DANA, msg_type="location", content={"name": "Office", "latitude": "31.2", "longitude": "121.5"}),
        RecordMessage(DANA, msg_type="interactive", content={"title": "Alert", "elements": [[{"tag": "text", "text": "disk 91%"}]]}),
    ]
    await fake.push_event(hook(http, channel), fake.chat_record_event(record, chat_id="oc_alice", open_id=ALICE))
    msg = await next_inbound(channel.bus)
    assert [(f.author, f.text) for f in msg.forwarded] == [
        ("the user", "can you check the deploy?"),
        ("you", "The deploy is green."),
        ("a bot", "build #42 passed"),
        ("Dana", "Plan\nship"),
        ("Dana", "[file plan.pdf]"),
        ("Dana", "[voice]"),
        ("Dana", "[video]"),
        ("Dana", "[sticker]"),
        ("Dana", "[place: Office, 31.20000, 121.50000]"),
        ("Dana", "Alert\ndisk 91%"),
    ]
    assert fake.contact_requests == [DANA]  # neither the user nor an app is looked up


async def test_names_are_looked_up_once_per_process(fake: FakeFeishu, http: HttpServer, channel: FeishuChannel) -> None:
    fake.contacts.update({DANA: "Dana"})  # Bob is out of the app's contact range
    for _ in range(2):
        await fake.push_event(hook(http, channel), fake.chat_record_event(standup(fake), chat_id="oc_alice",
                                                                         open_id=ALICE))
        msg = await next_inbound(channel.bus)
        assert [f.author for f in msg.forwarded] == ["Dana", "person 1", "Dana"]
    assert sorted(fake.contact_requests) == sorted([DANA, BOB])  # the second record asked nothing


async def test_without_the_contact_permission_authors_are_labelled_and_it_is_said_once(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel
) -> None:
    fake.contact_permission = False
    asked: list[int] = []
    with capture_logs() as logs:
        for _ in range(2):
            await fake.push_event(hook(http, channel), fake.chat_record_event(standup(fake), chat_id="oc_alice",
                                                                             open_id=ALICE))
            msg = await next_inbound(channel.bus)
            assert [f.author for f in msg.forwarded] == ["person 1", "person 2", "person 1"]
            asked.append(len(fake.contact_requests))
    assert asked[0] >= 1 and asked[1] == asked[0]  # refused once: not asked again for the next record
    loud = [e for e in logs if e["log_level"] in ("warning", "error", "critical")]
    assert [e["event"] for e in loud] == [
        "the Feishu app may not read contact names (contact:user.base:readonly); "
        "chat record authors are labelled instead"
    ]
    assert fake.sent == []


async def test_a_record_inside_the_record_is_read_in_place(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel
) -> None:
    inner = [RecordMessage(BOB, "budget is 40k", sent_ms=ms(20, 8)), RecordMessage(DANA, "agreed", sent_ms=ms(20, 9))]
    record = [
        RecordMessage(DANA, "see what finance said:", sent_ms=ms(27, 10)),
        RecordMessage(DANA, msg_type="merge_forward", messages=inner, sent_ms=ms(27, 10, 1)),
        RecordMessage(BOB, "so we go ahead", sent_ms=ms(27, 10, 2)),
    ]
    await fake.push_event(hook(http, channel), fake.chat_record_event(record, chat_id="oc_alice", open_id=ALICE))
    msg = await next_inbound(channel.bus)
    assert [(f.author, f.text, f.sent_at) for f in msg.forwarded] == [
        ("person 1", "see what finance said:", at(27, 10)),
        ("person 2", "budget is 40k", at(20, 8)),
        ("person 1", "agreed", at(20, 9)),
        ("person 2", "so we go ahead", at(27, 10, 2)),
    ]
    assert msg.history_text.startswith("[forwarded: 4 messages, sent 2026-02-20 to 2026-02-27]\n")


async def test_a_record_that_cannot_be_read_gets_a_note_and_nothing_else_is_lost(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel
) -> None:
    fake.fail_next(230027, "Lack of necessary permissions", on="read")
    await fake.push_event(hook(http, channel), fake.chat_record_event(standup(fake), chat_id="oc_alice", open_id=ALICE))
    await fake.push_event(hook(http, channel), fake.message_event("summarise it please", chat_id="oc_alice",
                                                                  open_id=ALICE))
    note = await asyncio.wait_for(channel.bus.outbound_queue("feishu").get(), 5)
    assert note.chat_id == "oc_alice" and note.text.startswith("Sorry, I could not read that chat record.")
    after = await next_inbound(channel.bus)  # the next message, in its turn
    assert (after.text, after.forwarded) == ("summarise it please", ())
    assert channel.bus.inbound.empty()
    # The same record sent again is read.
    await fake.push_event(hook(http, channel), fake.chat_record_event(standup(fake), chat_id="oc_alice", open_id=ALICE))
    assert len((await next_inbound(channel.bus)).forwarded) == 3


async def test_in_a_group_a_record_is_read_only_as_a_reply_to_the_bot(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel
) -> None:
    group = dict(chat_id="oc_team", chat_type="group", open_id=ALICE)
    await fake.push_event(hook(http, channel), fake.chat_record_event(standup(fake), **group))
    await fake.push_event(hook(http, channel), fake.message_event("unrelated chatter", **group))
    assert (await next_inbound(channel.bus)).text == "unrelated chatter"  # the record went nowhere, unread
    assert fake.message_reads == 0 and channel.bus.inbound.empty()

    await channel.send(OutboundMessage("feishu", "oc_team", "send me the thread"))
    [mine] = fake.sent
    await fake.push_event(hook(http, channel), fake.chat_record_event(standup(fake), parent_id=mine["message_id"],
                                                                     **group))
    msg = await next_inbound(channel.bus)
    assert msg.is_group and msg.reply_to_bot and len(msg.forwarded) == 3
    assert msg.quoted is not None and msg.quoted.author == "you"


async def test_a_sender_not_allowed_gets_no_record_read(fake: FakeFeishu, http: HttpServer) -> None:
    ch = FeishuChannel(config(fake, allow_from=["ou_someone_else"]), MessageBus(), http, backoff=0.01)
    await ch.start()
    try:
        await fake.push_event(hook(http, ch), fake.chat_record_event(standup(fake), chat_id="oc_x", open_id=ALICE))
        await fake.push_event(hook(http, ch), fake.message_event("hi", chat_id="oc_x", open_id=ALICE))
        await ch.stop_receiving()  # both taken and handed on (dropped: not allowed)
        assert fake.message_reads == 0 and ch.bus.inbound.empty() and fake.sent == []
    finally:
        await ch.stop()


async def test_names_ask_again_an_hour_after_a_refusal_and_never_wait_long() -> None:
    now = [0.0]
    answers: dict[str, str | FeishuApiError] = {DANA: FeishuApiError(99991672, "Access denied", status=400)}
    asked: list[str] = []

    async def lookup(open_id: str) -> str:
        asked.append(open_id)
        answer = answers[open_id]
        if isinstance(answer, FeishuApiError):
            raise answer
        if answer == "slow":
            await asyncio.sleep(60)
        return answer

    names = Names(lookup, timeout=0.2, off_for=3600, clock=lambda: now[0])
    assert await names.of([DANA]) == {}
    now[0] = 3599
    assert await names.of([DANA]) == {} and asked == [DANA]  # still refused: not asked
    now[0] = 3600
    answers.update({DANA: "Dana", BOB: "slow"})  # the permission was granted meanwhile
    assert await names.of([DANA, BOB]) == {DANA: "Dana"}  # Bob's lookup outlasted the wait: labelled
    assert await names.of([DANA]) == {DANA: "Dana"} and asked == [DANA, DANA, BOB]  # Dana's name kept


async def test_a_record_not_read_is_logged_by_feishus_code_not_its_text(
    fake: FakeFeishu, http: HttpServer, channel: FeishuChannel
) -> None:
    """Feishu's message in a refusal went into the log ("chat record not
    read", error=...): the platform's words, which may echo a chat. The
    log keeps its code and HTTP status."""
    fake.fail_next(230027, "Lack of permissions to read QUOKKA", on="read")
    with debug_json_log() as stream:
        await fake.push_event(hook(http, channel), fake.chat_record_event(standup(fake), chat_id="oc_alice",
                                                                          open_id=ALICE))
        await asyncio.wait_for(channel.bus.outbound_queue("feishu").get(), 5)
    assert "QUOKKA" not in stream.getvalue()
    [line] = lines(stream, "chat record not read")
    assert line["error"] == "Feishu API error 230027 (HTTP 400)"
