"""What a user's request to forget something erased, and which other stored
lines (waiting in the extraction buffer, or in the Tier 0 history) went with
it: the lines the erased facts were drawn from, and lines repeating them
word for word. Pure, so the gateway's history store can use it too."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .types import Hit

__all__ = ["Forgotten", "repeats_forgotten"]


@dataclass
class Forgotten:
    """What :meth:`SqliteMemory.forget` did with the refs it was given."""

    erased: list[Hit] = field(default_factory=list)
    shared: list[str] = field(default_factory=list)  # ``_global``: everyone's, not the user's to erase
    unknown: list[str] = field(default_factory=list)  # no such id of this user (another's looks the same)
    buffered_lines: int = 0  # waiting lines the erased facts were drawn from, dropped too
    versions: int = 0  # older rows of the same facts erased with them (merged originals, earlier versions)
    entries: list[Hit] = field(default_factory=list)  # Core Memory entries built on them, erased too
    # Records linked to an erased one and kept (SqliteMemory._kept_links):
    # what it was drawn from, which could write it again, or what was drawn from it.
    kept: list[Hit] = field(default_factory=list)
    # The erased facts' words and the words they were drawn from (whitespace
    # collapsed), for :func:`repeats_forgotten` over other stores (Tier 0).
    texts: list[str] = field(default_factory=list)


def repeats_forgotten(line: str, texts: Sequence[str]) -> bool:
    """Whether a stored line (a buffered or Tier 0 message) is one an erased
    fact was drawn from, or repeats the fact word for word. A short line
    ("ok", "thanks") is inside many texts: it must be one whole."""
    line = " ".join(line.split())
    return bool(line) and any(
        line == t or (len(line) >= 20 and line in t) or (len(t) >= 8 and t in line) for t in texts
    )
