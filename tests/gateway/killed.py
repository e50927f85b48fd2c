"""A gateway killed mid-turn and started again, as the e2e tests stage it.

A SIGKILL runs no stop: nothing ``App.close`` would write (the waiting
messages parked in Tier 0, the stop's notes, the outbox's last pass)
reaches the files. A test cannot kill the process it runs in, so it takes
the database as it is at the kill (:func:`as_killed_now`, an online
backup), stops the ``App`` with no drain (:func:`crash`: the turn under
way is cancelled, as a kill ends it) and puts the file back
(:func:`undo_since`). :func:`killed` is the three in a row; a test that
needs something between them (a lock released, a second database taken
earlier) calls them one by one."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

from gateway.app import App

GATEWAY_DB = "gateway.db"


def _kept(path: Path) -> Path:
    return path.with_name(path.name + ".killed")


def as_killed_now(home: Path, db: str = GATEWAY_DB) -> None:
    """Keep ``home/data/<db>`` as it is at this moment, for :func:`undo_since`."""
    path = home / "data" / db
    with contextlib.closing(sqlite3.connect(path)) as src, contextlib.closing(sqlite3.connect(_kept(path))) as dst:
        src.backup(dst)


def undo_since(home: Path, db: str = GATEWAY_DB) -> None:
    """Whatever was written to ``home/data/<db>`` since :func:`as_killed_now` undone."""
    path = home / "data" / db
    for extra in (path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        extra.unlink(missing_ok=True)
    _kept(path).replace(path)


async def crash(app: App) -> None:
    """Stop with no drain: the turn under way is cancelled, its reply never comes.
    What the stop itself writes still lands (a SIGTERM out of time); :func:`killed` undoes it."""
    await asyncio.wait_for(app.close(timeout=0.0), 30)


async def killed(app: App, home: Path) -> None:
    """A SIGKILL as the files see it: no stop's writes reach gateway.db."""
    as_killed_now(home)
    await crash(app)
    undo_since(home)


async def quiet(app: App) -> None:
    """Every message handed to the loop answered, every reply sent."""
    assert app.loop is not None and await app.loop.drain(10)
    for name in app.channels:
        await asyncio.wait_for(app.bus.outbound_queue(name).join(), 10)


@contextlib.asynccontextmanager
async def running(app: App, *, drain: float = 0.0) -> AsyncIterator[App]:
    """``app`` opened and started; after the block, unless the block stopped
    it, stopped with ``drain`` seconds to answer what it holds (0, the
    default: as a crash stops it)."""
    try:
        await app.open()
        await asyncio.wait_for(app.start(), 15)
        yield app
    finally:
        await asyncio.wait_for(app.close(timeout=drain), 30)
