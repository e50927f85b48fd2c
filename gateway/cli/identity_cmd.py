"""``myclaw memory merge-identities``: what a handle stored before
``memory.identities`` mapped it to a user, handed to that user.

Every data file that keys by user, in this order, each in one transaction
of its own: memory.db with its extraction buffer (:mod:`memory.merge`),
gateway.db (Tier 0 history), cron.db (the jobs' user), then the file
store's folder (moved file by file, each merged into the user's and its
import ledger carried along). Every step selects by the handle, so a run
interrupted between two files is finished by running it again, and a run
with nothing left to move changes nothing.

It runs alone: it takes the data directory's lock exclusively
(gateway/datalock.py), which the gateway and ``myclaw chat`` hold while
they run, so nothing writes rows under the old owner meanwhile, and the
compression lease (memory/lease.py) for its memory.db step, as a hand-run
``memory compress`` does. ``--dry-run`` only reads and may run any time.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import click
import structlog

from gateway.config import Config, Paths
from memory import IdentityMap, MemoryEngine
from memory.clock import SystemClock
from memory.compression import COMPRESS_LEASE
from memory.db import SchemaTooNew
from memory.lease import LeaseBusy, Leases
from memory.merge import move_owner, survey
from memory.migrate import carry_ledger

from ._common import (
    confirm, counted, data_lock, db_option, echo_json, json_option, load_cli_config, open_engine, render_table, resolve_db, run,
)
from .memory_cmd import JOB, memory

log = structlog.get_logger(component="cli")

FILES = ("memory.db", "memory.buffer.db", "gateway.db", "cron.db", "files")
# Not renewed: the merge holds myclaw.lock exclusively, so no compression
# runs beside it; the lease only keeps one from a data lock someone forced.
# A crashed run's is taken over at once on this machine (memory/lease.py),
# elsewhere after this long.
_LEASE_TTL = timedelta(minutes=2)
MERGING = "`myclaw memory merge-identities` (moving memories to the users memory.identities names)"


@dataclass
class HandleMove:
    handle: str
    user: str
    files: dict[str, dict[str, int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(sum(c.values()) for c in self.files.values())

    def to_dict(self) -> dict[str, Any]:
        return {"handle": self.handle, "user": self.user, "files": self.files, "notes": self.notes}


@dataclass(frozen=True)
class _Where:
    memory_db: Path
    gateway_db: Path
    cron_db: Path
    workspace: Path

    @classmethod
    def of(cls, cfg: Config) -> _Where:
        paths = Paths.from_env()
        return cls(resolve_db(cfg), paths.gateway_db(), paths.cron_db(), paths.workspace(cfg))


@memory.command("merge-identities")
@click.option("--dry-run", is_flag=True, help="Show what would move, per handle and file; change nothing.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@json_option
@db_option
def merge_identities(dry_run: bool, yes: bool, as_json: bool) -> None:
    """Hand what each handle of memory.identities stored before it was
    mapped (memories, events, buffered messages, change log, conversation
    history, scheduled jobs, the file store's folder) to the user it is
    mapped to. A memory the user already has in the same words is kept once.
    Run it with the gateway stopped; safe to run again."""
    cfg = load_cli_config()
    mapping = IdentityMap(cfg.memory.identities).mapped()
    mapping = {h: u for h, u in mapping.items() if h != u}
    if not mapping:
        click.echo("memory.identities maps no handles: nothing to move")
        return
    where = _Where.of(cfg)
    if dry_run:
        with data_lock():  # it only reads: beside a gateway, not beside a restore
            plan = run(_survey(cfg, where, mapping))
        _report(plan, as_json, dry_run=True)
        return
    with data_lock(exclusive=MERGING):
        plan = run(_survey(cfg, where, mapping))
        if not any(p.total for p in plan):
            _report(plan, as_json, dry_run=False)
            return
        if not yes:
            click.echo(_table(plan), err=True)
            if not confirm("Move these rows to the users memory.identities maps their handles to?"):
                raise click.ClickException("cancelled; nothing changed")
        done = run(_merge(cfg, where, mapping))
    _report(done, as_json, dry_run=False)


# -- survey and move -------------------------------------------------------------


async def _survey(cfg: Config, where: _Where, mapping: dict[str, str]) -> list[HandleMove]:
    from gateway.cron import CronStore
    from gateway.incognito import Incognito
    from gateway.outbox import Outbox
    from gateway.sessions import SessionStore
    from gateway.timezones import UserTimezones
    from memory.filestore import FileMemory

    plan = [HandleMove(h, u) for h, u in sorted(mapping.items())]
    if where.memory_db.exists():
        async with open_engine(where.memory_db) as engine:
            for p in plan:
                _split(p, await survey(engine, p.handle, p.user))
    if where.gateway_db.exists():
        async with _step(where.gateway_db, moving=False), await SessionStore.open(where.gateway_db) as sessions:
            outbox = Outbox(sessions.db)
            for p in plan:
                p.files["gateway.db"] = {"history messages": await sessions.owned(p.handle)}
                if replies := await outbox.owned(p.handle):  # rare: named only when there are some
                    p.files["gateway.db"]["undelivered replies"] = replies
                # What _merge moves too, named as its report names them.
                if await UserTimezones(sessions.db).get(p.handle) is not None:
                    p.files["gateway.db"]["time zone setting"] = 1
                if await Incognito(sessions.db).since(p.handle) is not None:
                    p.files["gateway.db"]["incognito setting"] = 1
                row = await sessions.db.fetchone("SELECT count(*) FROM recent_files WHERE owner = ?", (p.handle,))
                if row is not None and row[0]:
                    p.files["gateway.db"]["recent files"] = int(row[0])
    if where.cron_db.exists():
        async with _step(where.cron_db, moving=False):
            store = await CronStore.open(where.cron_db, SystemClock(), cfg.gateway.timezone)
            try:
                for p in plan:
                    p.files["cron.db"] = {"scheduled jobs": len(await store.list(p.handle))}
            finally:
                await store.close()
    files = FileMemory(where.workspace)
    for p in plan:
        p.files["files"] = {"files": len(files.plan_move(p.handle, p.user))}
    return plan


def _split(p: HandleMove, counts: dict[str, int]) -> None:
    """memory.merge's counts, by the file they are in."""
    buffered = {k: counts.pop(k) for k in ("buffered", "buffered duplicates")}
    p.files["memory.db"] = counts
    p.files["memory.buffer.db"] = buffered


async def _merge(cfg: Config, where: _Where, mapping: dict[str, str]) -> list[HandleMove]:
    from gateway.outbox import Outbox
    from gateway.sessions import SessionStore
    from gateway.incognito import Incognito
    from gateway.recent_files import RecentFiles
    from gateway.timezones import UserTimezones

    done = [HandleMove(h, u) for h, u in sorted(mapping.items())]
    async with AsyncExitStack() as stack:
        engine = await stack.enter_async_context(open_engine(where.memory_db)) if where.memory_db.exists() else None
        if engine is not None:
            try:
                async with (
                    _step(where.memory_db),
                    Leases(engine.db, engine.clock).hold(COMPRESS_LEASE, "merge_identities", ttl=_LEASE_TTL),
                ):
                    for p in done:
                        _split(p, await move_owner(engine, p.handle, p.user, job=JOB))
            except LeaseBusy as exc:
                raise click.ClickException(f"{exc}: a memory compression is running; try again when it ends") from None
        if where.gateway_db.exists():
            async with _step(where.gateway_db), await SessionStore.open(where.gateway_db) as sessions:
                outbox = Outbox(sessions.db)
                for p in done:
                    p.files["gateway.db"] = {"history messages": await sessions.move_owner(p.handle, p.user)}
                    if replies := await outbox.move_owner(p.handle, p.user):
                        p.files["gateway.db"]["undelivered replies"] = replies
                    if zones := await UserTimezones(sessions.db).move_owner(p.handle, p.user):
                        p.files["gateway.db"]["time zone setting"] = zones
                    if quiet := await Incognito(sessions.db).move_owner(p.handle, p.user):
                        p.files["gateway.db"]["incognito setting"] = quiet
                    if sent := await RecentFiles(sessions.db, SystemClock()).move_owner(p.handle, p.user):
                        p.files["gateway.db"]["recent files"] = sent
        if where.cron_db.exists():
            async with _step(where.cron_db):
                await _move_jobs(cfg, where.cron_db, done)
        await _move_files(where, done, engine)
    for p in done:
        if p.total:
            log.info("handle merged", handle=p.handle, user=p.user, **{f: sum(c.values()) for f, c in p.files.items()})
    return done


@asynccontextmanager
async def _step(path: Path, *, moving: bool = True) -> AsyncIterator[None]:
    """A file that cannot be opened or written stops the run there: what
    came before it has moved (committed file by file), the rest waits for
    the next run."""
    try:
        yield
    except (sqlite3.DatabaseError, SchemaTooNew) as exc:
        if not moving:
            raise click.ClickException(f"{path}: cannot read it ({exc})") from None
        raise click.ClickException(
            f"{path}: cannot move its rows ({exc}); the files before it were moved: fix it, then run this again"
        ) from None


async def _move_jobs(cfg: Config, path: Path, done: list[HandleMove]) -> None:
    """The jobs' user is whose memory a job runs with."""
    from gateway.cron import CronStore

    store = await CronStore.open(path, SystemClock(), cfg.gateway.timezone)
    try:
        for p in done:
            async with store.db.transaction() as conn:
                cur = await conn.execute(
                    "UPDATE cron_jobs SET user = ? WHERE user = ? AND kind = 'agent'", (p.user, p.handle)
                )
            p.files["cron.db"] = {"scheduled jobs": cur.rowcount}
    finally:
        await store.close()


async def _move_files(where: _Where, done: list[HandleMove], engine: MemoryEngine | None) -> None:
    """The file store's folder of each handle, file by file: the import
    ledger first (memory.migrate.carry_ledger: idempotent), then the file."""
    from memory.filestore import FileMemory

    files = FileMemory(where.workspace)
    for p in done:
        moves = files.plan_move(p.handle, p.user)
        for m in moves:
            if engine is not None:
                # The bytes on disk: the ledger stamps files by their SHA-256.
                source = m.src.read_bytes()
                await carry_ledger(
                    engine, p.handle, p.user, m.name, source=source,
                    before=None if m.before is None else m.dst.read_bytes(),
                    after=source if m.merged is None else m.merged.encode(),
                )
            files.apply_move(m, p.user)
        p.files["files"] = {"files": len(moves)}
        if not files.remove_user_dir(p.handle):
            p.notes.append(f"{files.user_dir(p.handle)} still holds files that are not the file store's; left there")


# -- output ---------------------------------------------------------------------------


def _phrase(file: str, c: dict[str, int]) -> str:
    if file == "memory.db":
        parts = [counted(c['memories'], "memories")
                 + (f" ({c['duplicates']} already stored for the user, kept once)" if c["duplicates"] else "")]
        parts += [counted(c[k], k) for k in ("events", "vectors", "log entries") if c[k]]
        return ", ".join(parts)
    if file == "memory.buffer.db":
        dup = c["buffered duplicates"]
        return counted(c['buffered'], "buffered messages") + (f" ({dup} also buffered for the user, dropped)" if dup else "")
    return ", ".join(counted(v, k) for k, v in c.items())


def _table(plan: list[HandleMove]) -> str:
    rows = [
        [p.handle, p.user, f, _phrase(f, p.files[f])]
        for p in plan
        for f in FILES
        if f in p.files and any(p.files[f].values())  # row counts: any non-zero
    ]
    return render_table(["HANDLE", "USER", "FILE", "ROWS"], rows)


def _report(plan: list[HandleMove], as_json: bool, *, dry_run: bool) -> None:
    moving = [p for p in plan if p.total]
    if as_json:
        echo_json({"dry_run": dry_run, "handles": [p.to_dict() for p in moving]})
        return
    if not moving:
        click.echo("nothing to move: no handle of memory.identities owns anything")
        return
    click.echo(_table(moving))
    for p in moving:
        for n in p.notes:
            click.echo(f"note: {n}", err=True)
    if dry_run:
        click.echo("dry run: nothing changed (run without --dry-run to move these)")
    else:
        click.echo("moved " + ", ".join(f"{p.handle} -> {p.user}" for p in moving))
