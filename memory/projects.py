"""Project aliases: a renamed project's old names count for the new one.

"We renamed atlas to orion": recall asked about ``orion`` took the facts
filed under ``atlas`` for another project's (scaled by
``OTHER_PROJECT_FACTOR``) and matched none of their words. An alias
(``project_aliases``: owner, alias -> current name) links the names: a
message naming either counts the other's facts as the named project's and
searches its name too (memory/retrieval.py), and a new fact filed under the
old name goes under the current one (memory/consolidate.py).

The rename also moves the owner's facts filed under the old name to the
new one (:func:`move_facts`, in the rename's transaction): what the user
renamed is listed under the name they use now (/memories, the memory page,
exports, Core Memory) and the second look finds it under the name a new
fact is filed with. ``_global``'s facts are the operator's and move only
with an alias of ``_global``'s. Renaming back moves them back. A moved fact
keeps the name it was moved from (``renamed_from``, the first one along a
chain of renames): dropping the alias (``/project remove atlas``, a rename
made by mistake onto another project) files the facts it moved, and only
those, under the old name again, so they are found by it and not mixed
with the other project's; a fact since filed elsewhere by hand stays. The
project is no FTS column, so the index needs no change.

Each alias points at the current name directly: renaming ``orion`` to
``nova`` later moves ``atlas`` along, and renaming back drops the alias
that would point a name at itself. Aliases are learnt from the extraction
model (``renamed``) and set by the operator (``myclaw memory alias``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import aiosqlite

from .llm import slug

__all__ = [
    "ALIASES", "Aliased", "BadProjectName", "Unaliased", "linked_projects", "move_facts", "project_name", "read_aliases", "remove_alias",
    "set_alias",
]

ALIASES = "project_aliases"
"""The cache stamp of the aliases (``Database.stamp``)."""


class BadProjectName(ValueError):
    """A name that is no project's (``same`` False: ``name`` as given), or
    a rename to itself (``same``: ``name`` slugged). The fields let a
    command say it in the user's language; the text is English."""

    def __init__(self, name: str, *, same: bool = False) -> None:
        super().__init__(f"a project cannot be renamed to itself: {name!r}" if same
                         else f"not a project name: {name!r} (letters, digits or CJK, e.g. 'orion')")
        self.name = name
        self.same = same


def project_name(raw: str) -> str:
    """``raw`` as a project slug (as the extraction model's are kept); a
    :class:`BadProjectName` naming it when nothing of it is one."""
    name = slug(raw, "")
    if not name:  # "_global", "none" and the like are no project's name
        raise BadProjectName(raw)
    return name


async def set_alias(
    conn: aiosqlite.Connection, owner: str, old: str, new: str, *, source: str, at: str
) -> tuple[str, str]:
    """Record that ``owner``'s project ``old`` is now called ``new`` (both
    slugged, returned); :class:`BadProjectName` when they are one name."""
    old, new = project_name(old), project_name(new)
    if old == new:
        raise BadProjectName(old, same=True)
    # ``new`` is current now (a rename back drops the alias it had), and
    # older names of ``old`` follow it to ``new``.
    await conn.execute("DELETE FROM project_aliases WHERE owner = ? AND alias = ?", (owner, new))
    await conn.execute("UPDATE project_aliases SET project = ? WHERE owner = ? AND project = ?", (new, owner, old))
    await conn.execute(
        "INSERT INTO project_aliases (owner, alias, project, source, created_at) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (owner, alias) DO UPDATE SET project = excluded.project, source = excluded.source, "
        "created_at = excluded.created_at",
        (owner, old, new, source, at),
    )
    return old, new


async def move_facts(conn: aiosqlite.Connection, owner: str, old: str, new: str) -> int:
    """File ``owner``'s memories under project ``old`` (every tier and
    status, so history and Core Memory follow) under ``new``; how many.
    ``updated_at`` stays: a rename is no news about a fact (decay, "newer
    wins" in the weekly merge read it)."""
    # Where it came from first; nothing once it is back there (a rename back).
    cur = await conn.execute(
        "UPDATE memories SET project = ?, renamed_from = "
        "CASE WHEN COALESCE(renamed_from, project) = ? THEN NULL ELSE COALESCE(renamed_from, project) END "
        "WHERE owner = ? AND project = ?",
        (new, new, owner, old),
    )
    return cur.rowcount


@dataclass(frozen=True)
class Aliased:
    """A rename recorded (``MemoryEngine.set_project_alias``)."""

    old: str
    new: str
    """Both names as slugs."""
    moved: int
    """Facts filed under ``old`` that went under ``new``: 0 when nothing was
    filed there yet (a new fact named by ``old`` still goes under ``new``)."""


@dataclass(frozen=True)
class Unaliased:
    """An alias dropped (:func:`remove_alias`)."""

    moved: int
    """Facts filed under the alias's name again."""
    name: str = ""
    """The alias's name (a slug), which those facts are filed under."""


async def remove_alias(conn: aiosqlite.Connection, owner: str, alias: str) -> Unaliased | None:
    """Drop ``owner``'s alias ``alias`` and file the facts its rename moved
    (still under the name it points at) under ``alias`` again; None when
    there was no such alias."""
    name = slug(alias, "") or alias
    async with conn.execute(
        "SELECT project FROM project_aliases WHERE owner = ? AND alias = ?", (owner, name)
    ) as cur:
        row = await cur.fetchone()
    if row is None:
        return None
    await conn.execute("DELETE FROM project_aliases WHERE owner = ? AND alias = ?", (owner, name))
    cur = await conn.execute(
        "UPDATE memories SET project = renamed_from, renamed_from = NULL "
        "WHERE owner = ? AND renamed_from = ? AND project = ?",
        (owner, name, row[0]),
    )
    return Unaliased(moved=cur.rowcount, name=name)


async def read_aliases(conn: aiosqlite.Connection, owners: Iterable[str]) -> dict[str, str]:
    """alias -> current name for ``owners``; a later owner's win (the
    user's over ``_global``'s, when given in that order)."""
    out: dict[str, str] = {}
    for owner in owners:
        async with conn.execute(
            "SELECT alias, project FROM project_aliases WHERE owner = ? ORDER BY alias", (owner,)
        ) as cur:
            out.update({r[0]: r[1] for r in await cur.fetchall()})
    return out


def linked_projects(aliases: Mapping[str, str], names: Iterable[str]) -> frozenset[str]:
    """``names`` and every other name of the same projects."""
    out: set[str] = set()
    for name in names:
        head = aliases.get(name, name)
        out |= {name, head} | {a for a, p in aliases.items() if p == head}
    return frozenset(out)
