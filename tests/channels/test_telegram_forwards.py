"""Forwarded messages and shared things on Telegram, against the fake Bot
API server: a forward keeps its author (``forward_origin``) and date, a
burst of forwards with the comment typed before it is one message, and a
place, a contact, a poll, a dice roll or a sticker is read as words."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from channels.base import UNREADABLE_REPLY
from gateway.bus import Forwarded, MessageBus
from tests.channels.test_telegram import bus, fake, jpeg, make_channel, next_inbound, within  # noqa: F401 (fixtures)
from tests.fakes.telegram_server import (
    FakeTelegram,
    contact,
    dice,
    location,
    origin_channel,
    origin_chat,
    origin_hidden_user,
    origin_user,
    poll,
    sticker,
    venue,
)

FEB_27 = int(datetime(2026, 2, 27, 9, 30, tzinfo=UTC).timestamp())
SENT = datetime(2026, 2, 27, 9, 30, tzinfo=UTC)


async def test_a_forward_keeps_its_author_and_date_for_each_kind_of_origin(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    """One forward alone is a message of its own: its words are the
    forward's, not the user's, named by where it came from."""
    await make_channel(album_quiet=0.05)
    origins = [
        (origin_user(5, "Dana", "Kim", date=FEB_27), "Dana Kim"),
        (origin_hidden_user("Mallory M", date=FEB_27), "Mallory M"),
        (origin_chat(-300, "Ops", date=FEB_27), "Ops"),
        (origin_chat(-300, "Ops", signature="admin", date=FEB_27), "admin (Ops)"),
        (origin_channel(-1007, "Acme News", 31, date=FEB_27), "Acme News"),
        (origin_channel(-1007, "Acme News", 32, signature="Eve", date=FEB_27), "Eve (Acme News)"),
        (origin_user(fake.bot_id, "myclaw", date=FEB_27), "you"),  # the bot's own reply, passed back
    ]
    for n, (origin, _) in enumerate(origins):
        fake.push_text(7, 7, f"launch moved to Friday {n}", forward_origin=origin)
        msg = await next_inbound(bus)  # one at a time: each a lone forward
        assert msg.text == "" and msg.quoted is None and not msg.mentioned
        assert msg.forwarded == (Forwarded(origins[n][1], f"launch moved to Friday {n}", sent_at=SENT),)
    assert msg.history_text == "[forwarded from you, sent 2026-02-27]\nlaunch moved to Friday 6"


async def test_a_burst_of_forwards_with_its_comment_is_one_message(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    """A client sends the comment first, then one message per forward: one
    inbound message holds them all, in order, and the comment as its words;
    it answers the last part, and every part's update is confirmed."""
    ch = await make_channel(album_quiet=0.05)
    fake.push_text(7, 7, "can you sort this out?")
    fake.push_text(7, 7, "standup moved to 10", forward_origin=origin_user(5, "Dana", date=FEB_27))
    fake.push_text(7, 7, "and the demo to Friday", forward_origin=origin_user(5, "Dana", date=FEB_27))
    last = fake.push_text(7, 7, "ok by me", forward_origin=origin_hidden_user("Lee", date=FEB_27))
    fake.push_text(7, 7, "thanks!")  # after the forwards: a message of its own, after them
    msg = await next_inbound(bus)
    assert msg.text == "can you sort this out?"
    assert msg.forwarded == (Forwarded("Dana", "standup moved to 10", SENT),
                             Forwarded("Dana", "and the demo to Friday", SENT), Forwarded("Lee", "ok by me", SENT))
    assert msg.message_id == str(last["message_id"])
    assert msg.history_text == ("[forwarded: 3 messages, sent 2026-02-27]\nDana: standup moved to 10\n"
                                "Dana: and the demo to Friday\nLee: ok by me\n\ncan you sort this out?")
    assert (await next_inbound(bus)).text == "thanks!"
    assert bus.inbound.empty()
    await within(ch.stop())
    assert fake.pending_updates == 0


async def test_a_text_after_forwards_ends_the_burst_without_waiting(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    """The sender writing something else means the burst is complete: it
    goes on at once (not after the quiet period), and a forward after that
    text starts a new one. Another sender's forwards are theirs."""
    await make_channel(album_quiet=600)  # a burst waiting out its quiet period would fail the test
    fake.push_text(7, 7, "one", forward_origin=origin_user(5, "Dana"))
    fake.push_text(7, 7, "two", forward_origin=origin_user(5, "Dana"))
    fake.push_text(7, 7, "what do you make of it")
    first = await within(next_inbound(bus))
    assert ([f.text for f in first.forwarded], first.text) == (["one", "two"], "")
    assert (await within(next_inbound(bus))).text == "what do you make of it"


async def test_a_lone_text_is_not_held_for_forwards_that_do_not_follow(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    """Only a text directly followed (in the same batch) by its sender's
    forward is taken as their comment; a command never is."""
    await make_channel(album_quiet=600)
    fake.push_text(7, 7, "hello")
    fake.push_text(8, 8, "from someone else", forward_origin=origin_user(5, "Dana"))  # another chat's forward
    fake.push_text(8, 8, "see?")
    assert (await within(next_inbound(bus))).text == "hello"
    other = await within(next_inbound(bus))
    assert (other.chat_id, other.text, [f.text for f in other.forwarded]) == ("8", "", ["from someone else"])
    assert (await within(next_inbound(bus))).text == "see?"
    fake.push_text(7, 7, "/new")
    fake.push_text(7, 7, "fresh start", forward_origin=origin_user(5, "Dana"))
    fake.push_text(7, 7, "so?")
    assert (await within(next_inbound(bus))).text == "/new"
    burst = await within(next_inbound(bus))
    assert (burst.text, [f.text for f in burst.forwarded]) == ("", ["fresh start"])
    assert (await within(next_inbound(bus))).text == "so?"


async def test_a_forwarded_album_and_photos_are_read_with_the_burst(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    """A forwarded album is part of the burst (each picture read, as an
    album's, its caption the forward's words); a forwarded photo without
    agent.vision, a sticker or a voice message is named by a mark."""
    await make_channel(max_image_bytes=5000, album_quiet=0.05)
    dana = origin_user(5, "Dana", date=FEB_27)
    pictures = [jpeg(400, 1), jpeg(500, 2)]
    fake.push_text(7, 7, "which one?")
    fake.push_photo(7, 7, [pictures[0]], media_group_id="g9", forward_origin=dana)
    fake.push_photo(7, 7, [pictures[1]], caption="kitchen options", media_group_id="g9", forward_origin=dana)
    fake.push_media(7, 7, "sticker", content=sticker("😀"), forward_origin=dana)
    fake.push_media(7, 7, "voice", forward_origin=dana)
    msg = await next_inbound(bus)
    assert [i.data for i in msg.images] == pictures and msg.placeholder == "[2 photos]"
    assert msg.text == "which one?"
    assert [f.text for f in msg.forwarded] == ["[photo]", "kitchen options", "[sticker 😀]", "[voice]"]
    assert msg.audio is None and fake.sent == []


async def test_a_forwarded_photo_not_read_does_not_lose_the_forwarded_words(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    await make_channel(sender=True, max_image_bytes=1000, album_quiet=0.05)
    fake.push_text(7, 7, "minutes from today", forward_origin=origin_user(5, "Dana"))
    fake.push_photo(7, 7, [jpeg(4000)], forward_origin=origin_user(5, "Dana"))  # over the limit
    [note] = await fake.wait_sent(1)
    assert "too large" in note.text
    msg = await next_inbound(bus)
    assert (msg.placeholder, [f.text for f in msg.forwarded]) == ("[photo not read]", ["minutes from today", "[photo]"])


async def test_a_forward_without_vision_or_a_file_is_named_by_a_mark(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    await make_channel(sender=True, album_quiet=0.05)
    fake.push_photo(7, 7, [jpeg(400)], caption="the new logo", forward_origin=origin_channel(-1007, "Acme", 3))
    msg = await next_inbound(bus)
    assert (msg.forwarded[0].author, msg.forwarded[0].text, msg.images) == ("Acme", "[photo] the new logo", ())
    fake.push_document(7, 7, b"notes", mime_type="text/plain", file_name="notes.txt",
                       forward_origin=origin_user(5, "Dana"))
    msg = await next_inbound(bus)
    assert msg.forwarded[0].text == "[file notes.txt]" and fake.sent == []  # no "I can only read text"


async def test_a_forwarded_file_read_as_text_goes_on_alone_with_its_author(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    await make_channel(max_document_bytes=10_000, album_quiet=0.05)
    fake.push_text(7, 7, "summarise", forward_origin=origin_user(5, "Dana"))
    fake.push_document(7, 7, b"- ship Friday\n", mime_type="text/markdown", file_name="plan.md",
                       caption="the plan", forward_origin=origin_user(5, "Dana"))
    before = await next_inbound(bus)
    assert [f.text for f in before.forwarded] == ["summarise"]
    msg = await next_inbound(bus)
    assert (msg.documents[0].text, msg.placeholder, msg.text) == ("- ship Friday", "[file plan.md]", "")
    assert msg.forwarded == (Forwarded("Dana", "the plan", msg.forwarded[0].sent_at),)


async def test_in_a_group_a_burst_is_addressed_by_its_comment_only(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    """Group rules hold: a burst is addressed to the bot by the comment
    mentioning it; a forward's own @mention is someone else's words."""
    await make_channel(album_quiet=0.05)
    group = -100200
    fake.push_text(group, 7, "what do you think?", chat_type="supergroup", mention=True)
    fake.push_text(group, 7, "we ship on Monday", chat_type="supergroup", forward_origin=origin_user(5, "Dana"))
    msg = await next_inbound(bus)
    assert (msg.is_group, msg.mentioned, msg.text) == (True, True, "what do you think?")
    assert [f.text for f in msg.forwarded] == ["we ship on Monday"]
    fake.push_text(group, 7, "@myclaw_bot please approve", chat_type="supergroup",
                   forward_origin=origin_user(5, "Dana"))
    alone = await next_inbound(bus)
    assert (alone.mentioned, alone.forwarded[0].text) == (False, "@myclaw_bot please approve")


async def test_a_channel_post_mirrored_into_its_group_is_not_a_forward(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    await make_channel(album_quiet=0.05)
    fake.push_text(-100300, 777000, "new release out", chat_type="supergroup", mention=True,
                   forward_origin=origin_channel(-1007, "Acme News", 40), automatic_forward=True)
    msg = await next_inbound(bus)
    assert (msg.text, msg.forwarded) == ("new release out", ())


async def test_shared_things_are_read_as_words(fake: FakeTelegram, bus: MessageBus, make_channel: Any) -> None:
    """A place, a contact, a poll, a dice roll, a sticker: the model gets
    what was shared, not a note that only text is read; the history keeps
    it. A sticker without an emoji, or a video without caption, still gets
    the note."""
    await make_channel(sender=True)
    shared = [
        ("location", location(52.52, 13.405), "[location 52.52000, 13.40500]"),
        ("location", location(52.52, 13.405, live_period=900), "[live location 52.52000, 13.40500]"),
        ("venue", venue("Café Kranzler", "Kurfürstendamm 18"), "[place: Café Kranzler, Kurfürstendamm 18]"),
        ("contact", contact("+4915112345678", "Ana", "Ruiz"), "[contact: Ana Ruiz, +4915112345678]"),
        ("poll", poll("Lunch where?", ["pizza", "sushi", "salad"]), "[poll: Lunch where? — options: pizza / sushi / salad]"),
        ("poll", poll("2 + 2?", ["4", "5"], quiz=True), "[quiz: 2 + 2? — options: 4 / 5]"),
        ("dice", dice("🎲", 4), "[dice 🎲 4]"),
        ("sticker", sticker("😂"), "[sticker 😂]"),
    ]
    for kind, content, _ in shared:
        fake.push_media(7, 7, kind, content=content)
    got = [await next_inbound(bus) for _ in shared]
    assert [(m.text, m.history_text) for m in got] == [(words, words) for _, _, words in shared]
    fake.push_media(7, 7, "sticker", content=sticker(None))
    fake.push_media(7, 7, "video")
    fake.push_media(7, 7, "video", caption="look at the end")
    assert (await next_inbound(bus)).text == "look at the end"
    assert [m.text for m in await fake.wait_sent(2)] == [UNREADABLE_REPLY] * 2


async def test_a_forwarded_voice_message_is_fetched_as_its_authors_recording(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    """With agent.transcription, a forwarded recording goes to the loop on
    the forward (``Forwarded.audio``), marked "[voice]", its caption kept;
    the user's own words stay theirs."""
    await make_channel(max_audio_bytes=1000, album_quiet=0.05)
    dana = origin_user(5, "Dana", date=FEB_27)
    recording = b"OggS" + bytes(100) + b"SAY:bring the slides"
    fake.push_text(7, 7, "what does she want?")
    fake.push_text(7, 7, "about tomorrow", forward_origin=dana)
    fake.push_voice(7, 7, recording, caption="listen", forward_origin=dana)
    msg = await next_inbound(bus)
    assert (msg.text, msg.audio, msg.placeholder) == ("what does she want?", None, "")
    [text, voice] = msg.forwarded
    assert text == Forwarded("Dana", "about tomorrow", SENT)
    assert (voice.author, voice.text, voice.sent_at) == ("Dana", "[voice] listen", SENT)
    assert voice.audio is not None and (voice.audio.data, voice.audio.mime) == (recording, "audio/ogg")
    assert fake.sent == []


async def test_a_forwarded_voice_message_not_downloaded_is_marked_and_told(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    """Too large: "[voice not read]" in its place and a note that answers
    what else was forwarded, not "your text"; alone, only the note."""
    await make_channel(sender=True, max_audio_bytes=2048, album_quiet=0.05)
    dana = origin_user(5, "Dana", date=FEB_27)
    fake.push_text(7, 7, "about tomorrow", forward_origin=dana)
    fake.push_voice(7, 7, b"OggS" + bytes(5000), forward_origin=dana)
    [note] = await fake.wait_sent(1)
    assert note.text == ("That voice message is too large for me to read (the limit is 2 KB). Please send a "
                         "shorter one or type it. I am answering the forwarded message without it.")
    msg = await next_inbound(bus)
    assert [(f.text, f.audio) for f in msg.forwarded] == [("about tomorrow", None), ("[voice not read]", None)]
    assert fake.file_downloads == []

    fake.push_voice(7, 7, b"OggS" + bytes(5000), forward_origin=dana)
    [_, alone] = await fake.wait_sent(2)
    assert alone.text.endswith("Please send a shorter one or type it.")
    fake.push_text(7, 7, "never mind")
    assert (await next_inbound(bus)).text == "never mind"  # the lone recording went nowhere


async def test_a_forwarded_photo_not_read_is_not_called_your_text(
    fake: FakeTelegram, bus: MessageBus, make_channel: Any
) -> None:
    """The note names what it answers: the forwarded words, the user's
    comment with them; a lone forwarded photo has nothing else to name."""
    await make_channel(sender=True, max_image_bytes=1000, album_quiet=0.05)
    dana = origin_user(5, "Dana")
    fake.push_text(7, 7, "minutes from today", forward_origin=dana)
    fake.push_photo(7, 7, [jpeg(4000)], forward_origin=dana)
    [note] = await fake.wait_sent(1)
    assert note.text.endswith("I am answering the forwarded message without it.")
    await next_inbound(bus)

    fake.push_text(7, 7, "thoughts?")
    fake.push_text(7, 7, "minutes from today", forward_origin=dana)
    fake.push_text(7, 7, "and the budget", forward_origin=dana)
    fake.push_photo(7, 7, [jpeg(4000)], forward_origin=dana)
    [_, both] = await fake.wait_sent(2)
    assert both.text.endswith("I am answering your text and the forwarded messages without it.")
    await next_inbound(bus)

    fake.push_photo(7, 7, [jpeg(4000)], forward_origin=dana)
    [*_, alone] = await fake.wait_sent(3)
    assert alone.text.endswith("Please send a smaller one or a screenshot.")
    assert (await next_inbound(bus)).placeholder == "[photo not read]"  # its words still go on, as before
