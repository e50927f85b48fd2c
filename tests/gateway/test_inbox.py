"""What the durable inbox keeps of a message so that the next start can
make it whole again (gateway/inbox.py), on a real gateway.db."""

from __future__ import annotations

from pathlib import Path

from gateway.bus import AGAIN, InboundMessage
from gateway.inbox import Inbox, Waiting
from gateway.sessions import SessionStore
from memory import ManualClock


def _msg(text: str = "", **kw: object) -> InboundMessage:
    return InboundMessage(channel="feishu", chat_id="oc_team", sender_id="ou_carol", text=text, message_id="om_1",
                          **kw)  # type: ignore[arg-type]


async def _kept(tmp_path: Path, clock: ManualClock, msg: InboundMessage, waiting: dict[str, object] | None = None
                ) -> Waiting:
    async with await SessionStore.open(tmp_path / "gateway.db", clock) as store:
        inbox = Inbox(store.db, clock)
        await inbox.keep(msg, waiting)
        [w] = await inbox.waiting()
        return w


async def test_a_picture_kept_with_its_key_can_be_read_again(tmp_path: Path, clock: ManualClock) -> None:
    w = await _kept(tmp_path, clock, _msg(metadata={AGAIN: {"i": ["img_1"]}}), {"i": 1, "k": ["img_1"]})
    assert w.again and w.pictures == 1 and w.msg.metadata[AGAIN] == {"i": ["img_1"]} and not w.unnamed


async def test_a_picture_without_its_key_cannot(tmp_path: Path, clock: ManualClock) -> None:
    w = await _kept(tmp_path, clock, _msg("look"), {"i": 1})
    assert not w.again and w.pictures == 1 and w.unread


async def test_a_quote_still_to_be_read_is_not_made_whole_by_the_pictures_alone(tmp_path: Path, clock: ManualClock) -> None:
    w = await _kept(tmp_path, clock, _msg(metadata={AGAIN: {"i": ["img_1"]}}), {"i": 1, "q": "om_0"})
    assert not w.again and w.unread


async def test_a_quote_kept_with_its_id_is_read_again_with_the_pictures(tmp_path: Path, clock: ManualClock) -> None:
    w = await _kept(tmp_path, clock, _msg(metadata={AGAIN: {"i": ["img_1"], "q": "om_0"}}), {"i": 1, "q": "om_0"})
    assert w.again and w.unread


async def test_a_chat_record_kept_with_its_id_can_be_read_again(tmp_path: Path, clock: ManualClock) -> None:
    w = await _kept(tmp_path, clock, _msg(metadata={AGAIN: {"r": True}}), {"r": True})
    assert w.again and w.unread and w.pictures == 0


async def test_a_name_still_being_looked_up_is_not_unread(tmp_path: Path, clock: ManualClock) -> None:
    w = await _kept(tmp_path, clock, _msg("@bot when is it due?", is_group=True, mentioned=True), {"n": True})
    assert w.unnamed and not w.unread and not w.again and w.msg.sender_name == ""


async def test_a_group_members_name_is_kept(tmp_path: Path, clock: ManualClock) -> None:
    w = await _kept(tmp_path, clock, _msg("when is it due?", is_group=True, mentioned=True, sender_name="Carol Li"))
    assert w.msg.sender_name == "Carol Li" and not w.unnamed
