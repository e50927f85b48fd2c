"""A whole gateway at ``--log-level DEBUG`` (the real logging setup, every
library's lines included): Feishu in a private chat and a group, memory
recalled and learnt, the memory page signed in to and used. The log holds
what happened, never what was said or remembered, nor a secret: the
configured ones, the tenant tokens Feishu issued, the page's session
cookie and CSRF token."""

from __future__ import annotations

import asyncio
import io
import logging
import re
from pathlib import Path

import httpx

from gateway.app import config_secrets
from gateway.logging import configure_logging
from memory import ManualClock, Provenance
from tests.fakes.feishu_server import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI, Reply, said

from .handtick import by_hand
from .test_e2e_feishu import ENCRYPT_KEY, _app, _feishu_section, _until, feishu  # noqa: F401 (fixture)

ALICE, BOB = "ou_alice000000000000000000000000", "ou_bob00000000000000000000000000"
ADMIN = "page-admin-token-" + "k" * 24
KEPT = "Alice's oncologist is Dr Okonkwo at the Lisbon clinic"
ASKED = "what did I tell you about my oncologist?"
IN_GROUP = "the quarterly layoffs list is ready"


async def test_a_debug_log_of_feishu_turns_and_the_memory_page_holds_no_words_or_secrets(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu
) -> None:
    stream = io.StringIO()
    async with FakeOpenAI(api_key="sk-debug-audit-0123456789",
                          responder=lambda body: Reply(content="re: " + said(body))) as llm:
        app = _app(tmp_path, clock, llm, {"feishu": _feishu_section(feishu, "webhook")},
                   gateway={"host": "127.0.0.1", "port": 0, "admin": {"enabled": True, "token": ADMIN}})
        configure_logging(level="DEBUG", secrets=config_secrets(app.cfg), stream=stream, json_output=True)
        cookie = csrf = ""
        try:
            await app.open()
            assert app.backend is not None
            await app.backend.remember(f"feishu:{ALICE}", KEPT,
                                       provenance=Provenance(channel="feishu", chat_id="oc_alice", group=False))
            await asyncio.wait_for(app.start(), 15)
            await by_hand(app)  # the test ticks extraction itself (handtick.py)
            assert app.http is not None
            hook = app.http.url + "/feishu/events"
            for event in (
                feishu.message_event(ASKED, chat_id="oc_alice", open_id=ALICE),
                feishu.message_event(f"@_user_1 {IN_GROUP}", chat_id="oc_team", chat_type="group", open_id=BOB,
                                     mentions=[{"key": "@_user_1", "id": {"open_id": feishu.bot_open_id},
                                                "name": "bot"}]),
            ):
                assert (await feishu.push_event(hook, event, encrypt_key=ENCRYPT_KEY)).status_code == 200
            await _until(lambda: len(feishu.sent) == 2)
            assert app.loop is not None and await app.loop.drain(10)
            # The memory model answers with words, not the JSON asked for: its failure is logged too.
            clock.advance(200)
            assert app.extraction is not None
            reports = await app.extraction.tick()  # type: ignore[attr-defined]
            assert reports and not any(r.ok for r in reports)
            async with httpx.AsyncClient(base_url=app.http.url, timeout=10) as c:
                assert (await c.post("/memory/login", data={"token": "wrong-" + ADMIN})).status_code != 303
                r = await c.post("/memory/login", data={"token": ADMIN})
                assert r.status_code == 303
                cookie = next(iter(c.cookies.values()))
                r = await c.get("/memory", params={"user": f"feishu:{ALICE}", "q": "oncologist"})
                assert r.status_code == 200 and "Okonkwo" in r.text
                m = re.search(r'name="csrf" value="([0-9a-f]+)"', r.text)
                assert m is not None
                csrf = m.group(1)
                r = await c.get("/memory/api/search", params={"user": f"feishu:{ALICE}", "q": "oncologist"},
                                headers={"Authorization": f"Bearer {ADMIN}"})
                assert r.status_code == 200 and "Okonkwo" in r.text
                assert (await c.post("/memory/logout", data={"csrf": csrf})).status_code in (200, 303)
        finally:
            await asyncio.wait_for(app.close(), 30)
            logging.getLogger().handlers.clear()
            logging.getLogger().setLevel(logging.WARNING)
    logged = stream.getvalue()
    assert '"level": "debug"' in logged and "message handled" in logged  # debug lines were on
    secrets = [ADMIN, llm.api_key or "", feishu.app_secret, feishu.verification_token, ENCRYPT_KEY, cookie, csrf,
               *feishu.issued_tokens]
    assert feishu.issued_tokens and cookie and csrf
    for secret in secrets:
        assert secret and secret not in logged, secret[:8]
    for words in ("Okonkwo", "oncologist", "layoffs", "quarterly"):
        assert words not in logged, words
