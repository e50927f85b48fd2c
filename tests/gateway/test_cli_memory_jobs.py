"""``myclaw memory compress`` and ``myclaw memory flush`` when the job cannot
run or does not finish: another process holds the compression lease (alive),
its holder was SIGKILLed (taken over at once), one user's flush failed while
the others flushed. What the operator reads and the exit code: clear, no
user's words, non-zero only when something was left undone. The real click
commands on real files under a temporary MYCLAW_HOME; the holder a real
process; the memory model the fake server over HTTP."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memory import MemoryEngine
from memory.backend import Turn
from memory.compression import COMPRESS_LEASE
from memory.lease import Leases
from memory.service import SqliteMemory
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.gateway.test_cli_cron import cli, fake_llm, home, seed  # noqa: F401

# A compression mid-run in another process, on the real clock (the CLI's):
# it prints "held" once it holds the lease, then waits to be killed.
_HOLDER = """
import asyncio, sys
sys.path.insert(0, sys.argv[1])
from memory.compression import COMPRESS_LEASE
from memory.engine import MemoryEngine
from memory.lease import Leases
async def main():
    eng = await MemoryEngine.open(sys.argv[2])
    async with Leases(eng.db, eng.clock).hold(COMPRESS_LEASE, "weekly_compress"):
        print("held", flush=True)
        await asyncio.sleep(3600)
asyncio.run(main())
"""


@pytest.fixture
def holder(home: Path) -> Iterator[subprocess.Popen[bytes]]:
    seed(home, lambda engine: engine.add_event("alice", "2020-01-01", "Alice picked Postgres"))
    root = str(Path(__file__).resolve().parents[2])
    with subprocess.Popen([sys.executable, "-c", _HOLDER, root, str(home / "data" / "memory.db")],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:  # its pipes closed after
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line == b"held\n", (line, proc.stderr.read() if proc.stderr else b"")
            yield proc
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)


def pending(home: Path) -> int:
    """alice's events not compressed yet."""
    out: list[int] = []

    async def read(engine: MemoryEngine) -> None:
        out.append(len(await engine.events("alice", uncompressed_only=True)))

    seed(home, read)
    return out[0]


def lease_of(home: Path) -> tuple[str, str] | None:
    out: list[tuple[str, str] | None] = []

    async def read(engine: MemoryEngine) -> None:
        out.append(await Leases(engine.db, engine.clock).holder(COMPRESS_LEASE))

    seed(home, read)
    return out[0]


def test_compress_while_another_process_runs_one_says_who_and_fails(
    home: Path, fake_llm: FakeOpenAI, holder: subprocess.Popen[bytes]
) -> None:
    """Proved alive: nothing is done, exit 1, the message names the job and
    its pid and says what to do; the holder's lease is untouched."""
    held = lease_of(home)
    r = cli("memory", "compress", "daily")
    assert r.exit_code == 1
    assert r.stdout == ""
    assert r.stderr.startswith("Error: another compression is running (job lease 'memory:compress' is held by "
                               f"weekly_compress (pid {holder.pid}, running) until "), r.stderr
    assert "nothing compressed by this run, try again once it is done" in r.stderr
    assert "Traceback" not in r.output and "Postgres" not in r.output
    assert fake_llm.requests == []  # the model was not asked
    assert lease_of(home) == held and holder.poll() is None
    assert pending(home) == 1


def test_compress_after_the_holder_was_killed_runs_at_once(
    home: Path, fake_llm: FakeOpenAI, holder: subprocess.Popen[bytes]
) -> None:
    """Its holder SIGKILLed mid-run, the lease (15 minutes to go) is taken
    over at once: the run does its work and exits 0; stderr says whose lease
    it took (job and pid), no user's words."""
    holder.send_signal(signal.SIGKILL)
    holder.wait(10)
    fake_llm.responder = lambda body: Reply(json.dumps({"facts": [{"content": "Alice uses Postgres"}], "summary": "s"}))
    r = cli("memory", "compress", "daily")
    assert r.exit_code == 0, r.output
    assert "1 event of past days compressed into facts" in r.stdout
    taken = [json.loads(line) for line in r.stderr.splitlines() if "lease-takeover" in line]
    assert len(taken) == 1, r.stderr
    assert (taken[0]["previous_job"], taken[0]["previous_pid"]) == ("weekly_compress", holder.pid)
    assert taken[0]["why"].startswith("gone")
    assert "Postgres" not in r.stderr
    assert lease_of(home) is None and pending(home) == 0


def test_compress_taken_over_mid_run_stops_with_a_message_not_a_traceback(
    home: Path, fake_llm: FakeOpenAI
) -> None:
    """A run stalled past its lease (the model answered late) whose lease
    another process took meanwhile writes nothing more: exit 1, a message
    saying so (before: LeaseLost's traceback), the event left for the other run."""
    import sqlite3

    seed(home, lambda engine: engine.add_event("alice", "2020-01-01", "Alice picked Postgres"))

    def model(body: dict[str, Any]) -> Reply:
        # Meanwhile another process takes the lease over (its expiry passed, say).
        with sqlite3.connect(home / "data" / "memory.db", timeout=10) as other:
            other.execute("UPDATE job_leases SET holder = 'weekly_compress@1:other', "
                          "expires_at = '2099-01-01T00:00:00Z' WHERE name = ?", (COMPRESS_LEASE,))
        return Reply(json.dumps({"facts": [{"content": "Alice uses Postgres"}], "summary": "s"}))

    fake_llm.responder = model
    r = cli("memory", "compress", "daily")
    assert r.exit_code == 1, r.output
    assert "Traceback" not in r.output and "Postgres" not in r.output
    assert r.stderr.strip().endswith(
        "Error: this daily compression outlived its job lease and another run took it over; it stopped "
        "(what it wrote before stays, the other run compresses the rest)"), r.stderr
    assert pending(home) == 1  # nothing written after the takeover
    assert lease_of(home) == ("weekly_compress@1:other", "2099-01-01T00:00:00Z")


def test_flush_with_one_users_batch_failing_flushes_the_others_and_exits_1(
    home: Path, fake_llm: FakeOpenAI
) -> None:
    """bob's batch fails at the model, alice's is flushed: each user's line
    says which, the exit is 1 because bob's messages wait, and nothing he
    said is printed (the error is its kind and status)."""
    async def buffer(engine: MemoryEngine) -> None:
        for owner, said in (("alice", "I switched to pnpm"), ("bob", "my locker code is 4411")):
            await SqliteMemory(engine).buffer([
                Turn(owner=owner, channel="telegram", chat_id=owner, role="user", content=said, message_id="1"),
                Turn(owner=owner, channel="telegram", chat_id=owner, role="assistant", content="ok", message_id="1"),
            ])

    seed(home, buffer)

    def model(body: dict[str, Any]) -> Reply:
        if "locker" in body["messages"][-1]["content"]:
            return Reply(status=500)
        return Reply(json.dumps({"facts": [{"content": "Alice uses pnpm", "category": "decision"}], "summary": "s"}))

    fake_llm.responder = model
    r = cli("memory", "flush")
    assert r.exit_code == 1
    lines = r.stdout.splitlines()
    assert lines[0] == "alice: 2 messages, 1 added, 0 reinforced, 0 superseded"
    assert lines[1].startswith("bob: 2 messages, failed: LLMUnavailable: HTTP 500")
    assert r.stderr == "Error: 1 batch(es) failed; their messages stay buffered for a retry\n"
    assert "locker" not in r.output and "4411" not in r.output and "pnpm" not in r.output

    fake_llm.responder = lambda body: Reply(json.dumps({"facts": [], "summary": "s"}))
    r = cli("memory", "flush")  # the model is back: bob's wait is done, nothing left undone
    assert r.exit_code == 0, r.output
    assert r.stdout == "bob: 2 messages, 0 added, 0 reinforced, 0 superseded\n"
    assert cli("memory", "flush").stdout.strip() == "nothing buffered"
