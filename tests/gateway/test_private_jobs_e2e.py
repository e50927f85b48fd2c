"""A cron job marked private (the user's private memory: profile,
credentials) runs only into the user's own private chat. The CLI refuses
to make one for a group (tests/gateway/test_cli_cron.py); a job made
before that check, or with cron.db edited by hand, is refused when it
runs, logged and recorded on the job, and nothing is posted."""

from __future__ import annotations

import asyncio
from pathlib import Path

from structlog.testing import capture_logs

from gateway.cron import CronStore
from memory import Category, ManualClock, MemoryEngine, NewMemory
from tests.fakes.openai_server import FakeOpenAI, Reply, said
from tests.fakes.telegram_server import FakeTelegram

from .test_e2e_feishu import _app
from .test_quoted_e2e import _telegram


async def test_a_private_job_is_not_run_into_a_group_or_anothers_chat(tmp_path: Path, clock: ManualClock) -> None:
    (tmp_path / "data").mkdir()
    async with await MemoryEngine.open(tmp_path / "data" / "memory.db", clock) as engine:
        await engine.add(NewMemory(owner="telegram:42", tier=1, content="my bank PIN is 5521",
                                   category=Category.IDENTITY))
    store = await CronStore.open(tmp_path / "data" / "cron.db", clock)
    try:
        for job_id, chat in (("mine", "42"), ("group", "-100123"), ("bobs", "77")):
            await store.add(schedule="0 9 * * *", message=f"brief {job_id}", channel="telegram", chat_id=chat,
                            user="telegram:42", job_id=job_id, private=True)
    finally:
        await store.close()
    clock.advance(24 * 3600)  # due: run when the gateway starts
    async with FakeOpenAI(api_key="sk-private-jobs-0123456789", responder=lambda b: Reply(content="re: " + said(b))) \
            as llm, FakeTelegram(strict_chats=False) as tg:  # chats it was never told of: a private one each
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            with capture_logs() as logs:
                await app.open()
                await asyncio.wait_for(app.start(), 15)
                await tg.wait_sent(1, timeout=10)
                assert app.cron is not None and app._cron_store is not None
                async with asyncio.timeout(10):
                    while any(j.last_status is None for j in await app._cron_store.list() if not j.internal):
                        await asyncio.sleep(0.05)
            runs = {j.id: (j.last_status, j.last_error) for j in await app._cron_store.list() if not j.internal}
        finally:
            await asyncio.wait_for(app.close(), 15)
    assert {m.chat_id for m in tg.sent} == {42}
    assert runs["mine"] == ("ok", None)
    assert runs["group"][0] == "error" and "telegram chat -100123 is a group" in (runs["group"][1] or "")
    assert runs["bobs"][0] == "error" and "not telegram:42's private chat" in (runs["bobs"][1] or "")
    assert all("brief group" not in said(r) and "brief bobs" not in said(r) for r in llm.requests)  # no LLM call
    refused = [e for e in logs if e["event"] == "private cron job refused: the chat is not the user's private chat"]
    assert {e["job"] for e in refused} == {"group", "bobs"}
