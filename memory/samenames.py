"""Which names two members of one group have gone by (memory/groupnotes.py):
a name so shared is tagged (``Dad #3f9a``, memory/groupowner.py
``member_tag``) in every batch of the group, not only one holding both
members' lines, so one member is never "Dad" in one note and "Dad #3f9a"
in another. Read from what the group's memory holds, no table of its own:
its buffered lines (who spoke, by what name), and its notes' and days'
provenance (a note or day of one member's lines names that member and
their label; a tagged label says its name was shared when written)."""

from __future__ import annotations

import re
from collections.abc import Callable

from .db import Database

__all__ = ["shared_names"]

_TAGGED = re.compile(r"^(.*) #[0-9a-f]{4}$")


async def shared_names(db: Database, owner: str, label: Callable[[str], str]) -> set[str]:
    """The names (casefolded, as ``label`` shows them) that two members of
    the group ``owner`` have been seen with: its buffered lines, its notes'
    and days' provenance, read by the owner's index."""
    who: dict[str, set[str]] = {}
    shared: set[str] = set()

    def seen(name: str, member: str) -> None:
        if name and member:
            who.setdefault(name.casefold(), set()).add(member)

    rows = await db.fetchall(
        "SELECT speaker_name, COALESCE(NULLIF(speaker, ''), sender_id) FROM extraction_buffer "
        "WHERE owner = ? AND role = 'user'", (owner,))
    for name, member in rows:
        seen(label(str(name or "")), str(member or ""))
    # Reduced to distinct pairs and tagged labels in SQL, on the reader
    # thread: a big group's thousands of notes are not parsed on the event loop.
    for table in ("memories", "daily_events"):
        rows = await db.fetchall(
            f"SELECT DISTINCT json_extract(provenance, '$.said_by[0]'), json_extract(provenance, '$.speakers[0]') "
            f"FROM {table} WHERE owner = ? AND json_array_length(provenance, '$.speakers') = 1 "
            "AND json_array_length(provenance, '$.said_by') = 1", (owner,))
        for name, member in rows:
            if isinstance(name, str) and _TAGGED.match(name) is None:
                seen(name, str(member or ""))  # one member's lines: that member went by that name
        rows = await db.fetchall(
            f"SELECT DISTINCT s.value FROM {table}, json_each({table}.provenance, '$.said_by') s "
            f"WHERE {table}.owner = ? AND s.value GLOB '* #[0-9a-f][0-9a-f][0-9a-f][0-9a-f]'", (owner,))
        for (name,) in rows:
            if isinstance(name, str) and (m := _TAGGED.match(name)) is not None:
                shared.add(m.group(1).casefold())  # tagged when written: two members had it then
    shared.update(name for name, members in who.items() if len(members) > 1)
    return shared

