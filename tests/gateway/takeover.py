"""The memory files' import lease taken over from an import in another
process that stalled past it, as a hand-run ``myclaw memory migrate`` takes
it from a suspended one: :func:`stall_and_take_over`.

The stall is real (SIGSTOP, at a moment the import holds no write
transaction: one stopped inside its own would keep SQLite's write lock),
the takeover is :class:`~memory.lease.Leases` on the same memory.db; only
the taker's clock runs 31 minutes ahead, which is how the stalled import's
30-minute lease looks once that time passed. (A takeover racing a running
import for the lock loses: SQLite's busy wait sleeps, the import's next
batch does not.)"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import subprocess
import time
from datetime import timedelta
from pathlib import Path

from memory import ManualClock, MemoryEngine, SystemClock
from memory.filesync import FILE_SYNC_LEASE
from memory.lease import Lease, Leases

# The rows an import of the files adds.
IMPORTED = "SELECT COUNT(*) FROM memories WHERE source = 'migration'"
OTHER = "migrate@1:other"


def imported(memory_db: Path) -> int:
    """Rows imported so far (0 while memory.db or its tables are not there yet)."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{memory_db}?mode=ro", uri=True, timeout=5)) as conn:
            return int(conn.execute(IMPORTED).fetchone()[0])
    except sqlite3.OperationalError:
        return 0


def _between_transactions(memory_db: Path, proc: subprocess.Popen[bytes], deadline: float) -> sqlite3.Connection:
    """A connection holding memory.db's write lock, taken in one of the
    import's gaps between two transactions (tried without waiting, over and
    over: SQLite's own busy wait sleeps and loses every gap to the import's
    next batch). While it is held the import is outside its transactions:
    at most waiting in its next BEGIN, which holds no lock."""
    conn = sqlite3.connect(memory_db, timeout=0, isolation_level=None)
    while True:
        try:
            conn.execute("BEGIN IMMEDIATE")
            return conn
        except sqlite3.OperationalError:  # database is locked: the import is inside one
            assert proc.poll() is None, "the import ended before a gap between its transactions was caught"
            assert time.monotonic() < deadline


def stall_and_take_over(proc: subprocess.Popen[bytes], memory_db: Path, *, timeout: float = 60) -> int:
    """Once ``proc``'s import has committed rows, stop it between two of its
    transactions and take its lease over as :data:`OTHER`; then let it go
    on. Returns the rows imported at the takeover. (Stopping it at random
    and looking whether it held the lock found a gap too rarely: under load
    the import could end first, 2 runs in 6.)"""
    deadline = time.monotonic() + timeout
    while imported(memory_db) == 0:
        assert proc.poll() is None, "the import ended before it wrote a row"
        assert time.monotonic() < deadline
        time.sleep(0.002)
    with contextlib.closing(_between_transactions(memory_db, proc, deadline)) as lock:
        proc.send_signal(signal.SIGSTOP)
        os.waitpid(proc.pid, os.WUNTRACED)  # stopped, every thread: the signal alone is on its way
        lock.execute("ROLLBACK")  # the takeover below needs the lock; the stopped import cannot take it
    try:
        async def take() -> None:
            later = ManualClock(SystemClock().now() + timedelta(minutes=31))
            async with await MemoryEngine.open(memory_db, later) as engine:
                await Leases(engine.db, later).acquire(FILE_SYNC_LEASE, OTHER)

        asyncio.run(take())
        return imported(memory_db)
    finally:
        proc.send_signal(signal.SIGCONT)


def release_other(memory_db: Path) -> None:
    """The other import done: its lease let go."""
    async def release() -> None:
        async with await MemoryEngine.open(memory_db) as engine:
            leases = Leases(engine.db, engine.clock)
            await Lease(FILE_SYNC_LEASE, OTHER, "", leases).release()

    asyncio.run(release())
