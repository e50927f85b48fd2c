"""``myclaw backup`` / ``myclaw restore`` over real data files, one of them
taken while a gateway-like process holds the files open and writes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import resource
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from gateway.cli import main
from gateway.cron import CronStore
from gateway.datalock import DataLock
from gateway.sessions import SessionStore
from memory import ManualClock, MemoryEngine, NewMemory
from memory.backend import Turn
from memory.retrieval import Retriever
from memory.service import SqliteMemory


@pytest.fixture
def home(home: Path) -> Path:  # conftest's, with a workspace and a config
    h = home
    (h / "workspace").mkdir(parents=True)
    (h / "workspace" / "SOUL.md").write_text("Be kind.\n", encoding="utf-8")
    (h / "config.json").write_text(json.dumps({"provider": {"apiKey": "sk-secret-in-config"}}), encoding="utf-8")
    return h


def cli(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(main, list(args), input=input)


async def _seed(data: Path, clock: ManualClock) -> None:
    async with await MemoryEngine.open(data / "memory.db", clock) as engine:
        await engine.add(NewMemory(owner="alice", content="Alice's sister lives in Lisbon"))
        await SqliteMemory(engine, Retriever(engine)).buffer(
            [Turn(owner="alice", channel="telegram", chat_id="1", role="user", content="I adopted a cat",
                  message_id="7")]
        )
    async with await SessionStore.open(data / "gateway.db", clock) as sessions:
        await sessions.append("telegram:1", channel="telegram", chat_id="1", role="user", content="hi", owner="alice")
    store = await CronStore.open(data / "cron.db", clock)
    await store.add(schedule="0 9 * * *", message="my agenda", channel="telegram", chat_id="1", user="alice")
    await store.close()


async def _top(db: Path, query: str) -> str:
    async with await MemoryEngine.open(db) as engine:
        hits = await Retriever(engine).retrieve("alice", query)
        return hits[0].content if hits else ""


def test_a_backup_taken_while_the_files_are_open_restores_what_it_held(home: Path, clock: ManualClock) -> None:
    data = home / "data"
    asyncio.run(_seed(data, clock))

    async def while_running() -> Result:
        # A writer with the database open and its WAL unmerged, as a running
        # gateway has it: the copy must still hold the latest commit.
        async with await MemoryEngine.open(data / "memory.db", clock) as engine:
            await engine.add(NewMemory(owner="alice", content="Alice moved the standup to 10:30"))
            return await asyncio.to_thread(cli, "backup", str(home / "b1"))

    r = asyncio.run(while_running())
    assert r.exit_code == 0, r.output
    assert "backed up to" in r.output and "memory (" in r.output and "1 workspace file;" in r.output
    b1 = home / "b1"
    manifest = json.loads((b1 / "manifest.json").read_text())
    assert [f["role"] for f in manifest["files"]] == ["buffer", "memory", "gateway", "cron"]
    assert stat.S_IMODE(b1.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) & 0o077 == 0 for p in b1.rglob("*") if p.is_file())
    assert not any(b"sk-secret-in-config" in p.read_bytes() for p in b1.rglob("*") if p.is_file())
    assert sorted(p.name for p in b1.iterdir()) == [
        "buffer.db", "cron.db", "gateway.db", "manifest.json", "memory.db", "workspace"
    ]

    # Life goes on after the backup; then the backup is put back.
    async def later() -> None:
        async with await MemoryEngine.open(data / "memory.db", clock) as engine:
            await engine.add(NewMemory(owner="alice", content="Alice's dentist appointment is on Friday"))

    asyncio.run(later())
    (home / "workspace" / "SOUL.md").write_text("Be terse.\n", encoding="utf-8")
    assert cli("restore", str(b1), input="n\n").exit_code == 1  # asked, declined: nothing changed
    assert asyncio.run(_top(data / "memory.db", "dentist appointment")).startswith("Alice's dentist")
    r = cli("restore", str(b1), "--yes")
    assert r.exit_code == 0, r.output
    aside = next(data.glob("before-restore-*"))
    assert str(aside) in r.output
    assert asyncio.run(_top(data / "memory.db", "standup")) == "Alice moved the standup to 10:30"
    assert asyncio.run(_top(data / "memory.db", "dentist appointment")) == ""
    assert (home / "workspace" / "SOUL.md").read_text() == "Be kind.\n"
    # Nothing is lost: what was replaced is aside, and opens.
    assert asyncio.run(_top(aside / "memory.db", "dentist appointment")).startswith("Alice's dentist")
    assert (aside / "workspace" / "SOUL.md").read_text() == "Be terse.\n"

    async def restored() -> tuple[int, int, int]:
        async with await MemoryEngine.open(data / "memory.db", clock) as engine:
            (buffered,) = await engine.db.fetchone("SELECT COUNT(*) FROM extraction_buffer")
        async with await SessionStore.open(data / "gateway.db", clock) as sessions:
            history = len(await sessions.window("telegram:1"))
        store = await CronStore.open(data / "cron.db", clock)
        jobs = len(await store.list(user="alice"))
        await store.close()
        return buffered, history, jobs

    assert asyncio.run(restored()) == (1, 1, 1)


def test_restore_refuses_a_damaged_backup_and_a_running_gateway(home: Path, clock: ManualClock) -> None:
    asyncio.run(_seed(home / "data", clock))
    assert cli("backup", str(home / "b")).exit_code == 0
    assert sorted(p.name for p in (home / "data").iterdir()) == [  # nothing left beside the files
        "cron.db", "gateway.db", "memory.buffer.db", "memory.db", "myclaw.lock"  # the lock: held while it copied
    ]
    r = cli("restore", str(home / "b"), "--check")
    assert r.exit_code == 0 and r.output.startswith(f"{home / 'b'}: ok: buffer (")

    gateway = DataLock(home / "data")
    gateway.share()
    try:
        r = cli("restore", str(home / "b"), "--yes")
        assert r.exit_code == 75 and "stop it first" in r.output
    finally:
        gateway.release()

    memory = home / "b" / "memory.db"
    raw = bytearray(memory.read_bytes())
    raw[-100] ^= 0xFF
    memory.write_bytes(bytes(raw))
    before = (home / "data" / "memory.db").read_bytes()
    r = cli("restore", str(home / "b"), "--yes")
    assert r.exit_code == 1 and "memory.db in" in r.output and "checksum differs" in r.output
    assert (home / "data" / "memory.db").read_bytes() == before  # nothing moved
    assert not list((home / "data").glob("before-restore-*"))

    r = cli("restore", str(home / "workspace"))
    assert r.exit_code == 1 and "is not a myclaw backup" in r.output
    r = cli("backup", str(home / "b"))
    assert r.exit_code == 1 and "is not empty" in r.output
    r = cli("backup", str(home / "b2"), "--json")
    out = json.loads(r.output)
    assert r.exit_code == 0 and out["path"] == str(home / "b2")
    assert [(f["role"], f["name"]) for f in out["files"]][:2] == [("buffer", "buffer.db"), ("memory", "memory.db")]


@contextlib.contextmanager
def _disk_holds(limit: int) -> Iterator[None]:
    """No file written grows past ``limit`` bytes (RLIMIT_FSIZE): writes fail
    with EFBIG, as on a disk with that much left (Python ignores SIGXFSZ)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def test_a_backup_the_disk_cannot_hold_removes_the_folders_it_made_and_only_those(
    home: Path, clock: ManualClock
) -> None:
    asyncio.run(_seed(home / "data", clock))
    (home / "workspace" / "files").mkdir()
    (home / "workspace" / "files" / "big.bin").write_bytes(b"x" * (2 << 20))  # past what the disk holds
    outer = home / "backups"
    with _disk_holds(1 << 20):
        r = cli("backup", str(outer / "nightly" / "b1"))
    assert r.exit_code == 1 and "cannot write the backup" in r.output
    assert not outer.exists()  # b1 and the two folders above it were made by the backup: all gone

    # A folder given empty is the user's: emptied of what the backup wrote, kept.
    mine = home / "mine"
    mine.mkdir()
    (home / "beside.txt").write_text("not the backup's\n", encoding="utf-8")
    with _disk_holds(1 << 20):
        r = cli("backup", str(mine))
    assert r.exit_code == 1 and "cannot write the backup" in r.output
    assert mine.is_dir() and list(mine.iterdir()) == []
    assert (home / "beside.txt").read_text(encoding="utf-8") == "not the backup's\n"
    assert cli("backup", str(mine)).exit_code == 0  # space back: the same folder takes the backup


def test_a_backup_of_a_home_with_no_data_is_refused_and_makes_nothing(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # A wrong MYCLAW_HOME must not pass for a backup: an empty one, made
    # there, would be found the day it is needed.
    home = tmp_path / "not-the-home"
    monkeypatch.setenv("MYCLAW_HOME", str(home))
    r = cli("backup")
    assert r.exit_code == 1, r.output
    assert f"nothing to back up in {home}: no data files and no workspace (wrong MYCLAW_HOME?)" in r.output
    assert not home.exists()
    r = cli("backup", str(tmp_path / "dest"))
    assert r.exit_code == 1 and not (tmp_path / "dest").exists()


def test_restoring_a_backup_older_than_an_erasure_says_who_comes_back(home: Path, clock: ManualClock) -> None:
    """A user erased after the backup was made is in it: restoring brings
    them back. The operator is told who, before (--check) and after, with
    the command that erases them again; users still here are not named."""
    data = home / "data"
    asyncio.run(_seed(data, clock))

    async def bob() -> None:
        async with await MemoryEngine.open(data / "memory.db", clock) as engine:
            await engine.add(NewMemory(owner="telegram:2", content="Bob's blood type is AB"))
        async with await SessionStore.open(data / "gateway.db", clock) as sessions:
            await sessions.append("telegram:2", channel="telegram", chat_id="2", role="user", content="hey",
                                  owner="telegram:2")

    asyncio.run(bob())
    assert cli("backup", str(home / "b")).exit_code == 0
    r = cli("memory", "forget", "--user", "telegram:2", "--yes")
    assert r.exit_code == 0, r.output
    checked = cli("restore", str(home / "b"), "--check")
    assert checked.exit_code == 0, checked.output
    assert "1 user this home no longer has (erased or merged since it was made): telegram:2" in checked.output
    assert "alice" not in checked.output.split("no longer has")[1]
    r = cli("restore", str(home / "b"), "--yes")
    assert r.exit_code == 0, r.output
    assert "telegram:2" in r.output and "myclaw memory forget --user telegram:2" in r.output, r.output
    # A backup of the data as it is now names no one.
    assert cli("backup", str(home / "b2")).exit_code == 0
    assert "no longer has" not in cli("restore", str(home / "b2"), "--check").output


def test_restoring_onto_a_new_home_names_no_one_as_erased(home: Path, clock: ManualClock,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A backup restored on a new machine (a home with no data yet) said it
    "brought back" every user "this home no longer has (erased or merged
    since it was made)" and told the operator to erase them all again, and
    that "the files it replaced" were in an empty folder: nobody was erased
    there and nothing was replaced."""
    asyncio.run(_seed(home / "data", clock))
    assert cli("backup", str(home.parent / "b")).exit_code == 0
    new = home.parent / "new-home"
    new.mkdir()
    (new / "config.json").write_text((home / "config.json").read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setenv("MYCLAW_HOME", str(new))
    checked = cli("restore", str(home.parent / "b"), "--check")
    assert checked.exit_code == 0 and "no longer has" not in checked.output, checked.output
    r = cli("restore", str(home.parent / "b"), "--yes")
    assert r.exit_code == 0, r.output
    assert "no longer has" not in r.output and "memory forget" not in r.output, r.output
    assert "replaced" not in r.output and "no data here to replace" in r.output, r.output
    assert not list((new / "data").glob("before-restore-*"))
    assert asyncio.run(_top(new / "data" / "memory.db", "sister")) == "Alice's sister lives in Lisbon"
