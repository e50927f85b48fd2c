"""How forwarded messages read in the history and the prompt
(gateway/bus.py ``forwarded_text``)."""

from __future__ import annotations

from datetime import UTC, datetime

from gateway.bus import Forwarded, InboundMessage, forwarded_text, forwards_from_history, notes_in_chinese, words_in_chinese
from memory.tokens import estimate_tokens

DAY = datetime(2026, 2, 27, 23, 59, tzinfo=UTC)


def test_one_forward_names_its_author_and_day_and_a_hidden_author_is_not_invented() -> None:
    assert forwarded_text([Forwarded("Dana", "  see you at 9  ", DAY)]) == "[forwarded from Dana, sent 2026-02-27]\nsee you at 9"
    assert forwarded_text([Forwarded("", "see you at 9")]) == "[forwarded]\nsee you at 9"
    assert forwarded_text([]) == ""


def test_a_long_record_is_cut_at_a_message_and_says_how_many_are_left_out() -> None:
    items = [Forwarded(f"P{n}", f"message number {n} " + "words " * 40) for n in range(100)]
    text = forwarded_text(items, max_tokens=500)
    lines = text.split("\n")
    assert lines[0] == "[forwarded: 100 messages]" and lines[1].startswith("P0: message number 0 ")
    shown = len(lines) - 2
    assert 1 < shown < 100 and lines[-1] == f"[{100 - shown} more not shown]"
    assert estimate_tokens("\n".join(lines[:-1])) <= 500


def test_a_first_message_over_the_budget_shows_its_start() -> None:
    text = forwarded_text([Forwarded("Ann", "word " * 5000), Forwarded("Bo", "ok")], max_tokens=200)
    head, first, rest = text.split("\n")
    assert head == "[forwarded: 2 messages]" and first.startswith("Ann: word word") and first.endswith("…")
    assert rest == "[1 more not shown]"


def test_the_history_keeps_the_mark_the_forward_and_then_the_users_own_words() -> None:
    fwd = (Forwarded("Dana", "launch moves to Friday", DAY),)
    msg = InboundMessage("telegram", "1", "2", "what should I do?", forwarded=fwd, placeholder="[photo]")
    assert msg.history_text == "[photo] [forwarded from Dana, sent 2026-02-27]\nlaunch moves to Friday\n\nwhat should I do?"
    assert InboundMessage("telegram", "1", "2", " ", forwarded=fwd).history_text.endswith("launch moves to Friday")


def test_a_forward_with_paragraphs_cannot_pass_its_words_off_as_the_users() -> None:
    # Memory reads the first blank line as where the user's own words begin
    # (extraction rule 10): a forward's paragraphs must not make one.
    dana = "Results attached.\n\n  \nI am allergic to penicillin.\r\n\r\nThanks"
    msg = InboundMessage("telegram", "1", "2", "", forwarded=(Forwarded("Dana", dana, DAY),))
    assert msg.history_text == ("[forwarded from Dana, sent 2026-02-27]\n"
                                "Results attached.\nI am allergic to penicillin.\nThanks")
    both = (Forwarded("Dana", dana), Forwarded("Eve", "ok\n\nme too"))
    text = InboundMessage("telegram", "1", "2", "what now?", forwarded=both).history_text
    assert text.count("\n\n") == 1 and text.endswith("\n\nwhat now?")


def test_in_several_forwards_a_later_line_cannot_pass_for_another_author_s_line() -> None:
    """Only an author's first line starts at the margin: a later line of
    the same message ("Bob: agreed", quoted inside Dana's) is indented, so
    it cannot read as a message of Bob's (extraction rule 10 says so)."""
    items = [Forwarded("Dana", "Minutes:\nBob: I will pay for the trip\nEve: fine", DAY), Forwarded("Eve", "ok\nsee you")]
    text = forwarded_text(items)
    assert text == ("[forwarded: 2 messages, sent 2026-02-27]\n"
                    "Dana: Minutes:\n  Bob: I will pay for the trip\n  Eve: fine\n"
                    "Eve: ok\n  see you")
    authors = [line.split(":", 1)[0] for line in text.split("\n")[1:] if not line.startswith(" ")]
    assert authors == ["Dana", "Eve"]
    # Cut at the budget, the first message's lines stay indented too.
    cut = forwarded_text([Forwarded("Ann", "Bob: yes\n" * 400), Forwarded("Bo", "ok")], max_tokens=100)
    assert all(line.startswith("  Bob: yes") for line in cut.split("\n")[2:-1])


def _taken_apart(msg: InboundMessage) -> InboundMessage:
    ph, forwards, own = forwards_from_history(msg.history_text, [(f.author, f.sent_at) for f in msg.forwarded])
    return InboundMessage(channel="telegram", chat_id="1", sender_id="2", text=own, forwarded=forwards, placeholder=ph)


def test_a_stored_message_with_forwards_is_taken_apart_into_what_it_was() -> None:
    feb = datetime(2026, 2, 27, 9, 30, tzinfo=UTC)
    cases = [
        (Forwarded("Dana Kim", "launch moves to Friday\n\nQA too", feb),),
        (Forwarded("Dana Kim", "launch moves\nto Friday", feb), Forwarded("", "Bob: a line of Bob's?", None),
         Forwarded("Acme Ops", "freeze starts Thursday", feb)),
    ]
    for forwarded in cases:
        for own, placeholder in (("what does this mean?", ""), ("", ""), ("and this?", "[voice]")):
            msg = InboundMessage(channel="telegram", chat_id="1", sender_id="2", text=own, forwarded=forwarded,
                                 placeholder=placeholder)
            back = _taken_apart(msg)
            assert back.text == own and back.placeholder == placeholder
            assert [(f.author, f.sent_at) for f in back.forwarded] == [(f.author, f.sent_at) for f in forwarded]
            # Their words as the history keeps them (a blank line is a line break there).
            assert [f.text for f in back.forwarded] == [f.text.replace("\n\n", "\n") for f in forwarded]
            assert back.history_text == msg.history_text


def test_forwards_the_history_cut_are_taken_apart_with_what_it_shows() -> None:
    many = tuple(Forwarded(f"user{i}", "word " * 200) for i in range(40))
    msg = InboundMessage(channel="telegram", chat_id="1", sender_id="2", text="summarise", forwarded=many)
    assert "more not shown]" in msg.history_text
    back = _taken_apart(msg)
    assert len(back.forwarded) == 40 and back.text == "summarise"
    shown = [f for f in back.forwarded if f.text]
    assert 0 < len(shown) < 40 and all(f.text == ("word " * 200).strip() for f in shown)
    assert back.history_text.split("\n")[0] == msg.history_text.split("\n")[0]
    # No forwards kept beside it, or none in the words: the words alone.
    assert forwards_from_history("just words", [("Dana", None)]) == ("", (), "just words")
    assert forwards_from_history(msg.history_text, []) == ("", (), msg.history_text)


def test_the_language_of_a_messages_words() -> None:
    """Chinese characters make it Chinese (one English word among them
    changes nothing), kana make it Japanese, Latin letters English; what is
    not words in a language says nothing (None): our marks, emoji, code, a
    link, a bare "ok"."""
    assert words_in_chinese("帮我看看这个 bug") is True
    assert words_in_chinese("明日の会議は何時からですか？") is False
    assert words_in_chinese("what time is the meeting?") is False
    assert words_in_chinese("ok, thanks") is False
    for wordless in ("👍", "[photo]", "```\nprint(1)\n```", "`ls -la`", "https://example.com/a?b=c", "ok", "OK!",
                     "thx", "[file plan.pdf] 👍", "12:30"):
        assert words_in_chinese(wordless) is None, wordless
    assert words_in_chinese("```\nprint(1)\n``` 为什么报错？") is True
    assert words_in_chinese("`ls` does not list hidden files") is False


def test_a_message_without_words_goes_by_the_app_language() -> None:
    assert notes_in_chinese(InboundMessage("telegram", "1", "1", "ok", locale="zh-hans")) is True
    assert notes_in_chinese(InboundMessage("telegram", "1", "1", "https://example.com", locale="en")) is False
    assert notes_in_chinese(InboundMessage("telegram", "1", "1", "so what?", locale="zh-hans")) is False
