"""A fact with a past, shared by the erase tests of the memory page and
the CLI: older versions, Core Memory entries built on it, a linked daily
event, and another user's rows with the same words."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memory import Category, MemoryEngine, NewMemory, Provenance
from memory.backend import Turn
from memory.service import SqliteMemory


@dataclass
class Lineage:
    """Alice's fact ``home`` with what was built on it, and what stays."""

    home: int
    versions: list[int]  # Berlin (superseded), then the two originals a weekly merge folded into `home`
    entries: list[int]  # Core Memory: one drawn from `home` (m:<id>), one repeating its words
    stays: list[int]  # alice's unrelated fact and Core Memory entry
    bobs: list[int]  # bob's row with the same words, and his entry forging a citation of `home`
    event: int  # the daily event of the same messages as `home`
    said: str  # alice's line waiting in the extraction buffer that repeats `home`; bob has the same line


async def lineage(engine: MemoryEngine) -> Lineage:
    async def add(owner: str, content: str, **kw: Any) -> int:
        return (await engine.add(NewMemory(owner=owner, content=content, category=Category.IDENTITY, **kw))).id

    batch = Provenance(channel="telegram", chat_id="1", refs=("buf:7", "buf:8"))
    berlin = await add("alice", "Alice lives in Berlin-Kreuzberg")
    moved = await add("alice", "Alice moved to Munich in May")
    flat = await add("alice", "Alice's new flat is in Munich")
    home = await add("alice", "Alice lives in Munich since May", provenance=batch)
    await engine.set_status(berlin, "superseded", superseded_by=moved)  # an update replaced it
    for old in (moved, flat):  # a weekly merge folded these two into `home`
        await engine.set_status(old, "archived", superseded_by=home)
    tea = await add("alice", "Alice drinks green tea")
    drawn = await add("alice", "Lives in Munich", tier=1, provenance=Provenance(refs=("weekly", f"m:{home}")))
    same = await add("alice", "Alice lives in Munich since May", tier=1)
    teas = await add("alice", "Drinks green tea", tier=1, provenance=Provenance(refs=("weekly", f"m:{tea}")))
    bob = await add("bob", "Alice lives in Munich since May")
    bob_entry = await add("bob", "Lives in Munich", tier=1, provenance=Provenance(refs=("weekly", f"m:{home}")))
    event = await engine.add_event("alice", "2026-03-01", "Alice told the bot about her move", provenance=batch)
    said = "Yes: Alice lives in Munich since May, as I said"
    await SqliteMemory(engine).buffer([
        Turn(owner=owner, channel="telegram", chat_id="1", role="user", content=text, message_id=mid)
        for owner, text, mid in [("alice", said, "1"), ("alice", "what's the weather?", "2"), ("bob", said, "3")]
    ])
    return Lineage(home, [berlin, moved, flat], [drawn, same], [tea, teas], [bob, bob_entry], event.id, said)


async def buffered(engine: MemoryEngine, owner: str) -> list[str]:
    """``owner``'s lines waiting in the extraction buffer."""
    return [r[0] for r in await engine.db.fetchall("SELECT content FROM extraction_buffer WHERE owner = ? ORDER BY id", (owner,))]


async def ids_of(engine: MemoryEngine, owner: str) -> set[int]:
    return {r[0] for r in await engine.db.fetchall("SELECT id FROM memories WHERE owner = ?", (owner,))}
