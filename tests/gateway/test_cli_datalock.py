"""``myclaw memory ...``, ``myclaw cron ...`` and ``myclaw backup`` hold the
data lock shared (gateway/datalock.py): they run beside a gateway, and
refuse, exit 75, while a restore or a merge-identities holds it alone, so
they never open a file that is being put in another's place."""

from __future__ import annotations

import asyncio
from pathlib import Path

from click.testing import CliRunner, Result

from gateway.cli import main
from gateway.cli.backup_cmd import RESTORING
from gateway.cron import CronStore
from gateway.datalock import DataLock
from memory import MemoryEngine, NewMemory, SystemClock

BUSY = 75  # EX_TEMPFAIL: try again once the other command is done

READERS_AND_WRITERS = [
    ("memory", "stats"),
    ("memory", "list"),
    ("memory", "search", "tea"),
    ("memory", "add", "Bob likes tea", "--user", "bob"),
    ("memory", "export", "--user", "bob"),
    ("memory", "log"),
    ("memory", "flush"),
    ("memory", "merge-identities", "--dry-run"),
    ("cron", "list"),
    ("cron", "add", "-s", "0 9 * * *", "-m", "x", "--channel", "telegram", "--chat-id", "1", "-u", "bob"),
    ("cron", "remove", "job"),
    ("backup",),
]


def cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def _seed(home: Path) -> None:
    async def go() -> None:
        (home / "data").mkdir(parents=True)
        async with await MemoryEngine.open(home / "data" / "memory.db") as engine:
            await engine.add(NewMemory(owner="bob", content="Bob likes green tea"))
        store = await CronStore.open(home / "data" / "cron.db", SystemClock())
        await store.add(schedule="0 8 * * *", message="agenda", channel="telegram", chat_id="1", user="bob",
                        job_id="job")
        await store.close()

    asyncio.run(go())
    (home / "config.json").write_text('{"memory": {"identities": {"bob": ["telegram:1"]}}}', encoding="utf-8")


def test_a_restore_in_progress_makes_them_refuse_and_change_nothing(home: Path) -> None:
    _seed(home)
    before = {p.name: p.read_bytes() for p in (home / "data").glob("*.db")}
    restore = DataLock(home / "data")
    restore.exclusive(RESTORING)
    try:
        for args in READERS_AND_WRITERS:
            r = cli(*args)
            assert r.exit_code == BUSY, (args, r.output)
            assert "is locked by `myclaw restore` (putting a backup in place)" in r.output, (args, r.output)
            assert "start again when it is done" in r.output
        # Help is not data: it is answered as ever.
        assert cli("memory", "stats", "--help").exit_code == 0
    finally:
        restore.release()
    assert {p.name: p.read_bytes() for p in (home / "data").glob("*.db")} == before
    assert not (home / "backups").exists()
    assert "Bob likes green tea" in cli("memory", "list").output  # free again


def test_they_run_beside_a_gateway_and_a_restore_waits_for_them(home: Path) -> None:
    _seed(home)
    gateway = DataLock(home / "data")
    gateway.share()  # what App.open takes
    try:
        assert "Bob likes green tea" in cli("memory", "list").output
        r = cli("cron", "add", "-s", "0 9 * * *", "-m", "x", "--channel", "telegram", "--chat-id", "1", "-u", "bob",
                "--id", "new")
        assert r.exit_code == 0, r.output
        assert cli("backup", str(home / "b")).exit_code == 0
        r = cli("restore", str(home / "b"), "--yes")
        assert r.exit_code == BUSY and "stop it first" in r.output, r.output
    finally:
        gateway.release()


def test_a_wrong_home_is_reported_not_made(home: Path) -> None:
    """With no data folder there is nothing to lock: none is made for the lock."""
    r = cli("memory", "stats")
    assert r.exit_code == 1 and "no memory database" in r.output
    assert cli("cron", "list").exit_code == 1
    assert not home.exists()
