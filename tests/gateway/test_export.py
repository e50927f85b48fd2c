"""The Markdown renderer shared by ``myclaw memory export`` and ``/export``."""

from __future__ import annotations

from datetime import UTC, datetime

from gateway.cron import CronJob
from gateway.export import UserExport, export_filename, mostly_chinese, render_markdown, render_user_export
from memory.types import Category, Event, Memory, OwnerData, Provenance, Source, Status

AT = "2026-11-22 09:30 UTC"


def _memory(mid: int, content: str, *, owner: str = "alice", tier: int = 2, category: Category = Category.EVENT,
            status: Status = Status.ACTIVE, project: str = "_global", topic: str = "_general",
            superseded_by: int | None = None, source_text: str = "") -> Memory:
    return Memory(
        id=mid, owner=owner, tier=tier, project=project, topic=topic, category=category, content=content,
        importance=0.7, source=Source.EXTRACTION, status=status, superseded_by=superseded_by,
        provenance=Provenance(channel="telegram", chat_id="100"), created_at="2026-11-20T08:00:00Z",
        updated_at="2026-11-21T08:00:00Z", last_accessed="", access_count=0, source_text=source_text,
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
        _memory(5, "Alice lives in Hangzhou", source_text="I moved to Hangzhou"),
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
    assert doc.index("## Tier 1 — profile") < doc.index("- [m1] Alice is a backend engineer _(identity, ")
    assert "## Tier 2 — knowledge — project atlas" in doc
    assert ("- [m2] Atlas runs on k8s _(decision, importance 0.70, extraction, 2026-11-20, telegram chat 100, "
            "topic deploy, updated 2026-11-21)_") in doc
    assert "- [m3] Alice lives in Berlin _(event, importance 0.70, extraction, 2026-11-20, superseded, " in doc
    assert "replaced by m5)_" in doc
    assert "- [m4] (a credential, not shown here) _(credential, " in doc and "tulip" not in doc
    assert "- [m5] Alice lives in Hangzhou _(" in doc and "  > drawn from: I moved to Hangzhou" in doc
    assert doc.index("- [e7] 2026-11-20: Booked flights") < doc.index("- [e8] 2026-11-21: Planned the trip\n  to Osaka")
    assert "## Scheduled jobs\n\n- [job-1] `0 9 * * 1-5` summarise my plans _(telegram chat 100, next 2026-11-23" in doc
    assert doc.endswith("## Waiting to be learnt\n\n- 3 lines of our conversations still waiting to be learnt from.\n")


def test_a_chinese_export_is_labelled_in_chinese() -> None:
    data = OwnerData("bob", [_memory(9, "我喜欢喝燕麦拿铁咖啡", owner="bob"),
                             _memory(10, "服务器密码是 hunter2", owner="bob", category=Category.CREDENTIAL)],
                     [_event(3, "2026-11-21", "讨论了部署计划", owner="bob")])
    zh = mostly_chinese([m.content for m in data.memories])
    doc = render_user_export(UserExport(data), at=AT, zh=zh)
    assert zh and doc.startswith(f"# myclaw 记忆导出 ({AT})\n\n我保存的关于你的一切：2 条记忆、1 条每日事件、0 个定时任务。")
    assert "## 第 2 层 — 知识" in doc and "- [m9] 我喜欢喝燕麦拿铁咖啡 _(event, 重要性 0.70" in doc
    assert "- [m10] （凭据，此处不显示）" in doc and "hunter2" not in doc
    assert "## 第 3 层 — 每日事件\n\n- [e3] 2026-11-21: 讨论了部署计划" in doc
    assert "定时任务\n" not in doc and "等待学习" not in doc  # no empty sections
    assert not mostly_chinese(["Alice lives in Hangzhou", "Atlas runs on k8s", "我喜欢"])


def test_an_empty_user_gets_a_file_saying_so() -> None:
    doc = render_user_export(UserExport(OwnerData("carol", [], [])), at=AT, zh=False)
    assert "Everything I keep about you: 0 memories, 0 daily events, 0 scheduled jobs." in doc
    assert doc.endswith("I don't remember anything about you yet.\n") and "## " not in doc


def test_the_operators_export_groups_by_owner_and_hides_nothing() -> None:
    bob = OwnerData("bob", [_memory(6, "Bob keeps bees", owner="bob")], [])
    doc = render_markdown([bob, ALICE, OwnerData("nobody", [], [])], at=AT)
    assert doc.startswith(f"# myclaw memory export ({AT})\n\n## alice")
    assert doc.index("## alice") < doc.index("### Tier 1 — profile") < doc.index("## bob")
    assert "- [m4] Alice's vault password is tulip-4471 _(credential" in doc  # the operator's file: all of it
    assert "### Waiting to be learnt\n\n- 3 lines waiting for extraction" in doc and "## nobody" not in doc


def test_the_file_is_named_by_the_day() -> None:
    assert export_filename(datetime(2026, 11, 22, 23, 59, tzinfo=UTC)) == "myclaw-memory-2026-11-22.md"
