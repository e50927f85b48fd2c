"""``myclaw memory export`` as JSON, written as the rows are read.

The document is the one ``json.dumps(doc, ensure_ascii=False, indent=2)``
makes of ``{"exported_at", "user", "memories", "events", "project_aliases",
"unanswered", "extraction_buffer", "users"}`` (one user's, whose memory.identities handles stored rows
before they were mapped: ``"unmerged_handles"`` after ``"user"``, and
those rows; a memory shared with a group gateway.db knows the title
of: its ``group_titles`` too; ``unanswered``: owner -> how many of their
messages wait in gateway.db's inbox to be answered, those with any,
counted as the markdown export counts them, their words not included;
``extraction_buffer``: owner -> ``{"waiting", "set_aside"}``, their lines
waiting to be learnt and set aside by the memory model, those with any,
counted, never the lines; ``users``: what the gateway keeps of each owner beside memory, as their
``/export`` says it: settings, kept history, recent files, scheduled jobs)
(memories by id, events by owner, date, id, a renamed project's old names
by owner and name), byte for byte, but only a page of rows is
ever in memory: an operator's export of a large store no longer holds the
whole store, and its JSON text, at once."""

from __future__ import annotations

import json
from dataclasses import asdict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memory import MemoryEngine
from memory.buffer import NOT_GONE
from memory.engine import row_to_event, row_to_memory
from memory.types import Memory

from ._common import event_dict, memory_dict

if TYPE_CHECKING:
    from gateway.export import UserExport

PAGE = 500


async def write_json(
    write: Callable[[str], Any], engine: MemoryEngine, owner: str | None, *, at: str, page: int = PAGE,
    titles: Mapping[str, str] | None = None, unanswered: Callable[[str], Awaitable[int]] | None = None,
    handles: Sequence[str] = (),
    kept: Callable[[str], Awaitable[UserExport]] | None = None,
    also: Sequence[str] = (),
) -> tuple[int, int]:
    """Write the export of ``owner`` (every owner when None) through
    ``write``, with a trailing newline; returns (memories, events).
    ``titles``: groups' titles (``channel:chat_id`` -> title, from
    gateway.db): a memory whose provenance names a group with one gets
    ``group_titles``, its ids to their titles, beside the ids it keeps.
    ``unanswered``: how many of an owner's messages wait in the inbox
    (``Inbox.owned``); None: none are known (no gateway.db). ``handles``:
    ``owner``'s memory.identities handles that stored rows before they were
    mapped (merge-identities not run yet): their rows are ``owner``'s too,
    each with the handle it is stored under as its ``owner``, and the
    document names them (``unmerged_handles``, only when there are some).
    ``kept``: what the gateway keeps of an owner beside memory, as their
    ``/export`` gathers it (gateway/userdata.py): ``users``, one entry per
    owner with any (time zone, incognito, kept history, recent files,
    scheduled jobs); not asked of ``handles`` (``owner``'s includes theirs).
    ``also``: the whole store's (``owner`` None) owners with no memory row
    whom ``kept`` knows (``UserData.owners``)."""
    owners = [owner, *handles] if owner is not None else sorted({*await engine.owners(), *also})
    named = f',\n  "unmerged_handles": {_dump(list(handles))}' if handles else ""
    write("{\n" + f'  "exported_at": {_dump(at)},\n  "user": {_dump(owner)}{named},\n  "memories": ')
    chosen = owners if owner is not None else None
    memories = await _array(write, (_memory(m, titles or {}) async for m in _memories(engine, chosen, page)))
    write(',\n  "events": ')
    events = await _array(write, (event_dict(e) async for o in _each(owners) async for e in _events(engine, o, page)))
    write(',\n  "project_aliases": ')
    await _array(write, _aliases(engine, chosen))
    waiting = {o: n for o in owners if (n := await unanswered(o) if unanswered is not None else 0)}
    write(',\n  "unanswered": ' + _dump(waiting).replace("\n", "\n  "))
    write(',\n  "extraction_buffer": ' + _dump(await _buffered(engine, owners)).replace("\n", "\n  "))
    users = [u for o in owners if o not in handles and kept is not None and (u := _user(o, await kept(o)))]
    write(',\n  "users": ' + _dump(users).replace("\n", "\n  ") + "\n}\n")
    return memories, events


async def _buffered(engine: MemoryEngine, owners: Sequence[str]) -> dict[str, dict[str, int]]:
    """Owner -> how many of their lines wait to be learnt and how many the
    memory model set aside (as the Markdown export counts them), those
    with any; never the lines."""
    rows = await engine.db.fetchall(
        f"SELECT owner, COALESCE(SUM(set_aside_at IS NULL), 0), COALESCE(SUM(set_aside_at IS NOT NULL), 0) "
        f"FROM extraction_buffer WHERE {NOT_GONE} GROUP BY owner ORDER BY owner")
    wanted = set(owners)
    return {str(r[0]): {"waiting": int(r[1]), "set_aside": int(r[2])} for r in rows if r[0] in wanted}


def _user(owner: str, k: UserExport) -> dict[str, Any] | None:
    """An owner's settings and what the gateway keeps of theirs beside
    memory; None when nothing is (their export has no entry)."""
    if not (k.timezone or k.zones or k.incognito_since or k.history or k.files or k.jobs or k.edits):
        return None
    return {
        "user": owner,
        "timezone": k.timezone or None,
        "zones_left": [{"zone": z, "since": s or None, "until": u} for z, s, u in k.zones],
        "incognito_since": k.incognito_since.isoformat() if k.incognito_since is not None else None,
        "history_messages": k.history,
        "recent_files": [{"name": name, "received": at.isoformat()} for name, at in k.files],
        "jobs": [asdict(j) for j in k.jobs],
        "edits_waiting": k.edits,
    }


def _memory(m: Memory, titles: Mapping[str, str]) -> dict[str, Any]:
    d = memory_dict(m)
    places = dict.fromkeys([*m.provenance.shared, *(place for place, _ in m.provenance.replaced_in)])
    if named := {p: titles[p] for p in places if p in titles}:
        d["group_titles"] = named
    return d


def _dump(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, indent=2)


async def _array(write: Callable[[str], Any], items: AsyncIterator[dict[str, Any]]) -> int:
    """A list as ``json.dumps`` indents it at depth 1: ``[]`` when empty."""
    n = 0
    async for item in items:
        write(("[\n" if n == 0 else ",\n") + "\n".join("    " + ln for ln in _dump(item).split("\n")))
        n += 1
    write("\n  ]" if n else "[]")
    return n


async def _each(owners: list[str]) -> AsyncIterator[str]:
    for o in owners:
        yield o


async def _memories(engine: MemoryEngine, owners: list[str] | None, page: int) -> AsyncIterator[Any]:
    """Every status, by id, a page a query (keyset: no OFFSET rescans);
    ``owners``' rows, everyone's when None."""
    last = 0
    where = "id > ?" if owners is None else f"owner IN ({','.join('?' * len(owners))}) AND id > ?"
    while True:
        args: list[Any] = [last] if owners is None else [*owners, last]
        rows = await engine.db.fetchall(f"SELECT * FROM memories WHERE {where} ORDER BY id LIMIT {int(page)}", args)
        for r in rows:
            yield row_to_memory(r)
        if len(rows) < page:
            return
        last = rows[-1]["id"]


async def _events(engine: MemoryEngine, owner: str, page: int) -> AsyncIterator[Any]:
    """``owner``'s daily events by date, then id, a page a query."""
    key: tuple[str, int] | None = None
    while True:
        if key is None:
            rows = await engine.db.fetchall(
                f"SELECT * FROM daily_events WHERE owner = ? ORDER BY event_date, id LIMIT {int(page)}", [owner])
        else:
            rows = await engine.db.fetchall(
                "SELECT * FROM daily_events WHERE owner = ? AND (event_date, id) > (?, ?) "
                f"ORDER BY event_date, id LIMIT {int(page)}", [owner, *key])
        for r in rows:
            yield row_to_event(r)
        if len(rows) < page:
            return
        key = (rows[-1]["event_date"], rows[-1]["id"])


async def _aliases(engine: MemoryEngine, owners: list[str] | None) -> AsyncIterator[dict[str, Any]]:
    """The renamed projects' old names (memory/projects.py): a handful a user."""
    where, args = ("", []) if owners is None else (f"WHERE owner IN ({','.join('?' * len(owners))}) ", owners)
    rows = await engine.db.fetchall(
        f"SELECT owner, alias, project, source, created_at FROM project_aliases {where}ORDER BY owner, alias", args)
    for r in rows:
        yield {k: r[k] for k in ("owner", "alias", "project", "source", "created_at")}
