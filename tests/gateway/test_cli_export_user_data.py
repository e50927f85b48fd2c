"""``myclaw memory export --user``: the operator's export of one user holds
what the user's own ``/export`` holds (the README sends operators to it
when a ``/export`` is too large to send): their time zone, incognito
setting, scheduled jobs, kept history and recent files, read from
gateway.db and cron.db beside their memory."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path

from click.testing import CliRunner, Result

from gateway.bus import Document
from gateway.cli import main
from gateway.cron import CronStore
from gateway.export import write_user_export
from gateway.incognito import Incognito
from gateway.recent_files import RecentFiles
from gateway.sessions import SessionStore
from gateway.timezones import UserTimezones, parse_timezone
from gateway.userdata import UserData
from memory import MemoryEngine, SystemClock
from memory.service import SqliteMemory


def ok(*args: str) -> Result:
    r = CliRunner().invoke(main, ["memory", *args])
    assert r.exit_code == 0, r.output
    return r


def _seed(home: Path) -> None:
    ok("add", "Alice's cat is called Miso", "--user", "alice")
    ok("add", "Bob likes tea", "--user", "bob")

    async def seed() -> None:
        clock = SystemClock()  # recent files are kept a day: the CLI reads them at the real time
        async with await SessionStore.open(home / "data" / "gateway.db", clock) as s:
            for n in range(3):
                await s.append("telegram:1", channel="telegram", chat_id="1", role="user", content=f"hi {n}",
                               owner="alice", message_id=str(n))
            await UserTimezones(s.db).set("alice", parse_timezone("Asia/Tokyo"), at=clock.now())
            await Incognito(s.db).start("alice", at=clock.now())
            recent = RecentFiles(s.db, clock)
            await recent.keep("telegram:1", "alice", [Document("alice-plan.pdf", "alice's plan")])
            await recent.keep("telegram:2", "bob", [Document("bob-plan.pdf", "bob's plan")])
            await recent.flush()
        store = await CronStore.open(home / "data" / "cron.db", clock)
        try:
            await store.add(schedule="0 9 * * *", message="daily plan", channel="telegram", chat_id="1", user="alice")
            await store.add(at=clock.now() + timedelta(days=2), message="call mom", channel="telegram", chat_id="1",
                            user="alice")
            await store.add(schedule="0 9 * * *", message="tea time", channel="telegram", chat_id="2", user="bob")
        finally:
            await store.close()

    asyncio.run(seed())


def _own_export(home: Path, user: str) -> str:
    """What ``/export`` sends ``user``: UserData over the same files, as the App builds it."""

    async def render() -> str:
        data = home / "data"
        async with await MemoryEngine.open(data / "memory.db") as engine, \
                await SessionStore.open(data / "gateway.db") as s:
            files = RecentFiles(s.db, SystemClock())
            await files.load()
            cron = await CronStore.open(data / "cron.db", SystemClock())
            try:
                everything = UserData(SqliteMemory(engine), s, cron, timezones=UserTimezones(s.db), files=files,
                                      incognito=Incognito(s.db))
                kept, index = await everything.export(user)
                parts: list[str] = []
                await write_user_export(parts.append, kept, index, SqliteMemory(engine).owner_rows(user, index),
                                        at="now", zh=False)
                return "".join(parts)
            finally:
                await cron.close()

    return asyncio.run(render())


def test_the_operators_markdown_export_of_a_user_holds_what_their_own_export_holds(home: Path) -> None:
    _seed(home)
    theirs = _own_export(home, "alice")
    data = home / "data"

    def files() -> dict[str, tuple[bytes, int]]:
        return {f.name: (f.read_bytes(), f.stat().st_mtime_ns) for f in data.glob("*.db*") if "memory" not in f.name}

    before = files()
    md = ok("export", "--user", "alice", "--format", "markdown").stdout
    assert files() == before  # gateway.db and cron.db read, never written
    # Each thing /export says of her, the operator's file says too.
    for said in ("Asia/Tokyo", "Miso", "daily plan", "call mom", "alice-plan.pdf", "3 messages"):
        assert said in theirs, said
        assert said in md, said
    assert "Incognito: on since" in theirs and "incognito: on since" in md.lower()
    assert "## Scheduled jobs" in theirs and "### Scheduled jobs" in md
    # Bob's are not hers.
    assert "tea time" not in md and "bob-plan.pdf" not in md and "Bob likes tea" not in md
    # The whole store's export says each user's under their own name.
    every = ok("export", "--format", "markdown").stdout
    bob = every.split("\n## bob", 1)[1]
    assert "tea time" in bob and "bob-plan.pdf" in bob and "daily plan" not in bob and "Asia/Tokyo" not in bob


def test_the_operators_json_export_of_a_user_holds_their_settings_and_jobs(home: Path) -> None:
    _seed(home)
    doc = json.loads(ok("export", "--user", "alice").stdout)
    [alice] = doc["users"]
    assert alice["user"] == "alice" and alice["timezone"] == "Asia/Tokyo"
    assert alice["incognito_since"] is not None and alice["history_messages"] == 3
    assert [f["name"] for f in alice["recent_files"]] == ["alice-plan.pdf"]
    assert sorted(j["message"] for j in alice["jobs"]) == ["call mom", "daily plan"]
    every = json.loads(ok("export").stdout)
    assert {u["user"]: [j["message"] for j in u["jobs"]] for u in every["users"]}["bob"] == ["tea time"]


def test_a_user_with_only_a_setting_is_exported_not_refused(home: Path) -> None:
    """Nothing in memory, but a time zone and a job of theirs: something stored."""
    ok("add", "Bob likes tea", "--user", "bob")  # memory.db exists

    async def seed() -> None:
        async with await SessionStore.open(home / "data" / "gateway.db", SystemClock()) as s:
            await UserTimezones(s.db).set("carol", parse_timezone("Europe/Paris"), at=SystemClock().now())

    asyncio.run(seed())
    md = ok("export", "--user", "carol", "--format", "markdown").stdout
    assert "Europe/Paris" in md


def test_the_whole_stores_export_holds_users_with_only_settings(home: Path) -> None:
    """A user with no memory row, only a time zone, incognito on, a job,
    kept history or a recent file,
    is in the whole store's export as in ``--user``'s: the operator's
    export of everything misses nobody the gateway keeps anything of."""
    ok("add", "Bob likes tea", "--user", "bob")  # memory.db exists

    async def seed() -> None:
        clock = SystemClock()
        async with await SessionStore.open(home / "data" / "gateway.db", clock) as s:
            await UserTimezones(s.db).set("carol", parse_timezone("Europe/Paris"), at=clock.now())
            await Incognito(s.db).start("dave", at=clock.now())
            await s.append("telegram:6", channel="telegram", chat_id="6", role="user", content="hi",
                           owner="frank", message_id="1")
            recent = RecentFiles(s.db, clock)
            await recent.keep("telegram:7", "gina", [Document("gina-plan.pdf", "gina's plan")])
            await recent.flush()
        store = await CronStore.open(home / "data" / "cron.db", clock)
        try:
            await store.add(schedule="0 9 * * *", message="erin's walk", channel="telegram", chat_id="5", user="erin")
        finally:
            await store.close()

    asyncio.run(seed())
    every = json.loads(ok("export").stdout)
    users = {u["user"]: u for u in every["users"]}
    assert set(users) == {"carol", "dave", "erin", "frank", "gina"}
    assert users["frank"]["history_messages"] == 1 and [f["name"] for f in users["gina"]["recent_files"]] == [
        "gina-plan.pdf"]
    assert users["carol"]["timezone"] == "Europe/Paris" and users["dave"]["incognito_since"] is not None
    assert [j["message"] for j in users["erin"]["jobs"]] == ["erin's walk"]
    md = ok("export", "--format", "markdown").stdout
    for user, said in (("carol", "Europe/Paris"), ("dave", "ncognito: on since"), ("erin", "erin's walk")):
        assert f"\n## {user}" in md, user
        assert said in md.split(f"\n## {user}", 1)[1].split("\n## ", 1)[0], user
    assert "\n## bob" in md and "Bob likes tea" in md


def test_the_whole_stores_export_names_users_with_only_messages_waiting_or_lines_set_aside(home: Path) -> None:
    """A person whose only data is a message waiting in gateway.db's inbox
    (a crash left it, or the gateway holds it now), an edit of theirs
    waiting there to be applied, or lines of theirs set aside by the
    memory model, is in the whole store's export, Markdown and JSON, as in
    ``--user``'s: by count, never the words."""
    from gateway.bus import EDIT, InboundMessage
    from gateway.inbox import Inbox
    from memory.backend import Turn

    ok("add", "Bob likes tea", "--user", "bob")  # memory.db exists

    async def seed() -> None:
        clock = SystemClock()
        async with await SessionStore.open(home / "data" / "gateway.db", clock) as s:
            inbox = Inbox(s.db, clock)
            await inbox.keep(InboundMessage(channel="telegram", chat_id="8", sender_id="88", text="hana's words",
                                            message_id="1"))
            await inbox.keep(InboundMessage(channel="telegram", chat_id="9", sender_id="99", text="juno's new words",
                                            message_id="5", kind=EDIT))
            await inbox.flush()
        async with await MemoryEngine.open(home / "data" / "memory.db") as engine:
            memory = SqliteMemory(engine)
            await memory.buffer([Turn(owner="ivan", channel="telegram", chat_id="7", role="user",
                                      content="ivan's very long paste")])
            assert (await memory.owner_index("ivan")).waiting == 1  # the batched line written
            await engine.db.write("UPDATE extraction_buffer SET set_aside_at = '2026-03-01T12:00:00Z' "
                                  "WHERE owner = 'ivan'")

    asyncio.run(seed())
    md = ok("export", "--format", "markdown").stdout
    for user, said in (("telegram:88", "1 message waiting to be answered"), ("ivan", "1 line set aside"),
                       ("telegram:99", "1 edit of their messages waiting to be applied")):
        assert f"\n## {user}" in md, (user, md)
        assert said in md.split(f"\n## {user}", 1)[1].split("\n## ", 1)[0], user
    assert "words" not in md and "paste" not in md
    every = json.loads(ok("export").stdout)
    assert every["unanswered"] == {"telegram:88": 1}
    assert every["extraction_buffer"] == {"ivan": {"waiting": 0, "set_aside": 1}}
    [juno] = [u for u in every["users"] if u["user"] == "telegram:99"]
    assert juno["edits_waiting"] == 1 and "words" not in json.dumps(every)
    assert "1 edit of their messages waiting" in ok("export", "--user", "telegram:99", "--format", "markdown").stdout
