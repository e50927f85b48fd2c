"""A new user's first contact, end to end on the fakes of Telegram and an
OpenAI-compatible API: what a walk through the product as a newcomer
found (session 37)."""

from __future__ import annotations

from pathlib import Path

from memory import ManualClock

from .test_chat_language_e2e import _replies, _running


async def test_a_deep_links_start_is_answered_with_the_welcome_not_by_the_model(tmp_path: Path, clock: ManualClock) -> None:
    """Opening the bot from a link (t.me/myclaw_bot?start=ref_42) sends
    "/start ref_42": the payload is the link's, not the user's words, so
    the newcomer gets the welcome, in their app's language, as a bare
    /start does; "/help me with this" stays words for the model."""
    async with _running(tmp_path, clock) as (llm, tg, app):
        tg.user_languages[42] = "zh-hans"
        tg.push_text(42, 42, "/start ref_42-Ab")
        [welcome] = await _replies(tg, app, 1)
        tg.user_languages[43] = "en"
        tg.push_text(43, 43, "/start@myclaw_bot c29tZS1wYXlsb2Fk")
        [_, english] = await _replies(tg, app, 2)
        assert llm.chat_requests() == []  # the model never saw them
        llm.queue_reply("Sure, what with?")
        tg.push_text(43, 43, "/help me with this")
        [*_, words] = await _replies(tg, app, 3)
    assert welcome.startswith("myclaw 会在一次次对话中记住") and "/帮助" in welcome, welcome
    assert english.startswith("myclaw remembers"), english
    assert words == "Sure, what with?"


async def test_a_private_command_sent_in_a_group_says_what_it_does_there_not_memories(
        tmp_path: Path, clock: ManualClock) -> None:
    """/timezone, /incognito, /project and /jobs in a group were refused
    with "I show and erase your memories only there", which is not what
    they do: each says its own; /memory, /forget and /export keep theirs."""
    group = -1001000000001
    async with _running(tmp_path, clock) as (llm, tg, app):
        tg.user_languages[42] = "en"
        tg.user_languages[43] = "zh-hans"
        sent = [(42, "/timezone Berlin"), (42, "/incognito"), (42, "/project atlas orion"), (42, "/jobs"),
                (42, "/memory"), (43, "/timezone 上海"), (43, "/forget all")]
        for i, (user, text) in enumerate(sent, 1):
            tg.push_text(group, user, text, chat_type="supergroup")
            await _replies(tg, app, i)
        texts = [m.text for m in tg.sent]
        assert llm.chat_requests() == []
    private = "This command works only in a private chat with me: "
    assert texts[:5] == [private + "I set your time zone only there.",
                         private + "I turn incognito on or off only there.",
                         private + "I rename your projects only there.",
                         private + "I list and cancel your scheduled messages only there.",
                         private + "I show and erase your memories only there."]
    assert texts[5:] == ["这个命令只能在和我的私聊中使用：时区只在那里设置。",
                         "这个命令只能在和我的私聊中使用：记忆只在那里查看或删除。"]


async def test_the_project_listings_last_line_is_not_shown_inside_its_last_entry(tmp_path: Path, clock: ManualClock) -> None:
    """/project listed the renames with "/project remove <old> undoes one."
    on the line right after the last one, which Markdown takes for that
    entry's continuation: Telegram showed it indented under "• atlas → orion"."""
    async with _running(tmp_path, clock) as (_llm, tg, app):
        tg.user_languages[42] = "en"
        tg.user_languages[43] = "zh-hans"
        for i, (user, text) in enumerate([(42, "/project atlas orion"), (42, "/project"),
                                          (43, "/project 星图 猎户座"), (43, "/project")], 1):
            tg.push_text(user, user, text)
            await _replies(tg, app, i)
        texts = [m.text for m in tg.sent]
    assert texts[1] == "Renamed projects (old name → new name):\n• atlas → orion\n\n/project remove <old> undoes one."
    assert texts[3] == "改过名的项目（旧名 → 新名）：\n• 星图 → 猎户座\n\n/project remove 旧名 可以取消。"


async def test_a_chinese_command_word_gets_chinese_from_someone_who_writes_english(
        tmp_path: Path, clock: ManualClock) -> None:
    """A command word is the user's own, as /project 删除 and /incognito 关
    were already answered: /timezone 重置 and /jobs 取消 from someone whose
    chat is English came back in English. A zone's name stays a place."""
    async with _running(tmp_path, clock) as (llm, tg, app):
        tg.user_languages[42] = "en"
        llm.queue_reply("Hi!")
        tg.push_text(42, 42, "hello, I keep forgetting my reminders")
        await _replies(tg, app, 1)
        for i, command in enumerate(["/timezone 重置", "/jobs 取消", "/jobs 删除 job-1", "/timezone 东八区",
                                     "/timezone reset"], 2):
            tg.push_text(42, 42, command)
            await _replies(tg, app, i)
        texts = [m.text for m in tg.sent]
    assert texts[1] == "你本来就在使用网关的时区 UTC。", texts[1]
    assert texts[2] == "用法：/jobs remove 编号 取消一个定时消息。你还没有定时消息。", texts[2]
    assert texts[3] == "你没有编号为 job-1 的定时消息：/jobs 列出你的定时消息。", texts[3]
    assert texts[4].startswith("Your time zone is now UTC+08:00"), texts[4]
    assert texts[5] == "Back to the gateway's time zone, UTC.", texts[5]


async def test_forget_all_written_as_one_word_is_pointed_to_forget_all(tmp_path: Path, clock: ManualClock) -> None:
    """Telegram's commands have no spaces, so a newcomer tries /forgetall or
    /forget_all for the help's "/forget all": they were pointed to /forget
    alone, whose answer is the usage of erasing by id."""
    async with _running(tmp_path, clock) as (llm, tg, app):
        tg.user_languages[42] = "en"
        for i, typed in enumerate(["/forgetall", "/forget_all", "/exprot"], 1):
            tg.push_text(42, 42, typed)
            await _replies(tg, app, i)
        texts = [m.text for m in tg.sent]
        assert llm.chat_requests() == []
    assert texts == ["/forgetall is not a command I know. Did you mean /forget all? /help lists them all.",
                     "/forget_all is not a command I know. Did you mean /forget all? /help lists them all.",
                     "/exprot is not a command I know. Did you mean /export? /help lists them all."]
