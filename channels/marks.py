"""Things a user shares instead of typing (a place, a contact, a poll, a
dice roll, a sticker) as a short mark in words: ``[location 52.52000,
13.40500]``, ``[place: Café Kranzler, Kurfürstendamm 18]``, ``[contact: Ana
Ruiz, +4915112345678]``, ``[poll: Lunch? — options: pizza / sushi]``,
``[dice 🎲 4]``, ``[sticker 😂]``.

The mark is the message's text: the model reads what was shared rather
than a note that only text is read, and the history and memory keep it as
they keep ``[photo]``. Platform-neutral (plain values in, a string out);
each channel picks the values from its own message shapes."""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["contact_mark", "dice_mark", "location_mark", "place_mark", "poll_mark", "sticker_mark", "video_mark"]

# A mark is one line; its parts come from other people's input (a poll's
# question, a contact's name), so line breaks and brackets are flattened.
_SPACE = re.compile(r"\s+")
_PART_CHARS = 300


def _part(text: str) -> str:
    flat = _SPACE.sub(" ", text.replace("[", "(").replace("]", ")")).strip()
    return flat if len(flat) <= _PART_CHARS else flat[: _PART_CHARS - 1] + "…"


def location_mark(latitude: float, longitude: float, *, live: bool = False) -> str:
    """``[location 52.52000, 13.40500]`` (5 decimals: about a metre);
    ``[live location ...]`` for one that keeps moving."""
    return f"[{'live location' if live else 'location'} {latitude:.5f}, {longitude:.5f}]"


def place_mark(name: str, address: str) -> str:
    """A venue: ``[place: Name, Address]``."""
    return f"[place: {', '.join(p for p in (_part(name), _part(address)) if p)}]"


def contact_mark(name: str, phone: str) -> str:
    """A contact card: ``[contact: First Last, +49...]``."""
    return f"[contact: {', '.join(p for p in (_part(name), _part(phone)) if p)}]"


def poll_mark(question: str, options: Sequence[str], *, quiz: bool = False) -> str:
    """``[poll: Question? — options: a / b / c]``; ``[quiz: ...]`` for a
    quiz (a poll with a right answer)."""
    listed = " / ".join(_part(o) for o in options)
    return f"[{'quiz' if quiz else 'poll'}: {_part(question)}{f' — options: {listed}' if listed else ''}]"


def dice_mark(emoji: str, value: int) -> str:
    """An animated dice (or dart, ball...) and what it landed on: ``[dice 🎲 4]``."""
    return f"[dice {emoji} {value}]"


def video_mark(count: int = 1) -> str:
    """Videos that came with pictures (an album) and that the model cannot
    watch: ``[video not watched]``, ``[2 videos not watched]``. Kept after
    the pictures' mark (``[2 photos] [video not watched]``), so the model
    does not answer as if the pictures were all, and an edited caption
    keeps it (gateway/bus.py ``picture_mark``)."""
    return "[video not watched]" if count == 1 else f"[{count} videos not watched]"


def sticker_mark(emoji: str) -> str:
    """``[sticker 😂]``: a sticker by the emoji it stands for ("" for one without)."""
    return f"[sticker {emoji}]" if emoji else ""
