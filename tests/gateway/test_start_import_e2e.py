"""The start's import of the memory files (gateway/app.py
``_open_write_path``) when it does not run to the end, and what it says:
taken over mid-paste by another import; held off by a holder not known to
be gone; held off by a running import. The real App, its own memory.db and
workspace, the fake model and Telegram on 127.0.0.1. The takeover is another holder's, on the App's own engine, so it queues on
its writer and lands between two of the import's batches (as a reply's
write does); that holder's clock is 31 minutes on: the start's import, as it
sees it, stalled past its 30-minute lease."""

from __future__ import annotations

import asyncio
import io
import json
from datetime import timedelta
from pathlib import Path

from gateway.logging import configure_logging
from memory import ManualClock
from memory.filesync import FILE_SYNC_LEASE
from memory.lease import Leases
from memory.migrate import IMPORT_BATCH
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram

from .takeover import IMPORTED
from .test_e2e_feishu import _app
from .test_quoted_e2e import _telegram
from .test_resume_e2e import KEY, _echo


async def test_a_start_import_taken_over_mid_paste_says_so_not_that_another_is_running(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Before, it logged "memory files not imported at start: another import
    is running" (LeaseBusy's words) though it had imported part of the
    paste and lost its lease later. Now it says what happened; it writes
    nothing after the takeover, and the gateway comes up."""
    total = IMPORT_BATCH * 6
    (tmp_path / "workspace" / "memory").mkdir(parents=True)
    (tmp_path / "workspace" / "memory" / "MEMORY.md").write_text(
        "".join(f"- pasted line {i}\n" for i in range(total)))
    stream = io.StringIO()
    configure_logging(level="INFO", stream=stream, json_output=True)
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            opening = asyncio.create_task(app.open())
            async with asyncio.timeout(30):
                while getattr(app.backend, "engine", None) is None:
                    await asyncio.sleep(0.005)
                engine = app.backend.engine  # type: ignore[union-attr]
                while (row := await engine.db.fetchone(IMPORTED)) is None or row[0] == 0:
                    await asyncio.sleep(0.005)
            other = Leases(engine.db, ManualClock(clock.now() + timedelta(minutes=31)))
            await other.acquire(FILE_SYNC_LEASE, "migrate@1:other")
            row = await engine.db.fetchone(IMPORTED)
            at_takeover = row[0] if row is not None else -1
            await asyncio.wait_for(opening, 60)
            assert 0 < at_takeover < total
            row = await engine.db.fetchone(IMPORTED)
            assert row is not None and row[0] == at_takeover  # nothing written after the takeover
            await asyncio.wait_for(app.start(), 15)
            assert app.channels  # the gateway is up
        finally:
            await asyncio.wait_for(app.close(timeout=0), 30)
    events = [json.loads(line) for line in stream.getvalue().splitlines() if line.startswith("{")]
    said = [e for e in events if "import" in e["event"] and e.get("logger") == "gateway.app"]
    assert [(e["level"], e["event"]) for e in said] == [
        ("warning", "memory files' import at start stopped: it outlived its lease and another import took it "
                    "over, which imports the rest; what this one imported stays")
    ], said
    assert not any("another import is running" in e["event"] for e in events)
    assert "pasted line" not in stream.getvalue()


async def test_a_start_import_held_off_by_a_holder_not_known_to_be_gone_does_not_say_one_is_running(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The lease's holder cannot be proved gone (here an old-format holder:
    it could be a dead process in another container as well as a live
    import on another machine): nothing is imported, and the start says the
    lease is held, not that another import is running."""
    from memory import MemoryEngine

    (tmp_path / "workspace" / "memory").mkdir(parents=True)
    (tmp_path / "workspace" / "memory" / "MEMORY.md").write_text("- Standup is at 10:00\n")
    (tmp_path / "data").mkdir()
    async with await MemoryEngine.open(tmp_path / "data" / "memory.db", clock) as engine:
        await Leases(engine.db, clock).acquire(FILE_SYNC_LEASE, "migrate@4242:abcd")
    stream = io.StringIO()
    configure_logging(level="INFO", stream=stream, json_output=True)
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await asyncio.wait_for(app.open(), 30)
            engine = app.backend.engine  # type: ignore[union-attr]
            row = await engine.db.fetchone(IMPORTED)
            assert row is not None and row[0] == 0
        finally:
            await asyncio.wait_for(app.close(timeout=0), 30)
    events = [json.loads(line) for line in stream.getvalue().splitlines() if line.startswith("{")]
    [said] = [e for e in events if "import" in e["event"] and e.get("logger") == "gateway.app"]
    assert said["level"] == "warning"
    assert said["event"] == ("memory files not imported at start: their import lease is held by a process not known "
                             "to be gone (a dead one elsewhere waits out its expiry); imported once it is free")
    assert said["why"].startswith("job lease 'file_sync' is held by migrate (pid 4242, not known to be gone")


_HOLDER = """
import asyncio, sys
sys.path.insert(0, sys.argv[1])
from memory.engine import MemoryEngine
from memory.filesync import FILE_SYNC_LEASE
from memory.lease import Leases
async def main():
    eng = await MemoryEngine.open(sys.argv[2])
    async with Leases(eng.db, eng.clock).hold(FILE_SYNC_LEASE, "migrate"):
        print("held", flush=True)
        await asyncio.sleep(3600)
asyncio.run(main())
"""


async def test_a_start_import_held_off_by_a_running_import_says_so(tmp_path: Path, clock: ManualClock) -> None:
    """A `myclaw memory migrate` running in another process (proved alive): "another import is running"."""
    import subprocess
    import sys

    (tmp_path / "workspace" / "memory").mkdir(parents=True)
    (tmp_path / "workspace" / "memory" / "MEMORY.md").write_text("- Standup is at 10:00\n")
    (tmp_path / "data").mkdir()
    root = str(Path(__file__).resolve().parents[2])
    stream = io.StringIO()
    configure_logging(level="INFO", stream=stream, json_output=True)
    with subprocess.Popen([sys.executable, "-c", _HOLDER, root, str(tmp_path / "data" / "memory.db")],
                          stdout=subprocess.PIPE) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
            async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
                app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
                try:
                    await asyncio.wait_for(app.open(), 30)
                finally:
                    await asyncio.wait_for(app.close(timeout=0), 30)
        finally:
            holder.kill()
            holder.wait(10)
    events = [json.loads(line) for line in stream.getvalue().splitlines() if line.startswith("{")]
    [said] = [e for e in events if "import" in e["event"] and e.get("logger") == "gateway.app"]
    assert said["event"] == "memory files not imported at start: another import is running"
    assert said["why"].startswith(f"job lease 'file_sync' is held by migrate (pid {holder.pid}, running)")
