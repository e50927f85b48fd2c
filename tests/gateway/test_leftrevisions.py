"""The edits and recalls a stop or a crash left unapplied, applied at
start (gateway/leftrevisions.py): real gateway.db and memory.db."""

from __future__ import annotations

from pathlib import Path

from gateway.bus import EDIT, RECALL, InboundMessage
from gateway.inbox import Inbox
from gateway.leftrevisions import apply_left_revisions
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
