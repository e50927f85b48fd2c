"""gateway/footprint.py: what a running gateway keeps per chat or per user,
by name, read from each part's own ``footprint()`` (scripts/bench_soak.py
reads it; before, the bench read some 28 private fields by name, and a
renamed one was silently left out of its figures). The real App against
the fake Telegram and model on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

from gateway.footprint import footprint
from memory import ManualClock
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram

from .killed import quiet
from .test_resume_e2e import KEY, _echo, _telegram_app

# What bench_soak.py reported before it read footprint(): the same names,
# so its figures compare across the change (docs/BENCHMARKS.md, "Soak"). Not
# telegram.comments: the gateway keeps a burst's comments in gateway.db.
LABELS = {
    "loop.queues", "loop.workers", "loop.buffering", "loop.current", "loop.clean", "loop.moving",
    "sessions.windows", "sessions.current", "sessions.unpruned", "limiter.users", "commands.codes",
    "commands.exported", "incognito.cache", "timezones.cache", "delivery.held", "delivery.refused",
    "delivery.no_drafts", "bus.takeovers", "telegram.typing_at", "telegram.albums", "telegram.lone",
    "telegram.holding", "telegram.lanes", "memory.projects", "memory.profiles",
    "extraction.locks", "extraction.held",
}  # fmt: skip


async def test_every_per_chat_structure_is_named_and_counts_the_chats_seen(
    tmp_path: Path, clock: ManualClock
) -> None:
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        async with _telegram_app(tmp_path, clock, llm, tg) as app:
            tg.push_text(42, 42, "is the launch still on Thursday?")
            await tg.wait_sent(1, timeout=15)
            await quiet(app)
            held = footprint(app)
            assert set(held) == LABELS
            assert len(held["sessions.current"]) == len(held["incognito.cache"]) == 1
            tg.push_text(43, 43, "and who brings the slides?")
            await tg.wait_sent(2, timeout=15)
            await quiet(app)
            held = footprint(app)
            assert len(held["sessions.current"]) == len(held["incognito.cache"]) == 2
            assert len(held["loop.queues"]) == len(held["loop.workers"]) == 0  # gone once a chat's queue empties
