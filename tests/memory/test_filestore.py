from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory import ManualClock, Provenance
from memory.backend import MemoryBackend, Turn
from memory.filestore import FileMemory, user_slug
from tests.disk import on_disk

P = Provenance(channel="telegram", chat_id="1")


def turn(owner: str, content: str, at: str | None = None, role: str = "user", mid: str = "") -> Turn:
    when = datetime.fromisoformat(at).replace(tzinfo=UTC) if at else None
    return Turn(owner=owner, channel="telegram", chat_id="1", role=role, content=content, message_id=mid, at=when)


@pytest.fixture
def files(tmp_path: Path, clock: ManualClock) -> FileMemory:
    return FileMemory(tmp_path / "ws", clock)


def test_is_a_backend(files: FileMemory) -> None:
    assert isinstance(files, MemoryBackend) and files.kind == "files"


def test_slug_stays_inside_users_and_never_collides() -> None:
    names = ["../../etc", "telegram:1", "telegram_1", "Bob", "bob", "", "/", "..", "a/b", "\ud800", "飞书:ou_x"]
    slugs = [user_slug(n) for n in names]
    assert len(set(slugs)) == len(names)
    for s in slugs:
        assert "/" not in s and "\\" not in s and not s.startswith(".") and s == s.strip()
    assert user_slug("telegram:777").startswith("telegram_777-")


async def test_buffer_writes_a_readable_daily_log(files: FileMemory, clock: ManualClock) -> None:
    await files.buffer(
        [
            turn("alice", "I moved to Berlin", "2026-02-27T09:05:00", mid="1"),
            turn("alice", "Noted.\nWelcome to Berlin!", "2026-02-27T09:06:00", role="assistant", mid="1"),
            turn("alice", "我搬到上海了"),  # no time: the clock's day
        ]
    )
    await files.buffer([turn("alice", "I moved to Berlin", "2026-02-27T09:05:00", mid="1")])  # retried
    d = files.user_dir("alice")
    assert (d / ".owner").read_text() == '"alice"\n'
    assert (d / "2026-02-27.md").read_text() == (
        "# 2026-02-27\n\n- 09:05 user: I moved to Berlin\n- 09:06 assistant: Noted.\n  Welcome to Berlin!\n"
    )
    assert (d / "2026-03-01.md").read_text() == "# 2026-03-01\n\n- 12:00 user: 我搬到上海了\n"


async def test_an_entry_after_a_torn_write_starts_its_own_line(files: FileMemory) -> None:
    """A crash in the middle of an append leaves a line without its newline;
    the next entry must not run into it (the two would read, and be cited
    and forgotten, as one)."""
    await files.buffer([turn("alice", "first words", "2026-02-27T09:05:00")])
    path = files.user_dir("alice") / "2026-02-27.md"
    with open(path, "ab") as f:
        f.write("- 09:06 user: cut sho".encode())  # the crash
    await files.buffer([turn("alice", "after the restart", "2026-02-27T09:10:00")])
    assert path.read_text() == (
        "# 2026-02-27\n\n- 09:05 user: first words\n- 09:06 user: cut sho\n- 09:10 user: after the restart\n"
    )
    hits = await files.search("alice", "restart")
    assert [h.content for h in hits] == ["09:10 user: after the restart"]


async def test_remember_appends_once_and_replaces_atomically(files: FileMemory) -> None:
    a = await files.remember("alice", "Alice drinks oat-milk flat whites", provenance=P)
    b = await files.remember("alice", "alice drinks  OAT-MILK flat whites\n", provenance=P)
    await files.remember("alice", "Alice's cat is called Miso", provenance=P)
    path = files.user_dir("alice") / "MEMORY.md"
    assert path.read_text().splitlines() == [
        "# Long-term memory",
        "",
        "- Alice drinks oat-milk flat whites <!-- 2026-03-01 -->",  # each line's own day
        "- Alice's cat is called Miso <!-- 2026-03-01 -->",
    ]
    assert a.id == b.id and b.content == "Alice drinks oat-milk flat whites" and "MEMORY.md" in a.citation()
    assert sorted(p.name for p in path.parent.iterdir()) == [".owner", "MEMORY.md"]  # no temp files left
    with pytest.raises(ValueError, match="empty"):
        await files.remember("alice", " \n\x00 ", provenance=P)
    assert len(path.read_text().splitlines()) == 4


async def test_a_save_keeps_the_other_lines_bytes_crlf_and_form_feeds_too(files: FileMemory) -> None:
    """A MEMORY.md saved on Windows (CRLF), with a form feed inside a line:
    the bot's save appends its line in the file's own line ending and leaves
    every other byte as it was (it rewrote the file with LF, every line a
    change in a diff, and cut the form-fed line in two facts)."""
    await files.remember("alice", "Prefers tea", provenance=P)
    path = files.user_dir("alice") / "MEMORY.md"
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n") + b"- Written on Windows\r\n- page\x0cbreak kept")
    before = path.read_bytes()
    hit = await files.remember("alice", "Lives in Lisbon", provenance=P)
    assert path.read_bytes() == before + b"\r\n- Lives in Lisbon <!-- 2026-03-01 -->\r\n"
    [found] = await files.search("alice", "Lisbon")
    assert found.id == hit.id
    again = await files.remember("alice", "lives in  LISBON", provenance=P)  # the same fact: that line
    assert again.id == hit.id and path.read_bytes().count(b"Lisbon") == 1


async def test_profile_is_long_term_plus_last_seven_days(files: FileMemory, clock: ManualClock) -> None:
    root = files.root
    root.mkdir(parents=True)
    (root / "MEMORY.md").write_text("# Shared\n\n- Standup is at 10:00\n")
    await files.remember("alice", "Alice lives in Hangzhou", provenance=P)
    await files.buffer([turn("alice", "deployed v2 today", "2026-02-23T08:00:00")])  # 7th day back: kept
    await files.buffer([turn("alice", "ancient history", "2026-02-22T08:00:00")])  # 8th day back: dropped
    await files.buffer([turn("alice", "coffee with Bob", "2026-03-01T08:00:00")])
    prof = await files.profile("alice")
    assert "Standup is at 10:00" in prof and "Alice lives in Hangzhou" in prof
    assert "deployed v2 today" in prof and "coffee with Bob" in prof and "ancient" not in prof
    assert prof.index("2026-02-23") < prof.index("2026-03-01")
    group = await files.profile("alice", private=False)
    [shared] = await files.search("alice", "standup")
    assert group == f"## Long-term memory\n- [m{shared.id}] Standup is at 10:00"


async def test_one_users_files_never_reach_another(files: FileMemory) -> None:
    await files.remember("telegram:1", "the vault code is 4711", provenance=P)
    await files.buffer([turn("telegram:1", "my vault code is 4711", "2026-03-01T10:00:00")])
    # A look-alike name and a traversal attempt get their own, empty stores.
    for other in ["telegram_1", "telegram:2", "../telegram:1", "_global"]:
        assert "4711" not in await files.profile(other)
        assert await files.recall(other, "vault code 4711") == []
        assert await files.search(other, "vault code") == []
    assert len(await files.search("telegram:1", "vault code")) == 2
    # A group chat with the owner present sees nothing private either.
    assert await files.recall("telegram:1", "vault code", private=False) == []
    assert "4711" not in await files.profile("telegram:1", private=False)
    # The legacy top-level daily logs belong to _global and are nobody's context.
    (files.root / "2026-03-01.md").write_text("# 2026-03-01\n\n- 09:00 user: the vault code is 9999\n")
    assert "9999" not in await files.profile("telegram:2")
    assert await files.search("telegram:2", "vault code") == []


async def test_search_ranks_and_cites_in_chinese_and_english(files: FileMemory) -> None:
    files.root.mkdir(parents=True)
    (files.root / "MEMORY.md").write_text("- 公司的部署流程在 wiki 上\n")
    await files.remember("alice", "我的部署密码是 hunter2", provenance=P)
    await files.remember("alice", "我喜欢喝咖啡", provenance=P)
    await files.buffer([turn("alice", "The staging server runs Postgres 16", "2026-02-28T14:30:00")])
    hits = await files.recall("alice", "我的部署密码是什么？")
    assert hits[0].content == "我的部署密码是 hunter2"
    assert "咖啡" not in " ".join(h.content for h in hits)
    assert [h.content for h in await files.search("alice", "咖啡")] == ["我喜欢喝咖啡"]
    [pg] = await files.search("alice", "which postgres version is on staging?")
    assert pg.content == "14:30 user: The staging server runs Postgres 16" and pg.kind == "event"
    assert pg.citation() == f"[e{pg.id} · 2026-02-28 · noted in 2026-02-28.md]"
    shared = await files.search("alice", "部署流程")
    assert shared[0].provenance.refs == ("shared MEMORY.md",)


async def test_recall_only_reads_the_last_week_but_search_reads_all(files: FileMemory) -> None:
    await files.buffer([turn("alice", "we picked Kubernetes", "2026-01-10T08:00:00")])
    assert await files.recall("alice", "kubernetes") == []
    assert [h.date for h in await files.search("alice", "kubernetes")] == ["2026-01-10"]


async def test_a_named_period_recalls_its_logged_days(files: FileMemory, clock: ManualClock) -> None:
    """"上上周我们聊了什么？" gets lines of that week's logs (older than the
    last seven days recall reads by words), at most three places taken by
    a date alone; a group none; a message naming no time none of them."""
    await files.buffer([turn("alice", "我在考虑报名考驾照", "2026-02-10T02:00:00"),
                        turn("alice", "想把博客搬到 Hugo", "2026-02-11T02:00:00"),
                        turn("alice", "周末去香山爬山", "2026-02-12T02:00:00"),
                        turn("alice", "新买了跑鞋", "2026-02-13T02:00:00"),
                        turn("alice", "春节回老家", "2026-02-02T02:00:00")])  # the week before
    clock.set("2026-02-25T09:00:00Z")  # Wednesday, two weeks later
    recalled = await files.recall("alice", "上上周我们聊了什么？")
    assert len(recalled) >= 3 and all(h.kind == "event" and "2026-02-09" <= h.date < "2026-02-16" for h in recalled)
    assert "春节" not in str(recalled)
    # A word of one of them ranks it first.
    assert "驾照" in (await files.recall("alice", "上上周聊的驾照的事"))[0].content
    assert await files.recall("alice", "上上周我们聊了什么？", private=False) == []
    assert await files.recall("alice", "我们聊了什么？") == []


HOSTILE = ['"', 'NEAR(a b', "*", "^x", "col:x", "AND OR NOT", "😀🔥", "\ud800x\udfff", "\x00", "x" * 1_000_000, ""]


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
async def test_hostile_text_is_data(files: FileMemory, text: str) -> None:
    await files.buffer([turn("alice", text + " tail", "2026-03-01T08:00:00")])
    if text.strip("\x00"):
        await files.remember("alice", text, provenance=P)
    for h in await files.search("alice", text) + await files.recall("alice", text):
        assert h.score > 0
    assert isinstance(await files.profile("alice"), str)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=80))
async def test_search_never_raises(tmp_path: Path, text: str) -> None:
    files = FileMemory(tmp_path / "hypo", ManualClock("2026-03-01T12:00:00Z"))
    if not (files.user_dir("u") / "MEMORY.md").exists():
        await files.remember("u", "密码 password NEAR( \"x\" 😀", provenance=P)
    await files.search("u", text)
    await files.recall("u", text, private=False)


async def test_clock_decides_the_day_in_the_configured_timezone(tmp_path: Path) -> None:
    from zoneinfo import ZoneInfo

    clock = ManualClock("2026-03-01T17:30:00Z")
    files = FileMemory(tmp_path, clock, tz=ZoneInfo("Asia/Shanghai"))
    await files.buffer([turn("u", "late night")])
    assert (files.user_dir("u") / "2026-03-02.md").read_text().endswith("- 01:30 user: late night\n")
    clock.advance(timedelta(days=10))
    assert "late night" not in await files.profile("u")


# -- forget ------------------------------------------------------------------


async def test_forget_erases_a_fact_and_the_messages_that_said_it(files: FileMemory) -> None:
    memory_md = files.user_dir("alice") / "MEMORY.md"
    memory_md.parent.mkdir(parents=True)
    memory_md.write_text("# Alice\n\n<!-- kept by hand -->\n- Alice's cat is called Miso\n- Alice lives in Hangzhou\n")
    await files.buffer(
        [
            turn("alice", "remember: Alice's cat is called Miso", "2026-02-27T09:05:00", mid="1"),
            turn("alice", "Saved.", "2026-02-27T09:05:30", role="assistant", mid="1"),
            turn("alice", "what's the weather in Hangzhou?", "2026-02-28T10:00:00", mid="2"),
        ]
    )
    [cat] = await files.search("alice", "cat Miso", limit=1)
    [home] = await files.search("alice", "lives Hangzhou", limit=1)
    done = await files.forget("alice", [cat.ref])
    assert [h.content for h in done.erased] == ["Alice's cat is called Miso", "09:05 user: remember: Alice's cat is called Miso"]
    assert done.unknown == done.shared == []
    assert done.texts == ["Alice's cat is called Miso", "remember: Alice's cat is called Miso"]
    # Only those lines went; the hand-kept rest is byte for byte as it was.
    assert memory_md.read_text() == "# Alice\n\n<!-- kept by hand -->\n- Alice lives in Hangzhou\n"
    assert (files.user_dir("alice") / "2026-02-27.md").read_text() == "# 2026-02-27\n\n- 09:05 assistant: Saved.\n"
    assert "Miso" not in await files.profile("alice")
    assert await files.search("alice", "Miso") == []
    # Ids are the entries' own: the one below the erased line still answers to its id.
    assert [h.id for h in await files.search("alice", "lives Hangzhou", limit=1)] == [home.id]
    again = await files.forget("alice", [cat.ref])
    assert again.erased == [] and again.unknown == [cat.ref]  # a stale id names nothing


async def test_forget_words_and_days_erase_what_sqlite_imported_from_the_files(files: FileMemory) -> None:
    """With SQLite on, an erased imported fact names its MEMORY.md line by
    its words, an erased imported day its logged lines by the day's text
    (the import's event); the rest stays, and another user is untouched."""
    memory_md = files.user_dir("alice") / "MEMORY.md"
    memory_md.parent.mkdir(parents=True)
    memory_md.write_text("- Alice's locker code is 4921\n- Alice lives in Hangzhou\n")
    await files.buffer([turn("alice", "remember: Alice's locker code is 4921", "2026-02-27T09:05:00", mid="1"),
                        turn("alice", "nice weather", "2026-02-28T10:00:00", mid="2"),
                        turn("bob", "nice weather", "2026-02-28T10:00:00", mid="3")])
    assert await files.forget_words("alice", ["Alice's locker code is 4921", "not a line of hers"]) == 2  # the line, the message
    assert memory_md.read_text() == "- Alice lives in Hangzhou\n"
    day = files.user_dir("alice") / "2026-02-28.md"
    imported = day.read_text().split("\n", 1)[1]  # the day as the import read it: its heading left out
    assert await files.forget_days("alice", [("2026-02-28", imported)]) == 1
    assert not day.exists()  # nothing left of that day
    assert on_disk(files.user_dir("alice"), "4921") == 0
    assert on_disk(files.user_dir("bob"), "nice weather") == 1
    assert await files.forget_words("_global", ["Alice lives in Hangzhou"]) == 0  # the operator's file


async def test_forget_a_logged_message_with_its_continuation_lines(files: FileMemory, clock: ManualClock) -> None:
    await files.buffer([turn("alice", "my new address:\nFlat 2, 10 Elm Road", "2026-02-26T20:00:00")])
    await files.buffer([turn("alice", "see you tomorrow", "2026-02-27T08:00:00")])
    [addr] = await files.search("alice", "Elm Road")
    assert addr.kind == "event" and addr.ref == f"e{addr.id}"
    assert f"- [{addr.ref}] 20:00 user: my new address:\n  Flat 2, 10 Elm Road" in await files.profile("alice")
    done = await files.forget("alice", [addr.ref])
    assert [h.ref for h in done.erased] == [addr.ref] and done.texts == ["my new address: Flat 2, 10 Elm Road"]
    # Its day held nothing else: the file goes whole.
    assert not (files.user_dir("alice") / "2026-02-26.md").exists()
    assert "see you tomorrow" in await files.profile("alice")


async def test_forget_touches_no_other_user_and_not_the_shared_file(files: FileMemory) -> None:
    files.root.mkdir(parents=True)
    (files.root / "MEMORY.md").write_text("- The office wifi is myclaw-guest\n")
    await files.remember("bob", "Bob's door code is 1234", provenance=P)
    [bobs] = await files.search("bob", "door code")
    [wifi] = await files.search("alice", "office wifi")
    done = await files.forget("alice", [bobs.ref, wifi.ref, "x9", "m", "", "e12abc"])
    assert done.erased == [] and done.shared == [wifi.ref]
    assert sorted(done.unknown) == sorted([bobs.ref, "x9", "m", "", "e12abc"])
    assert "1234" in (files.user_dir("bob") / "MEMORY.md").read_text()
    assert "myclaw-guest" in (files.root / "MEMORY.md").read_text()
    assert (await files.forget("_global", [wifi.ref])).unknown == [wifi.ref]


async def test_forget_refuses_an_id_two_different_entries_share(files: FileMemory) -> None:
    # 32-bit ids: these two lines of one day collide (found by search, see entry_id).
    await files.buffer([turn("alice", "note 29732", "2026-02-28T09:00:00"), turn("alice", "note 162130", "2026-02-28T09:00:00")])
    a, b = await files.search("alice", "note")
    assert a.content != b.content and a.id == b.id
    done = await files.forget("alice", [a.ref])
    assert done.erased == [] and done.unknown == [a.ref]
    assert (files.user_dir("alice") / "2026-02-28.md").read_text().count("note") == 2


async def test_forget_overwrites_the_old_file_on_disk(files: FileMemory) -> None:
    await files.remember("alice", "Alice's PIN is 8264", provenance=P)
    await files.remember("alice", "Alice likes jazz", provenance=P)
    path = files.user_dir("alice") / "MEMORY.md"
    [pin] = await files.search("alice", "PIN")
    with open(path, "rb") as before:  # the old inode, as a disk block would hold it
        size = len(before.read())
        await files.forget("alice", [pin.ref])
        before.seek(0)
        assert before.read() == b"\0" * size
    assert path.read_text() == "# Long-term memory\n\n- Alice likes jazz <!-- 2026-03-01 -->\n"


async def test_forget_all_removes_the_users_folder_and_zeroes_its_files(files: FileMemory) -> None:
    files.root.mkdir(parents=True)
    (files.root / "MEMORY.md").write_text("- The office wifi is myclaw-guest\n")
    await files.remember("alice", "Alice's PIN is 8264", provenance=P)
    await files.buffer([turn("alice", "my locker is 42", "2026-02-28T09:00:00"),
                        turn("alice", "Noted.", "2026-02-28T09:00:05", role="assistant")])
    await files.remember("bob", "Bob's door code is 1234", provenance=P)
    d = files.user_dir("alice")
    with open(d / "MEMORY.md", "rb") as facts, open(d / "2026-02-28.md", "rb") as day:  # the old inodes
        sizes = len(facts.read()), len(day.read())
        gone = await files.forget_all("alice")
        facts.seek(0)
        day.seek(0)
        assert (facts.read(), day.read()) == (b"\0" * sizes[0], b"\0" * sizes[1])
    assert (gone.memories, gone.events, gone.files) == (1, 2, 2)
    assert not d.exists()
    assert (await files.overview("alice")).facts == 0 and await files.search("alice", "locker") == []
    assert "1234" in (files.user_dir("bob") / "MEMORY.md").read_text()
    assert "myclaw-guest" in (files.root / "MEMORY.md").read_text()
    assert (await files.forget_all("alice")).files == 0  # twice: nothing left, no error
    with pytest.raises(ValueError, match="shared by everyone"):
        await files.forget_all("_global")


# -- edited and recalled messages -------------------------------------------------


async def test_a_recalled_message_and_its_reply_leave_the_log_for_good(files: FileMemory) -> None:
    """Alice unsends her password: its logged line and the reply logged with
    it go, the old file's bytes are zeroed, the rest stays byte for byte."""
    secret = "my vault password is tulip-4471"
    await files.buffer([turn("alice", "hello", "2026-02-28T09:00:00", mid="1"),
                        turn("alice", "hi!", "2026-02-28T09:00:10", role="assistant", mid="1")])
    await files.buffer([turn("alice", secret, "2026-02-28T09:01:00", mid="2"),
                        turn("alice", f"Noted: {secret}", "2026-02-28T09:01:05", role="assistant", mid="2")])
    await files.buffer([turn("alice", "thanks", "2026-02-28T09:02:00", mid="3")])
    d = files.user_dir("alice")
    path = d / "2026-02-28.md"
    with open(path, "rb") as old:  # the old inode, as a disk block would hold it
        size = len(old.read())
        done = await files.retract("feishu", "oc_alice", "2", owner="alice", text=f"  {secret}\n")
        old.seek(0)
        assert old.read() == b"\0" * size
    assert done.owners == ["alice"] and done.buffered_lines == 2 and done.erased == []
    assert path.read_text() == "# 2026-02-28\n\n- 09:00 user: hello\n- 09:00 assistant: hi!\n- 09:02 user: thanks\n"
    assert on_disk(d, "tulip") == 0
    assert "tulip" not in await files.profile("alice") and await files.search("alice", "vault password") == []
    again = await files.retract("feishu", "oc_alice", "2", owner="alice", text=secret)
    assert again.buffered_lines == 0 and path.read_text().count("\n") == 5


async def test_a_recall_erases_memory_md_lines_repeating_its_words_of_its_owner_only(files: FileMemory) -> None:
    """MEMORY.md keeps no source: a line repeating the recalled words goes
    (the safe side), a paraphrase stays; Bob's files and the shared
    MEMORY.md are never touched, nor is anything without an owner or words."""
    secret = "my door code is 8264, please keep it"
    files.root.mkdir(parents=True)
    (files.root / "MEMORY.md").write_text(f"- {secret}\n")
    await files.remember("alice", secret, provenance=P)
    await files.remember("alice", "Alice's door code is 8264", provenance=P)  # the model's words
    await files.remember("alice", "Alice likes jazz", provenance=P)
    await files.remember("bob", secret, provenance=P)
    await files.buffer([turn("alice", secret, "2026-02-28T09:00:00", mid="7")])
    await files.buffer([turn("bob", secret, "2026-02-28T09:00:00", mid="7")])
    for owner, text in ((None, secret), ("alice", ""), ("carol", secret)):
        nothing = await files.retract("feishu", "oc_x", "7", owner=owner, text=text)
        assert nothing.buffered_lines == 0 and nothing.erased == []
    done = await files.retract("feishu", "oc_alice", "7", owner="alice", text=secret)
    assert done.buffered_lines == 1 and [h.content for h in done.erased] == [secret]
    assert (files.user_dir("alice") / "MEMORY.md").read_text() == (
        "# Long-term memory\n\n- Alice's door code is 8264 <!-- 2026-03-01 -->\n- Alice likes jazz <!-- 2026-03-01 -->\n"
    )
    assert not (files.user_dir("alice") / "2026-02-28.md").exists()  # nothing else that day: the file goes
    assert on_disk(files.user_dir("alice"), "please keep it") == 0
    assert on_disk(files.user_dir("bob"), "please keep it") == 2
    assert secret in (files.root / "MEMORY.md").read_text()


async def test_a_recall_takes_the_newest_line_of_the_same_words(files: FileMemory) -> None:
    """Without message ids in the log, two messages of the same words are
    told apart by age: the recalled one is the newest; the older stays."""
    await files.buffer([turn("alice", "call me at 555-0101", "2026-02-27T09:00:00", mid="1"),
                        turn("alice", "Will do.", "2026-02-27T09:00:05", role="assistant", mid="1")])
    await files.buffer([turn("alice", "call me at 555-0101", "2026-02-28T09:00:00", mid="2")])
    await files.buffer([turn("alice", "and bring the map", "2026-02-28T09:00:30", mid="3"),
                        turn("alice", "Sure.", "2026-02-28T09:00:35", role="assistant", mid="3")])
    done = await files.retract("feishu", "oc_alice", "2", owner="alice", text="call me at 555-0101")
    assert done.buffered_lines == 1  # no reply logged right after it: the next message's stays
    d = files.user_dir("alice")
    assert (d / "2026-02-27.md").read_text().count("555-0101") == 1
    assert (d / "2026-02-28.md").read_text() == (
        "# 2026-02-28\n\n- 09:00 user: and bring the map\n- 09:00 assistant: Sure.\n"
    )


async def test_an_edit_rewrites_the_logged_line_and_erases_the_old_words(files: FileMemory) -> None:
    await files.buffer([turn("alice", "my number is\n555-0199", "2026-02-28T09:00:00", mid="1"),
                        turn("alice", "Saved.", "2026-02-28T09:00:05", role="assistant", mid="1")])
    await files.buffer([turn("alice", "my number is\n555-0199", "2026-02-28T09:30:00", mid="2")])
    path = files.user_dir("alice") / "2026-02-28.md"
    edited = turn("alice", "my number is\n555-0123", "2026-02-28T09:00:00", mid="1")
    with open(path, "rb") as old:
        size = len(old.read())
        assert await files.revise(edited, before="my number is\n555-0199") == "replaced"
        old.seek(0)
        assert old.read() == b"\0" * size
    # The line at the message's minute, not the later one of the same words.
    assert path.read_text() == (
        "# 2026-02-28\n\n- 09:00 user: my number is\n  555-0123\n- 09:00 assistant: Saved.\n"
        "- 09:30 user: my number is\n  555-0199\n"
    )
    # Edited again: found by the words it has now.
    again = turn("alice", "my number is 555-0124", "2026-02-28T09:00:00", mid="1")
    assert await files.revise(again, before="my number is\n555-0123") == "replaced"
    assert "- 09:00 user: my number is 555-0124\n" in path.read_text() and on_disk(path.parent, "555-0123") == 0
    # Without the old words, a single user line at that minute is enough.
    assert await files.revise(turn("alice", "my number is 555-0125", "2026-02-28T09:00:00", mid="1")) == "replaced"
    assert on_disk(path.parent, "555-0124") == 0


async def test_an_edit_not_found_in_the_log_is_logged_as_a_correction(files: FileMemory, clock: ManualClock) -> None:
    await files.buffer([turn("alice", "the meeting is on Monday", "2026-02-28T09:00:00", mid="1")])
    path = files.user_dir("alice") / "2026-02-28.md"
    path.write_text("# 2026-02-28\n\n- 09:00 user: the meeting is on Monday (edited by hand)\n")
    edit = turn("alice", "the meeting is on Tuesday", "2026-02-28T09:00:00", mid="1")
    assert await files.revise(edit, before="the meeting is on Monday") == "corrected"
    today = files.user_dir("alice") / f"{clock.now():%Y-%m-%d}.md"
    assert today.read_text().endswith("- 12:00 user: (edited) the meeting is on Tuesday\n")
    # A second edit replaces the correction, which stays one; a recall erases it.
    edit2 = turn("alice", "the meeting is on Wednesday", "2026-02-28T09:00:00", mid="1")
    assert await files.revise(edit2, before="the meeting is on Tuesday") == "replaced"
    assert today.read_text().endswith("- 12:00 user: (edited) the meeting is on Wednesday\n")
    assert "Tuesday" not in today.read_text()
    done = await files.retract("feishu", "oc", "1", owner="alice", text="the meeting is on Wednesday")
    assert done.buffered_lines == 1 and not today.exists()
    assert await files.revise(turn("alice", "Saved!", role="assistant", mid="1")) == "untracked"
    assert await files.revise(turn("alice", "  ", mid="1")) == "untracked"
    assert await files.revise(turn("alice", "no id")) == "untracked"
    assert "Monday (edited by hand)" in path.read_text()  # the hand-edited line is the operator's


async def test_an_edit_touches_only_its_owners_log(files: FileMemory) -> None:
    await files.buffer([turn("bob", "my pin is 1111", "2026-02-28T09:00:00", mid="1")])
    assert await files.revise(turn("alice", "my pin is 2222", "2026-02-28T09:00:00", mid="1"),
                              before="my pin is 1111") == "corrected"
    assert (files.user_dir("bob") / "2026-02-28.md").read_text().endswith("- 09:00 user: my pin is 1111\n")


async def test_a_users_folder_moves_into_another_and_a_crash_midway_adds_nothing_twice(
    files: FileMemory, clock: ManualClock
) -> None:
    """``myclaw memory merge-identities``: a handle's folder into the user's."""
    handle, user = "telegram:777", "alice"
    await files.remember(handle, "Alice's dinghy is red", provenance=Provenance())
    await files.remember(handle, "Alice sails on Sundays", provenance=Provenance())
    await files.remember(user, "alice sails on  SUNDAYS", provenance=Provenance())  # the same fact
    await files.buffer([turn(handle, "ok"), turn(handle, "ok"), turn(handle, "line one\nline two")])
    await files.buffer([turn(user, "ok", at="2026-03-01T12:05:00")])
    clock.advance(timedelta(days=1))
    await files.buffer([turn(handle, "a day alice has no log of")])

    moves = files.plan_move(handle, user)
    assert sorted((m.name, m.merged is None) for m in moves) == [
        ("2026-03-01.md", False), ("2026-03-02.md", True), ("MEMORY.md", False),
    ]  # fmt: skip
    day = next(m for m in moves if m.name == "2026-03-01.md")
    files.apply_move(day, user)
    # A crash here, before the rest moved: the next run plans again from the files.
    again = files.plan_move(handle, user)
    assert sorted(m.name for m in again) == sorted(m.name for m in moves if m is not day)
    for m in again:
        files.apply_move(m, user)
    assert files.plan_move(handle, user) == [] and files.remove_user_dir(handle)
    assert not files.user_dir(handle).exists()

    long_term = (files.user_dir(user) / "MEMORY.md").read_text()
    assert long_term.count("\n- ") == 2 and "- Alice's dinghy is red <!-- 2026-03-01 -->\n" in long_term
    log = (files.user_dir(user) / "2026-03-01.md").read_text()
    # the handle's two and alice's: the same words said three times, kept three times
    assert log.count("user: ok") == 3 and log.count("line one\n  line two") == 1
    assert "a day alice has no log of" in (files.user_dir(user) / "2026-03-02.md").read_text()
    hits = await files.search(user, "dinghy colour")
    assert [h.content for h in hits] == ["Alice's dinghy is red"]


async def test_merging_a_day_again_after_a_crash_adds_nothing(files: FileMemory) -> None:
    handle, user = "telegram:777", "alice"
    await files.buffer([turn(handle, "ok"), turn(handle, "fine")])
    await files.buffer([turn(user, "hello")])
    (m,) = files.plan_move(handle, user)
    m.dst.write_text(m.after)  # written, and the crash came before the source went
    (again,) = files.plan_move(handle, user)
    assert again.merged == again.before  # nothing left to add
    files.apply_move(again, user)
    assert not again.src.exists() and m.dst.read_text() == m.after


async def test_owner_data_gives_memory_md_as_tier_1_and_each_logged_line_as_an_event(files: FileMemory) -> None:
    await files.remember("alice", "Alice likes oat milk", provenance=P)
    await files.remember("bob", "Bob keeps bees", provenance=P)
    await files.buffer([turn("alice", "I moved to Suzhou", "2026-03-01T09:00:00"),
                        turn("alice", "Noted", "2026-03-01T09:00:01", role="assistant"),
                        turn("bob", "my bees swarmed", "2026-03-01T09:00:02")])
    data = await files.owner_data("alice")
    overview = await files.overview("alice")
    assert [(m.tier, m.content, f"m{m.id}") for m in data.memories] == [(1, "Alice likes oat milk", overview.profile[0].ref)]
    assert [e.event_date for e in data.events] == ["2026-03-01", "2026-03-01"] and data.waiting == 0
    assert "I moved to Suzhou" in data.events[0].summary and "Noted" in data.events[1].summary
    assert {f"e{e.id}" for e in data.events} == {h.ref for h in overview.recent}
    assert all("bees" not in x for x in [*(m.content for m in data.memories), *(e.summary for e in data.events)])
    assert (await files.owner_data("carol")).memories == []


async def test_a_hand_written_memory_md_is_read_as_whole_facts(files: FileMemory) -> None:
    """Wrapped items, nested lists and code blocks are facts as written:
    found whole, shown whole, and forgotten with every line they span."""
    memory_md = files.user_dir("alice") / "MEMORY.md"
    memory_md.parent.mkdir(parents=True)
    memory_md.write_text(
        "# Alice\n\n- Works on project atlas,\n  which ships in May\n- Projects:\n  - atlas: billing\n"
        "Deploy command:\n```sh\nmake deploy\n```\n- Likes tea\n"
    )
    [item] = await files.search("alice", "when does atlas ship", limit=1)
    assert item.content == "Works on project atlas, which ships in May"
    [code] = await files.search("alice", "deploy command", limit=1)
    assert code.content == "Deploy command:\n```sh\nmake deploy\n```"
    assert "- [" + code.ref + "] Deploy command:\n  ```sh\n  make deploy\n  ```" in await files.profile("alice")
    overview = await files.overview("alice")
    assert "Projects: atlas: billing" in [h.content for h in overview.profile] and overview.facts == 4
    # Remembering what a block already says adds nothing.
    await files.remember("alice", "Works on project atlas, which ships in May", provenance=P)
    done = await files.forget("alice", [code.ref, item.ref])
    assert len(done.erased) == 2
    assert memory_md.read_text() == "# Alice\n\n- Projects:\n  - atlas: billing\n- Likes tea\n"


async def test_the_files_are_readable_by_their_owner_only(files: FileMemory) -> None:
    """Every user's memories and daily logs, as the SQLite files are: new
    files 0600 and the folders myclaw makes 0700, whatever the umask."""
    await files.remember("alice", "Alice's door code is 4711", provenance=P)
    await files.buffer([turn("alice", "my door code is 4711", "2026-03-01T10:00:00")])
    made = [p for p in files.root.rglob("*")]
    assert any(p.name == "2026-03-01.md" for p in made) and any(p.name == "MEMORY.md" for p in made)
    modes = {str(p.relative_to(files.root)): p.stat().st_mode & 0o777 for p in made}
    assert modes == {k: 0o700 if (files.root / k).is_dir() else 0o600 for k in modes}


async def test_a_hand_saved_line_not_in_utf8_keeps_its_bytes_when_the_bot_writes(files: FileMemory) -> None:
    """Seed 004: the operator edits MEMORY.md by hand, and an editor saved
    one line as Latin-1. The bot's save, forget and an edited message
    rewrite the file: that line keeps its very bytes (a later re-save as
    UTF-8 or `myclaw memory migrate` can still read it), never U+FFFD."""
    await files.remember("alice", "Alice likes tea", provenance=Provenance())
    f = files.long_term_file("alice").path
    latin = "- Alice's café is Le Procope\n".encode("latin-1")
    f.write_bytes(f.read_bytes() + latin)
    assert "Le Procope" in await files.profile("alice")  # read, the bad byte shown as such

    locker = await files.remember("alice", "Alice's locker is 42", provenance=Provenance())
    assert latin in f.read_bytes()
    assert (await files.forget("alice", [locker.ref])).erased
    raw = f.read_bytes()
    assert latin in raw and b"locker" not in raw and b"\xef\xbf\xbd" not in raw

    await files.buffer([turn("alice", "my flat is on Rue de Buci", "2026-03-01T10:00:00", mid="7")])
    day = next(iter(files.daily_files("alice"))).path
    day.write_bytes(day.read_bytes() + "- 10:05 user: caf\xe9 cr\xe8me\n".encode("latin-1"))
    assert await files.revise(turn("alice", "my flat is on Rue Jacob", "2026-03-01T10:00:00", mid="7"),
                              before="my flat is on Rue de Buci") == "replaced"
    raw = day.read_bytes()
    assert "caf\xe9 cr\xe8me".encode("latin-1") in raw and b"Rue Jacob" in raw and b"Buci" not in raw


async def test_each_memory_md_line_keeps_the_day_it_was_saved(files: FileMemory, clock: ManualClock) -> None:
    """Not the file's mtime for every line: each fact the store saves ends
    with its day as a Markdown comment, which search, the overview and the
    export date it by."""
    clock.set("2026-03-01T10:00:00Z")
    await files.remember("alice", "Alice keeps bees", provenance=P)
    clock.set("2026-03-05T10:00:00Z")
    await files.remember("alice", "Alice moved to Suzhou", provenance=P)
    again = await files.remember("alice", "alice keeps BEES", provenance=P)  # already there: its own day
    assert again.date == "2026-03-01"
    path = files.user_dir("alice") / "MEMORY.md"
    assert path.read_text().splitlines()[2:] == [
        "- Alice keeps bees <!-- 2026-03-01 -->",
        "- Alice moved to Suzhou <!-- 2026-03-05 -->",
    ]
    assert [(h.content, h.date) for h in await files.search("alice", "bees Suzhou")] == [
        ("Alice moved to Suzhou", "2026-03-05"), ("Alice keeps bees", "2026-03-01")]
    data = await files.owner_data("alice")
    assert sorted((m.content, m.created_at) for m in data.memories) == [
        ("Alice keeps bees", "2026-03-01"), ("Alice moved to Suzhou", "2026-03-05")]
    assert "<!--" not in await files.profile("alice")


async def test_lines_without_a_date_are_dated_by_the_file_and_hand_edits_of_dates_count(
    files: FileMemory, clock: ManualClock
) -> None:
    """A MEMORY.md written before (or by hand) has no dates: its lines take
    the file's mtime, as always, and keep their words and ids when a date
    is added or removed by hand; a new fact gets its date, the old lines
    are left as written."""
    import os

    path = files.user_dir("alice") / "MEMORY.md"
    path.parent.mkdir(parents=True)
    path.write_text("# Alice\n\n- Alice keeps bees\n")
    t = datetime(2026, 2, 20, 12, tzinfo=UTC).timestamp()
    os.utime(path, (t, t))
    [old] = await files.search("alice", "bees")
    assert (old.content, old.date) == ("Alice keeps bees", "2026-02-20")
    path.write_text("# Alice\n\n- Alice keeps bees <!-- 2025-06-01 -->\n")  # dated by hand
    [dated] = await files.search("alice", "bees")
    assert (dated.content, dated.date, dated.ref) == ("Alice keeps bees", "2025-06-01", old.ref)
    clock.set("2026-03-05T10:00:00Z")
    await files.remember("alice", "Alice moved to Suzhou", provenance=P)
    assert path.read_text() == "# Alice\n\n- Alice keeps bees <!-- 2025-06-01 -->\n- Alice moved to Suzhou <!-- 2026-03-05 -->\n"
    done = await files.forget("alice", [dated.ref])
    assert done.texts == ["Alice keeps bees"]
    assert path.read_text() == "# Alice\n\n- Alice moved to Suzhou <!-- 2026-03-05 -->\n"


async def test_a_group_line_is_kept_in_no_members_file_and_a_group_owner_gets_no_folder(
    files: FileMemory, clock: ManualClock
) -> None:
    """The file store keeps no group's notes (memory/groupnotes.py needs the
    SQLite store): a line said in a group, and the bot's reply there, are
    not written into the member's private log, which their private chat
    reads; a group owner's turn makes no folder of its own."""
    said = [Turn(owner="alice", channel="telegram", chat_id="-100900", role="user", group=True, speaker_name="Mom",
                 content="Mia is allergic to peanuts, remember that", message_id="7"),
            Turn(owner="alice", channel="telegram", chat_id="-100900", role="assistant", group=True,
                 content="Noted: Mia is allergic to peanuts", message_id="7"),
            Turn(owner="group:telegram:-100900", channel="telegram", chat_id="-100900", role="user", group=True,
                 content="Dad books the hotel for the lake trip", message_id="8"),
            turn("alice", "I moved to Berlin", mid="9")]
    await files.buffer(said)
    logged = "".join(p.read_text() for p in (files.root / "users").rglob("*.md"))
    assert "I moved to Berlin" in logged  # her private line, as before
    assert "peanuts" not in logged and "lake trip" not in logged
    assert [p.name for p in (files.root / "users").iterdir()] == [files.user_dir("alice").name]
    assert not [h for h in await files.search("alice", "peanuts allergic")]


async def test_lines_and_daily_files_are_dated_in_the_users_zone_when_written(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The gateway runs on UTC; Alice set Tokyo. At 23:30 UTC on 10 Nov
    (08:30 on 11 Nov in Tokyo) her line went into 2026-11-10.md at
    "23:30": "yesterday" on her 12 Nov missed it, and an edit looked for
    it at her minute. Bob set none: the gateway's."""
    from zoneinfo import ZoneInfo

    tokyo = ZoneInfo("Asia/Tokyo")
    zones = {"alice": tokyo}

    async def zone_of(user: str) -> ZoneInfo | None:
        return zones.get(user)

    files = FileMemory(tmp_path / "ws", clock)  # tz: UTC
    files.zone_of = zone_of
    await files.buffer([turn("alice", "the spare key is under the blue flowerpot", "2026-11-10T23:30:00", mid="7"),
                        turn("bob", "the spare key is with the neighbour", "2026-11-10T23:30:00")])
    alice, bob = files.user_dir("alice"), files.user_dir("bob")
    assert sorted(p.name for p in alice.glob("2026-*.md")) == ["2026-11-11.md"]
    assert "08:30" in (alice / "2026-11-11.md").read_text()
    assert sorted(p.name for p in bob.glob("2026-*.md")) == ["2026-11-10.md"]
    assert "23:30" in (bob / "2026-11-10.md").read_text()

    clock.set(datetime(2026, 11, 12, 1, 0, tzinfo=UTC))  # 10:00 on 12 Nov in Tokyo
    hits = await files.recall("alice", "what did I say yesterday?", tz=tokyo)
    assert any("blue flowerpot" in h.content for h in hits), hits
    # Her edit finds its line at her minute, however often the words were said.
    said = turn("alice", "the spare key is under the red flowerpot", "2026-11-10T23:30:00", mid="7")
    assert await files.revise(said, before="the spare key is under the blue flowerpot") == "replaced"
    assert "red flowerpot" in (alice / "2026-11-11.md").read_text()
    # A correction logged anew (no line found) is dated in her zone too.
    clock.set(datetime(2026, 11, 12, 23, 0, tzinfo=UTC))  # 08:00 on 13 Nov in Tokyo
    late = turn("alice", "the gate code is 4521", "2026-11-01T09:00:00", mid="8")
    assert await files.revise(late, before="never logged") == "corrected"
    assert "(edited) the gate code" in (alice / "2026-11-13.md").read_text()


def test_query_weights_are_the_retrievers_own() -> None:
    # The fallback store weighs a glue bigram and an inner character with
    # the SQLite retriever's constants, not copies that could drift apart.
    from memory.filestore import _query_units
    from memory.tokenize import GLUE_BIGRAM_WEIGHT, UNIGRAM_WEIGHT, query_terms

    units, terms = _query_units("喜欢的咖啡"), dict(query_terms("喜欢的咖啡"))
    assert units["欢的"] == terms["欢的"] == GLUE_BIGRAM_WEIGHT
    assert units["咖"] == terms["咖"] == UNIGRAM_WEIGHT
    # A content word with a grammar character weighs as a word in both.
    assert _query_units("上海那边")["上海"] == dict(query_terms("上海那边"))["上海"] == 1.0
