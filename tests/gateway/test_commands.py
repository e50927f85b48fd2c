"""/memory and /forget through the process loop, on a real SQLite store."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from gateway.bus import Document, OutboundMessage
from gateway.commands import UserCommands
from gateway.cron import CronStore, parse_at
from gateway.incognito import Incognito
from gateway.outbox import Outbox, job_slot
from gateway.recent_files import RecentFiles
from gateway.timezones import UserTimezones
from gateway.userdata import UserData
from memory import Category, ManualClock, NewMemory, Provenance
from memory.backend import Turn
from memory.filestore import FileMemory
from tests.fakes.openai_server import FakeOpenAI

from .conftest import make_rig

ALICE = "telegram:100"
BOB = "telegram:200"
WHERE = Provenance(channel="telegram", chat_id="1")


async def _seed(rig: object) -> dict[str, int]:
    e = rig.engine  # type: ignore[attr-defined]
    ids = {}
    ids["profile"] = (await e.add(NewMemory(owner=ALICE, tier=1, content="Alice is a backend engineer in Hangzhou",
                                            category=Category.IDENTITY))).id
    ids["coffee"] = (await e.add(NewMemory(owner=ALICE, content="Alice likes oat milk flat white coffee",
                                           provenance=WHERE, source_text="I like oat milk flat white coffee"))).id
    ids["password"] = (await e.add(NewMemory(owner=ALICE, content="Alice's deploy password is hunter2",
                                             category=Category.CREDENTIAL, provenance=WHERE))).id
    ids["bob"] = (await e.add(NewMemory(owner=BOB, content="Bob keeps bees on his roof", provenance=WHERE))).id
    ids["shared"] = (await e.add(NewMemory(owner="_global", content="The office coffee machine is on floor 3"))).id
    return ids


async def test_memory_says_what_still_waits_to_be_learnt(tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI) -> None:
    # A new user tells the bot two things and asks /memory before the quiet
    # gap has passed: "I don't remember anything" alone reads as if they were lost.
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        for words in ("my name is Alice", "I live in Berlin"):
            fake_llm.queue_reply("Noted.")
            await rig.ask(words, chat="100")
        fake_llm.queue_reply("好的。")
        await rig.ask("我住在上海", chat="300", sender="300")
        await rig.settle()
        text = (await rig.ask("/memory", chat="100")).text
        assert text == ("I don't remember anything about you yet: 2 of your messages are waiting to be learnt, "
                        "after a pause in our conversation.")
        zh = (await rig.ask("/memory", chat="300", sender="300")).text
        assert zh == "我还没有记住关于你的任何事：你的 1 条消息正在等待学习，对话停下一会儿后就会学到。"
        await rig.engine.add(NewMemory(owner=ALICE, content="Alice likes oat milk", provenance=WHERE))
        listed = (await rig.ask("/memory", chat="100")).text
        assert "\n2 of your newest messages are still waiting to be learnt.\n" in listed
        assert "I don't remember anything about you yet." in (await rig.ask("/memory", chat="200", sender="200")).text


async def test_a_search_that_finds_nothing_says_what_still_waits_to_be_learnt(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    # "my cat is Miso", then "/memory miso" within the quiet gap: "No memories
    # match" alone read as if the bot had not heard (/memory alone said why).
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        fake_llm.queue_reply("Noted.")
        await rig.ask("my cat is called Miso", chat="100")
        fake_llm.queue_reply("好的。")
        await rig.ask("我的猫叫咪咪", chat="300", sender="300")
        await rig.settle()
        text = (await rig.ask("/memory miso", chat="100")).text
        assert text == ("No memories match “miso”. 1 message of yours is still waiting to be learnt, after a pause "
                        "in our conversation: what you said just now is not searchable yet.")
        zh = (await rig.ask("/memory 咪咪", chat="300", sender="300")).text
        assert zh == "没有找到与“咪咪”有关的记忆。你的 1 条消息还在等待学习，对话停下一会儿后就会学到：刚说的事暂时还搜不到。"
        assert (await rig.ask("/memory miso", chat="200", sender="200")).text == "No memories match “miso”."


async def test_jobs_lists_the_senders_scheduled_messages_and_cancels_one(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    """A user who asked for a reminder had no way but the model to see or
    cancel it (/jobs went to the model as words)."""
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        cron = await CronStore.open(tmp_path / "cron.db", clock)
        try:
            everything = UserData(rig.backend, rig.sessions, cron)
            rig.loop.commands = UserCommands(rig.backend, everything=everything, clock=clock)
            assert (await rig.ask("/jobs", chat="100")).text.startswith("You have no scheduled messages.")
            daily = await cron.add(schedule="0 9 * * 1-5", message="summarise my plans", channel="telegram",
                                   chat_id="100", user=ALICE, private=True, tz=ZoneInfo("Asia/Shanghai"))
            once = await cron.add(at=parse_at("2026-03-02 09:00", ZoneInfo("Asia/Shanghai")), message="call mom",
                                  channel="telegram", chat_id="-5", user=ALICE, tz=ZoneInfo("Asia/Shanghai"))
            bees = await cron.add(schedule="0 9 * * *", message="water the bees", channel="telegram", chat_id="200",
                                  user=BOB)
            text = (await rig.ask("/jobs", chat="100")).text
            assert text.startswith("Your scheduled messages:\n")
            assert f"[{daily.id}] 0 9 * * 1-5 (Asia/Shanghai): summarise my plans" in text
            # On her clock (the gateway's UTC: she set none), with the zone it was asked in.
            assert f"[{once.id}] once, 2026-03-02 01:00 (UTC), set as 2026-03-02 09:00 (Asia/Shanghai): call mom" in text
            assert "bees" not in text and bees.id not in text  # Bob's own
            assert text.endswith("/jobs remove <id> cancels one.")
            assert "only in a private chat" in (await rig.ask("/jobs", chat="-5", group=True, mentioned=True)).text
            assert (await rig.ask(f"/jobs remove {bees.id}", chat="100")).text == (
                f"You have no scheduled message {bees.id}: /jobs lists yours.")
            assert (await rig.ask(f"/jobs remove {once.id}", chat="100")).text == (
                f"Cancelled {once.id} (call mom): it will not run.")
            assert sorted(j.id for j in await cron.list() if not j.internal) == sorted([daily.id, bees.id])
            zh = (await rig.ask("/jobs", chat="300", sender="300")).text
            assert zh.startswith("You have no scheduled messages.")  # a new user, no words to tell by: the app's
            fake_llm.queue_reply("好的。")
            await rig.ask("我明天要开会", chat="300", sender="300")
            assert (await rig.ask("/jobs", chat="300", sender="300")).text.startswith("你还没有定时消息。")
            assert fake_llm.requests[-1]["messages"][-1]["content"] != "/jobs"  # never the model's
        finally:
            await cron.close()


async def test_memory_lists_the_users_own_memories_without_the_model(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        ids = await _seed(rig)
        text = (await rig.ask("/memory", chat="100")).text
        assert text.startswith("What I remember about you: 3 memories and 0 conversation summaries.")
        assert f"Always in mind:\n- [m{ids['profile']} · " in text and "backend engineer in Hangzhou" in text
        assert f"[m{ids['coffee']} · " in text and "oat milk flat white" in text
        # A credential is listed by id only; nobody else's rows, nor shared ones.
        assert f"[m{ids['password']} · " in text and "hunter2" not in text
        assert "bees" not in text and "floor 3" not in text
        await rig.settle()
        assert fake_llm.requests == []
        assert await rig.sessions.window("telegram:100") == []  # neither the command nor the listing kept
        assert "I don't remember anything about you yet." in (await rig.ask("/memory", chat="300", sender="300")).text


async def test_counts_of_one_are_singular(tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI) -> None:
    """"1 memory", never "1 memories" nor "1 older version(s)"."""
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        old = await rig.engine.add(NewMemory(owner=ALICE, content="Alice lives in Hangzhou", provenance=WHERE))
        now = await rig.engine.add(NewMemory(owner=ALICE, content="Alice lives in Shanghai", provenance=WHERE))
        await rig.engine.set_status(old.id, "superseded", superseded_by=now.id)
        text = (await rig.ask("/memory", chat="100")).text
        assert text.startswith("What I remember about you: 1 memory and 0 conversation summaries."), text
        erased = (await rig.ask(f"/forget m{now.id}", chat="100")).text
        assert "Also erased: 1 older version of it." in erased, erased


async def test_memory_with_words_searches_and_ranks_the_match_first(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        ids = await _seed(rig)
        await rig.engine.add(NewMemory(owner=ALICE, content="Alice drinks green tea in the afternoon", provenance=WHERE))
        lines = (await rig.ask("/memory coffee", chat="100")).text.splitlines()
        assert lines[0] == "Memories matching “coffee”:"
        assert lines[1].startswith(f"- [m{ids['coffee']} · ")
        assert not any("bees" in line or "green tea" in line for line in lines)
        assert "No memories match “zebra”." == (await rig.ask("/memory zebra", chat="100")).text


async def test_forget_erases_by_id_and_only_the_senders_own(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        rig.loop.commands = UserCommands(rig.backend, forget_history=rig.sessions.erase_matching)
        ids = await _seed(rig)
        fake_llm.queue_reply("Noted, oat milk it is.")
        await rig.ask("I like oat milk flat white coffee", chat="100")
        await rig.settle()
        coffee, bob, shared = f"m{ids['coffee']}", f"m{ids['bob']}", f"m{ids['shared']}"
        text = (await rig.ask(f"/forget {coffee} {bob} {shared} m999999", chat="100")).text
        assert text.splitlines()[0] == "Erased for good:" and "oat milk flat white coffee" in text
        assert "Also erased: 1 message of our conversation that said it." in text
        assert f"Shared by everyone, not yours to erase: {shared}." in text
        assert f"You have no memory with ids {bob}, m999999." in text
        assert await rig.engine.get(ids["coffee"]) is None
        assert await rig.engine.get(ids["bob"]) is not None and await rig.engine.get(ids["shared"]) is not None
        window = [m.content for m in await rig.sessions.window("telegram:100")]
        assert window == ["Noted, oat milk it is."]
        assert len(fake_llm.requests) == 1  # only the conversation, not the commands


async def test_forget_takes_ids_as_a_chinese_user_types_them_and_answers_in_chinese(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    """A Chinese input method separates with 、 or ；, and /memory answered
    in Chinese: /forget does both too."""
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        e = rig.engine
        tea = (await e.add(NewMemory(owner=ALICE, content="用户喜欢喝乌龙茶", provenance=WHERE))).id
        cat = (await e.add(NewMemory(owner=ALICE, content="用户的猫叫 Miso", provenance=WHERE))).id
        dog = (await e.add(NewMemory(owner=ALICE, content="用户的狗叫旺财", provenance=WHERE))).id
        # Ids alone: the language of what /memory shows them.
        assert (await rig.ask("/forget m999999", chat="100")).text == "你没有编号为 m999999 的记忆。"
        usage = (await rig.ask("/forget 我的猫", chat="100")).text
        assert usage.startswith("用法：/forget m12") and "不是编号：我的猫。" in usage
        text = (await rig.ask(f"/forget m{tea}、m{cat}；m{dog}。", chat="100")).text
        assert text.splitlines()[0] == "已永久删除："
        assert "乌龙茶" in text and "Miso" in text and "旺财" in text
        assert [await e.get(i) for i in (tea, cat, dog)] == [None, None, None]
        # English stays English.
        coffee = (await e.add(NewMemory(owner=ALICE, content="Alice likes flat white", provenance=WHERE))).id
        assert (await rig.ask(f"/forget m{coffee}", chat="100")).text.startswith("Erased for good:")


async def test_forget_explains_its_usage_and_refuses_in_a_group(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        ids = await _seed(rig)
        assert (await rig.ask("/forget", chat="100")).text.startswith("Usage: /forget m12")
        assert "Not an id: coffee." in (await rig.ask("/forget coffee", chat="100")).text
        group = await rig.ask(f"/forget m{ids['coffee']}", chat="-5", group=True, mentioned=True)
        assert group.text.startswith("This command works only in a private chat with me")
        listing = await rig.ask("/memory", chat="-5", group=True, mentioned=True)
        assert "oat milk" not in listing.text and "Hangzhou" not in listing.text
        assert await rig.engine.get(ids["coffee"]) is not None
        # A command with arguments it does not take goes to the model, as before.
        fake_llm.queue_reply("a new what?")
        assert (await rig.ask("/new idea for the app", chat="100")).text == "a new what?"


async def test_memory_answers_in_chinese_for_chinese_memories(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        await rig.engine.add(NewMemory(owner=ALICE, content="我喜欢喝燕麦拿铁咖啡", provenance=WHERE))
        text = (await rig.ask("/memory", chat="100")).text
        assert text.startswith("我记得的关于你的事：1 条记忆") and "燕麦拿铁" in text


async def test_the_file_store_lists_memory_md_and_the_newest_logged_lines(tmp_path: Path, clock: ManualClock) -> None:
    store = FileMemory(tmp_path / "ws", clock)
    await store.remember(ALICE, "Alice likes oat milk", provenance=WHERE)
    await store.remember(BOB, "Bob keeps bees", provenance=WHERE)
    overview = await store.overview(ALICE)
    assert [h.content for h in overview.profile] == ["Alice likes oat milk"]
    assert overview.facts == 1 and not any("bees" in h.content for h in (*overview.profile, *overview.recent))
    text = await UserCommands(store).run("memory", "", user=ALICE, private=True)
    assert f"- [{overview.profile[0].ref}" in text and "oat milk" in text
    gone = await UserCommands(store).run("forget", overview.profile[0].ref, user=ALICE, private=True)
    assert gone.startswith("Erased for good:") and (await store.overview(ALICE)).profile == []


async def test_forget_all_asks_for_a_code_then_erases_everything_of_the_sender_only(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        cron = await CronStore.open(tmp_path / "cron.db", clock)
        try:
            outbox = Outbox(rig.sessions.db)
            everything = UserData(rig.backend, rig.sessions, cron, outbox=outbox)
            rig.loop.commands = UserCommands(rig.backend, everything=everything, clock=clock)
            ids = await _seed(rig)
            # A reply to her that Telegram could not take yet, and one to Bob.
            for owner, chat in ((ALICE, "100"), (BOB, "200")):
                await outbox.add(OutboundMessage("telegram", chat, f"late reply for {chat}"), owner=owner,
                                 created_at=clock.now(), next_attempt_at=clock.now())
            await rig.engine.add_event(ALICE, "2026-11-20", "Alice planned the Hangzhou trip")
            await cron.add(schedule="0 9 * * *", message="plan my day", channel="telegram", chat_id="100", user=ALICE)
            await cron.add(at=parse_at("2026-03-02 09:00", ZoneInfo("Asia/Shanghai")), message="call mom",
                           channel="telegram", chat_id="100", user=ALICE)  # a one-time job goes too
            await cron.add(schedule="0 9 * * *", message="water the bees", channel="telegram", chat_id="200", user=BOB)
            # Each job's reply on its way, its slot marked, the kill before cron's record.
            for job in await cron.list():
                msg = OutboundMessage("telegram", job.chat_id, "", job_slot=job_slot(job.id, job.slot))
                row = await outbox.add(msg, owner=job.user, created_at=clock.now(), next_attempt_at=clock.now(),
                                       sending=True)
                await outbox.remove(row)
            marks = {j.id: j.user for j in await cron.list()}
            fake_llm.queue_reply("Noted, oat milk it is.")
            await rig.ask("I like oat milk flat white coffee", chat="100")
            fake_llm.queue_reply("Hi all!")
            await rig.ask("hello team", chat="-5", group=True, mentioned=True)  # her words in a group are hers too
            fake_llm.queue_reply("Bees, nice.")
            await rig.ask("my bees swarmed today", chat="200", sender="200")
            await rig.settle()

            ask = (await rig.ask("/forget all", chat="100")).text
            assert ask.startswith("This erases everything I keep about you, for good: 3 memories, "
                                  "1 conversation summary, 5 messages of our conversations (every chat), "
                                  "2 scheduled jobs. It cannot be undone.")
            code = ask.rsplit(" ", 1)[1]
            assert re.fullmatch(r"\d{4}", code) and await rig.engine.get(ids["coffee"]) is not None  # nothing yet
            wrong = "0000" if code != "0000" else "1111"
            assert "wrong or has expired" in (await rig.ask(f"/forget all {wrong}", chat="100")).text
            assert "wrong or has expired" in (await rig.ask(f"/forget all {code}", chat="200", sender="200")).text

            done = (await rig.ask(f"/forget all {code}", chat="100")).text
            assert done == ("Erased for good: 3 memories, 1 conversation summary, 5 messages of our conversations "
                            "(every chat), 2 scheduled jobs. From here on we start afresh.")
            assert await rig.engine.list_memories(ALICE, status=None) == []
            assert await rig.sessions.owned(ALICE) == 0
            assert (await outbox.owned(ALICE), await outbox.owned(BOB)) == (0, 1)
            assert [j.user for j in await cron.list()] == [BOB]
            left = [str(r[0]) for r in await outbox.db.fetchall("SELECT job FROM job_replies")]
            assert [marks[j] for j in left] == [BOB]  # hers went with her jobs
            assert "I don't remember anything about you yet." in (await rig.ask("/memory", chat="100")).text
            assert (await rig.ask("/forget all", chat="100")).text == "I keep nothing about you."
            # Bob's rows and the shared ones stay; the code was used up.
            assert await rig.engine.get(ids["bob"]) is not None and await rig.engine.get(ids["shared"]) is not None
            assert await rig.sessions.owned(BOB) == 2
            assert "wrong or has expired" in (await rig.ask(f"/forget all {code}", chat="100")).text
        finally:
            await cron.close()


async def test_a_forget_all_code_expires_after_five_minutes_and_groups_are_refused(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        rig.loop.commands = UserCommands(rig.backend, everything=UserData(rig.backend, rig.sessions), clock=clock)
        ids = await _seed(rig)
        group = await rig.ask("/forget all", chat="-5", group=True, mentioned=True)
        assert group.text.startswith("This command works only in a private chat with me")
        zh = (await rig.ask("/forget 全部", chat="100")).text
        assert zh.startswith("这会永久删除我保存的关于你的一切：3 条记忆、0 条对话摘要、0 条聊天记录")
        code = zh.rsplit(" ", 1)[1]
        clock.advance(timedelta(minutes=5, seconds=1))
        assert "wrong or has expired" in (await rig.ask(f"/forget all {code}", chat="100")).text
        assert await rig.engine.get(ids["coffee"]) is not None


async def test_forget_all_in_chinese_echoes_the_word_the_user_typed(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    # "/forget 全部" was told to confirm with "/forget all <code>": a word it never typed.
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        rig.loop.commands = UserCommands(rig.backend, everything=UserData(rig.backend, rig.sessions), clock=clock)
        ids = await _seed(rig)
        asked = (await rig.ask("/forget 全部", chat="100")).text
        assert "/forget all" not in asked
        prompt, code = asked.rsplit(" ", 1)
        assert prompt.endswith("确认请在 5 分钟内发送：/forget 全部")
        wrong = (await rig.ask("/forget 全部 0000x", chat="100")).text
        assert wrong == "这个确认码不对或已过期；先发送 /forget 全部 获取新的确认码。"
        assert await rig.engine.get(ids["coffee"]) is not None
        assert (await rig.ask(f"/forget 全部 {code}", chat="100")).text.startswith("已永久删除：3 条记忆")
        assert await rig.engine.get(ids["coffee"]) is None


# -- /export ---------------------------------------------------------------------------


async def test_export_sends_a_file_of_everything_kept_about_the_sender_only(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        cron = await CronStore.open(tmp_path / "cron.db", clock)
        try:
            rig.loop.commands = UserCommands(
                rig.backend, everything=UserData(rig.backend, rig.sessions, cron), clock=clock
            )
            ids = await _seed(rig)
            await rig.engine.update(ids["password"], source_text="my deploy password is hunter2")
            await rig.engine.add_event(ALICE, "2026-11-20", "Alice planned the Hangzhou trip")
            await rig.engine.add_event(BOB, "2026-11-20", "Bob harvested honey")
            await cron.add(schedule="0 9 * * *", message="plan my day", channel="telegram", chat_id="100", user=ALICE)
            await cron.add(at=parse_at("2026-03-02 09:00", ZoneInfo("Asia/Shanghai")), message="call mom",
                           channel="telegram", chat_id="100", user=ALICE, job_id="job-mom", tz=ZoneInfo("Asia/Shanghai"))
            await cron.add(schedule="0 9 * * *", message="water the bees", channel="telegram", chat_id="200", user=BOB)
            fake_llm.queue_reply("Noted.")
            await rig.ask("I moved to Suzhou last week", chat="100")
            await rig.settle()
            asked = len(fake_llm.requests)

            reply = await rig.ask("/export", chat="100")
            assert reply.text.startswith("Everything I keep about you, as a Markdown file.")
            file = reply.attachment
            assert file is not None and file.filename == "myclaw-memory-2026-03-01.md" and file.mime == "text/markdown"
            doc = file.data.decode("utf-8")
            assert f"- [m{ids['profile']}] Alice is a backend engineer in Hangzhou" in doc
            assert f"- [m{ids['coffee']}] Alice likes oat milk flat white coffee" in doc
            assert f"- [m{ids['password']}] (a credential, not shown here)" in doc and "hunter2" not in doc
            assert "Credentials are listed by id only" in doc
            assert "Alice planned the Hangzhou trip" in doc and "plan my day" in doc
            assert "- [job-mom] once at 2026-03-02 09:00 (Asia/Shanghai) call mom _(replies in a chat on Telegram)_" in doc
            assert "2 lines of our conversations still waiting to be learnt from." in doc
            assert "bees" not in doc and "honey" not in doc and "floor 3" not in doc  # nobody else's, nor shared
            # Answered without the model, kept out of history and memory.
            await rig.settle()
            assert len(fake_llm.requests) == asked
            assert "/export" not in [m.content for m in await rig.sessions.window("telegram:1")]
            assert [m.content for m in await rig.sessions.window("telegram:100")] == [
                "I moved to Suzhou last week", "Noted."
            ]

            bob = (await rig.ask("/export", chat="200", sender="200")).attachment
            assert bob is not None
            theirs = bob.data.decode("utf-8")
            assert "Bob keeps bees on his roof" in theirs and "water the bees" in theirs and "honey" in theirs
            assert "Alice" not in theirs and "oat milk" not in theirs and "plan my day" not in theirs
        finally:
            await cron.close()


async def test_the_files_a_user_sent_lately_are_exported_counted_and_erased_with_them(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    """Files kept a day for file_read (gateway.db) are the sender's data too:
    /export names them, /forget all counts them and takes them from every
    chat, and leaves the other people's files in a shared chat."""
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        files = RecentFiles(rig.sessions.db, clock)
        rig.loop.commands = UserCommands(
            rig.backend, everything=UserData(rig.backend, rig.sessions, files=files), clock=clock
        )
        note = Document(name="q3 plan.pdf", text="budget 40k", total_chars=10)
        await files.keep("telegram:100", ALICE, (note,))
        await files.keep("telegram:-5", ALICE, (Document(name="team.xlsx", text="rota", total_chars=4),))
        await files.keep("telegram:-5", BOB, (Document(name="bees.txt", text="hives", total_chars=5),))

        doc = (await rig.ask("/export", chat="100")).attachment
        assert doc is not None
        text = doc.data.decode("utf-8")
        assert ("Files you sent lately, kept a day for me to read again (names only here): "
                "q3 plan.pdf (2026-03-01 12:00), team.xlsx (2026-03-01 12:00).") in text
        assert "bees.txt" not in text and "budget 40k" not in text

        ask = (await rig.ask("/forget all", chat="100")).text
        assert "2 files you sent lately" in ask
        done = (await rig.ask(f"/forget all {ask.rsplit(' ', 1)[1]}", chat="100")).text
        assert done.startswith("Erased for good:") and "2 files you sent lately" in done
        assert files.owned(ALICE) == [] and [f.name for f in files.files("telegram:-5")] == ["bees.txt"]
        left = await rig.sessions.db.fetchall("SELECT owner, name FROM recent_files")
        assert [(r[0], r[1]) for r in left] == [(BOB, "bees.txt")]


async def test_export_once_a_minute_per_user_and_only_in_a_private_chat(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        rig.loop.commands = UserCommands(rig.backend, everything=UserData(rig.backend, rig.sessions), clock=clock)
        await _seed(rig)
        group = await rig.ask("/export", chat="-5", group=True, mentioned=True)
        assert group.text.startswith("This command works only in a private chat with me") and group.attachment is None
        assert (await rig.ask("/export", chat="100")).attachment is not None
        clock.advance(timedelta(seconds=20))
        again = await rig.ask("/export", chat="100")
        assert again.text == "One export a minute: please ask again in 40 s." and again.attachment is None
        assert (await rig.ask("/导出", chat="100")).text == "每分钟只能导出一次；请 40 秒后再试。"
        assert (await rig.ask("/export", chat="200", sender="200")).attachment is not None  # Bob has his own minute
        clock.advance(timedelta(seconds=40))
        assert (await rig.ask("/export", chat="100")).attachment is not None
        assert fake_llm.requests == []


async def test_export_in_chinese_and_for_someone_nothing_is_kept_about(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        rig.loop.commands = UserCommands(rig.backend, everything=UserData(rig.backend, rig.sessions), clock=clock)
        await rig.engine.add(NewMemory(owner=ALICE, content="我喜欢喝燕麦拿铁咖啡", provenance=WHERE))
        zh = await rig.ask("/导出", chat="100")
        assert zh.text.startswith("这是我保存的关于你的一切") and zh.attachment is not None
        doc = zh.attachment.data.decode("utf-8")
        assert doc.startswith("# myclaw 记忆导出") and "我对你的了解" in doc and "我喜欢喝燕麦拿铁咖啡" in doc
        nobody = await rig.ask("/export", chat="300", sender="300")
        assert nobody.text == "I keep nothing about you, so there is nothing to export." and nobody.attachment is None


async def test_the_file_store_exports_memory_md_and_the_logged_lines_of_the_sender_only(
    tmp_path: Path, clock: ManualClock
) -> None:
    store = FileMemory(tmp_path / "ws", clock)
    await store.remember(ALICE, "Alice likes oat milk", provenance=WHERE)
    await store.remember(BOB, "Bob keeps bees", provenance=WHERE)
    await store.buffer([Turn(owner=ALICE, channel="telegram", chat_id="100", role="user", content="I moved to Suzhou")])
    commands = UserCommands(store, clock=clock)
    answer = await commands.answer("export", "", user=ALICE, private=True)
    assert answer.attachment is not None
    doc = answer.attachment.data.decode("utf-8")
    assert "Alice likes oat milk" in doc and "I moved to Suzhou" in doc and "bees" not in doc
    overview = await store.overview(ALICE)
    assert f"- [{overview.profile[0].ref}] Alice likes oat milk" in doc
    assert f"[{overview.recent[0].ref}] 2026-03-01:" in doc  # the id /forget takes


async def test_export_is_dated_in_the_users_own_time_zone_and_names_it(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    clock.set("2026-11-22T20:00:00Z")  # already the 23rd in Shanghai
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        zones = UserTimezones(rig.sessions.db)
        everything = UserData(rig.backend, rig.sessions, timezones=zones)
        rig.loop.commands = UserCommands(rig.backend, everything=everything, clock=clock, timezones=zones)
        await rig.engine.add(NewMemory(owner=ALICE, content="Alice likes oat milk", provenance=WHERE))
        assert (await rig.ask("/timezone Shanghai", chat="100")).text.startswith("Your time zone is now Asia/Shanghai")
        file = (await rig.ask("/export", chat="100")).attachment
        assert file is not None and file.filename == "myclaw-memory-2026-11-23.md"
        doc = file.data.decode("utf-8")
        assert doc.startswith("# myclaw memory export (2026-11-23 04:00 Asia/Shanghai)")
        assert "Your time zone: Asia/Shanghai (/timezone)." in doc
        bob = (await rig.ask("/export", chat="200", sender="200")).text
        assert bob == "I keep nothing about you, so there is nothing to export."  # her zone is not his


async def test_commands_answer_in_the_language_the_chat_is_held_in(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    """Alice's memories are in English but she now writes in Chinese: every
    command answers her in Chinese, with no English label or note left in."""
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        rig.loop.commands = UserCommands(rig.backend, everything=UserData(rig.backend, rig.sessions), clock=clock,
                                         timezones=UserTimezones(rig.sessions.db), incognito=Incognito(rig.sessions.db))
        ids = await _seed(rig)
        fake_llm.queue_reply("好的。")
        await rig.ask("我最近在学做咖啡", chat="100")
        await rig.settle()
        overview = (await rig.ask("/memory", chat="100")).text
        assert overview.startswith("我记得的关于你的事：3 条记忆，0 条对话摘要。")
        assert f"- [m{ids['coffee']} · {clock.now():%Y-%m-%d} · 来自 Telegram 上的对话] Alice likes oat milk" in overview
        assert f"- [m{ids['password']} · {clock.now():%Y-%m-%d} · 来自 Telegram 上的对话] （凭据，此处不显示）" in overview
        assert "credential" not in overview and "Newest" not in overview
        assert (await rig.ask("/forget m999999", chat="100")).text == "你没有编号为 m999999 的记忆。"
        usage = (await rig.ask("/forget 12", chat="100")).text
        assert usage.startswith("用法：/forget m12") and usage.endswith("不是编号：12（是 m12 吗？）。")
        assert (await rig.ask("/forget all", chat="100")).text.startswith("这会永久删除我保存的关于你的一切")
        assert (await rig.ask("/forget all 0000x", chat="100")).text.startswith("这个确认码不对或已过期")
        many = " ".join(f"m{i}" for i in range(1, 23))
        assert (await rig.ask(f"/forget {many}", chat="100")).text == "一次最多删除 20 条。"
        assert (await rig.ask("/timezone", chat="100")).text.startswith("我用网关的时区 UTC")
        assert (await rig.ask("/timezone Berlin", chat="100")).text.startswith("好的，你的时区是 Europe/Berlin")
        assert (await rig.ask("/timezone Mars/Olympus", chat="100")).text.startswith("我不认识时区“Mars/Olympus”。请发送城市或时区名")
        assert (await rig.ask("/incognito maybe", chat="100")).text.startswith("用法：/incognito")
        export = await rig.ask("/export", chat="100")
        assert export.text.startswith("这是我保存的关于你的一切") and export.attachment is not None
        assert export.attachment.data.decode("utf-8").startswith("# myclaw 记忆导出")
        # Bob writes in English about Chinese memories: English it is.
        await rig.engine.add(NewMemory(owner=BOB, content="用户喜欢喝乌龙茶", provenance=WHERE))
        fake_llm.queue_reply("Sure.")
        await rig.ask("I am learning to make tea", chat="200", sender="200")
        await rig.settle()
        assert (await rig.ask("/memory", chat="200", sender="200")).text.startswith("What I remember about you:")
        assert (await rig.ask("/forget m999999", chat="200", sender="200")).text == (
            "You have no memory with id m999999.")
        assert "Not an id: 12 (did you mean m12?)." in (await rig.ask("/forget 12", chat="200", sender="200")).text


async def test_memory_shows_a_full_profile_a_page_at_a_time(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    """A profile at its cap of 100 entries made /memory one 21,000-character
    answer (six Telegram messages) before the newest memories; it shows the
    most important entries and says where the rest are."""
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        for i in range(100):
            await rig.engine.add(NewMemory(owner=ALICE, tier=1, content=f"profile entry {i:03d} " + "x" * 150,
                                           category=Category.IDENTITY, importance=0.5 + i / 1000))
        text = (await rig.ask("/memory", chat="100")).text
        shown = re.findall(r"profile entry (\d{3})", text)
        assert shown == [f"{i:03d}" for i in range(99, 89, -1)]  # the ten most important, in order
        assert "…and 90 more always in mind: /export lists them all." in text
        assert len(text) < 4096  # one Telegram message


async def test_a_new_zone_names_one_existing_job_it_does_not_move_in_the_singular(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        cron = await CronStore.open(tmp_path / "cron.db", clock)
        try:
            zones = UserTimezones(rig.sessions.db)
            everything = UserData(rig.backend, rig.sessions, cron, timezones=zones)
            rig.loop.commands = UserCommands(rig.backend, everything=everything, clock=clock, timezones=zones)
            await cron.add(schedule="0 9 * * *", message="plan my day", channel="telegram", chat_id="100", user=ALICE)
            text = (await rig.ask("/timezone Berlin", chat="100")).text
            # Not made in her private chat (the operator's, or a group's): it stays (tests/gateway/test_time_walk_e2e.py).
            assert text.endswith(" 1 scheduled job (made in a group, or in a zone of its own) keeps its zone."), text
            await cron.add(schedule="0 9 * * *", message="每天早上九点总结计划", channel="telegram", chat_id="100", user=ALICE)
            text = (await rig.ask("/timezone 上海", chat="100")).text
            assert text.endswith("已有的 2 个定时任务（在群里或按指定时区设置的）保持原来的时区。"), text
        finally:
            await cron.close()


async def test_project_names_a_renamed_project_for_the_sender_only(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    """The user's own way to say a project was renamed, without the model:
    the old name's facts are then filed under the new one (memory/projects.py)."""
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        e = rig.engine
        await e.add(NewMemory(owner=ALICE, content="atlas stores its data in Postgres", project="atlas"))
        await e.add(NewMemory(owner=ALICE, content="webshop stores its data in MySQL", project="webshop"))
        assert "/project atlas orion" in (await rig.ask("/project", chat="100")).text
        text = (await rig.ask("/project atlas Orion", chat="100")).text
        assert text == "Noted: atlas is now called orion; the 1 memory I had under atlas is filed under orion."
        assert await e.project_aliases(ALICE) == {"atlas": "orion"} and await e.project_aliases(BOB) == {}
        assert "atlas → orion" in (await rig.ask("/project", chat="100")).text
        doc = (await rig.ask("/export", chat="100")).attachment
        assert doc is not None and "Your renamed projects: atlas → orion (/project)." in doc.data.decode("utf-8")
        hits = await rig.backend.recall(ALICE, "where does orion store its data?")
        assert hits[0].content == "atlas stores its data in Postgres"
        # Bad input: said so, nothing changed; in Chinese for a Chinese command.
        assert "renamed to itself" in (await rig.ask("/project atlas ATLAS", chat="100")).text
        assert "/project atlas orion" in (await rig.ask("/project atlas", chat="100")).text
        assert (await rig.ask("/project 删除 atlas", chat="100")).text == (
            "好的，atlas 不再是别的项目的旧名。改名时移过去的 1 条记忆归回 atlas 名下。")
        assert await e.project_aliases(ALICE) == {}
        # Un-renamed: the fact is atlas's again, found by that name.
        assert [m.project for m in await e.list_memories(ALICE) if "Postgres" in m.content] == ["atlas"]
        hits = await rig.backend.recall(ALICE, "where does atlas store its data?")
        assert hits[0].content == "atlas stores its data in Postgres"
        await rig.ask("/project atlas orion", chat="100")
        assert (await rig.ask("/project remove atlas", chat="100")).text == (
            "Done: atlas is no longer another project's old name. "
            "The 1 memory the rename moved is filed under atlas again.")
        assert "no renamed" in (await rig.ask("/project remove atlas", chat="100")).text.lower()
        assert "private chat" in (await rig.ask("/project atlas orion", chat="-5", group=True, mentioned=True)).text


async def test_project_rename_of_a_name_nothing_is_filed_under_says_so(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    """A rename claims no move that did not happen: nothing under atlas yet
    is said, and the alias still files what comes later under orion."""
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        e = rig.engine
        await e.add(NewMemory(owner=BOB, content="atlas is Bob's hiking club", project="atlas"))  # not Alice's
        text = (await rig.ask("/project atlas orion", chat="100")).text
        assert text == ("Noted: atlas is now called orion. Nothing was filed under atlas yet; "
                        "what I learn of atlas from now on goes under orion."), text
        assert await e.project_aliases(ALICE) == {"atlas": "orion"}
        assert [m.project for m in await e.list_memories(BOB)] == ["atlas"]
        text = (await rig.ask("/project 星图 猎户座", chat="100")).text
        assert text == "记下了：星图 现在叫 猎户座。星图 名下还没有记得的事；以后关于 星图 的事都记在 猎户座 名下。", text
        await e.add(NewMemory(owner=ALICE, content="nova ships in May", project="nova"))
        await e.add(NewMemory(owner=ALICE, content="nova has two testers", project="nova"))
        text = (await rig.ask("/project 新星 新名", chat="100")).text
        assert "还没有记得的事" in text
        text = (await rig.ask("/project nova vega", chat="100")).text
        assert text == "Noted: nova is now called vega; the 2 memories I had under nova are filed under vega.", text
        # Bad names are refused in the language of the command, not in memory's English.
        text = (await rig.ask("/project 猎户座 猎户座", chat="100")).text
        assert text == "没有改名：猎户座 本来就叫这个名字。", text
        text = (await rig.ask("/project 猎户座 ！！", chat="100")).text
        assert text == "没有改名：“！！”不能用作项目名（要有字母、数字或汉字，比如 猎户座）。", text
        text = (await rig.ask("/project vega !!", chat="100")).text
        assert text == "Nothing renamed: not a project name: '!!' (letters, digits or CJK, e.g. 'orion')", text


async def test_memory_search_tells_a_match_from_what_was_said_next_to_it(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    # "Miso, she is three" holds no "cat": it came in as the next turn of a
    # hit, and was listed under "Memories matching “cat”" all the same.
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        chat = Provenance(channel="telegram", chat_id="100", session="s1")
        ask = (await rig.engine.add(NewMemory(owner=ALICE, content="Alice asked what my cat is called",
                                              category=Category.CONVERSATION, provenance=chat))).id
        answer = (await rig.engine.add(NewMemory(owner=ALICE, content="Miso, she is three",
                                                 category=Category.CONVERSATION, provenance=chat))).id
        lines = (await rig.ask("/memory cat", chat="100")).text.splitlines()
        assert lines[0] == "Memories matching “cat”:" and lines[1].startswith(f"- [m{ask} · ")
        assert lines[2:4] == ["", "Said next to them in the same conversation (context, not matches):"]
        assert lines[4].startswith(f"- [m{answer} · ") and lines[4].endswith("Miso, she is three")
        chat = Provenance(channel="telegram", chat_id="100", session="s2")
        for said in ("你家的猫叫什么名字？", "咪咪，三岁了。"):
            await rig.engine.add(NewMemory(owner=ALICE, content=said, category=Category.CONVERSATION, provenance=chat))
        zh = (await rig.ask("/memory 猫", chat="100")).text.splitlines()
        assert zh[0] == "与“猫”有关的记忆：" and zh[1].endswith("你家的猫叫什么名字？")
        assert zh[2:4] == ["", "同一对话中紧挨着它们说的（上下文，并非匹配）："] and zh[4].endswith("咪咪，三岁了。")


async def test_jobs_remove_without_an_id_says_how_and_lists_them(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    """"/jobs remove" alone answered "You have no scheduled message <id>",
    as if they had typed "<id>": it says how to cancel one, with their jobs
    to pick from."""
    async with make_rig(tmp_path, clock, fake_llm) as rig:
        cron = await CronStore.open(tmp_path / "cron.db", clock)
        try:
            everything = UserData(rig.backend, rig.sessions, cron)
            rig.loop.commands = UserCommands(rig.backend, everything=everything, clock=clock)
            assert (await rig.ask("/jobs remove", chat="100")).text == (
                "Usage: /jobs remove <id> cancels one of your scheduled messages. You have none.")
            daily = await cron.add(schedule="0 9 * * 1-5", message="summarise my plans", channel="telegram",
                                   chat_id="100", user=ALICE, private=True, tz=ZoneInfo("Asia/Shanghai"))
            text = (await rig.ask("/jobs remove", chat="100")).text
            assert text.startswith("Usage: /jobs remove <id> cancels one of your scheduled messages:\n"), text
            assert f"[{daily.id}] 0 9 * * 1-5 (Asia/Shanghai): summarise my plans" in text
            assert "<id>:" not in text
            fake_llm.queue_reply("好的。")
            await rig.ask("我明天要开会", chat="300", sender="300")
            assert (await rig.ask("/jobs 取消", chat="300", sender="300")).text == (
                "用法：/jobs remove 编号 取消一个定时消息。你还没有定时消息。")
            assert [j.id for j in await cron.list() if not j.internal] == [daily.id]
        finally:
            await cron.close()
