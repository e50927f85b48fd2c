"""Pure pieces of the Feishu channel: dedup, text splitting, post flattening, what each message kind parses to."""

from __future__ import annotations

import json

import pytest

from channels.feishu import RecentIds, ReplyLog, split_text
from channels.feishu.events import EventParseError, contact_id, flatten_post, parse_message_event


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


def test_recent_ids_say_since_when_every_id_is_remembered() -> None:
    # The webhook refuses events created before this: an id dropped for
    # room (a bot busier than maxsize ids in the TTL) would let its replay in.
    clock = Clock()
    clock.now = 1000.0
    ids = RecentIds(maxsize=3, ttl=60, clock=clock)
    assert ids.remembered_after() == 940.0  # the TTL alone
    for at, k in ((1001.0, "a"), (1002.0, "b"), (1003.0, "c")):
        clock.now = at
        ids.seen_before(k)
    assert ids.remembered_after() == 943.0
    clock.now = 1004.0
    ids.seen_before("d")  # "a" leaves for room, 56 s before its TTL
    assert "a" not in ids and ids.remembered_after() == 1001.0
    clock.now = 1070.0  # "a"'s TTL is over too: the TTL rules again
    assert ids.remembered_after() == 1010.0


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


def _event(msg_type: str, content: dict[str, object], *, chat_type: str = "p2p") -> dict[str, object]:
    """A message event of ``msg_type`` with ``content`` (Feishu's 接收消息内容结构)."""
    return {"event": {"sender": {"sender_id": {"open_id": "ou_1"}, "sender_type": "user"}, "message": {
        "chat_id": "oc_1", "message_id": "om_1", "chat_type": chat_type, "message_type": msg_type,
        "content": json.dumps(content, ensure_ascii=False), "create_time": "1700000000000"}}}


def _words(msg_type: str, content: dict[str, object]) -> str:
    parsed = parse_message_event(_event(msg_type, content), bot_open_id="ou_bot")
    assert parsed is not None and not parsed.record and not parsed.message.forwarded
    assert parsed.message.metadata["message_type"] == msg_type and "unreadable" not in parsed.message.metadata
    return parsed.message.text


def test_a_shared_location_task_vote_or_event_is_one_line_of_words() -> None:
    assert _words("location", {"name": "北京天安门", "longitude": "116.397755", "latitude": "39.903179"}) \
        == "[place: 北京天安门, 39.90318, 116.39776]"  # Telegram's marks: one vocabulary for the model
    assert _words("location", {"longitude": "1.5", "latitude": "2.5"}) == "[location 2.50000, 1.50000]"
    assert _words("location", {"name": "a]\nb", "longitude": "x"}) == "[place: a) b]"  # no way out of the mark
    todo = {"task_id": "acd096a5", "due_time": "1623124318000",
            "summary": {"title": "", "content": [[{"tag": "text", "text": "多吃水果，"}, {"tag": "text", "text": "多运动"}]]}}
    assert _words("todo", todo) == "[task: 多吃水果，多运动, due 2021-06-08 03:51 UTC]"
    assert _words("todo", {"task_id": "x", "summary": {"title": "Ship it", "content": []}}) == "[task: Ship it]"
    assert _words("vote", {"topic": "团建去哪", "options": ["爬山", "烧烤", "唱歌"]}) \
        == "[poll: 团建去哪 — options: 爬山 / 烧烤 / 唱歌]"
    event = {"summary": "周会", "start_time": "1608265395000", "end_time": "1608267015000"}
    for kind in ("share_calendar_event", "calendar", "general_calendar"):
        assert _words(kind, event) == "[event: 周会, 2020-12-18 04:23–04:50 UTC]"
    long = {"summary": "offsite", "start_time": "1608265395000", "end_time": "1608365395000"}
    assert _words("share_calendar_event", long) == "[event: offsite, 2020-12-18 04:23 – 2020-12-19 08:09 UTC]"
    assert _words("share_chat", {"chat_id": "oc_0dd200d32fda"}) == "[shared group chat]"
    assert _words("share_user", {"user_id": "ou_0dd200d32"}) == "[shared contact]"


def test_a_card_the_user_passes_on_is_a_forward_of_its_words() -> None:
    card = {"title": "部署通知", "elements": [
        [{"tag": "text", "text": "v2.3 已上线，"}, {"tag": "a", "href": "https://ci.example/42", "text": "详情"}],
        [{"tag": "button", "text": "回滚", "type": "danger"}],
        [{"tag": "note", "elements": [{"tag": "img", "image_key": "img_1"}, {"tag": "text", "text": "值班: Dana"}]}],
    ]}
    parsed = parse_message_event(_event("interactive", card), bot_open_id="ou_bot")
    assert parsed is not None and parsed.message.text == ""
    [forward] = parsed.message.forwarded
    assert (forward.author, forward.text) == ("", "部署通知\nv2.3 已上线，详情 (https://ci.example/42)\n值班: Dana")
    assert parsed.message.history_text == "[forwarded]\n部署通知\nv2.3 已上线，详情 (https://ci.example/42)\n值班: Dana"
    # A card without words (a lone button) is as empty as an empty text.
    assert parse_message_event(_event("interactive", {"elements": [[{"tag": "button", "text": ""}]]}),
                               bot_open_id="ou_bot") is None


def test_a_chat_record_is_flagged_for_reading_and_other_kinds_stay_ignored() -> None:
    parsed = parse_message_event(_event("merge_forward", {"content": "Merged and Forwarded Message"}),
                                 bot_open_id="ou_bot")
    assert parsed is not None and parsed.record and parsed.message.text == ""
    assert parsed.message.metadata["message_type"] == "merge_forward"
    for kind, content in (("system", {"template": "{from_user} invited {to_chatters} to this chat.",
                                      "from_user": ["b"], "to_chatters": ["c"]}),
                          ("hongbao", {"text": "[红包]"}), ("video_chat", {"topic": "t", "start_time": "1"})):
        assert parse_message_event(_event(kind, content), bot_open_id="ou_bot") is None, kind


def test_a_user_named_by_no_id_is_refused() -> None:
    # Owned by "feishu:", every such sender would share one memory.
    for ids in ({}, {"open_id": "", "union_id": None, "user_id": ""}):
        event = {"event": {"sender": {"sender_id": ids, "sender_type": "user"}, "message": {
            "chat_id": "oc_1", "message_id": "om_1", "chat_type": "p2p", "message_type": "text",
            "content": '{"text":"hi"}'}}}
        with pytest.raises(EventParseError, match="no open_id, union_id or user_id"):
            parse_message_event(event, bot_open_id=None)


def _sent_by(ids: dict[str, str], sender_tenant: str, app_tenant: str = "t_home") -> dict[str, object]:
    event = _event("text", {"text": "hi"})
    sender = event["event"]["sender"]  # type: ignore[index]
    sender.update(sender_id=ids, tenant_key=sender_tenant)
    event["header"] = {"event_id": "ev_1", "event_type": "im.message.receive_v1", "tenant_key": app_tenant}
    return event


def test_a_sender_named_by_user_id_alone_is_told_apart_by_tenant() -> None:
    """A user_id is unique within one tenant only (an external group holds
    several): a sender without open_id or union_id is named by user_id and
    the sender's tenant_key, so two tenants' "u0001" are two senders (and
    owners); without the tenant it cannot be told apart, and is refused.
    allowFrom matches a bare user_id for the app's own tenant only."""
    def parsed(ids: dict[str, str], tenant: str) -> tuple[str, tuple[str, ...]]:
        p = parse_message_event(_sent_by(ids, tenant), bot_open_id="ou_bot")
        assert p is not None
        return p.message.sender_id, p.sender_ids

    home = parsed({"user_id": "u0001"}, "t_home")
    away = parsed({"user_id": "u0001"}, "t_away")
    assert home == ("u0001@t_home", ("u0001@t_home", "u0001"))
    assert away == ("u0001@t_away", ("u0001@t_away",))  # not the home tenant's "u0001" for allowFrom
    assert parsed({"union_id": "on_9", "user_id": "u0001"}, "t_away") == ("on_9", ("on_9", "u0001@t_away"))
    assert parsed({"open_id": "ou_9", "user_id": "u0001"}, "t_home") == ("ou_9", ("ou_9", "u0001@t_home", "u0001"))
    assert parsed({"open_id": "ou_8", "user_id": "u0001"}, "t_away") == ("ou_8", ("ou_8", "u0001@t_away"))
    with pytest.raises(EventParseError, match="user_id alone and no tenant_key"):
        parse_message_event(_sent_by({"user_id": "u0001"}, ""), bot_open_id="ou_bot")


def test_the_contact_directory_is_asked_by_the_type_of_id_a_sender_has() -> None:
    assert contact_id("ou_1", "t1") == ("ou_1", "open_id")
    assert contact_id("on_1", "t1") == ("on_1", "union_id")
    assert contact_id("u0001@t1", "t1") == ("u0001", "user_id")
    # Another tenant's user_id names nobody in the app's directory; nor one when the app's tenant is unknown.
    assert contact_id("u0001@t2", "t1") is None and contact_id("u0001@t1", "") is None
