"""The year's walk (tests/gateway/yearwalk.py) measures recall without
using the memories: a timed recall on the walk's own file counted as an
access of each memory it returned, a hundred times a checkpoint, and
decay (which reads the last access) was no longer the year's."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

from gateway.app import App
from tests.gateway.yearwalk import ALICE, QUESTIONS, recall_ms, walk


async def test_timing_recall_leaves_the_walks_memories_untouched(tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    async def after(app: App, day: date) -> None:
        engine: Any = app.backend.engine  # type: ignore[attr-defined]
        read = "SELECT id, access_count, last_accessed FROM memories ORDER BY id"
        await engine.flush_access()
        before = [tuple(r) for r in await engine.db.fetchall(read)]
        seen["ms"] = await recall_ms(app, app.paths.data_dir)
        await engine.flush_access()
        seen["same"] = before == [tuple(r) for r in await engine.db.fetchall(read)]
        # The questions do recall something there: the timing is of real work.
        hits = await app.backend.recall(f"echo:{ALICE}", QUESTIONS[0])  # type: ignore[attr-defined]
        seen["hits"] = len(hits)

    await walk(tmp_path, days=8, checkpoints={}, after=after)
    assert seen["same"] and seen["ms"] > 0 and seen["hits"] > 0, seen
