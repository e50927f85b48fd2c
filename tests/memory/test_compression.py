from __future__ import annotations

import json
import re
from datetime import timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

from memory import Category, ManualClock, MemoryEngine, NewMemory, Provenance
from memory.changelog import read_log
from memory.compression import Compressor
from memory.llm import MemoryLLM
from memory.retrieval import Retriever
from memory.service import SqliteMemory
from tests.fakes.openai_server import FakeOpenAI, Reply

from ._writepath import fake, llm, reply, user_prompt  # noqa: F401


def kind(body: dict[str, Any]) -> str:
    system = body["messages"][0]["content"]
    return "merge" if system.startswith("You consolidate") else "profile" if system.startswith("You maintain") else "extract"


async def fill(engine: MemoryEngine, n: int, *, project: str = "atlas", topic: str = "deploy", owner: str = "alice") -> list[int]:
    return await engine.add_many(
        (NewMemory(owner=owner, content=f"atlas deploy fact number {i}", project=project, topic=topic,
                   category=Category.DECISION, importance=0.5), None)
        for i in range(1, n + 1)
    )


async def active_ids(engine: MemoryEngine, owner: str = "alice") -> set[int]:
    return {m.id for m in await engine.list_memories(owner, limit=10_000)}


async def test_daily_compresses_earlier_days_only(engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM) -> None:
    e1 = await engine.add_event("alice", "2026-02-27", "Alice chose Postgres for atlas", channel="telegram")
    e2 = await engine.add_event("alice", "2026-02-28", "Alice set up CI for atlas", channel="feishu")
    today = await engine.add_event("alice", "2026-03-01", "Alice is still chatting")
    fake.responder = lambda body: Reply(reply(
        [{"content": "atlas uses Postgres" if "chose Postgres" in user_prompt(body) else "atlas has CI",
          "category": "decision", "project": "atlas"}], "x"))
    rep = await Compressor(engine, llm).daily()
    assert (rep.events, rep.added, rep.failed_groups) == (2, 2, 0) and len(fake.requests) == 2
    assert "mainly in English" in user_prompt(fake.requests[0]) and "[telegram] Alice chose Postgres" in user_prompt(fake.requests[0])
    facts = {m.content: m for m in await engine.list_memories("alice")}
    assert facts["atlas uses Postgres"].source.value == "compression"
    assert facts["atlas uses Postgres"].provenance.refs == (f"event:{e1.id}",)
    assert facts["atlas uses Postgres"].provenance.date_from == "2026-02-27"
    left = await engine.events("alice", uncompressed_only=True)
    assert [e.id for e in left] == [today.id]
    # a second run has nothing to do
    assert (await Compressor(engine, llm).daily()).events == 0 and len(fake.requests) == 2
    assert e2.id not in [e.id for e in left]


async def test_daily_ends_each_users_day_at_their_midnight(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """At 03:00 UTC it is still the evening before in Los Angeles: that
    user's day (dated on their calendar) is not over, while a Shanghai
    user's 2 March, already 11:00 there, is not over either."""
    zones = {"lena": ZoneInfo("America/Los_Angeles"), "shan": ZoneInfo("Asia/Shanghai")}

    async def zone_of(owner: str) -> tzinfo | None:
        return zones.get(owner)

    clock.set("2026-03-02T03:00:00Z")  # LA 1 March 19:00, Shanghai 2 March 11:00
    lena_day = await engine.add_event("lena", "2026-03-01", "Lena is planning her garden")
    await engine.add_event("shan", "2026-03-01", "Shan booked a flight")
    shan_today = await engine.add_event("shan", "2026-03-02", "Shan is packing")
    await engine.add_event("utc", "2026-03-01", "Utc wrote a report")
    fake.responder = lambda body: Reply(reply([{"content": "a fact"}], "x"))
    compressor = Compressor(engine, llm)
    compressor.zone_of = zone_of
    rep = await compressor.daily()
    assert rep.events == 2 and len(fake.requests) == 2  # shan's 1 March and utc's 1 March
    assert [e.id for e in await engine.events("lena", uncompressed_only=True)] == [lena_day.id]
    assert [e.id for e in await engine.events("shan", uncompressed_only=True)] == [shan_today.id]
    assert await engine.events("utc", uncompressed_only=True) == []
    clock.set("2026-03-02T08:00:00Z")  # midnight in LA: Lena's 1 March is over
    assert (await compressor.daily()).events == 1
    assert await engine.events("lena", uncompressed_only=True) == []


async def test_a_zone_that_cannot_be_read_costs_the_zone_not_the_run(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    async def broken(owner: str) -> tzinfo | None:
        raise OSError("gateway.db is gone")

    await engine.add_event("alice", "2026-02-28", "Alice set up CI")
    fake.queue_reply(reply([{"content": "CI is set up"}]))
    compressor = Compressor(engine, llm)
    compressor.zone_of = broken
    assert (await compressor.daily()).events == 1  # on the gateway's calendar, as before


async def test_daily_failure_keeps_events_for_the_next_run(engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM) -> None:
    await engine.add_event("alice", "2026-02-28", "Alice set up CI")
    fake.queue_error(500)
    rep = await Compressor(engine, llm).daily()
    assert rep.failed_groups == 1 and len(await engine.events("alice", uncompressed_only=True)) == 1
    fake.queue_reply(reply([{"content": "CI is set up"}]))
    assert (await Compressor(engine, llm).daily()).events == 1


async def test_weekly_merge_archives_and_links_never_deletes(engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM) -> None:
    ids = await fill(engine, 12)
    await fill(engine, 9, topic="small")  # under 10: not merged

    def responder(body: dict[str, Any]) -> Reply:
        if kind(body) == "profile":
            return Reply(json.dumps({"entries": []}))
        assert "Partition: atlas/deploy" in user_prompt(body)
        facts = [{"content": "atlas deploy facts 1-4 merged", "category": "decision", "importance": 0.6, "from": [1, 2, 3, 4]}]
        facts += [{"content": f"atlas deploy fact number {i}", "category": "decision", "from": [i]} for i in range(5, 11)]
        return Reply(json.dumps({"facts": facts, "drop": [{"n": 11, "reason": "obsolete"}]}))  # 12: unaccounted

    fake.responder = responder
    rep = await Compressor(engine, llm).weekly()
    assert (rep.partitions, rep.created, rep.merged, rep.dropped, rep.rejected) == (1, 1, 4, 1, 0)
    assert sum(kind(b) == "merge" for b in fake.requests) == 1
    rows = {m.id: m for m in await engine.list_memories("alice", status=None, limit=1000)}
    assert len(rows) == 22  # nothing deleted
    [new] = [m for m in rows.values() if m.content == "atlas deploy facts 1-4 merged"]
    assert new.importance == 0.6 and new.source.value == "compression" and new.provenance.refs == tuple(f"m:{i}" for i in ids[:4])
    assert all(rows[i].status.value == "archived" and rows[i].superseded_by == new.id for i in ids[:4])
    assert all(rows[i].status.value == "active" for i in ids[4:10]) and rows[ids[11]].status.value == "active"
    assert rows[ids[10]].status.value == "archived" and rows[ids[10]].superseded_by is None
    actions = [e.action for e in await read_log(engine.db, job="weekly_compress")]
    assert sorted(actions) == ["drop", "merge", "run"]  # no fact >= 0.7: no profile call


async def test_a_weekly_merge_is_dated_on_its_owners_calendar(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """Facts said at 03:00 and 05:00 in Shanghai (19:00 and 21:00 UTC the day
    before) merge into a summary of 2026-03-20, the day the owner said them."""
    clock.set("2026-03-19T19:00:00Z")
    await fill(engine, 6, owner="shan")
    clock.set("2026-03-19T21:00:00Z")
    await fill(engine, 6, owner="shan", topic="deploy")

    async def zone_of(owner: str) -> tzinfo | None:
        return ZoneInfo("Asia/Shanghai") if owner == "shan" else None

    def responder(body: dict[str, Any]) -> Reply:
        if kind(body) == "profile":
            return Reply(json.dumps({"entries": []}))
        return Reply(json.dumps({"facts": [{"content": "atlas deploy facts merged", "category": "decision",
                                            "from": list(range(1, 13))}], "drop": []}))

    fake.responder = responder
    clock.set("2026-03-23T04:00:00Z")
    compressor = Compressor(engine, llm)
    compressor.zone_of = zone_of
    assert (await compressor.weekly()).created == 1
    [new] = [m for m in await engine.list_memories("shan") if m.content == "atlas deploy facts merged"]
    assert (new.provenance.date_from, new.provenance.date_to) == ("2026-03-20", "2026-03-20")


async def test_merge_dropping_over_a_quarter_is_rejected(engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM) -> None:
    await fill(engine, 12)
    before = await active_ids(engine)
    # Accounts for 8 of 12 facts: 4 (33%) would silently vanish.
    fake.responder = lambda body: Reply(
        json.dumps({"entries": []}) if kind(body) == "profile" else
        json.dumps({"facts": [{"content": "all of atlas deploy", "from": [1, 2, 3, 4, 5, 6, 7, 8]}]}))
    rep = await Compressor(engine, llm).weekly()
    assert rep.rejected == 1 and rep.created == 0
    assert await active_ids(engine) == before and len(await engine.list_memories("alice", status=None)) == 12
    [entry] = await read_log(engine.db, actions=["merge_rejected"])
    assert json.loads(entry.detail)["total"] == 12 and len(json.loads(entry.detail)["unaccounted"]) == 4


async def test_weekly_refreshes_tier1_and_archives_decayed_temp(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    stale = await engine.add(NewMemory(owner="alice", tier=1, content="Alice lives in Beijing", category=Category.IDENTITY))
    kept = await engine.add(NewMemory(owner="alice", tier=1, content="Alice prefers Chinese", category=Category.IDENTITY))
    await engine.add(NewMemory(owner="alice", content="Alice lives in Shanghai", category=Category.IDENTITY, importance=1.0))
    tmp = await engine.add(NewMemory(owner="alice", content="build log at /tmp/x", category=Category.TEMP, importance=0.2))
    ident = await engine.add(NewMemory(owner="alice", content="Alice's name is Alice", category=Category.IDENTITY, importance=0.2))
    clock.advance(timedelta(days=40))
    fresh = await engine.add(NewMemory(owner="alice", content="debug flag on", category=Category.DEBUG, importance=0.2))
    fake.responder = lambda body: Reply(json.dumps({"entries": [
        {"content": "Alice lives in Shanghai", "category": "identity"},
        {"content": "Alice prefers Chinese", "category": "identity"},
    ] + [{"content": f"extra {i}", "category": "config"} for i in range(120)]}))
    rep = await Compressor(engine, llm).weekly()
    assert (rep.decayed, rep.demoted) == (1, 1) and rep.promoted == 99  # capped at 100 entries
    profile = await engine.profile("alice", include_global=False, limit=1000)
    assert len(profile) == 100 and profile[0].content == "Alice lives in Shanghai"
    assert kept.id in {m.id for m in profile} and stale.id not in {m.id for m in profile}
    assert "Shanghai" in user_prompt(fake.requests[0]) and "Beijing" in user_prompt(fake.requests[0])
    assert (await engine.get(stale.id)).status.value == "archived"  # type: ignore[union-attr]
    assert (await engine.get(tmp.id)).status.value == "archived"  # type: ignore[union-attr]
    assert (await engine.get(ident.id)).status.value == "active"  # type: ignore[union-attr]  identity never decays
    assert (await engine.get(fresh.id)).status.value == "active"  # type: ignore[union-attr]
    assert {"decay", "demote", "promote"} <= {e.action for e in await read_log(engine.db, limit=500)}


async def test_weekly_llm_failure_changes_nothing(engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM) -> None:
    await fill(engine, 10)
    before = await active_ids(engine)
    fake.responder = lambda body: Reply(status=500, content=None)
    rep = await Compressor(engine, llm).weekly()
    assert rep.failed == 1 and await active_ids(engine) == before  # no high-importance facts: no profile call


async def test_scoping_a_merge_never_touches_another_user(engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM) -> None:
    await fill(engine, 10, owner="bob")
    await engine.add(NewMemory(owner="alice", content="alice fact", provenance=Provenance()))
    seen: list[str] = []

    def responder(body: dict[str, Any]) -> Reply:
        seen.append(user_prompt(body))
        return Reply(json.dumps({"facts": [{"content": "bob: all ten", "from": list(range(1, 11))}]}))

    fake.responder = responder
    await Compressor(engine, llm).weekly()
    assert len(seen) == 1 and "alice" not in seen[0]
    assert [m.content for m in await engine.list_memories("bob")] == ["bob: all ten"]
    assert [m.content for m in await engine.list_memories("alice")] == ["alice fact"]


async def test_a_refresh_demotes_at_most_a_quarter_of_the_profile(
    engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    profile = [
        await engine.add(NewMemory(owner="alice", tier=1, content=f"Alice fact {i}", category=Category.IDENTITY,
                                   importance=0.5 + i / 100))
        for i in range(8)
    ]
    await engine.add(NewMemory(owner="alice", content="Alice moved to Shanghai", category=Category.IDENTITY, importance=1.0))
    # The model keeps only two of eight entries: six demotions, the gate allows two.
    fake.responder = lambda body: Reply(json.dumps({"entries": [
        {"content": "Alice moved to Shanghai", "category": "identity"},
        {"content": "Alice fact 6", "category": "identity"},
        {"content": "Alice fact 7", "category": "identity"},
    ]}))
    rep = await Compressor(engine, llm).weekly()
    assert (rep.promoted, rep.demoted) == (1, 2)
    assert any("4 profile demotions over the 25% gate held back" in n for n in rep.notes)
    left = {m.content for m in await engine.profile("alice", include_global=False, limit=1000)}
    # the two least important went; the other four wait for a later refresh
    assert left == {"Alice moved to Shanghai", *(f"Alice fact {i}" for i in range(2, 8))}
    assert (await engine.get(profile[0].id)).status.value == "archived"  # type: ignore[union-attr]
    held = [e for e in await read_log(engine.db, limit=100) if e.action == "demote_held"]
    assert len(held) == 1 and json.loads(held[0].detail)["held"] == [profile[i].id for i in range(2, 6)]


async def test_compressed_facts_keep_the_words_they_were_drawn_from(
    engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """Daily: a fact cites event lines, whose summaries become its source
    words. Weekly: a merged fact keeps the source words of what it merged."""
    await engine.add_event("alice", "2026-02-28", "Alice picked Postgres over MySQL for atlas", channel="telegram")
    await engine.add_event("alice", "2026-02-28", "Alice set up nightly backups", channel="telegram")
    fake.queue_reply(reply([{"content": "atlas database chosen", "category": "decision", "lines": [1]}]))
    assert (await Compressor(engine, llm).daily()).added == 1
    assert "L1 - 2026-02-28 Sat [telegram] Alice picked Postgres" in user_prompt(fake.requests[-1])
    [fact] = await engine.list_memories("alice")
    assert fact.source_text == "Alice picked Postgres over MySQL for atlas"

    ids = await engine.add_many(
        (NewMemory(owner="alice", content=f"atlas deploy fact number {i}", project="atlas", topic="deploy",
                   source_text="said once" if i < 3 else f"said {i}",
                   search_terms=(("部署", "deploy"), ("部署", "发布"))[i - 1] if i < 3 else ()), None)
        for i in range(1, 13)
    )

    def responder(body: dict[str, Any]) -> Reply:
        if kind(body) == "profile":
            return Reply(json.dumps({"entries": []}))
        facts = [{"content": "atlas deploy facts 1-3 merged", "from": [1, 2, 3]}]
        facts += [{"content": f"atlas deploy fact number {i}", "from": [i]} for i in range(4, 13)]
        return Reply(json.dumps({"facts": facts, "drop": []}))

    fake.responder = responder
    assert (await Compressor(engine, llm).weekly()).created == 1
    merged = {m.content: m for m in await engine.list_memories("alice", limit=100)}["atlas deploy facts 1-3 merged"]
    assert merged.source_text == "said once said 3" and merged.provenance.refs == tuple(f"m:{i}" for i in ids[:3])
    assert merged.search_terms == ("部署", "deploy", "发布")  # the merged facts' terms, each once
    hits = await Retriever(engine).retrieve("alice", "what was said once?")
    assert hits[0].id == merged.id


async def test_a_merged_fact_is_found_by_the_terms_the_merge_gave_it(
    engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """The weekly merge is asked for the merged fact's search terms (as
    extraction is): given, they are its terms (cleaned, no secret's shape);
    not given, it keeps its sources' (the previous test)."""
    await engine.add_many(
        (NewMemory(owner="alice", content=f"atlas db fact number {i}", project="atlas", topic="db",
                   search_terms=("old",) if i == 1 else ()), None)
        for i in range(1, 13)
    )

    def responder(body: dict[str, Any]) -> Reply:
        if kind(body) == "profile":
            return Reply(json.dumps({"entries": []}))
        assert '"terms"' in body["messages"][0]["content"]  # the merge is asked for them
        facts = [{"content": "We picked Postgres over MySQL", "from": [1, 2], "category": "decision",
                  "terms": ["数据库", "database", "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789", "x" * 99]},
                 {"content": "The db password is hunter22", "from": [3], "category": "credential",
                  "terms": ["密码", "password"]}]
        facts += [{"content": f"atlas db fact number {i}", "from": [i]} for i in range(4, 13)]
        return Reply(json.dumps({"facts": facts, "drop": []}, ensure_ascii=False))

    fake.responder = responder
    assert (await Compressor(engine, llm).weekly()).created == 2
    by = {m.content: m for m in await engine.list_memories("alice", limit=100)}
    assert by["We picked Postgres over MySQL"].search_terms == ("数据库", "database")
    assert by["The db password is hunter22"].search_terms == ()
    [hit, *_] = await Retriever(engine).retrieve("alice", "数据库我们最后选了什么？")
    assert hit.id == by["We picked Postgres over MySQL"].id


async def test_a_new_profile_entry_cites_the_facts_it_states(engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM) -> None:
    munich = await engine.add(NewMemory(owner="alice", content="Alice moved to Munich", category=Category.IDENTITY, importance=0.9))
    flat = await engine.add(NewMemory(owner="alice", content="Alice's flat is in Munich", category=Category.IDENTITY,
                                      importance=0.8))
    tea = await engine.add(NewMemory(owner="alice", content="Alice drinks green tea", category=Category.IDENTITY, importance=0.7))

    def responder(body: dict[str, Any]) -> Reply:
        assert '"facts"' in body["messages"][0]["content"]  # the model is asked which facts each entry states
        numbered = dict(line.split(". ", 1) for line in user_prompt(body).splitlines() if line[:1].isdigit())
        n = {text.split("] ", 1)[1]: int(k) for k, text in numbered.items()}
        return Reply(json.dumps({"entries": [
            {"content": "Lives in Munich", "category": "identity",
             "facts": [n["Alice moved to Munich"], f"#{n[flat.content]}", 99, "junk"]},
            {"content": "Alice drinks green tea", "category": "identity"},  # the fact itself, word for word
            {"content": "Likes hiking", "category": "identity", "facts": "nonsense"},
        ]}))

    fake.responder = responder
    assert (await Compressor(engine, llm).weekly()).promoted == 3
    refs = {m.content: m.provenance.refs for m in await engine.profile("alice", include_global=False)}
    assert refs == {
        "Lives in Munich": ("weekly", f"m:{munich.id}", f"m:{flat.id}"),  # 99 is past the list: dropped
        "Alice drinks green tea": ("weekly", f"m:{tea.id}"),
        "Likes hiking": ("weekly",),
    }


async def test_a_profile_refresh_writes_nothing_when_the_user_erased_everything_meanwhile(
    engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    await engine.add(NewMemory(owner="alice", content="Alice moved to Munich", category=Category.IDENTITY, importance=0.9))

    async def responder(body: dict[str, Any]) -> Reply:
        await SqliteMemory(engine).forget_all("alice")  # /forget all while the model writes her profile
        return Reply(json.dumps({"entries": [{"content": "Lives in Munich", "category": "identity", "facts": [1]}]}))

    fake.responder = responder
    rep = await Compressor(engine, llm).weekly()
    assert rep.promoted == 0 and any("profile refresh skipped" in n for n in rep.notes)
    assert await engine.list_memories("alice", status=None) == []


async def test_a_compressed_fact_cites_only_the_events_of_its_lines(
    engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """A fact names the events it came from (its ``lines``), so forgetting it
    names those, not the whole day; a fact naming no valid line cites the day."""
    e1 = await engine.add_event("alice", "2026-02-28", "Alice fixed the flaky login test", channel="telegram")
    e2 = await engine.add_event("alice", "2026-02-28", "Alice adopted a cat named Miso", channel="telegram")
    e3 = await engine.add_event("alice", "2026-02-28", "Alice booked a flight to Lisbon", channel="telegram")
    fake.queue_reply(reply([
        {"content": "Alice has a cat named Miso", "category": "identity", "lines": [2]},
        {"content": "Alice had a busy day", "category": "event"},  # no lines
        {"content": "Alice travels a lot", "category": "event", "lines": [7, "junk"]},  # no such line
    ]))
    assert (await Compressor(engine, llm).daily()).added == 3
    facts = {m.content: m for m in await engine.list_memories("alice")}
    cat = facts["Alice has a cat named Miso"]
    assert cat.provenance.refs == (f"event:{e2.id}",) and cat.provenance.date_from == "2026-02-28"
    assert cat.source_text == "Alice adopted a cat named Miso"  # the same line gives its words
    day = tuple(f"event:{e.id}" for e in (e1, e2, e3))
    assert facts["Alice had a busy day"].provenance.refs == day
    assert facts["Alice travels a lot"].provenance.refs == day and facts["Alice travels a lot"].source_text == ""

    mem = SqliteMemory(engine)
    done = await mem.forget("alice", [f"m{cat.id}"])
    assert [h.ref for h in done.kept] == [f"e{e2.id}"]  # not the login test, not the flight
    done = await mem.forget("alice", [f"m{facts['Alice had a busy day'].id}"])
    assert [h.ref for h in done.kept] == [f"e{e1.id}", f"e{e2.id}", f"e{e3.id}"]


async def test_a_fact_restated_by_the_daily_compression_cites_that_event_too(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """Reinforcing adds the restatement's refs: the fact extracted from a chat
    then also cites the event of another day that said it again."""
    fact = await engine.add(NewMemory(owner="alice", content="Alice has a cat named Miso", category=Category.IDENTITY,
                                      provenance=Provenance(refs=("buf:1", "buf:2"))))
    await engine.add_event("alice", "2026-02-28", "Alice paid the rent", channel="telegram")  # line 1, not cited
    again = await engine.add_event("alice", "2026-02-28", "Alice said Miso the cat is sick", channel="telegram")
    fake.queue_reply(reply([{"content": "Alice's cat Miso", "same_as": 1, "lines": [2]}]))
    assert (await Compressor(engine, llm).daily()).reinforced == 1
    m = await engine.get(fact.id)
    assert m is not None and m.provenance.refs == ("buf:1", "buf:2", f"event:{again.id}")
    done = await SqliteMemory(engine).forget("alice", [f"m{fact.id}"])
    assert [h.ref for h in done.kept] == [f"e{again.id}"]  # not the rent: the fact never came from it


async def test_a_day_larger_than_one_call_is_compressed_in_batches(
    engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """A day of migrated logs is far more than a memory model reads at once:
    it goes in batches, each within the budget, and every event is done."""
    talk = "atlas deploy talk " * 300
    ids = [(await engine.add_event("alice", "2026-02-27", f"part {i}: {talk}")).id for i in range(8)]
    fake.responder = lambda body: Reply(reply([], "x"))
    rep = await Compressor(engine, llm, daily_batch_tokens=3000).daily()
    assert (rep.events, rep.failed_groups) == (8, 0)
    assert len(fake.requests) == 4  # ~1,360 tokens an event: two a call
    assert all(len(user_prompt(b)) < 3000 * 4 + 2000 for b in fake.requests)
    assert await engine.events("alice", uncompressed_only=True) == []
    # a failed batch keeps its own events only
    talk = "atlas ci talk " * 400
    more = [(await engine.add_event("alice", "2026-02-28", f"part {i}: {talk}")).id for i in range(4)]
    fake.responder = None
    fake.queue_reply(reply([], "x"))
    fake.queue_error(500, times=5)
    rep = await Compressor(engine, llm, daily_batch_tokens=3000).daily()
    assert rep.failed_groups >= 1
    left = {e.id for e in await engine.events("alice", uncompressed_only=True)}
    assert left and left < set(more) and not left & set(ids)


async def test_daily_compression_does_not_revive_a_fact_replaced_the_same_day(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """Said in the morning, replaced in the afternoon: the day's events tell
    both, and a model that extracts the morning's words again must not make
    the old fact current beside the new one. The model is shown what was
    replaced (so it need not), and a fact in the very words of a replaced
    one is not written back (it would contradict the fact that replaced it)."""
    old = await engine.add(NewMemory(owner="alice", content="Alice builds the frontend with npm",
                                     category=Category.DECISION, project="web", topic="tooling"))
    new = await engine.add(NewMemory(owner="alice", content="Alice builds the frontend with pnpm",
                                     category=Category.DECISION, project="web", topic="tooling"))
    await engine.set_status(old.id, "superseded", superseded_by=new.id)
    await engine.add_event("alice", "2026-02-28", "Alice builds the frontend with npm", channel="telegram")
    await engine.add_event("alice", "2026-02-28", "Alice switched the frontend from npm to pnpm", channel="telegram")
    fake.queue_reply(reply([
        {"content": "Alice builds the frontend with npm", "category": "decision", "project": "web",
         "topic": "tooling", "lines": [1]},
        {"content": "Alice builds the frontend with pnpm", "category": "decision", "project": "web",
         "topic": "tooling", "same_as": 1, "lines": [2]},
    ]))
    rep = await Compressor(engine, llm).daily()
    prompt = user_prompt(fake.requests[0])
    assert "Replaced memories" in prompt and "Alice builds the frontend with npm (replaced by 1)" in prompt
    assert "Alice builds the frontend with pnpm" in prompt
    assert rep.events == 2 and rep.added == 0 and rep.reinforced == 1
    assert [m.content for m in await engine.list_memories("alice")] == ["Alice builds the frontend with pnpm"]
    again = await engine.get(old.id)
    assert again is not None and again.status.value == "superseded" and again.superseded_by == new.id
    assert any(e.action == "skip" and e.memory_id == old.id for e in await read_log(engine.db, owner="alice"))


async def test_a_full_profile_stays_within_its_cap_when_the_gate_holds_demotions_back(
    engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """A profile at its cap of 100, and a model that rewords 40 entries: the
    gate demotes at most 25 of the old wordings this week, so at most 25 new
    ones come in; the profile never grows past its cap (it grew to 115)."""
    for i in range(100):
        await engine.add(NewMemory(owner="alice", tier=1, content=f"Alice entry {i}", category=Category.IDENTITY,
                                   importance=0.5 + i / 1000))
    await engine.add(NewMemory(owner="alice", content="Alice moved to Shanghai", category=Category.IDENTITY, importance=1.0))
    entries = [{"content": f"Alice entry {i}", "category": "identity"} for i in range(40, 100)]
    entries += [{"content": f"Alice entry {i}, reworded", "category": "identity"} for i in range(40)]
    fake.responder = lambda body: Reply(json.dumps({"entries": entries}))
    compressor = Compressor(engine, llm)
    rep = await compressor.weekly()
    assert (rep.promoted, rep.demoted) == (25, 25)
    assert any("15 new profile entries wait for room" in n for n in rep.notes)
    profile = await engine.profile("alice", include_global=False, limit=1000)
    assert len(profile) == 100
    # The model's first new entries came in; the rest come the weeks the gate lets the old ones go.
    assert {f"Alice entry {i}, reworded" for i in range(25)} <= {m.content for m in profile}
    for _ in range(2):
        await compressor.weekly()
    profile = await engine.profile("alice", include_global=False, limit=1000)
    assert sorted(m.content for m in profile) == sorted(e["content"] for e in entries)


async def test_daily_compression_keeps_each_chats_day_apart(engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM) -> None:
    """A group's day is summarised on its own, and its facts stay that
    group's (memory/scope.py); what the user said in private that day never
    reaches the group's summary, nor the group's facts."""
    await engine.add_event("alice", "2026-02-28", "Alice said her divorce hearing is on Monday",
                           channel="telegram", chat_id="100")
    await engine.add_event("alice", "2026-02-28", "Alice said the atlas release slips to Monday",
                           channel="telegram", chat_id="-5")
    private_line, group_line = "] Alice said her divorce", "] Alice said the atlas"
    fake.responder = lambda body: Reply(reply(
        [{"content": "Alice has a divorce hearing on Monday" if private_line in user_prompt(body)
          else "The atlas release is on Monday", "lines": [1]}], "x"))
    rep = await Compressor(engine, llm).daily()
    assert (rep.events, rep.added) == (2, 2) and len(fake.requests) == 2
    assert not any(private_line in user_prompt(b) and group_line in user_prompt(b) for b in fake.requests)
    mem = SqliteMemory(engine)
    group = [h.content for h in await mem.search("alice", "Monday divorce atlas release", private=False,
                                                 chat=("telegram", "-5"))]
    assert group == ["The atlas release is on Monday"]
    [hit] = [h for h in await mem.search("alice", "divorce hearing") if h.kind == "memory"]
    assert hit.citation().endswith("daily summary of 1 conversation, 2026-02-28]")  # cited as before


async def test_a_weekly_merge_of_one_groups_facts_stays_that_groups(
    engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    group, private = Provenance(channel="telegram", chat_id="-5"), Provenance(channel="telegram", chat_id="100")
    ids = await engine.add_many(
        (NewMemory(owner="alice", content=f"atlas deploy fact number {i}", project="atlas", topic="deploy",
                   category=Category.DECISION, provenance=group if i <= 10 else private), None)
        for i in range(1, 13)
    )

    def responder(body: dict[str, Any]) -> Reply:
        if kind(body) == "profile":
            return Reply(json.dumps({"entries": []}))
        if "number 11" in user_prompt(body):  # the private facts' own merge
            return Reply(json.dumps({"facts": [{"content": "atlas deploy facts 11-12 merged", "from": [1, 2]}]}))
        facts = [{"content": "atlas deploy facts 1-4 merged", "category": "decision", "from": [1, 2, 3, 4]}]
        facts += [{"content": f"atlas deploy fact number {i}", "category": "decision", "from": [i]} for i in range(5, 11)]
        return Reply(json.dumps({"facts": facts, "drop": []}))

    fake.responder = responder
    assert (await Compressor(engine, llm).weekly()).created == 2
    rows = {m.content: m for m in await engine.list_memories("alice", limit=100)}
    assert rows["atlas deploy facts 1-4 merged"].provenance.chat_id == "-5"
    assert rows["atlas deploy facts 1-4 merged"].provenance.refs == tuple(f"m:{i}" for i in ids[:4])
    assert rows["atlas deploy facts 11-12 merged"].provenance.chat_id == "100"  # merged apart, still private


async def test_a_groups_day_is_compressed_with_only_that_groups_facts_of_the_member(
    engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """The day's summary of a group may tell what other members said: the
    model is told so, and is shown only the facts that group may read of
    the member (never a private one to copy words from); what it learns
    stays the group's."""
    await engine.add(NewMemory(owner="alice", content="Alice takes sertraline 50mg every morning",
                               category=Category.IDENTITY, provenance=Provenance(channel="feishu", chat_id="ou_a")))
    await engine.add(NewMemory(owner="alice", content="Alice is cutting down on sertraline", category=Category.EVENT,
                               provenance=Provenance(channel="feishu", chat_id="oc_team", group=True)))
    await engine.add_event("alice", "2026-02-28", "Alice said she stops sertraline in April; Bob is moving to Tokyo",
                           channel="feishu", chat_id="oc_team",
                           provenance=Provenance(channel="feishu", chat_id="oc_team", group=True))
    fake.queue_reply(reply([{"content": "Alice stops sertraline in April", "category": "event", "lines": [1]}], "x"))
    rep = await Compressor(engine, llm).daily()
    assert rep.added == 1
    sent = user_prompt(fake.requests[0])
    assert "cutting down on sertraline" in sent and "50mg" not in sent
    assert "GROUP chat" in sent and "other members" in sent
    [new] = [m for m in await engine.list_memories("alice") if m.content == "Alice stops sertraline in April"]
    assert (new.provenance.chat_id, new.provenance.group) == ("oc_team", True)


async def test_a_weekly_merge_never_reads_a_private_fact_beside_a_groups(
    engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """Shown a private fact beside a group's, a merge may write its words
    into a fact it says comes from the group's alone: each merge call reads
    one group's facts, or the ones no group reads."""
    group = Provenance(channel="feishu", chat_id="oc_team", group=True)
    private = Provenance(channel="feishu", chat_id="ou_a")
    await engine.add_many(
        (NewMemory(owner="alice", content=f"atlas deploy {'private' if i > 6 else 'group'} fact number {i}",
                   project="atlas", topic="deploy", category=Category.DECISION,
                   provenance=group if i <= 6 else private), None)
        for i in range(1, 13)
    )
    merged: list[str] = []

    def responder(body: dict[str, Any]) -> Reply:
        if kind(body) == "profile":
            return Reply(json.dumps({"entries": []}))
        merged.append(user_prompt(body))
        n = user_prompt(body).count("atlas deploy")
        return Reply(json.dumps({"facts": [{"content": f"atlas deploy fact {i}", "from": [i]} for i in range(1, n + 1)]}))

    fake.responder = responder
    await Compressor(engine, llm).weekly()
    assert len(merged) == 2
    assert all(("private fact" in p) != ("group fact" in p) for p in merged)


async def test_core_memory_drawn_from_a_group_fact_is_read_in_private_only(
    engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """The member's own words in a group may become their Core Memory: it is
    shown to them alone (their private chats), never in a group, this one
    included (memory/scope.py); the group keeps reading the fact itself."""
    team = Provenance(channel="feishu", chat_id="oc_team", group=True)
    await engine.add(NewMemory(owner="alice", content="Alice leads the atlas release", category=Category.DECISION,
                               importance=0.9, provenance=team))
    fake.queue_reply(json.dumps({"entries": [{"content": "Leads the atlas release", "category": "decision",
                                              "facts": [1]}]}))
    assert (await Compressor(engine, llm).weekly()).promoted == 1
    mem = SqliteMemory(engine)
    assert "Leads the atlas release" in await mem.profile("alice")
    assert "Leads the atlas release" not in await mem.profile("alice", private=False)
    there = [h.content for h in await mem.search("alice", "atlas release", private=False, chat=("feishu", "oc_team"))]
    assert there == ["Alice leads the atlas release"]


async def test_feishu_facts_from_before_kinds_were_kept_are_merged_one_chat_at_a_time(
    engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """A Feishu chat's facts from before the chat's kind was kept do not say
    whether the chat is a group: each chat's are taken for a group's (fail
    closed), so no merge call reads a group's facts with private ones, and
    what a call writes keeps the one chat it read."""
    import re

    team = Provenance(channel="feishu", chat_id="oc_team")  # no kind recorded
    await engine.add_many(
        (NewMemory(owner="alice", content=f"atlas deploy fact number {i}", project="atlas", topic="deploy",
                   category=Category.DECISION, provenance=team if i <= 6 else Provenance(channel="feishu",
                                                                                         chat_id="oc_alice")), None)
        for i in range(1, 11)
    )
    calls: list[set[int]] = []

    def responder(body: dict[str, Any]) -> Reply:
        if kind(body) == "profile":
            return Reply(json.dumps({"entries": []}))
        shown = sorted({int(n) for n in re.findall(r"fact number (\d+)\b", user_prompt(body))})
        calls.append(set(shown))
        facts = [{"content": f"atlas deploy facts {shown[0]}-{shown[1]} merged", "from": [1, 2]}]
        facts += [{"content": f"atlas deploy fact number {i}", "from": [n]} for n, i in enumerate(shown[2:], start=3)]
        return Reply(json.dumps({"facts": facts}))

    fake.responder = responder
    assert (await Compressor(engine, llm).weekly()).created == 2
    assert sorted(map(sorted, calls)) == [[1, 2, 3, 4, 5, 6], [7, 8, 9, 10]]
    merged = {m.content: m.provenance.chat_id for m in await engine.list_memories("alice", limit=100)
              if m.content.endswith("merged")}
    assert merged == {"atlas deploy facts 1-2 merged": "oc_team", "atlas deploy facts 7-8 merged": "oc_alice"}


async def test_a_forgotten_fact_is_not_learnt_again_from_its_batchs_event_by_the_daily_run(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """/forget on the day a fact was said: its batch's event (kept and named:
    it may say more) is still uncompressed, and the next daily run read it
    and wrote the fact back. The daily run now leaves that event alone; the
    day's other events are compressed as usual."""
    from memory.extraction import ExtractionService

    from ._writepath import turns

    mem, svc = SqliteMemory(engine), ExtractionService(engine, llm)
    fake.queue_reply(reply([{"content": "User is allergic to shrimp", "category": "identity", "lines": [1]}],
                           "Alice said she is allergic to shrimp"))
    await mem.buffer(turns("alice", ("I'm allergic to shrimp", "noted")))
    [rep] = await svc.flush_now("alice")
    fake.queue_reply(reply([{"content": "User runs on Sundays", "category": "identity", "lines": [1]}],
                           "Alice runs on Sundays"))
    await mem.buffer(turns("alice", ("I go running every Sunday", "nice"), start=5))
    [other] = await svc.flush_now("alice")
    [fact] = [m for m in await engine.list_memories("alice") if "shrimp" in m.content]
    done = await mem.forget("alice", [f"m{fact.id}"])
    assert [h.ref for h in done.kept] == [f"e{rep.event_id}"]  # named, still kept

    clock.advance(timedelta(days=1))
    fake.responder = lambda body: Reply(reply(
        [{"content": "User is allergic to shrimp" if "shrimp" in user_prompt(body) else "User runs on Sundays",
          "category": "identity", "lines": [1]}]))
    daily = await Compressor(engine, llm).daily()
    days = [user_prompt(b) for b in fake.requests if "Event log:" in user_prompt(b)]
    assert daily.events == 1 and len(days) == 1 and "shrimp" not in days[0]
    assert not [m for m in await engine.list_memories("alice", status=None) if "shrimp" in m.content]
    assert await engine.events("alice", uncompressed_only=True) == []
    assert [e.id for e in await engine.events("alice")] == [rep.event_id, other.event_id]  # the event stays
    [held] = await read_log(engine.db, actions=["hold_event"])
    assert held.detail == f'{{"event":{rep.event_id},"why":"a fact drawn from it was forgotten"}}'


async def test_the_profile_refresh_is_told_when_each_fact_was_said_and_the_latest_holds(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """"User lives in Shanghai" (March) and "User moved to Berlin" (July),
    both current when the model never said ``updates``: the profile model
    was shown both, undated, in importance order, and could not tell which
    holds. Each fact now says when it was said (and last said again), and
    the rules say the latest holds."""
    old = await engine.add(NewMemory(owner="alice", content="User lives in Shanghai", category=Category.IDENTITY,
                                     importance=1.0))
    clock.advance(timedelta(days=30))
    await engine.update(old.id, touch=True)  # said again in April
    clock.advance(timedelta(days=90))
    await engine.add(NewMemory(owner="alice", content="User moved to Berlin", category=Category.IDENTITY, importance=1.0))

    def profile(body: dict[str, Any]) -> Reply:
        # A model that keeps the latest of the two places it is shown.
        facts = [line for line in user_prompt(body).splitlines() if line[:1].isdigit()]
        latest = max(facts, key=lambda line: max(re.findall(r"\d{4}-\d\d-\d\d", line.split("]")[0])))
        return Reply(json.dumps({"entries": [{"content": latest.split("] ", 1)[1], "category": "identity",
                                              "facts": [int(latest.split(".")[0])]}]}))

    fake.responder = profile
    rep = await Compressor(engine, llm).weekly()
    prompt = user_prompt(fake.requests[-1])
    assert "1. [identity, 1.0, said 2026-06-29] User moved to Berlin" in prompt
    assert "2. [identity, 1.0, said 2026-03-01, last said 2026-03-31] User lives in Shanghai" in prompt
    assert "the latest holds" in fake.requests[-1]["messages"][0]["content"]
    assert rep.promoted == 1 and await engine.profile_markdown("alice") == "- User moved to Berlin"


async def test_a_core_memory_entry_whose_facts_were_replaced_goes_at_once_outside_the_gate(
    engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """The gate demotes the least important first, so a replaced identity
    entry (importance 1.0) waited behind every other drop, for weeks. An
    entry the model leaves out whose facts are all gone (replaced, merged,
    dropped) or that repeats a replaced fact's words is stale, not a model's
    slip: it goes at once, and the gate counts only the others."""
    def fact(content: str) -> NewMemory:
        return NewMemory(owner="alice", content=content, category=Category.IDENTITY, importance=1.0)

    shanghai, berlin = await engine.add(fact("User lives in Shanghai")), await engine.add(fact("User moved to Berlin"))
    li, zhang = await engine.add(fact("User's manager is Li")), await engine.add(fact("User's manager is now Zhang"))
    backed = [await engine.add(fact(f"User likes sport {i}")) for i in range(6)]

    def entry(content: str, *facts: int, importance: float = 1.0) -> NewMemory:
        refs = ("weekly", *(f"m:{i}" for i in facts))
        return NewMemory(owner="alice", tier=1, content=content, category=Category.IDENTITY, importance=importance,
                         provenance=Provenance(refs=refs))

    stale_words = await engine.add(entry("User lives in Shanghai"))  # cites nothing: an old profile's entry
    stale_merged = await engine.add(entry("Manager: Li", li.id))
    others = [await engine.add(entry(f"Likes sport {i}", backed[i].id, importance=0.8)) for i in range(6)]
    # A change the write path took (no entry cited the fact), and a weekly
    # merge that folded Li into Zhang: neither retired an entry.
    await engine.set_status(shanghai.id, "superseded", superseded_by=berlin.id)
    await engine.set_status(li.id, "archived", superseded_by=zhang.id)

    # The model drops the two stale entries and four backed ones: six of eight.
    fake.responder = lambda body: Reply(json.dumps({"entries": [
        {"content": "User moved to Berlin", "category": "identity"},
        {"content": "User's manager is now Zhang", "category": "identity"},
        {"content": "Likes sport 4", "category": "identity"},
        {"content": "Likes sport 5", "category": "identity"},
    ]}) if kind(body) == "profile" else Reply(json.dumps({"facts": [], "drop": []})))
    rep = await Compressor(engine, llm, min_partition=100).weekly()
    left = {m.content for m in await engine.profile("alice", include_global=False, limit=1000)}
    assert "User lives in Shanghai" not in left and "Manager: Li" not in left
    assert {"User moved to Berlin", "User's manager is now Zhang"} <= left
    # The gate (a quarter of eight: two) still holds the backed ones back.
    assert rep.demoted == 4 and sum(f"Likes sport {i}" in left for i in range(4)) == 2
    for m in (stale_words, stale_merged):
        assert (await engine.get(m.id)).status.value == "archived"  # type: ignore[union-attr]
    stale = [e for e in await read_log(engine.db, limit=100) if e.action == "demote" and "replaced" in e.detail]
    assert len(stale) == 2 and len(others) == 6


async def test_chit_chat_is_temporary_and_fades_while_a_conversation_summary_stays(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """Seed 8.2's table: ``event``/``conversation`` are summaries of what
    happened or was discussed (half-life 30 days, kept at 10 % for ranking,
    never archived); ``temp`` is the temporary (half-life 7 days, down to 0,
    archived weekly). Small talk is temporary: the model is told so, and
    its names for it ("small talk", "chitchat", "chat") are read as ``temp``."""
    from memory.extraction import ExtractionService

    from ._writepath import turns

    said = {
        "nice weather today": ("User chatted about the nice weather", "small talk"),
        "hi there!": ("User greeted the assistant", "chat"),
        "let's go through the flat options in Berlin": ("User discussed flat options in Berlin", "conversation"),
    }

    def model(body: dict[str, Any]) -> Reply:
        prompt = user_prompt(body)
        facts = [{"content": fact, "category": cat, "lines": [1]} for words, (fact, cat) in said.items() if words in prompt]
        return Reply(reply(facts))

    fake.responder = model
    mem, svc = SqliteMemory(engine), ExtractionService(engine, llm)
    for n, words in enumerate(said):
        await mem.buffer(turns("alice", (words, "ok"), start=n * 2))
        assert all(r.ok for r in await svc.flush_now("alice"))
    system = fake.requests[0]["messages"][0]["content"]
    assert "small talk" in system and "temp" in system
    cats = {m.content: m.category.value for m in await engine.list_memories("alice")}
    assert cats == {"User chatted about the nice weather": "temp", "User greeted the assistant": "temp",
                    "User discussed flat options in Berlin": "conversation"}

    clock.advance(timedelta(days=60))
    rep = await Compressor(engine, llm, min_partition=100).weekly()
    assert rep.decayed == 2
    assert [m.content for m in await engine.list_memories("alice")] == ["User discussed flat options in Berlin"]


async def test_a_days_facts_are_dated_that_day_not_the_morning_they_were_compressed(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """Seed 002: a fact the daily compression draws from the 27th's events
    is cited with the 27th (when its lines were said, or that day's noon
    in the owner's zone for an event that does not say), not the 1st."""
    await engine.add_event("alice", "2026-02-27", "Alice chose Postgres for atlas", channel="telegram",
                           provenance=Provenance(channel="telegram", date_from="2026-02-27T20:00:00Z",
                                                 date_to="2026-02-27T21:10:00Z"))
    await engine.add_event("bob", "2026-02-26", "Bob moved the CI to Drone", channel="migration")
    fake.responder = lambda body: Reply(reply(
        [{"content": "atlas uses Postgres" if "Postgres" in user_prompt(body) else "Bob's CI runs on Drone",
          "category": "decision", "project": "atlas", "lines": [1]}], "x"))
    rep = await Compressor(engine, llm, timezone="Asia/Shanghai").daily()
    assert rep.added == 2
    [pg] = await engine.list_memories("alice")
    assert pg.created_at == "2026-02-27T21:10:00Z"
    [ci] = await engine.list_memories("bob")
    assert ci.created_at == "2026-02-26T04:00:00Z"  # noon in Shanghai
    [hit] = await Retriever(engine).retrieve("alice", "which database does atlas use?")
    assert hit.date == "2026-02-27"


async def test_core_memory_shows_a_new_fact_until_the_weekly_refresh_has_read_it(
    engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """Said on a Tuesday, in Core Memory from then on (engine.newer_facts);
    the weekly refresh reads it and leaves it out: from then on it is
    recalled by its words like any fact. What is said after the run is in
    Core Memory again until the next."""
    await engine.add(NewMemory(owner="alice", content="Alice wants answers in English", category=Category.CONFIG,
                               importance=0.9))
    assert "English" in await engine.profile_markdown("alice")
    fake.responder = lambda body: Reply(json.dumps({"entries": [
        {"content": "Alice is a Go developer", "category": "identity"}]}))
    await Compressor(engine, llm).weekly()
    assert await engine.profile_markdown("alice") == "- Alice is a Go developer"
    await engine.add(NewMemory(owner="alice", content="Alice is called Yang", category=Category.IDENTITY,
                               importance=1.0))
    assert await engine.profile_markdown("alice") == "- Alice is a Go developer\n- Alice is called Yang"


async def test_a_chinese_days_summaries_are_judged_chinese_not_by_the_channel_labels(
    engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """Short Chinese summaries naming a tool ("聊了Redis") read as Chinese:
    the "[feishu]" each event line starts with is not what was said."""
    await engine.add_event("alice", "2026-02-27", "聊了Redis", channel="feishu")
    await engine.add_event("alice", "2026-02-27", "定了Vue", channel="feishu")
    fake.responder = lambda body: Reply(reply([], "x"))
    await Compressor(engine, llm).daily()
    assert "mainly in Chinese" in user_prompt(fake.requests[0]), user_prompt(fake.requests[0])


async def test_a_days_summaries_are_shown_with_their_day(engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM) -> None:
    """A summary saying "交付在下周三" is dated by its day in the event log,
    so the fact compressed from it can say which Wednesday."""
    await engine.add_event("alice", "2026-02-25", "星河下周三交付", channel="feishu")
    fake.responder = lambda body: Reply(reply([], "x"))
    await Compressor(engine, llm).daily()
    assert "- 2026-02-25 Wed [feishu] 星河下周三交付" in user_prompt(fake.requests[0]), user_prompt(fake.requests[0])


# -- what each user's refresh read (engine.refreshed_upto, per owner) ----------


def _profile_or(body: dict[str, Any], entries: list[dict[str, Any]], *, fail_for: str = "") -> Reply:
    if fail_for and fail_for in user_prompt(body):
        return Reply(status=500, content=None)
    return Reply(json.dumps({"entries": entries}))


async def test_a_users_failed_refresh_leaves_their_new_facts_in_core_memory(
    engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """Bob's refresh fails (the model errs): it read none of his facts, so
    the one he said before the run stays in Core Memory until a refresh of
    his succeeds, not a week out of it. Alice's, read, leaves hers."""
    await engine.add(NewMemory(owner="alice", content="Alice wants answers in English", category=Category.CONFIG,
                               importance=0.9))
    await engine.add(NewMemory(owner="bob", content="Bob wants answers in French", category=Category.CONFIG,
                               importance=0.9))
    fake.responder = lambda body: _profile_or(body, [{"content": "Alice is a Go developer", "category": "identity"}],
                                              fail_for="Bob")
    rep = await Compressor(engine, llm).weekly()
    assert rep.failed == 1
    assert await engine.profile_markdown("alice") == "- Alice is a Go developer"
    assert await engine.profile_markdown("bob") == "- Bob wants answers in French"
    # The next run reads his: from then on it is recalled by its words.
    fake.responder = lambda body: _profile_or(body, [{"content": "Bob is a Rust developer", "category": "identity"}])
    await Compressor(engine, llm).weekly()
    assert await engine.profile_markdown("bob") == "- Bob is a Rust developer"


async def test_a_fact_a_weekly_merge_wrote_was_read_by_the_refresh_after_it(
    engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """The merge runs before the user's refresh, which reads what it wrote:
    not in Core Memory as if said after the run."""
    for w in ("English", "short answers"):
        await engine.add(NewMemory(owner="alice", content=f"Alice wants {w}", category=Category.CONFIG,
                                   importance=0.9))

    def answer(body: dict[str, Any]) -> Reply:
        if kind(body) == "merge":
            return Reply(json.dumps({"facts": [{"content": "Alice wants short answers in English",
                                                "category": "config", "from": [1, 2]}]}))
        return _profile_or(body, [{"content": "Alice is a Go developer", "category": "identity"}])

    fake.responder = answer
    rep = await Compressor(engine, llm, min_partition=2).weekly()
    assert rep.created == 1
    assert await engine.profile_markdown("alice") == "- Alice is a Go developer"


async def test_saying_a_fact_again_brings_it_back_into_core_memory_until_the_next_refresh(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """The refresh read "answer me in English" and left it out of the
    profile; the user says it again: a strong signal, in Core Memory from
    the next prompt (the reinforced row, not a new one), until a refresh
    has read it again, now said twice."""
    fact = await engine.add(NewMemory(owner="alice", content="Alice wants answers in English",
                                      category=Category.CONFIG, importance=0.8))
    fake.responder = lambda body: _profile_or(body, [{"content": "Alice is a Go developer", "category": "identity"}])
    await Compressor(engine, llm).weekly()
    assert await engine.profile_markdown("alice") == "- Alice is a Go developer"

    clock.advance(2 * 86400)
    await engine.add_event("alice", "2026-03-02", "Alice asked again for answers in English")
    fake.responder = lambda body: Reply(reply([{"content": "Alice wants answers in English", "category": "config",
                                                "importance": 0.8}], "x"))
    assert (await Compressor(engine, llm).daily()).reinforced == 1
    assert await engine.profile_markdown("alice") == "- Alice is a Go developer\n- Alice wants answers in English"
    assert fact.id in await engine.profile_ids("alice")

    seen: list[str] = []

    def profile(body: dict[str, Any]) -> Reply:
        seen.append(user_prompt(body))
        return _profile_or(body, [{"content": "Alice is a Go developer", "category": "identity"}])

    fake.responder = profile
    await Compressor(engine, llm).weekly()
    assert "Alice wants answers in English" in seen[-1]  # read again
    assert await engine.profile_markdown("alice") == "- Alice is a Go developer"


async def test_a_run_before_per_user_refreshes_counts_for_every_user(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """memory.db upgraded: the last run logged one newest id for all. A
    user whose first refresh since fails keeps that run's cutoff."""
    from memory.changelog import write_log

    await engine.add(NewMemory(owner="bob", content="Bob wants answers in French", category=Category.CONFIG,
                               importance=0.9))
    async with engine.db.transaction() as conn:  # an older version's run line
        await write_log(conn, at=engine.now(), job="weekly_compress", action="run", detail={"newest_id": 1})
    await engine.add(NewMemory(owner="bob", content="Bob is called Robert", category=Category.IDENTITY,
                               importance=0.9))
    assert await engine.profile_markdown("bob") == "- Bob is called Robert"
    fake.responder = lambda body: _profile_or(body, [], fail_for="Bob")
    await Compressor(engine, llm).weekly()
    assert await engine.profile_markdown("bob") == "- Bob is called Robert"


async def test_asking_to_remember_it_again_brings_it_back_too(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """memory_save of the same words reinforces the row (no duplicate): said
    again, as extraction's reinforcing is, and in Core Memory again."""
    fact = await engine.add(NewMemory(owner="alice", content="Alice wants answers in English",
                                      category=Category.CONFIG, importance=0.8))
    fake.responder = lambda body: _profile_or(body, [{"content": "Alice is a Go developer", "category": "identity"}])
    await Compressor(engine, llm).weekly()
    assert await engine.profile_markdown("alice") == "- Alice is a Go developer"
    clock.advance(3600)
    hit = await SqliteMemory(engine).remember("alice", "Alice wants answers in English", provenance=Provenance(),
                                              category="config")
    assert hit.id == fact.id
    assert await engine.profile_markdown("alice") == "- Alice is a Go developer\n- Alice wants answers in English"
    [logged] = [e for e in await read_log(engine.db, owner="alice") if e.action == "reinforce"]
    assert (logged.job, logged.memory_id) == ("chat", fact.id)


async def test_an_entry_in_the_words_the_user_went_back_to_is_no_stale_entry(
    engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """Dark mode, then light mode, then dark mode again in the same words (the
    year walk, tests/gateway/test_year_e2e.py): the current entry's words
    repeat a replaced fact's, but its fact is the active one that came back.
    Left out by a model's slip, it is held by the gate as any current entry,
    not demoted at once as "its facts were replaced"."""
    def fact(content: str, importance: float = 1.0) -> NewMemory:
        return NewMemory(owner="alice", content=content, category=Category.CONFIG, importance=importance)

    dark, light = await engine.add(fact("User prefers dark mode")), await engine.add(fact("User prefers light mode"))
    await engine.set_status(dark.id, "superseded", superseded_by=light.id)
    again = await engine.add(fact("User prefers dark mode"))
    await engine.set_status(light.id, "superseded", superseded_by=again.id)
    backed = [await engine.add(fact(f"User likes sport {i}", 0.8)) for i in range(7)]

    def entry(content: str, cites: int, importance: float) -> NewMemory:
        return NewMemory(owner="alice", tier=1, content=content, category=Category.CONFIG, importance=importance,
                         provenance=Provenance(refs=("weekly", f"m:{cites}")))

    current = await engine.add(entry("User prefers dark mode", again.id, 1.0))
    for i in range(7):
        await engine.add(entry(f"Likes sport {i}", backed[i].id, 0.5))
    # The model leaves out the dark-mode entry and two others: three of eight, the gate lets two go.
    fake.responder = lambda body: Reply(json.dumps({"entries": [
        {"content": f"Likes sport {i}", "category": "config"} for i in range(2, 7)
    ]}) if kind(body) == "profile" else Reply(json.dumps({"facts": [], "drop": []})))
    rep = await Compressor(engine, llm, min_partition=100).weekly()
    left = {m.content for m in await engine.profile("alice", include_global=False, limit=1000)}
    assert "User prefers dark mode" in left, left
    assert (await engine.get(current.id)).status.value == "active"  # type: ignore[union-attr]
    assert rep.demoted == 2 and not {"Likes sport 0", "Likes sport 1"} & left


async def test_a_partition_the_merge_kept_whole_is_not_sent_again_until_it_changes(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """A year of use (scripts/walk_year.py) sent a finished project's facts,
    kept whole, to the memory model every Monday: the prompt holds no date,
    so the same facts get the same answer. Asked again once they change."""
    ids = await fill(engine, 12)
    merges: list[str] = []

    def keep_all(body: dict[str, Any]) -> Reply:
        if kind(body) != "merge":
            return Reply(json.dumps({"entries": []}))
        user = body["messages"][-1]["content"]
        merges.append(user)
        nums = re.findall(r"^(\d+)\. \[", user, re.M)
        return Reply(json.dumps({"facts": [
            {"content": re.search(rf"^{n}\. \[[^\]]*\] (.*)$", user, re.M).group(1),  # type: ignore[union-attr]
             "category": "decision", "importance": 0.5, "from": [int(n)]} for n in nums], "drop": []}))

    fake.responder = keep_all
    compressor = Compressor(engine, llm)
    for _ in range(3):
        await compressor.weekly()
        clock.advance(timedelta(days=7))
    assert len(merges) == 1 and await active_ids(engine) == set(ids)
    # A new fact in the partition: asked again, once.
    await engine.add(NewMemory(owner="alice", content="atlas deploy fact number 13", project="atlas", topic="deploy",
                               category=Category.DECISION, importance=0.5))
    await compressor.weekly()
    clock.advance(timedelta(days=7))
    await compressor.weekly()
    assert len(merges) == 2 and "atlas deploy fact number 13" in merges[-1]
    # One of them changed by hand: asked again.
    async with engine.db.transaction() as conn:
        await conn.execute("UPDATE memories SET importance = 0.9 WHERE id = ?", (ids[0],))
    await compressor.weekly()
    assert len(merges) == 3
    # Another memory model: it may judge them otherwise, so it is asked once.
    newer = MemoryLLM(base_url=fake.url, model="mem-model-2", api_key="sk-test-000000", timeout=2.0, retries=0)
    try:
        for _ in range(2):
            clock.advance(timedelta(days=7))
            await Compressor(engine, newer).weekly()
    finally:
        await newer.aclose()
    assert len(merges) == 4
    # Back to the first model: it kept this partition whole as it stands.
    clock.advance(timedelta(days=7))
    await compressor.weekly()
    assert len(merges) == 4


async def test_a_profile_refresh_that_changed_nothing_is_not_asked_again_until_its_facts_change(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """A year of use (scripts/walk_year.py): most weeks nothing important
    was said, and the same profile and facts went to the memory model every
    Monday for the same answer. Not asked again until they change; what the
    refresh read is still logged, so Core Memory's newer facts leave as before."""
    for words in ("User lives in Munich", "User is a tech lead", "User is pescatarian"):
        await engine.add(NewMemory(owner="alice", content=words, category=Category.IDENTITY, importance=1.0))
    asked: list[str] = []

    def profile(body: dict[str, Any]) -> Reply:
        if kind(body) != "profile":
            return Reply(json.dumps({"facts": [], "drop": []}))
        user = body["messages"][-1]["content"]
        asked.append(user)
        facts = re.findall(r"^(\d+)\. \[[^\]]*\] (.*)$", user.split("Important facts:")[1], re.M)
        return Reply(json.dumps({"entries": [{"content": c, "category": "identity", "facts": [int(n)]}
                                             for n, c in facts]}))

    fake.responder = profile
    compressor = Compressor(engine, llm)
    for _ in range(4):
        await compressor.weekly()
        clock.advance(timedelta(days=7))
    # Promoted in the first week, kept in the second: not asked in the third and fourth.
    assert len(asked) == 2
    assert {m.content for m in await engine.profile("alice", include_global=False)} == {
        "User lives in Munich", "User is a tech lead", "User is pescatarian"}
    reads = [e for e in await read_log(engine.db, limit=100) if e.action == "profile_read"]
    assert len(reads) == 4
    # Something new: asked again, and it is promoted.
    await engine.add(NewMemory(owner="alice", content="User prefers dark mode", category=Category.CONFIG,
                               importance=0.9))
    await compressor.weekly()
    assert len(asked) == 3 and "User prefers dark mode" in asked[-1]
    assert "User prefers dark mode" in {m.content for m in await engine.profile("alice", include_global=False)}


async def test_a_kept_profile_refresh_is_asked_once_more_of_another_memory_model(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """``memory.model`` changed: the new model may judge the profile
    otherwise, so the refresh the old one kept asks it once (as the weekly
    merge does), and not again while nothing changes; going back to the old
    model, its answer for this profile stands."""
    for words in ("User lives in Munich", "User is a tech lead", "User is pescatarian"):
        await engine.add(NewMemory(owner="alice", content=words, category=Category.IDENTITY, importance=1.0))
    asked: list[str] = []

    def profile(body: dict[str, Any]) -> Reply:
        if kind(body) != "profile":
            return Reply(json.dumps({"facts": [], "drop": []}))
        asked.append(body["model"])
        user = body["messages"][-1]["content"]
        facts = re.findall(r"^(\d+)\. \[[^\]]*\] (.*)$", user.split("Important facts:")[1], re.M)
        return Reply(json.dumps({"entries": [{"content": c, "category": "identity", "facts": [int(n)]}
                                             for n, c in facts]}))

    fake.responder = profile
    compressor = Compressor(engine, llm)
    for _ in range(3):
        await compressor.weekly()
        clock.advance(timedelta(days=7))
    assert asked == [llm.model, llm.model]  # promoted, then kept: not asked the third week
    newer = MemoryLLM(base_url=fake.url, model="mem-model-2", api_key="sk-test-000000", timeout=2.0, retries=0)
    try:
        for _ in range(3):
            await Compressor(engine, newer).weekly()
            clock.advance(timedelta(days=7))
    finally:
        await newer.aclose()
    assert asked == [llm.model, llm.model, "mem-model-2"]
    await compressor.weekly()
    assert asked == [llm.model, llm.model, "mem-model-2"]
    assert {m.content for m in await engine.profile("alice", include_global=False)} == {
        "User lives in Munich", "User is a tech lead", "User is pescatarian"}
