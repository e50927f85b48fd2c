from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from memory import ManualClock, MemoryEngine
from memory.changelog import read_log
from memory.consolidate import MAX_REFS, merged_refs
from memory.extraction import ExtractionService
from memory.llm import MemoryLLM
from memory.retrieval import Retriever
from memory.service import SqliteMemory
from tests.fakes.openai_server import FakeOpenAI, Reply

from ._writepath import fake, llm, reply, turns, user_prompt  # noqa: F401


async def say(mem: SqliteMemory, svc: ExtractionService, owner: str, text: str, n: int) -> None:
    await mem.buffer(turns(owner, (text, "ok"), start=n))
    [rep] = await svc.flush_now(owner)
    assert rep.ok, rep


async def test_restated_fact_reinforces_instead_of_adding(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    mem, svc = SqliteMemory(engine), ExtractionService(engine, llm)
    # The model restates it in the same words (caught by hash) or says same_as.
    fake.responder = lambda body: Reply(
        reply([{"content": "User prefers Chinese", "category": "identity", "importance": 0.6,
                "same_as": 1 if "1. [" in user_prompt(body) else None}])
    )
    for i in range(10):
        clock.advance(timedelta(hours=1))
        await say(mem, svc, "alice", "please answer me in Chinese, I prefer Chinese", i * 10)
    [m] = await engine.list_memories("alice", status=None)
    assert m.content == "User prefers Chinese" and m.access_count == 9
    assert m.importance == 1.0 and m.updated_at == engine.now()  # 0.6 + 9 x 0.05, capped
    assert "1. [identity" in user_prompt(fake.requests[-1])  # the model was shown the candidate
    assert len(await read_log(engine.db, actions=["reinforce"])) == 9


async def test_a_restatement_adds_the_words_it_was_said_in(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    mem, svc = SqliteMemory(engine), ExtractionService(engine, llm)
    fake.responder = lambda body: Reply(reply([{"content": "User prefers Chinese", "lines": [1]}]))
    said = ["please answer me in Chinese", "中文回答就好，我看得更快", "please answer me in Chinese"]
    for i, text in enumerate(said):
        clock.advance(timedelta(hours=1))
        await say(mem, svc, "alice", text, i * 10)
    [m] = await engine.list_memories("alice", status=None)
    assert m.source_text == "please answer me in Chinese 中文回答就好，我看得更快"  # the repeat adds nothing
    hits = await Retriever(engine).retrieve("alice", "我看得更快的是什么？")
    assert hits and hits[0].id == m.id and hits[0].content == "User prefers Chinese"


async def test_a_chinese_question_finds_an_english_fact_by_the_terms_its_extraction_gave(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """The read path calls no LLM: the write path's model names the words in
    both languages, and a restatement adds the new ones (capped)."""
    mem, svc = SqliteMemory(engine), ExtractionService(engine, llm)
    fake.queue_reply(reply([
        {"content": "We picked Postgres over MySQL", "category": "decision", "lines": [1], "topic": "backend",
         "terms": ["数据库", "database", "Postgres"]},
        {"content": "The staging password is hunter2", "category": "credential", "terms": ["hunter2", "密码"]},
    ]))
    await say(mem, svc, "alice", "we went with Postgres over MySQL in the end", 0)
    fake.queue_reply(reply([{"content": "We picked Postgres over MySQL", "terms": ["选型", "database"]}]))
    await say(mem, svc, "alice", "yes, Postgres it is", 10)
    fact, secret = sorted(await engine.list_memories("alice"), key=lambda m: m.id)
    assert fact.search_terms == ("数据库", "database", "Postgres", "选型")
    assert secret.search_terms == ()  # a credential is found by its own words only
    r = Retriever(engine)
    hits = await r.retrieve("alice", "数据库我们最后选了什么？")
    assert hits and hits[0].id == fact.id and hits[0].content == "We picked Postgres over MySQL"
    assert (await r.retrieve("alice", "选型"))[0].id == fact.id
    # Never shown as the fact: /memory lists the fact's words only.
    overview = await mem.overview("alice")
    assert "数据库" not in repr([m.content for m in overview.recent])


async def test_same_wording_in_one_batch_is_one_row(engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM) -> None:
    mem, svc = SqliteMemory(engine), ExtractionService(engine, llm)
    fake.queue_reply(reply([{"content": "Uses pnpm"}, {"content": "uses  PNPM"}]))
    await say(mem, svc, "alice", "I use pnpm. Yes, pnpm.", 1)
    assert len(await engine.list_memories("alice")) == 1


async def test_replacing_fact_supersedes_and_retrieval_shows_only_current(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    mem, svc = SqliteMemory(engine), ExtractionService(engine, llm)
    fake.queue_reply(reply([{"content": "用户住在北京", "category": "identity", "topic": "住址"}]))
    await say(mem, svc, "alice", "我住在北京", 1)
    clock.advance(timedelta(days=30))

    def responder(body: dict[str, Any]) -> Reply:
        prompt = user_prompt(body)
        # The candidate is shown by a local number, never by its database id.
        assert "1. [identity, 1.0] 用户住在北京" in prompt and "m1" not in prompt
        return Reply(reply([{"content": "用户搬到了上海", "category": "identity", "topic": "住址", "updates": 1}]))

    fake.responder = responder
    await say(mem, svc, "alice", "我从北京搬到上海了，北京的房子退了", 2)
    rows = {m.content: m for m in await engine.list_memories("alice", status=None)}
    old, new = rows["用户住在北京"], rows["用户搬到了上海"]
    assert old.status.value == "superseded" and old.superseded_by == new.id and new.status.value == "active"
    hits = await Retriever(engine).retrieve("alice", "北京 上海 住在哪里")
    assert [h.content for h in hits] == ["用户搬到了上海"]
    [entry] = await read_log(engine.db, actions=["supersede"])
    assert entry.memory_id == old.id and "用户搬到了上海" in entry.detail


async def test_candidates_are_the_owners_own_tier2_facts(engine: MemoryEngine, fake: FakeOpenAI, llm: MemoryLLM) -> None:
    from memory import NewMemory

    await engine.add(NewMemory(owner="bob", content="bob deploys with npm"))
    await engine.add(NewMemory(owner="_global", content="the team deploys with docker"))
    await engine.add(NewMemory(owner="alice", tier=1, content="alice deploys with care"))
    await engine.add(NewMemory(owner="alice", content="alice deploys with npm"))
    mem, svc = SqliteMemory(engine), ExtractionService(engine, llm)
    # An out-of-range number from the model points at nothing.
    fake.queue_reply(reply([{"content": "alice deploys with pnpm", "updates": 7}]))
    await say(mem, svc, "alice", "how do we deploy? npm or pnpm?", 1)
    prompt = user_prompt(fake.requests[-1])
    assert "1. [event, 0.5] alice deploys with npm" in prompt
    assert "bob" not in prompt and "docker" not in prompt and "with care" not in prompt
    assert {m.content for m in await engine.list_memories("alice", tier=2)} == {
        "alice deploys with npm", "alice deploys with pnpm"}


async def test_a_restatement_links_its_batch_to_the_fact(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """The second batch's messages and event become the fact's sources too:
    forgetting the fact names both events, forgetting the second event names the fact."""
    mem, svc = SqliteMemory(engine), ExtractionService(engine, llm)
    fake.responder = lambda body: Reply(reply(
        [{"content": "User prefers Chinese", "same_as": 1 if "1. [" in user_prompt(body) else None, "lines": [1]}], "s"))
    await say(mem, svc, "alice", "please answer me in Chinese", 1)
    [m] = await engine.list_memories("alice")
    first = m.provenance.refs
    assert len(first) == 2 and all(r.startswith("buf:") for r in first)
    clock.advance(timedelta(hours=1))
    await say(mem, svc, "alice", "中文回答就好", 2)
    e1, e2 = sorted(await engine.events("alice"), key=lambda e: e.id)
    [m] = await engine.list_memories("alice")
    assert m.provenance.refs == (*first, *e2.provenance.refs) and len(m.provenance.refs) == 4
    assert e1.provenance.refs == first
    assert m.provenance.channel == "telegram"  # the rest of the first batch's provenance stays

    done = await mem.forget("alice", [f"e{e2.id}"])
    assert [h.ref for h in done.kept] == [f"m{m.id}"]
    done = await mem.forget("alice", [f"m{m.id}"])
    assert [h.ref for h in done.kept] == [f"e{e1.id}"]  # e2 is gone already


async def test_forgetting_a_fact_restated_in_a_later_batch_names_that_batchs_event(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    mem, svc = SqliteMemory(engine), ExtractionService(engine, llm)
    fake.responder = lambda body: Reply(reply([{"content": "Alice drinks oolong"}], "tea"))  # same words: reinforced
    for i in range(3):
        clock.advance(timedelta(hours=1))
        await say(mem, svc, "alice", f"oolong again, day {i}", i * 10)
    [m] = await engine.list_memories("alice")
    events = sorted(await engine.events("alice"), key=lambda e: e.id)
    assert m.provenance.refs == tuple(r for e in events for r in e.provenance.refs) and len(m.provenance.refs) == 6
    done = await mem.forget("alice", [f"m{m.id}"])
    assert [h.ref for h in done.kept] == [f"e{e.id}" for e in events]


async def test_a_fact_said_many_times_keeps_its_first_and_latest_refs(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    mem, svc = SqliteMemory(engine), ExtractionService(engine, llm)
    fake.responder = lambda body: Reply(reply([{"content": "Alice drinks oolong"}], "tea"))
    for i in range(20):  # 20 batches of 2 buffered messages: 40 refs
        clock.advance(timedelta(hours=1))
        await say(mem, svc, "alice", f"oolong again, time {i}", i * 10)
    [m] = await engine.list_memories("alice")
    events = sorted(await engine.events("alice"), key=lambda e: e.id)
    said = [r for e in events for r in e.provenance.refs]
    assert len(said) == 40 and len(m.provenance.refs) == MAX_REFS == 32
    assert m.provenance.refs == (*said[:8], *said[-24:])  # batches 1-4 and 9-20
    done = await mem.forget("alice", [f"m{m.id}"])
    assert [h.ref for h in done.kept] == [f"e{e.id}" for e in (*events[:4], *events[8:])]


def test_merged_refs_dedupes_keeps_order_and_caps() -> None:
    assert merged_refs(("a", "b"), ("b", "c")) == ("a", "b", "c")
    have = tuple(f"buf:{i}" for i in range(1, 41))  # a first batch of 40 messages
    assert merged_refs(have, ("buf:3",)) == have  # nothing new: never cut
    got = merged_refs(have, ("buf:20", "buf:99"))
    # the first refs, then the most recent, a ref cited again counting as recent
    assert got == (*have[:8], "buf:18", "buf:19", *have[20:], "buf:20", "buf:99")
    assert len(got) == MAX_REFS


async def test_a_group_batch_cannot_rewrite_a_private_fact_and_a_private_rewrite_leaves_the_group(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """A group's batch is not shown the member's private facts (the dose),
    so it can neither copy nor rewrite them; a private chat's batch that
    rewrites a group's fact ("updates") may carry private words into it, so
    the new fact names no chat any group reads (memory/scope.py)."""
    mem, svc = SqliteMemory(engine), ExtractionService(engine, llm)
    fake.queue_reply(reply([{"content": "Alice takes sertraline 50mg for depression", "lines": [1]}]))
    await mem.buffer(turns("alice", ("I take sertraline 50mg for my depression", "ok"), chat="100"))
    [rep] = await svc.flush_now("alice")
    assert rep.ok
    clock.advance(timedelta(hours=1))
    fake.queue_reply(reply([
        {"content": "Alice is switching off sertraline next week", "updates": 1, "lines": [1]},
        {"content": "Alice leads the Friday release", "lines": [1]},
    ]))
    await mem.buffer(turns("alice", ("I'm switching off sertraline next week, and I lead the Friday release", "ok"),
                           chat="-5", start=10))
    [rep] = await svc.flush_now("alice")
    sent = user_prompt(fake.requests[-1])
    assert rep.ok and "50mg" not in sent and "Existing memories:\n(none)" in sent
    assert rep.superseded == []  # "updates": 1 pointed at nothing it was shown
    group = {h.content for h in await mem.search("alice", "sertraline medication release Friday", private=False,
                                                chat=("telegram", "-5"))}
    assert group == {"Alice is switching off sertraline next week", "Alice leads the Friday release"}
    clock.advance(timedelta(hours=1))
    fake.queue_reply(reply([{"content": "Alice leads the Friday release, on sertraline 25mg", "updates": 1,
                             "lines": [1]}]))
    await mem.buffer(turns("alice", ("I still lead the Friday release, dose now 25mg", "ok"), chat="100", start=20))
    [rep] = await svc.flush_now("alice")
    assert rep.ok and len(rep.superseded) == 1
    group = {h.content for h in await mem.search("alice", "sertraline release Friday", private=False,
                                                chat=("telegram", "-5"))}
    assert not any("25mg" in c for c in group)
    mine = {h.content for h in await mem.search("alice", "sertraline release", private=True)}
    assert "Alice leads the Friday release, on sertraline 25mg" in mine


async def test_a_private_restatement_of_a_groups_fact_adds_no_words_the_group_searches(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """A fact's source words are indexed: a group's search finds its fact by
    them. Said again in private, with private words around it, the group's
    fact is reinforced but does not take those words."""
    mem, svc = SqliteMemory(engine), ExtractionService(engine, llm)
    fake.queue_reply(reply([{"content": "Alice drinks chamomile tea", "lines": [1]}]))
    await mem.buffer(turns("alice", ("I drink chamomile tea", "ok"), chat="-5"))
    [rep] = await svc.flush_now("alice")
    [tea] = rep.added
    clock.advance(timedelta(hours=1))
    fake.queue_reply(reply([{"content": "Alice drinks chamomile tea", "same_as": 1, "lines": [1]}]))
    await mem.buffer(turns("alice", ("chamomile tea calms my panic attacks", "ok"), chat="100", start=10))
    [rep] = await svc.flush_now("alice")
    assert rep.reinforced == [tea]
    assert await mem.search("alice", "panic attacks", private=False, chat=("telegram", "-5")) == []


def updating(facts: list[dict[str, Any]], old: dict[str, str]) -> Any:
    """A model that marks a fact ``updates: N`` when the memory it replaces
    (``old[fact content]``, a part of its words) is among those shown."""

    def responder(body: dict[str, Any]) -> Reply:
        shown = user_prompt(body).split("Existing memories:")[1].split("\n\n")[0].splitlines()
        out = []
        for f in facts:
            n = next((int(line.split(".")[0]) for line in shown if f["content"] in old and old[f["content"]] in line), None)
            out.append({**f, "updates": n})
        return Reply(reply(out))

    return responder


async def test_a_change_said_in_other_words_is_shown_the_fact_it_replaces_and_supersedes_it(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """"I moved to Berlin" shares no word with "User lives in Shanghai": the
    memories searched by the user's lines missed it, the model was shown
    none, could not say ``updates``, and both stayed current ("where do I
    live?" answered Shanghai). The facts the model wrote are searched too
    (their words, and the facts it filed under the same topic); what they
    find that it was not shown is shown in a second call."""
    mem, svc = SqliteMemory(engine), ExtractionService(engine, llm)
    fake.responder = updating([{"content": "User lives in Shanghai", "category": "identity", "topic": "home"}], {})
    await say(mem, svc, "alice", "I live in Shanghai", 1)
    fake.responder = updating([{"content": "Billing service uses Postgres", "category": "decision",
                                "project": "billing"}], {})
    await say(mem, svc, "alice", "We chose Postgres", 2)
    assert len(fake.requests) == 2  # nothing to look at again: one call a batch
    clock.advance(timedelta(days=120))

    fake.responder = updating([{"content": "User moved to Berlin", "category": "identity", "topic": "home"}],
                              {"User moved to Berlin": "Shanghai"})
    await say(mem, svc, "alice", "I moved to Berlin last week", 3)
    first, second = (user_prompt(b) for b in fake.requests[2:])
    assert "Shanghai" not in first and "1. [identity, 1.0] User lives in Shanghai" in second
    fake.responder = updating([{"content": "Billing service uses MySQL", "category": "decision",
                                "project": "billing"}], {"Billing service uses MySQL": "Postgres"})
    await say(mem, svc, "alice", "we switched to MySQL", 4)
    assert "Postgres" not in user_prompt(fake.requests[4]) and "Postgres" in user_prompt(fake.requests[5])

    now = {m.content for m in await engine.list_memories("alice")}
    assert now == {"User moved to Berlin", "Billing service uses MySQL"}
    r = Retriever(engine)
    hits = [h.content for h in await r.retrieve("alice", "which database does billing use?")]
    assert hits[0] == "Billing service uses MySQL" and "Billing service uses Postgres" not in hits
    assert "User lives in Shanghai" not in [h.content for h in await r.retrieve("alice", "where do I live?")]
    assert len(await read_log(engine.db, actions=["supersede"])) == 2


async def test_a_second_look_that_fails_keeps_the_first_answer(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    mem, svc = SqliteMemory(engine), ExtractionService(engine, llm)
    fake.queue_reply(reply([{"content": "User lives in Shanghai", "category": "identity", "topic": "home"}]))
    await say(mem, svc, "alice", "I live in Shanghai", 1)
    fake.queue_reply(reply([{"content": "User moved to Berlin", "category": "identity", "topic": "home"}]))
    fake.queue_error(500, times=3)
    await say(mem, svc, "alice", "I moved to Berlin", 2)
    assert len(fake.requests) == 3
    assert {m.content for m in await engine.list_memories("alice")} == {"User lives in Shanghai", "User moved to Berlin"}
    assert await engine.db.fetchall("SELECT id FROM extraction_buffer") == []


async def test_a_core_memory_entry_drawn_from_a_fact_merged_since_goes_when_the_merged_fact_is_replaced(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """The weekly refresh drew the entry from "lives in Shanghai" (m:1); a
    later weekly merge folded that fact into another; the move replaced the
    merged fact, and the entry, citing only the original, kept saying
    Shanghai in every prompt."""
    from memory import Category, NewMemory, Provenance

    first = await engine.add(NewMemory(owner="alice", content="User lives in Shanghai", category=Category.IDENTITY))
    merged = await engine.add(NewMemory(owner="alice", content="User lives in Shanghai, in Jing'an",
                                        category=Category.IDENTITY))
    await engine.set_status(first.id, "archived", superseded_by=merged.id)  # the weekly merge
    entry = await engine.add(NewMemory(owner="alice", tier=1, content="Lives in Shanghai", category=Category.IDENTITY,
                                       provenance=Provenance(refs=("weekly", f"m:{first.id}"))))
    mem, svc = SqliteMemory(engine), ExtractionService(engine, llm)
    fake.responder = updating([{"content": "User moved to Berlin", "category": "identity"}],
                              {"User moved to Berlin": "Shanghai"})
    await say(mem, svc, "alice", "I left Shanghai, I live in Berlin now", 1)
    assert (await engine.get(merged.id)).status.value == "superseded"  # type: ignore[union-attr]
    gone = await engine.get(entry.id)
    assert gone is not None and gone.status.value == "superseded"
    # Only as history, under the fact that replaced it (no longer true), never as what holds.
    assert [line for line in (await mem.profile("alice")).splitlines() if "Shanghai" in line] == [
        "  (it replaced what was said on 2026-03-01, no longer true: User lives in Shanghai, in Jing'an)"]


async def test_no_second_look_for_a_restatement_or_a_fact_sharing_only_its_subject(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """Every fact starts "User ...": a hit on that word alone is no reason
    to ask again, nor is a fact already stored in the same words. (Events
    here: a new identity fact is shown the user's others whatever its
    words, test_a_new_fact_about_who_the_user_is_...)"""
    from memory import Category, NewMemory

    for fact in ["User lives in Shanghai", "User works as a nurse", "Billing service uses Postgres",
                 "Deploys run on Fridays"]:
        await engine.add(NewMemory(owner="alice", content=fact, category=Category.EVENT))
    mem, svc = SqliteMemory(engine), ExtractionService(engine, llm)
    # "User has a cat" hits both "User ..." facts on that word, at 0.39 and 0.355.
    fake.responder = updating([{"content": "User lives in Shanghai", "category": "event"},
                               {"content": "User has a cat", "category": "event"}], {})
    await say(mem, svc, "alice", "same home as ever; and we adopted a kitten", 1)
    assert "(none)" in user_prompt(fake.requests[0])  # the words found nothing: both facts were searched
    assert len(fake.requests) == 1
    assert len(await engine.list_memories("alice")) == 5


async def test_a_second_look_in_a_group_shows_only_what_the_group_may_read(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """The second look (Consolidator.recheck) searches the facts the model
    wrote; learning from a group it must find only that group's facts of
    the member, as the first look does: shown a private fact to replace, the
    model would copy its words into the group's."""
    mem, svc = SqliteMemory(engine), ExtractionService(engine, llm)
    fake.responder = updating([{"content": "User lives in Shanghai near the Jing'an clinic", "category": "identity",
                                "topic": "home"}], {})
    await mem.buffer(turns("alice", ("I live in Shanghai, near the Jing'an clinic", "ok"), chat="100"))
    [rep] = await svc.flush_now("alice")
    assert rep.ok
    clock.advance(timedelta(days=30))
    fake.responder = updating([{"content": "User moved to Berlin", "category": "identity", "topic": "home"}],
                              {"User moved to Berlin": "Shanghai"})
    await mem.buffer(turns("alice", ("I moved to Berlin last week", "welcome!"), chat="-5", start=10))
    [rep] = await svc.flush_now("alice")
    assert rep.ok and rep.superseded == []
    assert len(fake.requests) == 2  # no second call: nothing the group may read to show
    assert not any("Jing'an" in user_prompt(b) for b in fake.requests[1:])
    assert [m.content for m in await engine.list_memories("alice") if "Shanghai" in m.content]  # still current


async def test_a_second_look_finds_the_fact_filed_under_another_name_of_the_project(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """The topic lookup asked for the project name the model wrote: after
    "/project atlas orion" the old fact is filed under orion, and a model
    still saying "atlas" found nothing; nor did a fact under the user's
    atlas after the operator renamed _global's atlas. Every name of the
    project is looked under."""
    from memory import GLOBAL_OWNER, Category, NewMemory

    go = await engine.add(NewMemory(owner="alice", content="Service code uses Go", category=Category.DECISION,
                                    project="atlas", topic="language"))
    await engine.set_project_alias("alice", "atlas", "orion", source="user")
    mem, svc = SqliteMemory(engine), ExtractionService(engine, llm)
    fake.responder = updating([{"content": "Switched to Rust", "category": "decision", "project": "atlas",
                                "topic": "language"}], {"Switched to Rust": "uses Go"})
    await say(mem, svc, "alice", "we switched to Rust", 1)
    assert len(fake.requests) == 2 and "Service code uses Go" in user_prompt(fake.requests[1])
    assert (await engine.get(go.id)).status.value == "superseded"  # type: ignore[union-attr]
    assert {(m.content, m.project) for m in await engine.list_memories("alice")} == {("Switched to Rust", "orion")}

    js = await engine.add(NewMemory(owner="bob", content="Frontend is plain JS", category=Category.DECISION,
                                    project="nimbus", topic="frontend"))
    await engine.set_project_alias(GLOBAL_OWNER, "nimbus", "cirrus", source="manual")  # bob's facts stay
    fake.responder = updating([{"content": "TypeScript everywhere now", "category": "decision", "project": "cirrus",
                                "topic": "frontend"}], {"TypeScript everywhere now": "plain JS"})
    await say(mem, svc, "bob", "TypeScript everywhere now", 2)
    assert (await engine.get(js.id)).status.value == "superseded"  # type: ignore[union-attr]


async def test_a_new_fact_about_who_the_user_is_is_shown_their_others_though_no_word_is_shared(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """Old "User lives in Shanghai" and new "User moved to Berlin last week"
    are both filed under _general and share only "User" (no standout hit):
    neither the words nor the topic found the old one, and both stayed
    current. An identity fact (home, work, partner: one value at a time)
    is shown the user's current identity facts whatever their words."""
    from memory import Category, NewMemory

    for fact in ("User lives in Shanghai", "User works as a nurse", "User's partner is Sam"):
        await engine.add(NewMemory(owner="alice", content=fact, category=Category.IDENTITY))
    await engine.add(NewMemory(owner="alice", content="Billing service uses Postgres", category=Category.DECISION))
    await engine.add(NewMemory(owner="bob", content="User lives in Paris", category=Category.IDENTITY))
    mem, svc = SqliteMemory(engine), ExtractionService(engine, llm)
    fake.responder = updating([{"content": "User moved to Berlin last week", "category": "identity"}],
                              {"User moved to Berlin last week": "Shanghai"})
    await say(mem, svc, "alice", "I moved to Berlin last week", 1)
    assert len(fake.requests) == 2
    second = user_prompt(fake.requests[1])
    assert "User lives in Shanghai" in second and "Paris" not in second and "Postgres" not in second
    assert {m.content for m in await engine.list_memories("alice", category="identity")} == {
        "User moved to Berlin last week", "User works as a nurse", "User's partner is Sam"}


async def test_the_second_look_says_which_memories_it_adds_and_asks_about_each(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """Shown the old fact among the others, a model that did not connect
    "moved to Berlin" with "lives in Shanghai" said nothing again, and both
    stayed current. The second call says which memories were found for the
    facts it wrote and asks, for each, whether one of them replaces it. The
    fake model here marks ``updates`` only for a memory the prompt points at
    that way (as a model that skims a long list would)."""
    from memory import Category, NewMemory

    home = await engine.add(NewMemory(owner="alice", content="User lives in Shanghai", category=Category.IDENTITY))
    await engine.add(NewMemory(owner="alice", content="User works as a nurse", category=Category.IDENTITY))
    mem, svc = SqliteMemory(engine), ExtractionService(engine, llm)

    def skimming(body: dict[str, Any]) -> Reply:
        prompt = user_prompt(body)
        pointed = re.search(r"Memories ([\d, ]+) were found by the facts you wrote", prompt)
        shown = prompt.split("Existing memories:")[1].split("\n\n")[0].splitlines()
        numbers = {int(n) for n in pointed.group(1).split(", ")} if pointed else set()
        n = next((int(line.split(".")[0]) for line in shown if "Shanghai" in line), None)
        return Reply(reply([{"content": "User moved to Berlin last week", "category": "identity",
                             "updates": n if n in numbers else None}]))

    fake.responder = skimming
    await say(mem, svc, "alice", "I moved to Berlin last week", 1)
    second = user_prompt(fake.requests[1])
    assert "Memories 1, 2 were found by the facts you wrote" in second and '"updates"' in second
    assert "were found by" not in user_prompt(fake.requests[0])
    assert (await engine.get(home.id)).status.value == "superseded"  # type: ignore[union-attr]


async def test_a_group_fact_in_the_words_of_a_private_one_is_the_groups_own_row(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """Said in a group in exactly the words of a private fact, it is not
    folded into the private row (which no group reads): the group gets its
    own, indexed as a row of its own, and the private row takes none of
    the group's words nor loses its own."""
    mem, svc = SqliteMemory(engine), ExtractionService(engine, llm)
    fake.queue_reply(reply([{"content": "Alice is moving to Lisbon in May", "lines": [1]}]))
    await mem.buffer(turns("alice", ("I'm moving to Lisbon in May, don't tell my boss", "ok"), chat="100"))
    [rep] = await svc.flush_now("alice")
    [private] = rep.added
    clock.advance(timedelta(hours=1))
    fake.queue_reply(reply([{"content": "Alice is moving to Lisbon in May", "lines": [1]}]))
    await mem.buffer(turns("alice", ("Team, I'm moving to Lisbon in May", "ok"), chat="-5", start=10))
    [rep] = await svc.flush_now("alice")
    assert rep.ok and rep.reinforced == [] and len(rep.added) == 1 and rep.added[0] != private
    group = await mem.search("alice", "Lisbon May", private=False, chat=("telegram", "-5"))
    assert [h.id for h in group] == rep.added
    assert await mem.search("alice", "Lisbon", private=False, chat=("telegram", "-6")) == []
    # The lexical index holds both rows, each with its own words.
    rows = await engine.db.fetchall("SELECT rowid FROM memories_fts WHERE memories_fts MATCH 'Lisbon' ORDER BY rowid")
    assert [r["rowid"] for r in rows] == [private, rep.added[0]]
    assert await mem.search("alice", "boss", private=False, chat=("telegram", "-5")) == []
    # The group's second telling reinforces the group's row, not the private one.
    clock.advance(timedelta(hours=1))
    fake.queue_reply(reply([{"content": "Alice is moving to Lisbon in May", "lines": [1]}]))
    await mem.buffer(turns("alice", ("Yes, Lisbon in May!", "ok"), chat="-5", start=20))
    [again] = await svc.flush_now("alice")
    assert again.reinforced == rep.added and again.added == []


async def test_a_feishu_group_fact_from_before_kinds_were_kept_takes_no_private_words(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """A Feishu chat id does not say whether it is a group, and facts
    learnt before the kind was kept do not say either: such a fact is taken
    for a group's (fail closed), so a private restatement does not add the
    private words around it to what the group searches it by."""
    from memory.service import Turn
    from memory.types import NewMemory, Provenance

    old = await engine.add(NewMemory(owner="alice", content="Alice drinks chamomile tea",
                                     provenance=Provenance.from_json('{"channel":"feishu","chat_id":"oc_team"}')))
    mem, svc = SqliteMemory(engine), ExtractionService(engine, llm)
    fake.queue_reply(reply([{"content": "Alice drinks chamomile tea", "same_as": 1, "lines": [1]}]))
    await mem.buffer([
        Turn(owner="alice", channel="feishu", chat_id="oc_alice_dm", role=r, content=c, message_id="om_1", group=False)
        for r, c in (("user", "chamomile tea calms my panic attacks"), ("assistant", "ok"))
    ])
    clock.advance(timedelta(minutes=5))
    [rep] = await svc.flush_now("alice")
    assert rep.reinforced == [old.id]
    assert await mem.search("alice", "panic attacks", private=False, chat=("feishu", "oc_team")) == []


async def test_a_new_value_of_a_one_at_a_time_thing_of_any_category_is_shown_the_old_one(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """Only ``identity`` facts were shown their peers whatever their words:
    a phone filed as ``config`` ("User's phone is an iPhone 12") and its
    successor ("User switched to a Pixel 8"), a preference ("User likes
    coffee" / "User now prefers tea") filed as ``decision``, a project's
    date under another topic shared no telling word, so both stayed current.
    A fact about a thing that holds one value at a time (memory/slots.py:
    home, work, partner, phone, computer, car, a preference, a project's
    date or state) is shown the stored facts about the same thing, of any
    category; a project's date only its own project's."""
    from memory import Category, NewMemory

    olds = [
        ("User's phone is an iPhone 12", Category.CONFIG, "_global", "devices"),
        ("User likes coffee", Category.DECISION, "_global", "_general"),
        ("Atlas launch is due March 1", Category.DECISION, "atlas", "schedule"),
        ("Nimbus launch is due June 9", Category.DECISION, "nimbus", "schedule"),
        ("User has a cat", Category.EVENT, "_global", "_general"),
    ]
    ids = {}
    for content, cat, project, topic in olds:
        ids[content] = (await engine.add(NewMemory(owner="alice", content=content, category=cat, project=project,
                                                   topic=topic))).id
    await engine.add(NewMemory(owner="bob", content="User's phone is a Galaxy S9", category=Category.CONFIG))
    mem, svc = SqliteMemory(engine), ExtractionService(engine, llm)
    cases = [
        ("I switched to a Pixel 8", {"content": "User switched to a Pixel 8", "category": "identity"},
         "iPhone 12", "Galaxy"),
        ("these days it's tea for me", {"content": "User now prefers tea", "category": "identity"},
         "coffee", "Galaxy"),
        ("it slipped to April 15", {"content": "Atlas ships on April 15", "category": "event",
                                       "project": "atlas", "topic": "release"}, "Atlas launch", "Nimbus"),
    ]
    for n, (said, fact, old, never) in enumerate(cases):
        before = len(fake.requests)
        fake.responder = updating([fact], {fact["content"]: old})
        await say(mem, svc, "alice", said, n + 1)
        assert len(fake.requests) == before + 2, said  # one second look
        second = user_prompt(fake.requests[-1])
        assert old in second and never not in second and "has a cat" not in second, second
    now = {m.content for m in await engine.list_memories("alice")}
    assert now == {"User switched to a Pixel 8", "User now prefers tea", "Atlas ships on April 15",
                   "Nimbus launch is due June 9", "User has a cat"}


async def test_a_fact_about_nothing_held_one_at_a_time_makes_no_second_look(
    engine: MemoryEngine, clock: ManualClock, fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    from memory import Category, NewMemory

    for fact in ("User's phone is an iPhone 12", "User likes coffee", "User lives in Shanghai"):
        await engine.add(NewMemory(owner="alice", content=fact, category=Category.CONFIG))
    mem, svc = SqliteMemory(engine), ExtractionService(engine, llm)
    fake.responder = updating([{"content": "User adopted a kitten", "category": "event"},
                               {"content": "Deploys run on Fridays", "category": "decision"}], {})
    await say(mem, svc, "alice", "we adopted a kitten; deploys run on Fridays", 1)
    assert len(fake.requests) == 1


async def test_a_groups_model_is_not_told_what_a_shared_fact_replaced(engine: MemoryEngine) -> None:
    """A shared fact is a candidate in a group; the private fact it
    replaced is not the group's to hear (the daily compression shows the
    model what candidates replaced)."""
    from memory.consolidate import CandidateSet, Consolidator
    from memory.sharing import share
    from memory.types import NewMemory, Provenance

    me = Provenance(channel="telegram", chat_id="42", group=False)
    old = await engine.add(NewMemory(owner="alice", content="alice lives in Hangzhou", provenance=me))
    new = await engine.add(NewMemory(owner="alice", content="alice lives in Shanghai", provenance=me))
    await engine.set_status(old.id, "superseded", superseded_by=new.id)
    await share(engine, "alice", [new.id], None)
    cands = CandidateSet(tuple((await engine.get_many([new.id])).values()))
    c = Consolidator(engine)
    assert [(m.id, n) for m, n in await c.replaced(cands)] == [(old.id, 1)]
    assert await c.replaced(cands, group=("telegram", "-100")) == []
