"""``myclaw memory export`` and ``myclaw memory migrate``: the memory store
to and from files. Apart from the other memory commands because of what
they import (the export's writers and the gateway's group titles, the file
store): a command imports its own module only (gateway/cli/_lazy.py)."""

from __future__ import annotations

import contextlib
import functools
import sqlite3
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from gateway.chattitles import read_titles
from gateway.config import Paths
from gateway.export import UserExport, write_markdown
from memory.clock import SystemClock
from memory.identity import IdentityMap
from memory.engine import MAX_CONTENT_CHARS
from memory.migrate import PROFILE_IMPORT_LIMIT, MigrationReport
from memory.service import SqliteMemory
from memory.types import GLOBAL_OWNER

from ._common import (
    counted,
    db_option,
    echo_json,
    json_option,
    load_cli_config,
    open_engine,
    private_file,
    render_table,
    resolve_db,
    resolve_user,
    run,
    shares_data,
)
from ._json_export import write_json
from .memory_cmd import _near_hint, _owners_of, _unmerged, memory, user_option

if TYPE_CHECKING:
    from gateway.userdata import UserData
    from memory import MemoryEngine


# -- export ---------------------------------------------------------------------


@memory.command()
@user_option
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), help="File to write (default: stdout).")
@click.option("--format", "fmt", type=click.Choice(["json", "markdown"]), default="json", show_default=True)
@db_option
@shares_data
def export(user: str | None, output: Path | None, fmt: str) -> None:
    """Everything stored (all statuses, with provenance), as JSON or markdown."""
    cfg = load_cli_config()
    path, owner = resolve_db(cfg), resolve_user(user, cfg)
    handles: list[str] = []
    if owner is not None and owner != GLOBAL_OWNER:
        # An empty export of a misspelt handle would read as "nothing stored about them".
        owners = run(_owners_of(path))
        # Their handles' rows from before memory.identities mapped them
        # (merge-identities not run yet) are theirs: a data access request
        # that left them out would miss them.
        handles = _unmerged(cfg, owner, owners)
        # Messages of theirs waiting in the inbox are something stored too (a first message a crash left).
        if owner not in owners and not handles and not run(_waiting(owner)) and not run(_keeps(owner)):
            raise click.ClickException(f"nothing is stored about {owner}, so there is nothing to export "
                                       f"({_near_hint(owner, owners)})")
    if fmt == "markdown":
        _export_markdown(path, owner, output, handles)
        return
    titles = _group_titles()
    if output is None:
        run(_write_json(path, owner, sys.stdout.write, titles, handles))
        sys.stdout.flush()
        return
    with private_file(output) as f:
        memories, events = run(_write_json(path, owner, f.write, titles, handles))
    click.echo(f"wrote {counted(memories, 'memories')} and {counted(events, 'events')} to {output}", err=True)


def _group_titles() -> dict[str, str]:
    """Groups' titles as the gateway last saw them (gateway.db, read only),
    so a shared memory names "Family" as /share does; ids alone, with a
    warning, when that file cannot be read: the export matters more."""
    path = Paths.from_env().gateway_db()
    try:
        return read_titles(path)
    except sqlite3.DatabaseError as exc:
        click.echo(f"warning: group titles not read from {path} ({exc}): groups are named by their ids", err=True)
        return {}


def _export_markdown(path: Path, owner: str | None, output: Path | None, handles: list[str]) -> None:
    """Markdown written as the rows are read, a page at a time (the store
    is never in memory whole): to stdout, or into a private temporary file
    renamed to ``output`` at the end."""
    titles = _group_titles()
    if output is None:
        run(_write_markdown(path, owner, sys.stdout.write, titles, handles))  # buffered: click.echo flushes every line
        sys.stdout.flush()
        return
    with private_file(output) as f:
        memories, events = run(_write_markdown(path, owner, f.write, titles, handles))
    click.echo(f"wrote {counted(memories, 'memories')} and {counted(events, 'events')} to {output}", err=True)


async def _write_markdown(
    path: Path, owner: str | None, write: Callable[[str], Any], titles: dict[str, str], handles: list[str]
) -> tuple[int, int]:
    async with contextlib.AsyncExitStack() as stack:
        engine = await stack.enter_async_context(open_engine(path))
        data = await _user_data(stack, engine, person=owner is not None)
        # The whole store: those with only settings, history or jobs too.
        owners = [owner, *handles] if owner else sorted({*await engine.owners(), *await data.owners()})
        return await write_markdown(write, SqliteMemory(engine), owners, at=engine.now(),
                                    renamed=engine.owned_project_aliases, titles=titles,
                                    unanswered=await _unanswered(stack),
                                    mapped=dict.fromkeys(handles, owner or ""), kept=_kept(data))


async def _write_json(
    path: Path, owner: str | None, write: Callable[[str], Any], titles: dict[str, str], handles: list[str]
) -> tuple[int, int]:
    async with contextlib.AsyncExitStack() as stack:
        engine = await stack.enter_async_context(open_engine(path))
        data = await _user_data(stack, engine, person=owner is not None)
        return await write_json(write, engine, owner, at=engine.now(), titles=titles,
                                unanswered=await _unanswered(stack), handles=handles, kept=_kept(data),
                                also=await data.owners() if owner is None else ())


def _kept(data: UserData) -> Callable[[str], Awaitable[UserExport]]:
    return data.kept


async def _user_data(stack: contextlib.AsyncExitStack, engine: MemoryEngine, *, person: bool) -> UserData:
    """What the gateway keeps of a user beside memory, gathered as their
    own ``/export`` gathers it (gateway/userdata.py): settings, kept
    history and recent files (gateway.db), scheduled jobs (cron.db); read
    beside a running gateway as without one. A file that cannot be read is
    left out with a warning: the export matters more. ``person``: one
    user's export, their memory.identities handles' jobs and history
    counted with theirs (as /export counts them); the whole store's: each
    owner's own."""
    from gateway.cron import CronStore
    from gateway.inbox import Inbox
    from gateway.incognito import Incognito
    from gateway.recent_files import RecentFiles
    from gateway.sessions import SessionStore
    from gateway.timezones import UserTimezones
    from gateway.userdata import UserData

    paths, cfg = Paths.from_env(), load_cli_config()
    sessions = files = cron = None
    if (gateway_db := paths.gateway_db()).exists():
        try:
            sessions = await stack.enter_async_context(await SessionStore.open(gateway_db))
            files = RecentFiles(sessions.db, SystemClock())
            await files.load(sweep=False)  # read only
        except sqlite3.DatabaseError as exc:
            click.echo(f"warning: settings, history and recent files not exported: {gateway_db} could not be read "
                       f"({exc})", err=True)
            sessions = files = None
    if (cron_db := paths.cron_db()).exists():
        try:
            cron = await CronStore.open(cron_db, SystemClock(), cfg.gateway.timezone)
        except sqlite3.DatabaseError as exc:
            click.echo(f"warning: scheduled jobs not exported: {cron_db} could not be read ({exc})", err=True)
        else:
            stack.push_async_callback(cron.close)
    identities = IdentityMap(cfg.memory.identities)
    return UserData(
        SqliteMemory(engine), sessions, cron, files=files,
        timezones=UserTimezones(sessions.db) if sessions is not None else None,
        incognito=Incognito(sessions.db) if sessions is not None else None,
        # Messages waiting to be answered: whose, for the whole store's owners (counted by _unanswered).
        inbox=Inbox(sessions.db, SystemClock()) if sessions is not None else None, owner_of=identities.resolve,
        handles_of=identities.handles if person else (lambda _user: []),
    )


async def _keeps(owner: str) -> bool:
    """Whether the gateway keeps anything of ``owner`` beside memory (:func:`_kept`)."""
    async with contextlib.AsyncExitStack() as stack:
        engine = await stack.enter_async_context(open_engine(resolve_db(load_cli_config()), create=False))
        return (await (await _user_data(stack, engine, person=True)).kept(owner)).beside_memory


async def _unanswered(stack: contextlib.AsyncExitStack) -> Callable[[str], Awaitable[int]] | None:
    """How many of an owner's messages wait in gateway.db's inbox to be
    answered (a crash left them, or the gateway holds them now): theirs
    too, counted in an export (their words not listed). None: no gateway.db,
    or one that cannot be read (said, with a warning: the export matters more)."""
    from gateway.inbox import Inbox
    from gateway.sessions import SessionStore

    if not (gateway_db := Paths.from_env().gateway_db()).exists():
        return None
    try:
        sessions = await stack.enter_async_context(await SessionStore.open(gateway_db))
    except sqlite3.DatabaseError as exc:
        click.echo(f"warning: messages waiting to be answered not counted: {gateway_db} could not be read ({exc})",
                   err=True)
        return None
    inbox = Inbox(sessions.db, SystemClock())
    return functools.partial(inbox.owned, owner_of=IdentityMap(load_cli_config().memory.identities).resolve)


async def _waiting(owner: str) -> int:
    """How many of ``owner``'s messages wait in the inbox (:func:`_unanswered`)."""
    async with contextlib.AsyncExitStack() as stack:
        count = await _unanswered(stack)
        return await count(owner) if count is not None else 0


# -- migrate ----------------------------------------------------------------------


@memory.command()
@click.option(
    "--workspace",
    type=click.Path(file_okay=False, path_type=Path),
    help="Workspace holding memory/ (default: agent.workspace from config).",
)
@click.option(
    "--user", "-u", "person",
    help="A one-person workspace: its top-level MEMORY.md and daily files are this user's (moved into their "
         "folder, memory/users/...), not _global's, which every user's prompt gets.",
)
@json_option
@db_option
@shares_data
def migrate(workspace: Path | None, person: str | None, as_json: bool) -> None:
    """Import MEMORY.md and YYYY-MM-DD.md files (the file store) into the
    database. Safe to repeat: what was imported before is not added again."""
    cfg = load_cli_config()
    user = resolve_user(person, cfg)
    if user == GLOBAL_OWNER:
        raise click.BadParameter("the top-level files are _global's already; name a user", param_hint="'--user'")
    ws = workspace or Paths.from_env().workspace(cfg)
    if not (ws / "memory").is_dir():  # a wrong MYCLAW_HOME gets no database made there
        raise click.ClickException(
            f"no memory directory at {ws / 'memory'} (what the file store writes with memory.enabled false; "
            "nothing to import, or wrong MYCLAW_HOME / --workspace)"
        )
    path = resolve_db(cfg)
    moved: list[Path] = []
    report, shared = run(_migrate(path, ws, user, moved))
    for p in report.problems:
        click.echo(f"warning: {p}", err=True)
    if shared and (ws / "memory" / "MEMORY.md").is_file():
        # The seed's layout, but a one-person workspace moved into a bot others use hands its owner's facts to all.
        click.echo(f"warning: {counted(shared, 'facts')} from {ws / 'memory' / 'MEMORY.md'} "
                   f"{'is' if shared == 1 else 'are'} filed under "
                   "_global: every user's prompt gets them. A one-person workspace: file them under its person "
                   "with `myclaw memory migrate --user USER` before they are imported (once imported: "
                   "`myclaw memory list --user _global`, then add them with --user and delete these)", err=True)
    if as_json:
        echo_json({"workspace": str(ws), "db": str(path), **report.to_dict()})
        return
    click.echo(f"migrated {ws / 'memory'} -> {path}")
    if moved:
        click.echo(f"moved {counted(len(moved), 'files')} ({', '.join(p.name for p in moved)}) into "
                   f"{moved[0].parent}: {user}'s")
    click.echo(
        render_table(
            ["", "ADDED", "REPLACED", "SKIPPED"],
            [
                ["memories", report.memories_added, "-", report.memories_skipped],
                ["events", report.events_added, report.events_replaced, report.events_skipped],
            ],
        )
    )
    if report.memories_archived:
        click.echo(f"{counted(report.memories_archived, 'memories')} archived: their lines are no longer in MEMORY.md")
    if report.memories_filed:
        click.echo(f"{counted(report.memories_filed, 'facts')} beyond Core Memory's {PROFILE_IMPORT_LIMIT} entries "
                   "imported as Tier 2 facts (found when asked about, not in every prompt)")
    if report.memories_erased:
        click.echo(f"{counted(report.memories_erased, 'lines')} erased lately by a forget, saved back (an editor's old "
                   "copy?), not imported again")
    if report.memories_cut:
        click.echo(f"{counted(report.memories_cut, 'facts')} longer than {MAX_CONTENT_CHARS} characters imported cut")
    click.echo(f"{counted(report.files_seen, 'files')} seen, {report.files_unchanged} unchanged; users: {', '.join(report.owners) or '-'}")


async def _migrate(path: Path, ws: Path, user: str | None, moved: list[Path]) -> tuple[MigrationReport, int]:
    """The report, and how many active facts the top-level MEMORY.md filed
    under _global. ``user``: its files moved into theirs first (into ``moved``)."""
    from memory.filesync import migrate_leased
    from memory.lease import LeaseBusy, LeaseLost

    async with open_engine(path, create=True) as engine:
        prepare = functools.partial(_file_under, ws, engine, user, moved) if user is not None else None
        try:
            # The lease the gateway's file sync takes: two imports at once would add a line twice.
            report = await migrate_leased(ws, engine, log_problems=False, prepare=prepare)  # printed by migrate()
        except LeaseBusy as busy:
            raise click.ClickException(
                f"another import of the memory files is running ({busy}); try again in a minute") from None
        except LeaseLost:
            # Stalled past its lease (a suspended process) and taken over: what
            # it wrote stays, and the import that took over finishes the files.
            raise click.ClickException(
                "this import outlived its lease and another import took over; it stopped, what it imported "
                "stays; run it again once that one is done to see the full report") from None
        row = await engine.db.fetchone(
            "SELECT count(*) FROM memories WHERE owner = ? AND status = 'active' AND source = 'migration'",
            (GLOBAL_OWNER,))
        return report, int(row[0]) if row is not None else 0


async def _file_under(ws: Path, engine: MemoryEngine, user: str, moved: list[Path]) -> None:
    """Move the top-level MEMORY.md and daily files into ``user``'s folder
    (with its ``.owner``), so they are imported as theirs and the file sync
    keeps them so. Refused when they were imported under _global already
    (a copy would stay there) or ``user`` has a file of the same name."""
    import os

    from memory.db import private_dirs
    from memory.filestore import OWNER_FILE, FileMemory, owner_record
    from memory.migrate import has_ledger

    files = FileMemory(ws, SystemClock())
    top = [f.path for f in (files.long_term_file(GLOBAL_OWNER), *files.daily_files(GLOBAL_OWNER)) if f.path.is_file()]
    if not top:
        return
    async with engine.db.transaction() as conn:
        imported = await has_ledger(conn, GLOBAL_OWNER, imported=True)
    if imported:
        raise click.ClickException(
            f"{ws / 'memory'}'s top-level files were already imported under _global: moving them now would "
            "leave those copies there; nothing moved (myclaw memory list --user _global shows them)")
    dst = files.user_dir(user)
    if clash := [p.name for p in top if (dst / p.name).exists()]:
        raise click.ClickException(f"{user} already has {', '.join(clash)} in {dst}: merge them by hand; nothing moved")
    private_dirs(dst)
    if not (dst / OWNER_FILE).exists():
        (dst / OWNER_FILE).write_text(owner_record(user), encoding="utf-8")
    for p in top:
        os.replace(p, dst / p.name)
        moved.append(dst / p.name)

