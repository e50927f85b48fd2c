"""A member who leaves a group takes their scheduled jobs there with them,
end to end: a job made in a group runs as its maker, with their memories,
and posts to the group; once they have left, its members are no longer
theirs to tell. Their jobs elsewhere, and other members' jobs, stay."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

from memory import Category, ManualClock, NewMemory
from tests.fakes.feishu_server import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI, Reply, said, text_of
from tests.fakes.telegram_server import FakeTelegram

from .test_e2e_feishu import ENCRYPT_KEY, _app, _feishu_section
from .test_quoted_e2e import _telegram


def _scheduling(body: dict[str, Any]) -> Reply:
    """"every morning: X" makes a daily job that asks X; a job's run is answered."""
    if body["messages"][-1]["role"] == "tool":
        return Reply(content="Scheduled.")
    words = said(body)
    if "every morning:" in words:
        task = words.split("every morning:", 1)[1].strip()
        return Reply(content=None, tool_calls=[{"name": "cron_add",
                                                "arguments": {"schedule": "0 8 * * *", "message": task}}])
    return Reply(content=f"job ran: {words[:60]}")


def _jobs(tmp_path: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(tmp_path / "data" / "cron.db") as db:
        return list(db.execute("SELECT user, chat_id, message FROM cron_jobs WHERE kind != 'internal' ORDER BY id"))


async def test_a_member_who_leaves_a_group_takes_their_jobs_there_with_them(
    tmp_path: Path, clock: ManualClock
) -> None:
    group = -100600
    async with FakeOpenAI(api_key="sk-left-e2e-0123456789", responder=_scheduling) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            engine = app.backend.engine  # type: ignore[attr-defined]
            await engine.add(NewMemory(owner="telegram:7", content="Alice's therapy goal: sleep before midnight",
                                       category=Category.IDENTITY))
            tg.push_text(group, 7, "every morning: remind me of my therapy goal", chat_type="supergroup",
                         first_name="Alice", mention=True)
            tg.push_text(group, 8, "every morning: post the standup link", chat_type="supergroup",
                         first_name="Bob", mention=True)
            tg.push_text(7, 7, "every morning: tell me my therapy goal", first_name="Alice")
            await tg.wait_sent(3, timeout=10)
            assert app.loop is not None and await app.loop.drain(5)
            assert len(_jobs(tmp_path)) == 3
            tg.push_left(group, 7)
            await asyncio.sleep(0.5)  # the service message is polled; nothing is sent for it
            assert app.loop is not None and await app.loop.drain(5)
            assert sorted(_jobs(tmp_path)) == [("telegram:7", "7", "tell me my therapy goal"),
                                               ("telegram:8", str(group), "post the standup link")]
            # The next morning: the group hears Bob's job only, Alice her own in private.
            clock.advance(timedelta(days=1))
            assert app.cron is not None
            await app.cron.run_due(clock.now())
            sent = await tg.wait_sent(5, timeout=10)
            assert app.loop is not None and await app.loop.drain(5)
        finally:
            await asyncio.wait_for(app.close(), 15)
    to_group = [m.text for m in sent[3:] if m.chat_id == group]
    assert len(to_group) == 1 and "standup" in to_group[0]
    for body in llm.requests:
        if any("standup link" in text_of(m["content"]) for m in body["messages"][-1:]):
            assert all("therapy" not in text_of(m["content"]) for m in body["messages"][:1])


async def test_a_feishu_member_removed_from_a_group_loses_their_jobs_there(tmp_path: Path, clock: ManualClock) -> None:
    """Feishu's member event names the open_ids that went; a person linked
    across channels (memory.identities) is found by their handle."""
    alice, bob = "ou_alice000000000000000000000000", "ou_bob00000000000000000000000000"
    async with FakeFeishu() as feishu, FakeOpenAI(api_key="sk-left-e2e-0123456789", responder=_scheduling) as llm:
        app = _app(tmp_path, clock, llm, {"feishu": _feishu_section(feishu, "webhook")},
                   memory={"identities": {"alice": [f"feishu:{alice}", "telegram:7"]}})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            assert app.http is not None and app.loop is not None
            store = app._cron_store  # type: ignore[attr-defined]
            for user, chat in (("alice", "oc_team"), (f"feishu:{bob}", "oc_team"), ("alice", "oc_other")):
                await store.add(message=f"job of {user} in {chat}", channel="feishu", chat_id=chat, user=user,
                                schedule="0 8 * * *")
            hook = app.http.url + "/feishu/events"
            event = feishu.member_left_event("oc_team", alice)
            assert (await feishu.push_event(hook, event, encrypt_key=ENCRYPT_KEY)).status_code == 200
            await asyncio.sleep(0.2)
            assert await app.loop.drain(5)
        finally:
            await asyncio.wait_for(app.close(), 15)
    assert sorted(_jobs(tmp_path)) == [("alice", "oc_other", "job of alice in oc_other"),
                                       (f"feishu:{bob}", "oc_team", f"job of feishu:{bob} in oc_team")]
