"""Two members of one name told apart in the chat prompt as the group's
notes tell them apart (``Dad #3f9a``, memory/samenames.py), end to end (real
App, the Telegram and OpenAI fakes): not only while both are inside the
history window, but when the namesake spoke earlier (out of the window,
their line still waiting in the buffer) or only in the group's notes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from memory import ManualClock, NewMemory, Provenance
from memory.groupowner import group_owner, member_tag
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.fakes.telegram_server import FakeTelegram

from .test_e2e_feishu import _app
from .test_group_speakers_e2e import _users
from .test_quoted_e2e import _telegram

FAMILY = -100710
GRANDPA, DAD, MOM, LEO = 31, 32, 33, 34  # Grandpa and Dad both go by "Dad" in the family group


def _answering(body: dict[str, Any]) -> Reply:
    return Reply(content="noted")


async def test_a_namesake_out_of_the_window_or_only_in_the_notes_still_tags_the_name(
    tmp_path: Path, clock: ManualClock
) -> None:
    async with FakeOpenAI(api_key="sk-namesakes-0123456789", responder=_answering) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, gateway={"timezone": "UTC"})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            assert app.loop is not None
            sent = 0

            async def say(user: int, name: str, text: str, chat: int = FAMILY) -> str:
                nonlocal sent
                tg.push_text(chat, user, text, chat_type="supergroup", first_name=name, mention=True)
                sent += 1
                await tg.wait_sent(sent, timeout=10)
                assert app.loop is not None and await app.loop.drain(5)
                return _users(llm.last_chat())[-1]

            # Grandpa speaks as "Dad", then the window moves on (no extraction ran:
            # his line waits in the buffer), each turn's prompt read meanwhile.
            alone = await say(GRANDPA, "Dad", "I'll bring the fishing rods")
            for n in range(14):
                await say((MOM, LEO)[n % 2], ("Mom", "Leo")[n % 2], f"what else should we pack, item {n}?")
            window = _users(llm.last_chat())
            assert not [t for t in window if "fishing rods" in t]  # out of the window
            # Dad, another member of the same name, speaks: told apart from Grandpa.
            dad = await say(DAD, "Dad", "I'll book the hotel")
            grandpa = await say(GRANDPA, "Dad", "and the boat?")

            # Another group: Grandpa's own note there names him "Dad" (no buffered
            # line of his there); a new "Dad" in that group is tagged at once.
            other = -100711
            engine = app.backend.engine  # type: ignore[attr-defined]
            await engine.add(NewMemory(owner=group_owner("telegram", str(other)), content="Dad brings the grill",
                                       provenance=Provenance(channel="telegram", chat_id=str(other), group=True,
                                                             message_ids=("1",), speakers=(f"telegram:{GRANDPA}",),
                                                             said_by=("Dad",))))
            notes_only = await say(DAD, "Dad", "who brings the grill?", chat=other)
            # Mom has no namesake anywhere: her name stays as it is.
            mom = await say(MOM, "Mom", "and the salad?", chat=other)
        finally:
            await asyncio.wait_for(app.close(), 15)

    assert alone.endswith('<said by="Dad">\nI\'ll bring the fishing rods\n</said>'), alone
    assert dad.endswith(f'<said by="Dad #{member_tag(str(DAD))}">\nI\'ll book the hotel\n</said>'), dad
    assert grandpa.endswith(f'<said by="Dad #{member_tag(str(GRANDPA))}">\nand the boat?\n</said>'), grandpa
    assert notes_only.endswith(f'<said by="Dad #{member_tag(str(DAD))}">\nwho brings the grill?\n</said>'), notes_only
    assert mom.endswith('<said by="Mom">\nand the salad?\n</said>'), mom
