"""The outbox table in a real gateway.db: rows round-trip every field of
OutboundMessage (one added later too), a chat's rows come up oldest
first, and a user's rows can be erased or handed to another user."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from gateway.bus import OutboundMessage
from gateway.cli import main
from gateway.outbox import Outbox
from gateway.sessions import MIGRATIONS, SessionStore
from memory import ManualClock


@dataclass(frozen=True)
class WithAnswers(OutboundMessage):
    """A field another change may add to OutboundMessage: the outbox must
    carry it without knowing its name."""

    answers: str = ""
    extra_info: dict[str, object] | None = None


@pytest.fixture
async def sessions(tmp_path: Path, clock: ManualClock) -> AsyncIterator[SessionStore]:
    store = await SessionStore.open(tmp_path / "gateway.db", clock)
    try:
        yield store
    finally:
        await store.close()


async def test_a_row_keeps_every_field_even_one_added_later(sessions: SessionStore, clock: ManualClock) -> None:
    outbox = Outbox(sessions.db, WithAnswers)
    msg = WithAnswers(
        "telegram", "-100777", "the answer 你好", reply_to="55", metadata={"message_thread_id": 42},
        answers="m12", extra_info={"k": ["v"]},
    )
    now = clock.now()
    await outbox.add(msg, owner="alice", created_at=now, next_attempt_at=now + timedelta(seconds=30), attempts=1,
                     last_error="Bad Gateway")
    [row] = await outbox.heads()
    assert row.message == replace(msg, owner="alice")  # the row's owner is the message's
    assert row.message.send_key == msg.send_key  # the same Feishu uuids on every attempt
    assert (row.owner, row.attempts, row.last_error, row.created_at) == ("alice", 1, "Bad Gateway", now)
    assert row.next_attempt_at == now + timedelta(seconds=30)
    # Read back by a build without those fields: they are left out, the rest stays.
    [plain] = await Outbox(sessions.db).heads()
    assert type(plain.message) is OutboundMessage and plain.message.text == "the answer 你好"


async def test_heads_are_each_chats_oldest_row_and_the_next_comes_up_when_it_goes(
    sessions: SessionStore, clock: ManualClock
) -> None:
    outbox = Outbox(sessions.db)
    now = clock.now()
    ids = [
        await outbox.add(OutboundMessage(ch, chat, text), owner="", created_at=now, next_attempt_at=now)
        for ch, chat, text in [("telegram", "1", "a1"), ("feishu", "oc_x", "f1"), ("telegram", "1", "a2"),
                               ("telegram", "2", "b1")]
    ]
    assert [h.message.text for h in await outbox.heads()] == ["a1", "f1", "b1"]
    assert [h.message.text for h in await outbox.heads(["telegram"])] == ["a1", "b1"]
    assert await outbox.heads([]) == []
    await outbox.remove(ids[0])
    head = await outbox.head("telegram", "1")
    assert head is not None and head.message.text == "a2"
    assert sorted(await outbox.chats()) == [("feishu", "oc_x"), ("telegram", "1"), ("telegram", "2")]
    assert await outbox.count() == 3


async def test_the_owner_is_whose_message_the_reply_answers(sessions: SessionStore) -> None:
    for owner, mid in [("alice", "7"), ("bob", "8")]:
        await sessions.append("telegram:-100", channel="telegram", chat_id="-100", role="user", content="hi",
                              owner=owner, message_id=mid)
    assert await sessions.owner_of("telegram:-100", "7") == "alice"  # a group reply names the message
    assert await sessions.owner_of("telegram:-100") == "bob"  # else the newest message's
    assert await sessions.owner_of("telegram:-100", "999") == "bob"
    assert await sessions.owner_of("telegram:5") == ""


def test_forget_user_erases_the_replies_to_them_still_waiting(home: Path) -> None:
    async def seed() -> None:
        clock = ManualClock("2026-03-01T12:00:00Z")
        async with await SessionStore.open(home / "data" / "gateway.db", clock) as s:
            outbox = Outbox(s.db)
            now = clock.now()
            for owner, text in [("alice", "alice's reply about her diagnosis"), ("bob", "bob's reply")]:
                await outbox.add(OutboundMessage("telegram", owner, text), owner=owner, created_at=now,
                                 next_attempt_at=now)

    asyncio.run(seed())
    r = CliRunner().invoke(main, ["memory", "forget", "--user", "alice", "--yes"])
    assert r.exit_code == 0, r.output
    assert "1 undelivered reply" in r.output

    async def left() -> list[str]:
        async with await SessionStore.open(home / "data" / "gateway.db") as s:
            return [h.owner for h in await Outbox(s.db).heads()]

    assert asyncio.run(left()) == ["bob"]
    data = b"".join(p.read_bytes() for p in (home / "data").glob("gateway.db*"))
    assert b"diagnosis" not in data  # zeroed and compacted, not left in free pages


async def test_merge_identities_moves_the_rows(sessions: SessionStore, clock: ManualClock) -> None:
    outbox = Outbox(sessions.db)
    now = clock.now()
    await outbox.add(OutboundMessage("telegram", "777", "hi"), owner="telegram:777", created_at=now, next_attempt_at=now)
    assert await outbox.owned("telegram:777") == 1
    assert await outbox.move_owner("telegram:777", "alice") == 1
    assert (await outbox.owned("telegram:777"), await outbox.owned("alice")) == (0, 1)
    [row] = await outbox.heads()
    assert row.message.owner == "alice"  # the message read back follows the row


async def test_only_the_replies_to_a_recalled_message_leave_its_chat(sessions: SessionStore, clock: ManualClock) -> None:
    outbox = Outbox(sessions.db)
    now = clock.now()
    for chat, answers, text in [("oc_a", "om_1", "part of it"), ("oc_a", "om_1", "the rest"), ("oc_a", "om_2", "other"),
                                ("oc_b", "om_1", "same id, other chat"), ("oc_a", "", "a job's")]:
        await outbox.add(OutboundMessage("feishu", chat, text, answers=answers), owner="", created_at=now,
                         next_attempt_at=now)
    assert await outbox.drop_answering("feishu", "oc_a", "om_1") == 2
    assert await outbox.drop_answering("feishu", "oc_a", "") == 0  # answers nothing: nothing to recall
    assert await outbox.drop_answering("telegram", "oc_a", "om_2") == 0
    left = [(h.message.chat_id, h.message.text) for h in await outbox.older_than(now + timedelta(seconds=1))]
    assert left == [("oc_a", "other"), ("oc_b", "same id, other chat"), ("oc_a", "a job's")]


async def test_rows_kept_before_send_keys_get_one_for_good(tmp_path: Path, clock: ManualClock) -> None:
    """A gateway.db of schema 3 (outbox rows without a send key) is
    upgraded: each row gets a key of its own that every read sees (the
    same Feishu uuids on every resend), and the reply log's table comes."""
    from memory.db import Database

    path = tmp_path / "gateway.db"
    old = await Database.open(path, MIGRATIONS[:3])
    try:
        for text in ("kept before", "and another"):
            await old.write(
                "INSERT INTO outbox (channel, chat_id, text, extra, created_at, next_attempt_at) "
                "VALUES ('feishu', 'oc_1', ?, '{\"answers\": \"om_1\"}', '2026-03-01T10:00:00Z', "
                "'2026-03-01T10:00:00Z')",
                (text,),
            )
        assert int((await old.fetchone("PRAGMA user_version"))[0]) == 3
    finally:
        await old.close()
    async with await SessionStore.open(path, clock) as store:
        assert int((await store.db.fetchone("PRAGMA user_version"))[0]) == len(MIGRATIONS) == 24
        rows = await Outbox(store.db).older_than(clock.now())
        keys = [p.message.send_key for p in rows]
        assert [p.message.answers for p in rows] == ["om_1", "om_1"] and len(set(keys)) == 2
        assert [p.message.send_key for p in await Outbox(store.db).older_than(clock.now())] == keys
        assert await store.db.fetchall("SELECT * FROM sent_replies") == []
        assert await store.db.fetchall("SELECT * FROM seen_ids") == []
        assert await store.db.fetchall("SELECT * FROM draft_messages") == []
        assert await store.db.fetchall("SELECT * FROM burst_comments") == []
    async with await SessionStore.open(path, clock) as store:  # reopening changes nothing
        assert [p.message.send_key for p in await Outbox(store.db).older_than(clock.now())] == keys


async def test_a_reply_on_its_way_is_this_runs_senders_and_the_next_runs_to_send(
    sessions: SessionStore, clock: ManualClock
) -> None:
    """``sending``: left out of this run's reads (its sender has it), taken as
    waiting by the next run's; it still says the message is answered (the
    cut-turn resume skips it) and goes with its owner's data."""
    now = clock.now()
    run = Outbox(sessions.db)
    await run.add(OutboundMessage("feishu", "oc_1", "kept earlier"), owner="feishu:ou_a", created_at=now,
                  next_attempt_at=now)
    msg = OutboundMessage("feishu", "oc_1", "on its way", answers="om_7", owner="feishu:ou_a")
    on_way = await run.add(msg, owner="feishu:ou_a", created_at=now, next_attempt_at=now, sending=True)
    assert [h.message.text for h in await run.heads()] == ["kept earlier"]
    assert await run.count() == 1 and await run.cut() == 0
    assert [p.message.text for p in await run.older_than(now + timedelta(days=2))] == ["kept earlier"]
    await run.remove((await run.heads())[0].id)
    assert await run.heads() == [] and await run.head("feishu", "oc_1") is None and await run.chats() == []
    assert await run.answering("feishu", "oc_1", "om_7") is True

    after_kill = Outbox(sessions.db)
    [head] = await after_kill.heads()
    assert head.id == on_way and head.message == msg and head.message.send_key == msg.send_key
    assert await after_kill.chats() == [("feishu", "oc_1")] and await after_kill.count() == await after_kill.cut() == 1

    await run.retry_later(on_way, text="on its way", attempts=1, next_attempt_at=now, last_error="502")
    assert [h.id for h in await run.heads()] == [on_way] and await after_kill.cut() == 0  # waiting now, for any run
    assert await run.forget_owner("feishu:ou_a") == 1


async def test_a_job_replys_row_marks_its_slot_answered_in_the_same_transaction(
    sessions: SessionStore, clock: ManualClock
) -> None:
    """A scheduled job's reply on its way marks its slot (``job_slot``)
    with its row, and only with it: a failed row writes no mark, so a kill
    never leaves a slot marked whose reply is nowhere (never sent, never
    re-run). ``job_recorded`` clears that slot's mark, not a later one's."""
    from gateway.outbox import job_slot

    outbox, now = Outbox(sessions.db), clock.now()
    reply = OutboundMessage("telegram", "42", "re: call mom", job_slot=job_slot("call mom at 9", "2026-03-01T09:00:00Z"))
    await outbox.add(reply, owner="telegram:42", created_at=now, next_attempt_at=now, sending=True)
    assert await outbox.job_reply("call mom at 9", "2026-03-01T09:00:00Z") == "ok"
    assert await outbox.job_reply("call mom at 9", "2026-03-02T09:00:00Z") is None
    assert await outbox.job_reply("call mom", "2026-03-01T09:00:00Z") is None
    [kept] = await Outbox(sessions.db).heads()  # the next run reads the slot back with the reply
    assert kept.message.job_slot == reply.job_slot

    # A later write of the same reply (waiting: a retry's) marks nothing.
    await outbox.add(replace(reply, job_slot=job_slot("other", "2026-03-01T09:00:00Z")), owner="telegram:42",
                     created_at=now, next_attempt_at=now)
    assert await outbox.job_reply("other", "2026-03-01T09:00:00Z") is None

    # The row cannot be written (its owner NOT NULL broken here): nor is the mark.
    with pytest.raises(sqlite3.IntegrityError):
        await outbox.add(replace(reply, job_slot=job_slot("lost", "2026-03-01T09:00:00Z")),
                         owner=None, created_at=now, next_attempt_at=now, sending=True)  # type: ignore[arg-type]
    assert await outbox.job_reply("lost", "2026-03-01T09:00:00Z") is None

    # The next slot's reply takes the job's one mark; clearing the old slot leaves it.
    await outbox.add(replace(reply, job_slot=job_slot("call mom at 9", "2026-03-02T09:00:00Z")),
                     owner="telegram:42", created_at=now, next_attempt_at=now, sending=True)
    await outbox.job_recorded("call mom at 9", "2026-03-01T09:00:00Z")
    assert await outbox.job_reply("call mom at 9", "2026-03-02T09:00:00Z") == "ok"
    await outbox.job_recorded("call mom at 9", "2026-03-02T09:00:00Z")
    assert await sessions.db.fetchall("SELECT * FROM job_replies") == []

    # A fallback's mark says so (cron.db records the slot as one), and the
    # next slot's ordinary reply takes that back.
    fell_back = replace(reply, job_slot=job_slot("call mom at 9", "2026-03-03T09:00:00Z"), job_fallback=True)
    await outbox.add(fell_back, owner="telegram:42", created_at=now, next_attempt_at=now, sending=True)
    assert await outbox.job_reply("call mom at 9", "2026-03-03T09:00:00Z") == "fallback"
    await outbox.add(replace(reply, job_slot=job_slot("call mom at 9", "2026-03-04T09:00:00Z")),
                     owner="telegram:42", created_at=now, next_attempt_at=now, sending=True)
    assert await outbox.job_reply("call mom at 9", "2026-03-04T09:00:00Z") == "ok"


async def test_a_drafted_replys_row_and_its_draft_messages_row_go_together_or_not_at_all(
    sessions: SessionStore, clock: ManualClock
) -> None:
    """Outbox.remove / retry_later with ``drafted``: one transaction, so a
    kill never leaves the reply's row without its draft's (the next start
    would send it as a new message beside the draft it became)."""
    from channels.feishu.drafts import StoredDraft
    from gateway.draftmessages import DraftMessages

    outbox, drafts = Outbox(sessions.db), DraftMessages(sessions.db, "feishu")
    now = clock.now()
    mine, other = OutboundMessage("feishu", "oc_a", "the reply"), OutboundMessage("feishu", "oc_a", "another")
    ids = [await outbox.add(m, owner="alice", created_at=now, next_attempt_at=now, sending=True) for m in (mine, other)]
    for m in (mine, other):
        await drafts.put(StoredDraft(m.send_key, "oc_a", f"om_{m.text}", 0.0), expired_before=-1.0)
    await sessions.db.write("CREATE TRIGGER full BEFORE DELETE ON outbox BEGIN SELECT RAISE(ABORT, 'disk full'); END")
    with pytest.raises(Exception, match="disk full"):
        await outbox.remove(ids[0], drafted=True)
    assert await drafts.get(mine.send_key) is not None  # rolled back with the outbox row's removal
    await sessions.db.write("DROP TRIGGER full")
    await outbox.retry_later(ids[1], text="the rest", attempts=1, next_attempt_at=now, last_error="", drafted=True)
    assert await drafts.get(other.send_key) is None and await drafts.get(mine.send_key) is not None
    await outbox.remove(ids[0], drafted=True)
    assert await drafts.get(mine.send_key) is None and await outbox.count() == 1
