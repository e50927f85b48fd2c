"""The edits and recalls a stop or a crash left unapplied, applied at
start (gateway/leftrevisions.py): real gateway.db and memory.db."""

from __future__ import annotations

from pathlib import Path

from structlog.testing import capture_logs

from gateway.bus import EDIT, LEFT, RECALL, Forwarded, InboundMessage
from gateway.inbox import REVISION_ATTEMPTS, Inbox
from gateway.leftrevisions import LeftRevisions, apply_left_revisions
from gateway.revisions import Revisions
from gateway.sessions import SessionStore
from memory import ManualClock
from memory.engine import MemoryEngine
from memory.service import SqliteMemory

ALICE = "feishu:ou_alice"


def _said(text: str, message_id: str) -> InboundMessage:
    return InboundMessage(channel="feishu", chat_id="oc_alice", sender_id="ou_alice", text=text, message_id=message_id)


def _recall(message_id: str) -> InboundMessage:
    return InboundMessage(channel="feishu", chat_id="oc_alice", sender_id="", text="", message_id=message_id,
                          kind=RECALL)


async def _stored(store: SessionStore, memory: SqliteMemory, msg: InboundMessage) -> None:
    """``msg`` answered: its row in Tier 0, its line waiting for extraction."""
    await store.append(msg.session_key, channel=msg.channel, chat_id=msg.chat_id, role="user", content=msg.text,
                       owner=ALICE, sender_id=msg.sender_id, message_id=msg.message_id)
    [row] = [m for m in await store.window(msg.session_key) if m.message_id == msg.message_id]
    await memory.buffer([row.turn()])


async def _waiting_lines(engine: MemoryEngine) -> list[str]:
    return [str(r[0]) for r in await engine.db.fetchall("SELECT content FROM extraction_buffer ORDER BY id")]


async def test_recalls_and_edits_left_are_applied_in_order_and_their_rows_go(
    tmp_path: Path, clock: ManualClock, engine: MemoryEngine
) -> None:
    memory = SqliteMemory(engine)
    async with await SessionStore.open(tmp_path / "gateway.db", clock) as store:
        inbox = Inbox(store.db, clock)
        await _stored(store, memory, _said("my pin is 8812", "om_1"))
        await _stored(store, memory, _said("lunch at noon", "om_2"))
        await inbox.keep(_said("and my card is 4000 1234", "om_3"))  # never begun: still in the inbox
        await inbox.keep(_recall("om_1"))
        await inbox.keep(_recall("om_3"))
        await inbox.keep(InboundMessage(channel="feishu", chat_id="oc_alice", sender_id="ou_alice",
                                        text="lunch at one", message_id="om_2", kind=EDIT))

        done = await apply_left_revisions(inbox, Revisions(store, memory))

        assert [r.message_id for r in done.recalls] == ["om_1", "om_3"] and done.edits == 1 and done.failed == 0
        assert [m.content for m in await store.window("feishu:oc_alice")] == ["lunch at one"]
        assert await _waiting_lines(engine) == ["lunch at one"]
        assert await inbox.count() == 0 and await inbox.revisions() == []


async def test_a_recall_that_cannot_be_applied_stays_for_the_next_start(tmp_path: Path, clock: ManualClock) -> None:
    """memory.db failing (closed here): the recall is tried again at the
    next start, not dropped; the others still go on."""
    broken = await MemoryEngine.open(tmp_path / "memory.db", clock)
    async with await SessionStore.open(tmp_path / "gateway.db", clock) as store:
        inbox = Inbox(store.db, clock)
        await _stored(store, SqliteMemory(broken), _said("my pin is 8812", "om_1"))
        await inbox.keep(_recall("om_1"))
        await broken.close()

        done = await apply_left_revisions(inbox, Revisions(store, SqliteMemory(broken)))
        assert done.failed == 1 and done.recalls == ()
        assert [r.msg.message_id for r in await inbox.revisions()] == ["om_1"]

        engine = await MemoryEngine.open(tmp_path / "memory.db", clock)
        try:
            again = await apply_left_revisions(inbox, Revisions(store, SqliteMemory(engine)))
            assert [r.message_id for r in again.recalls] == ["om_1"] and again.failed == 0
            assert await _waiting_lines(engine) == [] and await inbox.revisions() == []
        finally:
            await engine.close()


def _left(member: str = "ou_alice", chat: str = "oc_team") -> InboundMessage:
    return InboundMessage(channel="feishu", chat_id=chat, sender_id=member, text="", is_group=True, kind=LEFT,
                          metadata={"event_id": "ev_1"})


async def test_a_member_left_event_a_stop_cut_is_applied_at_start_once(tmp_path: Path, clock: ManualClock) -> None:
    """Feishu had its 200 (Telegram's offset moved): the member's going is
    applied at the next start, once, however often the event came."""
    gone: list[tuple[str, str, str]] = []

    async def left(msg: InboundMessage) -> None:
        gone.append((msg.channel, msg.chat_id, msg.sender_id))

    async with await SessionStore.open(tmp_path / "gateway.db", clock) as store:
        inbox = Inbox(store.db, clock)
        await inbox.keep(_left())
        await inbox.keep(_left())  # Feishu's redelivery: one row
        await inbox.keep(_left("ou_bob"))
        memory = SqliteMemory(await MemoryEngine.open(tmp_path / "memory.db", clock))
        try:
            done = await apply_left_revisions(inbox, Revisions(store, memory), left=left)
            again = await apply_left_revisions(inbox, Revisions(store, memory), left=left)
        finally:
            await memory.engine.close()
    assert gone == [("feishu", "oc_team", "ou_alice"), ("feishu", "oc_team", "ou_bob")]
    assert done.left == 2 and done.failed == 0 and again == LeftRevisions()


async def test_a_member_left_event_applied_by_the_loop_leaves_the_inbox(tmp_path: Path, clock: ManualClock) -> None:
    async with await SessionStore.open(tmp_path / "gateway.db", clock) as store:
        inbox = Inbox(store.db, clock)
        await inbox.keep(_left())
        inbox.done(_left())
        await inbox.flush()
        assert await inbox.revisions() == []


async def test_an_edit_whose_memory_part_failed_is_applied_whole_at_the_next_start(
    tmp_path: Path, clock: ManualClock
) -> None:
    """memory.db failing: the stored words must not change alone, or the
    next start finds them "unchanged" and memory keeps the old words."""
    broken = await MemoryEngine.open(tmp_path / "memory.db", clock)
    async with await SessionStore.open(tmp_path / "gateway.db", clock) as store:
        inbox = Inbox(store.db, clock)
        await _stored(store, SqliteMemory(broken), _said("my pin is 8812", "om_1"))
        await inbox.keep(InboundMessage(channel="feishu", chat_id="oc_alice", sender_id="ou_alice",
                                        text="my pin is in the safe", message_id="om_1", kind=EDIT))
        await broken.close()
        assert (await apply_left_revisions(inbox, Revisions(store, SqliteMemory(broken)))).failed == 1

        engine = await MemoryEngine.open(tmp_path / "memory.db", clock)
        try:
            again = await apply_left_revisions(inbox, Revisions(store, SqliteMemory(engine)))
            assert again.edits == 1 and again.failed == 0
            assert await _waiting_lines(engine) == ["my pin is in the safe"]
            assert [m.content for m in await store.window("feishu:oc_alice")] == ["my pin is in the safe"]
        finally:
            await engine.close()


async def test_a_revision_failing_at_every_start_is_dropped_after_its_attempts_naming_ids_only(
    tmp_path: Path, clock: ManualClock
) -> None:
    broken = await MemoryEngine.open(tmp_path / "memory.db", clock)
    async with await SessionStore.open(tmp_path / "gateway.db", clock) as store:
        inbox = Inbox(store.db, clock)
        await _stored(store, SqliteMemory(broken), _said("my pin is 8812", "om_1"))
        await inbox.keep(InboundMessage(channel="feishu", chat_id="oc_alice", sender_id="ou_alice",
                                        text="my pin is 9931", message_id="om_1", kind=EDIT))
        await broken.close()
        with capture_logs() as logs:
            runs = [await apply_left_revisions(inbox, Revisions(store, SqliteMemory(broken)))
                    for _ in range(REVISION_ATTEMPTS)]
        assert [r.failed for r in runs] == [1] * REVISION_ATTEMPTS
        assert [r.dropped for r in runs] == [0] * (REVISION_ATTEMPTS - 1) + [1]
        assert await inbox.revisions() == []
    [drop] = [e for e in logs if "dropped" in e["event"]]
    assert drop["log_level"] == "error" and drop["message_id"] == "om_1" and drop["attempts"] == REVISION_ATTEMPTS
    assert "9931" not in repr(logs) and "8812" not in repr(logs)


async def test_an_edit_of_a_comment_sent_with_forwards_changes_the_waiting_messages_words(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A burst of forwards with two comments waits in the inbox (never
    begun); the second comment's edit (as the channel sends it: the
    burst's id, which comment, how long each was) changes those words only."""
    burst = InboundMessage(channel="telegram", chat_id="9", sender_id="9", text="see this\nwhat does she wnat?",
                           message_id="41", forwarded=(Forwarded("Dana Kim", "launch moves to Friday"),))
    edit = InboundMessage(channel="telegram", chat_id="9", sender_id="9", text="what does she want from me?",
                          message_id="41", kind=EDIT, metadata={"comments": [8, 19], "comment": 1})
    async with await SessionStore.open(tmp_path / "gateway.db", clock) as store:
        inbox = Inbox(store.db, clock)
        await inbox.keep(burst)
        await inbox.keep(edit)
        memory = SqliteMemory(await MemoryEngine.open(tmp_path / "memory.db", clock))
        try:
            done = await apply_left_revisions(inbox, Revisions(store, memory))
        finally:
            await memory.engine.close()
        [w] = await inbox.waiting()
    assert done.edits == 1 and _nothing_failed(done)
    assert w.msg.text == "see this\nwhat does she want from me?"
    assert w.msg.forwarded == burst.forwarded


def _nothing_failed(done: LeftRevisions) -> bool:
    return done.failed == 0 and done.dropped == 0


async def test_a_later_edit_of_a_failed_one_starts_its_attempts_again(tmp_path: Path, clock: ManualClock) -> None:
    """The count is the words': new words may apply where the old failed;
    the same edit delivered again keeps its count."""
    first = InboundMessage(channel="telegram", chat_id="9", sender_id="9", text="pin 1", message_id="41", kind=EDIT)
    async with await SessionStore.open(tmp_path / "gateway.db", clock) as store:
        inbox = Inbox(store.db, clock)
        await inbox.keep(first)
        inbox.done(first, failed=True)
        await inbox.flush()
        await inbox.keep(first)  # redelivered
        assert [r.attempts for r in await inbox.revisions()] == [1]
        await inbox.keep(InboundMessage(channel="telegram", chat_id="9", sender_id="9", text="pin 2", message_id="41",
                                        kind=EDIT))
        assert [(r.msg.text, r.attempts) for r in await inbox.revisions()] == [("pin 2", 0)]
