"""The language of what the bot says by itself (not the model's reply),
end to end on the fakes of Telegram and an OpenAI-compatible API: a
message's own words decide it; one without words (a sticker-like emoji, a
bare command from a new user) goes by the chat's recent words, then by the
sender's app language (Telegram's ``language_code``). A Chinese speaker
never gets English for want of words, and an English one never Chinese."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from gateway.app import App
from memory import ManualClock
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram

from .test_e2e_feishu import _app
from .test_quoted_e2e import _telegram

KEY = "sk-chat-language-e2e-0123456789"
WHOLE: dict[str, Any] = {"agent": {"model": "test-model", "streaming": {"enabled": False}}}


@contextlib.asynccontextmanager
async def _running(tmp_path: Path, clock: ManualClock, **more: Any) -> AsyncIterator[tuple[FakeOpenAI, FakeTelegram, App]]:
    async with FakeOpenAI(api_key=KEY) as llm, FakeTelegram() as tg:
        provider = {"baseUrl": llm.url, "apiKey": KEY, "maxRetries": 0, "timeout": "5s"}
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, provider=provider, **{**WHOLE, **more})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            yield llm, tg, app
        finally:
            await asyncio.wait_for(app.close(), 15)


async def _replies(tg: FakeTelegram, app: App, n: int) -> list[str]:
    await tg.wait_sent(n, timeout=15)
    assert app.loop is not None and await app.loop.drain(10)
    return [m.text for m in tg.sent]


async def test_a_new_chinese_user_gets_help_and_new_in_chinese(tmp_path: Path, clock: ManualClock) -> None:
    async with _running(tmp_path, clock) as (_llm, tg, app):
        tg.user_languages[42] = "zh-hans"
        tg.push_text(42, 42, "/start")
        [start] = await _replies(tg, app, 1)
        tg.push_text(42, 42, "/new")
        [_, new] = await _replies(tg, app, 2)
    assert start.startswith("myclaw 会在一次次对话中记住") and "/帮助" in start
    assert new.startswith("已开始新的对话")


async def test_a_new_chinese_users_commands_answer_in_chinese(tmp_path: Path, clock: ManualClock) -> None:
    async with _running(tmp_path, clock) as (_llm, tg, app):
        tg.user_languages[42] = "zh-CN"
        for i, command in enumerate(["/memory", "/forget all", "/timezone", "/incognito"], 1):
            tg.push_text(42, 42, command)
            await _replies(tg, app, i)
        texts = [m.text for m in tg.sent]
    assert texts[0] == "我还没有记住关于你的任何事。", texts[0]
    assert texts[1] == "我没有保存任何关于你的内容。", texts[1]
    assert texts[2].startswith("我用网关的时区"), texts[2]
    assert texts[3].startswith("无痕模式已开启"), texts[3]


async def test_an_english_users_commands_stay_english(tmp_path: Path, clock: ManualClock) -> None:
    async with _running(tmp_path, clock) as (_llm, tg, app):
        tg.user_languages[42] = "en"
        tg.push_text(42, 42, "/start")
        tg.push_text(42, 42, "/memory")
        help_text, memory = await _replies(tg, app, 2)
    assert help_text.startswith("myclaw remembers") and memory == "I don't remember anything about you yet."


async def test_a_zone_named_in_chinese_is_answered_in_the_users_english(tmp_path: Path, clock: ManualClock) -> None:
    """A zone's name is a place, not the user's words: 东八区 or 上海 from
    someone who writes English gets English; from a new user with nothing
    else to go by, the name is all there is, so Chinese."""
    async with _running(tmp_path, clock) as (llm, tg, app):
        tg.user_languages[42] = "en"
        llm.queue_reply("Hi!")
        tg.push_text(42, 42, "hello, I'm moving to Shanghai next week")
        await _replies(tg, app, 1)
        for i, command in enumerate(["/timezone 东八区", "/timezone 火星", "/timezone"], 2):
            tg.push_text(42, 42, command)
            await _replies(tg, app, i)
        tg.push_text(43, 43, "/timezone 上海")
        texts = await _replies(tg, app, 5)
    assert texts[1].startswith("Your time zone is now UTC+08:00"), texts[1]
    assert texts[2].startswith("I don't know the time zone \"火星\""), texts[2]
    assert texts[3].startswith("Your time zone: UTC+08:00"), texts[3]
    assert texts[4].startswith("好的，你的时区是 Asia/Shanghai"), texts[4]


async def test_projects_named_in_chinese_are_answered_in_the_users_english(tmp_path: Path, clock: ManualClock) -> None:
    """A project's names are names, not the user's words: /project 星图 猎户座
    from someone who writes English gets English. A Chinese command word
    (删除) is theirs, so Chinese; a new user with nothing else to go by
    gets the names' language."""
    async with _running(tmp_path, clock) as (llm, tg, app):
        tg.user_languages[42] = "en"
        llm.queue_reply("Hi!")
        tg.push_text(42, 42, "hi, our team renamed a project again")
        await _replies(tg, app, 1)
        for i, command in enumerate(["/project 星图 猎户座", "/project", "/project 星图", "/project 删除 星图"], 2):
            tg.push_text(42, 42, command)
            await _replies(tg, app, i)
        tg.push_text(43, 43, "/project 天枢 开阳")
        texts = await _replies(tg, app, 6)
    assert texts[1].startswith("Noted: 星图 is now called 猎户座"), texts[1]
    assert texts[2].startswith("Renamed projects (old name → new name):") and "星图 → 猎户座" in texts[2], texts[2]
    assert texts[3].startswith("When a project is renamed, tell me"), texts[3]
    assert texts[4].startswith("好的，星图 不再是别的项目的旧名"), texts[4]
    assert texts[5].startswith("记下了：天枢 现在叫 开阳"), texts[5]


async def test_an_emoji_from_a_chinese_user_gets_a_chinese_apology(tmp_path: Path, clock: ManualClock) -> None:
    async with _running(tmp_path, clock) as (llm, tg, app):
        tg.user_languages[42] = "zh-hans"
        tg.user_languages[43] = "en"
        llm.queue_error(500, times=2)
        tg.push_text(42, 42, "👍")
        await _replies(tg, app, 1)
        tg.push_text(43, 43, "👍")
        zh, en = await _replies(tg, app, 2)
    assert zh.startswith("抱歉") and en.startswith("Sorry"), (zh, en)


async def test_japanese_is_not_answered_in_chinese(tmp_path: Path, clock: ManualClock) -> None:
    async with _running(tmp_path, clock) as (llm, tg, app):
        llm.queue_error(500)
        tg.push_text(42, 42, "明日の会議は何時からですか？")
        [text] = await _replies(tg, app, 1)
    assert text.startswith("Sorry"), text


async def test_a_rate_limit_note_to_a_chinese_users_emoji_is_chinese(tmp_path: Path, clock: ManualClock) -> None:
    limit = {"gateway": {"host": "127.0.0.1", "port": 0, "rateLimit": {"perMinute": 1, "perHour": 0}}}
    async with _running(tmp_path, clock, **limit) as (llm, tg, app):
        tg.user_languages[42] = "zh-hans"
        llm.queue_reply("好的")
        tg.push_text(42, 42, "你好")
        await _replies(tg, app, 1)
        tg.push_text(42, 42, "😂")
        [_, note] = await _replies(tg, app, 2)
    assert note.startswith("消息发得太快了"), note


async def test_emoji_and_pictures_do_not_outvote_a_chats_chinese(tmp_path: Path, clock: ManualClock) -> None:
    """/help has no words: the chat's recent ones decide, and a 👍 or a
    photo mark is not a word in English."""
    async with _running(tmp_path, clock) as (llm, tg, app):
        for text in ("周末我们去爬山了", "👍", "😂😂"):
            llm.queue_reply("好")
            tg.push_text(42, 42, text)
        await _replies(tg, app, 3)
        tg.push_text(42, 42, "/help")
        texts = await _replies(tg, app, 4)
    assert texts[-1].startswith("myclaw 会在一次次对话中记住"), texts[-1]


async def test_in_a_group_each_sender_is_answered_in_their_own_language(tmp_path: Path, clock: ManualClock) -> None:
    """A group of Chinese speakers and one English speaker: /help and a
    private-only command answer the one who asked, in one language each
    (no two-language sentence)."""
    async with _running(tmp_path, clock) as (llm, tg, app):
        tg.user_languages[8] = "en"
        for text in ("周末我们去爬山了", "下周一开会"):
            llm.queue_reply("好")
            tg.push_text(-100, 7, text, chat_type="supergroup", first_name="Wei", mention=True)
        await _replies(tg, app, 2)
        tg.push_text(-100, 8, "/help", chat_type="supergroup", first_name="Tom", mention=True)
        tg.push_text(-100, 8, "/memory", chat_type="supergroup", first_name="Tom", mention=True)
        tg.push_text(-100, 7, "/memory", chat_type="supergroup", first_name="Wei", mention=True)
        tg.push_text(-100, 9, "/timezone", chat_type="supergroup", first_name="Lin", mention=True)  # no words, no app language
        texts = await _replies(tg, app, 6)
    tom_help, tom_memory, wei_memory, lin_memory = texts[2:]
    assert tom_help.startswith("myclaw remembers"), tom_help
    assert tom_memory.startswith("This command works only in a private chat") and "私聊" not in tom_memory
    assert wei_memory.startswith("这个命令只能在和我的私聊中使用") and "private" not in wei_memory
    assert lin_memory.startswith("这个命令只能"), lin_memory  # the group's words


async def test_an_ok_a_link_or_code_from_a_chinese_user_gets_chinese(tmp_path: Path, clock: ManualClock) -> None:
    """Not words in a language: the app's language decides, not the letters."""
    async with _running(tmp_path, clock) as (llm, tg, app):
        tg.user_languages[42] = "zh-hans"
        said = ["ok", "https://example.com/report?id=7", "```\nTraceback (most recent call last):\nKeyError: 'x'\n```"]
        llm.queue_error(500, times=len(said))
        for i, text in enumerate(said, 1):
            tg.push_text(42, 42, text)
            await _replies(tg, app, i)
        texts = [m.text for m in tg.sent]
    assert all(t.startswith("抱歉") for t in texts), texts
