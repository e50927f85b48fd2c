from __future__ import annotations

import asyncio
import json
import stat
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from gateway.cli import main
from gateway.export import exports_folder, render_markdown
from gateway.incognito import Incognito
from gateway.bus import Document, InboundMessage, OutboundMessage
from gateway.outbox import Outbox, job_slot
from gateway.recent_files import RecentFiles
from gateway.sessions import SessionStore
from memory import Category, ManualClock, MemoryEngine, NewMemory, Provenance, Status, SystemClock
from memory.backend import Turn
from memory.filestore import FileMemory
from memory.service import SqliteMemory
from tests.disk import on_disk
from tests.gateway.test_erasure_e2e import files_holding
from tests.gateway.lineage import Lineage, buffered, lineage

DB_KEYS = {
    "id", "owner", "tier", "project", "topic", "category", "content", "importance", "source", "status",
    "superseded_by", "provenance", "created_at", "updated_at", "last_accessed", "access_count", "source_text",
    "search_terms",
}  # fmt: skip


def cli(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(main, ["memory", *args], input=input)


def ok(*args: str, input: str | None = None) -> Result:
    r = cli(*args, input=input)
    assert r.exit_code == 0, r.output
    return r


def db_rows(home: Path) -> list[Any]:
    async def read() -> list[Any]:
        async with await MemoryEngine.open(home / "data" / "memory.db") as e:
            return await e.list_memories(status=None)

    return asyncio.run(read())


def test_add_list_and_json_shape(home: Path) -> None:
    assert "added memory 1 for alice" in ok("add", "Alice deploys atlas with 部署脚本 v2", "--user", "alice").stdout
    ok("add", "Standup is at 10:00", "--user", "_global", "--tier", "1", "--importance", "0.9")
    ok("add", "Bob likes tea", "-u", "bob", "--category", "identity", "--project", "atlas", "--topic", "drinks")
    r = ok("add", "alice deploys  ATLAS with 部署脚本 v2", "--user", "alice")
    assert "already stored as memory 1" in r.stdout

    table = ok("list").stdout.splitlines()
    assert table[0].split() == ["ID", "USER", "TIER", "CATEGORY", "IMP", "PROJECT", "STATUS", "DATE", "CONTENT"]
    assert [ln.split()[1] for ln in table[1:]] == ["bob", "_global", "alice"]
    assert table[0].index("CONTENT") == table[3].index("Alice")  # aligned

    rows = json.loads(ok("list", "--json").stdout)
    assert set(rows[0]) == DB_KEYS
    assert rows[2]["provenance"] == {"channel": "cli"} and rows[2]["source"] == "manual"
    assert (rows[1]["tier"], rows[1]["category"], rows[1]["importance"]) == (1, "identity", 0.9)
    assert rows[2]["category"] == "decision"  # tier 2 default

    def ids(*args: str) -> list[int]:
        return [m["id"] for m in json.loads(ok("list", "--json", *args).stdout)]

    assert ids("--user", "alice") == [1]
    assert ids("--tier", "1") == [2]
    assert ids("--project", "atlas") == [3] and ids("--category", "identity") == [3, 2]
    assert ids("--limit", "1") == [3]


def test_an_empty_list_says_what_is_stored_not_that_nothing_matched(home: Path) -> None:
    # With only the active-only default applied, "no memories match" read as a filter's fault.
    ok("add", "Alice drinks green tea", "--user", "telegram:1001")
    ok("add", "Alice cycles to work", "--user", "telegram:1001")
    assert ok("list", "--user", "telgram:1001").stderr == (
        "no memories are stored for telgram:1001 (did you mean telegram:1001? `myclaw memory stats` lists every user)\n")
    ok("delete", "1", "--yes")
    ok("delete", "2", "--yes")
    assert ok("list", "--user", "telegram:1001").stderr == (
        "telegram:1001 has no active memories, only 2 archived (--status all lists them)\n")
    assert ok("list").stderr == "no active memories, only 2 archived (--status all lists them)\n"
    assert ok("list", "--user", "telegram:1001", "--tier", "1").stderr == "no memories match\n"  # a filter's doing
    assert "Alice cycles to work" in ok("list", "--user", "telegram:1001", "--status", "all").stdout


def test_piped_tables_keep_whole_lines_and_a_terminal_width_cuts_them(home: Path) -> None:
    from gateway.cli._common import render_table

    long = "Alice's deployment checklist: " + ", ".join(f"step {i} verify the atlas-{i} service" for i in range(12))
    ok("add", long, "--user", "alice")
    assert long in ok("list").stdout  # CliRunner's stdout is no terminal, as `| grep` is not
    assert long in ok("search", "deployment checklist").stdout
    assert long in ok("export", "--format", "markdown").stdout
    cut = render_table(["ID", "CONTENT"], [[1, long]], width=60).splitlines()[1]
    assert len(cut) <= 60 and cut.endswith("…")


def test_changes_made_with_the_cli_are_in_the_change_log_as_the_pages_are(home: Path) -> None:
    ok("add", "Alice drinks green tea", "--user", "alice")
    ok("add", "Alice drinks green tea", "--user", "alice")  # already stored: nothing done, nothing logged
    # What was added, in its words, as extraction's entries say it.
    assert "Alice drinks green tea" in ok("log", "--job", "cli").stdout
    ok("edit", "1", "--importance", "0.9", "--content", "Alice drinks oolong")
    ok("delete", "1", "--yes")
    ok("edit", "1", "--status", "active")
    ok("edit", "1", "--status", "active")  # already active: nothing logged
    logged = json.loads(ok("log", "--job", "cli", "--json").stdout)
    assert [(x["action"], x["owner"], x["memory_id"]) for x in logged] == [
        ("restore", "alice", 1), ("archive", "alice", 1), ("edit", "alice", 1), ("add", "alice", 1)
    ]
    assert logged[2]["detail"] == {"fields": ["content", "importance"]}
    assert logged[1]["detail"] == {"was": "active"}
    assert logged[3]["detail"] == {"reworded": True}  # the old words went with the edit (it may be a redaction)
    ok("delete", "1", "--purge", "--yes")
    assert "oolong" not in ok("log", "--json").stdout  # erased words leave the log


def test_environment_mistakes_are_named_not_tracebacks(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MYCLAW_LOG_LEVEL", "chatty")
    r = cli("stats")
    assert r.exit_code == 2 and "MYCLAW_LOG_LEVEL: unknown level 'chatty' (use DEBUG, INFO, WARNING, ERROR)" in r.output
    monkeypatch.setenv("MYCLAW_LOG_LEVEL", "info")
    monkeypatch.setenv("MYCLAW_MEMORY_DB_PTH", "/elsewhere/memory.db")
    r = ok("add", "Alice drinks green tea", "--user", "alice")
    assert r.stdout == "added memory 1 for alice\n"  # stdout stays clean
    assert ("myclaw: warning: MYCLAW_MEMORY_DB_PTH (did you mean MYCLAW_MEMORY_DB_PATH?) is not a myclaw setting "
            "and is ignored") in r.stderr
    assert (home / "data" / "memory.db").exists()


def test_add_needs_a_user_content_and_a_valid_category(home: Path) -> None:
    r = cli("add", "something")
    assert r.exit_code == 2 and "Missing option '--user'" in r.output
    r = cli("add", "  \n", "--user", "a")
    assert r.exit_code == 2 and "content is empty" in r.output
    r = cli("add", "x" * 4001, "--user", "a")
    assert r.exit_code == 2 and "4001 characters; a memory holds at most 4000" in r.output
    r = cli("add", "x", "--user", "a", "--category", "feelings")
    assert r.exit_code == 2 and "'identity', 'config', 'credential'" in r.output
    r = cli("add", "x", "--user", "a", "--importance", "3")
    assert r.exit_code == 2 and "--importance" in r.output
    r = cli("add", "x", "--user", " ")
    assert r.exit_code == 2 and "--user" in r.output
    assert not (home / "data" / "memory.db").exists()  # nothing half-written


def test_add_and_edit_redact_machine_secrets_as_the_chat_path_does(home: Path) -> None:
    # The operator pastes a note with a key in it: memory keeps no machine
    # secret, whoever typed it, and says what it took out.
    key, card = "sk-proj-AbCdEf0123456789xyz", "4111 1111 1111 1111"
    r = ok("add", f"Alice's deploy key is {key}, her card {card}", "--user", "alice")
    assert r.stdout == "added memory 1 for alice\n"
    assert "removed before storing: an API key or token, a card number" in r.stderr
    [m] = db_rows(home)
    assert key not in m.content and "4111" not in m.content
    assert m.content == "Alice's deploy key is sk-***, her card [card number redacted]"
    r = ok("add", "Alice's staging token: 9f8e7d6c5b4a", "--user", "alice", "--json")
    assert json.loads(r.stdout)["redacted"] == ["the value of a key or token line"]
    assert "9f8e7d6c5b4a" not in json.dumps([x.content for x in db_rows(home)])
    # A password the user chose is a credential memory, as in chat; a count of tokens is no secret.
    r = ok("add", "the wifi password is Sunny-Day-42; max token: 4096", "--user", "alice")
    assert "removed" not in r.stderr
    # An edit is redacted the same way.
    r = ok("edit", "1", "--content", "Alice's key: ghp_16C7e42F292c6912E7710c838347Ae178B4a")
    assert "removed before storing: an API key or token" in r.stderr
    assert "ghp_16C7e42F" not in json.dumps([x.content for x in db_rows(home)])


def test_add_and_edit_take_search_terms(home: Path) -> None:
    """``--terms``: words the fact is also found by (memory/cues.py), as the
    extraction model gives them; a Chinese question finds an English fact."""
    r = ok("add", "We picked Postgres over MySQL", "-u", "alice", "--terms", "数据库, database、选型", "--json")
    assert json.loads(r.stdout)["memory"]["search_terms"] == ["数据库", "database", "选型"]
    hits = json.loads(ok("search", "数据库我们最后选了什么？", "-u", "alice", "--json").stdout)
    assert [(h["kind"], h["id"]) for h in hits] == [("memory", 1)]
    ok("edit", "1", "--terms", "Postgres\n数据库")
    assert db_rows(home)[0].search_terms == ("Postgres", "数据库")
    ok("edit", "1", "--terms", "")  # cleared
    assert db_rows(home)[0].search_terms == ()


def test_bad_search_terms_are_refused_with_the_reason_and_store_nothing(home: Path) -> None:
    key = "sk-proj-AbCdEf0123456789xyz"
    for terms, why in ((f"db, {key}", "a key's or password's shape"), ("x" * 41, "41 characters; at most 40"),
                       (",".join(f"t{i}" for i in range(13)), "13 search terms; at most 12")):
        r = cli("add", "fact", "-u", "alice", "--terms", terms)
        assert r.exit_code == 2 and why in r.output and key not in r.output, r.output
    r = cli("add", "wifi password is Sunny-Day-42", "-u", "alice", "--category", "credential", "--terms", "wifi")
    assert r.exit_code == 2 and "a credential is found by its own words only" in r.output
    assert not (home / "data" / "memory.db").exists()
    ok("add", "fact", "-u", "alice", "--terms", "db")
    r = cli("edit", "1", "--terms", f"db, {key}")
    assert r.exit_code == 2 and key not in r.output
    ok("add", "wifi password is Sunny-Day-42", "-u", "alice", "--category", "credential")
    r = cli("edit", "2", "--terms", "wifi")
    assert r.exit_code == 2 and "a credential is found by its own words only" in r.output
    assert {m.id: m.search_terms for m in db_rows(home)} == {1: ("db",), 2: ()}


def test_add_of_nothing_but_a_secret_stores_nothing_and_fails(home: Path) -> None:
    for secret in ("sk-proj-AbCdEf0123456789xyz", "  ghp_16C7e42F292c6912E7710c838347Ae178B4a ,"):
        r = cli("add", secret, "--user", "alice")
        assert r.exit_code == 1, r.output
        assert "nothing left to store once an API key or token is removed" in r.output
        assert secret.strip(" ,") not in r.output  # never echoed back
    ok("add", "fact", "--user", "alice")
    r = cli("edit", "1", "--content", "sk-proj-AbCdEf0123456789xyz")
    assert r.exit_code == 1 and "nothing left to store" in r.output
    assert [m.content for m in db_rows(home)] == ["fact"]


def test_unknown_id_and_missing_database(home: Path) -> None:
    r = cli("list")
    assert r.exit_code == 1 and "no memory database at" in r.output
    assert not (home / "data" / "memory.db").exists()  # a read does not create one
    ok("add", "fact", "--user", "alice")
    for args in (["edit", "42", "--importance", "0.1"], ["delete", "42", "--yes"], ["delete", "42", "--purge", "-y"]):
        r = cli(*args)
        assert r.exit_code == 1 and r.output.strip() == "Error: no memory with id 42"
    r = cli("edit", "1", "--user", "bob", "--content", "hijacked")  # someone else's id
    assert r.exit_code == 1 and "no memory with id 1 for user bob" in r.output
    assert db_rows(home)[0].content == "fact"


def test_edit(home: Path) -> None:
    ok("add", "Atlas uses Postgres 15", "--user", "alice")
    r = cli("edit", "1")
    assert r.exit_code == 2 and "nothing to change" in r.output
    r = cli("edit", "1", "--content", " ", "--importance", "0.2")
    assert r.exit_code == 2 and "content is empty" in r.output
    r = cli("edit", "1", "--content", "\x00", "--importance", "0.2")  # empty once cleaned: rolled back whole
    assert r.exit_code == 1 and "memory content is empty" in r.output
    assert db_rows(home)[0].importance == 0.7
    m = json.loads(
        ok("edit", "1", "--content", "Atlas uses Postgres 16", "--category", "config", "--tier", "1",
           "--project", "atlas", "--topic", "db", "--importance", "0.95", "--json").stdout
    )  # fmt: skip
    assert (m["content"], m["category"], m["tier"], m["project"], m["topic"], m["importance"]) == (
        "Atlas uses Postgres 16", "config", 1, "atlas", "db", 0.95,
    )  # fmt: skip
    assert "updated memory 1 (alice, tier 1, config, active)" in ok("edit", "1", "--importance", "0.5").stdout


def test_delete_archives_then_restores_then_purges(home: Path) -> None:
    ok("add", "Alice's door code is 4711", "--user", "alice", "--category", "credential")
    r = cli("delete", "1", input="n\n")
    assert r.exit_code == 1 and "cancelled" in r.output and db_rows(home)[0].status is Status.ACTIVE
    r = ok("delete", "1", input="y\n")
    assert "Archive memory 1 of alice" in r.output and "archived memory 1" in r.stdout
    assert db_rows(home)[0].status is Status.ARCHIVED
    assert json.loads(ok("list", "--json").stdout) == []
    assert [m["id"] for m in json.loads(ok("list", "--json", "--status", "archived").stdout)] == [1]
    assert json.loads(ok("search", "door code", "--json").stdout) == []  # archived: not retrievable
    assert "already archived" in ok("delete", "1", "-y").stdout

    ok("edit", "1", "--status", "active")
    assert db_rows(home)[0].status is Status.ACTIVE
    assert "erased memory 1" in ok("delete", "1", "--purge", "--yes").stdout
    assert db_rows(home) == []
    assert "4711" not in ok("export").stdout


def test_search_ranks_cites_and_scopes(home: Path) -> None:
    ok("add", "我的部署密码是 hunter2", "--user", "alice", "--category", "credential")
    ok("add", "我喜欢喝咖啡", "--user", "alice")
    ok("add", "Bob's deploy password is swordfish", "--user", "bob")
    ok("add", "部署 happens on Fridays", "--user", "_global")
    hits = json.loads(ok("search", "部署密码", "--json").stdout)
    assert hits[0]["content"] == "我的部署密码是 hunter2" and hits[0]["user"] == "alice"
    assert hits[0]["citation"].startswith("[m1 · ") and "咖啡" not in json.dumps(hits, ensure_ascii=False)
    bob = json.loads(ok("search", "部署 password", "--user", "bob", "--json").stdout)
    assert {h["user"] for h in bob} == {"bob", "_global"} and "hunter2" not in json.dumps(bob)
    table = ok("search", "deploy password").stdout.splitlines()
    assert table[0].split() == ["SCORE", "USER", "CITATION", "CONTENT"] and "swordfish" in table[1]
    r = cli("search", "nothing like this")
    assert r.exit_code == 0 and r.stdout == "" and "no matches" in r.output
    # A misspelt --user found nothing because nothing is theirs, not because nothing matched.
    r = cli("search", "咖啡", "--user", "alise")
    assert r.exit_code == 0 and r.stdout == ""
    assert r.output == "no matches: nothing is stored about alise (did you mean alice? `myclaw memory stats` lists every user)\n"


def test_stats(home: Path) -> None:
    ok("add", "a1", "--user", "alice", "--tier", "1")
    ok("add", "a2", "--user", "alice")
    ok("add", "b1", "--user", "bob")
    ok("delete", "3", "-y")
    s = json.loads(ok("stats", "--json").stdout)
    assert s["total"] == 3 and s["by_status"] == {"active": 2, "archived": 1}
    assert s["users"] == [
        {"user": "alice", "active": 2, "tier1": 1, "archived": 0, "events": 0, "buffered": 0},
        {"user": "bob", "active": 0, "tier1": 0, "archived": 1, "events": 0, "buffered": 0},
    ]
    assert json.loads(ok("stats", "--json", "--user", "bob").stdout)["total"] == 1
    out = ok("stats").stdout
    assert "memories    3 (active 2, archived 1)" in out and "USER" in out
    assert "vectors     -" in out  # hybrid recall never ran on this database


def test_stats_counts_the_legacy_day_logs_apart_from_what_waits_for_compression(home: Path) -> None:
    """_global's events are the legacy top-level day logs, which the daily
    compression leaves alone: counted as "not compressed" they never were."""
    async def seed() -> None:
        async with await MemoryEngine.open(home / "data" / "memory.db") as e:
            await e.add_event("alice", "2026-02-28", "Booked flights to Osaka")
            await e.add_event("_global", "2026-02-20", "- 21:04 user: the legacy log's line")
            await e.add_event("_global", "2026-02-21", "- 09:00 user: another legacy day", compressed=True)

    asyncio.run(seed())
    s = json.loads(ok("stats", "--json").stdout)
    assert (s["events"], s["events_uncompressed"], s["events_legacy"]) == (3, 1, 2)
    assert ("events      3 (1 not compressed; 2 the legacy top-level day logs, kept as the operator's record, "
            "never compressed)") in ok("stats").stdout
    assert json.loads(ok("stats", "--json", "--user", "alice").stdout)["events_legacy"] == 0


def test_stats_counts_current_vectors(home: Path) -> None:
    ok("add", "a1", "--user", "alice")
    ok("add", "a2", "--user", "alice")
    ok("add", "b1", "--user", "bob")

    async def embed() -> None:  # what the vectorizer stores: one vector per memory, tied to its wording
        async with await MemoryEngine.open(home / "data" / "memory.db") as e:
            async with e.db.transaction() as conn:
                await conn.execute(
                    """INSERT INTO memory_vectors (memory_id, owner, model, content_hash, vector)
                       SELECT id, owner, 'm1', content_hash, zeroblob(16) FROM memories"""
                )
            await e.update(2, content="a2, edited")  # its vector is stale now

    asyncio.run(embed())
    assert json.loads(ok("stats", "--json").stdout)["vectors"] == {"m1": 2}
    assert json.loads(ok("stats", "--json", "--user", "alice").stdout)["vectors"] == {"m1": 1}
    assert "vectors     m1 2 of 3 active" in ok("stats").stdout


def test_export_json_and_markdown(home: Path, tmp_path: Path) -> None:
    async def seed() -> None:
        async with await MemoryEngine.open(home / "data" / "memory.db") as e:
            await e.add_event("alice", "2026-02-28", "Booked flights\nto Osaka", provenance=Provenance(channel="telegram"))
            await e.update(2, source_text="we moved atlas onto the k8s cluster")

    ok("add", "Alice lives in Hangzhou", "--user", "alice", "--tier", "1")
    ok("add", "Atlas runs on k8s", "--user", "alice", "--project", "atlas")
    ok("add", "Bob likes tea", "--user", "bob")
    ok("delete", "3", "-y")
    asyncio.run(seed())

    doc = json.loads(ok("export").stdout)
    assert set(doc) == {"exported_at", "user", "memories", "events", "project_aliases", "unanswered",
                        "extraction_buffer", "users"}
    assert [m["id"] for m in doc["memories"]] == [1, 2, 3] and doc["memories"][2]["status"] == "archived"
    assert set(doc["memories"][0]) == DB_KEYS
    assert doc["events"][0]["summary"] == "Booked flights\nto Osaka"
    assert doc["events"][0]["provenance"] == {"channel": "telegram"}

    out = tmp_path / "alice.json"
    r = ok("export", "--user", "alice", "-o", str(out))
    assert r.stdout == "" and "wrote 2 memories and 1 event" in r.output
    assert [m["owner"] for m in json.loads(out.read_text())["memories"]] == ["alice", "alice"]
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    r = cli("export", "-o", str(tmp_path / "no" / "such" / "dir.json"))
    assert r.exit_code == 1 and "does not exist" in r.output

    md = ok("export", "--format", "markdown").stdout
    alice, bob = md.index("## alice"), md.index("## bob")
    assert alice < md.index("### Profile (tier 1)") < md.index("- [m1] Alice lives in Hangzhou") < bob
    assert alice < md.index("### Knowledge (tier 2) — project atlas") < bob
    assert "- [e1] 2026-02-28: Booked flights\n  to Osaka" in md
    assert "- [m2] Atlas runs on k8s _(" in md and ")_\n  > drawn from: we moved atlas onto the k8s cluster\n" in md
    assert doc["memories"][1]["source_text"] == "we moved atlas onto the k8s cluster"
    assert "- [m3] Bob likes tea _(decision, importance 0.70, " in md and ", archived, added by the operator)_" in md



def test_a_groups_notes_are_in_the_whole_stores_export_and_not_in_a_members(home: Path) -> None:
    """A group's own notes (memory/groupnotes.py) are the group's: the whole
    store's export has them under their group owner; the export of a member
    who said them does not (they are not theirs)."""
    async def seed() -> None:
        async with await MemoryEngine.open(home / "data" / "memory.db") as e:
            await e.add(NewMemory(owner="group:telegram:-100900", content="Dad is booking the hotel",
                                  provenance=Provenance(channel="telegram", chat_id="-100900", group=True,
                                                        speakers=("telegram:11",), said_by=("Dad",))))
            await e.add(NewMemory(owner="telegram:11", content="Dad likes lakes",
                                  provenance=Provenance(channel="telegram", chat_id="11")))

    asyncio.run(seed())
    doc = json.loads(ok("export").stdout)
    assert {m["owner"] for m in doc["memories"]} == {"group:telegram:-100900", "telegram:11"}
    mine = json.loads(ok("export", "--user", "telegram:11").stdout)
    assert [m["content"] for m in mine["memories"]] == ["Dad likes lakes"]


def test_forget_user_erases_the_group_notes_drawn_from_their_lines_and_not_others(home: Path) -> None:
    async def seed() -> None:
        async with await MemoryEngine.open(home / "data" / "memory.db") as e:
            for who, name, text in (("telegram:11", "Dad", "Dad is booking the hotel for the lake trip"),
                                    ("telegram:12", "Mom", "Mom said Mia is allergic to peanuts")):
                await e.add(NewMemory(owner="group:telegram:-100900", content=text, provenance=Provenance(
                    channel="telegram", chat_id="-100900", group=True, speakers=(who,), said_by=(name,))))
            await e.add(NewMemory(owner="telegram:11", content="Dad likes lakes",
                                  provenance=Provenance(channel="telegram", chat_id="11")))

    asyncio.run(seed())
    out = ok("forget", "--user", "telegram:11", "--yes").stdout
    assert "1 memory" in out and "1 group note or day drawn from theirs" in out, out
    left = json.loads(ok("export").stdout)["memories"]
    assert [m["content"] for m in left] == ["Mom said Mia is allergic to peanuts"]
    assert not files_holding(home, "lake trip")


def test_an_export_names_shared_groups_by_the_titles_gateway_db_knows(home: Path) -> None:
    """``memory export`` opens memory.db alone and wrote ``telegram:-100123``
    where /share and the memory page say "Family": the titles gateway.db
    keeps are read (read-only), the raw ids kept beside them in the JSON."""
    from gateway.chattitles import ChatTitles

    db, gateway_db = home / "data" / "memory.db", home / "data" / "gateway.db"

    async def seed() -> None:
        async with await MemoryEngine.open(db) as e:
            await e.add(NewMemory(owner="alice", content="Alice brings the cake", provenance=Provenance(
                channel="telegram", chat_id="-100123", group=True, shared=("telegram:-100123", "feishu:oc_x"))))
            await e.add(NewMemory(owner="alice", content="Alice likes tea"))

    asyncio.run(seed())
    # No gateway.db (memory.db copied elsewhere, a gateway never run): ids, as before.
    doc = json.loads(ok("export").stdout)
    assert "group_titles" not in doc["memories"][0]
    assert doc["memories"][0]["provenance"]["shared"] == ["telegram:-100123", "feishu:oc_x"]
    assert not gateway_db.exists()

    async def titles() -> None:
        async with await SessionStore.open(gateway_db) as s:
            await ChatTitles(s.db).seen("telegram", "-100123", "Family", at="2026-03-01T12:00:00Z")

    asyncio.run(titles())

    def gateway_files() -> dict[str, tuple[bytes, int]]:
        return {f.name: (f.read_bytes(), f.stat().st_mtime_ns) for f in gateway_db.parent.glob("gateway.db*")}

    before = gateway_files()
    doc = json.loads(ok("export").stdout)
    cake, tea = doc["memories"]
    assert cake["group_titles"] == {"telegram:-100123": "Family"}  # feishu:oc_x has none known: its id alone
    assert cake["provenance"]["shared"] == ["telegram:-100123", "feishu:oc_x"]  # for machines, as stored
    assert "group_titles" not in tea
    md = ok("export", "--format", "markdown").stdout
    assert "shared with Family and feishu:oc_x" in md
    assert gateway_files() == before  # read only: not migrated, not written, no -wal made
    # A gateway.db that is not a database: the export still comes, by ids, and says why.
    gateway_db.write_bytes(b"not a database" * 100)
    r = ok("export")
    assert "warning: group titles not read from" in r.stderr and "named by their ids" in r.stderr
    assert "group_titles" not in json.loads(r.stdout)["memories"][0]


def test_an_export_names_each_users_renamed_projects(home: Path) -> None:
    """The operator's export (JSON and Markdown) left the aliases out: a
    restore from it, or a reader of it, lost that atlas is now orion."""
    ok("add", "atlas stores its data in Postgres", "--user", "alice", "--project", "atlas")
    ok("add", "Bob likes tea", "--user", "bob")
    ok("project-alias", "atlas", "orion", "--user", "alice")
    ok("project-alias", "nimbus", "cirrus", "--user", "bob")
    doc = json.loads(ok("export").stdout)
    assert [(a["owner"], a["alias"], a["project"], a["source"]) for a in doc["project_aliases"]] == [
        ("alice", "atlas", "orion", "manual"), ("bob", "nimbus", "cirrus", "manual")]
    assert doc["memories"][0]["project"] == "orion"
    mine = json.loads(ok("export", "--user", "bob").stdout)["project_aliases"]
    assert [(a["owner"], a["alias"]) for a in mine] == [("bob", "nimbus")]

    md = ok("export", "--format", "markdown").stdout
    alice, bob = md.index("## alice"), md.index("## bob")
    assert alice < md.index("Renamed projects: atlas → orion") < md.index("project orion") < bob
    assert bob < md.index("Renamed projects: nimbus → cirrus")
    assert "atlas → orion" not in ok("export", "--format", "markdown", "--user", "bob").stdout


def test_a_markdown_export_is_written_into_a_private_file_as_rendered_whole(home: Path, tmp_path: Path) -> None:
    """Streamed page by page into a temporary file renamed at the end: the
    text the in-memory renderer gives, 0600, nothing else left beside it."""
    ok("add", "Alice lives in Hangzhou", "--user", "alice", "--tier", "1")
    ok("add", "爱丽丝喜欢燕麦拿铁", "--user", "alice", "--project", "咖啡")
    ok("add", "Bob's vault password is tulip-4471", "--user", "bob", "--category", "credential")
    folder = tmp_path / "out"
    folder.mkdir()
    out = folder / "all.md"
    out.write_text("an older export")
    r = ok("export", "--format", "markdown", "-o", str(out))
    assert r.stdout == "" and "wrote 3 memories and 0 events" in r.output
    assert list(folder.iterdir()) == [out] and stat.S_IMODE(out.stat().st_mode) == 0o600
    text = out.read_text(encoding="utf-8")
    head = text.split("\n", 1)[0]
    at = head.removeprefix("# myclaw memory export (").removesuffix(")")

    async def rendered() -> str:
        async with await MemoryEngine.open(home / "data" / "memory.db") as e:
            backend = SqliteMemory(e)
            return render_markdown([await backend.owner_data(u) for u in await e.owners()], at=at)

    assert text == asyncio.run(rendered()) + "\n"
    assert "tulip-4471" in text and "咖啡" in text
    stdout = ok("export", "--format", "markdown").stdout
    assert stdout.split("\n", 1)[1] == text.split("\n", 1)[1]

def test_migrate_is_idempotent_and_reports_counts(home: Path, tmp_path: Path) -> None:
    ws = home / "workspace"  # the default workspace under MYCLAW_HOME
    files = FileMemory(ws, ManualClock("2026-02-28T12:00:00Z"))

    async def write() -> None:
        await files.remember("alice", "Alice's cat is called Miso", provenance=Provenance())
        await files.buffer([Turn(owner="alice", channel="telegram", chat_id="1", role="user", content="hi")])

    asyncio.run(write())
    (ws / "memory" / "MEMORY.md").write_text("- Standup is at 10:00\n")
    r = ok("migrate")
    assert f"migrated {ws / 'memory'} -> {home / 'data' / 'memory.db'}" in r.stdout
    lines = r.stdout.splitlines()  # logs go to stderr, stdout is the report alone
    assert lines[0].startswith("migrated ") and lines[1].split() == ["ADDED", "REPLACED", "SKIPPED"]
    assert lines[2].split() == ["memories", "2", "-", "0"] and lines[3].split() == ["events", "1", "0", "0"]
    again = json.loads(ok("migrate", "--json").stdout)
    assert (again["memories_added"], again["events_added"], again["files_unchanged"]) == (0, 0, 3)
    assert sorted(m.content for m in db_rows(home)) == ["Alice's cat is called Miso", "Standup is at 10:00"]

    other = tmp_path / "elsewhere"
    (other / "memory" / "users" / "stray").mkdir(parents=True)
    r = ok("migrate", "--workspace", str(other))
    assert "warning: users/stray: no .owner file" in r.output
    # said once, in words: not again as a log line (which hashes the name the operator needs)
    assert "migration left a file or directory out" not in r.output
    (other / "memory" / "notes.md").write_text("random notes\n")
    r = ok("migrate", "--workspace", str(other))
    assert r.output.count("warning: ") == 2 and "warning: notes.md: not imported" in r.output, r.output
    r = cli("migrate", "--workspace", str(tmp_path / "missing"))
    assert r.exit_code == 1 and "no memory directory at" in r.output


def test_migrate_beside_the_gateways_file_sync_waits_its_turn(home: Path) -> None:
    """Two imports at once would both add a new line: the second is told, nothing written."""
    from memory.filesync import FILE_SYNC_LEASE
    from memory.lease import Leases

    ws = home / "workspace"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "MEMORY.md").write_text("- Standup is at 10:00\n")

    async def hold() -> None:
        engine = await MemoryEngine.open(home / "data" / "memory.db", SystemClock())
        try:
            await Leases(engine.db, engine.clock).acquire(FILE_SYNC_LEASE, "file_sync@gateway")
        finally:
            await engine.close()

    asyncio.run(hold())
    r = cli("migrate")
    assert r.exit_code == 1 and "another import of the memory files is running" in r.output
    assert db_rows(home) == []


def test_migrate_whose_lease_is_taken_over_mid_run_stops_and_says_so(home: Path) -> None:
    """The real command in its own process, stalled (SIGSTOP) mid-paste past
    its lease and taken over by another import: once it goes on, exit 1 and
    a message saying what happened and what to do (no traceback, no user's
    words), and not one row or ledger entry written after the takeover; the
    other's lease left to it. Run again once that one is done: each line once."""
    import os
    import subprocess
    import sys

    from memory.filesync import FILE_SYNC_LEASE
    from memory.lease import Leases
    from memory.migrate import IMPORT_BATCH
    from tests.gateway.takeover import OTHER, imported, release_other, stall_and_take_over

    total = IMPORT_BATCH * 10
    (home / "workspace" / "memory").mkdir(parents=True)
    (home / "workspace" / "memory" / "MEMORY.md").write_text("".join(f"- pasted line {i}\n" for i in range(total)))
    db = home / "data" / "memory.db"
    root = str(Path(__file__).resolve().parents[2])
    run = "import sys; sys.path.insert(0, sys.argv[1]); from gateway.cli import main; main(sys.argv[2:])"
    with subprocess.Popen([sys.executable, "-c", run, root, "memory", "migrate"], env={**os.environ, "MYCLAW_HOME": str(home)},
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        try:
            at_takeover = stall_and_take_over(proc, db)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 1, (out, err)
    assert err.decode().endswith(
        "Error: this import outlived its lease and another import took over; it stopped, what it imported stays; "
        "run it again once that one is done to see the full report\n"), err
    assert b"Traceback" not in err and b"pasted line" not in out + err
    assert 0 < at_takeover < total
    assert imported(db) == at_takeover  # nothing written after the loss
    assert asyncio.run(_count(home, "SELECT COUNT(*) FROM meta WHERE key LIKE 'migrated:%'")) == 0

    async def holder() -> str:
        async with await MemoryEngine.open(db) as e:
            return (await Leases(e.db, e.clock).holder(FILE_SYNC_LEASE) or ("", ""))[0]

    assert asyncio.run(holder()) == OTHER
    release_other(db)
    r = ok("migrate")
    assert f"memories  {total - at_takeover} " in r.output, r.output
    assert imported(db) == total
    assert asyncio.run(_count(home, "SELECT COUNT(DISTINCT content) FROM memories WHERE source = 'migration'")) == total


async def _count(home: Path, sql: str) -> int:
    async with await MemoryEngine.open(home / "data" / "memory.db") as e:
        row = await e.db.fetchone(sql)
        return int(row[0]) if row is not None else 0


def test_migrate_without_a_file_store_says_so_and_makes_no_database(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "not-the-home"  # a wrong MYCLAW_HOME, or memory never disabled
    monkeypatch.setenv("MYCLAW_HOME", str(home))
    r = cli("migrate")
    assert r.exit_code == 1, r.output
    assert f"no memory directory at {home / 'workspace' / 'memory'}" in r.output
    assert not home.exists()


def test_db_override_and_identity_handles(home: Path, tmp_path: Path) -> None:
    home.mkdir()
    (home / "config.json").write_text(json.dumps({"memory": {"identities": {"alice": ["telegram:777"]}}}))
    db = tmp_path / "other.db"
    ok("--db", str(db), "add", "fact one", "--user", "telegram:777")
    ok("add", "fact two", "--user", "telegram:778", "--db", str(db))
    rows = json.loads(ok("list", "--json", "--db", str(db)).stdout)
    assert [(m["owner"], m["content"]) for m in rows] == [("telegram:778", "fact two"), ("alice", "fact one")]
    assert json.loads(ok("--db", str(db), "list", "--json", "-u", "telegram:777").stdout)[0]["owner"] == "alice"
    assert not (home / "data" / "memory.db").exists()


def test_forget_takes_the_rows_a_handle_stored_before_it_was_mapped(home: Path) -> None:
    """memory.identities maps telegram:777 to alice after telegram:777 had
    talked (merge-identities not run yet): `forget --user telegram:777`
    resolved to alice and found "nothing stored about alice", and
    `forget --user alice` left telegram:777's rows. An erasure takes the
    person's every handle's rows along, and says so."""
    ok("add", "Alice's blood type is AB", "--user", "telegram:777")  # before the mapping
    (home / "config.json").write_text(json.dumps({"memory": {"identities": {"alice": ["telegram:777"]}}}))
    r = ok("forget", "--user", "telegram:777", "--yes")
    assert "forgot telegram:777: 1 memory" in r.stdout, r.stdout
    assert db_rows(home) == []

    ok("add", "Bob likes chess", "--user", "telegram:888")  # before the mapping
    (home / "config.json").write_text(json.dumps({"memory": {"identities": {
        "alice": ["telegram:777"], "bob": ["telegram:888", "feishu:ou_bob"]}}}))
    ok("add", "Bob moved to Porto", "--user", "bob")
    ok("add", "Alice drinks tea", "--user", "alice")
    r = cli("forget", "--user", "bob", input="y\n")
    assert r.exit_code == 0, r.output
    assert "and telegram:888 (its rows from before memory.identities mapped it)" in r.output, r.output
    assert "forgot bob: 1 memory" in r.output and "forgot telegram:888: 1 memory" in r.output, r.output
    assert [m.content for m in db_rows(home)] == ["Alice drinks tea"]


def test_forget_takes_the_recent_files_a_handle_sent_before_it_was_mapped(home: Path) -> None:
    """The files a person sent lately under another handle (telegram:888,
    mapped to bob after it sent them) go with `forget --user bob` when no
    gateway runs, as /forget all takes them; another user's stay."""
    ok("add", "Bob moved to Porto", "--user", "bob")

    async def seed() -> None:
        async with await SessionStore.open(home / "data" / "gateway.db") as s:
            recent = RecentFiles(s.db, SystemClock())  # kept a day: the CLI reads them at the real time
            await recent.keep("telegram:888", "telegram:888", [Document("bob-plan.pdf", "bob's plan")])
            await recent.keep("telegram:2", "carol", [Document("carol-plan.pdf", "carol's plan")])
            await recent.flush()

    asyncio.run(seed())
    (home / "config.json").write_text(json.dumps({"memory": {"identities": {"bob": ["telegram:888"]}}}))
    out = ok("forget", "--user", "bob", "--yes").stdout
    assert "forgot telegram:888: " in out and "1 recent file" in out, out

    async def left() -> list[str]:
        async with await SessionStore.open(home / "data" / "gateway.db") as s:
            return [str(r[0]) for r in await s.db.fetchall("SELECT owner FROM recent_files")]

    assert asyncio.run(left()) == ["carol"]


def test_search_of_a_person_finds_what_their_handles_stored_before_the_mapping(home: Path) -> None:
    """memory.identities maps telegram:777 to alice after telegram:777 had
    talked: `search --user alice` (or `--user telegram:777`, which resolves
    to her) ranked her rows only, and said "no matches" for what she said
    as telegram:777, which her /export lists and `forget` erases. The
    handle's memories and events are searched too, shown under the handle."""
    ok("add", "Alice's blood type is AB", "--user", "telegram:777")  # before the mapping

    async def event() -> None:
        async with await MemoryEngine.open(home / "data" / "memory.db") as e:
            await e.add_event("telegram:777", "2026-03-01", "Gave blood at the clinic")

    asyncio.run(event())
    (home / "config.json").write_text(json.dumps({"memory": {"identities": {"alice": ["telegram:777"]}}}))
    ok("add", "Alice drinks tea", "--user", "alice")
    ok("add", "Bob's blood type is O", "--user", "bob")
    for who in ("alice", "telegram:777"):
        hits = json.loads(ok("search", "blood", "--user", who, "--json").stdout)
        assert {(h["user"], h["kind"], h["content"]) for h in hits} == {
            ("telegram:777", "memory", "Alice's blood type is AB"), ("telegram:777", "event", "Gave blood at the clinic")}
    assert "telegram:777" in ok("search", "blood", "--user", "alice").stdout


def test_config_errors_exit_2_without_traceback(home: Path) -> None:
    home.mkdir()
    (home / "config.json").write_text('{"memory": {"enabled": "maybe"}}')
    r = cli("stats")
    assert r.exit_code == 2 and "memory.enabled" in r.output and "'maybe'" in r.output
    assert "Traceback" not in r.output and isinstance(r.exception, SystemExit)
    (home / "config.json").write_text("{not json")
    r = cli("list")
    assert r.exit_code == 2 and "not valid JSON at line 1" in r.output


def test_forget_erases_a_user_everywhere_and_only_them(home: Path) -> None:
    from gateway.cron import CronStore

    ok("add", "Alice's locker code is 4921", "--user", "alice")
    ok("add", "Bob likes tea", "--user", "bob")

    async def seed() -> None:
        clock = ManualClock("2026-03-01T12:00:00Z")
        async with await SessionStore.open(home / "data" / "gateway.db", clock) as s:
            await s.append("telegram:1", channel="telegram", chat_id="1", role="user", content="hi, I'm alice",
                           owner="alice", message_id="1")
            await s.append("telegram:2", channel="telegram", chat_id="2", role="user", content="hi, I'm bob",
                           owner="bob", message_id="2")
            recent = RecentFiles(s.db, SystemClock())  # kept a day: the CLI reads them at the real time
            await recent.keep("telegram:1", "alice", [Document("alice-plan.pdf", "alice's plan")])
            await recent.keep("telegram:2", "bob", [Document("bob-plan.pdf", "bob's plan")])
            await recent.flush()  # on disk, as a stopped gateway leaves them
            await Incognito(s.db).start("alice", at=clock.now())  # a setting of hers, data about her too
            await Incognito(s.db).start("bob", at=clock.now())
        store = await CronStore.open(home / "data" / "cron.db", clock)
        try:
            await store.add(schedule="0 9 * * *", message="daily plan", channel="telegram", chat_id="1", user="alice")
            await store.add(at=clock.now() + timedelta(hours=2), message="call mom", channel="telegram", chat_id="1",
                            user="alice")
            await store.add(schedule="0 9 * * *", message="tea time", channel="telegram", chat_id="2", user="bob")
            jobs = await store.list()
        finally:
            await store.close()
        async with await SessionStore.open(home / "data" / "gateway.db", clock) as s:
            for job in jobs:  # each reply on its way, the kill before cron's record: its slot's mark stays
                out = OutboundMessage("telegram", job.chat_id, "", job_slot=job_slot(job.id, job.slot))
                await Outbox(s.db).add(out, owner=job.user, created_at=clock.now(), next_attempt_at=clock.now(),
                                       sending=True)
        files = FileMemory(home / "workspace", clock)
        await files.remember("alice", "alice's file note", provenance=Provenance())
        for who in ("alice", "bob"):  # what `myclaw chat` wrote for their /export
            folder = exports_folder(home / "exports", who)
            folder.mkdir(parents=True)
            (folder / "myclaw-memory-2026-03-01.md").write_text(f"{who}'s export")

    asyncio.run(seed())
    assert cli("forget", "--user", "alice", input="n\n").exit_code != 0  # asks first; "no" changes nothing
    assert len(db_rows(home)) == 2

    out = ok("forget", "--user", "alice", "--yes").stdout
    assert "1 memory," in out and "1 history message," in out and "2 scheduled jobs" in out and "1 memory file," in out
    assert "1 recent file," in out and "1 incognito setting" in out and "1 export," in out
    assert not exports_folder(home / "exports", "alice").exists() and exports_folder(home / "exports", "bob").exists()
    assert [m.owner for m in db_rows(home)] == ["bob"]

    async def left() -> tuple[list[str], list[str]]:
        async with await SessionStore.open(home / "data" / "gateway.db") as s:
            rows = await s.db.fetchall("SELECT owner FROM session_messages")
            assert [r[0] for r in await s.db.fetchall("SELECT owner FROM recent_files")] == ["bob"]
            assert [r[0] for r in await s.db.fetchall("SELECT owner FROM user_incognito")] == ["bob"]
            marks = [str(r[0]) for r in await s.db.fetchall("SELECT job FROM job_replies")]
        store = await CronStore.open(home / "data" / "cron.db", ManualClock())
        try:
            left_jobs = await store.list()
            jobs = [j.user for j in left_jobs]
        finally:
            await store.close()
        assert marks == [j.id for j in left_jobs if j.user == "bob"]  # her jobs' marks went with them
        return [r[0] for r in rows], jobs

    history, jobs = asyncio.run(left())
    assert history == ["bob"] and [u for u in jobs if not u.startswith("_")] == ["bob"]
    assert not FileMemory(home / "workspace").user_dir("alice").exists()
    assert cli("forget", "--user", "_global", "--yes").exit_code == 2


def test_forget_names_the_backups_it_cannot_reach(home: Path) -> None:
    """An erasure does not reach copies made before (``myclaw backup``'s
    folders, the files a restore moved aside): the operator answering a
    deletion request is told which, not left to believe it is all gone."""
    ok("add", "Alice's locker code is 4921", "--user", "alice")
    assert "not changed" not in ok("forget", "--user", "alice", "--yes").stdout  # none yet
    ok("add", "Alice's locker code is 4921", "--user", "alice")
    (home / "backups" / "20260301T120000Z").mkdir(parents=True)
    (home / "data" / "before-restore-20260302T080000Z").mkdir()
    out = ok("forget", "--user", "alice", "--yes").stdout
    assert "forgot alice: 1 memory, 0 daily events, 1 change-log entry, 0 lines waiting to be learnt" in out
    assert "2 earlier copies are not changed" in out
    assert str(home / "backups" / "20260301T120000Z") in out and "before-restore-20260302T080000Z" in out
    (home / "data" / "before-restore-20260302T080000Z").rmdir()
    ok("add", "Alice's locker code is 4921", "--user", "alice")
    assert "1 earlier copy is not changed" in ok("forget", "--user", "alice", "--yes").stdout  # one: said as one


def test_forget_beside_a_running_gateway_says_what_it_still_holds_until_restarted(home: Path) -> None:
    """A gateway running on the home keeps users' time zones and incognito
    settings in memory: after the erasure it still showed the user "Your time
    zone: Asia/Tokyo" and "Incognito is on" until it restarted. The operator
    is told so, and what to do; with no gateway running, nothing is said."""
    import os

    from gateway.datalock import GatewayLock
    from gateway.timezones import UserTimezones, parse_timezone

    async def seed(owner: str) -> None:
        clock = ManualClock("2026-03-01T12:00:00Z")
        async with await SessionStore.open(home / "data" / "gateway.db", clock) as s:
            await UserTimezones(s.db).set(owner, parse_timezone("Asia/Tokyo"), at=clock.now())
            await Incognito(s.db).start(owner, at=clock.now())

    asyncio.run(seed("alice"))
    asyncio.run(seed("bob"))
    assert "gateway" not in ok("forget", "--user", "bob", "--yes").stdout
    lock = GatewayLock(home / "data")  # what `myclaw gateway` holds while it runs
    lock.acquire()
    try:
        out = ok("forget", "--user", "alice", "--yes").stdout
    finally:
        lock.release()
    assert "1 time zone setting" in out and "1 incognito setting" in out
    assert (f"the gateway running on this home (pid {os.getpid()}) still uses alice's time zone and incognito "
            "settings until it restarts: restart it") in out


def test_forget_beside_a_gateway_that_does_not_take_the_request_withdraws_it_and_erases_the_files(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gateway says it takes erasure requests but does not take this one
    in time (busy, stuck): the request is withdrawn (a later run must not
    act on it), the files are erased here, and the operator is told that
    gateway still holds the settings it read."""
    import gateway.cli.memory_cmd as memory_cmd
    from gateway.datalock import GatewayLock
    from gateway.timezones import UserTimezones, parse_timezone

    async def seed() -> None:
        clock = ManualClock("2026-03-01T12:00:00Z")
        async with await SessionStore.open(home / "data" / "gateway.db", clock) as s:
            await UserTimezones(s.db).set("alice", parse_timezone("Asia/Tokyo"), at=clock.now())

    async def requests_left() -> int:
        async with await SessionStore.open(home / "data" / "gateway.db") as s:
            return int((await s.db.fetchone("SELECT count(*) FROM erasure_requests"))[0])

    asyncio.run(seed())
    monkeypatch.setattr(memory_cmd, "TAKE_WAIT", 0.3)
    lock = GatewayLock(home / "data")
    lock.acquire()
    lock.serves("erasures")  # ... and never polls
    try:
        r = cli("forget", "--user", "alice", "--yes")
    finally:
        lock.release()
    assert r.exit_code == 0, r.output
    assert "did not do the erasure (not taken within 0.3 s" in r.stderr and "erasing the files here" in r.stderr
    assert "forgot alice: " in r.stdout and "1 time zone setting" in r.stdout
    assert "still uses alice's time zone setting until it restarts" in r.stdout
    assert asyncio.run(requests_left()) == 0


def test_forget_asking_a_gateway_that_stops_before_taking_it_does_not_wait_out_the_time(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gateway said it takes erasure requests, then stopped (a restart)
    before taking this one: the CLI withdraws it as soon as it sees no
    gateway runs and erases the files itself, rather than waiting the
    whole TAKE_WAIT for nobody."""
    import subprocess
    import sys

    import gateway.cli.memory_cmd as memory_cmd

    async def gateway_db() -> None:  # a running gateway has made it
        async with await SessionStore.open(home / "data" / "gateway.db"):
            pass

    ok("add", "Alice's blood type is AB", "--user", "alice")
    asyncio.run(gateway_db())
    monkeypatch.setattr(memory_cmd, "TAKE_WAIT", 600.0)  # a failure shows as a hang the suite's bound cuts
    code = ("import sys, time; from pathlib import Path; from gateway.datalock import GatewayLock; "
            "l = GatewayLock(Path(sys.argv[1])); l.acquire(); l.serves('erasures'); print('held', flush=True); "
            "time.sleep(1.5)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(home / "data")], stdout=subprocess.PIPE,
                            cwd=Path(__file__).resolve().parents[2])
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"held\n"
        r = cli("forget", "--user", "alice", "--yes")
    finally:
        proc.kill()
        proc.communicate()  # waited for, its pipe closed
    assert r.exit_code == 0, r.output
    assert "did not do the erasure" in r.stderr and "forgot alice: 1 memory" in r.stdout
    assert db_rows(home) == []


def test_forget_help_says_it_runs_beside_a_gateway_and_what_to_do_about_its_caches(home: Path) -> None:
    # It said "Run it with the gateway stopped", which README and the command's own output contradict.
    text = " ".join(cli("forget", "--help").output.split())
    assert "gateway stopped" not in text
    assert "Beside a running gateway it asks the gateway to erase them, as /forget all" in text
    assert "restart it" in text


def test_forget_of_a_misspelt_handle_says_nothing_was_there_and_names_the_near_one(home: Path) -> None:
    # An erasure request with a typo must not read as done: "forgot ...: 0 memories, ..." did.
    # And it is said before the "Erase everything ...? [y/N]" question, which read as if there were something.
    ok("add", "Alice's locker code is 4921", "--user", "telegram:1001")
    for args in (("--yes",), ()):
        r = cli("forget", "--user", "telgram:1001", *args, input="y\n")
        assert r.exit_code == 1 and "Erase everything" not in r.output  # as other "not found" cases
        assert r.stderr.splitlines() == [
            "Error: nothing is stored about telgram:1001, so nothing was erased (did you mean telegram:1001?"
            " `myclaw memory stats` lists every user)",
        ]
    assert [m.owner for m in db_rows(home)] == ["telegram:1001"]
    assert "forgot telegram:1001: 1 memory" in ok("forget", "--user", "telegram:1001", "--yes").stdout


def test_forget_asks_when_anything_at_all_is_stored_about_the_user(home: Path) -> None:
    """The "nothing is stored" check before the question must never miss a
    store the erasure reaches: each alone is enough to be asked (and erased)."""
    from gateway.cron import CronStore
    from gateway.inbox import Inbox
    from gateway.timezones import UserTimezones, parse_timezone

    U = "telegram:7"
    clock = ManualClock("2026-03-01T12:00:00Z")

    async def history(s: SessionStore) -> None:
        await s.append("telegram:1", channel="telegram", chat_id="1", role="user", content="hi", owner=U,
                       message_id="1")

    async def reply(s: SessionStore) -> None:
        await Outbox(s.db).add(OutboundMessage("telegram", "1", "hello"), owner=U, created_at=clock.now(),
                               next_attempt_at=clock.now())

    async def zone(s: SessionStore) -> None:
        await UserTimezones(s.db).set(U, parse_timezone("Asia/Tokyo"), at=clock.now())

    async def quiet(s: SessionStore) -> None:
        await Incognito(s.db).start(U, at=clock.now())

    async def files(s: SessionStore) -> None:
        recent = RecentFiles(s.db, SystemClock())
        await recent.keep("telegram:1", U, [Document("plan.pdf", "the plan")])
        await recent.flush()

    async def waiting(s: SessionStore) -> None:  # a row names its sender (telegram 7), not its owner
        await Inbox(s.db, clock).keep(InboundMessage("telegram", "1", "7", "waiting words", message_id="5"))

    async def job() -> None:
        store = await CronStore.open(home / "data" / "cron.db", clock)
        try:
            await store.add(schedule="0 9 * * *", message="plan", channel="telegram", chat_id="1", user=U)
        finally:
            await store.close()

    async def in_gateway(step: Any) -> None:
        async with await SessionStore.open(home / "data" / "gateway.db", clock) as s:
            await step(s)

    seeds: list[Any] = [lambda step=step: in_gateway(step) for step in (history, reply, zone, quiet, files, waiting)]
    seeds += [job, lambda: FileMemory(home / "workspace", clock).remember(U, "note", provenance=Provenance())]

    def export() -> Any:
        folder = exports_folder(home / "exports", U)
        folder.mkdir(parents=True)
        (folder / "x.md").write_text("their export")
        return asyncio.sleep(0)

    def memory() -> Any:
        ok("add", "U drinks tea", "--user", U)
        return asyncio.sleep(0)

    seeds += [export, memory]
    assert "nothing is stored" in cli("forget", "--user", U).stderr  # nothing yet
    for i, seed in enumerate(seeds):
        asyncio.run(seed())
        r = cli("forget", "--user", U, input="n\n")
        assert f"Erase everything myclaw stores about {U}?" in r.output, (i, r.output)
        assert "forgot" in ok("forget", "--user", U, "--yes").stdout
        assert "nothing is stored" in cli("forget", "--user", U).stderr, i  # all of it went


def test_another_users_waiting_message_is_not_something_stored_about_this_one(home: Path) -> None:
    """A crash left telegram:8's message in the inbox: a forget of
    telegram:7 (nothing of theirs anywhere) says so, and the message stays."""
    from gateway.inbox import Inbox

    async def waiting() -> None:
        async with await SessionStore.open(home / "data" / "gateway.db", ManualClock("2026-03-01T12:00:00Z")) as s:
            await Inbox(s.db, SystemClock()).keep(InboundMessage("telegram", "1", "8", "their words", message_id="5"))

    async def left() -> int:
        async with await SessionStore.open(home / "data" / "gateway.db", ManualClock("2026-03-01T12:00:00Z")) as s:
            return await Inbox(s.db, SystemClock()).count()

    asyncio.run(waiting())
    assert "nothing is stored about telegram:7" in cli("forget", "--user", "telegram:7").stderr
    assert asyncio.run(left()) == 1


def test_forget_and_a_cascade_erase_leave_no_trace_in_the_history_file_of_a_running_gateway(home: Path) -> None:
    """The gateway, still running, holds gateway.db open: its WAL is not
    removed when the CLI closes, and keeps the deleted rows' old pages
    unless the erasure rewrites the file."""
    import sqlite3

    ok("add", "Alice's locker code is zqxjkv4711", "--user", "alice")

    async def talk() -> None:
        async with await SessionStore.open(home / "data" / "gateway.db") as s:
            for i in range(30):
                for owner in ("alice", "carol"):
                    text = f"{owner}: my locker code is {owner[0]}qxjkv4711" if i == 15 else f"an ordinary line {i}"
                    await s.append(f"telegram:{owner}", channel="telegram", chat_id=owner, role="user", content=text, owner=owner)
            await s.append("telegram:alice", channel="telegram", chat_id="alice", role="user",
                           content="Alice's locker code is zqxjkv4711, remember it", owner="alice")

    asyncio.run(talk())
    gateway = sqlite3.connect(home / "data" / "gateway.db")  # the running gateway's connection
    try:
        gateway.execute("SELECT count(*) FROM session_messages").fetchall()
        assert on_disk(home / "data", "zqxjkv4711") > 0 and on_disk(home / "data", "cqxjkv4711") > 0
        assert "erased 1 conversation history message(s)" in ok("delete", "1", "--purge", "--cascade", "--yes").stdout
        assert on_disk(home / "data", "zqxjkv4711") == 0
        assert "30 history messages" in ok("forget", "--user", "carol", "--yes").stdout
        assert on_disk(home / "data", "cqxjkv4711") == 0
        assert gateway.execute("SELECT count(*) FROM session_messages").fetchone() == (30,)  # alice's other lines stay
    finally:
        gateway.close()


def test_a_cascade_purge_takes_an_imported_facts_memory_md_line(home: Path) -> None:
    """As /forget and the page's cascade erase: a fact read from the user's
    MEMORY.md (memory was off once) goes from there too; the other stays."""
    async def seed() -> None:
        files = FileMemory(home / "workspace", ManualClock("2026-03-01T12:00:00Z"))
        for line in ("Locker code zqxjkv4711", "Likes green tea"):
            await files.remember("alice", line, provenance=Provenance())

    asyncio.run(seed())
    ok("migrate")
    [m] = [m for m in db_rows(home) if "zqxjkv4711" in m.content]
    assert "erased 1 line(s) of their memory files" in ok("delete", str(m.id), "--purge", "--cascade", "--yes").stdout
    folder = FileMemory(home / "workspace").user_dir("alice")
    assert on_disk(folder, "zqxjkv4711") == 0 and "Likes green tea" in (folder / "MEMORY.md").read_text()


def test_purge_and_a_redacting_edit_leave_no_trace_in_the_files(home: Path) -> None:
    ok("add", "Alice's door code is zqxjkv4711", "--user", "alice")
    ok("add", "Alice's bank pin is wvutsr1234", "--user", "alice")
    ok("add", "Alice drinks green tea", "--user", "alice")

    ok("delete", "1", "--purge", "--yes")
    ok("edit", "2", "--content", "Alice's bank pin is in her password manager")
    assert on_disk(home / "data", "zqxjkv4711") == 0 and on_disk(home / "data", "wvutsr1234") == 0
    assert sorted(m.content for m in db_rows(home)) == ["Alice drinks green tea", "Alice's bank pin is in her password manager"]


def _buffered(home: Path, owner: str) -> list[str]:
    async def read() -> list[str]:
        async with await MemoryEngine.open(home / "data" / "memory.db") as e:
            return await buffered(e, owner)

    return asyncio.run(read())


def _with_lineage(home: Path) -> Lineage:
    """The memory database with a fact that has a past (tests/gateway/lineage.py)."""
    (home / "data").mkdir(parents=True, exist_ok=True)

    async def build() -> Lineage:
        async with await MemoryEngine.open(home / "data" / "memory.db") as e:
            return await lineage(e)

    return asyncio.run(build())


def _ids(home: Path, owner: str) -> set[int]:
    return {m.id for m in db_rows(home) if m.owner == owner}


def _events(home: Path, owner: str) -> list[int]:
    async def read() -> list[int]:
        async with await MemoryEngine.open(home / "data" / "memory.db") as e:
            return [ev.id for ev in await e.events(owner)]

    return asyncio.run(read())


def test_delete_purge_cascade_erases_the_history_and_the_core_memory_built_on_it(home: Path) -> None:
    f = _with_lineage(home)

    async def talk(lines: list[tuple[str, str]] | None = None) -> list[tuple[str, str]]:
        async with await SessionStore.open(home / "data" / "gateway.db") as s:
            for owner, text in lines or []:
                await s.append(f"telegram:{owner}", channel="telegram", chat_id=owner, role="user", content=text, owner=owner)
            return [(r[0], r[1]) for r in await s.db.fetchall("SELECT owner, content FROM session_messages ORDER BY id")]

    asyncio.run(talk([("alice", f.said), ("alice", "thanks!"), ("bob", f.said)]))
    everything = {f.home, *f.versions, *f.entries, *f.stays}
    r = cli("delete", str(f.home), "--cascade", "--yes")
    assert r.exit_code == 2 and "--cascade erases for good: give --purge too" in r.output
    r = cli("delete", str(f.home), "--purge", "--cascade", "--user", "bob", "--yes")  # not bob's
    assert r.exit_code == 1 and f"no memory with id {f.home} for user bob" in r.output
    r = cli("delete", str(f.home), "--purge", "--cascade", input="n\n")
    assert r.exit_code == 1 and "cancelled" in r.output
    assert "with 3 older versions and 2 Core Memory entries built on it?" in r.output
    assert _ids(home, "alice") == everything

    r = ok("delete", str(f.home), "--purge", "--cascade", input="y\n")
    berlin, moved, flat = f.versions
    drawn, same = f.entries
    assert r.stdout.splitlines() == [
        f"erased memory {f.home}",
        f"erased memory {berlin} (older version, superseded): Alice lives in Berlin-Kreuzberg",
        f"erased memory {moved} (older version, archived): Alice moved to Munich in May",
        f"erased memory {flat} (older version, archived): Alice's new flat is in Munich",
        f"erased memory {drawn} (Core Memory entry built on it): Lives in Munich",
        f"erased memory {same} (Core Memory entry built on it): Alice lives in Munich since May",
        "dropped 1 message(s) waiting for extraction that said it",
        "erased 1 conversation history message(s) that said it",
        f"kept e{f.event} (daily event of the same conversation, 2026-03-01, not erased): Alice told the bot about her move",
    ]
    assert _ids(home, "alice") == set(f.stays)
    assert _buffered(home, "alice") == ["what's the weather?"] and _buffered(home, "bob") == [f.said]
    assert asyncio.run(talk()) == [("alice", "thanks!"), ("bob", f.said)]
    assert _ids(home, "bob") == set(f.bobs)  # the same words, another user: untouched
    assert _events(home, "alice") == [f.event]  # named, kept
    logged = json.loads(ok("log", "--user", "alice", "--action", "erase", "--json").stdout)
    assert sorted(x["memory_id"] for x in logged) == sorted([f.home, *f.versions, *f.entries])
    assert {x["job"] for x in logged} == {"cli"}
    assert on_disk(home / "data", "Kreuzberg") == 0  # the versions' words left the files


def test_delete_purge_erases_one_row_by_default_and_names_what_remains(home: Path) -> None:
    f = _with_lineage(home)
    r = ok("delete", str(f.home), "--purge", "--yes")
    assert r.stdout.splitlines() == [
        f"erased memory {f.home}",
        f"kept e{f.event} (daily event of the same conversation, 2026-03-01, not erased): Alice told the bot about her move",
    ]
    rest = ", ".join(str(i) for i in (*f.versions, *f.entries))
    assert f"note: 3 older versions and 2 Core Memory entries built on it remain ({rest}); erase them too" in r.stderr
    assert _ids(home, "alice") == {*f.versions, *f.entries, *f.stays}
    assert _buffered(home, "alice") == [f.said, "what's the weather?"]  # one row means one row
    # An entry's sources are named when it goes: the tea entry was drawn from the tea fact.
    tea, teas = f.stays
    r = ok("delete", str(teas), "--purge", "--cascade", "-y")
    assert r.stdout.splitlines() == [f"erased memory {teas}", f"kept m{tea} (fact it was drawn from, not erased): Alice drinks green tea"]
    assert _ids(home, "alice") == {*f.versions, *f.entries, tea}
    logged = json.loads(ok("log", "--user", "alice", "--action", "erase", "--json").stdout)
    assert [x["memory_id"] for x in logged] == [teas, f.home]


def test_editing_a_facts_words_supersedes_the_core_memory_entries_built_on_it(home: Path) -> None:
    """As on the memory page: an entry the weekly refresh drew from the old
    words would go on stating them in every prompt."""
    ok("add", "Atlas launches on February 10", "--user", "alice")

    async def profile() -> None:
        async with await MemoryEngine.open(home / "data" / "memory.db") as e:
            await e.add(NewMemory(owner="alice", tier=1, content="Alice's Atlas launch is February 10",
                                  category=Category.DECISION, provenance=Provenance(refs=("weekly", "m:1"))))
            await e.add(NewMemory(owner="alice", tier=1, content="Alice drinks green tea",
                                  category=Category.IDENTITY, provenance=Provenance(refs=("weekly", "m:9"))))

    asyncio.run(profile())
    out = ok("edit", "1", "--content", "Atlas launches on March 3").stdout
    assert "superseded 1 Core Memory entry built on it: 2" in out
    status = {m.id: (m.status, m.superseded_by) for m in db_rows(home)}
    assert status[2] == (Status.SUPERSEDED, 1) and status[3] == (Status.ACTIVE, None)
    assert "superseded" not in ok("edit", "1", "--importance", "0.9").stdout  # the words unchanged: nothing goes


def test_a_json_export_streamed_a_page_at_a_time_is_the_document_json_dumps_makes(home: Path, tmp_path: Path) -> None:
    """Written as the rows are read (pages of 2 here, to cross page and
    owner boundaries): byte for byte what ``json.dumps(indent=2)`` makes
    of the whole store, for every owner and for one; an empty store's
    lists are ``[]``. Alice has two messages waiting in the inbox (counted
    as ``Inbox.owned`` would; the others none: not listed)."""
    from gateway.cli._common import event_dict, memory_dict
    from gateway.cli._json_export import write_json

    db = home / "data" / "memory.db"

    async def both(owner: str | None) -> tuple[str, str]:
        async with await MemoryEngine.open(db) as e:
            parts: list[str] = []
            async def waiting(o: str) -> int:
                return 2 if o == "alice" else 0

            counts = await write_json(parts.append, e, owner, at="2026-11-23T00:00:00Z", page=2, unanswered=waiting)
            backend = SqliteMemory(e)
            datas = [await backend.owner_data(u) for u in ([owner] if owner else await e.owners())]
            whole = json.dumps({
                "exported_at": "2026-11-23T00:00:00Z", "user": owner,
                "memories": [memory_dict(m) for m in sorted((m for d in datas for m in d.memories), key=lambda m: m.id)],
                "events": [event_dict(ev) for d in datas for ev in d.events],
                "project_aliases": [],
                "unanswered": {"alice": 2} if owner in (None, "alice") and "alice" in await e.owners() else {},
                "extraction_buffer": {d.owner: {"waiting": d.waiting, "set_aside": d.set_aside} for d in datas
                                      if d.waiting or d.set_aside},
                "users": [],  # no gateway.db settings, no cron.db
            }, ensure_ascii=False, indent=2) + "\n"
            assert counts == (sum(len(d.memories) for d in datas), sum(len(d.events) for d in datas))
            return "".join(parts), whole

    streamed, whole = asyncio.run(both(None))  # an empty store
    assert streamed == whole and json.loads(streamed)["memories"] == []

    for user, text in [("bob", "Bob likes tea"), ("alice", "爱丽丝喜欢燕麦拿铁"), ("alice", "Alice lives in Hangzhou"),
                       ("bob", 'Bob\'s "vault" is tulip-4471'), ("carol", "Carol runs\nthe atlas deploys")]:
        ok("add", text, "--user", user)
    ok("delete", "2", "-y")

    async def seed() -> None:
        async with await MemoryEngine.open(db) as e:
            for day, who, what in [("2026-03-01", "alice", "Booked flights"), ("2026-02-28", "alice", "去大阪"),
                                   ("2026-02-28", "alice", "Packed"), ("2026-01-01", "bob", "New year")]:
                await e.add_event(who, day, what, provenance=Provenance(channel="telegram"))

    asyncio.run(seed())
    for owner in (None, "alice", "dave"):
        streamed, whole = asyncio.run(both(owner))
        assert streamed == whole, owner
    doc = json.loads(streamed)
    assert doc["memories"] == [] and doc["events"] == []  # dave has nothing

    out = tmp_path / "all.json"
    r = ok("export", "-o", str(out))
    assert "wrote 5 memories and 4 events" in r.output and stat.S_IMODE(out.stat().st_mode) == 0o600
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert [m["id"] for m in doc["memories"]] == [1, 2, 3, 4, 5] and doc["memories"][1]["status"] == "archived"
    assert [e["summary"] for e in doc["events"]] == ["去大阪", "Packed", "Booked flights", "New year"]
    # To stdout, the same document; a later run, so stamped with its own time
    # (the real clock's: two runs may fall in different seconds).
    again = json.loads(ok("export").stdout)
    assert again == doc | {"exported_at": again["exported_at"]}
    assert doc["exported_at"] <= again["exported_at"]


def test_export_of_an_unknown_user_fails_and_names_the_near_handle(home: Path, tmp_path: Path) -> None:
    # "export --user nobody" wrote an empty export and exited 0: a typo read as "nothing stored".
    ok("add", "Alice's locker code is 4921", "--user", "telegram:1001")
    out = tmp_path / "kept.json"
    out.write_text("an older export")
    for fmt in ("json", "markdown"):
        r = cli("export", "--user", "telgram:1001", "--format", fmt, "-o", str(out))
        assert r.exit_code == 1, r.output
        assert r.stdout == ""
        assert ("nothing is stored about telgram:1001, so there is nothing to export "
                "(did you mean telegram:1001? `myclaw memory stats` lists every user)") in r.output
        assert out.read_text() == "an older export"  # not replaced by an empty one
    r = cli("export", "--user", "nobody")
    assert r.exit_code == 1 and "nothing is stored about nobody" in r.output and "did you mean" not in r.output
    # The id alone, as the chat shows it, without the channel: the handles that end with it.
    ok("add", "Bob's locker code is 1234", "--user", "feishu:1001")
    r = cli("export", "--user", "1001")
    assert r.exit_code == 1
    assert "nothing is stored about 1001, so there is nothing to export (did you mean feishu:1001 or telegram:1001?" in r.output
    assert json.loads(ok("export", "--user", "telegram:1001").stdout)["memories"][0]["owner"] == "telegram:1001"
    assert json.loads(ok("export", "--user", "_global").stdout)["memories"] == []  # everyone's: never unknown


def test_a_persons_export_holds_what_their_handles_stored_before_they_were_mapped(home: Path, tmp_path: Path) -> None:
    """memory.identities maps telegram:777 to alice after telegram:777 had
    talked (merge-identities not run yet): `export --user alice` (or
    `--user telegram:777`, which is alice) left those rows out, so a data
    access request missed them. Both formats hold them, each saying the
    handle it is stored under, and never another person's rows."""
    ok("add", "Alice's blood type is AB", "--user", "telegram:777")  # before the mapping
    ok("add", "Bob's blood type is O", "--user", "telegram:888")  # bob's, before his mapping

    async def seed() -> None:
        async with await MemoryEngine.open(home / "data" / "memory.db") as e:
            await e.add_event("telegram:777", "2026-02-28", "Asked about blood donation")

    asyncio.run(seed())
    (home / "config.json").write_text(json.dumps({"memory": {"identities": {
        "alice": ["telegram:777", "feishu:ou_a"], "bob": ["telegram:888"]}}}))
    ok("add", "Alice drinks tea", "--user", "alice")
    for user in ("alice", "telegram:777"):
        out = tmp_path / "alice.json"
        r = ok("export", "--user", user, "-o", str(out))
        assert "wrote 2 memories and 1 event to" in r.output, r.output
        doc = json.loads(out.read_text())
        assert doc["user"] == "alice"
        assert sorted((m["owner"], m["content"]) for m in doc["memories"]) == [
            ("alice", "Alice drinks tea"), ("telegram:777", "Alice's blood type is AB")]
        assert [(e["owner"], e["summary"]) for e in doc["events"]] == [("telegram:777", "Asked about blood donation")]
        assert doc["unmerged_handles"] == ["telegram:777"]
        md = ok("export", "--user", user, "--format", "markdown").stdout
        assert md.index("## alice") < md.index("Alice drinks tea") < md.index("## telegram:777") < md.index(
            "Alice's blood type is AB"), md
        assert ("stored under telegram:777 before memory.identities mapped it to alice "
                "(`myclaw memory merge-identities` moves it to alice)") in md, md
        assert "Asked about blood donation" in md
        assert "Bob" not in md and "Bob" not in out.read_text()
    # Only the handle holds anything: not "nothing is stored about alice".
    ok("forget", "--user", "alice", "--yes")
    async def handle_only() -> None:  # `add --user telegram:777` is alice's now: the row as the handle stored it
        async with await MemoryEngine.open(home / "data" / "memory.db") as e:
            await e.add(NewMemory(owner="telegram:777", content="Alice's locker is 12"))

    asyncio.run(handle_only())
    doc = json.loads(ok("export", "--user", "alice").stdout)
    assert [m["owner"] for m in doc["memories"]] == ["telegram:777"]
    # Everyone's export lists the handle as its own owner, as before (no key added).
    assert "unmerged_handles" not in json.loads(ok("export").stdout)


def test_list_and_log_of_a_mapped_person_name_their_handles_rows_from_before_the_mapping(home: Path) -> None:
    """Before merge-identities, `list --user telegram:1001` reported on dana
    ("no memories are stored for dana") while `stats` listed telegram:1001
    with rows: they say where those rows are and what moves them."""
    ok("add", "Dana rides a blue bike", "--user", "telegram:1001")  # before the mapping
    (home / "config.json").write_text(json.dumps({"memory": {"identities": {"dana": ["telegram:1001"]}}}))
    hint = ("telegram:1001 holds rows stored before memory.identities mapped it to dana, not shown here: "
            "`myclaw memory merge-identities` moves them to dana")
    for args in (["list", "--user", "telegram:1001"], ["list", "--user", "dana"], ["log", "--user", "dana"]):
        r = ok(*args)
        assert hint in r.output, (args, r.output)
    ok("add", "Dana likes figs", "--user", "dana")
    r = ok("list", "--user", "dana")
    assert "Dana likes figs" in r.stdout and hint in r.output
    assert hint not in ok("list").output  # every user's: the handle is listed as its own
    assert json.loads(ok("list", "--user", "dana", "--json").stdout)[0]["content"] == "Dana likes figs"  # stdout stays JSON


def test_confirmations_answered_by_end_of_input_change_nothing_and_say_so(home: Path) -> None:
    """stdin closed at the question: click's "Aborted!" (read as a crash);
    the answer is a no, said as a "n" is."""
    ok("add", "Alice drinks tea", "--user", "alice")
    for args in (["forget", "--user", "alice"], ["delete", "1"]):
        r = cli(*args, input="")
        assert r.exit_code == 1, r.output
        assert "cancelled; nothing changed" in r.output and "Aborted" not in r.output, r.output
    assert [m.content for m in db_rows(home)] == ["Alice drinks tea"]


def test_search_reads_time_words_on_the_users_calendar(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``memory search 昨天…`` reads "yesterday" as the bot's recall does:
    on the user's own calendar (their /timezone in gateway.db, read only),
    else the gateway's (gateway.timezone), not UTC's."""
    from datetime import UTC, datetime

    from gateway.timezones import UserTimezones, parse_timezone

    now = datetime.now(UTC)
    name = "Pacific/Kiritimati" if now.hour >= 10 else "Pacific/Pago_Pago"  # UTC+14, UTC-11
    zone = parse_timezone(name)  # their date is not UTC's now
    theirs = (now.astimezone(zone).date() - timedelta(days=1)).isoformat()
    utc = (now.date() - timedelta(days=1)).isoformat()
    assert theirs != utc

    async def seed() -> None:
        async with await MemoryEngine.open(home / "data" / "memory.db") as e:
            await e.add_event("alice", theirs, "讨论了把博客迁移到 Hugo")
            await e.add_event("alice", utc, "计划周末去香山爬山")

    async def set_zone() -> None:
        async with await SessionStore.open(home / "data" / "gateway.db") as s:
            await UserTimezones(s.db).set("alice", zone, at=now)

    def found(*args: str) -> list[str]:
        return [h["content"] for h in json.loads(ok("search", "昨天聊了什么", "--json", *args).stdout)]

    asyncio.run(seed())
    assert found("--user", "alice") == ["计划周末去香山爬山"]  # no zone anywhere: UTC's yesterday
    monkeypatch.setenv("MYCLAW_TIMEZONE", name)
    assert found("--user", "alice") == ["讨论了把博客迁移到 Hugo"]  # the gateway's
    monkeypatch.delenv("MYCLAW_TIMEZONE")
    asyncio.run(set_zone())
    assert found("--user", "alice") == ["讨论了把博客迁移到 Hugo"]  # their own
    assert found() == ["讨论了把博客迁移到 Hugo"]  # every user, each on their own calendar


def test_stats_keeps_groups_apart_by_title_and_forget_group_erases_one_groups_memory(home: Path) -> None:
    """A group's own memory (memory/groupnotes.py) is not a user: stats lists
    it apart, named by its title; ``forget --group`` erases it as the bot's
    removal does, and ``forget --user`` refuses a group's owner id."""
    from gateway.chattitles import ChatTitles

    async def seed() -> None:
        async with await MemoryEngine.open(home / "data" / "memory.db") as e:
            for chat in ("-100900", "-100901"):
                await e.add(NewMemory(owner=f"group:telegram:{chat}", content=f"Dad books the hotel {chat}",
                                      provenance=Provenance(channel="telegram", chat_id=chat, group=True,
                                                            speakers=("telegram:11",), said_by=("Dad",))))
            await e.add_event("group:telegram:-100900", "2026-02-28", "Dad books the hotel", channel="telegram",
                              chat_id="-100900")
            await e.add(NewMemory(owner="telegram:11", content="Dad likes lakes"))
            from memory.changelog import write_log

            async with e.db.transaction() as conn:
                await write_log(conn, at="2026-03-01T12:00:00Z", job="chat", owner="group:telegram:-100900",
                                action="forget-in-group", detail={"by": "telegram:12"})
        async with await SessionStore.open(home / "data" / "gateway.db") as s:
            await ChatTitles(s.db).seen("telegram", "-100900", "Family", at="2026-03-01T12:00:00Z")

    asyncio.run(seed())
    out = ok("stats").stdout
    users, _, groups = out.partition("GROUP")
    assert "telegram:11" in users and "group:" not in users, out
    assert "Family (telegram:-100900)" in groups and "telegram:-100901" in groups, out
    doc = json.loads(ok("stats", "--json").stdout)
    assert [u["user"] for u in doc["users"]] == ["telegram:11"]
    listed = ok("list").stdout
    assert "group Family (telegram:-100900)" in listed and "group telegram:-100901" in listed, listed
    assert "group Family (telegram:-100900)" in ok("search", "hotel").stdout
    assert "group Family (telegram:-100900)" in ok("log").stdout
    assert {g["group"]: (g["title"], g["active"], g["events"]) for g in doc["groups"]} == {
        "telegram:-100900": ("Family", 1, 1), "telegram:-100901": ("", 1, 0)}

    r = cli("forget", "--user", "group:telegram:-100900", "--yes")
    assert r.exit_code != 0 and "--group telegram:-100900" in r.output, r.output
    out = ok("forget", "--group", "telegram:-100900", "--yes").stdout
    assert "Family (telegram:-100900)" in out and "1 memory" in out and "1 daily event" in out, out
    left = {m["owner"] for m in json.loads(ok("export").stdout)["memories"]}
    assert left == {"telegram:11", "group:telegram:-100901"}
    r = cli("forget", "--group", "telegram:-100900", "--yes")
    assert r.exit_code != 0 and "nothing is stored for the group" in r.output, r.output


def test_forget_without_whom_names_both_ways_to_say_it(home: Path) -> None:
    """`memory forget --yes` alone said "--user is required", though
    --group (a group's own memory) is the other thing it erases."""
    ok("add", "Alice likes tea", "--user", "alice")
    r = cli("forget", "--yes")
    assert r.exit_code == 2 and "give --user (a person) or --group CHANNEL:CHAT_ID (a group's own memory)" in r.output, r.output
    assert "Alice likes tea" in ok("list").stdout  # nothing erased


def test_a_log_filter_that_finds_nothing_names_what_the_log_holds(home: Path) -> None:
    """`memory log --job extract` (the job is "extraction") said only "no
    log entries", as if nothing had run: it names the jobs and actions
    the log does hold, so a misspelt one is seen."""
    ok("add", "Alice drinks green tea", "--user", "alice")
    ok("delete", "1", "--yes")
    assert ok("log", "--job", "extract").stdout.strip() == (
        "no log entries for --job extract (the log holds the jobs: cli)")
    assert ok("log", "--action", "erase", "--action", "purge").stdout.strip() == (
        "no log entries for --action erase, purge (the log holds the actions: add, archive)")
    assert ok("log", "--job", "cli", "--action", "archive", "--user", "bob").stdout.strip() == "no log entries"
    assert json.loads(ok("log", "--job", "extract", "--json").stdout) == []


def test_stats_of_a_user_nothing_is_stored_about_says_so_as_list_does(home: Path) -> None:
    """`memory stats -u telegram:9999` (a typo for telegram:999) printed a
    table of zeros, as for a user who has nothing yet; `list` already said
    nothing is stored for them and which handle was meant."""
    ok("add", "Alice drinks green tea", "--user", "telegram:999")
    r = ok("stats", "--user", "telegram:9999")
    assert "nothing is stored for telegram:9999 (did you mean telegram:999?)" in r.stderr, r.stderr
    assert "nothing is stored" not in ok("stats", "--user", "telegram:999").stderr
    assert json.loads(ok("stats", "--user", "telegram:9999", "--json").stdout)["total"] == 0
