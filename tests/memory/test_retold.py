"""memory.db migration 12 (memory/retold.py): the ``_global`` facts the daily
compression retold from the legacy top-level day logs, before it left
``_global``'s events alone, are withdrawn on upgrade; the operator's own
``_global`` facts (the top-level MEMORY.md's, the weekly job's of them) stay."""

from __future__ import annotations

from pathlib import Path

from memory import ManualClock, MemoryEngine
from memory.changelog import read_log, write_log
from memory.consolidate import CandidateSet, Consolidator
from memory.llm import Fact
from memory.retrieval import Retriever
from memory.schema import MIGRATIONS, _v12_global_day_logs_withdrawn
from memory.types import GLOBAL_OWNER, Category, Memory, NewMemory, Provenance, Source
from tests.memory.test_schema import _at

BOB = "telegram:bob"


async def _old_daily(engine: MemoryEngine, day: str, line: str, fact: Fact, cands: tuple[Memory, ...] = ()) -> None:
    """What the daily job did with a _global day before it left them alone
    (memory/compression.py ``_daily_group``): the day's event retold as a
    _global fact, the event marked compressed, in one transaction."""
    ev = await engine.add_event(GLOBAL_OWNER, day, line)
    async with engine.db.transaction() as conn:
        await Consolidator(engine).apply(
            conn, GLOBAL_OWNER, [fact], CandidateSet(cands),
            provenance=Provenance(date_from=day, date_to=day, refs=(f"event:{ev.id}",)),
            source=Source.COMPRESSION, job="daily_compress", said=[line], line_refs=[f"event:{ev.id}"],
            revive=False,
        )
        await engine.mark_events_compressed([ev.id], conn=conn)


async def _weekly(engine: MemoryEngine, content: str, cites: list[int], *, tier: int, action: str) -> Memory:
    """A row of the weekly job's: a merge (Tier 2) or a Core Memory entry (Tier 1) citing ``cites``."""
    refs = ("weekly",) * (tier == 1) + tuple(f"m:{i}" for i in cites)
    async with engine.db.transaction() as conn:
        m = await engine.add(NewMemory(owner=GLOBAL_OWNER, tier=tier, content=content, category=Category.CONFIG,
                                       importance=0.9, source=Source.COMPRESSION, provenance=Provenance(refs=refs)),
                             conn=conn)
        for i in cites if tier == 2 else ():
            await engine.set_status(i, "archived", superseded_by=m.id, conn=conn)
        await write_log(conn, at=engine.now(), job="weekly_compress", owner=GLOBAL_OWNER, action=action,
                        memory_id=m.id, detail=content)
    return m


async def test_the_day_logs_retold_as_global_facts_leave_every_users_recall_and_the_operators_facts_stay(
    tmp_path: Path,
) -> None:
    assert MIGRATIONS.index(_v12_global_day_logs_withdrawn) == 11
    path = tmp_path / "memory.db"
    clock = ManualClock("2026-03-02T03:00:00Z")
    db = await _at(path, 11)
    engine = MemoryEngine(db, clock)

    def operators(content: str) -> NewMemory:  # a fact of the top-level MEMORY.md, as the import writes it
        return NewMemory(owner=GLOBAL_OWNER, content=content, category=Category.CONFIG, importance=0.8,
                         source=Source.MIGRATION)

    wifi = await engine.add(operators("The office wifi network is called Heron"))
    elm = await engine.add(operators("The office is at 12 Elm Street"))
    printer = await engine.add(operators("The office printer is a Brother HL-2350"))
    toner = await engine.add(operators("The office printer takes TN-760 toner"))
    alices = await engine.add(NewMemory(owner="telegram:alice", content="Alice's lawyer is Mr Brown",
                                        category=Category.IDENTITY, importance=0.8))
    # The first nightly run of the old code: two legacy days retold, one of
    # them replacing an operator's fact.
    await _old_daily(engine, "2026-02-20", "user: my divorce lawyer is Mrs Vantablack",
                     Fact("The user's divorce lawyer is Mrs Vantablack", Category.IDENTITY, 0.9, lines=(1,)))
    await _old_daily(engine, "2026-02-21", "user: we moved the office to 40 Oak Avenue",
                     Fact("The office is at 40 Oak Avenue", Category.CONFIG, 0.8, updates=1, lines=(1,)), (elm,))
    lawyer, oak = sorted((m for m in await engine.list_memories(GLOBAL_OWNER, limit=50)
                          if m.source is Source.COMPRESSION), key=lambda m: m.id)
    assert "Vantablack" in lawyer.content and "Oak" in oak.content
    # The weekly job: a merge of two operator's facts (theirs, stays), one of
    # the lawyer with the wifi fact, and Core Memory entries drawn from each.
    kept_merge = await _weekly(engine, "The office printer is a Brother HL-2350 taking TN-760 toner",
                               [printer.id, toner.id], tier=2, action="merge")
    mixed = await _weekly(engine, "Wifi Heron; the user's lawyer is Mrs Vantablack", [wifi.id, lawyer.id],
                          tier=2, action="merge")
    entry = await _weekly(engine, "The user has a divorce lawyer, Mrs Vantablack", [mixed.id], tier=1, action="promote")
    kept_entry = await _weekly(engine, "Printer: Brother HL-2350", [kept_merge.id], tier=1, action="promote")
    await db.close()

    async with await MemoryEngine.open(path, clock) as engine:
        r = Retriever(engine)
        for private, chat in ((True, None), (False, ("telegram", "-100"))):
            said = [h.content for q in ("who is my divorce lawyer?", "Vantablack", "where is the office?")
                    for h in await r.retrieve(BOB, q, private=private, chat=chat)]
            assert not [s for s in said if "Vantablack" in s or "Oak" in s], said
            assert (await r.retrieve(BOB, "what is the office wifi called?", private=private, chat=chat))[0].id == wifi.id
            assert (await r.retrieve(BOB, "office street address", private=private, chat=chat))[0].id == elm.id
            assert (await r.retrieve(BOB, "which toner for the printer", private=private, chat=chat))[0].id == \
                kept_merge.id
        assert (await r.retrieve("telegram:alice", "my lawyer"))[0].id == alices.id
        core = [m.content for m in await engine.profile(BOB)]
        assert "Printer: Brother HL-2350" in core and not [c for c in core if "Vantablack" in c]
        got = await engine.get_many([wifi.id, elm.id, lawyer.id, oak.id, kept_merge.id, mixed.id, entry.id,
                                     kept_entry.id, alices.id])
        status = {i: m.status.value for i, m in got.items()}
        assert [status[m.id] for m in (lawyer, oak, mixed, entry)] == ["archived"] * 4
        assert [status[m.id] for m in (wifi, elm, kept_merge, kept_entry, alices)] == ["active"] * 5
        # Archived, not deleted; the days stay the operator's record.
        assert sorted(e.event_date for e in await engine.events(GLOBAL_OWNER)) == ["2026-02-20", "2026-02-21"]
        log = await read_log(engine.db, actions=["withdraw", "restore"])
        # What changed: the lawyer fact was archived already (merged into ``mixed``).
        assert sorted((e.action, e.memory_id) for e in log) == sorted(
            [("withdraw", oak.id), ("withdraw", mixed.id), ("withdraw", entry.id),
             ("restore", wifi.id), ("restore", elm.id)])
        assert {e.job for e in log} == {"migration"} and {e.owner for e in log} == {GLOBAL_OWNER}

        hits = await engine.db.fetchall("SELECT rowid FROM memories_fts WHERE memories_fts MATCH 'vantablack'")
        assert hits == []


async def test_a_database_the_old_daily_job_never_ran_on_is_left_as_it_was(tmp_path: Path) -> None:
    """No daily ``add`` of _global's: nothing withdrawn, no reindex asked."""
    path = tmp_path / "memory.db"
    clock = ManualClock("2026-03-02T03:00:00Z")
    db = await _at(path, 11)
    engine = MemoryEngine(db, clock)
    a = await engine.add(NewMemory(owner=GLOBAL_OWNER, content="Deploys happen on Tuesdays", source=Source.MIGRATION))
    b = await engine.add(NewMemory(owner=GLOBAL_OWNER, content="Deploys need two reviews", source=Source.MIGRATION))
    merged = await _weekly(engine, "Deploys: Tuesdays, two reviews", [a.id, b.id], tier=2, action="merge")
    await db.close()
    async with await MemoryEngine.open(path, clock) as engine:
        got = await engine.get_many([a.id, b.id, merged.id])
        assert [got[i].status.value for i in (a.id, b.id, merged.id)] == ["archived", "archived", "active"]
        assert await read_log(engine.db, actions=["withdraw", "restore"]) == []
