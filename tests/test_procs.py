"""tests/procs.py: a process out of time is killed and named with what it said."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from tests.procs import START, finished


async def _python(code: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-c", code,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )


async def test_a_process_that_exits_gives_its_output() -> None:
    proc = await _python("import sys; print(sys.stdin.read().upper()); print('note', file=sys.stderr)")
    out, err = await finished(proc, b"hello")
    assert (out, err, proc.returncode) == (b"HELLO\n", b"note\n", 0)


async def test_a_process_out_of_time_is_killed_and_the_failure_shows_its_stderr(tmp_path: Path) -> None:
    said = tmp_path / "said"  # made once the line is written: the bound below starts after it, not with the start
    proc = await _python(
        "import pathlib, sys, time; print('stuck in start-up', file=sys.stderr, flush=True); "
        f"pathlib.Path({str(said)!r}).touch(); time.sleep(600)"
    )

    async def until_said() -> None:
        while not said.exists():
            await asyncio.sleep(0.05)

    await asyncio.wait_for(until_said(), START)
    with pytest.raises(AssertionError, match="still running after 2 s; killed. Its stderr:\nstuck in start-up"):
        await finished(proc, bound=2)
    assert proc.returncode is not None  # not left running after the test
