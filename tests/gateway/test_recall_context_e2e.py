"""Recall reads the user's last lines along with their message, to tell
what a short one is about. Only lines of the conversation under way: a
user back after six weeks with a new question is not answered with the
memories of the topic they left off on. Through the real App, the OpenAI
fake and real SQLite files, on a moved clock."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from memory import Category, ManualClock, NewMemory, Provenance
from tests.fakes.openai_server import split_user_content, text_of
from tests.gateway.test_remembering_e2e import Model, running, say

VUE = "星河前端决定用Vue 3"
REDIS = "星河用Redis做缓存，过期时间设为10分钟"
HIKE = "用户周末去爬了莫干山"
OLD_TOPIC = ("我周末去爬山了，莫干山。", "星河用Redis缓存，过期时间10分钟。")
QUESTION = "星河的前端用的什么？"


def recalled(body: dict[str, object]) -> list[str]:
    """The recalled facts' words, in the block's order."""
    messages = body["messages"]
    assert isinstance(messages, list)
    block = split_user_content(text_of(messages[-1]["content"]))[0]
    return [line.split("] ", 1)[1] for line in block.splitlines() if line.startswith("- [")]


async def _lived(tmp_path: Path, gap: timedelta) -> list[str]:
    """Alice's three facts; she talks of the hike and the cache, then asks
    about the front end ``gap`` later: what the question recalls."""
    model = Model()
    clock = ManualClock("2026-03-02T07:00:00Z")
    async with running(tmp_path, model, clock, gateway={"timezone": "Asia/Shanghai"}) as (app, fake):
        engine = app.backend.engine  # type: ignore[union-attr]
        here = Provenance(channel="echo", chat_id="c-alice")
        await engine.add(NewMemory(owner="echo:alice", content=VUE, category=Category.DECISION, importance=0.8,
                                   project="星河", topic="前端", provenance=here))
        clock.set("2026-04-16T02:00:00Z")
        for content, category in ((HIKE, Category.EVENT), (REDIS, Category.CONFIG)):
            await engine.add(NewMemory(owner="echo:alice", content=content, category=category, importance=0.6,
                                       provenance=here))
        for line in OLD_TOPIC:
            await say(app, clock, line, "alice")
        clock.advance(gap)
        await say(app, clock, QUESTION, "alice")
        # The chat's request (the background extraction may have asked since).
        return recalled(fake.last_chat())


async def test_a_question_weeks_later_is_not_steered_by_the_topic_left_off_on(tmp_path: Path) -> None:
    shown = await _lived(tmp_path, timedelta(weeks=6))
    assert shown[0] == VUE, shown


async def test_a_follow_up_minutes_later_still_reads_the_lines_before_it(tmp_path: Path) -> None:
    # Within the conversation the lines before still count: they pull the cache up.
    shown = await _lived(tmp_path, timedelta(minutes=5))
    assert shown[0] == REDIS, shown
