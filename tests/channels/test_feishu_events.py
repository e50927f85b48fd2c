"""Pure pieces of the Feishu channel: dedup, text splitting, post flattening."""

from __future__ import annotations

import pytest

from channels.feishu import RecentIds, ReplyLog, split_text
from channels.feishu.events import EventParseError, flatten_post, parse_message_event


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def test_recent_ids_bounded_by_size_and_age() -> None:
    clock = Clock()
    ids = RecentIds(maxsize=3, ttl=60, clock=clock)
    assert not ids.seen_before("a") and ids.seen_before("a")
    for k in "bcd":
        ids.seen_before(k)
    assert "a" not in ids and len(ids) == 3  # oldest evicted
    clock.now = 61
    assert not ids.seen_before("b")  # expired, so new again
    assert len(ids) == 1


def test_recent_ids_forget_lets_the_id_in_again() -> None:
    ids = RecentIds(maxsize=3, ttl=60, clock=Clock())
    ids.seen_before("a")
    ids.forget("a")
    ids.forget("never seen")  # nothing to do
    assert "a" not in ids and not ids.seen_before("a") and ids.seen_before("a")


def test_reply_log_bounded_by_size_and_recall_window_and_kept_per_chat() -> None:
    clock = Clock()
    log = ReplyLog(maxsize=2, ttl=86400, clock=clock)
    log.record("om_q1", "oc_a", "om_r1a")
    log.record("om_q1", "oc_a", "om_r1b")  # a split reply: both parts
    log.record("", "oc_a", "om_cron")  # answers nothing: not kept
    assert len(log) == 1
    assert log.take("om_q1", "oc_b") == []  # not in that chat
    assert log.take("om_q1", "oc_a") == ["om_r1a", "om_r1b"]
    assert log.take("om_q1", "oc_a") == []  # withdrawn once
    for q in ("om_q2", "om_q3", "om_q4"):
        log.record(q, "oc_a", "om_r" + q[-1])
    assert len(log) == 2 and log.take("om_q2", "oc_a") == []  # the oldest went
    clock.now = 86400
    assert log.take("om_q3", "oc_a") == []  # past Feishu's recall window: of no use

    log.mark_recalled("om_q5", "oc_a")
    assert log.was_recalled("om_q5", "oc_a") and not log.was_recalled("om_q5", "oc_b")
    assert not log.was_recalled("", "oc_a")
    clock.now += 86400
    assert not log.was_recalled("om_q5", "oc_a")


def test_split_text_prefers_paragraphs_then_lines_then_hard_cut() -> None:
    assert split_text("  short  ") == ["short"]
    assert split_text("") == []
    text = "a" * 3000 + "\n\n" + "b" * 3000
    assert split_text(text) == ["a" * 3000, "b" * 3000]
    lines = "\n".join(["line " * 100] * 20)
    assert all(len(c) <= 4000 for c in split_text(lines))
    cjk = "长" * 9000  # no boundary at all
    chunks = split_text(cjk)
    assert [len(c) for c in chunks] == [4000, 4000, 1000] and "".join(chunks) == cjk


def test_flatten_post_any_locale_and_code_indentation() -> None:
    post = {"ja_jp": {"title": "", "content": [[{"tag": "code_block", "language": "PYTHON", "text": "if x:\n    y()"}]]}}
    assert flatten_post(post) == "if x:\n    y()"
    assert flatten_post('{"title":"t","content":[[{"tag":"emotion","emoji_type":"SMILE"}],[{"tag":"hr"}]]}') == "t\n:SMILE:"


def test_malformed_events_raise_parse_error() -> None:
    with pytest.raises(EventParseError):
        parse_message_event({"schema": "2.0", "header": {}}, bot_open_id=None)
    bad_content = {"event": {"sender": {"sender_id": {"open_id": "ou_1"}}, "message": {
        "chat_id": "oc_1", "message_id": "om_1", "message_type": "text", "content": "{not json"}}}
    with pytest.raises(EventParseError):
        parse_message_event(bad_content, bot_open_id=None)


def test_unknown_bot_identity_counts_any_mention() -> None:
    event = {"event": {"sender": {"sender_id": {"open_id": "ou_1"}, "sender_type": "user"}, "message": {
        "chat_id": "oc_1", "message_id": "om_1", "chat_type": "group", "message_type": "text",
        "content": '{"text":"@_user_1 hi"}', "mentions": [{"key": "@_user_1", "id": {"open_id": "ou_bot"}, "name": "B"}]}}}
    parsed = parse_message_event(event, bot_open_id=None)
    assert parsed is not None and parsed.message.mentioned and parsed.message.text == "@B hi"
    precise = parse_message_event(event, bot_open_id="ou_someone_else")
    assert precise is not None and not precise.message.mentioned
