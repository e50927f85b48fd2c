"""``myclaw cron ...`` and ``myclaw memory compress|flush|log`` end to end:
the real click commands on real files under a temporary MYCLAW_HOME, the
memory LLM over HTTP to the fake server (run in its own thread, since the
commands call ``asyncio.run``)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from click.testing import CliRunner

from gateway.cli import main
from gateway.resume import TurnContext
from gateway.sessions import SessionStore
from memory import MemoryEngine, NewMemory
from memory.backend import Turn
from memory.service import SqliteMemory
from tests.fakes.openai_server import FakeOpenAI, Reply


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MYCLAW_HOME", str(tmp_path))
    monkeypatch.setenv("MYCLAW_TIMEZONE", "Asia/Shanghai")
    return tmp_path


@pytest.fixture
def fake_llm(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    loop = asyncio.new_event_loop()
    fake = FakeOpenAI()
    ready = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(fake.start())
        ready.set()
        loop.run_forever()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    assert ready.wait(10)
    monkeypatch.setenv("MYCLAW_MEMORY_BASE_URL", fake.url)
    monkeypatch.setenv("MYCLAW_MEMORY_API_KEY", "sk-cli-test-123456")
    try:
        yield fake
    finally:
        asyncio.run_coroutine_threadsafe(fake.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        t.join(10)
        loop.close()


def cli(*args: str) -> Any:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def seed(home: Path, coro_fn: Any) -> None:
    async def go() -> None:
        engine = await MemoryEngine.open(home / "data" / "memory.db")
        try:
            await coro_fn(engine)
        finally:
            await engine.close()

    asyncio.run(go())


def test_cron_add_list_remove_persist(home: Path) -> None:
    r = cli("cron", "add", "-s", "0 9 * * 1-5", "-m", "早报", "--channel", "telegram", "--chat-id", "42",
            "-u", "alice", "--id", "morning")
    assert r.exit_code == 0, r.output
    assert "added morning" in r.output and "Asia/Shanghai" in r.output
    assert (home / "data" / "cron.db").exists()
    r = cli("cron", "list", "--json")
    [job] = json.loads(r.stdout)
    assert (job["id"], job["schedule"], job["message"], job["user"], job["chat_id"]) == ("morning", "0 9 * * 1-5", "早报", "alice", "42")
    assert job["next_run_at"].endswith("T01:00:00Z")  # 09:00 in Shanghai
    assert "morning" in cli("cron", "list").output
    bad = cli("cron", "add", "-s", "soon", "-m", "x", "--channel", "telegram", "--chat-id", "1", "-u", "u")
    assert bad.exit_code == 2 and "Invalid value for '--schedule': invalid cron schedule" in bad.output
    dup = cli("cron", "add", "-s", "0 9 * * *", "-m", "x", "--channel", "telegram", "--chat-id", "1", "-u", "u", "--id", "morning")
    assert dup.exit_code == 1 and "already exists" in dup.output
    assert cli("cron", "remove", "morning").stdout.strip() == "removed morning"
    assert cli("cron", "remove", "morning").exit_code == 1
    assert cli("cron", "list").output.strip() == "no jobs"


def test_cron_add_uses_private_memory_only_when_told_the_chat_is_the_users_own(home: Path) -> None:
    base = ("cron", "add", "-s", "0 9 * * *", "--channel", "telegram", "-u", "alice")
    assert cli(*base, "-m", "team brief", "--chat-id", "-100", "--id", "team").exit_code == 0
    mine = ("cron", "add", "-s", "0 9 * * *", "--channel", "telegram", "-u", "telegram:42")
    assert cli(*mine, "-m", "my brief", "--chat-id", "42", "--id", "mine", "--private").exit_code == 0
    jobs = {j["id"]: j["private"] for j in json.loads(cli("cron", "list", "--json").stdout)}
    assert jobs == {"team": False, "mine": True}
    table = cli("cron", "list").output.splitlines()
    assert "memory" in table[0]
    assert any("team" in line and "shared" in line for line in table)
    assert any("mine" in line and "private" in line for line in table)


def test_cron_list_says_what_a_fallback_or_a_failed_run_was(home: Path) -> None:
    """"fallback" alone reads as a fallback model having answered: the
    last run's column says the model could not be reached and the job's
    own words went; a failed run says why."""
    from gateway.cron import FALLBACK_SENT, CronStore
    from memory.clock import SystemClock

    for job_id in ("pills", "report", "digest"):
        assert cli("cron", "add", "-s", "0 9 * * *", "-m", job_id, "--channel", "telegram", "--chat-id", "42",
                   "-u", "alice", "--id", job_id).exit_code == 0

    async def ran() -> None:
        store = await CronStore.open(home / "data" / "cron.db", SystemClock(), "Asia/Shanghai")
        try:
            now = SystemClock().now()
            pills, report, digest = await store.get("pills"), await store.get("report"), await store.get("digest")
            assert pills is not None and report is not None and digest is not None
            await store.record_run(pills, ran_at=now, status="fallback", error=FALLBACK_SENT)
            await store.record_run(report, ran_at=now, status="error",
                                   error="channel 'feishu' is not running in this gateway")
            await store.record_run(digest, ran_at=now, status="error", error="ValueError: " + "x" * 400)
        finally:
            await store.close()

    asyncio.run(ran())
    rows = {line.split()[0]: line for line in cli("cron", "list").output.splitlines()[1:]}
    assert "fallback: model unreachable, the job's own text sent" in rows["pills"]
    assert "error: channel 'feishu' is not running in this gateway" in rows["report"]
    assert "error: ValueError: xxx" in rows["digest"] and "x" * 60 not in rows["digest"]  # cut: --json has it whole
    assert rows["digest"].rstrip().endswith("digest")


def _chat_rows(home: Path, rows: list[tuple[str, str, str, bool]]) -> None:
    """Tier 0 rows: (channel, chat_id, owner, came in a group), as the gateway writes them."""
    async def go() -> None:
        async with await SessionStore.open(home / "data" / "gateway.db") as sessions:
            for channel, chat_id, owner, group in rows:
                await sessions.append(f"{channel}:{chat_id}", channel=channel, chat_id=chat_id, role="user",
                                      content="hi", owner=owner, message_id=f"m-{chat_id}-{owner}",
                                      context=TurnContext(is_group=group, mentioned=group).dumps())

    (home / "data").mkdir(exist_ok=True)
    asyncio.run(go())


def test_cron_add_private_only_into_the_users_own_private_chat(home: Path) -> None:
    """--private into a group (or another's chat) would post the user's
    private memory (profile, credentials) where others read it."""
    (home / "config.json").write_text(json.dumps(
        {"memory": {"identities": {"alice": ["telegram:42", "feishu:ou_alice"]}}}), encoding="utf-8")
    _chat_rows(home, [("feishu", "oc_team", "alice", True), ("feishu", "oc_team", "feishu:ou_bob", True),
                      ("feishu", "oc_alice", "alice", False), ("feishu", "oc_bob", "feishu:ou_bob", False)])

    def add(channel: str, chat_id: str, job_id: str) -> Any:
        return cli("cron", "add", "-s", "0 9 * * *", "-m", "my brief", "--channel", channel, "--chat-id", chat_id,
                   "-u", "alice", "--id", job_id, "--private")

    refused = {
        ("telegram", "-100123"): "telegram chat -100123 is a group",
        ("telegram", "77"): "telegram chat 77 is not alice's private chat",
        ("feishu", "oc_team"): "feishu chat oc_team is a group",
        ("feishu", "oc_bob"): "feishu chat oc_bob is another user's private chat",
        ("feishu", "oc_new"): "feishu chat oc_new is not known as alice's private chat",
    }
    for n, ((channel, chat_id), why) in enumerate(refused.items()):
        r = add(channel, chat_id, f"bad{n}")
        assert r.exit_code == 2, r.output
        assert why in r.output and "--private" in r.output, r.output
    assert add("telegram", "42", "tg").exit_code == 0
    assert add("feishu", "oc_alice", "fs").exit_code == 0
    assert {j["id"] for j in json.loads(cli("cron", "list", "--json").stdout)} == {"tg", "fs"}
    # Without --private, a group is fine: shared memory only.
    r = cli("cron", "add", "-s", "0 9 * * *", "-m", "team brief", "--channel", "feishu", "--chat-id", "oc_team",
            "-u", "alice", "--id", "team")
    assert r.exit_code == 0, r.output


def test_cron_add_without_a_chat_id_takes_the_private_chat_or_lists_the_users_chats(home: Path) -> None:
    """An operator seldom knows a chat's platform id (Feishu's ``oc_…``, a
    Telegram group's ``-100…``): ``--chat-id`` left out takes the user's own
    private chat with ``--private``, and otherwise lists the chats the user
    was seen in, guessing none (a reply in the wrong group is read by
    others)."""
    (home / "config.json").write_text(json.dumps(
        {"memory": {"identities": {"alice": ["telegram:42", "feishu:ou_alice"]}}}), encoding="utf-8")
    _chat_rows(home, [("feishu", "oc_team", "alice", True), ("feishu", "oc_team", "feishu:ou_bob", True),
                      ("feishu", "oc_alice", "alice", False), ("feishu", "oc_bob", "feishu:ou_bob", False),
                      ("telegram", "-100777", "alice", True)])

    def add(*args: str) -> Any:
        return cli("cron", "add", "-s", "0 9 * * *", "-m", "my brief", "-u", "alice", *args)

    r = add("--channel", "feishu", "--private", "--id", "fs")
    assert r.exit_code == 0, r.output
    assert "chat: feishu oc_alice, alice's private chat" in r.stderr
    r = add("--channel", "telegram", "--private", "--id", "tg")  # never seen in private: the id is the user's
    assert r.exit_code == 0, r.output
    jobs = {j["id"]: j for j in json.loads(cli("cron", "list", "--json").stdout)}
    assert (jobs["fs"]["chat_id"], jobs["fs"]["private"]) == ("oc_alice", True)
    assert (jobs["tg"]["chat_id"], jobs["tg"]["private"]) == ("42", True)

    r = add("--channel", "feishu", "--id", "team")  # not private: which chat is the operator's to say
    assert r.exit_code == 2
    assert "give --chat-id: alice was seen on feishu in" in r.output
    assert "oc_team (group" in r.output and "oc_alice (private" in r.output and "oc_bob" not in r.output
    r = cli("cron", "add", "-s", "0 9 * * *", "-m", "x", "-u", "carol", "--channel", "feishu", "--private")
    assert r.exit_code == 2 and "no feishu chat of carol is known here yet" in r.output
    assert {j["id"] for j in json.loads(cli("cron", "list", "--json").stdout)} == {"fs", "tg"}  # nothing made


def test_cron_add_for_a_user_never_seen_warns_and_adds_the_job_still(home: Path) -> None:
    """``-u telegram:9999`` (a typo of telegram:999, say) was taken without a
    word: its replies would use an empty memory. A warning on stderr names
    the near handle; the job is added still (one may be set up before the
    user's first message)."""

    async def seen() -> None:
        async with await SessionStore.open(home / "data" / "gateway.db") as s:
            await s.append("telegram:999", channel="telegram", chat_id="999", role="user", content="hi",
                           owner="telegram:999", message_id="1")

    asyncio.run(seen())
    args = ("cron", "add", "-s", "0 9 * * *", "-m", "早报", "--channel", "telegram", "--chat-id", "999")
    r = cli(*args, "-u", "telegram:9999", "--id", "typo")
    assert r.exit_code == 0 and "added typo" in r.stdout
    assert [ln for ln in r.stderr.splitlines() if "channels.telegram" not in ln] == [
        "warning: no message from telegram:9999 was ever seen here (did you mean telegram:999?); "
        "the job is added all the same",
    ]
    r = cli(*args, "-u", "telegram:999", "--id", "known")
    assert r.exit_code == 0 and "no message" not in r.stderr
    assert "no message from alice" in cli(*args, "-u", "alice", "--id", "a1").stderr
    asyncio.run(_add_memory(home, "alice"))  # known by their memories (the history keeps only recent chats)
    assert "no message" not in cli(*args, "-u", "alice", "--id", "a2").stderr
    assert {j["id"] for j in json.loads(cli("cron", "list", "--json").stdout)} == {"typo", "known", "a1", "a2"}


async def _add_memory(home: Path, owner: str) -> None:
    async with await MemoryEngine.open(home / "data" / "memory.db") as e:
        await e.add(NewMemory(owner=owner, content="alice likes tea"))


def test_cron_add_reads_the_schedule_in_the_zone_given(home: Path) -> None:
    """The gateway is in Shanghai (the config); a job for someone in Berlin."""
    base = ("cron", "add", "-s", "0 9 * * *", "-m", "x", "--channel", "telegram", "--chat-id", "1", "-u", "alice")
    r = cli(*base, "--timezone", "berlin", "--id", "berlin")
    assert r.exit_code == 0 and "(Europe/Berlin schedule)" in r.output, r.output
    [job] = json.loads(cli("cron", "list", "--json").stdout)
    at = datetime.fromisoformat(job["next_run_at"].replace("Z", "+00:00")).astimezone(ZoneInfo("Europe/Berlin"))
    assert (job["timezone"], at.hour, at.minute) == ("Europe/Berlin", 9, 0)  # the real clock: CET or CEST
    assert "0 9 * * * (Europe/Berlin)" in cli("cron", "list").output
    bad = cli(*base, "--timezone", "Mars/Olympus")
    assert bad.exit_code == 2 and "unknown time zone 'Mars/Olympus'" in bad.output


def test_cron_add_at_makes_a_one_time_job_in_the_zone_given(home: Path) -> None:
    """The command runs on the real clock: tomorrow, read in Berlin."""
    tomorrow = datetime.now(ZoneInfo("Europe/Berlin")).date() + timedelta(days=1)
    base = ("cron", "add", "-m", "call mom", "--channel", "telegram", "--chat-id", "42", "-u", "alice")
    r = cli(*base, "--at", f"{tomorrow} 09:00", "--timezone", "Europe/Berlin", "--id", "mom")
    assert r.exit_code == 0, r.output
    assert r.stdout.strip() == f"added mom: runs once at {tomorrow} 09:00 (Europe/Berlin)"
    [job] = json.loads(cli("cron", "list", "--json").stdout)
    at = datetime.fromisoformat(job["at"].replace("Z", "+00:00")).astimezone(ZoneInfo("Europe/Berlin"))
    assert (job["schedule"], job["timezone"], job["next_run_at"]) == ("", "Europe/Berlin", job["at"])
    assert (at.date(), at.hour, at.minute) == (tomorrow, 9, 0)
    assert f"once {tomorrow} 09:00 (Europe/Berlin)" in cli("cron", "list").output
    # Without --timezone: the gateway's (Shanghai, from the environment).
    assert "(Asia/Shanghai)" in cli(*base, "--at", f"{tomorrow} 09:00").stdout
    past = cli(*base, "--at", "2020-01-01 09:00")
    assert past.exit_code == 2 and "'--at': 2020-01-01 09:00 (Asia/Shanghai) is in the past: it is now" in past.output
    both = cli(*base, "--at", f"{tomorrow} 09:00", "-s", "0 9 * * *")
    neither = cli(*base)
    for r in (both, neither):
        assert r.exit_code == 2 and "give --schedule (a recurring job) or --at (a one-time job), exactly one" in r.output
    assert len(json.loads(cli("cron", "list", "--json").stdout)) == 2
    assert cli("cron", "remove", "mom").exit_code == 0


def test_cron_adds_help_and_errors_name_the_format_not_a_date_that_goes_stale(home: Path) -> None:
    """'2026-11-23 09:00' was an example, and in the past a day later."""
    import re

    def dates(text: str) -> list[str]:
        return re.findall(r"\d{4}-\d{2}-\d{2}", text)

    shown = " ".join(cli("cron", "add", "--help").output.split())  # as wrapped to the terminal
    assert "YYYY-MM-DD HH:MM" in shown and dates(shown) == []
    bad = cli("cron", "add", "--at", "tomorrow 9am", "-m", "x", "--channel", "telegram", "--chat-id", "42",
              "-u", "alice").output
    assert "as 'YYYY-MM-DD HH:MM'" in bad and dates(bad) == []


@pytest.mark.parametrize(("args", "says"), [
    (("-s", "soon", "-m", "x"), "Invalid value for '--schedule': invalid cron schedule 'soon'"),
    (("-s", "0 9 * * * *", "-m", "x"), "Invalid value for '--schedule': invalid cron schedule '0 9 * * * *'"),
    (("--at", "tomorrow 9am", "-m", "x"), "Invalid value for '--at': invalid time 'tomorrow 9am'"),
    (("--at", "2020-01-01 09:00", "-m", "x"), "Invalid value for '--at': 2020-01-01 09:00 (Asia/Shanghai) is in the past"),
    (("--at", "2099-01-01 09:00", "-m", "x"), "Invalid value for '--at': 2099-01-01 09:00 (Asia/Shanghai) is more than a year"),
    (("-s", "0 9 * * *", "-m", "   "), "Invalid value for '--message': the job's message is empty"),
    (("-s", "0 9 * * *", "-m", "x", "--id", "__internal:mine"),
     "Invalid value for '--id': job ids starting with '__internal:' are reserved"),
])
def test_cron_add_with_a_bad_argument_names_it_and_makes_nothing(home: Path, args: tuple[str, ...], says: str) -> None:
    """Checked before cron.db is opened: a typo on a fresh home (or a wrong
    MYCLAW_HOME) leaves no database, no data folder behind."""
    r = cli("cron", "add", *args, "--channel", "telegram", "--chat-id", "1", "-u", "alice")
    assert r.exit_code == 2, r.output
    assert says in r.output, r.output
    assert not (home / "data").exists()


def test_cron_add_refuses_a_channel_the_gateway_does_not_have(home: Path) -> None:
    """Such a job's reply would be queued for nobody, an LLM call a run."""
    r = cli("cron", "add", "-s", "0 9 * * *", "-m", "x", "--channel", "slack", "--chat-id", "1", "-u", "alice")
    assert r.exit_code == 2 and "unknown channel 'slack' (one of telegram, feishu)" in r.output
    assert not (home / "data" / "cron.db").exists()  # nothing added, nothing made
    # A known channel not enabled (yet): added, with a warning saying so.
    (home / "config.json").write_text(json.dumps({"channels": {"telegram": {"enabled": True, "token": "1:abc"}}}))
    r = cli("cron", "add", "-s", "0 9 * * *", "-m", "x", "--channel", "feishu", "--chat-id", "oc_1", "-u", "alice")
    assert r.exit_code == 0 and "warning: channels.feishu.enabled is false" in r.stderr
    r = cli("cron", "add", "-s", "0 9 * * *", "-m", "x", "--channel", "telegram", "--chat-id", "1", "-u", "alice")
    assert r.exit_code == 0 and "channels" not in r.stderr  # (alice never wrote: that warning stays)
    assert len(json.loads(cli("cron", "list", "--json", "-u", "alice").stdout)) == 2


def test_memory_flush_and_log(home: Path, fake_llm: FakeOpenAI) -> None:
    async def buffer(engine: MemoryEngine) -> None:
        await SqliteMemory(engine).buffer([
            Turn(owner="alice", channel="telegram", chat_id="1", role="user", content="我换成 pnpm 了", message_id="1"),
            Turn(owner="alice", channel="telegram", chat_id="1", role="assistant", content="好的", message_id="1"),
        ])

    seed(home, buffer)
    fake_llm.queue_error(500)
    r = cli("memory", "flush")
    assert r.exit_code == 1 and "stay buffered" in r.output and "failed" in r.output
    fake_llm.queue_reply(json.dumps({"facts": [{"content": "用户改用 pnpm", "category": "decision"}], "summary": "换包管理器"}))
    r = cli("memory", "flush", "--user", "alice")
    assert r.exit_code == 0, r.output
    assert "alice: 2 messages, 1 added" in r.output
    assert fake_llm.headers[-1]["Authorization"] == "Bearer sk-cli-test-123456"
    assert cli("memory", "flush").output.strip() == "nothing buffered"
    r = cli("memory", "log", "--json")
    entries = json.loads(r.stdout)
    assert [e["action"] for e in entries] == ["add"] and entries[0]["detail"] == "用户改用 pnpm"
    assert "用户改用 pnpm" in cli("memory", "log").output
    assert "sk-cli-test-123456" not in r.output


def test_memory_compress_daily_and_weekly(home: Path, fake_llm: FakeOpenAI) -> None:
    async def fill(engine: MemoryEngine) -> None:
        await engine.add_event("alice", "2020-01-01", "Alice picked Postgres")
        await engine.add_many((NewMemory(owner="alice", content=f"fact {i}", project="p"), None) for i in range(10))

    seed(home, fill)

    def responder(body: dict[str, Any]) -> Reply:
        if body["messages"][0]["content"].startswith("You consolidate"):
            return Reply(json.dumps({"facts": [{"content": "ten facts in one", "from": list(range(1, 11))}]}))
        return Reply(json.dumps({"facts": [{"content": "Alice uses Postgres"}], "summary": "s"}))

    fake_llm.responder = responder
    assert cli("memory", "compress").exit_code == 2  # neither flag
    r = cli("memory", "compress", "--daily", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["events"] == 1
    r = cli("memory", "compress", "--weekly")
    assert r.exit_code == 0, r.output
    assert "created 1" in r.output and "merged 10" in r.output
    actions = {e["action"] for e in json.loads(cli("memory", "log", "--json", "--job", "weekly_compress").stdout)}
    assert actions == {"merge", "run"}


def test_memory_compress_takes_the_kind_as_a_word_too(home: Path, fake_llm: FakeOpenAI) -> None:
    seed(home, lambda engine: engine.add_event("alice", "2020-01-01", "Alice picked Postgres"))
    fake_llm.responder = lambda body: Reply(json.dumps({"facts": [{"content": "Alice uses Postgres"}], "summary": "s"}))
    r = cli("memory", "compress", "daily", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["events"] == 1
    r = cli("memory", "compress", "weekly")
    assert r.exit_code == 0, r.output
    assert r.output.startswith("weekly compression: ")
    bad = cli("memory", "compress", "dayly")
    assert bad.exit_code == 2
    assert "'dayly' is not one of 'daily', 'weekly'" in bad.output
    both = cli("memory", "compress", "daily", "--weekly")
    assert both.exit_code == 2 and "daily or weekly, not both" in both.output
    assert cli("memory", "compress", "daily", "--daily").exit_code == 0  # saying it twice is no conflict
    assert "choose daily or weekly" in cli("memory", "compress").output


def test_memory_compress_daily_says_what_it_did_and_what_waits_for_the_day_to_end(
        home: Path, fake_llm: FakeOpenAI) -> None:
    """Today is not compressed until it is over: "events 0" alone read as broken."""
    async def fill(engine: MemoryEngine) -> None:
        await engine.add_event("alice", "2020-01-01", "Alice picked Postgres")
        # The gateway's zone here (the home fixture's MYCLAW_TIMEZONE), not UTC's:
        # from 16:00 UTC on, UTC's today was Shanghai's yesterday, compressed.
        today = engine.clock.now().astimezone(ZoneInfo("Asia/Shanghai")).strftime("%Y-%m-%d")
        for i in range(2):
            await engine.add_event("alice", today, f"Alice talked about plan {i}")

    seed(home, fill)
    fake_llm.responder = lambda body: Reply(json.dumps({"facts": [{"content": "Alice uses Postgres"}], "summary": "s"}))
    r = cli("memory", "compress", "daily")
    assert r.exit_code == 0, r.output
    assert "1 event of past days compressed into facts" in r.output
    assert "today's 2 events wait for the day to end" in r.output
    doc = json.loads(cli("memory", "compress", "daily", "--json").stdout)
    assert (doc["events"], doc["waiting"]) == (0, 2)
    again = cli("memory", "compress", "daily").output
    assert "no events of a past day to compress" in again and "today's 2 events wait" in again


def test_memory_retry_set_aside_clears_the_mark_for_the_next_run(home: Path, fake_llm: FakeOpenAI) -> None:
    async def buffer(engine: MemoryEngine) -> None:
        for owner in ("alice", "bob"):
            await SqliteMemory(engine).buffer([
                Turn(owner=owner, channel="telegram", chat_id=owner, role="user", content=f"{owner}'s long story",
                     message_id="1"),
            ])

    seed(home, buffer)
    takes_long = [False]

    def model(body: dict[str, Any]) -> Reply:
        if not takes_long[0]:
            return Reply('{"facts": [{"content": "cut', finish_reason="length")  # a reply cut at max_tokens
        said = "alice" if "alice's" in body["messages"][-1]["content"] else "bob"
        return Reply(json.dumps({"facts": [{"content": f"{said} told a long story"}], "summary": "s"}))

    fake_llm.responder = model
    r = cli("memory", "flush")
    assert r.exit_code == 0 and r.stdout.count("1 message, set aside") == 2, r.output
    assert cli("memory", "flush").output.strip() == "nothing buffered"  # kept, not retried

    takes_long[0] = True  # a bigger memory model
    r = cli("memory", "retry-set-aside", "--user", "alice")
    assert r.exit_code == 0 and "1 line set aside will be tried again" in r.output, r.output
    r = cli("memory", "flush")
    assert r.exit_code == 0 and "alice: 1 message, 1 added" in r.output and "bob" not in r.output, r.output
    r = cli("memory", "retry-set-aside", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout) == {"cleared": 1}
    assert cli("memory", "retry-set-aside").output.strip() == "no lines set aside"
    assert "bob: 1 message, 1 added" in cli("memory", "flush").output
    actions = [(e["owner"], e["action"]) for e in json.loads(cli("memory", "log", "--json").stdout)]
    assert actions.count(("alice", "retry-set-aside")) == 1 and actions.count(("bob", "retry-set-aside")) == 1


def test_cron_list_and_remove_on_a_home_without_jobs_say_so_and_make_nothing(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # A wrong MYCLAW_HOME (a typo, another account's) must not be answered
    # "no jobs" from a database made there on the spot.
    home = tmp_path / "not-the-home"
    monkeypatch.setenv("MYCLAW_HOME", str(home))
    for args in (["cron", "list"], ["cron", "remove", "job-1"]):
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 1, r.output
        assert f"no cron database at {home / 'data' / 'cron.db'} (no job added yet, or wrong MYCLAW_HOME)" in r.output
    assert not home.exists()
