"""``myclaw memory ...``: inspect and manage stored memories.

Every command takes ``--db`` (also accepted on the group) and most take
``--user``; reading commands default to all users, ``add`` requires one
(``--user _global`` for facts everybody may see), so a fact about one
person is never shared by a forgotten option.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC
from pathlib import Path
from typing import Any

import click

from gateway.config import Config, Paths
from memory import Category, MemoryEngine, MemoryNotFound, NewMemory, Provenance, Source, Status
from memory.changelog import write_log
from memory.db import Database
from memory.cues import parse_terms
from memory.engine import MAX_CONTENT_CHARS
from memory.redact import nothing_but_redactions, redacted_and_what
from memory.forgetting import Erasure, erase_planned, plan_erasure, retire_entries_on
from memory.identity import IdentityMap
from memory.retrieval import Retriever
from memory.clock import SystemClock
from memory.groupnotes import forget_group
from memory.groupowner import GROUP_PREFIX, chat_of, group_owner
from memory.types import GLOBAL_OWNER, Hit, Memory

from . import main
from ._lazy import LazyGroup
from ._common import (
    confirm,
    counted,
    db_option,
    echo_json,
    json_option,
    load_cli_config,
    memory_dict,
    near_handles,
    open_engine,
    render_table,
    resolve_db,
    resolve_user,
    run,
    setup_cli_logging,
    shares_data,
)
from ._zones import CliZones, user_zones

CATEGORIES = [c.value for c in Category]
JOB = "cli"  # the change log's name for what was done with these commands

user_option = click.option("--user", "-u", help="A user name, _global, or a channel:sender_id handle.")


# The memory commands kept in other modules, for what they import: loaded
# when one of them runs (gateway/cli/_lazy.py).
_ELSEWHERE = {
    "export": ("memory_files_cmd",), "migrate": ("memory_files_cmd",),
    "compress": ("memory_jobs_cmd",), "flush": ("memory_jobs_cmd",), "retry-set-aside": ("memory_jobs_cmd",),
    "log": ("memory_jobs_cmd",), "merge-identities": ("identity_cmd",), "project-alias": ("project_cmd",),
}


@main.group(cls=LazyGroup, lazy=_ELSEWHERE)
@db_option
def memory() -> None:
    """Inspect and manage long-term memory."""
    setup_cli_logging()


def _short(m: Memory) -> str:
    return _short_text(m.content)


def _short_text(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:59] + "…"


async def _get(engine: MemoryEngine, memory_id: int, owner: str | None) -> Memory:
    m = await engine.get(memory_id)
    if m is None or (owner is not None and m.owner != owner):
        raise MemoryNotFound(f"no memory with id {memory_id}" + (f" for user {owner}" if owner else ""))
    return m


# -- stats ------------------------------------------------------------------


@memory.command()
@user_option
@json_option
@db_option
@shares_data
def stats(user: str | None, as_json: bool) -> None:
    """Counts by status, tier, category and source, and per user."""
    cfg = load_cli_config()
    run(_stats(resolve_db(cfg), resolve_user(user, cfg), as_json))


async def _stats(path: Path, owner: str | None, as_json: bool) -> None:
    async with open_engine(path) as engine:
        s = await engine.stats(owner)
        known = await engine.owners() if owner else []
        per_user: list[dict[str, Any]] = []
        per_group: list[dict[str, Any]] = []
        for u in [owner] if owner else await engine.owners():
            us = s if owner else await engine.stats(u)
            row = {
                "active": us.by_status.get("active", 0),
                "tier1": us.by_tier.get("1", 0),
                "archived": us.by_status.get("archived", 0),
                "events": us.events,
                "buffered": us.buffered,
            }
            if (chat := chat_of(u)) is None:
                per_user.append({"user": u, **row})
            else:  # a group's own memory (memory/groupnotes.py): nobody's, listed apart
                per_group.append({"group": f"{chat[0]}:{chat[1]}", "owner": u, **row})
    names = _group_names([g["group"] for g in per_group]) if per_group else {}
    for g in per_group:
        g["title"] = names[g["group"]].removesuffix(f" ({g['group']})") if names[g["group"]] != g["group"] else ""
    if as_json:
        echo_json({"db": str(path), "user": owner, **vars(s), "users": per_user, "groups": per_group})
        return

    def counts(d: dict[str, int]) -> str:
        return ", ".join(f"{k} {v}" for k, v in sorted(d.items())) or "-"

    for label, value in [
        ("database", str(path)),
        ("memories", f"{s.total} ({counts(s.by_status)})"),
        ("tiers", counts({f"tier {k}": v for k, v in s.by_tier.items()})),
        ("categories", counts(s.by_category)),
        ("sources", counts(s.by_source)),
        ("events", f"{s.events} ({s.events_uncompressed} not compressed"
                   + (f"; {s.events_legacy} the legacy top-level day logs, kept as the operator's record, "
                      "never compressed" if s.events_legacy else "") + ")"),
        ("buffered", counted(s.buffered, "messages") + (f" ({s.set_aside} set aside: the memory model cannot take them, "
                                                 "not retried until myclaw memory retry-set-aside)" if s.set_aside else "")),
        ("vectors", counts(s.vectors) + f" of {s.by_status.get('active', 0)} active" if s.vectors else "-"),
    ]:
        click.echo(f"{label:<11} {value}")
    if owner and owner not in known:  # a typo, most likely: as `list` says it
        near = near_handles(owner, known)
        click.echo(f"nothing is stored for {owner}" + (f" (did you mean {' or '.join(near)}?)" if near else "")
                   + "; without --user, stats lists every user", err=True)
    if per_user:
        click.echo()
        click.echo(
            render_table(
                ["USER", "ACTIVE", "TIER1", "ARCHIVED", "EVENTS", "BUFFERED"],
                [[p["user"], p["active"], p["tier1"], p["archived"], p["events"], p["buffered"]] for p in per_user],
            )
        )
    if per_group:
        click.echo()
        click.echo(
            render_table(
                ["GROUP", "NOTES", "ARCHIVED", "EVENTS", "BUFFERED"],
                [[names[g["group"]], g["active"], g["archived"], g["events"], g["buffered"]] for g in per_group],
            )
        )


# -- list -----------------------------------------------------------------------


@memory.command("list")
@user_option
@click.option("--tier", type=click.IntRange(1, 2), help="1 (profile) or 2 (knowledge).")
@click.option(
    "--status",
    type=click.Choice([*(s.value for s in Status), "all"]),
    default="active",
    show_default=True,
)
@click.option("--project", help="Only this project partition (_global for none).")
@click.option("--category", type=click.Choice(CATEGORIES))
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
@json_option
@db_option
@shares_data
def list_cmd(
    user: str | None,
    tier: int | None,
    status: str,
    project: str | None,
    category: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """Memories, newest first."""
    cfg = load_cli_config()
    filters = {
        "tier": tier,
        "status": None if status == "all" else status,
        "project": project,
        "category": category,
        "limit": limit,
    }
    path, owner = resolve_db(cfg), resolve_user(user, cfg)
    run(_list(path, owner, filters, as_json))
    unmerged_notes(cfg, path, owner)


async def _list(path: Path, owner: str | None, filters: dict[str, Any], as_json: bool) -> None:
    async with open_engine(path) as engine:
        rows = await engine.list_memories(owner, **filters)
        # Only the active-only default narrowed an empty list: say what is
        # stored rather than that "nothing matches" (read as a filter's fault).
        plain = filters["status"] == Status.ACTIVE.value and not any(
            filters[k] for k in ("tier", "project", "category"))
        stored = (await engine.stats(owner)).by_status if not rows and plain else {}
        owners = await engine.owners() if not rows and plain and owner is not None and not stored else []
    if as_json:
        echo_json([memory_dict(m) for m in rows])
        return
    if not rows:
        click.echo(_empty_list(owner, stored, owners) if plain else "no memories match", err=True)
        return
    who = owner_labels([m.owner for m in rows])
    click.echo(
        render_table(
            ["ID", "USER", "TIER", "CATEGORY", "IMP", "PROJECT", "STATUS", "DATE", "CONTENT"],
            [
                [m.id, who[m.owner], m.tier, m.category.value, f"{m.importance:.2f}", m.project, m.status.value,
                 m.created_at[:10], m.content]
                for m in rows
            ],
        )
    )


def _empty_list(owner: str | None, by_status: dict[str, int], owners: list[str]) -> str:
    """Why ``list`` shows nothing with no filter but the active-only default."""
    if not by_status:
        if owner is None:
            return "no memories are stored yet"
        # Events or buffered messages only: a real user, not a typo to correct.
        return f"no memories are stored for {owner}" + ("" if owner in owners else f" ({_near_hint(owner, owners)})")
    rest = ", ".join(f"{n} {status}" for status, n in sorted(by_status.items()))
    return (f"{owner} has no active memories" if owner is not None else "no active memories") + (
        f", only {rest} (--status all lists them)")


# -- search ---------------------------------------------------------------------


@memory.command()
@click.argument("query")
@user_option
@click.option("--limit", type=click.IntRange(min=1), default=10, show_default=True)
@json_option
@db_option
@shares_data
def search(query: str, user: str | None, limit: int, as_json: bool) -> None:
    """Rank memories and events for QUERY as the bot would (all users unless
    --user; a person's memory.identities handles' rows from before the
    mapping too, shown under the handle)."""
    cfg = load_cli_config()
    owner = resolve_user(user, cfg)
    handles = [h for h in IdentityMap(cfg.memory.identities).handles(owner) if h != owner] if owner else []
    run(_search(resolve_db(cfg), owner, query, limit, as_json, handles, zones=user_zones(cfg)))


async def _search(path: Path, owner: str | None, query: str, limit: int, as_json: bool,
                  handles: list[str] | None = None, *, zones: CliZones | None = None) -> None:
    async with open_engine(path) as engine:
        if zones is not None:
            zones.attach(engine)  # who is on the gateway's zone: its old ones date their days
        retriever = Retriever(engine)
        found: dict[tuple[str, int], tuple[str, Hit]] = {}
        owners = await engine.owners()
        # A person's handles that stored rows before the mapping (merge-identities
        # not run yet) are theirs: /export lists them, an erasure takes them.
        for u in [owner, *(h for h in handles or () if h in owners)] if owner else owners:
            # A handle's rows are the person's: their calendar.
            tz = zones.calendar(owner or u) if zones is not None else UTC
            for h in await retriever.retrieve(u, query, limit=limit, tz=tz):
                found.setdefault((h.kind, h.id), ("", h))
            for h in await retriever.search_events(u, query, limit=limit, tz=tz):
                found.setdefault((h.kind, h.id), (u, h))
        mems = await engine.get_many([h.id for k, h in found.values() if h.kind == "memory"])
    hits = sorted(
        ((u or (mems[h.id].owner if h.id in mems else "?"), h) for u, h in found.values()),
        key=lambda uh: (-uh[1].score, uh[1].kind, -uh[1].id),
    )[:limit]
    if as_json:
        echo_json(
            [
                {"user": u, "kind": h.kind, "id": h.id, "score": round(h.score, 4), "citation": h.citation(),
                 "date": h.date, "category": h.category, "content": h.content}
                for u, h in hits
            ]
        )
        return
    if not hits:
        unknown = owner is not None and owner != GLOBAL_OWNER and owner not in owners
        why = f": nothing is stored about {owner} ({_near_hint(owner, owners)})" if owner and unknown else ""
        click.echo(f"no matches{why}", err=True)
        return
    who = owner_labels([u for u, _ in hits])
    click.echo(
        render_table(
            ["SCORE", "USER", "CITATION", "CONTENT"],
            [[f"{h.score:.3f}", who[u], h.citation(), h.content] for u, h in hits],
        )
    )


# -- add / edit / delete -----------------------------------------------------------


def _content(value: str, hint: str = "'CONTENT'") -> str:
    if not value.strip():
        raise click.BadParameter("content is empty", param_hint=hint)
    if len(value.strip()) > MAX_CONTENT_CHARS:  # the engine would cut it without a word
        raise click.BadParameter(
            f"{len(value.strip())} characters; a memory holds at most {MAX_CONTENT_CHARS}", param_hint=hint
        )
    return value


def _terms(value: str | None, category: str | None) -> tuple[str, ...] | None:
    """``--terms`` as stored (memory/cues.py), None when not given; a bad
    one is a usage error saying why, and nothing is stored."""
    if value is None:
        return None
    try:
        terms = parse_terms(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--terms'") from None
    if terms and category == Category.CREDENTIAL.value:
        raise click.BadParameter("a credential is found by its own words only; give it no terms",
                                 param_hint="'--terms'")
    return terms


def _redacted(value: str) -> tuple[str, tuple[str, ...]]:
    """``value`` without machine secrets, as the chat path keeps it
    (memory/redact.py; a password stays, a ``credential``), and what was
    taken out; a ``ClickException`` when nothing else is left. What was
    taken out is named on stderr, never its value."""
    text, what = redacted_and_what(value)
    if what and nothing_but_redactions(text):
        gone = " and ".join(what)
        raise click.ClickException(
            f"nothing left to store once {gone} {'is' if len(what) == 1 else 'are'} removed "
            "(memory keeps no machine secrets); nothing stored"
        )
    if what:
        click.echo(f"myclaw: removed before storing: {', '.join(what)}", err=True)
    return text, what


@memory.command()
@click.argument("content")
@click.option("--user", "-u", required=True, help="Owner; _global makes it visible to every user.")
@click.option("--category", type=click.Choice(CATEGORIES), help="Default: identity for tier 1, decision for tier 2.")
@click.option("--importance", type=click.FloatRange(0, 1), default=0.7, show_default=True)
@click.option("--tier", type=click.IntRange(1, 2), default=2, show_default=True)
@click.option("--project", default=GLOBAL_OWNER, show_default=True)
@click.option("--topic", default="_general", show_default=True)
@click.option("--terms", help="Words it is also found by, comma-separated, in Chinese and English "
              "(\"数据库, database\"); never shown as the fact.")
@json_option
@db_option
@shares_data
def add(
    content: str,
    user: str,
    category: str | None,
    importance: float,
    tier: int,
    project: str,
    topic: str,
    terms: str | None,
    as_json: bool,
) -> None:
    """Store CONTENT as a memory (an existing identical one is kept instead)."""
    search_terms = _terms(terms, category) or ()
    cfg = load_cli_config()
    owner = resolve_user(user, cfg)
    assert owner is not None
    text, redacted = _redacted(_content(content))
    new = NewMemory(
        owner=owner,
        content=text,
        tier=tier,
        # A fact an operator bothered to type should not fade in weeks.
        category=Category(category or ("identity" if tier == 1 else "decision")),
        importance=importance,
        project=project.strip() or GLOBAL_OWNER,
        topic=topic.strip() or "_general",
        source=Source.MANUAL,
        provenance=Provenance(channel="cli"),
        search_terms=search_terms,
    )
    run(_add(resolve_db(cfg), new, as_json, redacted))


async def _add(path: Path, new: NewMemory, as_json: bool, redacted: tuple[str, ...] = ()) -> None:
    async with open_engine(path, create=True) as engine:
        m = await engine.find_same(new.owner, new.content)
        added = m is None
        if m is None:
            try:
                # Logged as the memory page logs its changes, so `memory log`
                # and the page's history show who changed what, by hand too.
                async with engine.db.transaction() as conn:
                    m = await engine.add(new, conn=conn)
                    await write_log(conn, at=engine.now(), job=JOB, owner=m.owner, action="add", memory_id=m.id,
                                    detail=m.content)  # the words, as extraction logs them
            except ValueError as exc:
                raise click.ClickException(str(exc)) from None
    if as_json:
        echo_json({"added": added, "memory": memory_dict(m), "redacted": list(redacted)})
    elif added:
        click.echo(f"added memory {m.id} for {m.owner}")
    else:
        click.echo(f"already stored as memory {m.id} for {m.owner}; nothing added")


@memory.command()
@click.argument("memory_id", type=int, metavar="ID")
@user_option
@click.option("--content")
@click.option("--category", type=click.Choice(CATEGORIES))
@click.option("--importance", type=click.FloatRange(0, 1))
@click.option("--tier", type=click.IntRange(1, 2))
@click.option("--project")
@click.option("--topic")
@click.option("--terms", "search_terms", help="Its search terms, comma-separated, instead of those it has "
              "(\"\" clears them).")
@click.option("--status", type=click.Choice(["active", "archived"]), help="active restores an archived memory.")
@json_option
@db_option
@shares_data
def edit(memory_id: int, user: str | None, status: str | None, as_json: bool, **changes: Any) -> None:
    """Change fields of memory ID (with --user: only if it is that user's)."""
    changes = {k: v for k, v in changes.items() if v is not None}
    if not changes and status is None:
        raise click.UsageError(
            "nothing to change: give --content, --category, --importance, --tier, --project, --topic, --terms "
            "or --status"
        )
    if "search_terms" in changes:
        changes["search_terms"] = _terms(changes["search_terms"], changes.get("category"))
    if "content" in changes:
        changes["content"] = _redacted(_content(changes["content"], "'--content'"))[0]
    cfg = load_cli_config()
    run(_edit(resolve_db(cfg), memory_id, resolve_user(user, cfg), changes, status, as_json))


async def _edit(
    path: Path, memory_id: int, owner: str | None, changes: dict[str, Any], status: str | None, as_json: bool
) -> None:
    retired: list[Memory] = []
    async with open_engine(path) as engine:
        before = await _get(engine, memory_id, owner)
        if changes.get("search_terms") and Category(changes.get("category", before.category)) is Category.CREDENTIAL:
            raise click.BadParameter("a credential is found by its own words only; give it no terms",
                                     param_hint="'--terms'")
        try:
            # One transaction: a bad value leaves the memory as it was.
            async with engine.db.transaction() as conn:
                if changes:
                    await engine.update(memory_id, conn=conn, **changes)
                    await write_log(conn, at=engine.now(), job=JOB, owner=before.owner, action="edit",
                                    memory_id=memory_id, detail={"fields": sorted(changes)})
                    if changes.get("content", before.content) != before.content:
                        # Core Memory entries built on the old words go with them, as on the memory page.
                        retired = await retire_entries_on(engine, conn, before.owner, memory_id, memory_id, job=JOB,
                                                          at=engine.now())
                if status is not None and status != before.status.value:
                    await engine.set_status(memory_id, status, conn=conn)
                    await write_log(conn, at=engine.now(), job=JOB, owner=before.owner,
                                    action="restore" if status == Status.ACTIVE.value else "archive",
                                    memory_id=memory_id, detail={"was": before.status.value})
        except ValueError as exc:
            raise click.ClickException(str(exc)) from None
        m = await _get(engine, memory_id, owner)
        if m.content != before.content:
            await engine.purge_erased()  # an edit can be a redaction: the old words leave the file
    if as_json:
        echo_json(memory_dict(m))
    else:
        click.echo(f"updated memory {m.id} ({m.owner}, tier {m.tier}, {m.category.value}, {m.status.value}): {_short(m)}")
        if retired:
            click.echo(f"superseded {counted(len(retired), 'Core Memory entries')} built on it: "
                       + ", ".join(str(e.id) for e in retired) + " (the next weekly refresh writes the profile again)")


@memory.command()
@click.argument("memory_id", type=int, metavar="ID")
@user_option
@click.option("--purge", is_flag=True, help="Erase for good instead of archiving.")
@click.option(
    "--cascade",
    is_flag=True,
    help="With --purge: also erase its older versions (replaced by or merged into it) and the Core Memory "
    "entries built on it, as the bot's memory_forget does.",
)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@db_option
@shares_data
def delete(memory_id: int, user: str | None, purge: bool, cascade: bool, yes: bool) -> None:
    """Archive memory ID (recoverable with `edit ID --status active`), or
    erase it for good with --purge (with --cascade, together with its older
    versions and the Core Memory entries built on it)."""
    if cascade and not purge:
        raise click.UsageError("--cascade erases for good: give --purge too")
    cfg = load_cli_config()
    path, owner = resolve_db(cfg), resolve_user(user, cfg)
    m, plan = run(_fetch(path, memory_id, owner))
    if not purge and m.status is Status.ARCHIVED:
        click.echo(f"memory {m.id} is already archived (use --purge to erase it)")
        return
    verb = "Erase for good" if purge else "Archive"
    question = f"{verb} memory {m.id} of {m.owner}: {_short(m)!r}"
    if cascade and (plan.versions or plan.entries):
        question += f", with {_built_on(plan)}"
    if not yes and not confirm(question + "?"):
        raise click.ClickException("cancelled; nothing changed")
    if not purge:
        run(_archive(path, m.id))
        click.echo(f"archived memory {m.id} (restore with: myclaw memory edit {m.id} --status active)")
        return
    done, file_lines = run(_erase(path, m.id, cascade, Paths.from_env().workspace(cfg)))
    click.echo(f"erased memory {m.id}")
    for x in done.versions:
        click.echo(f"erased memory {x.id} (older version, {x.status.value}): {_short(x)}")
    for x in done.entries:
        click.echo(f"erased memory {x.id} (Core Memory entry built on it): {_short(x)}")
    if done.buffered_lines:
        click.echo(f"dropped {done.buffered_lines} message(s) waiting for extraction that said it")
    if done.history_lines:
        click.echo(f"erased {done.history_lines} conversation history message(s) that said it")
    if file_lines:
        click.echo(f"erased {file_lines} line(s) of their memory files (MEMORY.md, daily logs) that said it")
    # The plan read before the erase: with --cascade the kept links are
    # those of the erase itself (planned again in its transaction).
    for h in (done if cascade else plan).kept:
        what = "fact it was drawn from" if h.kind == "memory" else f"daily event of the same conversation, {h.date}"
        click.echo(f"kept {h.ref} ({what}, not erased): {_short_text(h.content)}")
    if not cascade and (plan.versions or plan.entries):
        ids = ", ".join(str(x.id) for x in (*plan.versions, *plan.entries))
        click.echo(f"note: {_built_on(plan)} remain ({ids}); erase them too with --purge --cascade", err=True)
    if m.source is Source.MIGRATION and m.provenance.refs:
        click.echo(
            f"note: it was imported from {', '.join(m.provenance.refs)}; the line is still in that file",
            err=True,
        )


def _built_on(plan: Erasure) -> str:
    """``3 older versions and 1 Core Memory entry built on it``"""
    parts = []
    if plan.versions:
        parts.append(f"{len(plan.versions)} older version{'s' if len(plan.versions) != 1 else ''}")
    if plan.entries:
        parts.append(f"{len(plan.entries)} Core Memory entr{'ies' if len(plan.entries) != 1 else 'y'} built on it")
    return " and ".join(parts)


@memory.command()
@user_option
@click.option("--group", "group", metavar="CHANNEL:CHAT_ID",
              help="Instead of a user: erase one group's own memory (its notes, days and waiting lines), "
                   "as the bot's removal from it does; its members' own memories stay. Beside a running "
                   "gateway it asks the gateway to erase it.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@db_option
@shares_data
def forget(user: str | None, group: str | None, yes: bool) -> None:
    """Erase everything stored about --user, for good: memories of every
    status, daily events, messages waiting for extraction, change-log
    entries, conversation history (Tier 0), replies to them still waiting
    in the outbox, their messages and edits a crash left waiting, files
    they sent lately, scheduled jobs, their time zone and incognito
    settings and the file store's folder (bytes zeroed); also what their
    memory.identities handles stored before they were mapped (merge-identities
    not run yet). Beside a running gateway it asks the gateway to erase
    them, as /forget all in chat does, so their messages it holds are not
    answered and its cached settings go too; with none running (or one
    that does not take the request within 30 s) it erases the files itself.
    An older gateway keeps their time zone and incognito settings until
    restarted: restart it then."""
    cfg = load_cli_config()
    if group is not None:
        if user:
            raise click.UsageError("give --user or --group, not both")
        _forget_group(resolve_db(cfg), group, yes)
        return
    owner = resolve_user(user, cfg)
    if not owner:
        raise click.UsageError("give --user (a person) or --group CHANNEL:CHAT_ID (a group's own memory)")
    if (chat := chat_of(owner)) is not None:
        # A group's own memory is nobody's: no person's history, jobs or settings go with it.
        raise click.UsageError(f"{owner} is a group's own memory, not a user: "
                               f"myclaw memory forget --group {chat[0]}:{chat[1]}")
    if owner == GLOBAL_OWNER:
        raise click.UsageError("_global is shared by everyone; delete its memories one by one")
    db = resolve_db(cfg)
    # The person's handles that stored rows before memory.identities mapped
    # them (merge-identities not run yet) hold their data too: erased along.
    unmerged = [h for h in IdentityMap(cfg.memory.identities).handles(owner) if h != owner]
    whose = [o for o in [owner, *unmerged] if run(_stored(cfg, db, o))]
    if not whose:
        # Most likely a misspelt handle: said before any question, which
        # would read as if there were something to erase.
        raise click.ClickException(f"nothing is stored about {owner}, so nothing was erased "
                                   f"({_near_hint(owner, run(_owners(db)))})")
    also = [o for o in whose if o != owner]
    question = f"Erase everything myclaw stores about {owner}" + (
        f" and {', '.join(also)} (its rows from before memory.identities mapped it)" if also else "")
    if not yes and not confirm(f"{question}? This cannot be undone."):
        raise click.ClickException("cancelled; nothing changed")
    from gateway.datalock import ChatLock, ChatRunning

    paths = Paths.from_env()
    chats = ChatLock(paths.data_dir)  # held to the end: no chat starts mid-erasure
    try:
        chats.exclusive()
    except ChatRunning as exc:
        raise click.ClickException(f"{exc}; nothing was erased") from None
    try:
        _forget_all(cfg, db, owner, whose, paths)
    finally:
        chats.release()


def _forget_all(cfg: Config, db: Path, owner: str, whose: list[str], paths: Paths) -> None:
    """``forget``'s erasure, asked and confirmed, with no chat running."""
    erased = False
    asked = _ask_gateway(paths, owner)
    if asked is not None:
        pid, counts = asked
        if counts is not None:  # the gateway's own /forget all: their handles' rows too
            erased = any(counts.values())
            click.echo(f"{_running(pid)} forgot {owner}" + (
                ": " + ", ".join(_counted(k, v) for k, v in counts.items()) if erased else ": nothing was left")
                + "; what it held of them (queued messages, settings) went too")
            # What it does not reach (memory.db when its memory is off, say) is erased here.
            whose = [o for o in whose if run(_stored(cfg, db, o))]
        else:
            click.echo(f"{_running(pid)} did not do the erasure (not taken within {TAKE_WAIT:g} s, failed or stopped: "
                       "its log says which); erasing the files here", err=True)
    for who in whose:
        counts = run(_forget(cfg, db, who))
        if not any(counts.values()):  # went meanwhile (a running gateway's /forget all): not to read as done here
            continue
        erased = True
        click.echo(f"forgot {who}: " + ", ".join(_counted(k, v) for k, v in counts.items()))
        if not (asked and asked[1] is not None) and (held := _held_by_gateway(paths, who, counts)):
            click.echo(held)
    if not erased:
        click.echo(f"nothing was stored about {owner} any more, so nothing was erased")
        return
    if copies := _earlier_copies(Paths.from_env()):
        are, them, they = ("copy is", "it", "it") if len(copies) == 1 else ("copies are", "them", "they")
        click.echo(f"{len(copies)} earlier {are} not changed by this and may hold {owner}'s data; delete {them} "
                   f"too if {they} must not: " + ", ".join(str(p) for p in copies))


# What forget's counts are called in its summary: (one, many).
_COUNTED = {
    "memories": ("memory", "memories"),
    "events": ("daily event", "daily events"),
    "log": ("change-log entry", "change-log entries"),
    "buffered": ("line waiting to be learnt", "lines waiting to be learnt"),
    "undelivered replies": ("undelivered reply", "undelivered replies"),
    "messages waiting to be answered": ("message waiting to be answered", "messages waiting to be answered"),
    "edits waiting to be applied": ("edit waiting to be applied", "edits waiting to be applied"),
    # memory/groupnotes.py: a group's notes and days drawn from theirs, their lines waiting under a group
    "group notes": ("group note or day drawn from theirs", "group notes and days drawn from theirs"),
    "group lines": ("line of theirs waiting under a group", "lines of theirs waiting under a group"),
}


def _counted(key: str, n: int) -> str:
    """``1 memory``, ``2 scheduled jobs``: a count in the summary's words."""
    one, many = _COUNTED.get(key, (key.removesuffix("s"), key))
    return f"{n} {one if n == 1 else many}"


# How long `forget` waits for a running gateway to take its request (it
# polls twice a second), and at most for it to finish once taken.
TAKE_WAIT = 30.0
DONE_WAIT = 600.0
_POLL = 0.2


# The gateway's erasure counts (gateway/userdata.py Census) in forget's words.
_GATEWAY_COUNTS = {
    "memories": "memories", "events": "events", "messages": "history messages", "jobs": "scheduled jobs",
    "files": "recent files", "waiting": "messages waiting to be answered", "incognito": "incognito setting",
    "timezone": "time zone setting", "group_notes": "group notes",
}


def _running(pid: int) -> str:
    return f"the gateway running on this home (pid {pid})" if pid else "the gateway running on this home"


def _ask_gateway(paths: Paths, owner: str) -> tuple[int, dict[str, int] | None] | None:
    """Have the gateway running on this home erase ``owner`` itself, as
    ``/forget all`` does (gateway/erasure_requests.py): only it reaches their
    messages it holds and the settings it cached. None when no gateway that
    takes such requests runs; (its pid, None) when it did not take the
    request in time or its erasure failed (the request withdrawn: the caller
    erases the files); else (its pid, what went, in forget's words)."""
    from gateway.datalock import running_pid, running_serves

    if not running_serves(paths.data_dir, "erasures") or not paths.gateway_db().exists():
        return None
    pid = running_pid(paths.data_dir) or 0
    return pid, run(_asked(paths, owner))


async def _asked(paths: Paths, owner: str) -> dict[str, int] | None:
    import asyncio
    import time

    from gateway.datalock import running_pid
    from gateway.erasure_requests import ErasureRequests
    from gateway.sessions import SessionStore

    async with await SessionStore.open(paths.gateway_db()) as sessions:
        requests = ErasureRequests(sessions.db, SystemClock())
        rid = await requests.ask(owner)
        start = time.monotonic()
        try:
            while True:
                req = await requests.get(rid)
                if req is None:  # dropped by a gateway starting (ErasureRequests.clear): not done
                    return None
                if req.error:  # its erasure failed: the caller erases the files
                    return None
                if req.counts is not None:
                    return {_GATEWAY_COUNTS.get(k, k): v for k, v in req.counts.items() if v}
                waited = time.monotonic() - start
                gone = running_pid(paths.data_dir) is None  # stopped meanwhile: nobody will take it
                if not req.taken and (waited > TAKE_WAIT or gone) and await requests.withdraw(rid):
                    return None
                if req.taken and (waited > DONE_WAIT or gone):
                    return None  # stuck or gone mid-way: the caller erases the files
                await asyncio.sleep(_POLL)
        finally:
            await requests.drop(rid)  # read, or given up: nobody is to act on it later


def _held_by_gateway(paths: Paths, owner: str, counts: dict[str, int]) -> str:
    """What a gateway running beside the erasure still holds of ``owner``:
    it reads each user's time zone and incognito setting once and keeps
    them (gateway/timezones.py, gateway/incognito.py), so it would go on
    using what was erased until it restarts. '' when none runs or neither
    was erased."""
    from gateway.datalock import running_pid

    settings = [name for name, key in (("time zone", "time zone setting"), ("incognito", "incognito setting"))
                if counts.get(key)]
    pid = running_pid(paths.data_dir) if settings else None
    if pid is None:
        return ""
    running = f"the gateway running on this home (pid {pid})" if pid else "the gateway running on this home"
    setting = f"{' and '.join(settings)} setting{'s' if len(settings) > 1 else ''}"
    return (f"{running} still uses {owner}'s {setting} until it restarts: restart it "
            "(in chat, /forget all erases them from the running gateway too)")


def _earlier_copies(paths: Paths) -> list[Path]:
    """Folders of copies an erasure does not reach: ``myclaw backup``'s
    default ones and those a restore moved aside (never pruned by myclaw).
    A backup written elsewhere (``myclaw backup DEST``) is not known here."""
    found = [*paths.data_dir.glob("before-restore-*"), *(paths.home / "backups").glob("*")]
    return sorted(p for p in found if p.is_dir())


def _near_hint(owner: str, owners: list[str]) -> str:
    """Where to look instead, for a handle nothing is stored about (a typo, most likely)."""
    near = near_handles(owner, owners)
    return (f"did you mean {' or '.join(near)}? " if near else "") + "`myclaw memory stats` lists every user"


async def _owners(path: Path) -> list[str]:
    if not path.exists():
        return []
    async with open_engine(path) as engine:
        return await engine.owners()


async def _stored(cfg: Config, path: Path, owner: str) -> bool:
    """Whether :func:`_forget` would find anything of ``owner``: their
    folders, a row with their name in any table of memory.db (with the
    buffer's file) or gateway.db, their import ledger, a cron job of theirs,
    or a message or edit of theirs waiting in the inbox (found by sender, as
    :func:`_forget` erases them). Read by table, not by a list of stores, so
    a store added later is not missed."""
    from gateway.cron import CronStore
    from gateway.inbox import Inbox
    from gateway.sessions import SessionStore
    from gateway.export import exports_folder
    from memory.filestore import FileMemory
    from memory.migrate import has_ledger

    paths = Paths.from_env()
    if FileMemory(paths.workspace(cfg), SystemClock()).user_dir(owner).exists():
        return True
    if exports_folder(paths.exports_dir, owner).exists():
        return True
    if path.exists():
        async with open_engine(path) as engine:
            if await _owner_rows(engine.db, owner):
                return True
            async with engine.db.transaction() as conn:
                if await has_ledger(conn, owner):
                    return True
    if paths.gateway_db().exists():
        async with await SessionStore.open(paths.gateway_db()) as sessions:
            if await _owner_rows(sessions.db, owner):
                return True
            if await Inbox(sessions.db, SystemClock()).owns(owner, IdentityMap(cfg.memory.identities).resolve):
                return True
    if paths.cron_db().exists():
        store = await CronStore.open(paths.cron_db(), SystemClock(), cfg.gateway.timezone)
        try:
            return bool(await store.list(owner))
        finally:
            await store.close()
    return False


async def _owner_rows(db: Database, owner: str) -> bool:
    """Whether any table of ``db`` (attached files too; full-text indexes
    aside, which copy their tables' rows) has a row whose owner is ``owner``."""
    for schema in [str(r[1]) for r in await db.fetchall("PRAGMA database_list")]:
        tables = await db.fetchall(
            f'SELECT name FROM "{schema}".sqlite_master WHERE type = \'table\' AND name NOT LIKE \'sqlite_%\' '
            "AND sql NOT LIKE 'CREATE VIRTUAL%'")
        for (table,) in tables:
            columns = {str(c[1]) for c in await db.fetchall(f'PRAGMA "{schema}".table_info("{table}")')}
            if "owner" in columns and await db.fetchone(
                    f'SELECT 1 FROM "{schema}"."{table}" WHERE owner = ? LIMIT 1', (owner,)):
                return True
    return False


def _forget_group(db: Path, place: str, yes: bool) -> None:
    """``forget --group``: memory/groupnotes.py ``forget_group`` on memory.db
    (what the bot's removal from the group runs in the gateway)."""
    channel, sep, chat_id = place.strip().removeprefix(GROUP_PREFIX).partition(":")
    if not (sep and channel and chat_id):
        raise click.UsageError(f"--group is CHANNEL:CHAT_ID (telegram:-1001234, feishu:oc_...), not {place!r}")
    place = f"{channel}:{chat_id}"
    name = _group_names([place]).get(place, place)
    if group_owner(channel, chat_id) not in run(_owners(db)):
        raise click.ClickException(f"nothing is stored for the group {name}, so nothing was erased")
    if not yes and not confirm(f"Erase the memory of the group {name} for good (its notes, days and lines "
                               "waiting to be learnt)? Its members' own memories stay. This cannot be undone."):
        raise click.ClickException("cancelled; nothing changed")

    # Beside a running gateway its lines of the group queued in memory would
    # land after an erasure made here: it is asked to erase (its own queue
    # drained first), as --user asks it; one that does not take that is refused.
    from gateway.datalock import running_pid, running_serves

    paths = Paths.from_env()
    if (pid := running_pid(paths.data_dir)) is not None:
        if not running_serves(paths.data_dir, "group-erasures") or not paths.gateway_db().exists():
            raise click.ClickException(
                f"{_running(pid)} does not take a group's erasure (an older gateway, or one still starting), and "
                "the group's lines it holds would be written back after one made here; erase it from the memory "
                "page's Groups list, or stop the gateway and run this again; nothing was erased")
        done = run(_asked(paths, group_owner(channel, chat_id)))
        if done is not None:
            click.echo(f"{_running(pid)} erased the memory of the group {name}: "
                       + (_counted("rows", done["rows"]) if done.get("rows") else "nothing was left"))
            return
        if running_pid(paths.data_dir) is not None:
            raise click.ClickException(f"{_running(pid)} did not do the erasure (not taken within {TAKE_WAIT:g} s "
                                       "or failed: its log says which); nothing was erased")

    async def erase() -> dict[str, int]:
        async with open_engine(db) as engine:
            return await forget_group(engine, channel, chat_id)

    counts = run(erase())
    click.echo(f"erased the memory of the group {name}: "
               + ", ".join(_counted(k, n) for k, n in counts.items() if n and k != "log"))


def owner_labels(owners: list[str]) -> dict[str, str]:
    """Each owner as a table's USER column shows it: a user by their id, a
    group's own memory (memory/groupnotes.py) as ``group Family
    (telegram:-100123)``, never as if it were a user."""
    places = {o: f"{c[0]}:{c[1]}" for o in owners if (c := chat_of(o)) is not None}
    names = _group_names(sorted(set(places.values()))) if places else {}
    return {o: f"group {names[places[o]]}" if o in places else o for o in owners}


def _group_names(places: list[str]) -> dict[str, str]:
    """``channel:chat_id`` -> ``Title (channel:chat_id)`` where gateway.db
    knows its title (read only), else the id alone."""
    from gateway.chattitles import read_titles

    try:
        titles = read_titles(Paths.from_env().gateway_db())
    except sqlite3.DatabaseError:
        titles = {}
    return {p: f"{titles[p]} ({p})" if titles.get(p) else p for p in places}


async def _forget(cfg: Config, path: Path, owner: str) -> dict[str, int]:
    from gateway.cron import CronStore
    from gateway.export import erase_exports
    from gateway.inbox import Inbox
    from gateway.incognito import Incognito
    from gateway.outbox import Outbox
    from gateway.recent_files import RecentFiles
    from gateway.sessions import SessionStore
    from gateway.timezones import UserTimezones
    from memory.filestore import FileMemory

    counts: dict[str, int] = {}
    paths = Paths.from_env()
    # The folder first: the import ledger forget_owner drops is what keeps
    # its files from being read back in.
    folder = await FileMemory(paths.workspace(cfg), SystemClock()).forget_all(owner)  # bytes zeroed, then the folder
    if folder.files:
        counts["memory files"] = folder.files
    if exported := erase_exports(paths.exports_dir, owner):  # `myclaw chat`'s /export files: a copy of it all
        counts["exports"] = exported
    if path.exists():
        async with open_engine(path) as engine:
            counts.update(await engine.forget_owner(owner))
    if paths.gateway_db().exists():
        async with await SessionStore.open(paths.gateway_db()) as sessions:
            counts["history messages"] = await sessions.forget_owner(owner)
            # Replies to their messages still waiting to be delivered (rows
            # whose owner was known: see gateway/delivery.py).
            if replies := await Outbox(sessions.db).forget_owner(owner):
                counts["undelivered replies"] = replies
            if await UserTimezones(sessions.db).forget_owner(owner):
                counts["time zone setting"] = 1
            if await Incognito(sessions.db).forget_owner(owner):
                counts["incognito setting"] = 1
            if files := await RecentFiles(sessions.db, SystemClock()).forget_owner(owner):
                counts["recent files"] = files
            # What a crash or a stop left for the next start to answer or apply:
            # their messages (the history's rows of those begun too) and edits.
            waiting, edits = await Inbox(sessions.db, SystemClock()).forget_owner(
                owner, IdentityMap(cfg.memory.identities).resolve)
            if waiting:
                counts["messages waiting to be answered"] = waiting
            if edits:
                counts["edits waiting to be applied"] = edits
            if counts["history messages"] or replies or files or waiting or edits:
                await sessions.db.compact()  # a running gateway keeps the WAL, and their words in it
    cron_db = paths.cron_db()
    if cron_db.exists():
        store = await CronStore.open(cron_db, SystemClock(), cfg.gateway.timezone)
        try:
            jobs = await store.list(owner)
            for job in jobs:
                await store.remove(job.id, user=owner)
            counts["scheduled jobs"] = len(jobs)
        finally:
            await store.close()
        if jobs and paths.gateway_db().exists():  # their replies' slot marks name the jobs (gateway/outbox.py)
            async with await SessionStore.open(paths.gateway_db()) as sessions:
                await Outbox(sessions.db).forget_jobs(j.id for j in jobs)
    return counts


async def _fetch(path: Path, memory_id: int, owner: str | None) -> tuple[Memory, Erasure]:
    """The memory and what erasing it with --cascade would take and keep."""
    async with open_engine(path) as engine:
        m = await _get(engine, memory_id, owner)
        async with engine.db.transaction() as conn:  # one consistent read of the lineage
            return m, await plan_erasure(conn, m.owner, [m])


async def _archive(path: Path, memory_id: int) -> None:
    async with open_engine(path) as engine:
        m = await _get(engine, memory_id, None)
        async with engine.db.transaction() as conn:
            await engine.set_status(memory_id, Status.ARCHIVED, conn=conn)
            await write_log(conn, at=engine.now(), job=JOB, owner=m.owner, action="archive", memory_id=memory_id,
                            detail={"was": m.status.value})


async def _erase(path: Path, memory_id: int, cascade: bool, workspace: Path) -> tuple[Erasure, int]:
    """Erase the memory (planned again inside the transaction, so what goes
    is what is stored now), log every erased row, then purge the file. A
    cascade also erases the conversation history messages that said it
    (gateway.db; a running gateway notices within a second) and, for a fact
    imported from the user's MEMORY.md, its line there (with the logged
    messages repeating it): the erasure and how many file lines."""
    from gateway.sessions import SessionStore
    from memory.filestore import FileMemory

    async with open_engine(path) as engine:
        m = await _get(engine, memory_id, None)
        async with engine.db.transaction() as conn:
            plan = await plan_erasure(conn, m.owner, [m]) if cascade else Erasure(m.owner, [m])
            await erase_planned(engine, conn, plan, job=JOB, action="erase", buffered=cascade)
        await engine.purge_erased()
    history = Paths.from_env().gateway_db()
    if cascade and history.exists():
        async with await SessionStore.open(history) as sessions:
            plan.history_lines = await sessions.erase_matching(plan.owner, plan.texts())
            if plan.history_lines:
                await sessions.db.compact()  # a running gateway keeps the WAL, and the words in it
    lines = 0
    if cascade:
        lines = await FileMemory(workspace, SystemClock()).forget_words(
            plan.owner, [x.content for x in (*plan.named, *plan.versions, *plan.entries)])
    return plan, lines


# -- rows stored under a handle before memory.identities mapped it ------------------


def _unmerged(cfg: Config, owner: str, owners: list[str]) -> list[str]:
    """``owner``'s memory.identities handles that still hold rows of
    memory.db, stored before the mapping (merge-identities not run yet)."""
    return [h for h in IdentityMap(cfg.memory.identities).handles(owner) if h != owner and h in owners]


def unmerged_notes(cfg: Config, path: Path, owner: str | None) -> None:
    """On stderr, after what ``--user owner`` showed: ``owner``'s handles
    whose rows from before memory.identities mapped them are not among it
    (``stats`` lists them under the handle; a ``--user`` of the handle
    resolves to ``owner``, so only merge-identities reaches them)."""
    if owner is None or not [h for h in IdentityMap(cfg.memory.identities).handles(owner) if h != owner]:
        return  # no handle mapped to them: memory.db is not opened again
    for h in _unmerged(cfg, owner, run(_owners_of(path))):
        click.echo(f"note: {h} holds rows stored before memory.identities mapped it to {owner}, not shown here: "
                   f"`myclaw memory merge-identities` moves them to {owner}", err=True)


async def _owners_of(path: Path) -> list[str]:
    async with open_engine(path) as engine:  # no database: says so, as every read does
        return await engine.owners()
