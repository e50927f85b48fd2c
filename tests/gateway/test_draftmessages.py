"""Feishu's draft messages in gateway.db (``DraftMessages``): a real SQLite
file; what survives, what is swept, which rows are orphans."""

from __future__ import annotations

from datetime import UTC, datetime

from channels.feishu.drafts import StoredDraft
from gateway.bus import OutboundMessage
from gateway.draftmessages import DraftMessages
from gateway.outbox import Outbox
from gateway.sessions import SessionStore
from tests.gateway.test_outbox import sessions  # noqa: F401  (the fixture: gateway.db in tmp_path)


async def test_a_row_lives_from_the_first_draft_until_the_reply_is_out(sessions: SessionStore) -> None:
    store = DraftMessages(sessions.db, "feishu")
    await store.put(StoredDraft("k1", "oc_a", "om_1", 1000.0), expired_before=0)
    await store.put(StoredDraft("k1", "oc_a", "om_1b", 1001.0), expired_before=0)  # a key has one row
    assert await store.get("k1") == StoredDraft("k1", "oc_a", "om_1b", 1001.0, False)
    await store.finishing("k1")
    kept = await store.get("k1")
    assert kept is not None and kept.finishing
    assert await DraftMessages(sessions.db, "other").get("k1") is None  # per channel
    await store.remove("k1")
    assert await store.get("k1") is None and await store.count() == 0


async def test_each_write_sweeps_rows_past_their_day(sessions: SessionStore) -> None:
    store = DraftMessages(sessions.db, "feishu")
    for i in range(5):
        await store.put(StoredDraft(f"k{i}", "oc_a", f"om_{i}", 1000.0 + i), expired_before=0)
    await store.put(StoredDraft("new", "oc_a", "om_new", 90_000.0), expired_before=1003.0)
    assert [d.send_key for d in await store.orphans()] == ["k3", "k4", "new"]


async def test_orphans_are_the_rows_whose_reply_does_not_wait_in_the_outbox(
    sessions: SessionStore
) -> None:
    store = DraftMessages(sessions.db, "feishu")
    for key in ("waited", "orphan"):
        await store.put(StoredDraft(key, "oc_a", f"om_{key}", 1000.0), expired_before=0)
    now = datetime(2026, 3, 1, tzinfo=UTC)
    outbox = Outbox(sessions.db)
    await outbox.add(OutboundMessage("feishu", "oc_a", "reply", send_key="waited"), owner="", created_at=now,
                     next_attempt_at=now)
    # Another channel's row with the same key is another reply.
    await outbox.add(OutboundMessage("telegram", "1", "reply", send_key="orphan"), owner="", created_at=now,
                     next_attempt_at=now)
    assert [d.send_key for d in await store.orphans()] == ["orphan"]
