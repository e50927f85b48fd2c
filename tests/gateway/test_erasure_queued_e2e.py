"""An erasure reaches the messages already taken by the running gateway and
not yet answered: queued in the process loop behind a slow turn of
another member, or behind the user's own turn under way. Before, their
inbox rows went but the loop still held the messages, answered them after
the ``/forget all`` (their words to the model) and stored them again.
What the user sends after the erasure is answered as usual; the erasure's
reply counts what it dropped, and ``/export`` lists what waits. Real
``App``, the fake Telegram and OpenAI servers."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from gateway.app import App
from gateway.cli import main
from memory import ManualClock
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram

from .killed import quiet
from .test_e2e_feishu import _app
from .test_e2e_feishu_outbox import until
from .test_erasure_e2e import files_holding
from .test_erasure_inbox_e2e import _left_by_a_crash
from .test_resume_e2e import KEY, _echo
from .test_vision_e2e import _telegram

SECRET = "QUOKKA7731"  # in her message queued when she erases
TIDE = "TIDE4412"  # in her message under way when she erases
GROUP, ALICE, BOB = -100, 1001, 1002


def _gateway(home: Path, clock: ManualClock, llm: FakeOpenAI, tg: FakeTelegram) -> App:
    """A model call may be held for longer than a test's erasure takes."""
    return _app(home, clock, llm, {"telegram": _telegram(tg)},
                provider={"baseUrl": llm.url, "apiKey": llm.api_key, "maxRetries": 0, "timeout": "60s"})


async def _forget_all(tg: FakeTelegram, word: str) -> tuple[str, str]:
    """``/forget <word>`` and its confirmation in Alice's private chat: both replies."""
    before = len(tg.sent)
    tg.push_text(ALICE, ALICE, f"/forget {word}")
    asked = (await tg.wait_sent(before + 1, timeout=15))[-1].text
    code = re.findall(r"\b\d{4}\b", asked)[-1]
    tg.push_text(ALICE, ALICE, f"/forget {word} {code}")
    done = (await tg.wait_sent(before + 2, timeout=15))[-1].text
    return asked, done


@pytest.mark.parametrize(("word", "counted"), [("all", "1 message waiting to be answered"),
                                                ("全部", "1 条等待回复的消息")])
async def test_her_message_queued_behind_another_members_slow_turn_is_not_answered_after_forget_all(
    tmp_path: Path, clock: ManualClock, word: str, counted: str
) -> None:
    """Bob's turn holds the group; Alice's message waits behind it when she
    erases everything in her private chat. Bob is still answered, her
    message never reaches the model nor any file, both replies of the
    erasure count it (not the command itself), and what she says after
    is answered."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        app = _gateway(tmp_path, clock, llm, tg)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            slow = llm.queue_hold("the ferry runs at noon")
            tg.push_text(GROUP, BOB, "is the ferry running today?", chat_type="supergroup", mention=True)
            await until(lambda: len(llm.requests) == 1, timeout=15)
            tg.push_text(GROUP, ALICE, f"my locker code is {SECRET}", chat_type="supergroup", mention=True)
            await until(lambda: app.loop is not None and app.loop.stats.received == 2, timeout=15)
            asked, done = await asyncio.wait_for(_forget_all(tg, word), 30)
            assert counted in asked and counted in done, (asked, done)
            slow.set()
            await until(lambda: any("ferry runs at noon" in m.text for m in tg.sent), timeout=15)
            tg.push_text(ALICE, ALICE, "hello again, nice to meet you")
            await until(lambda: any("hello again" in m.text for m in tg.sent), timeout=15)
            await asyncio.wait_for(quiet(app), 30)
        finally:
            await asyncio.wait_for(app.close(), 30)
    prompts = "\n".join(str(r) for r in llm.requests)
    assert "hello again" in prompts and SECRET not in prompts
    assert not any(SECRET in m.text for m in tg.sent)
    assert files_holding(tmp_path, SECRET) == []


async def test_her_messages_behind_her_own_turn_under_way_are_dropped_and_that_turn_is_not_kept(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Alice's group turn is at the model and her next message waits behind
    it when she erases everything: the waiting one never reaches the
    model; the one under way is not answered, nor stored, nor learnt
    (its words were asked before the erasure). Her next group message is
    answered, its prompt without either."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        app = _gateway(tmp_path, clock, llm, tg)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            slow = llm.queue_hold(f"high tide {TIDE} noted")
            tg.push_text(GROUP, ALICE, f"the high tide mark is {TIDE}", chat_type="supergroup", mention=True)
            await until(lambda: len(llm.requests) == 1, timeout=15)
            tg.push_text(GROUP, ALICE, f"my locker code is {SECRET}", chat_type="supergroup", mention=True)
            await until(lambda: app.loop is not None and app.loop.stats.received == 2, timeout=15)
            _, done = await asyncio.wait_for(_forget_all(tg, "all"), 30)
            assert "2 messages waiting to be answered" in done, done
            slow.set()
            assert app.loop is not None and await app.loop.drain(15)
            tg.push_text(GROUP, ALICE, "what's new on the island?", chat_type="supergroup", mention=True)
            await until(lambda: any("new on the island" in m.text for m in tg.sent), timeout=15)
            await asyncio.wait_for(quiet(app), 30)
        finally:
            await asyncio.wait_for(app.close(), 30)
    later = "\n".join(str(r) for r in llm.requests[1:])
    assert "new on the island" in later and SECRET not in later and TIDE not in later
    assert not any(SECRET in m.text or TIDE in m.text for m in tg.sent)
    assert files_holding(tmp_path, SECRET) == [] and files_holding(tmp_path, TIDE) == []


async def test_export_lists_her_messages_waiting_to_be_answered_not_others(
    tmp_path: Path, clock: ManualClock
) -> None:
    """``/export`` while her group message waits behind Bob's slow turn:
    the file says one message of hers waits to be answered (Bob's, also
    waiting, and her /export itself are not counted)."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        app = _gateway(tmp_path, clock, llm, tg)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            slow = llm.queue_hold("the ferry runs at noon")
            tg.push_text(GROUP, BOB, "is the ferry running today?", chat_type="supergroup", mention=True)
            await until(lambda: len(llm.requests) == 1, timeout=15)
            tg.push_text(GROUP, ALICE, f"my locker code is {SECRET}", chat_type="supergroup", mention=True)
            tg.push_text(GROUP, BOB, "and the bus?", chat_type="supergroup", mention=True)
            await until(lambda: app.loop is not None and app.loop.stats.received == 3, timeout=15)
            tg.push_text(ALICE, ALICE, "/export")
            await tg.wait_until(lambda: len(tg.documents) == 1, 15)
            text = tg.documents[0].data.decode()
            assert "1 message you sent, still waiting to be answered" in text, text
            slow.set()
            await asyncio.wait_for(quiet(app), 30)
        finally:
            await asyncio.wait_for(app.close(), 30)


async def test_the_operators_export_counts_her_messages_a_crash_left_waiting(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``myclaw memory export --format markdown --user`` after a crash left
    four messages of Alice's (two under way, two queued) and one of Bob's
    in the inbox: her section says four wait to be answered (their words
    not listed); Bob's is not hers."""
    monkeypatch.setenv("MYCLAW_HOME", str(tmp_path))
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        await _left_by_a_crash(tmp_path, clock, llm, tg)
    r = await asyncio.to_thread(CliRunner().invoke, main, ["memory", "export", "--format", "markdown",
                                                          "--user", f"telegram:{ALICE}"])
    assert r.exit_code == 0, r.output
    assert "- 4 messages waiting to be answered (gateway.db's inbox; not listed)" in r.output, r.output
    assert SECRET not in r.output and "ferry" not in r.output


async def test_the_operators_export_of_a_user_with_only_messages_waiting_says_so_markdown_and_json(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bob's first message waits in the inbox after a crash, nothing else of
    his is stored: ``myclaw memory export --user`` exports what there is
    (before, it refused: "nothing is stored"), in markdown and in JSON
    (``unanswered``: owner -> messages waiting, their words not listed);
    Alice's JSON counts her four. A handle with nothing at all is still refused."""
    monkeypatch.setenv("MYCLAW_HOME", str(tmp_path))
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        await _left_by_a_crash(tmp_path, clock, llm, tg)

    def export(*args: str) -> Result:
        return CliRunner().invoke(main, ["memory", "export", *args])

    r = await asyncio.to_thread(export, "--format", "markdown", "--user", f"telegram:{BOB}")
    assert r.exit_code == 0, r.output
    assert "- 1 message waiting to be answered (gateway.db's inbox; not listed)" in r.output, r.output
    assert "ferry" not in r.output
    r = await asyncio.to_thread(export, "--user", f"telegram:{BOB}")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["unanswered"] == {f"telegram:{BOB}": 1} and doc["memories"] == [] and "ferry" not in r.output
    r = await asyncio.to_thread(export, "--user", f"telegram:{ALICE}")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["unanswered"] == {f"telegram:{ALICE}": 4} and SECRET not in r.output
    r = await asyncio.to_thread(export, "--user", "telegram:9999")
    assert r.exit_code != 0 and "nothing is stored about telegram:9999" in r.output, r.output
