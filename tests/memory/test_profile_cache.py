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
