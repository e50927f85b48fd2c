"""gateway/resume.py's parts: what a Tier 0 row keeps of how its message
was to be answered, and the loop writing a reply's row before sending it."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from gateway.bus import Document, Forwarded, Image, InboundMessage, OutboundMessage, Quoted
from gateway.prompt import QUOTE_CHARS
from gateway.recent_files import KeptFile
from gateway.resume import FileMark, TurnContext
from gateway.sessions import StoredMessage
from memory import ManualClock
from tests.fakes.openai_server import FakeOpenAI

from .conftest import make_rig


def test_a_group_message_in_a_topic_is_answered_again_the_same_way() -> None:
    msg = InboundMessage(channel="telegram", chat_id="-100", sender_id="7", text="@bot when?", message_id="55",
                         is_group=True, mentioned=True, sender_name="Ann", metadata={"message_thread_id": 9, "x": 1},
                         locale="de")
    context = TurnContext.of(msg)
    assert context is not None
    again = TurnContext.loads(context.dumps())
    assert again == context
    row = StoredMessage(3, 1, "telegram", "-100", "user", "@bot when?", "tg:7", "7", "55",
                        "2026-03-01T10:00:00Z", False, True, context.dumps())
    out = again.message(row)
    # Only the routing keys come back: the rest of the metadata was the channel's own.
    assert (out.is_group, out.mentioned, out.reply_to_bot, out.sender_name, out.metadata, out.locale) == (
        True, True, False, "Ann", {"message_thread_id": 9}, "de")
    assert (out.chat_id, out.sender_id, out.message_id, out.text) == ("-100", "7", "55", "@bot when?")


def test_a_forward_is_rebuilt_from_its_row_as_the_forward_it_was() -> None:
    feb = datetime(2026, 2, 27, 9, 30, tzinfo=UTC)
    msg = InboundMessage(channel="telegram", chat_id="9", sender_id="9", text="what does this mean?", message_id="5",
                         forwarded=(Forwarded("Dana Kim", "launch moves to Friday", feb), Forwarded("", "ok", None)))
    context = TurnContext.of(msg)
    assert context is not None
    again = TurnContext.loads(context.dumps())
    assert again == context
    # The comment was edited since: the row's words are what counts.
    content = msg.history_text.replace("what does this mean?", "and for me?")
    row = StoredMessage(3, 1, "telegram", "9", "user", content, "tg:9", "9", "5", "2026-03-01T10:00:00Z", False, True,
                        context.dumps())
    out = again.message(row)
    assert out.text == "and for me?" and out.history_text == content
    assert out.forwarded == (Forwarded("Dana Kim", "launch moves to Friday", feb), Forwarded("", "ok", None))
    # Origins that cannot be read: not kept whole, so not answered blind.
    assert TurnContext.loads('{"f": [["Dana", "not a time"]]}') is None
    assert TurnContext.loads('{"f": [1]}') is None


def test_a_private_reply_keeps_what_it_replies_to_and_a_groups_does_not() -> None:
    quote = Quoted("you", "  re: is the launch on Thursday? " + "x" * 3000, partial=True)
    msg = InboundMessage(channel="telegram", chat_id="9", sender_id="9", text="why?", message_id="5", quoted=quote)
    context = TurnContext.of(msg)
    assert context is not None and context.quoted is not None
    assert len(context.quoted.text) == QUOTE_CHARS and context.quoted.text.startswith("re: is the launch")
    again = TurnContext.loads(context.dumps())
    assert again == context
    row = StoredMessage(3, 1, "telegram", "9", "user", "why?", "tg:9", "9", "5", "2026-03-01T10:00:00Z", False, True,
                        context.dumps())
    assert again.message(row).quoted == context.quoted
    # A group's quote may be another member's words: never kept, so no context.
    assert TurnContext.of(InboundMessage(channel="telegram", chat_id="-1", sender_id="9", text="@bot right?",
                                         is_group=True, mentioned=True, quoted=Quoted("Alice", "we ship"))) is None
    assert TurnContext.loads('{"q": ["you", "re"]}') is None


def test_a_message_with_pictures_and_files_keeps_their_marks_not_their_bytes() -> None:
    """The pictures' count and each file's kept id and cut, for the resumed
    turn to read the files again (or ask for them): never their bytes or text."""
    doc = Document("q3.pdf", "Ship on Friday", total_chars=9000, pages=2, more="Ship on Friday" + "x" * 8986)
    msg = InboundMessage(channel="telegram", chat_id="1", sender_id="1", text="what is this?", message_id="5",
                         images=(Image(data=b"\x89PNG", mime="image/png"),), documents=(doc,),
                         placeholder="[file q3.pdf]")
    kept = KeptFile(17, "q3.pdf", 9000, datetime(2026, 3, 1, tzinfo=UTC), "tg:1", 2)
    context = TurnContext.of(msg, [kept])
    assert context is not None
    assert (context.files, context.photos) == ((FileMark("q3.pdf", 17, 14, 9000),), 1)
    dumped = context.dumps()
    assert "Ship on Friday" not in dumped and "PNG" not in dumped
    assert TurnContext.loads(dumped) == context
    row = StoredMessage(3, 1, "telegram", "1", "user", "[file q3.pdf] what is this?", "tg:1", "1", "5",
                        "2026-03-01T10:00:00Z", False, True, dumped)
    out = context.message(row)
    assert (out.placeholder, out.text, out.history_text) == ("[file q3.pdf]", "what is this?", row.content)
    assert TurnContext.loads('{"d": [["a.pdf", "x", 1, 1]]}') is None  # not a file's id: unreadable, not guessed
    assert TurnContext.loads("") is None and TurnContext.loads("not json") is None and TurnContext.loads("[1]") is None


async def test_the_reply_row_is_written_before_the_reply_goes_out(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    """A stop just after the send must not leave the message looking
    unanswered, or the next start would answer it a second time."""
    fake_llm.queue_reply("Thursday, as planned.")
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        seen: list[list[tuple[str, str, str]]] = []
        publish = rig.bus.publish_outbound

        async def publish_and_look(out: OutboundMessage) -> None:
            # What the file holds the moment the reply is handed on to be sent.
            with sqlite3.connect(tmp_path / "gateway.db") as db:
                seen.append(db.execute("SELECT role, message_id, content FROM session_messages ORDER BY id").fetchall())
            await publish(out)

        rig.bus.publish_outbound = publish_and_look
        msg = await rig.send("is the launch on Thursday?")
        out = await rig.reply()
        assert out.text == "Thursday, as planned."
        assert seen == [[("user", msg.message_id, "is the launch on Thursday?"),
                         ("assistant", msg.message_id, "Thursday, as planned.")]]
        await rig.settle()
