"""A member lets a private fact be used in groups (``/share``), and takes
it back (``/unshare``), end to end (real App, the Telegram and OpenAI
fakes): shared from the private chat, it is read in every group where
they ask; shared from a group, in that group alone; by default, in none.
Another member's asking never reads it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from memory import Category, ManualClock, NewMemory, Provenance
from tests.fakes.openai_server import FakeOpenAI, Reply, said
from tests.fakes.telegram_server import FakeTelegram

from .test_e2e_feishu import _app
from .test_quoted_e2e import _telegram

ALICE = "telegram:7"
DIET = "Alice is vegetarian and allergic to peanuts"
ASK = "what should we order for the team dinner? anything vegetarian, no peanuts?"


def _echo(body: dict[str, Any]) -> Reply:
    return Reply(content=f"re: {said(body)}")


def _prompt(body: dict[str, Any]) -> str:
    return json.dumps(body["messages"], ensure_ascii=False)


async def _ask(tg: FakeTelegram, llm: FakeOpenAI, chat: int, user: int, n: int, text: str = ASK) -> str:
    tg.push_text(chat, user, text, chat_type="group" if chat < 0 else "private", first_name="X",
                 mention=chat < 0)
    await tg.wait_sent(n, timeout=10)
    return _prompt(llm.last_chat())


async def _command(tg: FakeTelegram, chat: int, user: int, n: int, text: str) -> str:
    tg.push_text(chat, user, text, chat_type="group" if chat < 0 else "private", first_name="X", mention=chat < 0)
    sent = await tg.wait_sent(n, timeout=10)
    return sent[-1].text


async def test_a_private_fact_is_read_in_a_group_only_once_shared_and_not_after_unshare(
    tmp_path: Path, clock: ManualClock
) -> None:
    async with FakeOpenAI(api_key="sk-group-sharing-0123456789", responder=_echo) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)})
        try:
            await app.open()
            m = await app.backend.engine.add(NewMemory(owner=ALICE, content=DIET, category=Category.IDENTITY,
                                                       provenance=Provenance(channel="telegram", chat_id="7")))
            await asyncio.wait_for(app.start(), 15)
            n = 0

            # By default the private fact stays out of the group.
            n += 1
            assert DIET not in await _ask(tg, llm, -500, 7, n)

            # Shared from the private chat: read in any group where Alice asks.
            n += 1
            answer = await _command(tg, 7, 7, n, f"/share m{m.id}")
            assert f"m{m.id}" in answer
            n += 1
            assert DIET in await _ask(tg, llm, -500, 7, n)
            n += 1
            assert DIET in await _ask(tg, llm, -600, 7, n)
            # Bob asking in the same group never reads Alice's fact.
            n += 1
            assert DIET not in await _ask(tg, llm, -500, 8, n)

            # Revoked: gone from the next group prompt.
            n += 1
            await _command(tg, 7, 7, n, f"/unshare m{m.id}")
            n += 1
            assert DIET not in await _ask(tg, llm, -500, 7, n)

            # Shared from a group: that group only, and the answer there shows no words of it.
            n += 1
            answer = await _command(tg, -500, 7, n, f"/share m{m.id}")
            assert "peanut" not in answer and f"m{m.id}" in answer
            n += 1
            assert DIET in await _ask(tg, llm, -500, 7, n)
            n += 1
            assert DIET not in await _ask(tg, llm, -600, 7, n)
            # Listed privately, with where it is shared.
            n += 1
            listing = await _command(tg, 7, 7, n, "/share")
            assert f"m{m.id}" in listing and "peanut" in listing
            # The group by the title the gateway saw it under, not telegram:-500.
            assert "Group -500" in listing and "telegram:-500" not in listing
            # Bob cannot share Alice's memory.
            n += 1
            answer = await _command(tg, -600, 8, n, f"/share m{m.id}")
            n += 1
            assert DIET not in await _ask(tg, llm, -600, 7, n)
            n += 1
            await _command(tg, -500, 7, n, f"/unshare m{m.id}")
            n += 1
            assert DIET not in await _ask(tg, llm, -500, 7, n)
        finally:
            await asyncio.wait_for(app.close(), 15)
