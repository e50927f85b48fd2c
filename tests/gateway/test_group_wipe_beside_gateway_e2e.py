"""A group's memory wiped beside a running gateway (memory/groupnotes.py
``forget_group``): the gateway's group lines queued for the buffer's group
commit at that moment would land after an erasure made without draining
them, re-creating part of what was wiped. ``myclaw memory forget --group``
asks the gateway to erase (gateway/erasure_requests.py, as ``--user``
does), and refuses beside a gateway that does not take it; the memory
page's group wipe goes through the gateway's backend, which drains first.
Real ``App``, the CLI as its own process, the fake Telegram and OpenAI servers."""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import replace
from pathlib import Path

from gateway.app import App
from gateway.datalock import GatewayLock
from memory import ManualClock, MemoryEngine, NewMemory, Provenance
from memory.backend import Turn
from memory.groupnotes import group_owner
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.procs import finished

from .test_cli_gateway import REPO, _env
from .test_e2e_feishu import _app
from .test_resume_e2e import KEY, _echo
from .test_vision_e2e import _telegram

FAMILY = ("telegram", "-100777")
OWNER = group_owner(*FAMILY)
TOKEN = "group-wipe-admin-token-0123456789abcdef"


def _gateway(home: Path, clock: ManualClock, llm: FakeOpenAI, tg: FakeTelegram) -> App:
    return _app(home, clock, llm, {"telegram": _telegram(tg)},
                gateway={"host": "127.0.0.1", "port": 0, "admin": {"enabled": True, "token": TOKEN}})


async def _note(engine: MemoryEngine) -> None:
    await engine.add(NewMemory(owner=OWNER, content="Dad is booking the hotel for the lake trip", provenance=Provenance(
        channel=FAMILY[0], chat_id=FAMILY[1], group=True, speakers=("telegram:11",), said_by=("Dad",))))


async def _rows(engine: MemoryEngine) -> int:
    row = await engine.db.fetchone(
        "SELECT (SELECT COUNT(*) FROM memories WHERE owner = ?) + (SELECT COUNT(*) FROM extraction_buffer WHERE owner = ?)",
        (OWNER, OWNER))
    assert row is not None
    return int(row[0])


def _line(text: str) -> Turn:
    return Turn(owner="telegram:11", channel=FAMILY[0], chat_id=FAMILY[1], role="user", content=text,
                sender_id="11", message_id="5", group=True, speaker_name="Dad")


async def _forget_group(home: Path) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "from gateway.cli import main; main()", "memory", "forget",
        "--group", f"{FAMILY[0]}:{FAMILY[1]}", "--yes",
        cwd=REPO, env=_env(home), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await finished(proc)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_the_cli_asks_the_running_gateway_and_the_page_drains_its_queued_lines(
    tmp_path: Path, clock: ManualClock
) -> None:
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        app = _gateway(tmp_path, clock, llm, tg)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            engine: MemoryEngine = app.backend.engine  # type: ignore[union-attr]
            await _note(engine)
            code, out, err = await asyncio.wait_for(_forget_group(tmp_path), 150)
            assert code == 0, err
            assert (f"the gateway running on this home (pid {os.getpid()}) erased the memory of the group "
                    in out and "1 row" in out), out
            assert await _rows(engine) == 0

            # The page's wipe while group lines wait for the group commit:
            # one statement queued at the writer (busy with a long statement),
            # the next line queued in the batcher behind it.
            await _note(engine)
            assert app.backend is not None and app.memory_web is not None
            busy = asyncio.create_task(engine.db.write(
                "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000000) "
                "SELECT count(*) FROM c"))
            await asyncio.sleep(0)
            first = asyncio.create_task(app.backend.buffer([_line("we land at nine")]))
            await asyncio.sleep(0)
            await asyncio.sleep(0)  # its statement sent to the writer, behind the long one
            second = asyncio.create_task(app.backend.buffer([_line("the car is at gate B")]))
            await asyncio.sleep(0)  # queued in the batcher behind it
            await app.memory_web.admin.forget_group(f"{FAMILY[0]}:{FAMILY[1]}")
            await asyncio.wait_for(asyncio.gather(busy, first, second), 10)
            assert await _rows(engine) == 0  # both lines went with the rest, none written after
        finally:
            await asyncio.wait_for(app.close(), 30)


async def test_the_cli_refuses_beside_a_gateway_that_does_not_take_a_groups_erasure(tmp_path: Path) -> None:
    """An older gateway (its lock file says only ``erasures``): nothing is erased, and the message says why."""
    (tmp_path / "data").mkdir(parents=True, exist_ok=True)
    async with await MemoryEngine.open(tmp_path / "data" / "memory.db") as engine:
        await _note(engine)
    lock = GatewayLock(tmp_path / "data")
    lock.acquire()
    lock.serves("erasures")
    try:
        code, out, err = await asyncio.wait_for(_forget_group(tmp_path), 150)
    finally:
        lock.release()
    assert code == 1 and "does not take a group's erasure" in err and "nothing was erased" in err, (out, err)
    async with await MemoryEngine.open(tmp_path / "data" / "memory.db") as engine:
        assert await _rows(engine) == 1


async def test_the_pages_erasure_of_one_group_note_drains_the_gateways_queued_lines_first(
    tmp_path: Path, clock: ManualClock
) -> None:
    # A group note's erasure takes the group's waiting lines that repeat it
    # (or extraction would write it again): one still queued for the group
    # commit would land after it, as in the group wipe.
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        app = _gateway(tmp_path, clock, llm, tg)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            engine: MemoryEngine = app.backend.engine  # type: ignore[union-attr]
            note = await engine.add(NewMemory(owner=OWNER, content="Dad lands at nine", provenance=Provenance(
                channel=FAMILY[0], chat_id=FAMILY[1], group=True, speakers=("telegram:11",), said_by=("Dad",))))
            assert app.backend is not None and app.memory_web is not None
            busy = asyncio.create_task(engine.db.write(
                "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000000) "
                "SELECT count(*) FROM c"))
            await asyncio.sleep(0)
            first = asyncio.create_task(app.backend.buffer([replace(_line("Dad lands at nine"), message_id="6")]))
            await asyncio.sleep(0)
            await asyncio.sleep(0)  # its statement sent to the writer, behind the long one
            second = asyncio.create_task(app.backend.buffer([replace(_line("so: Dad lands at nine, ok?"),
                                                                     message_id="7")]))
            await asyncio.sleep(0)  # queued in the batcher behind it
            plan = await app.memory_web.admin.erase_group_note(note.id, f"{FAMILY[0]}:{FAMILY[1]}")
            await asyncio.wait_for(asyncio.gather(busy, first, second), 10)
            assert plan.buffered_lines == 2
            assert await _rows(engine) == 0  # both waiting lines went with the note, none written after
            # The member's own copies stay theirs: only the group's were its to take.
            row = await engine.db.fetchone("SELECT COUNT(*) FROM extraction_buffer WHERE owner = 'telegram:11'")
            assert row is not None and row[0] == 2
        finally:
            await asyncio.wait_for(app.close(), 30)
