"""``/forget all`` through the real App: after the confirmation, none of the
user's words is left in any file under ``$MYCLAW_HOME`` (the raw bytes
grepped, WAL files included), while the gateway still runs. The places an
erasure was found to miss: a scheduled job's words in ``cron.db``'s WAL."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from memory import ManualClock
from tests.gateway.test_remembering_e2e import Model, running, say

SECRET = "QUOKKA7731"


def files_holding(home: Path, needle: str) -> list[str]:
    """Every file under ``home`` whose bytes hold ``needle`` (the config left out: the test wrote it)."""
    raw = needle.encode()
    return sorted(str(f.relative_to(home)) for f in home.rglob("*")
                  if f.is_file() and f.name != "config.json" and raw in f.read_bytes())


async def forget_all(app: object, clock: ManualClock, user: str) -> str:
    asked = await say(app, clock, "/forget all", user)  # type: ignore[arg-type]
    code = re.findall(r"\b\d{4}\b", asked)[-1]
    return await say(app, clock, f"/forget all {code}", user)  # type: ignore[arg-type]


async def test_forget_all_leaves_no_word_of_a_scheduled_job_in_cron_db(tmp_path: Path) -> None:
    """The job's words were in cron.db's WAL after the erasure, until the
    gateway stopped (weeks, for a gateway that runs on)."""
    model, clock = Model(), ManualClock("2026-03-02T10:00:00Z")
    async with running(tmp_path, model, clock) as (app, fake):
        fake.queue_reply(None, tool_calls=[{"name": "cron_add", "arguments": {
            "schedule": "0 9 * * *", "message": f"remind me of locker {SECRET}"}}])
        fake.queue_reply("Every day at 9.")
        await say(app, clock, f"every day at 9 remind me of locker {SECRET}", "alice")
        assert any(p.startswith("data/cron.db") for p in files_holding(tmp_path, SECRET))
        done = await asyncio.wait_for(forget_all(app, clock, "alice"), 10)
        assert "1 scheduled job" in done
        assert files_holding(tmp_path, SECRET) == []
