"""The Markdown renderer shared by ``myclaw memory export`` and ``/export``."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from gateway.cron import CronJob
from gateway.export import (
    Spool,
    UserExport,
    chinese_enough,
    export_filename,
    mostly_chinese,
    render_markdown,
    render_user_export,
    write_markdown,
    write_user_export,
)
from memory import MemoryEngine, NewMemory
from memory.filestore import FileMemory
from memory.backend import Turn
from memory.service import SqliteMemory
from memory.types import Category, Event, Memory, OwnerData, Provenance, Source, Status

AT = "2026-11-22 09:30 UTC"


def _memory(mid: int, content: str, *, owner: str = "alice", tier: int = 2, category: Category = Category.EVENT,
            status: Status = Status.ACTIVE, project: str = "_global", topic: str = "_general",
            superseded_by: int | None = None, source_text: str = "", search_terms: tuple[str, ...] = ()) -> Memory:
    return Memory(
        id=mid, owner=owner, tier=tier, project=project, topic=topic, category=category, content=content,
        importance=0.7, source=Source.EXTRACTION, status=status, superseded_by=superseded_by,
        provenance=Provenance(channel="telegram", chat_id="100"), created_at="2026-11-20T08:00:00Z",
        updated_at="2026-11-21T08:00:00Z", last_accessed="", access_count=0, source_text=source_text,
        search_terms=search_terms,
    )


def _event(eid: int, day: str, summary: str, owner: str = "alice") -> Event:
    return Event(id=eid, owner=owner, event_date=day, channel="telegram", chat_id="100", summary=summary,
                 raw_tokens=10, is_compressed=False, provenance=Provenance(), created_at=day)


ALICE = OwnerData(
    owner="alice",
    memories=[
        _memory(1, "Alice is a backend engineer", tier=1, category=Category.IDENTITY),
        _memory(2, "Atlas runs on k8s", project="atlas", topic="deploy", category=Category.DECISION),
        _memory(3, "Alice lives in Berlin", status=Status.SUPERSEDED, superseded_by=5),
        _memory(4, "Alice's vault password is tulip-4471", category=Category.CREDENTIAL,
                source_text="my vault password is tulip-4471"),
        _memory(5, "Alice lives in Hangzhou", source_text="I moved to Hangzhou", search_terms=("杭州", "home")),
    ],
    events=[_event(8, "2026-11-21", "Planned the trip\nto Osaka"), _event(7, "2026-11-20", "Booked flights")],
    waiting=3,
)


def test_a_user_export_shows_every_tier_status_and_date_and_hides_credentials() -> None:
    job = CronJob(id="job-1", schedule="0 9 * * 1-5", message="summarise  my\nplans", kind="agent",
                  channel="telegram", chat_id="100", user="alice", next_run_at="2026-11-23T09:00:00Z")
    doc = render_user_export(UserExport(ALICE, jobs=[job], history=12), at=AT, zh=False)
    assert doc.startswith(f"# myclaw memory export ({AT})\n\nEverything I keep about you: 5 memories, 2 daily events, "
                          "1 scheduled job.")
    assert "Credentials are listed by id only" in doc and "Also kept: 12 messages of our recent conversations" in doc
    # Headings in a user's words, not the tiers of the design ("Tier 2 — knowledge").
    assert doc.index("## Who you are") < doc.index("- [m1] Alice is a backend engineer _(identity, ")
    assert "## What I know about you — project atlas" in doc
    assert "Tier" not in doc
    assert ("- [m2] Atlas runs on k8s _(decision, importance 0.70, 2026-11-20, from a chat on Telegram, "
            "topic deploy, updated 2026-11-21)_") in doc
    assert "- [m3] Alice lives in Berlin _(event, importance 0.70, 2026-11-20, superseded, from a chat on Telegram" in doc
    assert "replaced by m5)_" in doc
    assert "- [m4] (a credential, not shown here) _(credential, " in doc and "tulip" not in doc
    assert "- [m5] Alice lives in Hangzhou _(" in doc and "  > drawn from: I moved to Hangzhou" in doc
    # The words it is found by are the user's data too, on a line of their own, never as the fact.
    assert "  > drawn from: I moved to Hangzhou\n  > found by: 杭州, home\n" in doc
    assert doc.index("## What happened, by day\n\n- [e7] 2026-11-20: Booked flights _(summary of a chat on Telegram)_") < doc.index(
        "- [e8] 2026-11-21: Planned the trip\n  to Osaka _(summary of a chat on Telegram)_")
    assert ("## Scheduled jobs\n\n- [job-1] `0 9 * * 1-5` summarise my plans _(replies in a chat on Telegram, "
            "next 2026-11-23 09:00 (UTC))_") in doc
    assert "chat 100" not in doc  # a chat's number means nothing to its reader
    assert doc.endswith("## Waiting to be learnt\n\n- 3 lines of our conversations still waiting to be learnt from.\n")


def test_a_chinese_export_is_labelled_in_chinese() -> None:
    data = OwnerData("bob", [_memory(9, "我喜欢喝燕麦拿铁咖啡", owner="bob"),
                             _memory(10, "服务器密码是 hunter2", owner="bob", category=Category.CREDENTIAL)],
                     [_event(3, "2026-11-21", "讨论了部署计划", owner="bob")])
    zh = mostly_chinese([m.content for m in data.memories])
    doc = render_user_export(UserExport(data), at=AT, zh=zh)
    assert zh and doc.startswith(f"# myclaw 记忆导出 ({AT})\n\n我保存的关于你的一切：2 条记忆、1 条每日事件、0 个定时任务。")
    assert "## 我对你的了解" in doc and "层" not in doc
    assert "- [m9] 我喜欢喝燕麦拿铁咖啡 _(事件，重要性 0.70，2026-11-20，来自 Telegram 上的对话，更新于 2026-11-21)_" in doc
    assert "- [m10] （凭据，此处不显示）" in doc and "hunter2" not in doc
    assert "## 每天发生的事\n\n- [e3] 2026-11-21: 讨论了部署计划 _(Telegram 上的对话摘要)_" in doc
    assert "- [m10] （凭据，此处不显示） _(凭据，" in doc
    assert "定时任务\n" not in doc and "等待学习" not in doc  # no empty sections
    assert not mostly_chinese(["Alice lives in Hangzhou", "Atlas runs on k8s", "我喜欢"])


def _made(mid: int, content: str, source: Source, p: Provenance, **kw: object) -> Memory:
    return replace(_memory(mid, content, **kw), source=source, provenance=p)  # type: ignore[arg-type]


WEEKLY = Provenance(refs=("weekly", "m:1", "m:2", "m:99"), date_from="2026-11-02", date_to="2026-11-15")


def test_every_line_says_where_it_came_from_in_words_and_names_only_ids_of_the_file() -> None:
    data = OwnerData("alice", [
        _memory(1, "Alice uses pnpm"), _memory(2, "Alice uses vite"),
        _made(3, "Alice's toolchain: pnpm and vite", Source.COMPRESSION, WEEKLY),
        _made(4, "Alice drinks tea", Source.MIGRATION, Provenance(refs=("MEMORY.md",))),
        _made(5, "Alice likes Go", Source.MANUAL, Provenance(channel="feishu", chat_id="oc_1")),
        _made(6, "Staging is at 10.0.0.5", Source.MANUAL, Provenance(channel="cli")),
    ], [_event(7, "2026-11-20", "Talked about tools")])
    for doc in (render_user_export(UserExport(data), at=AT, zh=False), render_markdown([data], at=AT)):
        assert ("- [m3] Alice's toolchain: pnpm and vite _(event, importance 0.70, 2026-11-20, weekly summary of "
                "3 notes, 2026-11-02 to 2026-11-15, built on m1, m2, updated 2026-11-21)_") in doc
        assert "imported from MEMORY.md" in doc and "told by you on Feishu" in doc and "added by the operator" in doc
        for raw in ("m:1", "weekly,", "m99", "chat oc_1", "feishu chat", "extraction", "compression", "manual"):
            assert raw not in doc
    zh = render_user_export(UserExport(data), at=AT, zh=True)
    assert "每周汇总（3 条记忆，2026-11-02 至 2026-11-15），基于 m1、m2，" in zh
    assert "从 MEMORY.md 导入" in zh and "你在飞书上告诉我的" in zh and "由管理员添加" in zh


def test_the_file_stores_notes_are_named_by_their_file() -> None:
    data = OwnerData("alice", [_made(1, "Alice likes tea", Source.MANUAL, Provenance(refs=("MEMORY.md",)), tier=1)],
                     [Event(id=2, owner="alice", event_date="2026-11-20", channel="", chat_id="", summary="Tea talk",
                            raw_tokens=3, is_compressed=False, created_at="2026-11-20",
                            provenance=Provenance(refs=("2026-11-20.md",), date_from="2026-11-20"))])
    doc = render_user_export(UserExport(data), at=AT, zh=False)
    assert "- [m1] Alice likes tea _(event, importance 0.70, 2026-11-20, noted in MEMORY.md, " in doc
    assert "- [e2] 2026-11-20: Tea talk _(noted in 2026-11-20.md)_" in doc  # the daily file it is in


def test_the_words_a_credential_came_from_stay_hidden_under_another_fact_too() -> None:
    said = "my wifi is HomeNet, password tulip-4471"
    data = OwnerData("alice", [
        _memory(1, "Alice's wifi is called HomeNet", category=Category.CONFIG, source_text=said),
        _memory(2, "Alice's wifi password is tulip-4471", category=Category.CREDENTIAL, source_text=said),
        _memory(3, "Alice lives in Hangzhou", source_text="I moved to Hangzhou"),
    ], [])
    doc = render_user_export(UserExport(data), at=AT, zh=False)
    assert "- [m1] Alice's wifi is called HomeNet _(config" in doc and "tulip" not in doc
    assert "  > drawn from: I moved to Hangzhou" in doc
    assert "tulip-4471" in render_markdown([data], at=AT)  # the operator's file hides nothing


def test_a_chinese_export_says_where_jobs_reply_and_when_they_run_next_in_their_zone() -> None:
    job = CronJob(id="job-2", schedule="0 9 * * *", message="提醒我喝水", kind="agent", channel="feishu",
                  chat_id="oc_1", user="bob", private=True, timezone="Asia/Shanghai",
                  next_run_at="2026-11-23T01:00:00Z")
    doc = render_user_export(UserExport(OwnerData("bob", [], []), jobs=[job]), at=AT, zh=True)
    assert "- [job-2] `0 9 * * *` 提醒我喝水 _(回复发到飞书上的私聊，下次 2026-11-23 09:00 (Asia/Shanghai))_" in doc


def test_an_empty_user_gets_a_file_saying_so() -> None:
    doc = render_user_export(UserExport(OwnerData("carol", [], [])), at=AT, zh=False)
    assert "Everything I keep about you: 0 memories, 0 daily events, 0 scheduled jobs." in doc
    assert doc.endswith("I don't remember anything about you yet.\n") and "## " not in doc


def test_the_operators_export_groups_by_owner_and_hides_nothing() -> None:
    bob = OwnerData("bob", [_memory(6, "Bob keeps bees", owner="bob")], [])
    doc = render_markdown([bob, ALICE, OwnerData("nobody", [], [])], at=AT)
    assert doc.startswith(f"# myclaw memory export ({AT})\n\n## alice")
    # The operator's file keeps the tiers the CLI's --tier takes, after the plain words.
    assert doc.index("## alice") < doc.index("### Profile (tier 1)") < doc.index("## bob")
    assert "### Knowledge (tier 2) — project atlas" in doc and "### Daily events (tier 3)" in doc
    assert "- [m4] Alice's vault password is tulip-4471 _(credential" in doc  # the operator's file: all of it
    assert "### Waiting to be learnt\n\n- 3 lines waiting for extraction" in doc and "## nobody" not in doc


def test_the_file_is_named_by_the_day() -> None:
    assert export_filename(datetime(2026, 11, 22, 23, 59, tzinfo=UTC)) == "myclaw-memory-2026-11-22.md"


async def _written(backend: SqliteMemory | FileMemory, export: UserExport, *, zh: bool, page: int) -> str:
    index = await backend.owner_index(export.data.owner)
    parts: list[str] = []
    await write_user_export(parts.append, export, index, backend.owner_rows(export.data.owner, index, page=page),
                            at=AT, zh=zh, tz=ZoneInfo("Asia/Shanghai"))
    return "".join(parts)


async def test_written_page_by_page_is_the_text_rendered_whole(tmp_path: Path) -> None:
    """The safety net of the paged export: on a real store, every page size
    gives byte for byte what the in-memory renderer gives."""
    where = Provenance(channel="telegram", chat_id="100")
    async with await MemoryEngine.open(tmp_path / "memory.db") as engine:
        backend = SqliteMemory(engine)
        ids = await engine.add_many([
            (NewMemory(owner="alice", tier=1, category=Category.IDENTITY, content="Alice is a backend engineer",
                       provenance=where), None),
            (NewMemory(owner="alice", content="Atlas runs on k8s", project="atlas", topic="deploy",
                       category=Category.DECISION, provenance=where, source_text="we moved atlas\nto k8s"), None),
            (NewMemory(owner="alice", content="Alice lives in Berlin", provenance=where), None),
            (NewMemory(owner="alice", content="Alice's vault password is tulip-4471", category=Category.CREDENTIAL,
                       source_text="my vault password is tulip-4471\nand I use it for atlas"), None),
            (NewMemory(owner="alice", content="Alice uses the vault for atlas", provenance=where,
                       source_text="my vault password is tulip-4471\nand I use it for atlas"), None),
            (NewMemory(owner="alice", content="爱丽丝喜欢燕麦拿铁", project="咖啡", provenance=where,
                       source_text="我喜欢燕麦拿铁"), None),
            (NewMemory(owner="bob", content="Bob keeps bees", source_text="I keep bees"), None),
        ])
        await engine.add_many([(NewMemory(owner="alice", tier=1, category=Category.IDENTITY, source=Source.COMPRESSION,
                                          content="Alice likes k8s", provenance=Provenance(refs=(f"m:{ids[1]}",))), None)])
        await engine.set_status(ids[2], Status.SUPERSEDED)
        await engine.add_event("alice", "2026-11-21", "Planned the trip\nto Osaka", channel="telegram", chat_id="100")
        await engine.add_event("alice", "2026-11-20", "订了机票", channel="telegram", chat_id="100")
        await engine.add_event("bob", "2026-11-20", "Bob harvested honey")
        data = await backend.owner_data("alice")
        export = UserExport(replace(data, memories=[], events=[]), history=3, timezone="Asia/Shanghai")
        for zh in (False, True):
            whole = render_user_export(replace(export, data=data), at=AT, zh=zh, tz=ZoneInfo("Asia/Shanghai"))
            assert "tulip" not in whole and "Bob" not in whole and ("基于 m" if zh else "built on m") in whole  # worth comparing
            for page in (1, 2, 500):
                assert await _written(backend, export, zh=zh, page=page) == whole
        index = await backend.owner_index("alice")
        assert chinese_enough(index.chinese, len(index.memory_ids) + len(index.event_ids)) == mostly_chinese(
            [*(m.content for m in data.memories), *(e.summary for e in data.events)])
        assert index.chinese == 2



async def test_the_operators_export_written_page_by_page_is_the_text_rendered_whole(tmp_path: Path) -> None:
    """``myclaw memory export --format markdown`` streamed: byte for byte
    what the in-memory renderer gave (the file the CLI wrote: its text and
    a newline), on every page size, with credentials shown, projects, CJK,
    a superseded fact, lines waiting, and an owner with nothing left out."""
    where = Provenance(channel="feishu", chat_id="oc_1")
    async with await MemoryEngine.open(tmp_path / "memory.db") as engine:
        backend = SqliteMemory(engine)
        ids = await engine.add_many([
            (NewMemory(owner="bob", content="Bob keeps bees", source_text="I keep bees"), None),
            (NewMemory(owner="alice", tier=1, category=Category.IDENTITY, content="Alice is a backend engineer",
                       provenance=where), None),
            (NewMemory(owner="alice", content="Alice's vault password is tulip-4471", category=Category.CREDENTIAL,
                       source_text="my vault password is tulip-4471"), None),
            (NewMemory(owner="alice", content="爱丽丝住在柏林", provenance=where, source_text="我住在柏林"), None),
            (NewMemory(owner="alice", content="爱丽丝喜欢燕麦拿铁", project="咖啡", provenance=where), None),
            (NewMemory(owner="alice", content="Atlas runs on k8s", project="atlas", topic="deploy",
                       category=Category.DECISION, provenance=where, source_text="we moved atlas\nto k8s"), None),
            (NewMemory(owner="alice", content="Alice lives in Hangzhou", provenance=where), None),
        ])
        await engine.set_status(ids[3], Status.SUPERSEDED)
        await engine.add_event("alice", "2026-11-21", "Planned the trip\nto Osaka", channel="telegram", chat_id="100")
        await engine.add_event("alice", "2026-11-20", "订了机票", channel="telegram", chat_id="100")
        await engine.add_event("bob", "2026-11-20", "Bob harvested honey")
        await backend.buffer([Turn("carol", "telegram", "7", "user", "I might move to Lisbon")])
        owners = ["bob", "nobody", "carol", "alice"]
        whole = render_markdown([await backend.owner_data(u) for u in owners], at=AT) + "\n"
        assert "tulip-4471" in whole and "柏林" in whole and "— project 咖啡" in whole and "## carol" in whole
        assert "## nobody" not in whole  # worth comparing
        for page in (1, 2, 500):
            parts: list[str] = []
            assert await write_markdown(parts.append, backend, owners, at=AT, page=page) == (7, 3)
            assert "".join(parts) == whole

async def test_the_file_store_is_written_as_rendered(tmp_path: Path) -> None:
    backend = FileMemory(tmp_path / "workspace")
    await backend.remember("alice", "Alice likes tea", provenance=Provenance(channel="telegram"))
    await backend.remember("alice", "爱丽丝喜欢茶", provenance=Provenance(channel="telegram"))
    data = await backend.owner_data("alice")
    assert data.memories or data.events
    export = UserExport(replace(data, memories=[], events=[]))
    for zh in (False, True):
        whole = render_user_export(replace(export, data=data), at=AT, zh=zh, tz=ZoneInfo("Asia/Shanghai"))
        assert await _written(backend, export, zh=zh, page=1) == whole


def test_a_spool_past_its_limit_moves_to_an_anonymous_file_and_reads_back_whole() -> None:
    small = Spool(limit=1 << 10)
    small.write("# a small export\n")
    kept = small.attachment("f.md", "text/markdown")
    assert kept.file is None and kept.data == b"# a small export\n" and kept.size == 17
    big = Spool(limit=100)
    lines = [f"- [m{i}] fact {i} 事实\n" for i in range(20_000)]
    for line in lines:
        big.write(line)
    file = big.attachment("f.md", "text/markdown")
    try:
        assert file.data == b"" and file.file is not None
        whole = "".join(lines).encode("utf-8")
        assert file.size == len(whole)
        for _ in range(2):  # each open reads from the start: a retried upload sends it all again
            with file.open() as f:
                assert f.read() == whole
        assert "事实" not in repr(file)
    finally:
        file.close()
        file.close()  # safe twice
    assert file.file is not None and file.file.closed


def test_lines_set_aside_are_said_apart_from_the_lines_still_waiting() -> None:
    data = replace(ALICE, waiting=2, set_aside=1)
    doc = render_user_export(UserExport(data), at=AT, zh=False)
    assert "## Waiting to be learnt\n\n- 2 lines of our conversations still waiting to be learnt from." in doc
    assert doc.endswith("## Not learnt\n\n- 1 line I could not learn from: too long for the memory model.\n")
    doc = render_user_export(UserExport(replace(data, waiting=0)), at=AT, zh=True)
    assert "等待学习" not in doc and doc.endswith("## 未能学习\n\n- 1 条内容我没能学习：对记忆模型来说太长了。\n")
    doc = render_markdown([data], at=AT)
    assert "### Waiting to be learnt\n\n- 2 lines waiting for extraction" in doc
    assert doc.endswith("### Not learnt\n\n- 1 line set aside: too long for the memory model "
                        "(myclaw memory retry-set-aside tries it again)")
    only = OwnerData("dan", [], [], set_aside=2)  # nothing else kept: still theirs, still listed
    assert "## dan" in render_markdown([only], at=AT)


def test_a_memory_shared_with_groups_says_so() -> None:
    """/share lets a fact be read in groups: the export, everything kept
    about the user, says which of theirs are."""
    every = replace(_memory(6, "Alice is vegetarian"), provenance=Provenance(channel="telegram", chat_id="100",
                                                                           shared=("*",)))
    one = replace(_memory(7, "Alice bikes to work"), provenance=Provenance(channel="telegram", chat_id="100",
                                                                          shared=("telegram:-500",)))
    two = replace(_memory(9, "Alice plays chess"), provenance=Provenance(shared=("telegram:-500", "feishu:oc_x")))
    doc = render_user_export(UserExport(replace(ALICE, memories=[every, one, _memory(8, "Alice has a cat"), two]),
                                        groups={"telegram:-500": "Hiking club"}),
                             at=AT, zh=False)
    assert "- [m6] Alice is vegetarian _(" in doc and "shared with every group where you ask)_" in doc
    # Each group by the title the gateway saw it under (gateway/chattitles.py), else its id.
    assert "- [m7] Alice bikes to work _(" in doc and "shared with Hiking club)_" in doc
    assert "shared with Hiking club and feishu:oc_x)_" in doc
    assert "- [m8] Alice has a cat _(event, importance 0.70, 2026-11-20, from a chat on Telegram, " \
           "updated 2026-11-21)_" in doc
    zh = render_user_export(UserExport(replace(ALICE, memories=[every, one]), groups={"telegram:-500": "徒步群"}),
                            at=AT, zh=True)
    assert "可在你提问的每个群中使用" in zh and "可在群“徒步群”中使用" in zh


async def test_every_export_form_gives_a_handles_rows_from_before_the_mapping_their_own_section(tmp_path: Path) -> None:
    """telegram:777 stored rows before memory.identities mapped it to alice.
    The paged writers gave them a section each (``/export``: under a heading
    naming the handle, its credential hidden like hers even when the words
    are only in her rows; the operator's file: under the handle, saying it
    was mapped), but the in-memory renderers, which the writers are checked
    against, had no such section: what they rendered for a person with
    handles was not what was written. Now both agree, byte for byte."""
    async with await MemoryEngine.open(tmp_path / "memory.db") as engine:
        backend = SqliteMemory(engine)
        await engine.add_many([
            (NewMemory(owner="alice", content="Alice drinks tea", source_text="I drink tea"), None),
            (NewMemory(owner="alice", content="Alice's locker code is 4471", category=Category.CREDENTIAL,
                       source_text="my locker code is 4471"), None),
            (NewMemory(owner="telegram:777", tier=1, category=Category.IDENTITY, content="Alice's blood type is AB"),
             None),
            (NewMemory(owner="telegram:777", content="Alice trains at the gym", source_text="my locker code is 4471"),
             None),
            (NewMemory(owner="bob", content="Bob keeps bees"), None),
        ])
        await engine.add_event("telegram:777", "2026-11-20", "Gave blood at the clinic")
        await backend.buffer([Turn("telegram:777", "telegram", "777", "user", "I might move to Lisbon")])
        data, handle = await backend.owner_data("alice"), await backend.owner_data("telegram:777")
        index, handle_index = await backend.owner_index("alice"), await backend.owner_index("telegram:777")
        export = UserExport(replace(data, memories=[], events=[]), earlier=[("telegram:777", handle_index)])
        for zh in (False, True):
            whole = render_user_export(replace(export, data=data), at=AT, zh=zh, earlier=[handle])
            assert "telegram:777" in whole and "blood type is AB" in whole and "Bob" not in whole
            assert "4471" not in whole, whole  # her credential's words, said as the handle too, stay hidden
            parts: list[str] = []
            await write_user_export(parts.append, export, index, backend.owner_rows("alice", index, page=1),
                                    at=AT, zh=zh, earlier=[backend.owner_rows("telegram:777", handle_index, page=1)])
            assert "".join(parts) == whole
        mapped = {"telegram:777": "alice"}
        whole = render_markdown([data, handle], at=AT, mapped=mapped) + "\n"
        assert "## telegram:777\n\nstored under telegram:777 before memory.identities mapped it to alice" in whole
        parts = []
        await write_markdown(parts.append, backend, ["telegram:777", "alice"], at=AT, page=1, mapped=mapped)
        assert "".join(parts) == whole


def test_a_user_export_counts_their_edits_waiting_to_be_applied() -> None:
    """An edit of theirs waiting in the inbox holds their new words: their
    export counts it (never the words), as it counts messages waiting."""
    for zh, said in ((False, "- 1 edit of your messages, still waiting to be applied (not listed here)."),
                     (True, "- 你对消息的 2 处修改还在等待生效（此处未列出）。")):
        doc = render_user_export(UserExport(ALICE, edits=2 if zh else 1), at=AT, zh=zh)
        assert said in doc, doc
    assert "waiting to be applied" not in render_user_export(UserExport(ALICE), at=AT, zh=False)
