"""Which names two members of one group have gone by (memory/groupnotes.py):
a name so shared is tagged (``Dad #3f9a``, memory/groupowner.py
``member_tag``) in every batch of the group, not only one holding both
members' lines, so one member is never "Dad" in one note and "Dad #3f9a"
in another. Read from what the group's memory holds, no table of its own:
its buffered lines (who spoke, by what name), and its notes' and days'
provenance (a note or day of one member's lines names that member and
their label; a tagged label says its name was shared when written)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from .db import Database

__all__ = ["shared_names"]

_TAGGED = re.compile(r"^(.*) #[0-9a-f]{4}$")


async def shared_names(db: Database, owner: str, label: Callable[[str], str]) -> set[str]:
    """The names (casefolded, as ``label`` shows them) that two members of
    the group ``owner`` have been seen with. One indexed read of the
    group's buffered lines and one of its notes' and days' provenance."""
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
    rows = await db.fetchall(
        "SELECT json_extract(provenance, '$.speakers'), json_extract(provenance, '$.said_by') FROM memories "
        "WHERE owner = ? UNION ALL SELECT json_extract(provenance, '$.speakers'), "
        "json_extract(provenance, '$.said_by') FROM daily_events WHERE owner = ?", (owner, owner))
    for speakers_json, said_json in rows:
        speakers = _strings(speakers_json)
        said_by = _strings(said_json)
        for name in said_by:
            if (m := _TAGGED.match(name)) is not None:
                shared.add(m.group(1).casefold())  # tagged when written: two members had it then
        if len(speakers) == 1 and len(said_by) == 1 and _TAGGED.match(said_by[0]) is None:
            seen(said_by[0], speakers[0])  # one member's lines: that member went by that name
    shared.update(name for name, members in who.items() if len(members) > 1)
    return shared


def _strings(value: object) -> list[str]:
    if not isinstance(value, str):
        return []
    try:
        got = json.loads(value)
    except ValueError:
        return []
    return [str(v) for v in got if isinstance(v, str)] if isinstance(got, list) else []
