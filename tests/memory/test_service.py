from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from memory import Category, ManualClock, MemoryEngine, NewMemory, Provenance
from memory.backend import MemoryBackend, Turn
from memory.buffer import NOT_GONE
from memory.changelog import read_log
from memory.extraction import ExtractionService
from memory.llm import MemoryLLM
from memory.service import SqliteMemory
from tests.disk import on_disk
from tests.fakes.openai_server import FakeOpenAI

from ._writepath import fake, llm, reply, user_prompt  # noqa: F401


async def test_is_a_backend(engine: MemoryEngine) -> None:
    assert isinstance(SqliteMemory(engine), MemoryBackend)


async def test_group_chat_gets_no_private_profile_or_credentials(engine: MemoryEngine) -> None:
    mem = SqliteMemory(engine)
    await engine.add(NewMemory(owner="alice", tier=1, content="Alice lives in Hangzhou", category=Category.IDENTITY))
    await engine.add(NewMemory(owner="_global", tier=1, content="Team standup is at 10:00", category=Category.CONFIG))
    await engine.add(NewMemory(owner="alice", content="Alice's server password is hunter2", category=Category.CREDENTIAL))
    assert "Hangzhou" in await mem.profile("alice")
    group = await mem.profile("alice", private=False)
    assert "Hangzhou" not in group and "standup" in group
    assert [h.content for h in await mem.recall("alice", "server password")] == ["Alice's server password is hunter2"]
    assert await mem.recall("alice", "server password", private=False) == []


async def test_group_recall_does_not_bring_the_private_profile_back(engine: MemoryEngine) -> None:
    """The profile (Tier 1) is left out of a group's system prompt; recall
    and the memory_search tool must not put its entries in front of the
    group either, while the asker's Tier 2 facts and shared entries come."""
    mem = SqliteMemory(engine)
    secret = await engine.add(NewMemory(owner="alice", tier=1, content="Alice is pregnant and has not told her team yet",
                                        category=Category.IDENTITY))
    shared = await engine.add(NewMemory(owner="_global", tier=1, content="The team offsite is in Hangzhou",
                                        category=Category.CONFIG))
    fact = await engine.add(NewMemory(owner="alice", content="Alice told her team about the Hangzhou offsite plan",
                                      category=Category.DECISION, provenance=Provenance(channel="feishu", chat_id="oc_team")))
    assert secret.id in {h.id for h in await mem.search("alice", "Alice team", private=True)}
    team = ("feishu", "oc_team")
    recalled = {h.id for h in await mem.recall("alice", "what did Alice tell her team about Hangzhou?", private=False,
                                               chat=team)}
    found = {h.id for h in await mem.search("alice", "Alice team Hangzhou", private=False, chat=team)}
    assert secret.id not in recalled and secret.id not in found
    # The shared entry is in the group's own prompt, so recall spends no place on it; search finds it.
    assert fact.id in recalled and shared.id not in recalled and {fact.id, shared.id} <= found


async def test_a_named_period_recalls_its_events_with_the_facts_in_the_private_chat_only(
    engine: MemoryEngine, clock: ManualClock
) -> None:
    """Recall and search read the period on the user's calendar: at 01:00
    Monday in Shanghai, 上周 holds Sunday's chat; recall gives it a place
    next to the facts, a group none, a message naming no time none."""
    from zoneinfo import ZoneInfo

    mem = SqliteMemory(engine)
    clock.set("2026-03-01T17:00:00Z")
    shanghai = ZoneInfo("Asia/Shanghai")
    sunday = await engine.add_event("alice", "2026-03-01", "聊了周日去香山爬山")
    fact = await engine.add(NewMemory(owner="alice", content="Alice 喜欢爬山", category=Category.DECISION))
    recalled = await mem.recall("alice", "上周我们聊了什么爬山的事？", tz=shanghai)
    assert {("event", sunday.id), ("memory", fact.id)} <= {(h.kind, h.id) for h in recalled}
    assert ("event", sunday.id) in {(h.kind, h.id) for h in await mem.search("alice", "上周聊了什么", tz=shanghai)}
    assert all(h.kind == "memory" for h in await mem.recall("alice", "上周我们聊了什么爬山的事？", tz=shanghai,
                                                            private=False, chat=("feishu", "oc_team")))
    assert all(h.kind == "memory" for h in await mem.recall("alice", "我们聊了什么爬山的事？", tz=shanghai))


async def test_period_events_and_facts_are_merged_by_score_a_strong_fact_keeps_its_place(
    engine: MemoryEngine, clock: ManualClock
) -> None:
    """Four facts that answer the question and three of last week's chats
    that share only its date: the facts keep their places (the events once
    took three of five places before the facts were ranked, pushing two of
    them out); the events are still at most three."""
    mem = SqliteMemory(engine)
    clock.set("2026-03-02T09:00:00Z")  # Monday of last week
    for i, day in enumerate(("2026-03-02", "2026-03-03", "2026-03-04")):
        await engine.add_event("alice", day, f"闲聊了天气和午饭吃什么，第{i + 1}次")
    facts = [await engine.add(NewMemory(owner="alice", content=c, category=Category.DECISION)) for c in (
        "数据库迁移定在周五晚上做", "数据库迁移前要先备份生产库", "数据库迁移由 Bob 负责回滚方案",
        "数据库迁移用 pg_dump 导出")]
    clock.set("2026-03-11T09:00:00Z")  # Wednesday, this week
    recalled = await mem.recall("alice", "上周定的数据库迁移怎么安排的？")
    assert {h.id for h in recalled if h.kind == "memory"} >= {f.id for f in facts}, recalled
    assert sum(h.kind == "event" for h in recalled) <= 3
    # Ranked by one score: no event above a fact that scored more.
    scores = [h.score for h in recalled]
    assert scores == sorted(scores, reverse=True)


async def test_facts_in_by_their_date_alone_give_way_to_the_periods_chats(
    engine: MemoryEngine, clock: ManualClock
) -> None:
    """"上周我们聊了什么？" shares no word with last week's facts either:
    they are in by their date as the summaries are, and the summaries are
    the answer. A long summary (a lower score: its length) is not pushed
    out by a fact of no word of the question."""
    mem = SqliteMemory(engine)
    for i, c in enumerate(["Alice 在学吉他", "Alice 的猫叫 Momo", "Alice 想换工作", "Alice 周末去爬山",
                           "Alice 下个月去日本", "Alice 用 Hugo 写博客"]):
        clock.set(f"2026-03-0{2 + i % 5}T09:00:00Z")
        await engine.add(NewMemory(owner="alice", content=c, category=Category.DECISION))
    events = [await engine.add_event("alice", day, s) for day, s in (
        ("2026-03-02", "讨论了把博客迁移到 Hugo 的步骤，以及主题的选择和评论插件"),
        ("2026-03-04", "计划周末和朋友去香山爬山"), ("2026-03-06", "聊了跳槽去一家新公司的打算"))]
    clock.set("2026-03-11T09:00:00Z")
    recalled = await mem.recall("alice", "上周我们聊了什么？")
    assert {h.id for h in recalled if h.kind == "event"} == {e.id for e in events}, recalled
    assert [h.kind for h in recalled] == ["event"] * 3 + ["memory"] * 2


async def test_period_events_take_the_places_of_weaker_facts(engine: MemoryEngine, clock: ManualClock) -> None:
    """The other way: last week's chats about the thing asked outrank facts
    that share one word of it; still at most three of them."""
    mem = SqliteMemory(engine)
    clock.set("2026-03-02T09:00:00Z")
    events = [await engine.add_event("alice", day, f"讨论了博客迁移到 Hugo 的步骤（{day}）")
              for day in ("2026-03-02", "2026-03-03", "2026-03-04", "2026-03-05")]
    for c in ("Alice 的博客主题是深色的", "Alice 每周写一篇博客", "Alice 的博客用了评论插件",
              "Alice 的博客有 RSS", "Alice 博客的域名在 Namecheap 买的"):
        await engine.add(NewMemory(owner="alice", content=c, category=Category.DECISION))
    clock.set("2026-03-11T09:00:00Z")
    recalled = await mem.recall("alice", "上周我们讨论的博客迁移到 Hugo 的步骤是什么？")
    kinds = [h.kind for h in recalled]
    assert kinds[:3] == ["event"] * 3 and kinds.count("event") == 3, recalled
    assert {h.id for h in recalled if h.kind == "event"} <= {e.id for e in events}


async def test_a_busy_week_says_how_many_more_days_it_holds(engine: MemoryEngine, clock: ManualClock) -> None:
    """Six days of chats last week: three summaries fit the block, and the
    block says that three more days were chatted on (memory_search reads
    them), within the block's budget."""
    from memory.format import format_hits

    mem = SqliteMemory(engine)
    days = ("2026-03-02", "2026-03-03", "2026-03-04", "2026-03-05", "2026-03-06", "2026-03-07")
    for i, day in enumerate(days):
        await engine.add_event("alice", day, f"聊了第{i + 1}件事")
    clock.set("2026-03-11T09:00:00Z")
    recalled = await mem.recall("alice", "上周我们聊了什么？")
    assert sum(h.kind == "event" for h in recalled) == 3
    block = format_hits(recalled, zh=True)
    assert "另有 3 天" in block, block
    assert "3 more days" in format_hits(recalled)
    # A week of three days says nothing more.
    clock.set("2026-03-18T09:00:00Z")
    await engine.add_event("alice", "2026-03-10", "聊了跑步")
    recalled = await mem.recall("alice", "上周我们聊了什么？")
    assert "另有" not in format_hits(recalled, zh=True)


async def test_recently_brings_the_last_two_weeks_chats_gently(engine: MemoryEngine, clock: ManualClock) -> None:
    """"最近我们聊了什么？" gets the chats of the last two weeks, not older
    ones; "最近跑步膝盖疼" (a statement with 最近 in it) keeps the facts that
    answer it first and ranks the facts as it did without the word: a loose
    word is half a term of events and no term of facts."""
    mem = SqliteMemory(engine)
    clock.set("2026-02-10T09:00:00Z")
    old = await engine.add_event("alice", "2026-02-10", "聊了春节回老家的安排")
    knee = await engine.add(NewMemory(owner="alice", content="Alice 跑步时左膝盖会疼", category=Category.IDENTITY))
    shoes = await engine.add(NewMemory(owner="alice", content="Alice 上个月买了新跑鞋", category=Category.DECISION))
    clock.set("2026-03-05T09:00:00Z")
    recent = [await engine.add_event("alice", day, f"聊了{what}") for day, what in
              (("2026-03-01", "周末去香山爬山"), ("2026-03-04", "把博客搬到 Hugo"))]
    clock.set("2026-03-11T09:00:00Z")
    asked = await mem.recall("alice", "最近我们聊了什么？")
    assert {h.id for h in asked if h.kind == "event"} == {e.id for e in recent}, asked
    assert old.id not in {h.id for h in asked if h.kind == "event"}
    said = await mem.recall("alice", "我最近跑步膝盖疼怎么办")
    assert (said[0].kind, said[0].id) == ("memory", knee.id), said
    facts = await mem.retriever.retrieve("alice", "我最近跑步膝盖疼怎么办", limit=5)
    plain = await mem.retriever.retrieve("alice", "我跑步膝盖疼怎么办", limit=5)
    assert [h.id for h in facts] == [h.id for h in plain] and shoes.id in {h.id for h in facts}
    assert [h.id for h in await mem.recall("alice", "离我最近的医院在哪")
            if h.kind == "event"] == []  # nearest, not recently


async def test_remember_twice_reinforces_instead_of_duplicating(engine: MemoryEngine) -> None:
    mem = SqliteMemory(engine)
    a = await mem.remember("u", "User prefers Chinese", provenance=Provenance(channel="telegram"), importance=0.6)
    b = await mem.remember("u", "user prefers  chinese", provenance=Provenance(channel="telegram"), importance=0.9)
    assert a.id == b.id
    rows = await engine.list_memories("u")
    assert len(rows) == 1 and rows[0].importance == 0.9 and rows[0].access_count == 1


async def test_buffer_is_durable_idempotent_and_notifies(engine: MemoryEngine) -> None:
    mem = SqliteMemory(engine)
    seen: list[str] = []
    mem.on_buffered(seen.append)
    turn = Turn(owner="u", channel="telegram", chat_id="1", role="user", content="我搬到上海了", message_id="9")
    await mem.buffer([turn, Turn(owner="u", channel="telegram", chat_id="1", role="assistant", content="好的", message_id="9")])
    await mem.buffer([turn])  # a retried write does not duplicate
    rows = await engine.db.fetchall("SELECT role, content, token_count FROM extraction_buffer ORDER BY id")
    assert [tuple(r) for r in rows] == [("user", "我搬到上海了", 6), ("assistant", "好的", 2)]
    assert seen == ["u", "u"]


async def test_forget_erases_only_the_users_own_rows_and_their_waiting_source_lines(engine: MemoryEngine) -> None:
    mem = SqliteMemory(engine)
    said = "remember my door code is 4711"
    door = await mem.remember("alice", "Alice's door code is 4711", provenance=Provenance(channel="telegram"), source_text=said)
    tea = await mem.remember("alice", "Alice drinks green tea", provenance=Provenance(channel="telegram"))
    bobs = await mem.remember("bob", "Bob's door code is 1234", provenance=Provenance(channel="telegram"))
    shared = await mem.remember("_global", "The office door code is 9999", provenance=Provenance(channel="telegram"))
    event = await engine.add_event("alice", "2026-03-01", "Alice shared her door code")
    # The message the fact was saved from still waits for extraction: it must not bring the fact back.
    await mem.buffer([Turn(owner="alice", channel="telegram", chat_id="1", role="user", content=said, message_id="1"),
                      Turn(owner="alice", channel="telegram", chat_id="1", role="assistant",
                           content="Saved: Alice's door code is 4711.", message_id="1"),
                      Turn(owner="alice", channel="telegram", chat_id="1", role="user", content="what's the weather?", message_id="2"),
                      Turn(owner="alice", channel="telegram", chat_id="1", role="user", content="my", message_id="3")])

    cited = f"[e{event.id} · 2026-03-01 · telegram]"  # as the model copies it from a citation
    done = await mem.forget("alice", [door.ref, cited, bobs.ref, shared.ref, "m999", "nonsense"])
    assert [h.ref for h in done.erased] == [door.ref, f"e{event.id}"]
    assert done.shared == [shared.ref]
    assert done.unknown == ["nonsense", bobs.ref, "m999"]  # another user's id looks like no id at all
    assert done.buffered_lines == 2  # the message it was saved from, and the reply repeating it
    assert await engine.get(door.id) is None and await engine.get(tea.id) is not None
    assert await engine.get(bobs.id) is not None and await engine.get(shared.id) is not None  # never another's, never shared
    assert await engine.events("alice") == []
    rows = await engine.db.fetchall("SELECT content FROM extraction_buffer WHERE owner = 'alice'")
    assert [r[0] for r in rows] == ["what's the weather?", "my"]  # a short line inside the source is not it
    assert [h.content for h in await mem.recall("alice", "door code")] == ["The office door code is 9999"]


async def test_forget_takes_the_facts_older_rows_and_the_core_memory_built_on_it(engine: MemoryEngine) -> None:
    mem = SqliteMemory(engine)
    berlin = await engine.add(NewMemory(owner="alice", content="Alice lives in Berlin", category=Category.IDENTITY))
    said = await engine.add(NewMemory(owner="alice", content="Alice moved to Munich in May", category=Category.IDENTITY))
    also = await engine.add(NewMemory(owner="alice", content="Alice's new flat is in Munich", category=Category.IDENTITY))
    home = await engine.add(NewMemory(owner="alice", content="Alice lives in Munich since May", category=Category.IDENTITY))
    await engine.set_status(berlin.id, "superseded", superseded_by=said.id)  # an update replaced it
    for old in (said, also):  # a weekly merge folded these two into `home`
        await engine.set_status(old.id, "archived", superseded_by=home.id)
    tea = await engine.add(NewMemory(owner="alice", content="Alice drinks green tea", category=Category.IDENTITY))
    # Core Memory: one entry the weekly refresh drew from `home`, one repeating it, one about tea.
    drawn = await engine.add(NewMemory(owner="alice", tier=1, content="Lives in Munich", category=Category.IDENTITY,
                                       provenance=Provenance(refs=("weekly", f"m:{home.id}"))))
    same = await engine.add(NewMemory(owner="alice", tier=1, content="Alice lives in Munich since May",
                                      category=Category.IDENTITY))
    teas = await engine.add(NewMemory(owner="alice", tier=1, content="Drinks green tea", category=Category.IDENTITY,
                                      provenance=Provenance(refs=("weekly", f"m:{tea.id}"))))
    # Said in the same message as the move; not built on it, so it stays.
    job = await engine.add(NewMemory(owner="alice", tier=1, content="Alice works as a nurse at Klinikum", category=Category.IDENTITY))
    await engine.update(home.id, source_text="I moved to Munich in May, Alice works as a nurse at Klinikum now")
    bobs = await engine.add(NewMemory(owner="bob", tier=1, content="Lives in Munich", category=Category.IDENTITY,
                                      provenance=Provenance(refs=("weekly", f"m:{home.id}"))))  # forged: not alice's

    done = await mem.forget("alice", [f"m{home.id}"])
    assert [h.ref for h in done.erased] == [f"m{home.id}"]
    assert done.versions == 3 and sorted(h.id for h in done.entries) == [drawn.id, same.id]
    assert done.kept == []
    left = {m.id for m in await engine.list_memories("alice", status=None, limit=100)}
    left |= {m.id for m in await engine.profile("alice", include_global=False, limit=100)}
    assert left == {tea.id, teas.id, job.id}
    assert await engine.get(bobs.id) is not None
    assert await mem.profile("alice") == f"- [m{job.id} · 2026-03-01] Alice works as a nurse at Klinikum\n- [m{teas.id} · 2026-03-01] Drinks green tea"
    assert any("Berlin" in t for t in done.texts) and any(t == "Lives in Munich" for t in done.texts)


async def test_forgetting_a_core_memory_entry_names_the_facts_it_was_drawn_from(engine: MemoryEngine) -> None:
    mem = SqliteMemory(engine)
    first = await engine.add(NewMemory(owner="alice", content="Alice is vegetarian", category=Category.IDENTITY))
    now = await engine.add(NewMemory(owner="alice", content="Alice has been vegetarian since 2019",
                                     category=Category.IDENTITY))
    await engine.set_status(first.id, "archived", superseded_by=now.id)  # merged after the entry was written
    other = await engine.add(NewMemory(owner="alice", content="Alice avoids fish", category=Category.IDENTITY))
    entry = await engine.add(NewMemory(owner="alice", tier=1, content="Vegetarian, no fish", category=Category.IDENTITY,
                                       provenance=Provenance(refs=("weekly", f"m:{first.id}", f"m:{other.id}", "m:999"))))
    done = await mem.forget("alice", [f"m{entry.id}"])
    assert [h.ref for h in done.erased] == [f"m{entry.id}"] and done.entries == [] and done.versions == 0
    # Kept (the user may mean only the summary), but named, each as it stands now.
    assert [h.ref for h in done.kept] == [f"m{now.id}", f"m{other.id}"]
    assert await engine.get(now.id) is not None and await engine.get(other.id) is not None


async def test_forget_names_the_events_a_fact_came_from_and_the_facts_drawn_from_an_event(engine: MemoryEngine) -> None:
    mem = SqliteMemory(engine)
    batch = Provenance(channel="telegram", chat_id="1", refs=("buf:7", "buf:8"))
    code = await engine.add(NewMemory(owner="alice", content="Alice's door code is 4711", provenance=batch))
    said = await engine.add_event("alice", "2026-03-01", "Alice gave the bot her door code", provenance=batch)
    other = await engine.add_event("alice", "2026-03-01", "Alice asked about the weather",
                                   provenance=Provenance(refs=("buf:9",)))
    # A fact the daily compression drew from the day's events.
    daily = await engine.add(NewMemory(owner="alice", content="Alice's door has a keypad",
                                       provenance=Provenance(refs=(f"event:{said.id}", f"event:{other.id}"))))
    await engine.add_event("bob", "2026-03-01", "Bob's batch", provenance=batch)  # forged: not alice's

    done = await mem.forget("alice", [f"m{code.id}"])
    assert [h.ref for h in done.kept] == [f"e{said.id}"]  # the same messages; not another batch, not bob's
    done = await mem.forget("alice", [f"m{daily.id}"])
    assert [h.ref for h in done.kept] == [f"e{said.id}", f"e{other.id}"]  # the day it was compressed from

    again = await engine.add(NewMemory(owner="alice", content="Alice's door code is 4711", provenance=batch))
    done = await mem.forget("alice", [f"e{said.id}"])
    assert [h.ref for h in done.erased] == [f"e{said.id}"] and [h.ref for h in done.kept] == [f"m{again.id}"]
    assert await engine.get(again.id) is not None  # named, not erased on the model's behalf
    assert [e.id for e in await engine.events("alice")] == [other.id] and len(await engine.events("bob")) == 1


# -- edited and recalled messages ---------------------------------------------------------


def _turn(owner: str, text: str, mid: str, *, role: str = "user", chat: str = "1") -> Turn:
    return Turn(owner=owner, channel="telegram", chat_id=chat, role=role, content=text, message_id=mid,
                sender_id=owner if role == "user" else "")


def _fact(content: str, lines: list[int], updates: int | None = None) -> dict[str, Any]:
    return {"content": content, "category": "identity", "importance": 1, "lines": lines, "updates": updates}


async def _waiting(engine: MemoryEngine) -> list[tuple[str, str, str]]:
    rows = await engine.db.fetchall(
        f"SELECT owner, message_id, content FROM extraction_buffer WHERE {NOT_GONE} ORDER BY id"
    )
    return [tuple(r) for r in rows]  # type: ignore[misc]


async def test_an_edit_of_a_waiting_message_replaces_its_line(
    engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    mem = SqliteMemory(engine)
    svc = ExtractionService(engine, llm)
    await mem.buffer([_turn("alice", "my birthday is 3 May", "1"), _turn("alice", "Noted.", "1", role="assistant")])
    assert await mem.revise(_turn("alice", "my birthday is 4 May", "1")) == "replaced"
    assert await _waiting(engine) == [("alice", "1", "Noted."), ("alice", "1", "my birthday is 4 May")]
    fake.queue_reply(reply([_fact("Alice's birthday is 4 May", [2])]))
    [rep] = await svc.flush_now("alice")
    assert rep.ok and "3 May" not in user_prompt(fake.requests[-1])
    [m] = await engine.list_memories("alice")
    assert m.content == "Alice's birthday is 4 May" and m.provenance.message_ids == ("1",)


async def test_an_edit_racing_an_extraction_of_the_old_words_writes_nothing_old(
    engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    mem = SqliteMemory(engine)
    edited = asyncio.Event()

    async def step(name: str, owner: str) -> None:
        if name == "llm" and not edited.is_set():  # the model read "3 May"; the user edits now
            edited.set()
            assert await mem.revise(_turn("alice", "my birthday is 4 May", "1")) == "replaced"

    svc = ExtractionService(engine, llm, on_step=step)
    await mem.buffer([_turn("alice", "my birthday is 3 May", "1")])
    fake.queue_reply(reply([_fact("Alice's birthday is 3 May", [1])]))
    fake.queue_reply(reply([_fact("Alice's birthday is 4 May", [1])]))
    first, second = await svc.flush_now("alice")  # the batch of old words writes nothing; the new line is read
    assert first.skipped and second.ok
    assert "3 May" not in user_prompt(fake.requests[-1])
    assert [m.content for m in await engine.list_memories("alice")] == ["Alice's birthday is 4 May"]


async def test_an_edit_of_an_extracted_message_is_a_correction_that_supersedes(
    engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    mem = SqliteMemory(engine)
    svc = ExtractionService(engine, llm)
    await mem.buffer([_turn("alice", "my birthday is 3 May", "1"), _turn("alice", "Noted.", "1", role="assistant")])
    fake.queue_reply(reply([_fact("Alice's birthday is 3 May", [1])]))
    await svc.flush_now("alice")
    [old] = await engine.list_memories("alice")

    assert await mem.revise(_turn("alice", "my birthday is 4 May", "1")) == "corrected"
    assert await _waiting(engine) == [("alice", "1#edited", "(edited) my birthday is 4 May")]
    # Edited again before extraction: still one correction, the latest words.
    assert await mem.revise(_turn("alice", "my birthday is 5 May", "1")) == "replaced"
    assert await _waiting(engine) == [("alice", "1#edited", "(edited) my birthday is 5 May")]

    fake.queue_reply(reply([_fact("Alice's birthday is 5 May", [1], updates=1)]))
    [rep] = await svc.flush_now("alice")
    assert rep.ok and rep.superseded
    body = fake.requests[-1]["messages"]
    assert '"(edited)"' in body[0]["content"]  # the prompt says what a correction is
    assert "Alice's birthday is 3 May" in user_prompt(fake.requests[-1])  # offered as the memory it corrects
    [new] = await engine.list_memories("alice")
    assert new.content == "Alice's birthday is 5 May" and new.provenance.message_ids == ("1",)
    assert (await engine.get(old.id)).status.value == "superseded"


async def test_a_correction_is_shown_the_memory_it_corrects_among_many_alike(
    engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """Found by scripts/walk_chaos.py: the corrected message's own fact was
    found by the correction's words only, five a line; among facts sharing
    more of them it was not shown, the model could not say it is replaced,
    and both stayed current. The fact citing the edited message is known by
    its provenance and is offered first."""
    mem = SqliteMemory(engine)
    svc = ExtractionService(engine, llm)
    await mem.buffer([_turn("alice", "my bus goes at nine", "1")])
    fake.queue_reply(reply([_fact("Alice's bus goes at nine", [1])]))
    await svc.flush_now("alice")
    [old] = await engine.list_memories("alice")
    for n in range(2, 10):  # what the correction's words find first
        await engine.add(NewMemory(owner="alice", content=f"Alice's train to Lisbon leaves at ten from platform {n}",
                                   category=Category.EVENT, provenance=Provenance(channel="telegram", chat_id="1",
                                                                                  message_ids=(str(n),))))
    assert await mem.revise(_turn("alice", "my train to Lisbon leaves at ten", "1")) == "corrected"
    fake.queue_reply(reply([_fact("Alice's train to Lisbon leaves at ten", [1], updates=1)]))
    [rep] = await svc.flush_now("alice")
    assert rep.ok
    shown = user_prompt(fake.requests[-1])
    assert "1. [identity, 1.0] Alice's bus goes at nine" in shown, shown
    assert (await engine.get(old.id)).status.value == "superseded"
    assert [m.content for m in await engine.list_memories("alice") if m.provenance.message_ids == ("1",)] == [
        "Alice's train to Lisbon leaves at ten"]


async def test_an_edit_memory_never_had_changes_nothing(engine: MemoryEngine) -> None:
    mem = SqliteMemory(engine)
    await mem.buffer([_turn("bob", "my birthday is 3 May", "1")])
    assert await mem.revise(_turn("alice", "my birthday is 4 May", "1")) == "untracked"  # Bob's id, not hers
    assert await mem.revise(_turn("bob", "my birthday is 4 May", "1", chat="2")) == "untracked"  # another chat
    assert await mem.revise(_turn("bob", "whatever", "404")) == "untracked"
    assert await _waiting(engine) == [("bob", "1", "my birthday is 3 May")]


async def test_a_recall_erases_what_was_drawn_from_that_message_only(
    engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM, tmp_path: Path
) -> None:
    mem = SqliteMemory(engine)
    svc = ExtractionService(engine, llm)
    said = "my phone number is 555-0199, call me after six"
    await mem.buffer([_turn("alice", said, "1"), _turn("alice", "Noted.", "1", role="assistant"),
                      _turn("alice", "I work at the harbour office", "2"),
                      _turn("alice", "Nice.", "2", role="assistant")])
    fake.queue_reply(reply([_fact("Alice's phone number is 555-0199", [1, 2]),
                            _fact("Alice works at the harbour office", [3]),
                            _fact("Alice can be called after six at the harbour office", [1, 3])]))
    await svc.flush_now("alice")
    # Saved with the tool during the turn (its provenance is the message).
    await mem.remember("alice", "Call Alice after six", provenance=Provenance(channel="telegram", chat_id="1",
                       message_ids=("1",)), source_text=said)
    # Bob said the same words in his own chat under the same message id.
    bobs = await mem.remember("bob", "Bob's phone number is 555-0199", source_text=said,
                              provenance=Provenance(channel="telegram", chat_id="7", message_ids=("1",)))
    await mem.buffer([_turn("alice", said, "1", chat="9")])  # and Alice herself, in another chat

    done = await mem.retract("telegram", "1", "1", owner="alice", text=said)
    assert done.owners == ["alice"]
    assert sorted(h.content for h in done.erased if h.kind == "memory") == [
        "Alice can be called after six at the harbour office", "Alice's phone number is 555-0199",
        "Call Alice after six"]
    assert [m.content for m in await engine.list_memories("alice")] == ["Alice works at the harbour office"]
    assert [e.summary for e in await engine.events("alice")] == ["a chat"]  # the day's summary of both messages stays
    assert [h.kind for h in done.kept] == ["event"]  # named, not erased (the harbour fact never cited it)
    assert (await engine.get(bobs.id)).content == "Bob's phone number is 555-0199"
    assert await _waiting(engine) == [("alice", "1", said)]  # the other chat's message is another message
    log = await read_log(engine.db, owner="alice")
    recalls = [e for e in log if e.action == "recall"]
    assert len(recalls) == 3 and not any("555" in e.detail for e in log)
    await mem.retract("telegram", "9", "1", owner="alice", text=said)
    # Alice's erased facts are gone from the files too; Bob's row is what is left of the words.
    assert [on_disk(tmp_path, w) for w in ("Alice's phone", "Call Alice after six", "Alice can be called")] == [0, 0, 0]
    assert on_disk(tmp_path, "555-0199") == 2  # Bob's fact and the words it was drawn from


async def test_a_recall_drops_the_waiting_lines_and_takes_the_facts_past(engine: MemoryEngine) -> None:
    mem = SqliteMemory(engine)
    old = await mem.remember("alice", "Alice lives in Beijing", provenance=Provenance(channel="telegram", chat_id="1",
                             message_ids=("0",)))
    new = await mem.remember("alice", "Alice moved to Shanghai", provenance=Provenance(channel="telegram", chat_id="1",
                             message_ids=("3",)))
    await engine.set_status(old.id, "superseded", superseded_by=new.id)
    await mem.buffer([_turn("alice", "wrong chat, ignore", "4"), _turn("alice", "OK", "4", role="assistant"),
                      _turn("alice", "keep this", "5")])
    done = await mem.retract("telegram", "1", "4", owner=None)  # whose? the lines say
    assert done.owners == ["alice"] and done.buffered_lines == 2 and done.erased == []
    assert [r[2] for r in await _waiting(engine)] == ["keep this"]
    done = await mem.retract("telegram", "1", "3", owner=None)
    assert done.owners == ["alice"] and done.versions == 1
    assert await engine.list_memories("alice", status=None) == []
    assert (await mem.retract("telegram", "1", "404", owner=None)).owners == []


async def test_a_recalled_restatement_leaves_the_fact_but_not_its_words(engine: MemoryEngine, tmp_path: Path) -> None:
    mem = SqliteMemory(engine)
    prov = Provenance(channel="telegram", chat_id="1", message_ids=("1",))
    first = await mem.remember("alice", "Alice's locker is 42", provenance=prov, source_text="my locker is 42")
    again = "remember, locker 42 by the blue door"
    await mem.remember("alice", "Alice's locker is 42", provenance=replace(prov, message_ids=("2",)), source_text=again)
    assert again in (await engine.get(first.id)).source_text
    done = await mem.retract("telegram", "1", "2", owner="alice", text=again)
    assert done.erased == [] and done.scrubbed == 1
    kept = await engine.get(first.id)
    assert kept.content == "Alice's locker is 42" and kept.source_text == "my locker is 42"
    assert on_disk(tmp_path, "blue door") == 0


async def test_forget_all_erases_every_row_of_the_user_and_nothing_else(engine: MemoryEngine, tmp_path: Path) -> None:
    mem = SqliteMemory(engine)
    prov = Provenance(channel="telegram", chat_id="1", message_ids=("1",))
    await mem.remember("alice", "Alice's locker code is 9182", provenance=prov)
    old = await engine.add(NewMemory(owner="alice", content="Alice lived in Ningbo", provenance=prov))
    await engine.add(NewMemory(owner="alice", tier=1, content="Alice is a violinist", category=Category.IDENTITY))
    await engine.set_status(old.id, "archived")
    await engine.add_event("alice", "2026-11-20", "Alice practised the Sibelius concerto")
    await mem.buffer([_turn("alice", "my cello is named Bruno", "2")])
    await mem.remember("bob", "Bob keeps bees", provenance=prov)
    await engine.add(NewMemory(owner="_global", content="The office is on floor 3"))

    assert on_disk(tmp_path, "Sibelius") > 0 and on_disk(tmp_path, "Bruno") > 0
    gone = await mem.forget_all("alice")
    assert (gone.memories, gone.events, gone.waiting) == (3, 1, 1)
    assert await engine.list_memories("alice", status=None) == []
    assert await engine.db.fetchone("SELECT 1 FROM daily_events WHERE owner = 'alice'") is None
    assert await _waiting(engine) == []
    assert [e for e in await read_log(engine.db) if e.owner == "alice"] == []
    assert [m.content for m in await engine.list_memories("bob")] == ["Bob keeps bees"]
    assert [m.content for m in await engine.list_memories("_global")] == ["The office is on floor 3"]
    for words in ("9182", "Ningbo", "violinist", "Sibelius", "Bruno"):
        assert on_disk(tmp_path, words) == 0, words
    with pytest.raises(ValueError, match="shared by everyone"):
        await mem.forget_all("_global")


async def test_forget_all_racing_an_extraction_writes_nothing(
    engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    mem = SqliteMemory(engine)

    async def step(name: str, owner: str) -> None:
        if name == "llm":  # the model is reading Alice's lines; she erases everything now
            await mem.forget_all("alice")

    svc = ExtractionService(engine, llm, on_step=step)
    await mem.buffer([_turn("alice", "my birthday is 3 May", "1")])
    fake.queue_reply(reply([_fact("Alice's birthday is 3 May", [1])]))
    [rep] = await svc.flush_now("alice")
    assert rep.skipped
    assert await engine.list_memories("alice", status=None) == []


async def test_owner_data_holds_every_row_of_that_owner_and_nothing_else(engine: MemoryEngine) -> None:
    mem = SqliteMemory(engine)
    old = await engine.add(NewMemory(owner="alice", content="Alice lives in Berlin"))
    new = await engine.add(NewMemory(owner="alice", content="Alice lives in Hangzhou"))
    await engine.set_status(old.id, "superseded", superseded_by=new.id)
    await engine.add(NewMemory(owner="alice", tier=1, content="Alice is an engineer", category=Category.IDENTITY))
    await engine.add(NewMemory(owner="alice", content="Alice's key is sk-123", category=Category.CREDENTIAL))
    await engine.add(NewMemory(owner="bob", content="Bob keeps bees"))
    await engine.add(NewMemory(owner="_global", content="Standup is at 10:00"))
    await engine.add_event("alice", "2026-02-28", "Alice booked flights")
    await engine.add_event("bob", "2026-02-28", "Bob harvested honey")
    await mem.buffer([Turn(owner="alice", channel="telegram", chat_id="1", role="user", content="hi", message_id="9"),
                      Turn(owner="bob", channel="telegram", chat_id="2", role="user", content="yo", message_id="10")])
    data = await mem.owner_data("alice")
    assert [m.content for m in data.memories] == [
        "Alice lives in Berlin", "Alice lives in Hangzhou", "Alice is an engineer", "Alice's key is sk-123"
    ]
    assert data.memories[0].status == "superseded" and data.memories[0].superseded_by == new.id
    assert [e.summary for e in data.events] == ["Alice booked flights"] and data.waiting == 1
    assert (await mem.owner_data("carol")).memories == [] and (await mem.owner_data("carol")).waiting == 0


# -- recall leaves out what the prompt's Core Memory already shows ----------


async def test_recall_spends_no_place_on_core_memory_the_prompt_shows(engine: MemoryEngine) -> None:
    mem = SqliteMemory(engine)
    told = Provenance(channel="telegram", chat_id="42")
    source = await engine.add(NewMemory(owner="alice", content="Alice drinks a flat white coffee every morning",
                                        category=Category.IDENTITY, provenance=told))
    entry = await engine.add(NewMemory(
        owner="alice", tier=1, content="Alice drinks a flat white coffee every morning", category=Category.IDENTITY,
        importance=0.9, provenance=Provenance(refs=("weekly", f"m:{source.id}")),
    ))
    facts = [
        "Alice buys her flat white coffee at Blue Bottle on Nanshan Road",
        "Alice stopped drinking coffee after 6pm",
        "Alice's espresso machine is a Gaggia Classic",
        "Alice likes her coffee with oat milk",
    ]
    ids = [(await engine.add(NewMemory(owner="alice", content=f, provenance=told))).id for f in facts]
    assert f"[m{entry.id} · " in await mem.profile("alice")
    query = "where do I buy my flat white coffee?"
    # The user's own search still finds the entry's words: it matches the
    # question (listed once, as the fact it restates).
    found = await mem.search("alice", query)
    assert source.id in [h.id for h in found] and [h.content for h in found].count(source.content) == 1
    hits = await mem.recall("alice", query)
    assert entry.id not in [h.id for h in hits]
    assert hits[0].id == ids[0]  # the fact that answers the question ranks first
    # The entry's place goes to the other facts; its own Tier 2 source stays:
    # Core Memory carries a day but no origin, the source's citation has both.
    # The espresso machine shares no word with the question: said next to a
    # match in the chat, it earns no place (memory/neighbours.py).
    assert {h.id for h in hits} == {source.id, ids[0], ids[1], ids[3]}
    assert all(h.provenance.channel == "telegram" for h in hits)


async def test_a_core_memory_entry_the_profile_budget_left_out_can_be_recalled(engine: MemoryEngine) -> None:
    from memory.engine import PROFILE_ENTRY_CHARS

    mem = SqliteMemory(engine)
    shown = await engine.add(NewMemory(owner="alice", tier=1, content="Alice paddles a red kayak on West Lake",
                                       category=Category.IDENTITY, importance=1.0))
    for i in range(60):  # more than the profile's token budget holds
        filler = f"Alice's note number {i} about her week. " * 20
        await engine.add(NewMemory(owner="alice", tier=1, content=filler[:PROFILE_ENTRY_CHARS], importance=0.8))
    cut = await engine.add(NewMemory(owner="alice", tier=1, content="Alice keeps a spare kayak paddle in the garage",
                                     category=Category.IDENTITY, importance=0.1))
    profile = await mem.profile("alice")
    assert f"[m{shown.id} · " in profile and f"[m{cut.id} · " not in profile
    assert [h.id for h in await mem.recall("alice", "where is my kayak paddle?")] == [cut.id]


async def test_group_recall_leaves_out_the_shared_profile_it_shows(engine: MemoryEngine) -> None:
    mem = SqliteMemory(engine)
    shared = await engine.add(NewMemory(owner="_global", tier=1, content="Team standup is at 10:00 in room Lotus",
                                        category=Category.CONFIG))
    fact = await engine.add(NewMemory(owner="_global", content="The standup moved online on Fridays"))
    assert "Lotus" in await mem.profile("alice", private=False)
    for private in (True, False):  # a private prompt shows the shared profile too
        assert [h.id for h in await mem.recall("alice", "when is standup?", private=private)] == [fact.id]
    assert shared.id in [h.id for h in await mem.search("alice", "when is standup?", private=False)]


async def test_a_search_lists_a_core_memory_entry_and_the_fact_it_restates_once(engine: MemoryEngine) -> None:
    """The weekly refresh lifts a decision into Core Memory in the same words:
    /memory 星河 (and the memory_search tool) showed the line twice under two
    ids; it is listed once, the fact with its date and origin kept."""
    mem = SqliteMemory(engine)
    here = Provenance(channel="feishu", chat_id="oc_wang")
    fact = await engine.add(NewMemory(owner="wang", content="星河前端决定用Vue 3", category=Category.DECISION,
                                      importance=0.8, project="星河", provenance=here))
    await engine.add(NewMemory(owner="wang", tier=1, content="星河前端决定用Vue 3", category=Category.DECISION,
                               importance=0.8, provenance=replace(here, refs=(f"m{fact.id}",))))
    other = await engine.add(NewMemory(owner="wang", content="星河用Redis做缓存", category=Category.CONFIG,
                                       project="星河", provenance=here))
    hits = await mem.search("wang", "星河", limit=8)
    assert sorted(h.id for h in hits) == sorted([fact.id, other.id]), [(h.id, h.content) for h in hits]
