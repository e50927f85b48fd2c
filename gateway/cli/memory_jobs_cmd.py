"""``myclaw memory compress|flush|retry-set-aside|log``: the write path's jobs by hand. They
run the same code as the gateway's scheduler and extraction service, and
take the same lease, so a hand-run compression never overlaps the gateway's.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import asdict

import click

from gateway.config import Config
from memory import MemoryEngine
from memory.changelog import read_log
from memory.db import Database
from memory.compression import Compressor
from memory.extraction import ExtractionService, retry_set_aside
from memory.lease import JobTimeout, LeaseBusy, LeaseLost
from memory.llm import MemoryLLM

from ._common import counted, shares_data, db_option, echo_json, json_option, load_cli_config, open_engine, render_table, resolve_db, resolve_user, run
from ._zones import user_zones
from .memory_cmd import memory, owner_labels, unmerged_notes


@asynccontextmanager
async def _write_path(cfg: Config) -> AsyncIterator[tuple[MemoryEngine, MemoryLLM]]:
    async with open_engine(resolve_db(cfg)) as engine, MemoryLLM.from_config(cfg) as llm:
        yield engine, llm


@memory.command()
@click.argument("kind", required=False, type=click.Choice(["daily", "weekly"]))
@click.option("--daily", "which", flag_value="daily", help="Yesterday's (and older) events -> facts.")
@click.option("--weekly", "which", flag_value="weekly", help="Merge partitions, refresh Tier 1, archive decayed.")
@json_option
@db_option
@shares_data
def compress(kind: str | None, which: str | None, as_json: bool) -> None:
    """Run the daily or weekly compression now: `compress daily` or `compress weekly`
    (`--daily` / `--weekly` work too)."""
    if kind and which and kind != which:
        raise click.UsageError(f"got {kind} and --{which}: choose daily or weekly, not both")
    which = kind or which
    if which is None:
        raise click.UsageError("choose daily or weekly (myclaw memory compress daily)")
    cfg = load_cli_config()
    zones = user_zones(cfg)

    async def go() -> None:
        async with _write_path(cfg) as (engine, llm):
            comp = Compressor(engine, llm, timezone=cfg.gateway.timezone)
            zones.attach(engine, comp)  # a user's day ends at their midnight, as the gateway's run has it
            try:
                report = await (comp.daily() if which == "daily" else comp.weekly())
            except LeaseBusy as busy:
                # Nothing done here; the run that holds it does the same work.
                raise click.ClickException(
                    f"another compression is running ({busy}); nothing compressed by this run, "
                    "try again once it is done") from None
            except LeaseLost:
                # Stalled past its lease (a suspended laptop, a long model call)
                # and taken over: what it wrote stays, the other run does the rest.
                raise click.ClickException(
                    f"this {which} compression outlived its job lease and another run took it over; it stopped "
                    "(what it wrote before stays, the other run compresses the rest)") from None
            except JobTimeout as exc:
                raise click.ClickException(str(exc)) from None
        data = asdict(report)
        if as_json:
            echo_json(data)
        else:
            notes = data.pop("notes", [])
            click.echo(f"{which} compression: " + ", ".join(f"{k} {v}" for k, v in data.items()))
            if which == "daily":
                notes = [*_daily_notes(data["events"], data["waiting"]), *notes]
            for n in notes:
                click.echo(f"  {n}")

    run(go())


def _daily_notes(done: int, waiting: int) -> list[str]:
    """What a daily run did and what waits, in words: "events 0" alone
    read as broken while today's events waited for the day to end."""
    out = [f"{counted(done, 'events')} of past days compressed into facts" if done
           else "no events of a past day to compress"]
    if waiting:
        out.append(f"today's {counted(waiting, 'events')} {'waits' if waiting == 1 else 'wait'} for the day to end "
                   "(in the user's time zone): the first run after it compresses them")
    return out


@memory.command()
@click.option("--user", "-u", help="Only this user (default: everyone with buffered messages).")
@json_option
@db_option
@shares_data
def flush(user: str | None, as_json: bool) -> None:
    """Extract buffered messages now, ignoring the quiet gap and backoff."""
    cfg = load_cli_config()
    owner = resolve_user(user, cfg)
    zones = user_zones(cfg)

    async def go() -> None:
        async with _write_path(cfg) as (engine, llm):
            ex = cfg.memory.extraction
            svc = ExtractionService(
                engine, llm, quiet_gap=ex.quiet_gap, token_budget=ex.token_budget,
                daily_flush=ex.daily_flush, timezone=cfg.gateway.timezone,
            )
            zones.attach(engine, svc)  # their lines' times and days on their clock, as the gateway's flush
            reports = await (svc.flush_user(owner) if owner else svc.flush_all())
        failed = [r for r in reports if r.error and not r.set_aside]
        if as_json:
            echo_json([asdict(r) for r in reports])
        elif not reports:
            click.echo("nothing buffered")
        else:
            who = owner_labels([r.owner for r in reports])  # a group's own batch named as a group
            for r in reports:
                state = (f"set aside: {r.error}; kept, not retried" if r.set_aside
                         else f"failed: {r.error}" if r.error else r.skipped or (
                    f"{len(r.added)} added, {len(r.reinforced)} reinforced, {len(r.superseded)} superseded"))
                click.echo(f"{who[r.owner]}: {counted(r.rows, 'messages')}, {state}")
        if failed:
            raise click.ClickException(f"{len(failed)} batch(es) failed; their messages stay buffered for a retry")

    run(go())


@memory.command("retry-set-aside")
@click.option("--user", "-u", help="Only this user's lines (default: everyone's).")
@json_option
@db_option
@shares_data
def retry_set_aside_cmd(user: str | None, as_json: bool) -> None:
    """Try set-aside lines again (after switching to a bigger memory model).

    Lines the memory model could not take even one at a time are kept but
    never sent again; this clears that mark, so the next extraction run
    (the gateway's, or `myclaw memory flush`) tries them once more."""
    cfg = load_cli_config()
    owner = resolve_user(user, cfg)

    async def go() -> None:
        async with open_engine(resolve_db(cfg)) as engine:
            cleared = await retry_set_aside(engine, owner, job="cli")
        if as_json:
            echo_json({"cleared": cleared})
        elif not cleared:
            click.echo("no lines set aside")
        else:
            click.echo(f"{cleared} line{'s' if cleared != 1 else ''} set aside will be tried again by the next "
                       "extraction run (myclaw memory flush runs one now)")

    run(go())


@memory.command("log")
@click.option(
    "--job",
    help="extraction, daily_compress, weekly_compress, chat (the bot's memory_forget), "
    "web (the memory page), cli (these commands)",
)
@click.option("--user", "-u", help="Only this user's entries.")
@click.option("--action", "actions", multiple=True, help="add, reinforce, supersede, merge, drop, decay, promote, demote, backlog, set-aside, ...")
@click.option("--limit", "-n", default=50, show_default=True, type=click.IntRange(1, 100_000))
@json_option
@db_option
@shares_data
def log_cmd(job: str | None, user: str | None, actions: tuple[str, ...], limit: int, as_json: bool) -> None:
    """What the write path changed and why (newest first)."""
    cfg = load_cli_config()
    owner = resolve_user(user, cfg)

    async def go() -> None:
        async with open_engine(resolve_db(cfg)) as engine:
            entries = await read_log(engine.db, job=job, owner=owner, actions=actions, limit=limit)
            held = await _held(engine.db) if not entries and (job or actions) and not as_json else {}
        if as_json:
            echo_json([{**asdict(e), "detail": _detail(e.detail)} for e in entries])
        elif not entries:
            # A misspelt --job or --action ("extract") finds nothing: say what the log holds.
            if job and job not in held.get("job", ()):
                click.echo(f"no log entries for --job {job} (the log holds the jobs: {', '.join(held['job']) or 'none'})")
            elif actions and not set(actions) & set(held.get("action", ())):
                click.echo(f"no log entries for --action {', '.join(actions)} "
                           f"(the log holds the actions: {', '.join(held['action']) or 'none'})")
            else:
                click.echo("no log entries")
        else:
            who = owner_labels([e.owner for e in entries if e.owner])
            rows = [(e.at, e.job, who[e.owner] if e.owner else "-", e.action, e.memory_id or "-", e.detail)
                    for e in entries]
            click.echo(render_table(["at", "job", "user", "action", "memory", "detail"], rows))

    run(go())
    unmerged_notes(cfg, resolve_db(cfg), owner)


async def _held(db: Database) -> dict[str, list[str]]:
    """The jobs and the actions the change log holds, each sorted."""
    return {col: [str(r[0]) for r in await db.fetchall(f"SELECT DISTINCT {col} FROM memory_log ORDER BY {col}")]
            for col in ("job", "action")}


def _detail(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return text
