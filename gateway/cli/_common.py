"""Helpers shared by the command modules: config, database, users, output.

This is the CLI edge: library errors become user messages here (exit 1 for
a failed request, 2 for bad usage or configuration, 75 for data another
command holds: see :class:`DataBusyFailure`), never tracebacks.
"""

from __future__ import annotations

import asyncio
import difflib
import functools
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import unicodedata
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TextIO, TypeVar

import click

from gateway.config import Config, ConfigError, Paths, load_config, unknown_env
from gateway.datalock import DataBusy, DataLock
from gateway.logging import configure_logging
from memory.db import SchemaTooNew
from memory.identity import IdentityMap
from memory.types import Event, Memory

if TYPE_CHECKING:
    from memory.engine import MemoryEngine

__all__ = [
    "ConfigFailure",
    "DataBusyFailure",
    "confirm",
    "counted",
    "data_lock",
    "db_option",
    "echo_json",
    "event_dict",
    "json_option",
    "load_cli_config",
    "memory_dict",
    "open_engine",
    "render_table",
    "resolve_db",
    "resolve_user",
    "run",
    "setup_cli_logging",
    "shares_data",
    "write_private_file",
]

T = TypeVar("T")
P = ParamSpec("P")
_DB_KEY = "myclaw.db"


class ConfigFailure(click.ClickException):
    """The configuration cannot be used: exit 2, like a usage error."""

    exit_code = 2


class DataBusyFailure(click.ClickException):
    """Another process holds the data lock in a way that excludes this
    command (a restore, a merge-identities, or for those two a running
    gateway): nothing was done; run it again once that one is done. Exit
    75, EX_TEMPFAIL of sysexits.h, so a script can tell "try later" from a
    failed request."""

    exit_code = 75


@contextmanager
def data_lock(*, exclusive: str | None = None) -> Iterator[None]:
    """The data lock (gateway/datalock.py) for the block: shared, or
    exclusive when ``exclusive`` names the command. Shared, with no data
    folder yet, takes nothing: there is nothing to open mid-restore, and a
    wrong MYCLAW_HOME is reported by the command, not made on the spot."""
    data_dir = Paths.from_env().data_dir
    lock = DataLock(data_dir)
    if exclusive is not None or data_dir.is_dir():
        try:
            if exclusive is None:
                lock.share()
            else:
                lock.exclusive(exclusive)
        except DataBusy as exc:
            raise DataBusyFailure(str(exc)) from None
    try:
        yield
    finally:
        lock.release()


def shares_data(f: Callable[P, T]) -> Callable[P, T]:
    """A command that opens the data files holds the data lock shared while
    it runs (beside a gateway, never beside a restore); ``--help`` and bad
    options are answered before it is taken. Put it right above ``def``."""

    @functools.wraps(f)
    def held(*args: P.args, **kwargs: P.kwargs) -> T:
        with data_lock():
            return f(*args, **kwargs)

    return held


class _Stderr:
    """Whatever ``sys.stderr`` is at write time (click's test runner swaps it)."""

    def write(self, s: str) -> int:
        return sys.stderr.write(s)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def setup_cli_logging() -> None:
    """Warnings and errors to stderr; stdout stays clean for tables and JSON."""
    level = os.environ.get("MYCLAW_LOG_LEVEL", "WARNING").strip().upper()
    if level not in LOG_LEVELS:
        raise ConfigFailure(f"MYCLAW_LOG_LEVEL: unknown level {os.environ['MYCLAW_LOG_LEVEL']!r} (use {', '.join(LOG_LEVELS)})")
    configure_logging(level=level, stream=_Stderr())  # type: ignore[arg-type]


def warn_unknown_env() -> None:
    """A misspelt ``MYCLAW_*`` variable is ignored: say so, with the likely
    intended name (stderr; stdout stays clean)."""
    for name in unknown_env(os.environ):
        click.echo(f"myclaw: warning: {name} is not a myclaw setting and is ignored", err=True)


def load_cli_config() -> Config:
    warn_unknown_env()
    try:
        return load_config()
    except ConfigError as exc:
        raise ConfigFailure(str(exc)) from None


def _remember_db(ctx: click.Context, _param: click.Parameter, value: Path | None) -> None:
    if value is not None:
        ctx.meta[_DB_KEY] = value  # meta is shared by the group and its commands


db_option = click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    expose_value=False,
    callback=_remember_db,
    help="Memory database file (default: from config, under $MYCLAW_HOME).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON on stdout.")


def resolve_db(cfg: Config) -> Path:
    override = click.get_current_context().meta.get(_DB_KEY)
    return Path(override) if override else Paths.from_env().memory_db(cfg)


def resolve_user(value: str | None, cfg: Config) -> str | None:
    """``--user``: a user name, ``_global``, or a ``channel:sender_id``
    handle, which the identity map turns into the person it belongs to."""
    if value is None:
        return None
    v = value.strip()
    if not v:
        raise click.BadParameter("must not be empty", param_hint="'--user'")
    if ":" in v:
        channel, sender = v.split(":", 1)
        return IdentityMap(cfg.memory.identities).resolve(channel, sender)
    return v


@asynccontextmanager
async def open_engine(path: Path, *, create: bool = False) -> AsyncIterator[MemoryEngine]:
    """The engine on ``path``, closed on the way out. Read-only commands
    pass ``create=False`` so a wrong ``MYCLAW_HOME`` is reported, not
    silently answered with an empty new database."""
    if not create and not path.exists():
        raise click.ClickException(f"no memory database at {path} (nothing stored yet, or wrong MYCLAW_HOME / --db)")
    from memory.engine import MemoryEngine  # here: commands without the engine (cron list) skip its imports

    try:
        engine = await MemoryEngine.open(path)
    except SchemaTooNew as exc:
        raise click.ClickException(str(exc)) from None
    except sqlite3.DatabaseError as exc:
        raise click.ClickException(f"{path}: cannot open as a memory database: {exc}") from None
    try:
        yield engine
    finally:
        await engine.close()


def run(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` at the edge, with lookup failures as user messages."""
    try:
        return asyncio.run(coro)
    except Exception as exc:
        engine = sys.modules.get("memory.engine")  # none raised when it was never imported
        if engine is not None and isinstance(exc, engine.MemoryNotFound):
            raise click.ClickException(str(exc)) from None
        raise


# -- output -------------------------------------------------------------------


def near_handles(owner: str, owners: Sequence[str]) -> list[str]:
    """The stored handles ``owner`` (nothing is stored about it) was most
    likely meant as: a typo's nearest, or every handle of an id given
    without its channel ("1001" for telegram:1001, too short for difflib)."""
    same_id = sorted(o for o in owners if ":" not in owner and o.partition(":")[2] == owner)
    return same_id or difflib.get_close_matches(owner, list(owners), n=1)


def memory_dict(m: Memory) -> dict[str, Any]:
    d = asdict(m)
    d["category"], d["source"], d["status"] = m.category.value, m.source.value, m.status.value
    d["provenance"] = json.loads(m.provenance.to_json())
    return d


def event_dict(e: Event) -> dict[str, Any]:
    d = asdict(e)
    d["provenance"] = json.loads(e.provenance.to_json())
    return d


def counted(n: int, many: str) -> str:
    """``1 memory``, ``2 memories``, ``1 log entry``: ``many`` is the plural,
    its last word made singular for one (CLI nouns: -ies and -s plurals)."""
    if n == 1:
        many = many[:-3] + "y" if many.endswith("ies") else many.removesuffix("s")
    return f"{n} {many}"


def confirm(question: str) -> bool:
    """``click.confirm`` on stderr, where end of input (stdin closed) is a
    no, not click's "Aborted!" (read as a crash): the caller says
    "cancelled; nothing changed" as for a typed no."""
    try:
        return click.confirm(question, err=True)
    except click.Abort:
        return False


def echo_json(obj: Any) -> None:
    click.echo(json.dumps(obj, ensure_ascii=False, indent=2))


def _width(s: str) -> int:
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in s)


def _fit(s: str, width: int) -> str:
    s = " ".join(s.split())
    if _width(s) <= width:
        return s
    out, used = [], 0
    for c in s:
        w = _width(c)
        if used + w > width - 1:
            break
        out.append(c)
        used += w
    return "".join(out) + "…"


def render_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, width: int | None = None) -> str:
    """Aligned columns (wide CJK characters count double); on a terminal the
    last column is cut to what is left of its width. Piped or redirected
    (``| grep``, ``> file``), lines are whole: a cut would hide the words
    looked for."""
    cells = [[" ".join(str(c).split()) for c in r] for r in rows]
    cols = [max([_width(h), *(_width(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    if width is None and sys.stdout.isatty():
        width = shutil.get_terminal_size((120, 24)).columns
    if width is not None:
        last = max(20, width - sum(cols[:-1]) - 2 * (len(cols) - 1))
        cols[-1] = min(cols[-1], last)

    def line(values: Sequence[str]) -> str:
        parts = []
        for i, v in enumerate(values):
            v = _fit(v, cols[i]) if i == len(values) - 1 else v
            parts.append(v if i == len(values) - 1 else v + " " * (cols[i] - _width(v)))
        return "  ".join(parts).rstrip()

    return "\n".join([line(list(headers)), *(line(r) for r in cells)])


def write_private_file(path: Path, text: str) -> None:
    """Write ``text`` atomically, readable by the owner only (an export
    holds everything people told the bot, credentials included)."""
    with private_file(path) as f:
        f.write(text)


@contextmanager
def private_file(path: Path) -> Iterator[TextIO]:
    """A text file to write ``path`` with, readable by the owner only: a
    temporary file beside it, renamed over it once the block ends, removed
    if the block fails (a half-written export never takes the old one's
    place). For what is written a piece at a time."""
    if not path.parent.is_dir():
        raise click.ClickException(f"cannot write {path}: directory {path.parent} does not exist")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            yield f
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise click.ClickException(f"cannot write {path}: {exc.strerror}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

