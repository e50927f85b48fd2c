"""Write-behind for the Feishu reply log and seen ids: changes land in
order, a failed write keeps them for the next (bounded, logged), and a
stop writes what is left."""

from __future__ import annotations

import asyncio

from structlog.testing import capture_logs

from channels.feishu.writebehind import WriteBehind


async def test_a_failed_write_keeps_its_changes_in_order_for_the_next_bounded() -> None:
    written: list[list[int]] = []
    failing = True

    async def write(changes: list[int]) -> None:
        if failing:
            raise OSError("disk full")
        written.append(changes)

    behind: WriteBehind[int] = WriteBehind(write, every=3600, bound=3, name="t", failure="could not save; retrying")
    for n in (1, 2):
        behind.note(n)
    with capture_logs() as logs:
        await behind.flush()
    assert [(e["event"], e["pending"]) for e in logs] == [("could not save; retrying", 2)]
    for n in (3, 4):
        behind.note(n)
    with capture_logs():
        await behind.flush()  # four pending, three kept: the oldest goes
    failing = False
    behind.note(5)
    await behind.flush()
    assert written == [[2, 3, 4, 5]]
    await behind.flush()
    assert written == [[2, 3, 4, 5]]  # nothing new: no write
    await behind.flush(always=True)
    assert written == [[2, 3, 4, 5], []]


async def test_writes_behind_on_its_own_and_a_stop_writes_what_is_left() -> None:
    written: list[list[str]] = []
    wrote = asyncio.Event()

    async def write(changes: list[str]) -> None:
        written.append(changes)
        wrote.set()

    behind: WriteBehind[str] = WriteBehind(write, every=0.01, bound=10, name="t", failure="f")
    behind.start()
    assert behind.started
    behind.note("a")
    await asyncio.wait_for(wrote.wait(), 5)
    behind.note("b")
    await behind.stop()
    await behind.stop()  # twice is fine
    assert written == [["a"], ["b"]] and not behind.started
