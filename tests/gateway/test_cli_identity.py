"""``myclaw memory merge-identities`` over real data files: memory.db and its
buffer file, gateway.db, cron.db and the file store's folders."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from gateway.cli import main
from gateway.cron import CronStore
from gateway.datalock import DataLock
from gateway.sessions import SessionStore
from memory import ManualClock, MemoryEngine, NewMemory, Provenance
from memory.backend import Turn
from memory.filestore import FileMemory
from memory.migrate import migrate_files
from memory.retrieval import Retriever
from memory.service import SqliteMemory

HANDLE, USER, STRANGER = "telegram:777", "alice", "telegram:999"
DB_FILES = ("memory.db", "memory.buffer.db", "gateway.db", "cron.db")


@pytest.fixture
def home(home: Path) -> Path:  # conftest's, with the identity map
    h = home
    h.mkdir()
    (h / "config.json").write_text(json.dumps({"memory": {"identities": {USER: [HANDLE, "feishu:ou_a"]}}}))
    return h


def cli(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(main, ["memory", "merge-identities", *args], input=input)


def ok(*args: str) -> Result:
    r = cli(*args)
    assert r.exit_code == 0, r.output
    return r


def turn(owner: str, text: str, message_id: str) -> Turn:
    return Turn(owner=owner, channel="telegram", chat_id=owner.split(":")[-1], role="user", content=text,
                message_id=message_id)


def seed(home: Path) -> None:
    """The handle talked to the bot before it was mapped to alice; a stranger too."""
    data = home / "data"

    async def go() -> None:
        clock = ManualClock("2026-03-01T12:00:00Z")
        async with await MemoryEngine.open(data / "memory.db", clock) as engine:
            await engine.add(NewMemory(owner=HANDLE, content="Alice keeps her sailboat Nimbus at Qingdao marina"))
            await engine.add(NewMemory(owner=USER, content="Alice rents a parking space near the marina office"))
            await engine.add(NewMemory(owner=STRANGER, content="Bob keeps his sailboat at Xiamen"))
            await engine.add_event(HANDLE, "2026-02-20", "talked about sailing the Nimbus")
            await SqliteMemory(engine).buffer([turn(HANDLE, "the mast needs a new halyard", "m1"),
                                               turn(STRANGER, "bob's line", "m2")])
        async with await SessionStore.open(data / "gateway.db", clock) as s:
            for owner, text in [(HANDLE, "my boat is at Qingdao"), (STRANGER, "hi from bob")]:
                await s.append(owner, channel="telegram", chat_id=owner.split(":")[1], role="user", content=text,
                               owner=owner, message_id="1")
        store = await CronStore.open(data / "cron.db", clock)
        try:
            await store.add(schedule="0 9 * * *", message="tide table", channel="telegram", chat_id="777", user=HANDLE)
            await store.add(schedule="0 9 * * *", message="bob's brief", channel="telegram", chat_id="999",
                            user=STRANGER)
        finally:
            await store.close()
        files = FileMemory(home / "workspace", clock)
        await files.remember(HANDLE, "Alice's dinghy is red", provenance=Provenance())
        await files.buffer([turn(HANDLE, "handle's words of the day", "f1")])
        await files.buffer([turn(USER, "alice's words of the day", "f2")])

    asyncio.run(go())


def snapshot(home: Path) -> dict[str, Any]:
    """Every row of every table of the four files, and every file of the workspace."""
    out: dict[str, Any] = {}
    for name in DB_FILES:
        conn = sqlite3.connect(f"file:{home / 'data' / name}?mode=ro", uri=True)
        try:
            for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '%fts%'"):
                out[f"{name}:{t}"] = sorted(conn.execute(f"SELECT * FROM '{t}'").fetchall(), key=repr)
        finally:
            conn.close()
    for p in sorted((home / "workspace").rglob("*")):
        out[str(p.relative_to(home))] = p.read_text() if p.is_file() else "<dir>"
    return out


def owners(home: Path) -> dict[str, list[str]]:
    snap = snapshot(home)
    cols = {"memory.db:memories": 1, "memory.db:daily_events": 1, "memory.buffer.db:extraction_buffer": 1,
            "gateway.db:session_messages": 4, "cron.db:cron_jobs": 6}
    return {k: sorted(r[i] for r in snap[k] if r[i]) for k, i in cols.items()}


def test_dry_run_counts_per_file_and_changes_nothing(home: Path) -> None:
    seed(home)
    before = snapshot(home)
    out = ok("--dry-run").stdout
    rows = [ln.split(None, 3) for ln in out.splitlines()[1:] if ln.startswith("telegram")]
    lines = {tuple(r[:3]): r[3] for r in rows}
    assert lines == {
        (HANDLE, USER, "memory.db"): "1 memory, 1 event",
        (HANDLE, USER, "memory.buffer.db"): "1 buffered message",
        (HANDLE, USER, "gateway.db"): "1 history message",
        (HANDLE, USER, "cron.db"): "1 scheduled job",
        (HANDLE, USER, "files"): "2 files",
    }
    assert "dry run: nothing changed" in out and "feishu:ou_a" not in out  # a handle that owns nothing is not listed
    data = json.loads(ok("--dry-run", "--json").stdout)
    assert data["dry_run"] is True and [h["handle"] for h in data["handles"]] == [HANDLE]
    assert data["handles"][0]["files"]["cron.db"] == {"scheduled jobs": 1}
    assert snapshot(home) == before


def test_dry_run_lists_the_settings_the_merge_moves(home: Path) -> None:
    # The merge moves the handle's /timezone and /incognito: the dry run
    # and the question before it say so, as the run's own report does.
    from datetime import UTC, datetime
    from zoneinfo import ZoneInfo

    from gateway.incognito import Incognito
    from gateway.timezones import UserTimezones

    seed(home)

    async def settings() -> None:
        async with await SessionStore.open(home / "data" / "gateway.db") as s:
            await UserTimezones(s.db).set(HANDLE, ZoneInfo("Europe/Berlin"), at=datetime.now(UTC))
            await Incognito(s.db).start(HANDLE, at=datetime.now(UTC))

    asyncio.run(settings())
    before = snapshot(home)
    wanted = {"history messages": 1, "time zone setting": 1, "incognito setting": 1}
    assert json.loads(ok("--dry-run", "--json").stdout)["handles"][0]["files"]["gateway.db"] == wanted
    assert snapshot(home) == before
    moved = json.loads(ok("--yes", "--json").stdout)["handles"][0]["files"]["gateway.db"]
    assert {k: moved[k] for k in wanted} == wanted


def test_everything_moves_recall_finds_it_and_a_second_run_is_a_no_op(home: Path) -> None:
    seed(home)
    assert cli(input="n\n").exit_code != 0  # asks first; "no" changes nothing
    before = snapshot(home)
    assert snapshot(home) == before

    out = ok("--yes").stdout
    assert f"moved {HANDLE} -> {USER}" in out
    assert owners(home) == {
        "memory.db:memories": [USER, USER, STRANGER],
        "memory.db:daily_events": [USER],
        "memory.buffer.db:extraction_buffer": [USER, STRANGER],
        "gateway.db:session_messages": [USER, STRANGER],
        "cron.db:cron_jobs": [USER, STRANGER],
    }

    async def recall() -> list[str]:
        async with await MemoryEngine.open(home / "data" / "memory.db") as engine:
            return [h.content for h in await Retriever(engine).retrieve(USER, "where is my sailboat?")]

    assert asyncio.run(recall())[0] == "Alice keeps her sailboat Nimbus at Qingdao marina"
    files = FileMemory(home / "workspace")
    assert not files.user_dir(HANDLE).exists()
    alice = files.user_dir(USER)
    assert "Alice's dinghy is red" in (alice / "MEMORY.md").read_text()
    day = next(alice.glob("2026-*.md")).read_text()
    assert day.index("alice's words of the day") < day.index("handle's words of the day")  # appended

    after = snapshot(home)
    assert "nothing to move" in ok("--yes").stdout
    assert snapshot(home) == after

    log = json.loads(CliRunner().invoke(main, ["memory", "log", "--job", "cli", "--json"]).stdout)
    assert [(e["owner"], e["action"], e["detail"]["from"]) for e in log] == [(USER, "merge_identity", HANDLE)]


def test_a_run_interrupted_between_files_is_finished_by_the_next(home: Path) -> None:
    seed(home)
    cron = sqlite3.connect(home / "data" / "cron.db", isolation_level=None)
    # The step after gateway.db fails in the middle of its write (as a full disk would).
    cron.execute("CREATE TRIGGER fail BEFORE UPDATE OF user ON cron_jobs BEGIN SELECT RAISE(ABORT, 'disk I/O'); END")

    r = cli("--yes")
    assert r.exit_code == 1 and "cron.db" in r.output and "run this again" in r.output
    cron.execute("DROP TRIGGER fail")
    cron.close()
    moved = owners(home)
    assert moved["memory.db:memories"] == [USER, USER, STRANGER]
    assert moved["gateway.db:session_messages"] == [USER, STRANGER]
    assert moved["cron.db:cron_jobs"] == [HANDLE, STRANGER]  # not reached
    assert FileMemory(home / "workspace").user_dir(HANDLE).exists()

    plan = json.loads(ok("--dry-run", "--json").stdout)["handles"][0]["files"]
    assert {f: sum(c.values()) for f, c in plan.items() if sum(c.values())} == {"cron.db": 1, "files": 2}
    ok("--yes")
    assert owners(home)["cron.db:cron_jobs"] == [USER, STRANGER]
    assert owners(home)["memory.db:memories"] == [USER, USER, STRANGER]  # nothing moved twice
    assert not FileMemory(home / "workspace").user_dir(HANDLE).exists()


def test_it_does_not_run_beside_a_running_gateway(home: Path) -> None:
    seed(home)
    before = snapshot(home)
    gateway = DataLock(home / "data")
    gateway.share()  # what App.open takes
    try:
        r = cli("--yes")
        assert r.exit_code == 75 and "is running" in r.output
        assert snapshot(home) == before
        assert "1 memory" in ok("--dry-run").stdout  # reading is fine
    finally:
        gateway.release()
    ok("--yes")


def test_moved_file_store_lines_are_not_imported_twice(home: Path) -> None:
    """Memory was off, then on (the handle's files were imported under the
    handle), and both have a log of the same day: the merged day is not
    imported again as one more event."""
    seed(home)

    async def imported() -> tuple[int, int]:
        async with await MemoryEngine.open(home / "data" / "memory.db") as engine:
            await migrate_files(home / "workspace", engine)
            counts = await engine.stats(USER)
            return counts.total, counts.events

    asyncio.run(imported())  # both folders imported, each under its owner
    ok("--yes")
    total, events = asyncio.run(imported())  # the next gateway start imports again
    # alice: her parking space, the sailboat, the dinghy line; the event of the
    # 20th, her day's log and the handle's day's log (imported before the move).
    assert (total, events) == (3, 3)


def test_every_table_with_a_user_is_moved(home: Path) -> None:
    """A table of gateway.db or cron.db added later with an owner or user
    column must be added to the move (memory.db's: tests/memory/test_merge.py)."""
    seed(home)
    found = set()
    for name in ("gateway.db", "cron.db"):
        conn = sqlite3.connect(home / "data" / name)
        try:
            for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
                cols = {r[1] for r in conn.execute(f"PRAGMA table_info('{t}')")}
                found |= {f"{name}:{t}.{c}" for c in cols & {"owner", "user"}}
        finally:
            conn.close()
    assert found == {
        "gateway.db:session_messages.owner", "gateway.db:outbox.owner", "gateway.db:user_timezones.owner",
        "gateway.db:user_incognito.owner", "gateway.db:recent_files.owner", "cron.db:cron_jobs.user",
    }


def test_nothing_mapped(home: Path) -> None:
    (home / "config.json").write_text("{}")
    assert "maps no handles" in ok().stdout


def test_merge_answered_by_end_of_input_changes_nothing_and_says_so(home: Path) -> None:
    """stdin closed at the question printed click's "Aborted!"; it says
    what the other confirmations say. Its counts are in words: '1 memory'."""
    seed(home)
    r = ok("--dry-run")
    assert "1 memories" not in r.output and "1 events" not in r.output, r.output
    r = cli(input="")
    assert r.exit_code == 1, r.output
    assert "cancelled; nothing changed" in r.output and "Aborted" not in r.output, r.output
    assert "telegram:777" in ok("--dry-run").output  # nothing moved
