"""The Tier 1 profile is cached per owner (MemoryEngine.profile_markdown);
every way a tier-1 row changes must show in the next prompt."""

from __future__ import annotations

from pathlib import Path

from memory import Category, ManualClock, MemoryEngine, NewMemory


def t1(owner: str, content: str, importance: float = 0.9) -> NewMemory:
    return NewMemory(owner=owner, tier=1, content=content, importance=importance, category=Category.IDENTITY)


async def test_tier1_writes_invalidate_the_cached_profile(engine: MemoryEngine) -> None:
    assert await engine.profile_markdown("alice") == ""
    a = await engine.add(t1("alice", "Alice is a Go developer"))
    assert await engine.profile_markdown("alice") == "- Alice is a Go developer"
    await engine.update(a.id, content="Alice is a Rust developer")
    assert await engine.profile_markdown("alice") == "- Alice is a Rust developer"
    g = await engine.add(t1("_global", "The team deploys on Fridays", 0.5))
    assert await engine.profile_markdown("alice") == "- Alice is a Rust developer\n- The team deploys on Fridays"
    await engine.set_status(g.id, "archived")
    assert await engine.profile_markdown("alice") == "- Alice is a Rust developer"
    b = await engine.add(NewMemory(owner="alice", tier=2, content="Alice likes tea", importance=1.0))
    assert await engine.profile_markdown("alice") == "- Alice is a Rust developer"
    await engine.update(b.id, tier=1)  # promoted
    assert await engine.profile_markdown("alice") == "- Alice likes tea\n- Alice is a Rust developer"
    await engine.delete(b.id)
    assert await engine.profile_markdown("alice") == "- Alice is a Rust developer"
    await engine.forget_owner("alice")
    assert await engine.profile_markdown("alice") == ""


async def test_write_inside_a_transaction_is_seen_after_commit(engine: MemoryEngine) -> None:
    # As the compressor does: engine calls with conn= inside one transaction.
    await engine.add(t1("alice", "old"))
    assert await engine.profile_markdown("alice") == "- old"
    async with engine.db.transaction() as conn:
        await engine.add(t1("alice", "new", 1.0), conn=conn)
        # read from the reader connection while uncommitted: old rows
        assert await engine.profile_markdown("alice") == "- old"
    assert await engine.profile_markdown("alice") == "- new\n- old"


async def test_another_process_writing_is_seen_within_a_second(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "memory.db"
    seconds = [100.0]  # the gateway's monotonic clock, moved by hand
    gateway = await MemoryEngine.open(path, clock, monotonic=lambda: seconds[0])
    cli = await MemoryEngine.open(path, clock)  # `myclaw memory ...` beside the gateway
    try:
        await gateway.add(t1("alice", "Alice is a Go developer"))
        assert await gateway.profile_markdown("alice") == "- Alice is a Go developer"
        await cli.forget_owner("alice")
        seconds[0] += 0.5  # the cached profile stands until the once-a-second look at the file
        assert await gateway.profile_markdown("alice") == "- Alice is a Go developer"
        seconds[0] += 0.5
        assert await gateway.profile_markdown("alice") == ""
    finally:
        await cli.close()
        await gateway.close()


async def test_the_profile_in_the_prompt_keeps_to_its_budget_most_important_first(engine: MemoryEngine) -> None:
    # Tier 1 is in every system prompt: a fact pasted at length is cut there
    # (it stays whole in the database), and many long ones stop at the budget
    # with the least important left out, never a more important one.
    from memory.engine import PROFILE_ENTRY_CHARS, PROFILE_TOKEN_BUDGET
    from memory.tokens import estimate_tokens

    essay = await engine.add(t1("alice", "Alice writes about compilers. " * 300, importance=0.99))
    for i in range(100):
        await engine.add(t1("alice", f"Alice fact {i:03d}: " + "details about her work and life " * 12, 0.9 - i / 1000))
    text = await engine.profile_markdown("alice")
    lines = text.split("\n")
    assert lines[0].startswith("- Alice writes about compilers.") and len(lines[0]) == 2 + PROFILE_ENTRY_CHARS
    assert lines[0].endswith("…")
    assert estimate_tokens(text) <= PROFILE_TOKEN_BUDGET + len(lines)
    kept = [int(line.split("fact ")[1][:3]) for line in lines[1:]]
    assert 10 < len(kept) < 100 and kept == list(range(len(kept)))  # a prefix by importance
    stored = await engine.get(essay.id)
    assert stored is not None and len(stored.content) > 4 * PROFILE_ENTRY_CHARS  # not cut on disk


# -- what the user just said about themselves (engine.newer_facts) ------------


def t2(owner: str, content: str, category: Category = Category.CONFIG, importance: float = 0.9) -> NewMemory:
    return NewMemory(owner=owner, content=content, importance=importance, category=category)


async def test_a_new_identity_or_config_fact_is_in_core_memory_before_the_weekly_refresh(engine: MemoryEngine) -> None:
    await engine.add(t1("alice", "Alice is a Go developer"))
    english = await engine.add(t2("alice", "Alice wants answers in English"))
    await engine.add(t2("alice", "Alice is called Yang by her friends", Category.IDENTITY, 1.0))
    assert await engine.profile_markdown("alice") == (
        "- Alice is a Go developer\n- Alice is called Yang by her friends\n- Alice wants answers in English")
    # Recall leaves them out: the prompt shows them once.
    assert english.id in await engine.profile_ids("alice", ids=True)
    # Replaced (superseded) or archived: gone from the next prompt.
    chinese = await engine.add(t2("alice", "Alice wants answers in Chinese again"))
    await engine.set_status(english.id, "superseded", superseded_by=chinese.id)
    text = await engine.profile_markdown("alice")
    assert "Chinese again" in text
    # Only as what it replaced (no longer true, dated), not as a line of its own.
    assert [line for line in text.splitlines() if "English" in line] == [
        "  (it replaced what was said on 2026-03-01, no longer true: Alice wants answers in English)"]


async def test_never_a_credential_nor_another_kind_nor_a_minor_fact(engine: MemoryEngine) -> None:
    await engine.add(t2("alice", "Alice's GitHub token is ghp_0123456789abcdef", Category.CREDENTIAL, 1.0))
    await engine.add(t2("alice", "Atlas uses Postgres", Category.DECISION, 0.9))
    await engine.add(t2("alice", "Alice vaguely likes jazz", Category.IDENTITY, 0.4))
    assert await engine.profile_markdown("alice") == ""
    # Edited into a credential on the memory page: out of the cached block at once.
    fact = await engine.add(t2("alice", "Alice's server is build-01"))
    assert "build-01" in await engine.profile_markdown("alice")
    await engine.update(fact.id, category=Category.CREDENTIAL)
    assert await engine.profile_markdown("alice") == ""


async def test_never_in_another_users_nor_a_groups_core_memory(engine: MemoryEngine) -> None:
    await engine.add(t2("alice", "Alice wants answers in English"))
    assert await engine.profile_markdown("bob") == ""
    assert await engine.profile_markdown("_global", include_global=False) == ""  # a group's block


async def test_a_fact_a_core_entry_states_is_shown_once(engine: MemoryEngine) -> None:
    from memory import Provenance

    fact = await engine.add(t2("alice", "Alice is vegetarian", Category.IDENTITY, 1.0))
    same = await engine.add(t1("alice", "Alice is vegetarian"))
    assert await engine.profile_markdown("alice") == "- Alice is vegetarian"
    assert same.id in await engine.profile_ids("alice") and fact.id not in await engine.profile_ids("alice")
    moved = await engine.add(t2("alice", "Alice moved to Berlin", Category.IDENTITY, 1.0))
    await engine.add(NewMemory(owner="alice", tier=1, content="Alice lives in Berlin", importance=0.9,
                               category=Category.IDENTITY, provenance=Provenance(refs=("weekly", f"m:{moved.id}"))))
    assert "moved to Berlin" not in await engine.profile_markdown("alice")


async def test_the_newer_facts_keep_within_the_block_and_its_budget(engine: MemoryEngine) -> None:
    from memory.engine import NEWER_LIMIT, PROFILE_TOKEN_BUDGET
    from memory.tokens import estimate_tokens

    for i in range(NEWER_LIMIT + 5):
        await engine.add(t2("alice", f"Alice's standing instruction number {i}: " + "word " * 120))
    text = await engine.profile_markdown("alice", ids=True)
    assert len(text.splitlines()) == NEWER_LIMIT and estimate_tokens(text) <= PROFILE_TOKEN_BUDGET
    assert f"number {NEWER_LIMIT + 4}:" in text and "number 0:" not in text  # the newest


async def test_a_weekly_run_logged_before_it_kept_its_id_counts_by_its_time(
    engine: MemoryEngine, clock: ManualClock
) -> None:
    from memory.changelog import write_log

    await engine.add(t2("alice", "Alice wants answers in English"))
    clock.advance(3600)
    async with engine.db.transaction() as conn:  # an older version's run line: no newest_id
        await write_log(conn, at=engine.now(), job="weekly_compress", action="run", detail={"promoted": 0})
    clock.advance(3600)
    await engine.add(t2("alice", "Alice is called Yang", Category.IDENTITY, 1.0))
    assert await engine.profile_markdown("alice") == "- Alice is called Yang"


# -- the fact a newer one replaced, under it (docs/RETRIEVAL.md §6a) ----------


async def test_a_new_fact_that_replaced_one_shows_it_dated_as_no_longer_true(
    engine: MemoryEngine, clock: ManualClock
) -> None:
    """As recall would (format_hit): "when had we picked English?" is
    answerable from Core Memory alone, which recall then leaves out."""
    english = await engine.add(t2("alice", "Alice wants answers in English"))
    clock.advance(3 * 86400)
    chinese = await engine.add(t2("alice", "Alice wants answers in Chinese again"))
    await engine.set_status(english.id, "superseded", superseded_by=chinese.id)
    assert await engine.profile_markdown("alice", ids=True) == (
        f"- [m{chinese.id} · 2026-03-04] Alice wants answers in Chinese again\n"
        "  (it replaced what was said on 2026-03-01, no longer true: Alice wants answers in English)")
    assert await engine.profile_ids("alice", ids=True) == {chinese.id}
    # Erased (the user's /forget m<id>): its words leave the cached block at once.
    await engine.delete(english.id)
    assert await engine.profile_markdown("alice", ids=True) == (
        f"- [m{chinese.id} · 2026-03-04] Alice wants answers in Chinese again")


async def test_no_replaced_line_for_a_credential_an_edit_nor_a_decision_it_replaced_once_merged(
    engine: MemoryEngine,
) -> None:
    old_key = await engine.add(t2("alice", "Alice's build key is sk-old-0123456789abcdef", Category.CREDENTIAL))
    server = await engine.add(t2("alice", "Alice builds on build-02 now"))
    await engine.set_status(old_key.id, "superseded", superseded_by=server.id)
    # Drawn from an edited message: what it replaced was a slip, never true.
    typo = await engine.add(t2("alice", "Alice is called Yamg", Category.IDENTITY, 1.0))
    fixed = await engine.add(NewMemory(owner="alice", content="Alice is called Yang", importance=1.0,
                                       category=Category.IDENTITY, source_text="(edited) call me Yang"))
    await engine.set_status(typo.id, "superseded", superseded_by=fixed.id)
    text = await engine.profile_markdown("alice", ids=True)
    assert "sk-old" not in text and "Yamg" not in text and "replaced" not in text, text


async def test_the_replaced_line_keeps_within_the_budget(engine: MemoryEngine) -> None:
    from memory.engine import PROFILE_TOKEN_BUDGET
    from memory.tokens import estimate_tokens

    for i in range(40):
        await engine.add(t1("alice", f"Alice's standing entry number {i}: " + "word " * 50))
    old = await engine.add(t2("alice", "Alice wants answers in English " + "please " * 40))
    new = await engine.add(t2("alice", "Alice wants answers in Chinese again"))
    await engine.set_status(old.id, "superseded", superseded_by=new.id)
    text = await engine.profile_markdown("alice", ids=True)
    assert estimate_tokens(text) <= PROFILE_TOKEN_BUDGET
    assert text.splitlines()[-2].endswith("Alice wants answers in Chinese again")  # first in, with its history
    assert text.splitlines()[-1].startswith("  (it replaced what was said on")


async def test_erasing_a_replaced_fact_of_another_kind_takes_its_words_out_of_the_block(engine: MemoryEngine) -> None:
    # A decision replaced by a config fact: only the line under the config fact held its words.
    old = await engine.add(t2("alice", "Alice deploys atlas from her laptop", Category.DECISION))
    new = await engine.add(t2("alice", "Alice deploys atlas from CI only"))
    await engine.set_status(old.id, "superseded", superseded_by=new.id)
    assert "from her laptop" in await engine.profile_markdown("alice", ids=True)
    await engine.delete(old.id)
    assert "from her laptop" not in await engine.profile_markdown("alice", ids=True)
    await engine.update(new.id, content="Alice deploys atlas from CI")  # and an edit of the new one
    assert await engine.profile_markdown("alice") == "- Alice deploys atlas from CI"
