"""The memory page's per-user export of someone nothing has been learnt of
yet: what they said is theirs while it waits, in the extraction buffer
(answered, not yet extracted) or in gateway.db's inbox (their message still
being answered). The whole store's export already named them; the page's
per-user export refused them as "nothing is stored", and the CLI's
``--user`` export must keep agreeing with it. Their words are never in it,
only counted."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner, Result

from gateway.bus import InboundMessage
from gateway.cli import main
from memory import ManualClock
from tests.gateway.test_remembering_e2e import Model, running, say

ADMIN = "admin-token-0123456789abcdef"
PAGE = {"port": 0, "admin": {"enabled": True, "token": ADMIN}}


def _cli(*args: str) -> Result:
    return CliRunner().invoke(main, ["memory", "export", *args])


async def test_a_user_whose_lines_only_wait_for_extraction_is_exported_from_the_page_and_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MYCLAW_HOME", str(tmp_path))
    model, clock = Model(), ManualClock("2026-03-02T10:00:00Z")
    async with running(tmp_path, model, clock, gateway=PAGE) as (app, fake):
        await say(app, clock, "my bike lock code is TAPIR3391", "alice")  # answered; extraction waits for quiet
        assert model.extraction_prompts == []
        engine = app.backend.engine  # type: ignore[union-attr]
        assert await engine.list_memories("echo:alice", status=None) == []
        async with httpx.AsyncClient(base_url=app.http.url, headers={"Authorization": f"Bearer {ADMIN}"},  # type: ignore[union-attr]
                                     timeout=10) as c:
            r = await c.get("/memory/export", params={"user": "echo:alice"})
        assert r.status_code == 200, r.text
        assert "attachment" in r.headers["Content-Disposition"]
        assert "\n## echo:alice\n" in r.text and "waiting for extraction" in r.text, r.text
        assert "TAPIR3391" not in r.text
        md = await asyncio.to_thread(_cli, "--format", "markdown", "--user", "echo:alice")
        assert md.exit_code == 0, md.output
        assert "waiting for extraction" in md.output and "TAPIR3391" not in md.output
        doc = await asyncio.to_thread(_cli, "--user", "echo:alice")
        assert doc.exit_code == 0, doc.output
        assert json.loads(doc.output)["extraction_buffer"]["echo:alice"]["waiting"] >= 1


async def test_users_whose_messages_are_being_answered_or_queued_are_exported_from_the_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Alice's first message waits for the model (her history row written,
    nothing in memory.db); Bob's, in the same chat, is queued behind it
    (only gateway.db's inbox holds it). Each is exported, by count."""
    monkeypatch.setenv("MYCLAW_HOME", str(tmp_path))
    model, clock = Model(), ManualClock("2026-03-02T10:00:00Z")
    async with running(tmp_path, model, clock, gateway=PAGE) as (app, fake):
        hold = fake.queue_hold("hello alice")
        echo = app.channels["echo"]
        for n, (who, words) in enumerate((("alice", "my locker is PANGOLIN88"), ("bob", "my bike is WOMBAT42"))):
            await echo.publish(InboundMessage(channel="echo", chat_id="c-shared", sender_id=who,  # type: ignore[attr-defined]
                                              text=words, message_id=str(n + 1), timestamp=clock.now()))
        for _ in range(500):
            if fake.requests and await app.inbox.owned("echo:bob", lambda c, s: f"{c}:{s}"):  # type: ignore[union-attr]
                break
            await asyncio.sleep(0.01)
        assert fake.requests, "alice's turn never reached the model"
        engine = app.backend.engine  # type: ignore[union-attr]
        assert not {"echo:alice", "echo:bob"} & set(await engine.owners())
        async with httpx.AsyncClient(base_url=app.http.url, headers={"Authorization": f"Bearer {ADMIN}"},  # type: ignore[union-attr]
                                     timeout=10) as c:
            r = await c.get("/memory/export", params={"user": "echo:bob"})
            assert r.status_code == 200, r.text
            assert "\n## echo:bob\n" in r.text and "1 message waiting to be answered" in r.text, r.text
            r = await c.get("/memory/export", params={"user": "echo:alice"})
            assert r.status_code == 200, r.text
            assert "1 message of their conversations kept as recent history" in r.text, r.text
            # A handle nothing at all is stored about is still refused.
            r = await c.get("/memory/export", params={"user": "echo:nobody"})
            assert r.status_code == 404 and "nothing is stored about echo:nobody" in r.text
        md = await asyncio.to_thread(_cli, "--format", "markdown", "--user", "echo:bob")
        assert md.exit_code == 0, md.output
        assert "1 message waiting to be answered" in md.output, md.output
        hold.set()
        assert await app.loop.drain(5)  # type: ignore[union-attr]
    for said in ("PANGOLIN88", "WOMBAT42"):
        assert said not in r.text and said not in md.output


async def test_users_with_only_history_or_inbox_rows_are_listed_in_the_pages_sidebar(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Alice (a history row only) and Bob (an inbox row only) are exportable
    by ``?user=``, so the page's user list and ``/memory/api/users`` name
    them too; gateway.db is read for it at most once a TTL, not each render."""
    monkeypatch.setenv("MYCLAW_HOME", str(tmp_path))
    model, clock = Model(), ManualClock("2026-03-02T10:00:00Z")
    async with running(tmp_path, model, clock, gateway=PAGE) as (app, fake):
        hold = fake.queue_hold("hello alice")
        echo = app.channels["echo"]
        for n, (who, words) in enumerate((("alice", "my locker is PANGOLIN88"), ("bob", "my bike is WOMBAT42"))):
            await echo.publish(InboundMessage(channel="echo", chat_id="c-shared", sender_id=who,  # type: ignore[attr-defined]
                                              text=words, message_id=str(n + 1), timestamp=clock.now()))
        for _ in range(500):
            if fake.requests and await app.inbox.owned("echo:bob", lambda c, s: f"{c}:{s}"):  # type: ignore[union-attr]
                break
            await asyncio.sleep(0.01)
        assert fake.requests, "alice's turn never reached the model"
        assert not {"echo:alice", "echo:bob"} & set(await app.backend.engine.owners())  # type: ignore[union-attr]
        async with httpx.AsyncClient(base_url=app.http.url, headers={"Authorization": f"Bearer {ADMIN}"},  # type: ignore[union-attr]
                                     timeout=10) as c:
            users = [u["user"] for u in (await c.get("/memory/api/users")).json()["users"]]
            page = (await c.get("/memory")).text
        assert {"echo:alice", "echo:bob"} <= set(users), users
        assert "echo:alice" in page and "echo:bob" in page
        hold.set()
        assert await app.loop.drain(5)  # type: ignore[union-attr]
