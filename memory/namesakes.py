"""The names two members of a group have gone by, kept per group for the
chat prompt (gateway/prompt.py ``speaker_labels``): a member is tagged
(``Dad #3f9a``) in every reply's prompt once the group has had two of that
name, as its notes tag them (memory/samenames.py), not only while both are
inside the history window.

Read with :func:`~memory.samenames.names_gone_by` at most once per group per
change, never per reply: again when the group's notes, days or waiting
lines changed (counted by the owner indexes, only once the index stamp
moved: a write anywhere in the file, or another process's commit,
:meth:`Database.stamp`; an owner id moved by merge-identities reads again
whatever the counts), or when a line was buffered under the group from a
member by a name not seen with them (:meth:`Namesakes.heard`, called by the
buffer once the line is committed). A line by a name already shared, or by
a member already seen with it, changes nothing.

Besides the names already shared, it keeps which members each name was
seen with (:class:`GroupNames` ``gone_by``, from the same rows): the
latest message's line is buffered only after its reply, and the notes'
batch that learns it will tag its name when another member went by it
before, so the prompt tags it at once too."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field

import structlog

from .db import Database
from .engine import INDEX
from .projects import ALIASES
from .errorlog import error_fields
from .groupowner import logged_owner, member_label
from .lru import LRU
from .samenames import names_gone_by

__all__ = ["GroupNames", "Namesakes"]

log = structlog.get_logger(component="memory")


@dataclass(frozen=True)
class GroupNames:
    """What a group's memory says of its members' names: ``shared``, the
    names (casefolded, as :func:`member_label` shows them) two members have
    gone by (:func:`~memory.samenames.shared_names`); ``gone_by``, the
    members (owner ids) each name was seen with, in a line or a note of one
    member's lines."""

    shared: frozenset[str] = frozenset()
    gone_by: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def told_apart(self, name: str, member: str) -> bool:
        """Whether ``member``, shown as ``name``, is tagged: the name is
        shared, or another member went by it (a line of ``member``'s not
        buffered yet makes two)."""
        said = member_label(name).casefold()
        return said in self.shared or bool(self.gone_by.get(said, frozenset()) - {member})


NONE = GroupNames()


@dataclass
class _Group:
    stamp: tuple[int, int, int]
    rows: tuple[int, ...]  # the group's rows when read (:func:`_rows`)
    names: GroupNames
    # (casefolded name, member) buffered since the read and not in it: no reason to read again
    heard: set[tuple[str, str]] = field(default_factory=set)
    stale: bool = False
    read: bool = False  # names holds what the read found (not one still running)


class Namesakes:
    def __init__(self, db: Database, *, kept: int = 4096) -> None:
        self.db = db
        self._groups: LRU[str, _Group] = LRU(kept)  # a group forgotten is read again, once
        self.reads = 0  # how many times a group's names were read (what the cache saves)

    def heard(self, owner: str, name: str, member: str) -> None:
        """A line of ``member``, shown as ``name``, is committed to the
        buffer under the group ``owner``."""
        group = self._groups.get(owner)
        if group is None or not member:
            return
        said = (member_label(name).casefold(), member)
        if said[0] in group.names.shared or said in group.heard or member in group.names.gone_by.get(said[0], ()):
            return
        group.heard.add(said)
        group.stale = True  # maybe a second member of that name: read again at the next reply

    async def shared(self, owner: str) -> GroupNames:
        """What the group ``owner``'s memory says of its members' names. A
        read that fails keeps what was known (or none): it costs the tags,
        not the reply."""
        group = self._groups.get(owner)
        try:
            stamp = (*await self.db.stamp(INDEX), (await self.db.stamp(ALIASES))[0])
            rows: tuple[int, ...] | None = None
            if group is not None and group.read and not group.stale:
                if group.stamp == stamp:
                    return group.names
                # Something was written: this group's rows, or any owner's (the
                # index stamp is the whole file's). Its rows counted by their
                # indexes say which; an owner id moved (merge-identities,
                # ALIASES) is read again whatever the counts.
                rows = await _rows(self.db, owner)
                if group.stamp[2] == stamp[2] and _same(group.rows, rows):
                    group.stamp = stamp
                    return group.names
            fresh = _Group(stamp, rows if rows is not None else await _rows(self.db, owner), NONE)
            # Set first: a line heard while the read runs marks it stale again.
            self._groups[owner] = fresh
            self.reads += 1
            shared, who = await names_gone_by(self.db, owner, member_label)
            fresh.names = GroupNames(frozenset(shared), {name: frozenset(m) for name, m in who.items()})
            fresh.read = True
        except (sqlite3.Error, RuntimeError) as exc:
            self._groups.discard(owner)
            log.warning("group's shared names not read", owner=logged_owner(owner), **error_fields(exc))
            return group.names if group is not None and group.read else NONE
        return fresh.names


async def _rows(db: Database, owner: str) -> tuple[int, ...]:
    """The group's notes, days and waiting lines by count and newest id,
    from the owner indexes alone (no row read): what a write to them moves."""
    row = await db.fetchone(
        "SELECT (SELECT COUNT(*) FROM memories WHERE owner = :o), (SELECT MAX(id) FROM memories WHERE owner = :o), "
        "(SELECT COUNT(*) FROM daily_events WHERE owner = :o), (SELECT MAX(id) FROM daily_events WHERE owner = :o), "
        "(SELECT COUNT(*) FROM extraction_buffer WHERE owner = :o)", {"o": owner})
    return tuple(int(v or 0) for v in row) if row is not None else ()


def _same(before: tuple[int, ...], now: tuple[int, ...]) -> bool:
    """Nothing the names are read from changed: the same notes and days, and
    no waiting line gone (a line added is :meth:`Namesakes.heard`'s)."""
    return len(before) == len(now) == 5 and before[:4] == now[:4] and now[4] >= before[4]
