"""The running gateway picks up hand edits of MEMORY.md and daily files
(memory/filesync.py): each poll stats the files; a file changed and then
left alone for one poll is imported with the same logic as ``myclaw
memory migrate``, that file only."""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory import ManualClock, MemoryEngine, Provenance, Status
from memory.backend import Turn
from memory.filestore import FileMemory
from memory.filesync import FILE_SYNC_LEASE, FileSync, migrate_leased
from memory.lease import Lease, LeaseBusy, LeaseLost, Leases
from memory.clock import format_ts, parse_ts
from memory.migrate import IMPORT_BATCH, SHRINK_HOLD, migrate_files

P = Provenance(channel="telegram", chat_id="1")
_tick = itertools.count(1)


def write(path: Path, text: str) -> None:
    """Write ``text`` with an mtime of its own: two saves within one
    filesystem tick would otherwise look alike."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    ns = 1_700_000_000_000_000_000 + next(_tick) * 1_000_000_000
    os.utime(path, ns=(ns, ns))


async def settle(sync: FileSync) -> None:
    """Two polls: the first notes the change, the second imports it."""
    await asyncio.wait_for(sync.poll(), 10)
    await asyncio.wait_for(sync.poll(), 10)


async def active(engine: MemoryEngine, owner: str = "_global") -> list[str]:
    return sorted(m.content for m in await engine.list_memories(owner))


async def archived(engine: MemoryEngine) -> list[str]:
    rows = await engine.db.fetchall("SELECT content FROM memories WHERE status = ? ORDER BY content",
                                    (Status.ARCHIVED.value,))
    return [r[0] for r in rows]


async def started(tmp_path: Path, engine: MemoryEngine, text: str) -> tuple[Path, FileSync]:
    """A workspace imported at start, and its sync having seen it."""
    mem = tmp_path / "memory" / "MEMORY.md"
    write(mem, text)
    await migrate_files(tmp_path, engine)
    sync = FileSync(tmp_path, engine)
    await settle(sync)
    return mem, sync


async def test_an_added_line_becomes_a_profile_entry_while_running(tmp_path: Path, engine: MemoryEngine) -> None:
    mem, sync = await started(tmp_path, engine, "- Prefers tea\n")
    write(mem, "- Prefers tea\n- Lives in Lisbon\n")
    await settle(sync)
    assert await active(engine) == ["Lives in Lisbon", "Prefers tea"]
    [m] = [m for m in await engine.list_memories("_global") if m.content == "Lives in Lisbon"]
    assert m.tier == 1
    await settle(sync)  # nothing new: nothing twice
    assert await active(engine) == ["Lives in Lisbon", "Prefers tea"]


async def test_an_edited_line_replaces_its_entry(tmp_path: Path, engine: MemoryEngine) -> None:
    mem, sync = await started(tmp_path, engine, "- Prefers tea\n- Works on atlas\n")
    write(mem, "- Prefers tea\n- Works on borealis\n")
    await settle(sync)
    assert await active(engine) == ["Prefers tea", "Works on borealis"]
    assert await archived(engine) == ["Works on atlas"]


async def test_a_removed_line_archives_its_entry(tmp_path: Path, engine: MemoryEngine) -> None:
    mem, sync = await started(tmp_path, engine, "- Prefers tea\n- Works on atlas\n")
    write(mem, "- Prefers tea\n")
    await settle(sync)
    assert await active(engine) == ["Prefers tea"]
    assert await archived(engine) == ["Works on atlas"]
    log = await engine.db.fetchall("SELECT action FROM memory_log WHERE job = 'migration'")
    assert [r[0] for r in log] == ["file_removed"]


async def test_an_emptied_file_archives_nothing(tmp_path: Path, engine: MemoryEngine) -> None:
    """An editor that crashed mid-save left an empty file: not a wish to forget everything."""
    mem, sync = await started(tmp_path, engine, "- Prefers tea\n- Works on atlas\n")
    write(mem, "")
    await settle(sync)
    assert await active(engine) == ["Prefers tea", "Works on atlas"] and await archived(engine) == []
    write(mem, "- Prefers tea\n- Works on atlas\n")  # saved again: nothing doubled
    await settle(sync)
    assert await active(engine) == ["Prefers tea", "Works on atlas"] and await archived(engine) == []


TEN = "".join(f"- Fact number {i} about the user\n" for i in range(10))


async def test_a_file_cut_to_a_fraction_is_held_not_archived(tmp_path: Path, engine: MemoryEngine) -> None:
    """An editor crash or ``> MEMORY.md`` and a partial write leaves a few
    lines of many: most facts gone in one save is held (nothing archived,
    nothing added), logged, and said in the ledger the doctor reads."""
    mem, sync = await started(tmp_path, engine, TEN)
    write(mem, TEN[:100])  # three whole lines and part of a fourth
    await settle(sync)
    assert len(await active(engine)) == 10 and await archived(engine) == []
    rows = await engine.db.fetchall("SELECT value FROM meta WHERE value LIKE '%held%'")
    assert len(rows) == 1 and '"removed":7' in rows[0][0]
    write(mem, TEN)  # restored from the editor's backup: nothing archived, nothing doubled
    await settle(sync)
    assert len(await active(engine)) == 10 and await archived(engine) == []
    assert await engine.db.fetchall("SELECT value FROM meta WHERE value LIKE '%held%'") == []


async def test_a_large_delete_left_in_place_is_done_after_the_hold(
    tmp_path: Path, engine: MemoryEngine, clock: ManualClock
) -> None:
    """A deliberate large delete still happens: once the file stayed as it
    is for SHRINK_HOLD, the removed lines archive their entries (restorable
    from the memory page, as any removed line)."""
    mem, sync = await started(tmp_path, engine, TEN)
    kept = "- Fact number 0 about the user\n- Fact number 1 about the user\n"
    write(mem, kept)
    await settle(sync)
    assert len(await active(engine)) == 10
    clock.advance(SHRINK_HOLD / 2)
    await settle(sync)
    assert len(await active(engine)) == 10  # not yet
    clock.advance(SHRINK_HOLD / 2)
    await settle(sync)
    assert await active(engine) == ["Fact number 0 about the user", "Fact number 1 about the user"]
    assert len(await archived(engine)) == 8
    log = await engine.db.fetchall("SELECT action FROM memory_log WHERE job = 'migration'")
    assert [r[0] for r in log] == ["file_removed"] * 8


async def test_a_rewrite_or_a_small_delete_is_not_held(tmp_path: Path, engine: MemoryEngine) -> None:
    """Only a shrink is held: every line reworded, or two of ten removed, is imported at once."""
    mem, sync = await started(tmp_path, engine, TEN)
    write(mem, TEN.replace("about the user", "about Alice"))
    await settle(sync)
    assert len(await archived(engine)) == 10 and all("Alice" in f for f in await active(engine))
    write(mem, TEN.replace("about the user", "about Alice").replace("- Fact number 3 about Alice\n", ""))
    await settle(sync)
    assert len(await active(engine)) == 9


async def test_a_file_still_being_written_waits_for_the_next_poll(tmp_path: Path, engine: MemoryEngine) -> None:
    """Half a save read mid-write would archive the lines not written yet
    (and import them again a moment later): a change is imported only once
    the file stayed the same for a whole poll."""
    mem, sync = await started(tmp_path, engine, "- Prefers tea\n- Works on atlas\n")
    write(mem, "- Prefers tea\n")  # the first half of the save
    await asyncio.wait_for(sync.poll(), 10)
    write(mem, "- Prefers tea\n- Works on atlas\n- Lives in Lisbon\n")  # the whole of it
    await asyncio.wait_for(sync.poll(), 10)
    assert await active(engine) == ["Prefers tea", "Works on atlas"]  # not yet: it just changed
    await asyncio.wait_for(sync.poll(), 10)
    assert await active(engine) == ["Lives in Lisbon", "Prefers tea", "Works on atlas"]
    assert await archived(engine) == []


async def test_two_saves_in_one_timestamp_tick_are_both_imported(tmp_path: Path, engine: MemoryEngine) -> None:
    """Two saves of the same size within one filesystem tick (1-2 s on some
    filesystems) leave the same stat; a file whose mtime is that close to
    the poll that saw it has its content compared at the next poll (git's
    racy clean), so the second save is imported too."""
    mem = tmp_path / "memory" / "MEMORY.md"
    t = 1_800_000_000_000_000_000

    def save(text: str) -> None:
        mem.parent.mkdir(parents=True, exist_ok=True)
        mem.write_text(text, encoding="utf-8")
        os.utime(mem, ns=(t, t))

    save("- Prefers tea\n")
    wall = [t + 300_000_000]
    sync = FileSync(tmp_path, engine, wall_ns=lambda: wall[0])
    await settle(sync)
    assert await active(engine) == ["Prefers tea"]
    save("- Prefers rum\n")  # same size, same mtime
    await settle(sync)
    assert await active(engine) == ["Prefers rum"] and await archived(engine) == ["Prefers tea"]
    wall[0] = t + 60_000_000_000  # long after: the stamp is trusted again, nothing imported twice
    await settle(sync)
    assert await asyncio.wait_for(sync.poll(), 10) is None
    assert await active(engine) == ["Prefers rum"]


async def test_a_daily_file_edit_and_growth(tmp_path: Path, engine: MemoryEngine) -> None:
    day = tmp_path / "memory" / "2026-02-20.md"
    write(day, "Discussed the atlas deploy.\n")
    mem, sync = await started(tmp_path, engine, "- Prefers tea\n")
    write(day, "Discussed the atlas deploy.\nBooked the venue.\n")  # grew
    await settle(sync)
    assert [e.summary for e in await engine.events("_global")] == ["Discussed the atlas deploy.", "Booked the venue."]
    write(day, "Discussed the borealis deploy.\n")  # edited
    await settle(sync)
    assert [e.summary for e in await engine.events("_global")] == ["Discussed the borealis deploy."]


async def test_only_the_changed_file_is_read(tmp_path: Path, engine: MemoryEngine) -> None:
    mem, sync = await started(tmp_path, engine, "- Prefers tea\n")
    user = tmp_path / "memory" / "2026-02-20.md"
    write(user, "Discussed the atlas deploy.\n")
    await asyncio.wait_for(sync.poll(), 10)
    report = await asyncio.wait_for(sync.poll(), 10)
    assert report is not None and report.files_seen == 1 and report.events_added == 1
    assert await asyncio.wait_for(sync.poll(), 10) is None  # nothing changed: no import at all


async def test_the_bots_own_file_writes_do_not_echo(tmp_path: Path, engine: MemoryEngine, clock: ManualClock) -> None:
    """What the file store writes (``myclaw chat`` with memory off, say) comes
    in once; the sync's own ledger and a fact SQLite already holds are not
    read back as new edits, and nothing the bot wrote is archived."""
    files = FileMemory(tmp_path, clock)
    await files.remember("alice", "Alice's cat is called Miso", provenance=P)
    await migrate_files(tmp_path, engine)
    sync = FileSync(tmp_path, engine)
    await settle(sync)
    await files.remember("alice", "Alice runs on Sundays", provenance=P)
    await files.buffer([Turn(owner="alice", channel="telegram", chat_id="1", role="user",
                             content="booked flights to Osaka", at=datetime(2026, 3, 1, 9, tzinfo=UTC))])
    await settle(sync)
    await settle(sync)
    assert await active(engine, "alice") == ["Alice runs on Sundays", "Alice's cat is called Miso"]
    assert await archived(engine) == []
    assert len(await engine.events("alice")) == 1
    await files.buffer([Turn(owner="alice", channel="telegram", chat_id="1", role="user",
                             content="and a hotel", at=datetime(2026, 3, 1, 10, tzinfo=UTC))])
    await settle(sync)
    evs = await engine.events("alice")
    assert len(evs) == 2 and "booked flights" not in evs[1].summary  # the new part only


async def test_a_busy_lease_waits_for_the_next_poll(tmp_path: Path, engine: MemoryEngine) -> None:
    """One importer at a time (``myclaw memory migrate`` beside the gateway):
    while another holds the lease, the change waits, and is imported after."""
    mem, sync = await started(tmp_path, engine, "- Prefers tea\n")
    write(mem, "- Prefers tea\n- Lives in Lisbon\n")
    leases = Leases(engine.db, engine.clock)
    lease = await leases.acquire(FILE_SYNC_LEASE, "migrate@other")
    await settle(sync)
    assert await active(engine) == ["Prefers tea"]
    await lease.release()
    await asyncio.wait_for(sync.poll(), 10)
    assert await active(engine) == ["Lives in Lisbon", "Prefers tea"]


async def test_start_and_stop_run_the_poll_in_the_background(tmp_path: Path, engine: MemoryEngine) -> None:
    mem, _ = await started(tmp_path, engine, "- Prefers tea\n")
    sync = FileSync(tmp_path, engine, interval=0.01)
    await sync.start()
    try:
        write(mem, "- Prefers tea\n- Lives in Lisbon\n")

        async def imported() -> None:
            while await active(engine) != ["Lives in Lisbon", "Prefers tea"]:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(imported(), 10)
    finally:
        await sync.stop()


async def test_a_dated_line_added_while_running_keeps_its_day(
    tmp_path: Path, engine: MemoryEngine, clock: ManualClock
) -> None:
    """A line pasted in with its date comment (from another bot's file, or
    written back) is dated by it, not by the poll that saw it."""
    mem, sync = await started(tmp_path, engine, "- Prefers tea\n")
    write(mem, "- Prefers tea\n- Lives in Lisbon <!-- 2026-01-15 -->\n- Has a cat <!-- 2099-01-01 -->\n")
    await settle(sync)
    by = {m.content: m.created_at for m in await engine.list_memories("_global")}
    now = format_ts(clock.now())
    assert by == {"Prefers tea": now, "Lives in Lisbon": "2026-01-15T12:00:00Z", "Has a cat": now}


async def test_a_hand_edit_that_puts_the_mtime_back_is_imported(tmp_path: Path, engine: MemoryEngine) -> None:
    """Same size, mtime forced back (``touch -d``, ``rsync -t``): the stat
    the polls compared looked unchanged and the edit was never imported.
    The ctime (set by the kernel at every write, never by a tool) tells."""
    mem, sync = await started(tmp_path, engine, "- Prefers tea\n")
    st = mem.stat()
    while mem.stat().st_ctime_ns == st.st_ctime_ns:  # the ctime steps by a clock tick (a few ms)
        mem.write_text("- Prefers rum\n", encoding="utf-8")
        os.utime(mem, ns=(st.st_atime_ns, st.st_mtime_ns))
        if mem.stat().st_ctime_ns == st.st_ctime_ns:
            time.sleep(0.005)
    assert (mem.stat().st_size, mem.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    await settle(sync)
    assert await active(engine) == ["Prefers rum"] and await archived(engine) == ["Prefers tea"]
    assert await asyncio.wait_for(sync.poll(), 10) is None  # imported once


async def test_an_import_that_added_memories_tells_the_listeners(tmp_path: Path, engine: MemoryEngine) -> None:
    mem, sync = await started(tmp_path, engine, "- Prefers tea\n")
    told: list[str] = []
    sync.on_memories_written(told.append)
    write(mem, "- Prefers tea\n- Lives in Lisbon\n")
    await settle(sync)
    assert told == ["_global"]
    write(mem, "- Lives in Lisbon\n")  # a removal adds nothing to embed
    await settle(sync)
    assert told == ["_global"]


async def test_a_file_that_is_not_utf8_is_warned_about_once_until_it_changes(
        tmp_path: Path, engine: MemoryEngine) -> None:
    """The start's import warned, and the sync's first full pass (it had
    seen no file yet) warned again: the start's import is the sync's."""
    from structlog.testing import capture_logs

    day = tmp_path / "memory" / "2026-03-01.md"
    write(day, "")
    day.write_bytes("- 买了咖啡\n".encode("gbk"))
    write(tmp_path / "memory" / "MEMORY.md", "- Prefers tea\n")
    sync = FileSync(tmp_path, engine)
    with capture_logs() as logs:
        report = await sync.import_all()
        await settle(sync)
        await settle(sync)
    assert [p for p in report.problems if "not UTF-8" in p] != []
    assert len([e for e in logs if "not_utf8" in str(e)]) == 1, logs
    assert await active(engine) == ["Prefers tea"]  # the rest imported at start, not again
    day.write_bytes("- 买了咖啡和茶\n".encode("gbk"))  # changed, still not UTF-8: said again, once
    os.utime(day, ns=(1_800_000_000_000_000_000,) * 2)
    with capture_logs() as logs:
        await settle(sync)
        await settle(sync)
    assert len([e for e in logs if "not_utf8" in str(e)]) == 1, logs


async def imported(engine: MemoryEngine) -> list[str]:
    """Every active memory of _global (a paste is more than a page)."""
    rows = await engine.db.fetchall("SELECT content FROM memories WHERE owner = '_global' AND status = 'active'")
    return sorted(r[0] for r in rows)


async def _watch_batches(engine: MemoryEngine, total: int, task: asyncio.Task[object],
                         on_batch: Callable[[int], Awaitable[bool]]) -> None:
    """Call ``on_batch(imported)`` each time the import's count of _global's
    memories moved and is still short of ``total`` (its last batch is left
    alone); stop when it returns False or the import ends."""
    seen = 0
    while not task.done():
        row = await engine.db.fetchone("SELECT COUNT(*) FROM memories WHERE owner = '_global'")
        n = int(row[0]) if row is not None else 0
        if seen < n < total:
            seen = n
            if not await on_batch(n):
                return
        await asyncio.sleep(0)


async def test_a_long_import_renews_its_lease_between_batches(
    tmp_path: Path, engine: MemoryEngine, clock: ManualClock
) -> None:
    """An import of a paste longer than the lease is kept (each batch of
    IMPORT_BATCH renews it): another importer is told busy all along, and
    every line is imported once."""
    total = IMPORT_BATCH * 6
    write(tmp_path / "memory" / "MEMORY.md", "".join(f"- pasted line {i}\n" for i in range(total)))
    other = Leases(engine.db, clock)
    busy: list[int] = []

    async def later(n: int) -> bool:
        clock.advance(timedelta(minutes=20))  # the import stalled that long: two such outlive 30 minutes
        try:
            taken = await other.acquire(FILE_SYNC_LEASE, "migrate@1:other")
        except LeaseBusy:
            busy.append(n)
            # One stall between two renewals: the import renews after its
            # batch's commit, so the next count could be seen (and the clock
            # moved again) before this stall's renewal, 40 minutes on one
            # lease. Without renewals the import ends first: busy stays 1.
            await _renewed_at(clock.now(), task)
            return True
        await taken.release()
        raise AssertionError(f"the import's lease was free after {n} lines")

    async def _renewed_at(now: datetime, task: asyncio.Task[object]) -> None:
        while not task.done():
            held = await other.holder(FILE_SYNC_LEASE)
            if held is not None and parse_ts(held[1]) >= now + timedelta(minutes=30):
                return
            await asyncio.sleep(0)

    task = asyncio.create_task(migrate_leased(tmp_path, engine))
    await _watch_batches(engine, total, task, later)
    report = await asyncio.wait_for(task, 60)
    assert len(busy) >= 2  # it was looked at past one lease's length
    assert report.memories_added == total
    assert len(await imported(engine)) == total
    assert await other.holder(FILE_SYNC_LEASE) is None  # released


async def test_an_import_taken_over_mid_paste_writes_nothing_more(
    tmp_path: Path, engine: MemoryEngine, clock: ManualClock
) -> None:
    """An import stalled past its lease (a suspended process) and taken over
    by another (a hand-run ``myclaw memory migrate``) stops at its next
    write: LeaseLost, no row or ledger entry after the takeover, the other's
    lease left to it; the other's import then adds each line once. (The
    takeover queues on this engine's writer, as a reply's write does, so it
    lands between two batches rather than waiting out SQLite's busy lock.)"""
    total = IMPORT_BATCH * 6
    write(tmp_path / "memory" / "MEMORY.md", "".join(f"- pasted line {i}\n" for i in range(total)))
    other = Leases(engine.db, clock)
    taken: list[tuple[int, Lease]] = []

    async def take_over(n: int) -> bool:
        clock.advance(timedelta(minutes=31))
        lease = await other.acquire(FILE_SYNC_LEASE, "migrate@1:other")
        taken.append((len(await imported(engine)), lease))
        return False

    task = asyncio.create_task(migrate_leased(tmp_path, engine))
    await _watch_batches(engine, total, task, take_over)
    with pytest.raises(LeaseLost):
        await asyncio.wait_for(task, 60)
    assert len(taken) == 1
    at_takeover, lease = taken[0]
    assert 0 < at_takeover < total
    assert len(await imported(engine)) == at_takeover  # nothing written after the takeover
    ledger = await engine.db.fetchone("SELECT COUNT(*) FROM meta WHERE key LIKE 'migrated:%'")
    assert ledger is not None and ledger[0] == 0  # the ledger goes with the last batch
    assert (await other.holder(FILE_SYNC_LEASE) or ("", ""))[0] == "migrate@1:other"

    await lease.release()  # the other import, done its way: the same import, run now
    report = await migrate_leased(tmp_path, engine)
    assert report.memories_added == total - at_takeover
    contents = await imported(engine)
    assert len(contents) == len(set(contents)) == total  # each line once


async def test_a_poll_whose_import_is_taken_over_returns_and_the_sync_goes_on(
    tmp_path: Path, engine: MemoryEngine, clock: ManualClock
) -> None:
    """The file sync's import, taken over mid-paste, is not an error that
    ends the sync (its loop catches only SQLite and disk errors): the poll
    returns None, the file is not taken as imported, and once the other
    import is done a later poll finishes it, each line once."""
    mem, sync = await started(tmp_path, engine, "- I live in Lisbon\n")
    total = IMPORT_BATCH * 6
    write(mem, "- I live in Lisbon\n" + "".join(f"- pasted line {i}\n" for i in range(total)))
    assert await sync.poll() is None  # seen changed: imported once it stays so
    other = Leases(engine.db, clock)
    taken: list[Lease] = []

    async def take_over(n: int) -> bool:
        clock.advance(timedelta(minutes=31))
        taken.append(await other.acquire(FILE_SYNC_LEASE, "migrate@1:other"))
        return False

    task = asyncio.create_task(sync.poll())
    await _watch_batches(engine, total + 1, task, take_over)
    assert await asyncio.wait_for(task, 60) is None
    assert len(taken) == 1 and len(await imported(engine)) < total + 1
    await taken[0].release()
    report = await asyncio.wait_for(sync.poll(), 60)  # unchanged since: the same file, imported now
    assert report is not None
    contents = await imported(engine)
    assert len(contents) == len(set(contents)) == total + 1
    assert await sync.poll() is None  # and then done
