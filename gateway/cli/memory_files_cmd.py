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
from typing import Any

import click

from gateway.chattitles import read_titles
from gateway.config import Paths
from gateway.export import write_markdown
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
        if owner not in owners and not handles and not run(_waiting(owner)):
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
        owners = [owner, *handles] if owner else await engine.owners()
        return await write_markdown(write, SqliteMemory(engine), owners, at=engine.now(),
                                    renamed=engine.owned_project_aliases, titles=titles,
                                    unanswered=await _unanswered(stack),
                                    mapped=dict.fromkeys(handles, owner or ""))


async def _write_json(
    path: Path, owner: str | None, write: Callable[[str], Any], titles: dict[str, str], handles: list[str]
) -> tuple[int, int]:
    async with contextlib.AsyncExitStack() as stack:
        engine = await stack.enter_async_context(open_engine(path))
        return await write_json(write, engine, owner, at=engine.now(), titles=titles,
                                unanswered=await _unanswered(stack), handles=handles)


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
@json_option
@db_option
@shares_data
def migrate(workspace: Path | None, as_json: bool) -> None:
    """Import MEMORY.md and YYYY-MM-DD.md files (the file store) into the
    database. Safe to repeat: what was imported before is not added again."""
    cfg = load_cli_config()
    ws = workspace or Paths.from_env().workspace(cfg)
    if not (ws / "memory").is_dir():  # a wrong MYCLAW_HOME gets no database made there
        raise click.ClickException(
            f"no memory directory at {ws / 'memory'} (what the file store writes with memory.enabled false; "
            "nothing to import, or wrong MYCLAW_HOME / --workspace)"
        )
    path = resolve_db(cfg)
    report = run(_migrate(path, ws))
    for p in report.problems:
        click.echo(f"warning: {p}", err=True)
    if as_json:
        echo_json({"workspace": str(ws), "db": str(path), **report.to_dict()})
        return
    click.echo(f"migrated {ws / 'memory'} -> {path}")
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


async def _migrate(path: Path, ws: Path) -> MigrationReport:
    from memory.filesync import migrate_leased
    from memory.lease import LeaseBusy

    async with open_engine(path, create=True) as engine:
        try:
            # The lease the gateway's file sync takes: two imports at once would add a line twice.
            return await migrate_leased(ws, engine, log_problems=False)  # printed in full by migrate()
        except LeaseBusy as busy:
            raise click.ClickException(
                f"another import of the memory files is running ({busy}); try again in a minute") from None

