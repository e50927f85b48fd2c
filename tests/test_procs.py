"""tests/procs.py: a process out of time is killed and named with what it said."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Literal

import pytest

from tests.procs import START, finished, with_sigint


async def _python(code: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-c", code,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )


async def test_a_process_that_exits_gives_its_output() -> None:
    proc = await _python("import sys; print(sys.stdin.read().upper()); print('note', file=sys.stderr)")
    out, err = await finished(proc, b"hello")
    assert (out, err, proc.returncode) == (b"HELLO\n", b"note\n", 0)


async def _stuck(tmp_path: Path) -> asyncio.subprocess.Process:
    """A process that says one line on stderr and hangs, returned once the line is written."""
    said = tmp_path / "said"  # made after the line: a bound given next starts after it, not with the start
    proc = await _python(
        "import pathlib, sys, time; print('stuck in start-up', file=sys.stderr, flush=True); "
        f"pathlib.Path({str(said)!r}).touch(); time.sleep(600)"
    )

    async def until_said() -> None:
        while not said.exists():
            await asyncio.sleep(0.05)

    await asyncio.wait_for(until_said(), START)
    return proc


async def test_a_process_out_of_time_is_killed_and_the_failure_shows_its_stderr(tmp_path: Path) -> None:
    proc = await _stuck(tmp_path)
    with pytest.raises(AssertionError, match="still running after 2 s; killed. Its stderr:\nstuck in start-up"):
        await finished(proc, bound=2)
    assert proc.returncode is not None  # not left running after the test


async def test_a_wait_cut_by_the_tests_own_bound_kills_the_process_too(tmp_path: Path) -> None:
    proc = await _stuck(tmp_path)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(finished(proc), 2)
    assert proc.returncode is not None


@pytest.mark.parametrize(("disposition", "seen"), [("ignored", "<Handlers.SIG_IGN: 1>"), ("default", "default_int_handler")])
async def test_a_command_starts_with_sigint_as_asked_whatever_the_suites_own(
    disposition: Literal["ignored", "default"], seen: str
) -> None:
    # The suite launched from a script's background job has SIGINT ignored; from a terminal, not.
    argv = with_sigint(disposition, sys.executable, "-c", "import signal; print(repr(signal.getsignal(signal.SIGINT)))")
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await finished(proc)
    assert proc.returncode == 0, err
    assert seen in out.decode()
