"""Erasures through the real App (``/forget all``, ``/forget m12``, the
``memory_forget`` tool): afterwards none of the erased words is left in any
file under ``$MYCLAW_HOME`` (the raw bytes grepped, WAL files included),
while the gateway still runs, nor in the next prompt. The places erasures
were found to miss: a scheduled job's words in ``cron.db``'s WAL, the file
store's folder from a time memory was off (and an imported fact's line in
it), and the forgetting turn's own request and reply in the history."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

from memory import ManualClock
from tests.gateway.test_remembering_e2e import Model, fact, running, say

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


async def test_forget_all_erases_the_file_stores_folder_kept_from_when_memory_was_off(tmp_path: Path) -> None:
    """Memory off, the bot saved a fact to her MEMORY.md and logged the day;
    memory on again imports both. /forget all then takes the folder too (as
    README promises), and the import ledger's entries for her files, so
    nothing of her is read back at the next start. Bob's folder stays."""
    model, clock = Model(), ManualClock("2026-03-02T10:00:00Z")
    async with running(tmp_path, model, clock, memory={"enabled": False}) as (app, fake):
        fake.queue_reply(None, tool_calls=[{"name": "memory_save", "arguments": {"content": f"Locker code {SECRET}"}}],
                         kind="chat")
        fake.queue_reply("Noted.", kind="chat")
        await say(app, clock, f"my locker code is {SECRET}, remember it", "alice")
        await say(app, clock, "I like rowing", "bob")
    users = tmp_path / "workspace" / "memory" / "users"
    assert any(p.startswith("workspace/memory/users/echo_alice") for p in files_holding(tmp_path, SECRET))
    clock.advance(86400)
    async with running(tmp_path, model, clock) as (app, fake):
        engine = app.backend.engine  # type: ignore[union-attr]
        assert SECRET in await say(app, clock, "/memory", "alice")  # imported
        done = await asyncio.wait_for(forget_all(app, clock, "alice"), 10)
        assert done.startswith("Erased for good")
        assert files_holding(tmp_path, SECRET) == []
        assert [d.name.split("-")[0] for d in users.iterdir()] == ["echo_bob"]
        ledger = [r[0] for r in await engine.db.fetchall("SELECT key FROM meta WHERE key LIKE '%echo:%'")]
        assert ledger and all("echo:alice" not in k for k in ledger)
    async with running(tmp_path, model, clock) as (app, fake):
        assert SECRET not in await say(app, clock, "/memory", "alice")
    assert files_holding(tmp_path, SECRET) == []


async def test_forget_all_leaves_no_word_of_a_scheduled_job_in_cron_db(tmp_path: Path) -> None:
    """The job's words were in cron.db's WAL after the erasure, until the
    gateway stopped (weeks, for a gateway that runs on)."""
    model, clock = Model(), ManualClock("2026-03-02T10:00:00Z")
    async with running(tmp_path, model, clock) as (app, fake):
        fake.queue_reply(None, tool_calls=[{"name": "cron_add", "arguments": {
            "schedule": "0 9 * * *", "message": f"remind me of locker {SECRET}"}}], kind="chat")
        fake.queue_reply("Every day at 9.", kind="chat")
        await say(app, clock, f"every day at 9 remind me of locker {SECRET}", "alice")
        assert any(p.startswith("data/cron.db") for p in files_holding(tmp_path, SECRET))
        done = await asyncio.wait_for(forget_all(app, clock, "alice"), 10)
        assert "1 scheduled job" in done
        assert files_holding(tmp_path, SECRET) == []


async def test_forget_of_a_fact_imported_from_memory_md_erases_its_line_there(tmp_path: Path) -> None:
    """/forget m1 of a fact the import read from her MEMORY.md said "Erased
    for good" and left the line (and the logged message that said it) in
    her files, and did not name the imported day that holds the words; the
    day, forgotten next, goes from her log file too (else the file, changed
    by the first erasure, was imported again at the next start, the
    forgotten day with it). Her other line stays."""
    model, clock = Model(), ManualClock("2026-03-02T10:00:00Z")
    async with running(tmp_path, model, clock, memory={"enabled": False}) as (app, fake):
        for saved in (f"Locker code {SECRET}", "Likes green tea"):
            fake.queue_reply(None, tool_calls=[{"name": "memory_save", "arguments": {"content": saved}}], kind="chat")
            fake.queue_reply("Noted.", kind="chat")
            await say(app, clock, f"remember: {saved}", "alice")
    clock.advance(86400)
    async with running(tmp_path, model, clock) as (app, fake):
        engine = app.backend.engine  # type: ignore[union-attr]
        [m] = [m for m in await engine.list_memories("echo:alice") if SECRET in m.content]
        done = await say(app, clock, f"/forget m{m.id}", "alice")
        assert done.startswith("Erased for good") and SECRET in done
        memory_md = next((tmp_path / "workspace" / "memory" / "users").glob("echo_alice-*")) / "MEMORY.md"
        assert "Likes green tea" in memory_md.read_text(encoding="utf-8")
        # The day the import read from her log holds the words too: named as kept, as any linked summary.
        [day] = await engine.events("echo:alice")
        assert files_holding(tmp_path, SECRET) == ["data/memory.db"]
        assert "Still kept" in done and f"e{day.id}" in done.split("Still kept")[1]
        await say(app, clock, f"/forget e{day.id}", "alice")
        assert files_holding(tmp_path, SECRET) == []
    async with running(tmp_path, model, clock) as (app, fake):
        shown = await say(app, clock, "/memory", "alice")
        assert SECRET not in shown and "Likes green tea" in shown
        # The erased day is not read back from what was left of its file.
        assert await app.backend.engine.events("echo:alice") == []  # type: ignore[union-attr]


async def test_the_reply_to_a_request_to_forget_does_not_keep_the_words_in_the_history(tmp_path: Path) -> None:
    """The memory_forget tool erased the fact and the history lines that
    said it; then the turn's own rows were written: the model's "Done, I no
    longer remember QUOKKA7731" (and a request that named it) showed the
    words in every next prompt, so "what is my locker code?" was answered."""
    model, clock = Model(), ManualClock("2026-03-02T10:00:00Z")
    async with running(tmp_path, model, clock, by_hand=True) as (app, fake):
        await say(app, clock, f"my locker code is {SECRET}", "alice")
        model.extractions.append((SECRET, {"facts": [{**fact(f"Alice's locker code is {SECRET}"), "lines": [1]}],
                                           "summary": "her locker"}))
        clock.advance(200)
        assert [r.ok for r in await app.extraction.tick()] == [True]  # type: ignore[attr-defined]
        fake.queue_reply(None, tool_calls=[{"name": "memory_forget", "arguments": {"ids": ["m1"]}}], kind="chat")
        fake.queue_reply(f"Done, I no longer remember {SECRET}.", kind="chat")
        assert SECRET in await say(app, clock, f"forget my code {SECRET}", "alice")  # the user sees the reply
        await say(app, clock, "what is my locker code?", "alice")
        assert SECRET not in json.dumps(fake.last_chat()["messages"], ensure_ascii=False)
        assert "Erased at the user's request" in json.dumps(fake.last_chat()["messages"], ensure_ascii=False)
        assert files_holding(tmp_path, SECRET) == []
