"""What the durable inbox keeps of a message so that the next start can
make it whole again (gateway/inbox.py), on a real gateway.db."""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from gateway.bus import AGAIN, EDIT, MESSAGE, RECALL, InboundMessage, NotKept
from gateway.inbox import Inbox, Waiting
from gateway.sessions import SessionStore
from memory import ManualClock
from memory.identity import IdentityMap
from tests.disk import allow, refuse
from tests.logjson import debug_json_log, lines


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


# -- edits and recalls ------------------------------------------------------------------


def _edit(text: str, **metadata: object) -> InboundMessage:
    return InboundMessage(channel="telegram", chat_id="42", sender_id="42", text=text, message_id="7", kind=EDIT,
                          metadata=dict(metadata))


async def test_an_edit_and_a_recall_are_kept_apart_from_the_message_they_name(tmp_path: Path, clock: ManualClock) -> None:
    """Same message id, three rows' worth: the message in the inbox, its
    edit and its recall beside it; each comes back as it was taken."""
    async with await SessionStore.open(tmp_path / "gateway.db", clock) as store:
        inbox = Inbox(store.db, clock)
        await inbox.keep(_msg("the vault code is 4471"))
        await inbox.keep(_edit("see you at 9", comment=1, comments=[5, 12], thread=3))
        await inbox.keep(InboundMessage(channel="feishu", chat_id="oc_team", sender_id="", text="", message_id="om_1",
                                        kind=RECALL, metadata={"recall_type": "message_owner"}))
        assert await inbox.count() == 1
        edit, recall = await inbox.revisions()
        assert (edit.msg.kind, edit.msg.text, edit.msg.sender_id, edit.msg.chat_id) == (EDIT, "see you at 9", "42", "42")
        assert edit.msg.metadata["comment"] == 1 and edit.msg.metadata["comments"] == [5, 12]
        assert (recall.msg.kind, recall.msg.message_id, recall.msg.session_key) == (RECALL, "om_1", "feishu:oc_team")


async def test_a_revision_applied_leaves_unless_a_later_edit_replaced_it(tmp_path: Path, clock: ManualClock) -> None:
    async with await SessionStore.open(tmp_path / "gateway.db", clock) as store:
        inbox = Inbox(store.db, clock)
        first, second = _edit("see you at 9"), _edit("see you at 10")
        await inbox.keep(first)
        await inbox.keep(second)  # the same message edited again before the first was applied
        inbox.done(first)
        await inbox.flush()
        [left] = await inbox.revisions()
        assert left.msg.text == "see you at 10"  # still to be applied
        inbox.done(second)
        await inbox.flush()
        assert await inbox.revisions() == []


async def test_an_unreadable_revision_is_dropped_and_the_rest_come_back(tmp_path: Path, clock: ManualClock) -> None:
    async with await SessionStore.open(tmp_path / "gateway.db", clock) as store:
        inbox = Inbox(store.db, clock)
        await store.db.write("INSERT INTO revisions (channel, chat_id, message_id, kind, received_at, payload) "
                             "VALUES ('telegram', '42', '6', 'edit', '2026-03-01T12:00:00Z', 'not json')")
        await inbox.keep(_edit("see you at 9"))
        [rev] = await inbox.revisions()
        assert rev.msg.text == "see you at 9"
        assert [r[0] for r in await store.db.fetchall("SELECT message_id FROM revisions")] == ["7"]


async def test_an_edit_of_a_message_still_waiting_changes_its_words_by_its_sender_only(
    tmp_path: Path, clock: ManualClock
) -> None:
    async with await SessionStore.open(tmp_path / "gateway.db", clock) as store:
        inbox = Inbox(store.db, clock)
        await inbox.keep(InboundMessage(channel="telegram", chat_id="42", sender_id="42", text="see you at 9",
                                        message_id="7"))
        assert not await inbox.edit_waiting(replace(_edit("I am someone else"), sender_id="43"))
        assert not await inbox.edit_waiting(_edit("a comment's words", comment=0, comments=[17]))
        assert not await inbox.edit_waiting(replace(_edit("see you at 10"), message_id="8"))
        assert await inbox.edit_waiting(_edit("see you at 10"))
        [w] = await inbox.waiting()
        assert w.msg.text == "see you at 10" and w.msg.kind == MESSAGE


async def test_a_revision_that_cannot_be_written_is_not_taken(tmp_path: Path, clock: ManualClock) -> None:
    async with await SessionStore.open(tmp_path / "gateway.db", clock) as store:
        inbox = Inbox(store.db, clock)
        await store.db.write("DROP TABLE revisions")  # as a write that fails (a full disk)
        with pytest.raises(NotKept):
            await inbox.keep(_edit("see you at 10"))
        assert inbox.failed == 1


# -- erasure ----------------------------------------------------------------------------


async def test_forgetting_an_owner_drops_their_waiting_messages_and_edits_by_sender(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A row names its sender only: the owner is what the identity map
    makes of it, so Alice's handles on both channels go, a group's row goes
    by its sender (not the group), Bob's rows stay, and so do a recall (no
    words; it still withdraws the bot's reply at the next start) and a row
    that cannot be read (the next start drops it)."""
    identities = IdentityMap({"alice": ["telegram:1001", "feishu:ou_alice"]})
    async with await SessionStore.open(tmp_path / "gateway.db", clock) as store:
        inbox = Inbox(store.db, clock)
        for channel, chat, sender, mid, text in [
            ("telegram", "1001", "1001", "1", "my locker code is 7731"),
            ("telegram", "-100", "1001", "2", "@bot and the pin is 5519"),
            ("telegram", "-100", "1002", "3", "@bot is the ferry running?"),
            ("feishu", "oc_team", "ou_alice", "om_4", "@bot the spare key is under the mat"),
        ]:
            await inbox.keep(InboundMessage(channel=channel, chat_id=chat, sender_id=sender, text=text,
                                            message_id=mid, is_group=chat != "1001", mentioned=chat != "1001"))
        await inbox.keep(replace(_edit("the pin is 5519"), chat_id="-100", sender_id="1001", message_id="9"))
        await inbox.keep(replace(_edit("bob's edit"), chat_id="-100", sender_id="1002", message_id="8"))
        await inbox.keep(InboundMessage(channel="feishu", chat_id="oc_team", sender_id="", text="", message_id="om_5",
                                        kind=RECALL))
        await store.db.write("INSERT INTO inbox (channel, chat_id, message_id, received_at, payload) "
                             "VALUES ('telegram', '1001', '6', '2026-03-01T12:00:00Z', 'not json')")
        assert await inbox.forget_owner("alice", identities.resolve) == (3, 1)
        left = [(r[0], r[1]) for r in await store.db.fetchall("SELECT message_id, payload FROM inbox ORDER BY id")]
        assert [m for m, _ in left] == ["3", "6"] and not any("7731" in p or "5519" in p for _, p in left)
        assert [(r.msg.kind, r.msg.message_id) for r in await inbox.revisions()] == [(EDIT, "8"), (RECALL, "om_5")]
        assert await inbox.forget_owner("alice", identities.resolve) == (0, 0)
        # A handle the map does not name is its own owner.
        assert await inbox.forget_owner("telegram:1002", identities.resolve) == (1, 1)


async def test_an_erasure_marks_what_it_dropped_for_the_loop_and_counts_the_asking_command_out(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The loop may still hold an erased message (queued, under way): it
    asks :meth:`Inbox.erased`. The ``/forget all`` asking goes but is not
    counted, nor marked (its turn is under way and ends as usual); an
    erased message handed in again (a Feishu lane) is not kept; Bob's are
    neither counted nor marked."""
    identities = IdentityMap()
    msgs = [InboundMessage(channel="telegram", chat_id=chat, sender_id=sender, text=text, message_id=mid,
                           is_group=chat == "-100", mentioned=True)
            for chat, sender, mid, text in [("-100", "1001", "1", "@bot my pin is 5519"),
                                            ("-100", "1002", "2", "@bot the ferry?"),
                                            ("1001", "1001", "3", "/forget all 1234")]]
    asking = ("telegram", "1001", "3")
    async with await SessionStore.open(tmp_path / "gateway.db", clock) as store:
        inbox = Inbox(store.db, clock)
        for m in msgs:
            await inbox.keep(m)
        assert await inbox.owned("telegram:1001", identities.resolve, besides=asking) == 1
        assert await inbox.owned("telegram:1001", identities.resolve) == 2
        assert await inbox.forget_owner("telegram:1001", identities.resolve, besides=asking) == (1, 0)
        assert [inbox.erased(m) for m in msgs] == [True, False, False]
        await inbox.keep(msgs[0])
        await inbox.flush()
        assert [r[0] for r in await store.db.fetchall("SELECT message_id FROM inbox")] == ["2"]


# -- a failed write is logged by its codes, never the words it held ---------------------

SAID = "quokka5521"  # a user's words, which SQLite's error text quotes below


async def _refusing(store: SessionStore, table: str) -> None:
    # A real SQLite error whose text is what the row held: FTS5 names the
    # "column" a query's word asks for ("no such column: quokka5521").
    await store.db.write("CREATE VIRTUAL TABLE IF NOT EXISTS probe USING fts5(x)")
    await store.db.write(f"CREATE TRIGGER refuse_{table} BEFORE INSERT ON {table} BEGIN "
                         "SELECT * FROM probe WHERE probe MATCH json_extract(NEW.payload, '$.t') || ':x'; END")


@pytest.mark.parametrize("table, msg", [("inbox", _msg(SAID)), ("revisions", _edit(SAID))])
async def test_a_failed_write_is_logged_and_raised_without_the_words(
    tmp_path: Path, clock: ManualClock, table: str, msg: InboundMessage
) -> None:
    async with await SessionStore.open(tmp_path / "gateway.db", clock) as store:
        inbox = Inbox(store.db, clock)
        await _refusing(store, table)
        with debug_json_log() as out, pytest.raises(NotKept) as err:
            await inbox.keep(msg)
    assert "quokka" not in out.getvalue() and "quokka" not in str(err.value)
    [line] = [x for x in lines(out, _NOT_SAVED[table])]
    assert line["error"] == "sqlite3.OperationalError" and line["sqlite_error"] == "SQLITE_ERROR"
    assert any(f.startswith("gateway/inbox.py:") for f in line["frames"])


_NOT_SAVED = {
    "inbox": "message not saved in the inbox: held at the platform, tried again until there is room; "
             "later failures are counted until one is saved",
    "revisions": "edit or recall not saved in the inbox: held at the platform, tried again",
}


async def test_an_unreadable_row_is_logged_without_what_it_held(tmp_path: Path, clock: ManualClock) -> None:
    async with await SessionStore.open(tmp_path / "gateway.db", clock) as store:
        inbox = Inbox(store.db, clock)
        await inbox.keep(InboundMessage(channel="telegram", chat_id="42", sender_id="42", text=SAID, message_id="6"))
        await store.db.write("UPDATE inbox SET received_at = ?", (SAID,))  # fromisoformat quotes it
        with debug_json_log() as out:
            assert await inbox.waiting() == []
    assert "quokka" not in out.getvalue()
    [line] = lines(out, "inbox row unreadable; dropped")
    assert line["error"] == "ValueError" and line["message_id"] == "6"


def _rows(path: Path) -> list[str]:
    with sqlite3.connect(path) as db:
        return [m for (m,) in db.execute("SELECT message_id FROM inbox ORDER BY id")]


async def test_rows_begun_whose_delete_a_full_disk_refuses_stay_until_there_is_room(
    tmp_path: Path, clock: ManualClock
) -> None:
    """At start a begun message's row goes; the disk refusing that delete
    must not stop the start (it raised, and the gateway did not come up):
    the row stays, one error says so, and it goes once there is room."""
    path = tmp_path / "gateway.db"
    with debug_json_log() as log:
        async with await SessionStore.open(path, clock) as store:
            inbox = Inbox(store.db, clock)
            inbox.drop_retry = 0.02
            begun, waiting = _msg("is it due?"), replace(_msg("and the slides?"), message_id="om_2")
            await inbox.keep(begun)
            await inbox.keep(waiting)
            await store.append(begun.session_key, channel="feishu", chat_id="oc_team", role="user",
                               content=begun.text, owner="ou_carol", message_id="om_1")
            refuse(path, "drops", "BEFORE DELETE ON inbox")
            assert [w.msg.message_id for w in await inbox.waiting()] == ["om_2"]
            assert [w.msg.message_id for w in await inbox.waiting()] == ["om_2"]  # a second try: no second error
            await asyncio.sleep(0.2)  # tried again, still full
            assert _rows(path) == ["om_1", "om_2"]
            allow(path, "drops")
            async with asyncio.timeout(10):
                while "are deleted now" not in log.getvalue():
                    await asyncio.sleep(0.02)
            assert _rows(path) == ["om_2"]
            await inbox.close()
    error, again = lines(log, "inbox rows not to be answered could not be deleted (the disk is full or read-only?): "
                              "kept, tried again until there is room")
    assert (error["level"], again["level"]) == ("error", "info")  # a line a failure, not a line a try
    assert error["rows"] == 1 and error["sqlite_error"] == "SQLITE_CONSTRAINT_TRIGGER"
    [back] = lines(log, "inbox rows kept by a full disk are deleted now")
    assert back["rows"] == 1 and "is it due" not in log.getvalue()


async def test_a_stop_while_the_disk_is_full_leaves_the_rows_to_the_next_start(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "gateway.db"
    async with await SessionStore.open(path, clock) as store:
        inbox = Inbox(store.db, clock)
        await inbox.keep(_msg("is it due?"))
        await store.append("feishu:oc_team", channel="feishu", chat_id="oc_team", role="user", content="is it due?",
                           owner="ou_carol", message_id="om_1")
        refuse(path, "drops", "BEFORE DELETE ON inbox")
        assert await inbox.waiting() == []
        await asyncio.wait_for(inbox.close(), 5)  # not waiting for room
        await inbox.close()  # safe twice
    assert _rows(path) == ["om_1"]
    allow(path, "drops")
    async with await SessionStore.open(path, clock) as store:  # the next start: begun, so dropped now
        assert await Inbox(store.db, clock).waiting() == []
    assert _rows(path) == []


async def test_an_unreadable_revision_the_disk_will_not_delete_stays_and_the_rest_come_back(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Its delete raised, and the start with it (the edits never applied,
    the gateway not up). Never applied, it can wait for the next start."""
    path = tmp_path / "gateway.db"
    async with await SessionStore.open(path, clock) as store:
        inbox = Inbox(store.db, clock)
        await store.db.write("INSERT INTO revisions (channel, chat_id, message_id, kind, received_at, payload) "
                             "VALUES ('telegram', '42', '6', 'edit', '2026-03-01T12:00:00Z', 'not json')")
        await inbox.keep(_edit("see you at 9"))
        refuse(path, "revisions", "BEFORE DELETE ON revisions")
        [rev] = await inbox.revisions()
        assert rev.msg.text == "see you at 9"
        allow(path, "revisions")
        assert len(await inbox.revisions()) == 1  # the next start: dropped now
        assert [r[0] for r in await store.db.fetchall("SELECT message_id FROM revisions")] == ["7"]
