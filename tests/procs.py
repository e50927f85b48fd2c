"""Bounds for the tests that run ``myclaw`` as a real process.

A process start costs about 2 s of CPU (the imports, the databases made); on
a busy 2-core machine it waits its turn: three gateways started at once at
load 7-9 took 25-30 s to answer their first message. A wait that takes in a
start is given :data:`START`, and only so a stuck one fails instead of
hanging the suite: a test that needs speed belongs in ``scripts/bench_*``.

:func:`finished` is ``communicate`` under such a bound; one out of time is
killed (never left running, holding a port or a data folder) and the test
fails with what the process had written.

:func:`with_sigint` starts a command with SIGINT as a shell would leave it:
a background job of a script inherits it ignored (``bash -c 'cmd &'``), a
terminal's default. A test that sends SIGINT says which, or it passes or
hangs by how the suite itself was launched."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import Literal

__all__ = ["START", "finished", "killed", "with_sigint"]

START = 120.0


# Sets the disposition, then becomes the command: an ignored signal stays
# ignored across exec, and a default one is Python's KeyboardInterrupt.
_EXEC_WITH_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, getattr(signal, sys.argv[1])); "
    "os.execv(sys.argv[2], sys.argv[2:])"
)


def with_sigint(disposition: Literal["ignored", "default"], *argv: str) -> list[str]:
    """``argv`` (its first item a path) run with SIGINT ``disposition``
    when it starts, whatever this process's own is."""
    name = {"ignored": "SIG_IGN", "default": "SIG_DFL"}[disposition]
    return [sys.executable, "-c", _EXEC_WITH_SIGINT, name, *argv]


async def killed(proc: asyncio.subprocess.Process) -> None:
    """``proc`` gone, whatever it was doing: for a test's ``finally``."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()


async def finished(proc: asyncio.subprocess.Process, stdin: bytes | None = None, bound: float = START) -> tuple[bytes, bytes]:
    """``proc.communicate(stdin)``: its stdout and stderr once it exits, within ``bound`` seconds."""
    err: list[bytes] = []

    async def read_err() -> bytes:
        # Kept line by line, so a process out of time still shows what it said.
        assert proc.stderr is not None
        while line := await proc.stderr.readline():
            err.append(line)
        return b"".join(err)

    async def read_out() -> bytes:
        return await proc.stdout.read() if proc.stdout is not None else b""

    async def feed() -> None:
        if proc.stdin is not None:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # a process that exits without reading
                if stdin:
                    proc.stdin.write(stdin)
                    await proc.stdin.drain()
                proc.stdin.close()

    if proc.stderr is None:
        raise ValueError("finished() reads the process's stderr: start it with stderr=PIPE")
    reading = asyncio.gather(feed(), read_out(), read_err())
    try:
        _, out, whole_err = await asyncio.wait_for(asyncio.shield(reading), bound)
        await proc.wait()
        return out, whole_err
    except TimeoutError:
        await killed(proc)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(reading, 10)  # the pipes close with the process
        said = b"".join(err).decode(errors="replace")
        raise AssertionError(f"still running after {bound:.0f} s; killed. Its stderr:\n{said[-4000:]}") from None
    except asyncio.CancelledError:  # the test's own bound ran out first: the process goes with it
        await killed(proc)
        raise
