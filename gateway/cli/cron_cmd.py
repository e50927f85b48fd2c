"""``myclaw cron add|list|remove``: the scheduler's jobs in ``data/cron.db``.
A running gateway sees the change at its next poll."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict
from datetime import datetime, tzinfo
from typing import TypeVar
from zoneinfo import ZoneInfo

import click

from gateway.config import Config, Paths
from gateway.cron import (
    CronError, CronJob, CronStore, check_job_id, check_message, check_once, once_local, parse_at, validate_schedule,
)
from gateway.privatechat import private_chat_refusal
from gateway.timezones import TimezoneError, parse_timezone
from memory.clock import SystemClock
from memory.identity import IdentityMap

from . import main
from ._common import (
    echo_json, json_option, load_cli_config, near_handles, render_table, resolve_user, run, setup_cli_logging,
    shares_data,
)

T = TypeVar("T")


@asynccontextmanager
async def open_store(cfg: Config, *, create: bool = False) -> AsyncIterator[CronStore]:
    """``create=False`` (list, remove): a wrong ``MYCLAW_HOME`` is reported,
    not answered "no jobs" from a database made there on the spot."""
    path = Paths.from_env().cron_db()
    if not create and not path.exists():
        raise click.ClickException(f"no cron database at {path} (no job added yet, or wrong MYCLAW_HOME)")
    store = await CronStore.open(path, SystemClock(), cfg.gateway.timezone)
    try:
        yield store
    finally:
        await store.close()


@main.group()
def cron() -> None:
    """Scheduled jobs: a message run through the agent, the reply sent to a chat."""
    setup_cli_logging()


def _check_channel(cfg: Config, channel: str) -> None:
    """The reply of a job for a channel the gateway does not have would be
    queued for nobody (each run costing an LLM call): refuse the name; warn
    when the channel exists but is not enabled."""
    from gateway.app import CHANNELS  # lazily: the app is heavy to import for `myclaw --help`

    spec = next((s for s in CHANNELS if s.name == channel), None)
    if spec is None:
        names = ", ".join(s.name for s in CHANNELS)
        raise click.BadParameter(f"unknown channel {channel!r} (one of {names})", param_hint="'--channel'")
    if not spec.section(cfg).enabled:
        click.echo(
            f"warning: channels.{channel}.enabled is false: the job's replies are sent once it is enabled", err=True
        )


async def _check_private(cfg: Config, channel: str, chat_id: str, user: str) -> None:
    """``--private`` only for the user's own private chat: into a group,
    or another's chat, their private memory would reach others."""
    from gateway.sessions import SessionStore  # lazily, as _check_channel

    path = Paths.from_env().gateway_db()
    identities = IdentityMap(cfg.memory.identities)
    if channel == "telegram" or not path.exists():
        why = await private_chat_refusal(None, identities, channel=channel, chat_id=chat_id, user=user, proven=True)
    else:
        async with await SessionStore.open(path) as sessions:
            why = await private_chat_refusal(sessions, identities, channel=channel, chat_id=chat_id, user=user,
                                             proven=True)
    if why:
        raise click.BadParameter(f"{why}; a job there may use shared memory only (leave out --private)",
                                 param_hint="'--private'")


async def _pick_chat(cfg: Config, channel: str, user: str, *, private: bool) -> str:
    """``--chat-id`` left out: the operator seldom knows a chat's platform
    id (Feishu's ``oc_…``, a Telegram group's ``-100…``). With
    ``--private`` it is the user's own private chat when exactly one is
    known; otherwise nothing is guessed (a job's replies in the wrong group
    would be read by others): the chats the user was seen in are listed,
    with their kind and title, and the command stops (exit 2)."""
    from gateway.chattitles import read_titles
    from gateway.sessions import SessionStore  # lazily, as _check_channel

    handles = IdentityMap(cfg.memory.identities).handles(user)
    path = Paths.from_env().gateway_db()
    seen: list[tuple[str, str, str]] = []  # (chat_id, kind, last message)
    if path.exists():
        async with await SessionStore.open(path) as sessions:
            for chat, last in await sessions.chats_of([user, *handles], channel):
                seen.append((chat, await sessions.chat_kind(channel, chat, user), last))
    titles = read_titles(path)
    if private:
        own = {c for c, kind, _ in seen if kind == "theirs"}
        if channel == "telegram":  # a Telegram private chat's id is its user's id, seen or not
            own = {c for c in own if not c.startswith("-")} | {
                h.split(":", 1)[1] for h in handles if h.startswith("telegram:")}
        if len(own) == 1:
            (chat,) = own
            click.echo(f"chat: {channel} {chat}, {user}'s private chat", err=True)
            return chat
    if not seen:
        raise click.UsageError(
            f"give --chat-id: no {channel} chat of {user} is known here yet (known once they have written to "
            "the bot there)"
        )
    words = {"group": "group", "theirs": "private", "another's": "another's private chat", "unknown": "kind unknown"}
    listed = "; ".join(
        f"{chat} ({words[kind]}{', ' + repr(titles[f'{channel}:{chat}']) if f'{channel}:{chat}' in titles else ''}, "
        f"last message {last[:10]})"
        for chat, kind, last in seen
    )
    raise click.UsageError(f"give --chat-id: {user} was seen on {channel} in {listed}")


async def _warn_if_never_seen(cfg: Config, owner: str) -> None:
    """A job for a user nothing is known about (a typo, most likely) would
    answer from an empty memory: say so on stderr, naming the near handle,
    but add it (it may be set up before the user's first message). Known:
    a message of theirs in the history, or memories (the history keeps
    only recent chats)."""
    from gateway.sessions import SessionStore  # lazily, as _check_channel
    from memory.engine import MemoryEngine

    paths = Paths.from_env()
    known: set[str] = set()
    if paths.gateway_db().exists():
        async with await SessionStore.open(paths.gateway_db()) as sessions:
            if await sessions.owned(owner):
                return
            known.update(str(r[0]) for r in await sessions.db.fetchall("SELECT DISTINCT owner FROM session_messages"))
    if paths.memory_db(cfg).exists():
        async with await MemoryEngine.open(paths.memory_db(cfg)) as engine:
            known.update(await engine.owners())
    if owner in known:
        return
    near = near_handles(owner, sorted(known - {""}))
    hint = f" (did you mean {' or '.join(near)}?)" if near else ""
    click.echo(f"warning: no message from {owner} was ever seen here{hint}; the job is added all the same", err=True)


@cron.command("add")
@click.option("--schedule", "-s", help="A recurring job: cron expression, five fields, e.g. '0 9 * * 1-5'.")
@click.option(
    "--at", "at_text",
    help="A one-time job: local date and time as 'YYYY-MM-DD HH:MM', within a year from now (in --timezone; "
         "an explicit offset, 'YYYY-MM-DDTHH:MM+08:00', wins).",
)
@click.option("--message", "-m", required=True, help="What the agent is asked at each run.")
@click.option("--channel", required=True, help="Where the reply goes: telegram or feishu.")
@click.option(
    "--chat-id",
    help="The chat the reply goes to. Left out: with --private, the user's own private chat on --channel when "
    "one is known; otherwise the chats the user was seen in are listed.",
)
@click.option("--user", "-u", required=True, help="Whose memory the agent uses (user name or channel:sender_id).")
@click.option("--id", "job_id", help="A job id of your choice (default: generated).")
@click.option(
    "--private", is_flag=True,
    help="The chat is the user's own private chat: the reply may use their private memory (profile, "
    "credentials). Without it, only shared memory, as in a group.",
)
@click.option(
    "--timezone", "zone",
    help="The zone the schedule or --at is read in (Asia/Shanghai, Berlin, UTC+8; default gateway.timezone).",
)
@json_option
@shares_data
def add(
    schedule: str | None, at_text: str | None, message: str, channel: str, chat_id: str | None, user: str,
    job_id: str | None, private: bool, zone: str | None, as_json: bool,
) -> None:
    """Add a job: recurring (--schedule) or one-time (--at)."""
    if (schedule is None) == (at_text is None):
        raise click.UsageError("give --schedule (a recurring job) or --at (a one-time job), exactly one")
    cfg = load_cli_config()
    owner = resolve_user(user, cfg)
    assert owner is not None
    _check_channel(cfg, channel)
    try:
        tz = parse_timezone(zone) if zone is not None else None
    except TimezoneError as exc:
        raise click.BadParameter(str(exc), param_hint="'--timezone'") from None
    # Every argument is checked before cron.db is opened: a mistake makes
    # nothing (no database left behind on a wrong MYCLAW_HOME either).
    at = _check_args(schedule, at_text, message, job_id, tz or ZoneInfo(cfg.gateway.timezone))

    async def go() -> None:
        nonlocal chat_id
        if chat_id is None:
            chat_id = await _pick_chat(cfg, channel, owner, private=private)
        if private:
            await _check_private(cfg, channel, chat_id, owner)
        await _warn_if_never_seen(cfg, owner)
        async with open_store(cfg, create=True) as store:
            try:
                job = await store.add(
                    schedule=schedule, at=at, message=message, channel=channel, chat_id=chat_id, user=owner,
                    job_id=job_id, private=private, tz=tz,
                )
            except CronError as exc:
                raise click.ClickException(str(exc)) from None
        if as_json:
            echo_json(asdict(job))
        elif job.once:
            click.echo(f"added {job.id}: runs once at {once_local(job)}")
        else:
            click.echo(f"added {job.id}: next run {job.next_run_at} ({job.timezone or cfg.gateway.timezone} schedule)")

    run(go())


def _check_args(
    schedule: str | None, at_text: str | None, message: str, job_id: str | None, tz: tzinfo
) -> datetime | None:
    """What ``CronStore.add`` would refuse, named by its option; the instant of ``--at``."""

    def check(hint: str, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except CronError as exc:
            raise click.BadParameter(str(exc), param_hint=hint) from None

    check("'--message'", lambda: check_message(message))
    if job_id is not None:
        check("'--id'", lambda: check_job_id(job_id))
    if schedule is not None:
        check("'--schedule'", lambda: validate_schedule(schedule))
        return None
    assert at_text is not None
    at = check("'--at'", lambda: parse_at(at_text, tz))
    check("'--at'", lambda: check_once(at, SystemClock().now(), tz))
    return at


@cron.command("list")
@click.option("--user", "-u", help="Only this user's jobs.")
@json_option
@shares_data
def list_jobs(user: str | None, as_json: bool) -> None:
    """List jobs, the internal memory jobs included."""
    cfg = load_cli_config()
    owner = resolve_user(user, cfg)

    async def go() -> None:
        async with open_store(cfg) as store:
            jobs = await store.list(user=owner)
        if as_json:
            echo_json([asdict(j) for j in jobs])
            return
        if not jobs:
            click.echo("no jobs")
            return
        rows = [
            (j.id, _when(j), j.next_run_at, _last(j), f"{j.channel}:{j.chat_id}" if j.channel else "-",
             j.user or "-", ("private" if j.private else "shared") if j.channel else "-", j.message)
            for j in jobs
        ]
        click.echo(render_table(["id", "schedule", "next run (UTC)", "last", "to", "user", "memory", "message"], rows))

    run(go())


# An error longer than this is cut in the table (a middle column: it would
# push the message off the screen); ``--json`` has it whole.
_ERROR_WIDTH = 60


def _last(j: CronJob) -> str:
    if j.last_status == "retry":  # next run is the retry of the slot due_at
        return f"retry ({j.attempts} failed, due {j.due_at})"
    if j.last_status == "fallback":  # not agent.fallbacks: no model answered at all
        return "fallback: model unreachable, the job's own text sent"
    if j.last_status == "error" and j.last_error:
        error = " ".join(j.last_error.split())
        return "error: " + (error if len(error) <= _ERROR_WIDTH else error[:_ERROR_WIDTH - 1] + "…")
    return j.last_status or "-"


def _when(j: CronJob) -> str:
    if j.once:
        return f"once {once_local(j)}"
    return j.schedule + (f" ({j.timezone})" if j.timezone else "")


@cron.command("remove")
@click.argument("job_id")
@shares_data
def remove(job_id: str) -> None:
    """Remove a job by id (internal jobs cannot be removed)."""
    cfg = load_cli_config()

    async def go() -> None:
        async with open_store(cfg) as store:
            try:
                await store.remove(job_id)
            except CronError as exc:
                raise click.ClickException(str(exc)) from None
        click.echo(f"removed {job_id}")

    run(go())
