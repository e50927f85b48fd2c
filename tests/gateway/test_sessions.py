from __future__ import annotations

import asyncio
from pathlib import Path

from gateway.sessions import MIGRATIONS, SessionStore
from memory.clock import ManualClock
from tests.disk import on_disk

KEY = "telegram:42"


async def _add(store: SessionStore, role: str, text: str, *, key: str = KEY) -> int:
    row = await store.append(key, channel="telegram", chat_id=key.split(":", 1)[1], role=role, content=text, owner="alice")
    return row.id


async def test_window_is_the_last_messages_and_survives_reopen(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "gateway.db"
    store = await SessionStore.open(path, clock, window=4)
    try:
        for i in range(6):
            await _add(store, "user" if i % 2 == 0 else "assistant", f"m{i}")
        assert [m.content for m in await store.window(KEY)] == ["m2", "m3", "m4", "m5"]
        assert await store.window("telegram:other") == []
    finally:
        await store.close()
    store = await SessionStore.open(path, clock, window=4)
    try:
        window = await store.window(KEY)
        assert [m.content for m in window] == ["m2", "m3", "m4", "m5"]
        assert window[0].owner == "alice" and window[0].channel == "telegram" and window[0].chat_id == "42"
        assert window[0].message_id.startswith("g-")  # generated, so re-buffering is idempotent
    finally:
        await store.close()


async def test_prune_never_deletes_an_unbuffered_message(tmp_path: Path, clock: ManualClock) -> None:
    async with await SessionStore.open(tmp_path / "g.db", clock, window=2) as store:
        ids = [await _add(store, "user", f"m{i}") for i in range(5)]
        assert await store.prune(KEY) == 0  # nothing buffered yet: all rows stay
        assert [m.content for m in await store.unbuffered(KEY)] == ["m0", "m1", "m2", "m3", "m4"]
        await store.mark_buffered(ids[:2], prune_key=KEY)  # m0, m1 buffered -> may go
        rows = await store.db.fetchall("SELECT content, buffered FROM session_messages ORDER BY id")
        assert [tuple(r) for r in rows] == [("m2", 0), ("m3", 0), ("m4", 0)]
        await store.mark_buffered(ids[2:], prune_key=KEY)
        rows = await store.db.fetchall("SELECT content FROM session_messages ORDER BY id")
        assert [r[0] for r in rows] == ["m3", "m4"]  # exactly the window is kept
        assert await store.unbuffered(KEY) == []


async def test_a_row_never_for_memory_stays_so_and_is_pruned_like_a_buffered_one(
    tmp_path: Path, clock: ManualClock
) -> None:
    async with await SessionStore.open(tmp_path / "g.db", clock, window=2) as store:
        job = await store.append(KEY, channel="telegram", chat_id="42", role="user", content="job", owner="alice",
                                 buffered=True)
        ids = [await _add(store, "user", f"m{i}") for i in range(3)]
        assert not job.learn and [m.learn for m in await store.window(KEY)] == [True, True]
        await store.mark_buffered(ids[:1], learn=False)  # a turn that erased memory
        await store.mark_buffered([job.id, *ids[:2]])  # marking again never makes a row learnable
        rows = await store.db.fetchall("SELECT content, buffered FROM session_messages ORDER BY id")
        assert [tuple(r) for r in rows] == [("job", 2), ("m0", 2), ("m1", 1), ("m2", 0)]
        await store.prune(KEY)
        rows = await store.db.fetchall("SELECT content FROM session_messages ORDER BY id")
        assert [r[0] for r in rows] == ["m1", "m2"]
    async with await SessionStore.open(tmp_path / "g.db", clock, window=2) as store:
        assert [(m.content, m.learn) for m in await store.window(KEY)] == [("m1", True), ("m2", True)]


async def test_new_session_starts_empty_and_keeps_the_old_rows(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "g.db"
    async with await SessionStore.open(path, clock) as store:
        await _add(store, "user", "old")
        old = await store.current(KEY)
        new = await store.new_session(KEY, channel="telegram", chat_id="42")
        assert new != old and await store.window(KEY) == []
        await _add(store, "user", "fresh")
    async with await SessionStore.open(path, clock) as store:
        assert [m.content for m in await store.window(KEY)] == ["fresh"]
        rows = await store.db.fetchall("SELECT content FROM session_messages ORDER BY id")
        assert [r[0] for r in rows] == ["old", "fresh"]
        ended = await store.db.fetchall("SELECT ended_at FROM sessions WHERE key = ? ORDER BY id", (KEY,))
        assert ended[0][0] is not None and ended[1][0] is None


async def test_turn_carries_provenance(tmp_path: Path, clock: ManualClock) -> None:
    async with await SessionStore.open(tmp_path / "g.db", clock) as store:
        row = await store.append(
            KEY, channel="telegram", chat_id="42", role="user", content="hi", owner="alice", sender_id="7", message_id="99"
        )
        t = row.turn()
        assert (t.owner, t.channel, t.chat_id, t.role, t.sender_id, t.message_id) == ("alice", "telegram", "42", "user", "7", "99")
        assert t.at == clock.now()


async def test_cached_window_matches_sqlite(tmp_path: Path, clock: ManualClock) -> None:
    """The window is cached (write-through); it must always equal what
    gateway.db holds, through appends, buffering, pruning and /new."""
    async with await SessionStore.open(tmp_path / "g.db", clock, window=3, cache_rows=4) as store:
        fresh = SessionStore(store.db, clock, window=3, cache_rows=0)  # reads SQLite every time

        async def same(key: str = KEY) -> list[str]:
            cached = await store.window(key)
            fresh._current.clear()  # its own map of current sessions would miss /new
            assert cached == await fresh.window(key)
            return [m.content for m in cached]

        ids = [await _add(store, "user", "m0")]
        assert await same() == ["m0"]  # loaded and cached
        for i in range(1, 5):
            ids.append(await _add(store, "user", f"m{i}"))
            assert await same() == [f"m{j}" for j in range(max(0, i - 2), i + 1)]
        await store.mark_buffered(ids, prune_key=KEY)  # flags follow, pruned rows were older
        assert await same() == ["m2", "m3", "m4"] and all(m.buffered for m in await store.window(KEY))
        assert await store.window(KEY, limit=2) == await fresh.window(KEY, limit=2)
        for other in ("telegram:1", "telegram:2"):  # at most 4 rows cached: KEY (3) is evicted
            await _add(store, "user", "x", key=other)
            await store.window(other)
        assert KEY not in store._windows and await same() == ["m2", "m3", "m4"]
        await store.new_session(KEY, channel="telegram", chat_id="42")
        assert await same() == []
        await _add(store, "user", "fresh")
        assert await same() == ["fresh"]


async def test_erasing_history_reaches_the_cached_window(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "g.db"
    seconds = [100.0]  # the store's monotonic clock, moved by hand
    async with await SessionStore.open(path, clock, monotonic=lambda: seconds[0]) as store:
        await _add(store, "user", "my secret")
        assert [m.content for m in await store.window(KEY)] == ["my secret"]
        await store.forget_owner("alice")  # in this process: at once
        assert await store.window(KEY) == []
        await _add(store, "user", "again")
        assert [m.content for m in await store.window(KEY)] == ["again"]
        # `myclaw memory forget --user alice` from another process: within a second
        async with await SessionStore.open(path, clock) as cli:
            assert await cli.forget_owner("alice") == 1
        seconds[0] += 0.5  # the cached window stands until the once-a-second look at the file
        assert [m.content for m in await store.window(KEY)] == ["again"]
        seconds[0] += 0.5
        assert await store.window(KEY) == []


async def test_concurrent_chats_appends_share_statements_and_keep_their_rows(tmp_path: Path, clock: ManualClock) -> None:
    store = await SessionStore.open(tmp_path / "gateway.db", clock, window=4)
    try:
        keys = [f"telegram:{i}" for i in range(30)]
        for k in keys:  # every chat has its session
            await _add(store, "user", "hello", key=k)
        before = store._inserts.statements
        ids = await asyncio.gather(*(_add(store, "assistant", f"reply to {k}", key=k) for k in keys))
        assert store._inserts.statements - before < len(keys)  # group commit
        store._windows.clear()  # read SQLite, not the cache
        for k, i in zip(keys, ids, strict=True):
            last = (await store.window(k))[-1]
            assert (last.id, last.content, last.chat_id) == (i, f"reply to {k}", k.split(":")[1])
        await store.mark_buffered(ids)
        for k in keys:  # the replies are marked, the first messages are not
            assert [m.content for m in await store.unbuffered(k)] == ["hello"]
    finally:
        await store.close()


async def test_erasure_waits_for_appends_still_queued(tmp_path: Path, clock: ManualClock) -> None:
    store = await SessionStore.open(tmp_path / "gateway.db", clock, window=4)
    try:
        await _add(store, "user", "first")
        pending = asyncio.create_task(_add(store, "user", "my secret"))
        await asyncio.sleep(0)  # queued, not yet written
        assert await store.forget_owner("alice") >= 1
        await pending
        rows = await store.db.fetchall("SELECT content FROM session_messages")
        assert rows == []  # the queued append was written first, then erased
    finally:
        await store.close()


async def test_the_window_cache_holds_at_most_cache_rows(tmp_path: Path, clock: ManualClock) -> None:
    async with await SessionStore.open(tmp_path / "g.db", clock, window=4, cache_rows=10) as store:
        keys = [f"telegram:{i}" for i in range(8)]
        for turn in range(5):  # round-robin, as many busy chats are served
            for k in keys:
                await _add(store, "user", f"{k} says {turn}", key=k)
                window = await store.window(k)
                assert [m.content for m in window] == [f"{k} says {t}" for t in range(max(0, turn - 3), turn + 1)]
                cached = sum(len(rows) for _, rows in store._windows.values())
                assert cached == store._cached_rows <= 10
        assert store._windows  # the most recent chats stay cached


async def test_forgotten_words_are_gone_from_the_file(tmp_path: Path, clock: ManualClock) -> None:
    """secure_delete (memory/db.py) zeroes deleted rows whatever SQLite's
    build defaults to; with it off this fails."""
    folder = tmp_path / "g"
    folder.mkdir()
    async with await SessionStore.open(folder / "gateway.db", clock) as store:
        for i in range(50):
            await _add(store, "user", f"an ordinary line {i}")
            if i == 25:
                await _add(store, "user", "my door code is zqxjkv4711")
        await store.append(KEY, channel="telegram", chat_id="42", role="user", content="bob's line", owner="bob")
        await store.forget_owner("alice")
        assert [m.content for m in await store.window(KEY)] == ["bob's line"]
    assert on_disk(folder, "zqxjkv4711") == 0


async def _said(store: SessionStore, key: str, owner: str, text: str, message_id: str) -> None:
    chat = key.split(":", 1)[1]
    await store.append(key, channel="feishu", chat_id=chat, role="user", content=text, owner=owner,
                       sender_id=owner, message_id=message_id)
    await store.append(key, channel="feishu", chat_id=chat, role="assistant", content=f"re: {text}", owner=owner,
                       message_id=message_id)


async def test_a_database_of_the_first_schema_is_upgraded_and_its_rows_found_by_message_id(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A gateway.db written before edits and recalls (only the first
    migration) opens, gains the message-id index, and its old rows are what
    an edit or a recall finds."""
    from memory.db import Database

    path = tmp_path / "gateway.db"
    old = await Database.open(path, MIGRATIONS[:1])
    try:
        async with old.transaction() as conn:
            await conn.execute("INSERT INTO sessions (key, channel, chat_id, started_at) VALUES "
                               "('feishu:oc_1', 'feishu', 'oc_1', '2026-03-01T10:00:00Z')")
            await conn.execute(
                "INSERT INTO session_messages (session_id, role, content, owner, sender_id, message_id, created_at) "
                "VALUES (1, 'user', 'my number is 555-0199', 'ou_a', 'ou_a', 'om_1', '2026-03-01T10:00:00Z')"
            )
        assert int((await old.fetchone("PRAGMA user_version"))[0]) == 1
    finally:
        await old.close()
    async with await SessionStore.open(path, clock) as store:
        assert int((await store.db.fetchone("PRAGMA user_version"))[0]) == len(MIGRATIONS)
        indexes = {r[0] for r in await store.db.fetchall("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert "idx_session_messages_mid" in indexes
        plan = await store.db.fetchall(
            "EXPLAIN QUERY PLAN SELECT id FROM session_messages WHERE message_id = ? AND session_id = ?", ("om_1", 1)
        )
        assert any("idx_session_messages_mid" in str(tuple(r)) for r in plan)
        row = await store.find("feishu:oc_1", "om_1")
        assert row is not None and (row.content, row.owner) == ("my number is 555-0199", "ou_a")
    async with await SessionStore.open(path, clock) as store:  # reopening migrates nothing twice
        assert int((await store.db.fetchone("PRAGMA user_version"))[0]) == len(MIGRATIONS)


async def test_an_edited_message_shows_its_new_words_in_the_window(tmp_path: Path, clock: ManualClock) -> None:
    async with await SessionStore.open(tmp_path / "g.db", clock) as store:
        await _said(store, "feishu:oc_1", "ou_a", "my birthday is 3 May", "om_1")
        assert [m.content for m in await store.window("feishu:oc_1")][0] == "my birthday is 3 May"  # cached now
        row = await store.find("feishu:oc_1", "om_1")
        assert row is not None and row.role == "user"
        reply = await store.find("feishu:oc_1", "om_1", role="assistant")
        assert reply is not None and reply.content == "re: my birthday is 3 May"
        await store.revise(row.id, "my birthday is 4 May")
        window = [m.content for m in await store.window("feishu:oc_1")]
        assert window == ["my birthday is 4 May", "re: my birthday is 3 May"]
        assert await store.find("feishu:oc_1", "om_9") is None  # unknown id
        assert await store.find("feishu:oc_2", "om_1") is None  # the same id in another chat is not it


async def test_erasing_a_message_takes_its_reply_and_nothing_of_anyone_else(tmp_path: Path, clock: ManualClock) -> None:
    async with await SessionStore.open(tmp_path / "g.db", clock) as store:
        await _said(store, "feishu:oc_g", "ou_a", "my password is hunter2", "om_1")
        await _said(store, "feishu:oc_g", "ou_b", "bob was here", "om_2")
        old_session = await store.current("feishu:oc_g")
        await store.new_session("feishu:oc_g", channel="feishu", chat_id="oc_g")
        await _said(store, "feishu:oc_g", "ou_a", "a later message", "om_3")
        assert old_session != await store.current("feishu:oc_g")
        # Bob's id and a stranger claiming Alice's message: nothing goes.
        assert await store.erase_message("feishu:oc_g", "om_1", "ou_b") == 0
        assert await store.erase_message("feishu:oc_other", "om_1", "ou_a") == 0
        assert await store.erase_message("feishu:oc_g", "om_404", "ou_a") == 0
        # Alice's, in the session /new ended: her message and the reply to it.
        assert await store.erase_message("feishu:oc_g", "om_1", "ou_a") == 2
        rows = await store.db.fetchall("SELECT content FROM session_messages ORDER BY id")
        assert [r[0] for r in rows] == ["bob was here", "re: bob was here", "a later message", "re: a later message"]
        await store.db.checkpoint()
    assert on_disk(tmp_path, "hunter2") == 0


async def test_erasing_rows_by_id_takes_only_that_owners(tmp_path: Path, clock: ManualClock) -> None:
    """A scheduled job's prompt and reply carry no message id: an erasure
    that lands while they are written takes them by their rows."""
    async with await SessionStore.open(tmp_path / "g.db", clock) as store:
        prompt = await store.append(KEY, channel="telegram", chat_id="42", role="user", content="remind: PLUMBER77",
                                    owner="alice", sender_id="cron", buffered=True)
        reply = await store.append(KEY, channel="telegram", chat_id="42", role="assistant", content="PLUMBER77 at 5",
                                   owner="alice", buffered=True)
        bobs = await store.append(KEY, channel="telegram", chat_id="42", role="user", content="bob was here",
                                  owner="bob")
        assert await store.erase_rows([prompt.id, reply.id, bobs.id], "carol") == 0  # none of them hers
        assert await store.erase_rows([prompt.id, reply.id], "alice") == 2
        assert await store.erase_rows([], "alice") == 0
        assert [m.content for m in await store.window(KEY)] == ["bob was here"]
        await store.db.checkpoint()
    assert on_disk(tmp_path, "PLUMBER77") == 0


async def test_a_sender_name_is_kept_beside_the_words_across_a_restart(tmp_path: Path, clock: ManualClock) -> None:
    async with await SessionStore.open(tmp_path / "g.db", clock) as store:
        row = await store.append("telegram:-1", channel="telegram", chat_id="-1", role="user", content="hi",
                                 owner="telegram:7", sender_id="7", sender_name="Alice")
        assert (row.content, row.sender_name) == ("hi", "Alice")
    async with await SessionStore.open(tmp_path / "g.db", clock) as store:
        [again] = await store.window("telegram:-1")
        assert (again.content, again.sender_name) == ("hi", "Alice")


async def test_a_chat_moved_to_a_new_id_keeps_its_conversation_in_order(tmp_path: Path, clock: ManualClock) -> None:
    """A Telegram group upgraded to a supergroup: the history follows the
    new id, also when the new chat spoke first (the older lines come
    first), the cached window sees it at once, and a second move of the
    same chat finds nothing left."""
    old, new = "telegram:-500", "telegram:-100500"
    async with await SessionStore.open(tmp_path / "g.db", clock, window=10) as store:
        await _add(store, "user", "before", key=old)
        await _add(store, "assistant", "re: before", key=old)
        await store.window(old)  # cached
        await _add(store, "user", "first in the supergroup", key=new)
        assert [m.content for m in await store.window(new)] == ["first in the supergroup"]
        assert (await store.move_chat("telegram", "-500", "-100500"))["messages"] == 2
        window = await store.window(new)
        assert [m.content for m in window] == ["before", "re: before", "first in the supergroup"]
        assert {m.chat_id for m in window} == {"-100500"}
        assert await store.window(old) == []
        assert (await store.move_chat("telegram", "-500", "-100500"))["messages"] == 0
        await _add(store, "assistant", "re: first", key=new)
        assert [m.content for m in await store.window(new)][-2:] == ["first in the supergroup", "re: first"]


async def test_a_moved_chat_s_message_ids_stay_apart_from_the_new_chat_s(tmp_path: Path, clock: ManualClock) -> None:
    """The supergroup numbers its messages from 1: a moved row's id is the
    old chat's, so the new chat's message 5 finds only itself, and a moved
    reply waiting in the outbox quotes nothing there."""
    from gateway.bus import OutboundMessage
    from gateway.outbox import Outbox
    from gateway.sessions import moved_message_id

    old, new = "telegram:-500", "telegram:-100500"
    async with await SessionStore.open(tmp_path / "g.db", clock) as store:
        await store.append(old, channel="telegram", chat_id="-500", role="user", content="old five", owner="alice",
                           message_id="5")
        await store.append(old, channel="telegram", chat_id="-500", role="assistant", content="re: old five",
                           owner="alice", message_id="5")
        now = clock.now()
        outbox = Outbox(store.db)
        await outbox.add(OutboundMessage(channel="telegram", chat_id="-500", text="late", reply_to="5"),
                         owner="alice", created_at=now, next_attempt_at=now)
        await outbox.add(OutboundMessage(channel="telegram", chat_id="-100500", text="new", reply_to="2"),
                         owner="alice", created_at=now, next_attempt_at=now)
        await store.move_chat("telegram", "-500", "-100500")
        await store.append(new, channel="telegram", chat_id="-100500", role="user", content="new five", owner="alice",
                           message_id="5")
        assert [m.message_id for m in await store.window(new)] == [moved_message_id("-500", "5")] * 2 + ["5"]
        found = await store.find(new, "5")
        assert found is not None and found.content == "new five"
        kept = await store.find(new, moved_message_id("-500", "5"), role="assistant")
        assert kept is not None and kept.content == "re: old five"
        rows = await store.db.fetchall("SELECT text, reply_to FROM outbox ORDER BY id")
        assert [tuple(r) for r in rows] == [("late", ""), ("new", "2")]


async def test_a_moved_chat_takes_its_rows_in_every_gateway_table(tmp_path: Path, clock: ManualClock) -> None:
    """The chat's replies waiting in the outbox, the bot's replies a quote
    or recall finds and its draft messages go to the new id with the
    history; another channel's chat of the same id stays."""
    from channels.feishu.drafts import StoredDraft
    from channels.feishu.replies import SentPart
    from gateway.burstcomments import BurstComments
    from gateway.bus import OutboundMessage
    from gateway.draftmessages import DraftMessages
    from gateway.outbox import Outbox
    from gateway.sentreplies import SentReplies

    async with await SessionStore.open(tmp_path / "g.db", clock) as store:
        now = clock.now()
        outbox = Outbox(store.db)
        for channel in ("telegram", "feishu"):
            await outbox.add(OutboundMessage(channel=channel, chat_id="-500", text="late reply"), owner="telegram:7",
                             created_at=now, next_attempt_at=now)
            await SentReplies(store.db, channel).write([SentPart("11", "-500", "12", 1.0)], expired_before=0.0)
            await DraftMessages(store.db, channel).put(StoredDraft(f"k-{channel}", "-500", "13", 1.0), expired_before=0.0)
        comments = BurstComments(store.db, "telegram", clock=lambda: 100.0)
        await comments.keep("-500", "20", [("21", 5)])
        moved = await store.move_chat("telegram", "-500", "-100500")
        assert moved == {"messages": 0, "outbox": 1, "sent_replies": 1, "draft_messages": 1}
        assert set(await outbox.chats()) == {("telegram", "-100500"), ("feishu", "-500")}
        [part] = await SentReplies(store.db, "telegram").load(0.0)
        assert part == SentPart("11", "-100500", "12", 1.0)
        draft = await DraftMessages(store.db, "telegram").get("k-telegram")
        assert draft is not None and draft.chat_id == "-100500"
        # Burst comments stay: an edit of one names the old chat, and their
        # ids under the new one would be the supergroup's other messages.
        assert await comments.find("-500", "21") == ("20", [("21", 5)])
        assert await comments.find("-100500", "21") is None
        [feishu] = await SentReplies(store.db, "feishu").load(0.0)
        assert feishu.chat_id == "-500"
        again = await store.move_chat("telegram", "-500", "-100500")
        assert set(again.values()) == {0}


async def test_an_apology_is_recorded_on_the_users_row_cached_or_not(tmp_path: Path, clock: ManualClock) -> None:
    from gateway.sessions import APOLOGISED

    async with await SessionStore.open(tmp_path / "g.db", clock) as store:
        await store.append(KEY, channel="telegram", chat_id="42", role="user", content="hi?", owner="alice",
                           message_id="7", context='{"g": false}')
        await store.window(KEY)  # cached
        assert await store.mark_apologised(KEY, "7") == 1
        assert await store.mark_apologised(KEY, "8") == 0  # never stored
        assert await store.mark_apologised("telegram:other", "7") == 0  # another chat's id
        assert [r.context for r in await store.window(KEY)] == [APOLOGISED]
        [row] = await store.unanswered_last("")
        assert row.context == APOLOGISED


async def test_per_chat_maps_are_capped_and_a_forgotten_chat_reads_its_session_again(
    tmp_path: Path, clock: ManualClock
) -> None:
    # Months of chats must not mean an entry per chat ever seen.
    async with await SessionStore.open(tmp_path / "g.db", clock, window=2, chats_kept=4) as store:
        first = await store.new_session(KEY, channel="telegram", chat_id="42")
        ids = [await _add(store, "user", "m0")]
        await store.mark_buffered(ids, prune_key=KEY)
        for chat in range(20):
            key = f"telegram:{chat}"
            await store.mark_buffered([await _add(store, "user", "hi", key=key)], prune_key=key)
        assert len(store._current) <= 4 and len(store._unpruned) <= 4
        assert KEY not in store._current
        await _add(store, "user", "m1")  # the chat forgotten above goes on in its own session
        assert await store.current(KEY) == first
        assert [m.content for m in await store.window(KEY)] == ["m0", "m1"]
