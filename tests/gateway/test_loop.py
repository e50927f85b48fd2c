from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from gateway.bus import Forwarded
from gateway.loop import HELP_TEXT, HELP_TEXT_ZH, Samples, parse_command
from gateway.ratelimit import RateLimiter
from memory import Category, ManualClock, NewMemory, Provenance
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.logjson import debug_json_log, lines

from .conftest import make_rig

ALICE = "telegram:100"  # unmapped senders are their own user: channel:sender_id
BOB = "telegram:200"


def _system(body: dict[str, Any]) -> str:
    return body["messages"][0]["content"]


def _user(body: dict[str, Any]) -> str:
    """The latest message as the model reads it, less the time put first
    (the clock's, pinned in test_a_message_gets_a_reply_in_the_same_chat)."""
    content = str(body["messages"][-1]["content"])
    return content.removeprefix("<time>12:00</time>\n")


async def _seed_alice(rig: Any) -> None:
    e = rig.engine
    await e.add(NewMemory(owner=ALICE, tier=1, content="Alice is a backend engineer in Hangzhou", category=Category.IDENTITY))
    await e.add(
        NewMemory(
            owner=ALICE,
            content="Alice likes oat milk flat white coffee",
            category=Category.EVENT,
            provenance=Provenance(channel="telegram", chat_id="1"),
        )
    )
    await e.add(
        NewMemory(
            owner=ALICE,
            content="Alice's deploy password is hunter2",
            category=Category.CREDENTIAL,
            provenance=Provenance(channel="telegram", chat_id="1"),
        )
    )
    await e.add(NewMemory(owner=ALICE, content="我喜欢喝燕麦拿铁咖啡", category=Category.EVENT, provenance=Provenance(channel="telegram", chat_id="1")))


async def test_a_message_gets_a_reply_in_the_same_chat(tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI) -> None:
    fake_llm.queue_reply("hi there")
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        out = await rig.ask("hello bot", chat="55")
        assert (out.channel, out.chat_id, out.text, out.reply_to) == ("telegram", "55", "hi there", "")
        assert out.answers  # not quoted in a private chat, but it names the message it answers
        await rig.settle()
        assert rig.loop.stats.replied == 1 and len(rig.loop.stats.added_ms) == 1
        body = fake_llm.requests[0]
        assert body["model"] == "test-model" and _user(body) == "hello bot"
        # The time of day goes with the latest message only (the system
        # prompt states the date, so its prefix stays the same all day).
        assert body["messages"][-1]["content"] == "<time>12:00</time>\nhello bot"


async def test_triggers_retrieve_cited_memories_and_acks_do_not(tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI) -> None:
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        await _seed_alice(rig)
        await rig.ask("我之前说过我喜欢什么咖啡？")
        zh = _user(fake_llm.requests[-1])
        assert zh.startswith("<memories>") and "我喜欢喝燕麦拿铁咖啡" in zh
        # Cited with date and source, in the chat's language; no chat id.
        assert "· 2026-03-01 · 来自 Telegram 上的对话] 我喜欢喝燕麦拿铁咖啡" in zh and "chat 1" not in zh
        assert zh.endswith("我之前说过我喜欢什么咖啡？")

        await rig.ask("do you remember my deploy password")
        en = _user(fake_llm.requests[-1])
        assert "Alice's deploy password is hunter2" in en and "[m3 · 2026-03-01 · from a chat on Telegram]" in en

        before = rig.loop.stats.retrievals
        await rig.ask("好的")
        assert _user(fake_llm.requests[-1]) == "好的" and rig.loop.stats.retrievals == before
        # Tier 1 sits in the system prompt of every private turn
        assert "# Core Memory\n- [m1 · 2026-03-01] Alice is a backend engineer in Hangzhou" in _system(fake_llm.requests[-1])


async def test_one_users_memories_never_reach_another_user(tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI) -> None:
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        await _seed_alice(rig)
        await rig.ask("我之前说过我喜欢什么咖啡？", sender="200", chat="2")
        await rig.ask("do you remember my deploy password? what coffee do I like?", sender="200", chat="2")
        text = fake_llm.prompts_text()
        for secret in ("Hangzhou", "hunter2", "flat white", "燕麦拿铁"):
            assert secret not in text
        assert rig.loop.stats.retrievals == 2


async def test_group_chat_needs_a_mention_and_never_sees_private_memory(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        await _seed_alice(rig)
        await rig.engine.add(NewMemory(owner=ALICE, content="Alice brings flat white coffee to the team standup",
                                       provenance=Provenance(channel="telegram", chat_id="g1")))
        await rig.send("do you remember my deploy password", chat="g1", group=True)
        await rig.send("   ", chat="p1")  # nothing to answer in a private chat either
        await rig.settle()
        assert fake_llm.requests == [] and rig.loop.stats.ignored == 2
        assert rig.bus.outbound_queue("telegram").empty()

        msg = await rig.send("do you remember my deploy password? which coffee?", chat="g1", group=True, mentioned=True)
        out = await rig.reply()
        assert out.chat_id == "g1" and out.reply_to == out.answers == msg.message_id
        await rig.send("and my coffee?", chat="g1", group=True, reply_to_bot=True)
        await rig.reply()
        text = fake_llm.prompts_text()
        assert "Hangzhou" not in text and "hunter2" not in text
        assert "# Group chat" in _system(fake_llm.requests[0])
        # What she said in this group helps here; what she told the bot in
        # her private chat (chat 1) does not come (memory/scope.py).
        assert "Alice brings flat white coffee to the team standup" in text
        assert "oat milk" not in text and "燕麦拿铁" not in text


async def test_llm_failure_and_timeout_get_an_apology_and_the_loop_goes_on(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    async with make_rig(tmp_path, clock, fake_llm, retries=1, timeout=0.3) as rig:
        fake_llm.queue_error(500, times=2)  # first try and the one retry
        out = await rig.ask("你好，今天天气怎么样？")
        assert out.text.startswith("抱歉")
        fake_llm.queue_delay(2.0)
        fake_llm.queue_delay(2.0)
        out = await rig.ask("what is the weather like?")
        assert "took too long" in out.text
        fake_llm.queue_reply("sunny")
        assert (await rig.ask("and tomorrow?")).text == "sunny"
        await rig.settle()
        assert rig.loop.stats.failed == 2
        # apologies are not conversation: only the user turns and the real answer are in Tier 0
        window = await rig.sessions.window("telegram:1")
        assert [(m.role, m.content) for m in window][-2:] == [("user", "and tomorrow?"), ("assistant", "sunny")]
        assert [m.role for m in window] == ["user", "user", "user", "assistant"]


async def test_tier0_history_and_new_session(tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI) -> None:
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        fake_llm.queue_reply("Nice to meet you, Ada")
        await rig.ask("my name is Ada")
        await rig.settle()
    async with make_rig(tmp_path, clock, fake_llm) as rig:  # restart: same files
        await rig.ask("what is my name?")
        roles = [(m["role"], m["content"]) for m in fake_llm.requests[-1]["messages"][1:]]
        # History as it was said; only the latest message carries the time.
        assert roles == [
            ("user", "my name is Ada"), ("assistant", "Nice to meet you, Ada"),
            ("user", "<time>12:00</time>\nwhat is my name?"),
        ]
        out = await rig.ask("/new")
        assert "New conversation" in out.text
        await rig.ask("hello again")
        assert [m["content"] for m in fake_llm.requests[-1]["messages"][1:]] == ["<time>12:00</time>\nhello again"]
        help_ = await rig.ask("/help@myclaw_bot")
        assert "/new" in help_.text and "forget" in help_.text  # users learn they can have things erased
        assert len(fake_llm.requests) == 3  # commands never reach the LLM


async def test_help_and_new_answer_in_the_chats_language(tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI) -> None:
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        assert (await rig.ask("/help", chat="1")).text == HELP_TEXT  # nothing said yet: English
        assert (await rig.ask("/帮助", chat="1")).text == HELP_TEXT_ZH  # asked in Chinese
        await rig.ask("我下周要去杭州出差", chat="2")
        await rig.ask("帮我记一下酒店的名字", chat="2")
        assert (await rig.ask("/help", chat="2")).text == HELP_TEXT_ZH
        assert (await rig.ask("/new", chat="2")).text == "已开始新的对话。之前告诉我的事我仍然记得。"
        await rig.ask("ok, thanks", chat="3")
        assert (await rig.ask("/help", chat="3")).text == HELP_TEXT
        # Every command of the English help is in the Chinese one.
        assert set(re.findall(r"^/\w+", HELP_TEXT, re.M)) <= set(re.findall(r"/[a-z]+", HELP_TEXT_ZH))



async def test_a_mistyped_command_is_answered_with_the_one_meant_not_by_the_model(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    """"/memroy" went to the model as words: an improvised answer, and the
    typo kept in the history to be learnt. A near miss of a command is
    answered with the command meant, in the chat's language; anything else
    with a slash ("/shrug", "/s") still reaches the model."""
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        out = await asyncio.wait_for(rig.ask("/memroy"), 10)
        assert "/memroy" in out.text and "/memory" in out.text and "/help" in out.text
        out = await asyncio.wait_for(rig.ask("/forgt m12"), 10)
        assert "/forget m12" in out.text
        assert fake_llm.requests == []  # never reached the model
        await rig.ask("我下周要去杭州出差", chat="2")
        out = await asyncio.wait_for(rig.ask("/exprot", chat="2"), 10)
        assert "/export" in out.text and "不是" in out.text
        fake_llm.queue_reply("¯\\_(ツ)_/¯")
        assert (await asyncio.wait_for(rig.ask("/shrug"), 10)).text == "¯\\_(ツ)_/¯"
        # In a group, a command for another bot is none of its business.
        fake_llm.queue_reply("ok")
        out = await asyncio.wait_for(rig.ask("/memroy", chat="-9", group=True, mentioned=True), 10)
        assert out.text == "ok"
        await rig.settle()
        rows = await rig.sessions.window("telegram:1")
        assert not any("memroy" in m.content or "forgt" in m.content for m in rows)


def test_help_names_every_command_a_user_can_send() -> None:
    """Feishu has no command menu: /help is the only place a user learns a
    command exists. /share and /unshare (a memory used in groups) were
    missing from it, though the Telegram menu offered /share."""
    from gateway.commands import COMMANDS

    aliases = {"tz": "timezone", "导出": "export", "无痕": "incognito"}  # each named beside its command
    for text in (HELP_TEXT, HELP_TEXT_ZH):
        named = set(re.findall(r"/([a-z]+|[\u4e00-\u9fff]+)", text))
        for command in (*COMMANDS, "new", "help"):
            assert aliases.get(command, command) in named, (command, text[:20])


def test_help_paragraphs_are_not_broken_mid_sentence() -> None:
    """A chat shows every newline: a paragraph is one line, which the app
    wraps to its own width (a Chinese line cut in two reads as two)."""
    for text in (HELP_TEXT, HELP_TEXT_ZH):
        for para in text.split("\n\n"):
            lines = para.splitlines()
            assert len(lines) == 1 or all(line.startswith("/") for line in lines), para


def test_samples_keep_the_latest_in_order_in_fixed_memory() -> None:
    s = Samples(3)
    assert list(s) == [] and len(s) == 0
    s.append(1.0)
    s.append(2.0)
    assert list(s) == [1.0, 2.0]
    size = s._buf.buffer_info()
    for v in (3.0, 4.0, 5.0, 6.0, 7.0):
        s.append(v)
    assert list(s) == [5.0, 6.0, 7.0] and len(s) == 3
    assert s._buf.buffer_info() == size  # allocated once, never grown


def test_parse_command() -> None:
    assert parse_command("/new") == "new" and parse_command(" /NEW@bot ") == "new"
    assert parse_command("@bot /help") == "help"
    assert parse_command("/new please") is None and parse_command("new") is None


async def test_a_slow_chat_does_not_delay_another(tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI) -> None:
    release = asyncio.Event()

    async def responder(body: dict[str, Any]) -> Reply:
        text = _user(body)
        if text == "slow":
            await release.wait()
        return Reply(content=f"re: {text}")

    fake_llm.responder = responder
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        await rig.send("slow", chat="A")
        await rig.send("fast", chat="B")
        out = await rig.reply(timeout=3)
        assert (out.chat_id, out.text) == ("B", "re: fast")
        release.set()
        out = await rig.reply(timeout=3)
        assert (out.chat_id, out.text) == ("A", "re: slow")


async def test_messages_of_one_chat_stay_in_order(tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI) -> None:
    async def responder(body: dict[str, Any]) -> Reply:
        text = _user(body)
        await asyncio.sleep(0.2 if text == "first" else 0.0)  # the first is the slowest
        return Reply(content=f"re: {text}")

    fake_llm.responder = responder
    async with make_rig(tmp_path, clock, fake_llm, max_concurrent=8) as rig:
        for text in ("first", "second", "third"):
            await rig.send(text, chat="C")
        replies = [(await rig.reply()).text for _ in range(3)]
        assert replies == ["re: first", "re: second", "re: third"]
        # each prompt saw the previous turns of the chat
        third = [m["content"] for m in fake_llm.requests[2]["messages"][1:]]
        assert third == ["first", "re: first", "second", "re: second", "<time>12:00</time>\nthird"]


async def test_every_turn_is_buffered_for_extraction(tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI) -> None:
    fake_llm.queue_reply("noted")
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        msg = await rig.send("I moved to Shanghai", chat="9", sender="100")
        await rig.reply()
        await rig.settle()
        rows = await rig.engine.db.fetchall(
            "SELECT owner, channel, chat_id, sender_id, message_id, role, content FROM extraction_buffer ORDER BY id"
        )
        assert [tuple(r) for r in rows] == [
            (ALICE, "telegram", "9", "100", msg.message_id, "user", "I moved to Shanghai"),
            (ALICE, "telegram", "9", "", msg.message_id, "assistant", "noted"),
        ]
        assert await rig.sessions.unbuffered("telegram:9") == []


async def test_the_window_never_drops_an_unbuffered_message(tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI) -> None:
    fake_llm.responder = lambda body: Reply(content=f"re: {_user(body)}")
    async with make_rig(tmp_path, clock, fake_llm, history=2) as rig:
        rig.backend.fail_next = 100  # the memory store is down
        for text in ("one", "two", "three"):
            await rig.ask(text)
        await rig.settle()
        # The window (2 messages) slid past "one" and "two", but memory does
        # not have them yet, so gateway.db keeps every row.
        assert [m.content for m in await rig.sessions.window("telegram:1")] == ["three", "re: three"]
        rows = await rig.sessions.db.fetchall("SELECT content, buffered FROM session_messages ORDER BY id")
        assert [tuple(r) for r in rows] == [(t, 0) for t in ("one", "re: one", "two", "re: two", "three", "re: three")]
        assert await rig.engine.db.fetchall("SELECT 1 FROM extraction_buffer") == []

        rig.backend.fail_next = 0  # the store is back: the next turn flushes first
        await rig.ask("four")
        await rig.settle()
        in_memory = [r[0] for r in await rig.engine.db.fetchall("SELECT content FROM extraction_buffer ORDER BY id")]
        assert in_memory == ["one", "re: one", "two", "re: two", "three", "re: three", "four", "re: four"]
        rows = await rig.sessions.db.fetchall("SELECT content FROM session_messages ORDER BY id")
        assert [r[0] for r in rows] == ["four", "re: four"]  # only now pruned to the window
        assert rig.loop.stats.buffer_errors >= 3


async def test_rows_left_unbuffered_by_a_crash_are_buffered_before_the_next_turn(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        # a crash after storing the user's message, before buffering it
        await rig.sessions.append("telegram:1", channel="telegram", chat_id="1", role="user", content="lost?", owner=ALICE, message_id="77")
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        await rig.ask("hello")
        await rig.settle()
        rows = await rig.engine.db.fetchall("SELECT message_id, content FROM extraction_buffer ORDER BY id")
        assert ("77", "lost?") == tuple(rows[0])


async def test_run_job_answers_as_the_user_in_their_chat(tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI) -> None:
    fake_llm.queue_reply("Your daily summary")
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        await _seed_alice(rig)
        job = rig.loop.run_job(channel="feishu", chat_id="oc_1", user=ALICE, text="summarise my day", private=True)
        sent = await asyncio.wait_for(job, 5)
        assert (sent.text, sent.answered) == ("Your daily summary", True)
        out = await rig.reply("feishu")
        assert (out.chat_id, out.text) == ("oc_1", "Your daily summary")
        assert "Hangzhou" in _system(fake_llm.requests[0])  # private: Tier 1 included
        await rig.settle()
        # The job's prompt is not the user's words: in Tier 0 (the chat reads
        # right), written as never for memory (2) so that not even a crash buffers it.
        assert await rig.engine.db.fetchall("SELECT 1 FROM extraction_buffer") == []
        rows = await rig.sessions.db.fetchall("SELECT role, content, sender_id, buffered FROM session_messages ORDER BY id")
        assert [tuple(r) for r in rows] == [
            ("user", "summarise my day", "cron", 2), ("assistant", "Your daily summary", "", 2)
        ]


async def test_a_jobs_rows_are_handled_from_the_moment_they_are_written(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    """A crash while the job's LLM call runs leaves nothing of it in Tier 0
    (its prompt is written once the model answered, as handled); the next
    turn after the restart must not hand the job's rows to memory."""
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(body: dict[str, Any]) -> Reply:
        started.set()
        await release.wait()
        return Reply(content="late")

    fake_llm.responder = slow
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        job = asyncio.ensure_future(rig.loop.run_job(channel="telegram", chat_id="1", user=ALICE, text="Reminder: stretch"))
        await asyncio.wait_for(started.wait(), 5)
        await rig.sessions.flush()
        assert await rig.sessions.unbuffered("telegram:1") == []  # the "crash" would find nothing to buffer
        assert await rig.sessions.db.fetchall("SELECT 1 FROM session_messages") == []  # nor a prompt to re-send
        release.set()
        await asyncio.wait_for(job, 5)
    fake_llm.responder = None
    async with make_rig(tmp_path, clock, fake_llm) as rig:  # restart: same files
        await rig.ask("hello")
        await rig.settle()
        rows = await rig.engine.db.fetchall("SELECT content FROM extraction_buffer ORDER BY id")
        assert [r[0] for r in rows] == ["hello", "ok"]


async def _seed_cat(rig: Any) -> str:
    hit = await rig.backend.remember(ALICE, "Alice's cat is called Miso", provenance=Provenance(channel="telegram", chat_id="1"))
    return str(hit.ref)


async def test_a_turn_that_erased_memory_is_not_buffered_for_extraction(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        ref = await _seed_cat(rig)
        fake_llm.queue_reply(None, tool_calls=[{"name": "memory_forget", "arguments": {"ids": [ref]}}])
        fake_llm.queue_reply("Forgotten: your cat is no longer called Miso in my memory.")
        await rig.ask("forget that my cat is called Miso")
        await rig.settle()
        assert await rig.engine.db.fetchall("SELECT content FROM extraction_buffer") == []
        assert await rig.sessions.unbuffered("telegram:1") == []  # handled, not left for _settle
        assert rig.loop.stats.buffered == 0

        # The next turn is buffered as usual.
        fake_llm.queue_reply("Nice!")
        await rig.ask("I adopted a puppy")
        await rig.settle()
        rows = await rig.engine.db.fetchall("SELECT content FROM extraction_buffer ORDER BY id")
        assert [r[0] for r in rows] == ["I adopted a puppy", "Nice!"]


async def test_a_turn_that_erased_memory_and_then_failed_is_not_buffered_either(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        ref = await _seed_cat(rig)
        fake_llm.queue_reply(None, tool_calls=[{"name": "memory_forget", "arguments": {"ids": [ref]}}])
        fake_llm.queue_error(500)  # the answer after the erasure fails: an apology
        out = await rig.ask("forget that my cat is called Miso")
        assert out.text.startswith("Sorry")
        await rig.settle()
        assert await rig.engine.list_memories(ALICE) == []
        assert await rig.engine.db.fetchall("SELECT content FROM extraction_buffer") == []
        assert await rig.sessions.unbuffered("telegram:1") == []


async def test_a_memory_forget_call_that_failed_leaves_the_turn_to_memory(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    """Only a call that ran keeps the turn out: a rejected one erased nothing."""
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        fake_llm.queue_reply(None, tool_calls=[{"name": "memory_forget", "arguments": {"ids": "m1"}}])
        fake_llm.queue_reply("Which memory do you mean?")
        await rig.ask("forget the thing I said")
        await rig.settle()
        rows = await rig.engine.db.fetchall("SELECT content FROM extraction_buffer ORDER BY id")
        assert [r[0] for r in rows] == ["forget the thing I said", "Which memory do you mean?"]


async def test_a_jobs_fallback_is_told_the_chats_language(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    # The job's text may have no words to tell by: the fallback then speaks
    # as the chat does (its words; a job's own rows are not the chat's),
    # then as the channel's app (Feishu on feishu.cn: Chinese).
    told: list[bool | None] = []

    def fallback(chat_zh: bool | None) -> str:
        told.append(chat_zh)
        return "⏰ 📞"

    async with make_rig(tmp_path, clock, fake_llm, retries=0) as rig:
        fake_llm.queue_reply("好的")
        await rig.ask("明天提醒我打电话给妈妈", chat="7")
        fake_llm.queue_error(500)
        sent = await asyncio.wait_for(
            rig.loop.run_job(channel="telegram", chat_id="7", user=ALICE, text="📞", private=True, fallback=fallback), 5)
        assert (sent.text, sent.answered, told) == ("⏰ 📞", False, [True])
        await rig.reply()
        fake_llm.queue_error(500)  # a chat with nothing said: the app's language, when the channel has one
        await asyncio.wait_for(rig.loop.run_job(channel="feishu", chat_id="oc_new", user=ALICE, text="📞",
                                                fallback=fallback, locale="zh"), 5)
        fake_llm.queue_error(500)
        await asyncio.wait_for(rig.loop.run_job(channel="telegram", chat_id="8", user=ALICE, text="📞",
                                                fallback=fallback), 5)
        assert told == [True, True, None]


async def test_a_job_not_made_private_is_answered_as_in_a_group(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    # A job made in a group (or sent to another chat) must not put the
    # creator's private profile or credentials in a reply others read.
    fake_llm.queue_reply("Morning, everyone")
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        await _seed_alice(rig)
        await rig.engine.add(NewMemory(owner=ALICE, content="alice's vpn password is hunter2", category=Category.CREDENTIAL))
        sent = await asyncio.wait_for(
            rig.loop.run_job(channel="feishu", chat_id="oc_team", user=ALICE, text="what is my vpn password?"), 5
        )
        assert sent.text == "Morning, everyone"
        request = json.dumps(fake_llm.requests[0], ensure_ascii=False)
        assert "Hangzhou" not in request and "hunter2" not in request


async def test_identities_share_memory_across_channels(tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI) -> None:
    async with make_rig(tmp_path, clock, fake_llm, identities={"alice": ["telegram:100", "feishu:ou_1"]}) as rig:
        await rig.engine.add(NewMemory(owner="alice", tier=1, content="Alice prefers answers in Chinese", category=Category.IDENTITY))
        await rig.ask("hi there, what's new?", channel="feishu", sender="ou_1", chat="oc_9")
        assert "Alice prefers answers in Chinese" in _system(fake_llm.requests[0])
        assert json.dumps(fake_llm.requests[0]).count("Alice prefers") == 1


async def test_a_redelivered_message_is_answered_once_even_across_a_restart(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    from gateway.bus import InboundMessage

    def delivery(mid: str, text: str = "what's the plan for friday?") -> InboundMessage:
        return InboundMessage(channel="feishu", chat_id="oc_1", sender_id="ou_1", text=text, message_id=mid)

    fake_llm.queue_reply("the plan is to ship")
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        await rig.bus.publish_inbound(delivery("om_1"))
        assert (await rig.reply("feishu")).text == "the plan is to ship"
        await rig.bus.publish_inbound(delivery("om_1"))  # at-least-once: the same event again
        await rig.settle()
        assert rig.bus.outbound_queue("feishu").empty() and len(fake_llm.requests) == 1
        assert rig.loop.stats.redelivered == 1
    async with make_rig(tmp_path, clock, fake_llm) as rig:  # a restart inside the retry window
        await rig.bus.publish_inbound(delivery("om_1"))
        await rig.settle()
        assert rig.bus.outbound_queue("feishu").empty() and len(fake_llm.requests) == 1
        fake_llm.queue_reply("sure")
        await rig.bus.publish_inbound(delivery("om_2", "and saturday?"))  # a new message still gets its answer
        assert (await rig.reply("feishu")).text == "sure"


async def test_a_message_that_only_got_an_apology_is_not_answered_again_when_delivered_again(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    """The apology ("something went wrong, please try again") was its
    answer, as at a restart (gateway/resume.py): a redelivery (Telegram's
    batch after a crash, Feishu's retry hours later) would answer unasked,
    maybe after the user's own retry, and store the question twice. The
    user's retry, a message of its own, is answered."""
    from gateway.bus import InboundMessage

    msg = InboundMessage(channel="telegram", chat_id="9", sender_id="100", text="hello?", message_id="77")
    fake_llm.queue_error(500)
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        await rig.bus.publish_inbound(msg)
        first = await rig.reply()
        assert rig.loop.stats.failed == 1 and first.text  # the apology
        await rig.bus.publish_inbound(msg)
        await rig.settle()
        assert rig.bus.outbound_queue("telegram").empty() and len(fake_llm.requests) == 1
        assert rig.loop.stats.redelivered == 1
        fake_llm.queue_reply("hello!")
        await rig.bus.publish_inbound(replace(msg, message_id="78"))  # "try again": asked again
        assert (await rig.reply()).text == "hello!"
        assert [(m.role, m.content) for m in await rig.sessions.window("telegram:9")] == [
            ("user", "hello?"), ("user", "hello?"), ("assistant", "hello!")]


async def test_recall_uses_the_users_last_four_messages_as_context(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        await rig.engine.add(NewMemory(owner=ALICE, content="Alice's espresso machine is a Gaggia Classic",
                                       category=Category.EVENT))
        await rig.engine.add(NewMemory(owner=ALICE, content="Alice's bike is a blue Brompton", category=Category.EVENT))
        # The topic was set three of the user's messages ago; the assistant's
        # replies in between do not push it out.
        for text in ("my espresso machine is acting up again", "hmm", "let me check", "ok"):
            await rig.ask(text)
        await rig.ask("do you remember which model I have?")
        block = _user(fake_llm.requests[-1])
        assert block.startswith("<memories>") and "Gaggia Classic" in block and "Brompton" not in block


async def test_a_user_over_the_rate_limit_gets_one_note_and_no_model_call(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    limiter = RateLimiter(clock, per_minute=2, per_hour=0)
    async with make_rig(tmp_path, clock, fake_llm, limiter=limiter) as rig:
        fake_llm.queue_reply("one")
        fake_llm.queue_reply("two")
        assert (await rig.ask("first", chat="7")).text == "one"
        assert (await rig.ask("second", chat="7")).text == "two"
        clock.advance(15)
        note = await rig.ask("third: my locker code is 4711", chat="7")
        assert "limit: 2 a minute" in note.text and "45 seconds" in note.text
        await rig.send("fourth", chat="7")  # same window: no second note
        await rig.settle()
        assert rig.bus.outbound_queue("telegram").empty()
        assert len(fake_llm.requests) == 2 and rig.loop.stats.limited == 2
        # Refused messages are not kept: not in Tier 0, not learnt.
        assert [m.content for m in await rig.sessions.window("telegram:7")] == ["first", "one", "second", "two"]
        # Another user, even in the same group, is not held back.
        fake_llm.queue_reply("hello bob")
        assert (await rig.ask("hi", chat="8", sender="200")).text == "hello bob"
        # Commands cost no model call and are not counted.
        assert "/new" in (await rig.ask("/help", chat="7")).text
        clock.advance(60)
        fake_llm.queue_reply("back")
        assert (await rig.ask("fifth", chat="7")).text == "back"


async def test_a_forward_alone_is_answered_with_its_author_and_recalls_by_its_words(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    """Forwarded words reach the model, Tier 0 and extraction marked with
    their author and date (memory must not take them as the user's own), and
    a forward with no comment still finds the memories it speaks of."""
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        await rig.engine.add(NewMemory(owner=ALICE, content="Alice runs the Gaggia espresso workshop on Fridays",
                                       category=Category.EVENT))
        sent = datetime(2026, 2, 27, 9, 30, tzinfo=UTC)
        await rig.ask("", forwarded=(Forwarded("Dana", "The Gaggia espresso workshop moves to Thursday", sent),))
        user = _user(fake_llm.requests[-1])
        assert user.startswith("<memories>") and "Gaggia espresso workshop on Fridays" in user
        assert user.endswith("[forwarded from Dana, sent 2026-02-27]\nThe Gaggia espresso workshop moves to Thursday")
        await rig.ask("who should I tell?", forwarded=(
            Forwarded("Dana", "moving it", sent), Forwarded("", "fine by me", sent + timedelta(days=1))))
        assert _user(fake_llm.requests[-1]).endswith(
            "[forwarded: 2 messages, sent 2026-02-27 to 2026-02-28]\nDana: moving it\nsomeone: fine by me"
            "\n\nwho should I tell?")
        await rig.settle()
        rows = await rig.sessions.window("telegram:1")
        assert [m.content for m in rows if m.role == "user"] == [
            "[forwarded from Dana, sent 2026-02-27]\nThe Gaggia espresso workshop moves to Thursday",
            "[forwarded: 2 messages, sent 2026-02-27 to 2026-02-28]\nDana: moving it\nsomeone: fine by me"
            "\n\nwho should I tell?",
        ]


async def test_a_failed_recall_is_logged_by_type_and_place_not_the_question(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    """A store's error may quote the question (SQLite's FTS5 quotes a query
    it cannot parse): the turn is answered without memory, and the log line
    (DEBUG too) has the error's type and place, not the question."""

    async def broken(user: str, query: str, **kw: Any) -> list[Any]:
        raise sqlite3.OperationalError(f'fts5: syntax error near "{query}"')

    fake_llm.queue_reply("I can answer without memory")
    with debug_json_log() as out:
        async with make_rig(tmp_path, clock, fake_llm) as rig:
            rig.backend.recall = broken
            await rig.send("what did Dr Okonkwo say about the biopsy?", chat="1")
            assert (await rig.reply(timeout=15)).text == "I can answer without memory"
            await rig.settle()
    [line] = lines(out, "memory recall failed")
    assert line["error"] == "sqlite3.OperationalError" and line["at"].endswith(" in broken"), line
    assert "Okonkwo" not in out.getvalue() and "biopsy" not in out.getvalue()
