"""A named period finds what was true then: a fact said in it and replaced
since is recalled, under the fact that replaced it (docs/RETRIEVAL.md §6a).
The year's walk asked "back in February" of a decision replaced in March
and got February's trivia (docs/BENCHMARKS.md, "A year of one user")."""

from __future__ import annotations

from zoneinfo import ZoneInfo

from memory import Category, ManualClock, MemoryEngine, NewMemory
from memory.format import format_hits
from memory.service import SqliteMemory

BERLIN = ZoneInfo("Europe/Berlin")
ASKED = "What did we decide about the database for Atlas back in February?"


def said(content: str, words: str, category: Category = Category.EVENT, topic: str = "work") -> NewMemory:
    return NewMemory(owner="alice", content=content, category=category, importance=0.8 if category != "event" else 0.5,
                     project="atlas", topic=topic, source_text=words)


async def _year(engine: MemoryEngine, clock: ManualClock) -> tuple[int, int]:
    """January to December: a February decision replaced in March, short
    February lines about Atlas around it, and the rest of the year."""
    clock.set("2026-02-02T18:00:00Z")
    postgres = 0
    for day in range(2, 28):
        clock.set(f"2026-02-{day:02d}T18:00:00Z")
        await engine.add(said(f"Alice worked on Atlas task {day}", f"Worked on Atlas today: task {day}."))
        if day == 11:
            postgres = (await engine.add(said(
                "For Atlas the team chose Postgres over MySQL because it needs JSONB",
                "For Atlas we decided on Postgres instead of MySQL, because we need JSONB.",
                Category.DECISION, "database"))).id
        if day == 14:
            await engine.add(said("Atlas is due to ship by 2026-04-30", "Atlas must ship by the end of April.",
                                  Category.DECISION, "schedule"))
    clock.set("2026-03-18T18:00:00Z")
    mysql = await engine.add(said("Atlas switched from Postgres to MySQL because ops only run MySQL",
                                  "For Atlas we're moving from Postgres to MySQL after all: ops only run MySQL.",
                                  Category.DECISION, "database"))
    await engine.set_status(postgres, "superseded", superseded_by=mysql.id)
    for day in range(19, 31):
        clock.set(f"2026-03-{day:02d}T18:00:00Z")
        await engine.add(said(f"Alice worked on Atlas task {day + 30}", f"Worked on Atlas today: task {day + 30}."))
    clock.set("2027-01-01T12:00:00Z")
    return postgres, mysql.id


async def test_a_decision_said_in_the_period_and_replaced_since_comes_back_under_its_replacement(
    engine: MemoryEngine, clock: ManualClock
) -> None:
    postgres, mysql = await _year(engine, clock)
    hits = await SqliteMemory(engine).recall("alice", ASKED, tz=BERLIN)
    assert hits and hits[0].id == mysql, [h.content for h in hits]
    assert hits[0].replaced == ("2026-02-11", "For Atlas the team chose Postgres over MySQL because it needs JSONB")
    block = format_hits(hits)
    assert "no longer true: For Atlas the team chose Postgres" in block, block
    # Asked without a month: the same pair, as before.
    plain = await SqliteMemory(engine).recall("alice", "What did we decide about the database for Atlas?", tz=BERLIN)
    assert plain[0].id == mysql and plain[0].replaced is not None and plain[0].replaced[0] == "2026-02-11"


async def test_the_period_shows_the_fact_said_then_not_the_newest_one_replaced(
    engine: MemoryEngine, clock: ManualClock
) -> None:
    # Postgres (February) -> MySQL (March) -> SQLite (June): asked of February, February's words under SQLite.
    postgres, mysql = await _year(engine, clock)
    clock.set("2026-06-03T18:00:00Z")
    sqlite = await engine.add(said("Atlas moved from MySQL to SQLite for the embedded build",
                                   "Atlas goes SQLite now, for the embedded build.", Category.DECISION, "database"))
    await engine.set_status(mysql, "superseded", superseded_by=sqlite.id)
    clock.set("2027-01-01T12:00:00Z")
    hits = await SqliteMemory(engine).recall("alice", ASKED, tz=BERLIN)
    assert hits[0].id == sqlite.id, [h.content for h in hits]
    assert hits[0].replaced is not None and hits[0].replaced[0] == "2026-02-11", hits[0]
    assert "Postgres over MySQL" in hits[0].replaced[1]
    # Asked of March: March's decision under it.
    march = await SqliteMemory(engine).recall(
        "alice", "What did we decide about the database for Atlas back in March?", tz=BERLIN)
    assert march[0].id == sqlite.id and march[0].replaced is not None and march[0].replaced[0] == "2026-03-18"


async def test_no_period_history_for_an_edit_a_credential_another_user_or_a_group(
    engine: MemoryEngine, clock: ManualClock
) -> None:
    clock.set("2026-02-10T18:00:00Z")
    typo = await engine.add(said("For Atlas the team chose Postgre", "For Atlas we decided on Postgre",
                                 Category.DECISION, "database"))
    key = await engine.add(NewMemory(owner="alice", content="Atlas database password is hunter2-old-0123",
                                     category=Category.CREDENTIAL, project="atlas", topic="database"))
    bobs = await engine.add(NewMemory(owner="bob", content="For Atlas Bob decided on Oracle as the database",
                                      category=Category.DECISION, project="atlas", topic="database"))
    clock.set("2026-02-10T18:05:00Z")
    fixed = await engine.add(NewMemory(owner="alice", content="For Atlas the team chose Postgres",
                                       category=Category.DECISION, project="atlas", topic="database",
                                       source_text="(edited) For Atlas we decided on Postgres"))
    await engine.set_status(typo.id, "superseded", superseded_by=fixed.id)
    clock.set("2026-03-10T18:00:00Z")
    new_key = await engine.add(NewMemory(owner="alice", content="Atlas database password is in the vault now",
                                         category=Category.CREDENTIAL, project="atlas", topic="database"))
    await engine.set_status(key.id, "superseded", superseded_by=new_key.id)
    bob_new = await engine.add(NewMemory(owner="bob", content="Bob's Atlas runs on DB2 now",
                                         category=Category.DECISION, project="atlas", topic="database"))
    await engine.set_status(bobs.id, "superseded", superseded_by=bob_new.id)
    clock.set("2027-01-01T12:00:00Z")
    memory = SqliteMemory(engine)
    text = format_hits(await memory.recall("alice", ASKED, tz=BERLIN))
    assert "Postgre\n" not in text and "Postgre)" not in text and "hunter2" not in text, text
    assert "Oracle" not in text and "DB2" not in text, text
    group = await memory.recall("alice", ASKED, tz=BERLIN, private=False, chat=("echo", "g1"))
    assert all(h.replaced is None for h in group), group


async def test_a_credential_that_replaced_a_fact_carries_no_history_named_period_or_not(
    engine: MemoryEngine, clock: ManualClock
) -> None:
    # The old key was filed as config; the credential that replaced it
    # shows no replaced line, asked of its month or not (as SqliteMemory._with_replaced).
    clock.set("2026-02-10T18:00:00Z")
    old = await engine.add(said("The Atlas staging database key is sunflower77-old",
                                "The Atlas staging database key is sunflower77-old", Category.CONFIG, "database"))
    clock.set("2026-03-10T18:00:00Z")
    new = await engine.add(NewMemory(owner="alice", content="The Atlas staging database key is now moonrise88",
                                     category=Category.CREDENTIAL, project="atlas", topic="database"))
    await engine.set_status(old.id, "superseded", superseded_by=new.id)
    clock.set("2027-01-01T12:00:00Z")
    memory = SqliteMemory(engine)
    for asked in ("What was the Atlas staging database key in February?", "What is the Atlas staging database key?"):
        hits = await memory.recall("alice", asked, tz=BERLIN)
        assert any(h.id == new.id for h in hits), [h.content for h in hits]
        assert all(h.replaced is None for h in hits if h.id == new.id), hits
        assert "sunflower77" not in format_hits(hits), format_hits(hits)


async def _config_chain(engine: MemoryEngine, clock: ManualClock, *, june: bool) -> tuple[int, int, int]:
    """The database choice filed as configuration (a Core Memory newer fact,
    shown in the system prompt): February's Postgres, replaced in March by
    MySQL and, with ``june``, in June by SQLite."""
    clock.set("2026-01-05T18:00:00Z")
    await engine.add(NewMemory(owner="alice", tier=1, content="Alice is a backend developer in Berlin",
                               category=Category.IDENTITY, importance=0.9))
    for day in (3, 9, 20):
        clock.set(f"2026-02-{day:02d}T18:00:00Z")
        await engine.add(said(f"Alice worked on Atlas task {day}", f"Worked on Atlas today: task {day}."))
    clock.set("2026-02-11T18:00:00Z")
    postgres = await engine.add(said("For Atlas the team chose Postgres over MySQL because it needs JSONB",
                                     "For Atlas we decided on Postgres, because we need JSONB.", Category.CONFIG,
                                     "database"))
    clock.set("2026-03-18T18:00:00Z")
    mysql = await engine.add(said("Atlas switched from Postgres to MySQL because ops only run MySQL",
                                  "For Atlas we're moving to MySQL after all: ops only run MySQL.", Category.CONFIG,
                                  "database"))
    await engine.set_status(postgres.id, "superseded", superseded_by=mysql.id)
    heir = mysql.id
    if june:
        clock.set("2026-06-05T18:00:00Z")
        sqlite = await engine.add(said("Atlas moved from MySQL to SQLite for the embedded build",
                                       "Atlas goes SQLite now, for the embedded build.", Category.CONFIG, "database"))
        await engine.set_status(mysql.id, "superseded", superseded_by=sqlite.id)
        heir = sqlite.id
    clock.set("2027-01-01T12:00:00Z")
    return postgres.id, mysql.id, heir


async def test_a_core_memory_heir_brings_the_periods_fact_when_core_shows_another(
    engine: MemoryEngine, clock: ManualClock
) -> None:
    # Core Memory shows June's SQLite with what it replaced (March's MySQL)
    # under it; February's Postgres was nowhere, as the heir was left out of
    # recall (the prompt holds it). It comes back with February's line.
    _, _, sqlite = await _config_chain(engine, clock, june=True)
    mem = SqliteMemory(engine)
    core = await mem.profile("alice")
    assert f"[m{sqlite} · " in core and "Postgres over MySQL" not in core, core
    hits = await mem.recall("alice", ASKED, tz=BERLIN)
    assert hits and hits[0].id == sqlite, [h.content for h in hits]
    assert hits[0].replaced == ("2026-02-11", "For Atlas the team chose Postgres over MySQL because it needs JSONB")
    assert "no longer true: For Atlas the team chose Postgres" in format_hits(hits)


async def test_a_core_memory_heir_showing_the_periods_fact_is_not_shown_twice(
    engine: MemoryEngine, clock: ManualClock
) -> None:
    _, mysql, _ = await _config_chain(engine, clock, june=False)
    mem = SqliteMemory(engine)
    core = await mem.profile("alice")
    assert f"[m{mysql} · " in core and "no longer true: For Atlas the team chose Postgres" in core, core
    assert mysql not in [h.id for h in await mem.recall("alice", ASKED, tz=BERLIN)]
