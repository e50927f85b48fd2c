"""``/memory`` as a Telegram chat shows it, end to end on the fakes of
Telegram and an OpenAI-compatible API: the lines under "Always in mind:"
and "Newest:" sit right under them, and the count of what is not shown is
a line of its own, not folded into the last memory."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from memory import Category, ManualClock, NewMemory

from .test_chat_language_e2e import _replies, _running


async def test_memory_lists_sit_under_their_headings_on_telegram(tmp_path: Path, clock: ManualClock) -> None:
    async with _running(tmp_path, clock) as (_llm, tg, app):
        engine = app.backend.engine  # type: ignore[attr-defined]
        await engine.add(NewMemory(owner="telegram:42", tier=1, content="Alice lives in Berlin", category=Category.IDENTITY))
        for i in range(12):
            await engine.add(NewMemory(owner="telegram:42", content=f"Alice's note number {i}"))
        tg.push_text(42, 42, "/memory")
        [shown] = await asyncio.wait_for(_replies(tg, app, 1), 20)
    lines = shown.split("\n")
    always, newest = lines.index("Always in mind:"), lines.index("Newest:")
    assert lines[always + 1].startswith("• [m1 ") and lines[always + 1].endswith("Alice lives in Berlin"), shown
    assert lines[newest + 1].startswith("• [m13 ") and lines[newest + 1].endswith("Alice's note number 11"), shown
    more = lines.index("…and 2 more.")  # not "  …and 2 more." under the last memory's words
    assert lines[more - 1] == "" and lines[more - 2].endswith("Alice's note number 2"), shown


async def test_the_forget_hint_under_a_search_names_an_id_it_lists(tmp_path: Path, clock: ManualClock) -> None:
    """"/forget m12 erases one for good" under a search that lists only m3:
    a user who has an m12 and copies the hint erases a memory they never
    saw, for good. The hint names one of the ids the answer shows."""
    async with _running(tmp_path, clock) as (_llm, tg, app):
        engine = app.backend.engine  # type: ignore[attr-defined]
        for i in range(12):
            content = "Alice chose Postgres for Atlas" if i == 2 else f"Alice's note number {i}"
            await engine.add(NewMemory(owner="telegram:42", content=content))
        tg.push_text(42, 42, "/memory Postgres")
        [shown] = await asyncio.wait_for(_replies(tg, app, 1), 20)
    listed = set(re.findall(r"^• \[(m\d+) ", shown, re.M))
    hinted = set(re.findall(r"/forget (m\d+)", shown))
    assert listed == {"m3"} and hinted and hinted <= listed, shown
