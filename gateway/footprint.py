"""What a running gateway keeps in memory per chat or per user, by name
(``loop.queues``, ``sessions.current``, ``memory.projects``...), for
``scripts/bench_soak.py``: a structure that grows with every chat ever seen
is a leak in a gateway that runs for months.

Each part lists its own containers (``footprint()``, read-only), so a
refactor that renames one changes that method, which mypy checks, instead of
silently dropping a figure the bench used to read by private name."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .app import App

__all__ = ["footprint"]


def footprint(app: App) -> dict[str, Collection[object]]:
    """``part.name`` -> container, for the parts ``app`` has opened."""
    from channels.telegram import TelegramChannel
    from memory.extraction import ExtractionService
    from memory.service import SqliteMemory

    parts: list[tuple[str, dict[str, Collection[object]]]] = [("bus", app.bus.footprint())]
    if app.loop is not None:
        parts += [("loop", app.loop.footprint()), ("commands", app.loop.commands.footprint())]
        if app.loop.limiter is not None:
            parts.append(("limiter", app.loop.limiter.footprint()))
    if app.sessions is not None:
        parts.append(("sessions", app.sessions.footprint()))
    if app.delivery is not None:
        parts.append(("delivery", app.delivery.footprint()))
    if hasattr(app, "timezones"):  # both set as the gateway opens
        parts += [("incognito", app.incognito.footprint()), ("timezones", app.timezones.footprint())]
    if isinstance(app.backend, SqliteMemory):
        parts.append(("memory", app.backend.engine.footprint()))
    if isinstance(app.extraction, ExtractionService):
        parts.append(("extraction", app.extraction.footprint()))
    parts += [(name, ch.footprint()) for name, ch in app.channels.items() if isinstance(ch, TelegramChannel)]
    return {f"{part}.{label}": held for part, got in parts for label, held in got.items()}
