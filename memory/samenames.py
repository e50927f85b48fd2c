"""Which names two members of one group have gone by (memory/groupnotes.py):
a name so shared is tagged (``Dad #3f9a``, memory/groupowner.py
``member_tag``) in every batch of the group, not only one holding both
members' lines, so one member is never "Dad" in one note and "Dad #3f9a"
in another. Read from what the group's memory holds, no table of its own:
its buffered lines (who spoke, by what name), and its notes' and days'
provenance (a note or day of one member's lines names that member and
their label; a tagged label says its name was shared when written).

:class:`SameNames` keeps what the notes and days said per group, so a
flush reads only the rows written since the last (ids only grow:
AUTOINCREMENT), not every note again. Anything else that changes who a
row names — a row erased (``/forget all``'s ``forget_speaker``, a group
wipe, the page's erase, ``memory_forget``), moved to another owner
(merge-identities, a supergroup's new id), a note's speakers widened or
renamed — bumps the ``SPEAKERS`` stamp (memory/engine.py), as does another
process's commit (``PRAGMA data_version``, read every time): then every
group's entry is dropped, and the next read is a full one, so no name of
an erased member stays in the process. A note superseded keeps its row
and provenance, and counts as before (the full read never looked at a
row's status).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from .db import Database
from .engine import SPEAKERS
from .lru import LRU

__all__ = ["SameNames", "names_gone_by", "shared_names"]

_TAGGED = re.compile(r"^(.*) #[0-9a-f]{4}$")
_TABLES = ("memories", "daily_events")
MAX_GROUPS = 512  # groups whose names a process keeps (least recently flushed dropped first)


@dataclass
class _Known:
    """What a group's notes and days said, up to ``upto`` (each table's last id read)."""

    who: dict[str, set[str]] = field(default_factory=dict)  # casefolded name -> members seen with it
    tagged: set[str] = field(default_factory=set)  # casefolded names written tagged
    upto: dict[str, int] = field(default_factory=dict)
    rows: int = 0  # rows of the group read so far: how the next read picks its plan

    def seen(self, name: str, member: str) -> None:
        _saw(self.who, name, member)


def _saw(who: dict[str, set[str]], name: str, member: str) -> None:
    if name and member:
        who.setdefault(name.casefold(), set()).add(member)


async def _read_rows(db: Database, owner: str, known: _Known, upto: dict[str, int], *, since: bool) -> None:
    """Add to ``known`` the group's notes and days with ids in
    (``known.upto``, ``upto``] (all up to ``upto`` unless ``since``)."""
    for table in _TABLES:
        low, high = (known.upto.get(table, 0) if since else 0), upto[table]
        if since and low >= high:
            continue
        # Few rows written since (any owner's): walk them by id. Many, as
        # after a long quiet: the group's own rows by the owner index.
        # (A unary + keeps a column's index out of the plan.)
        if since and high - low <= 4 * known.rows + 64:
            where = f"+{table}.owner = ? AND {table}.id > ? AND {table}.id <= ?"
        else:
            where = f"{table}.owner = ? AND +{table}.id > ? AND +{table}.id <= ?"
        rows = await db.fetchall(
            f"SELECT DISTINCT json_extract(provenance, '$.said_by[0]'), json_extract(provenance, '$.speakers[0]') "
            f"FROM {table} WHERE {where} AND json_array_length(provenance, '$.speakers') = 1 "
            "AND json_array_length(provenance, '$.said_by') = 1", (owner, low, high))
        for name, member in rows:
            if isinstance(name, str) and _TAGGED.match(name) is None:
                known.seen(name, str(member or ""))  # one member's lines: that member went by that name
        rows = await db.fetchall(
            f"SELECT DISTINCT s.value FROM {table}, json_each({table}.provenance, '$.said_by') s "
            f"WHERE {where} AND s.value GLOB '* #[0-9a-f][0-9a-f][0-9a-f][0-9a-f]'", (owner, low, high))
        for (name,) in rows:
            if isinstance(name, str) and (m := _TAGGED.match(name)) is not None:
                known.tagged.add(m.group(1).casefold())  # tagged when written: two members had it then
        count = await db.fetchone(f"SELECT COUNT(*) FROM {table} WHERE {where}", (owner, low, high))
        known.rows += int(count[0]) if count is not None else 0
    known.upto = dict(upto)


async def _buffered(db: Database, owner: str, label: Callable[[str], str], who: dict[str, set[str]]) -> None:
    # The lines waiting are few (they go when learnt): read every time.
    rows = await db.fetchall(
        "SELECT speaker_name, COALESCE(NULLIF(speaker, ''), sender_id) FROM extraction_buffer "
        "WHERE owner = ? AND role = 'user'", (owner,))
    for name, member in rows:
        _saw(who, label(str(name or "")), str(member or ""))


def _shared(known: _Known, who: dict[str, set[str]]) -> set[str]:
    return set(known.tagged) | {name for name, members in who.items() if len(members) > 1}


async def _last_ids(db: Database) -> dict[str, int]:
    row = await db.fetchone("SELECT (SELECT MAX(id) FROM memories), (SELECT MAX(id) FROM daily_events)")
    assert row is not None
    return {table: int(row[i] or 0) for i, table in enumerate(_TABLES)}


async def shared_names(db: Database, owner: str, label: Callable[[str], str]) -> set[str]:
    """The names (casefolded, as ``label`` shows them) that two members of
    the group ``owner`` have been seen with: its buffered lines, its notes'
    and days' provenance, read by the owner's index. Every row, every time:
    :class:`SameNames` keeps what it read."""
    return (await names_gone_by(db, owner, label))[0]


async def names_gone_by(db: Database, owner: str,
                        label: Callable[[str], str]) -> tuple[set[str], dict[str, set[str]]]:
    """:func:`shared_names`, and the members each name (casefolded) was seen
    with, in a line or a note of one member's lines, from the same read."""
    known = _Known()
    await _read_rows(db, owner, known, await _last_ids(db), since=False)
    who = {name: set(members) for name, members in known.who.items()}
    await _buffered(db, owner, label, who)
    return _shared(known, who), who


class SameNames:
    """:func:`shared_names`, reading a group's notes and days written since
    its last read only (see the module docstring for what drops it)."""

    def __init__(self, max_groups: int = MAX_GROUPS) -> None:
        self._stamp: tuple[int, int] | None = None
        self._groups: LRU[str, _Known] = LRU(max_groups)  # the least recently flushed go first

    async def read(self, db: Database, owner: str, label: Callable[[str], str]) -> set[str]:
        # The stamp before the rows: an erasure committing meanwhile moves it
        # again when it ends (Database.bump), and the next read starts over.
        stamp = await db.stamp(SPEAKERS, max_age=0)  # another process's commit: seen now, not in a second
        if stamp != self._stamp:
            self._groups.clear()  # what the erased rows said goes from every group's entry, not only this one's
            self._stamp = stamp
        upto = await _last_ids(db)
        known = self._groups.pop(owner, None)
        if known is None:
            known = _Known()
            await _read_rows(db, owner, known, upto, since=False)
        else:
            await _read_rows(db, owner, known, upto, since=True)
        if self._stamp == stamp:  # not when another group's read saw an erasure meanwhile: this entry may hold it
            self._groups[owner] = known
        who = {name: set(members) for name, members in known.who.items()}
        await _buffered(db, owner, label, who)
        return _shared(known, who)

    def forget(self) -> None:
        """Drop every group's entry."""
        self._groups.clear()
        self._stamp = None
