"""Upgrading across many versions: every SQLite file myclaw keeps, from
every prefix of its migration list, opened by the current code.

For each database (:data:`KINDS`) and each prefix ``k`` of its migrations,
the file is written the way an operator's would be: opened by the code of
version 1 and given that version's rows, then by version 2 and given its
rows, ... up to ``k``. The current code then opens it; every row written
along the way must be there with its words, owner, dates and categories,
the FTS indexes must pass their integrity check and find the old rows, and
``PRAGMA integrity_check`` must say ok.

The rows each version wrote are kept by migration name in the ``*_ERAS``
tables below: a migration added later without an entry fails
:func:`test_every_migration_has_representative_rows` (and every upgrade
test through it) with a message saying what to add.

A migration cut mid-way, by an exception or by SIGKILL between its
statements, must leave the file at the version before, as it was; the next
start finishes it.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiosqlite
import pytest

from gateway.cron import CRON_MIGRATIONS, CronStore
from gateway.sessions import MIGRATIONS as SESSION_MIGRATIONS
from gateway.sessions import SessionStore
from memory import ManualClock, MemoryEngine
from memory.db import Attachment, Database, Migration
from memory.cues import cue_text, split_terms
from memory.engine import INDEX_VERSION, memory_index_text, owner_key
from memory.retrieval import Retriever
from memory.schema import (
    BUFFER_MIGRATIONS, BUFFER_SCHEMA, MIGRATIONS, _adopt_buffer, _v5_buffer_own_file, buffer_path,
)
from memory.tokenize import index_text

Row = tuple[str, dict[str, Any]]  # (table, column -> value)
Era = Callable[[int], list[Row]]  # the rows written by the code of version v (given v)

# One word per version, so a search for it finds that version's rows only.
WORDS = [
    "apricot", "bassoon", "cactus", "dolphin", "easel", "falcon", "glacier", "harmonica", "igloo", "jaguar",
    "kettle", "lantern", "mongoose", "nutmeg", "oboe", "pelican", "quarry", "raccoon", "saffron", "tuba",
    "umbrella", "violin", "walrus", "xylophone", "yodel", "zeppelin",
]


def word(v: int) -> str:
    if v > len(WORDS):
        raise AssertionError(f"version {v}: add more words to WORDS in {__file__}")
    return WORDS[v - 1]


def at(v: int, hour: int = 8) -> str:
    """A date of version ``v``'s time, as the code stores them."""
    return f"2025-{(v - 1) // 28 + 1:02d}-{(v - 1) % 28 + 1:02d}T{hour:02d}:00:00Z"


# -- memory.db ---------------------------------------------------------------


def _memory(v: int, i: int, owner: str, content: str, *, replaced: str = "", **cols: Any) -> list[Row]:
    status = cols.get("status", "active")
    row = {
        "id": v * 10 + i, "owner": owner, "tier": 1 if i == 1 else 2, "category": cols.pop("category", "event"),
        "content": content, "content_hash": f"h{v}-{i}", "importance": 0.75, "source": "extraction",
        "status": status, "provenance": json.dumps({"channel": "telegram", "chat_id": "1"}),
        "created_at": at(v), "updated_at": at(v, 9), "last_accessed": at(v, 10), "access_count": v, **cols,
    }
    rows: list[Row] = [("memories", row)]
    if status == "active":  # only active rows are indexed
        # As the current code indexes it (INDEX_VERSION): with the words of the fact it replaced.
        cues = cue_text(cols.get("project", "_global"), cols.get("topic", "_general"),
                        split_terms(cols.get("search_terms", "")))
        text = memory_index_text(content, cols.get("source_text", ""), replaced, cues)
        fts = {"rowid": row["id"], "owner": owner_key(owner), "text": text}
        rows.append(("memories_fts", fts))
    return rows


def _memory_v1(v: int, *, source_text: bool = False) -> list[Row]:
    w = word(v)
    extra: dict[str, Any] = {"source_text": f"we talked about the {w}field trip"} if source_text else {}
    return [
        *_memory(v, 1, "telegram:alice", f"Alice keeps a {w} in the garden", category="identity",
                 replaced=f"Alice kept a {w} once", **extra),
        *_memory(v, 2, "telegram:bob", f"Bob's {w} password is hunter2", category="credential"),
        *_memory(v, 3, "telegram:alice", f"Alice kept a {w} once", category="decision", status="superseded",
                 superseded_by=v * 10 + 1),
        *_memory(v, 4, "telegram:alice", f"爱丽丝的{w}在杭州西湖边", category="conversation"),
        ("daily_events", {"id": v * 10 + 1, "owner": "telegram:alice", "event_date": at(v)[:10], "channel": "telegram",
                          "chat_id": "1", "summary": f"Alice repainted the {w} shed", "raw_tokens": 40,
                          "is_compressed": v % 2, "provenance": "{}", "created_at": at(v)}),
        ("events_fts", {"rowid": v * 10 + 1, "owner": owner_key("telegram:alice"),
                        "text": index_text(f"Alice repainted the {w} shed")}),
        # memory.db's own table until the buffer moved out; its file's after.
        ("extraction_buffer", {"id": v * 10 + 1, "owner": "telegram:alice", "channel": "telegram", "chat_id": "1",
                               "sender_id": "alice", "message_id": f"{v}01", "role": "user",
                               "content": f"my {w} needs water", "token_count": 5, "created_at": at(v),
                               "attempts": 1, "next_attempt_at": at(v, 11), "last_error": "timeout"}),
        ("memory_log", {"at": at(v), "job": "compression", "owner": "telegram:alice", "action": "merge",
                        "memory_id": v * 10 + 1, "detail": f"{w} merged"}),
        ("job_leases", {"name": f"job-{v}", "holder": "pid 1", "expires_at": at(v, 12)}),
    ]


def _memory_v3(v: int) -> list[Row]:
    return _memory_v1(v, source_text=True)


def _memory_v4(v: int) -> list[Row]:
    return [
        *_memory_v3(v),
        ("embedding_cache", {"text_hash": f"t{v}", "model": "bge-m3", "dimension": 2, "vector": bytes(8),
                             "created_at": at(v), "last_used_at": at(v, 9)}),
        ("memory_vectors", {"memory_id": v * 10 + 1, "owner": "telegram:alice", "model": "bge-m3",
                            "content_hash": f"h{v}-1", "vector": bytes(range(8))}),
    ]


def _memory_v6(v: int) -> list[Row]:
    return [
        *_memory_v4(v),
        ("project_aliases", {"owner": "telegram:alice", "alias": f"{word(v)}-old", "project": word(v),
                             "source": "extraction", "created_at": at(v)}),
    ]


def _memory_v9(v: int) -> list[Row]:
    # A fact a rename moved, with the name it came from.
    return [*_memory_v6(v), *_memory(v, 5, "telegram:alice", f"Alice's {word(v)} app ships weekly",
                                     project=word(v), renamed_from=f"{word(v)}-old")]


def _memory_v10(v: int) -> list[Row]:
    # A fact with the search terms its extraction gave it, one a line.
    return [*_memory_v9(v), *_memory(v, 6, "telegram:alice", f"Alice chose Postgres for the {word(v)} shop",
                                     topic="database", search_terms="数据库\ndatabase")]


def _memory_v11(v: int) -> list[Row]:
    # What a user's weekly refresh read, and a fact they said again since.
    return [*_memory_v10(v),
            ("memory_log", {"at": at(v), "job": "weekly_compress", "owner": "telegram:alice", "action": "profile_read",
                            "detail": json.dumps({"newest_id": v * 10 + 6, "log_id": 0})}),
            ("memory_log", {"at": at(v, 9), "job": "extraction", "owner": "telegram:alice", "action": "reinforce",
                            "memory_id": v * 10 + 1, "detail": json.dumps({"restated": "the garden again"})})]


MEMORY_ERAS: dict[str, Era] = {
    "_v1_core": lambda v: [("meta", {"key": "tokenizer", "value": INDEX_VERSION}), *_memory_v1(v)],
    "_v2_memories_by_owner_date": _memory_v1,  # an index: the same rows again
    "_v3_memory_source_text": _memory_v3,
    "_v4_embeddings": _memory_v4,
    "_v5_buffer_own_file": _memory_v4,  # extraction_buffer now names the buffer file's table
    "_v6_project_aliases": lambda v: _memory_v6(v),
    # These two rewrite rows (a renamed project's, small talk's category):
    # tests/memory/test_schema.py has their rows; the rows here are left as they are.
    "_v7_facts_under_current_project_name": lambda v: _memory_v6(v),
    "_v8_small_talk_is_temp": lambda v: _memory_v6(v),
    "_v9_renamed_from": _memory_v9,
    "_v10_search_terms": _memory_v10,
    "_v11_log_by_owner": _memory_v11,
    # Withdraws _global's facts the old daily job retold (none here, so the
    # rows stay as they are): tests/memory/test_retold.py has its rows.
    "_v12_global_day_logs_withdrawn": _memory_v11,
}

BUFFER_ERAS: dict[str, Era] = {
    "_buffer_v1": lambda v: [
        ("extraction_buffer", {"id": 1000 + v, "owner": "feishu:ou_carol", "channel": "feishu", "chat_id": "oc_1",
                               "sender_id": "ou_carol", "message_id": f"om_{v}", "role": "assistant",
                               "content": f"carol's {word(v)} is blue", "token_count": 4, "created_at": at(v)}),
    ],
    "_buffer_v2_set_aside": lambda v: [
        ("extraction_buffer", {"id": 1000 + v, "owner": "feishu:ou_carol", "channel": "feishu", "chat_id": "oc_1",
                               "sender_id": "ou_carol", "message_id": f"om_{v}", "role": "user",
                               "content": f"carol's {word(v)} is too long to learn", "token_count": 9000,
                               "created_at": at(v), "set_aside_at": at(v, 9)}),
    ],
    "_buffer_v3_in_group": lambda v: [
        ("extraction_buffer", {"id": 1000 + v, "owner": "feishu:ou_carol", "channel": "feishu", "chat_id": "oc_team",
                               "sender_id": "ou_carol", "message_id": f"om_{v}", "role": "user",
                               "content": f"carol's {word(v)} is on the team board", "token_count": 8,
                               "created_at": at(v), "in_group": 1}),
    ],
    "_buffer_v4_feishu_lines_fail_closed": lambda v: [
        ("extraction_buffer", {"id": 1000 + v, "owner": "feishu:ou_carol", "channel": "feishu", "chat_id": "oc_dm",
                               "sender_id": "ou_carol", "message_id": f"om_{v}", "role": "user",
                               "content": f"carol's {word(v)} is hers alone", "token_count": 8,
                               "created_at": at(v), "in_group": 0}),
    ],
    "_buffer_v5_speaker": lambda v: [
        ("extraction_buffer", {"id": 1000 + v, "owner": "group:feishu:oc_team", "channel": "feishu",
                               "chat_id": "oc_team", "sender_id": "ou_carol", "message_id": f"om_{v}", "role": "user",
                               "content": f"carol's {word(v)} is the team's plan", "token_count": 8,
                               "created_at": at(v), "in_group": 1, "speaker": "feishu:ou_carol",
                               "speaker_name": "Carol"}),
    ],
}

# The buffer moved into its own file with this memory.db version.
ADOPTED = MIGRATIONS.index(_v5_buffer_own_file) + 1


async def _open_memory_at(path: Path, migrations: Sequence[Migration], buffer: Sequence[Migration]) -> Database:
    if len(migrations) < ADOPTED:
        return await Database.open(path, migrations)  # no buffer file yet
    return await Database.open(path, migrations, attach=Attachment(BUFFER_SCHEMA, buffer_path(path), buffer),
                               before={ADOPTED: _adopt_buffer})


@asynccontextmanager
async def _engine(path: Path) -> AsyncIterator[Database]:
    async with await MemoryEngine.open(path, ManualClock("2026-03-01T12:00:00Z")) as engine:
        await _memory_checks(engine, path)
        yield engine.db


async def _memory_checks(engine: MemoryEngine, path: Path) -> None:
    db = engine.db
    for fts in ("memories_fts", "events_fts"):
        # Raises SQLITE_CORRUPT_VTAB when the index and its rows disagree.
        await db.write(f"INSERT INTO {fts}({fts}, rank) VALUES ('integrity-check', 1)")
    assert [tuple(r) for r in await db.fetchall("PRAGMA buffer.integrity_check")] == [("ok",)]
    rows = await db.fetchall("SELECT id, owner, content FROM memories WHERE status = 'active'")
    retriever = Retriever(engine, max_hits=50, token_budget=100_000)
    for r in rows:
        w = next(w for w in WORDS if w in r["content"])
        found = await retriever.retrieve(r["owner"], w, limit=50)
        assert r["id"] in {h.id for h in found}, f"memory {r['id']} ({r['content']!r}) not found by {w!r}"
        owners = {m.owner for m in (await engine.get_many([h.id for h in found])).values()}
        assert owners <= {r["owner"], "_global"}, f"{r['owner']} was shown another user's memory"
        if "杭州" in r["content"]:
            assert r["id"] in {h.id for h in await retriever.retrieve(r["owner"], "杭州", limit=50)}
    for e in await db.fetchall("SELECT id, owner, summary FROM daily_events"):
        w = next(w for w in WORDS if w in e["summary"])
        assert e["id"] in {h.id for h in await retriever.search_events(e["owner"], w, limit=50)}
    sourced = await db.fetchall("SELECT id, owner, source_text FROM memories WHERE source_text != ''")
    for r in sourced:  # a word only its source text holds
        w = next(w for w in WORDS if w in r["source_text"])
        assert r["id"] in {h.id for h in await retriever.retrieve(r["owner"], f"{w}field", limit=50)}


# -- gateway.db --------------------------------------------------------------


def _chat(v: int, *, context: bool = False, sender_name: bool = False) -> list[Row]:
    sid = v * 10 + 1
    more: dict[str, Any] = {}
    if context:
        more["context"] = json.dumps({"group": True, "addressed": True})
    if sender_name:
        more["sender_name"] = f"Dana {word(v)}"
    return [
        ("sessions", {"id": sid, "key": f"telegram:{v}", "channel": "telegram", "chat_id": str(v),
                      "started_at": at(v)}),
        ("session_messages", {"id": sid, "session_id": sid, "role": "user", "content": f"where is my {word(v)}?",
                              "owner": "telegram:dana", "sender_id": "dana", "message_id": f"{v}01",
                              "created_at": at(v), "buffered": 1, **more}),
        ("session_messages", {"id": sid + 1, "session_id": sid, "role": "assistant",
                              "content": f"Your {word(v)} is in the attic.", "owner": "telegram:dana",
                              "message_id": f"{v}02", "created_at": at(v, 9)}),
    ]


def _outbox(v: int, extra: dict[str, Any] | None = None) -> list[Row]:
    return [
        *_chat(v),
        ("outbox", {"id": v, "channel": "feishu", "chat_id": "oc_9", "text": f"the {word(v)} report is ready",
                    "reply_to": "om_1", "metadata": json.dumps({"thread": v}), "extra": json.dumps(extra or {}),
                    "owner": "feishu:ou_erin", "created_at": at(v), "attempts": 2, "next_attempt_at": at(v, 9),
                    "last_error": "502"}),
    ]


GATEWAY_ERAS: dict[str, Era] = {
    "_m001_sessions": _chat,
    "_m002_message_ids": _chat,  # an index
    "_m003_outbox": _outbox,
    "_m004_user_timezones": lambda v: [
        *_outbox(v), ("user_timezones", {"owner": f"telegram:tz{v}", "timezone": "Asia/Shanghai", "updated_at": at(v)}),
    ],
    "_m005_outbox_send_keys": lambda v: _outbox(v, {"send_key": f"key{v}"}),
    "_m006_sent_replies": lambda v: [
        *_chat(v), ("sent_replies", {"channel": "feishu", "chat_id": "oc_9", "answers": f"om_{v}",
                                     "message_id": f"om_r{v}", "sent_at": 1_700_000_000.5 + v}),
    ],
    "_m007_seen_ids": lambda v: [
        *_chat(v), ("seen_ids", {"channel": "feishu", "kind": "event", "id": f"ev_{v}", "seen_at": 1_700_000_000.0 + v}),
    ],
    "_m008_user_incognito": lambda v: [*_chat(v), ("user_incognito", {"owner": f"telegram:shy{v}", "since": at(v)})],
    "_m009_draft_messages": lambda v: [
        *_chat(v), ("draft_messages", {"channel": "feishu", "send_key": f"key{v}", "chat_id": "oc_9",
                                       "message_id": f"om_d{v}", "created_at": 1_700_000_000.0 + v, "finishing": 1}),
    ],
    "_m010_burst_comments": lambda v: [
        *_chat(v), ("burst_comments", {"channel": "telegram", "chat_id": str(v), "comment_id": f"{v}05",
                                       "burst_id": f"{v}06", "comments": json.dumps([f"{v}05"]),
                                       "kept_at": 1_700_000_000.0 + v}),
    ],
    "_m011_recent_files": lambda v: [
        *_chat(v), ("recent_files", {"id": v, "chat": f"telegram:{v}", "owner": "telegram:dana",
                                     "name": f"{word(v)}.pdf", "pages": 3, "chars": 20, "received": 1_700_000_000.0 + v,
                                     "text": zlib.compress(f"the {word(v)} minutes".encode())}),
    ],
    "_m012_message_context": lambda v: _chat(v, context=True),
    "_m013_sender_names": lambda v: _chat(v, context=True, sender_name=True),
    "_m014_admin_sessions": lambda v: [
        *_chat(v, context=True, sender_name=True),
        ("admin_sessions", {"id_hash": f"{v:064x}", "expires_at": 1_700_000_000 + v}),
        ("admin_failures", {"who": f"127.0.0.{v}", "at": 1_700_000_000.25 + v}),
    ],
    "_m015_inbox": lambda v: [
        *_chat(v, context=True, sender_name=True),
        ("inbox", {"id": v, "channel": "telegram", "chat_id": str(v), "message_id": f"{v}07", "received_at": at(v),
                   "payload": json.dumps({"text": f"and the {word(v)}?"})}),
    ],
    "_m016_chat_titles": lambda v: [
        *_chat(v, context=True, sender_name=True),
        ("chat_titles", {"channel": "telegram", "chat_id": f"-100{v}", "title": f"The {word(v)} club", "seen_at": at(v)}),
    ],
    "_m017_outbox_sending": lambda v: [  # a reply a kill cut mid-send
        *_chat(v, context=True, sender_name=True),
        ("outbox", {**_outbox(v, {"send_key": f"key{v}"})[-1][1], "sending": f"run{v:032x}"}),
    ],
    "_m018_revisions": lambda v: [  # a recall a stop left unapplied
        *_chat(v, context=True, sender_name=True),
        ("revisions", {"id": v, "channel": "feishu", "chat_id": "oc_9", "message_id": f"om_{v}", "kind": "recall",
                       "received_at": at(v), "payload": json.dumps({"s": "", "t": "", "ts": at(v), "e": {}})}),
    ],
    "_m019_refused_permissions": lambda v: [
        *_chat(v, context=True, sender_name=True),
        ("refused_permissions", {"channel": f"feishu{v}", "scope": "im:chat:readonly", "refused_at": at(v)}),
    ],
    "_m020_job_replies": lambda v: [  # a job's reply a kill left before cron.db recorded its run
        *_chat(v, context=True, sender_name=True),
        ("outbox", {**_outbox(v, {"send_key": f"key{v}", "job_slot": f"{at(v, 9)} job{v}"})[-1][1],
                    "sending": f"run{v:032x}"}),
        ("job_replies", {"job": f"job{v}", "slot": at(v, 9), "written_at": at(v, 9)}),
    ],
    "_m021_job_reply_fallback": lambda v: [  # a job's fallback (⏰) a kill left before cron.db recorded its run
        *_chat(v, context=True, sender_name=True),
        ("outbox", {**_outbox(v, {"send_key": f"key{v}", "job_slot": f"{at(v, 9)} job{v}", "job_fallback": True})[-1][1],
                    "sending": f"run{v:032x}"}),
        ("job_replies", {"job": f"job{v}", "slot": at(v, 9), "written_at": at(v, 9), "fallback": 1}),
    ],
    "_m022_revision_attempts": lambda v: [  # an edit whose application failed once, and a member's leaving
        *_chat(v, context=True, sender_name=True),
        ("revisions", {"id": v, "channel": "telegram", "chat_id": str(v), "message_id": f"{v}07", "kind": "edit",
                       "received_at": at(v), "attempts": 1,
                       "payload": json.dumps({"s": str(v), "t": f"the {word(v)}", "ts": at(v), "e": {}})}),
        ("revisions", {"id": 1000 + v, "channel": "feishu", "chat_id": "oc_9", "message_id": f"ou_{v}", "kind": "left",
                       "received_at": at(v), "payload": json.dumps({"s": f"ou_{v}", "t": "", "ts": at(v), "e": {}})}),
    ],
    "_m023_erasure_requests": lambda v: [  # `memory forget --user` asking a running gateway, taken and done
        *_chat(v, context=True, sender_name=True),
        ("erasure_requests", {"id": v, "whom": f"telegram:gone{v}", "asked_at": at(v), "taken_at": at(v, 1),
                              "done_at": at(v, 2), "counts": json.dumps({"memories": v})}),
    ],
    "_m024_recent_file_messages": lambda v: [  # a file that knows the message it came with (a recall finds it by it)
        *_chat(v, context=True, sender_name=True),
        ("recent_files", {"id": v, "chat": f"telegram:{v}", "owner": "telegram:dana", "name": f"{word(v)}.pdf",
                          "pages": 3, "chars": 20, "received": 1_700_000_000.0 + v, "message_id": f"{v}01",
                          "text": zlib.compress(f"the {word(v)} minutes".encode())}),
    ],
}


@asynccontextmanager
async def _sessions(path: Path) -> AsyncIterator[Database]:
    async with await SessionStore.open(path, ManualClock("2026-03-01T12:00:00Z")) as store:
        # What the prompt reads: each chat's window, in order, old rows included.
        chats = await store.db.fetchall("SELECT id, key FROM sessions")
        for s in chats:
            want = [r["content"] for r in await store.db.fetchall(
                "SELECT content FROM session_messages WHERE session_id = ? ORDER BY id", (s["id"],))]
            assert [m.content for m in await store.window(s["key"])] == want
        for o in await store.db.fetchall("SELECT extra FROM outbox"):
            assert json.loads(o["extra"])["send_key"]  # every reply kept has its key for good
        yield store.db


# -- cron.db -----------------------------------------------------------------


def _job(v: int, **cols: Any) -> list[Row]:
    return [("cron_jobs", {"id": f"job{v}", "schedule": "0 9 * * *", "message": f"remind me about the {word(v)}",
                           "kind": "agent", "channel": "telegram", "chat_id": "1", "user": "telegram:alice",
                           "created_at": at(v), "next_run_at": at(v + 1, 9), "last_run_at": at(v, 9),
                           "last_status": "ok", **cols})]


CRON_ERAS: dict[str, Era] = {
    "_v1_cron": _job,
    "_v2_private": lambda v: _job(v, private=1),
    "_v3_timezone": lambda v: _job(v, private=1, timezone="Asia/Shanghai"),
    "_v4_once": lambda v: _job(v, schedule="", at=at(v + 2)),
    "_v5_retries": lambda v: _job(v, attempts=2, due_at=at(v, 9)),
}


@asynccontextmanager
async def _cron(path: Path) -> AsyncIterator[Database]:
    store = await CronStore.open(path, ManualClock("2026-03-01T12:00:00Z"))
    try:
        rows = await store.db.fetchall("SELECT id FROM cron_jobs")
        assert {j.id for j in await store.list(user="telegram:alice")} == {r["id"] for r in rows}
        yield store.db
    finally:
        await store.close()


# -- the databases -------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    name: str
    migrations: Sequence[Migration]
    eras: Mapping[str, Era]
    eras_name: str  # where to add one, for the failure message
    open_at: Callable[[Path, Sequence[Migration]], Awaitable[Database]]  # as the code of that version did
    current: Callable[[Path], Any]  # the current code's opener: an async context manager of its Database
    file: str = "data.db"
    role: str = ""  # its name in Paths.data_files and in a backup
    rewritten: frozenset[tuple[str, str]] = frozenset()  # (table, column) a later migration fills in


KINDS = {
    k.name: k
    for k in [
        Kind("memory.db", MIGRATIONS, MEMORY_ERAS, "MEMORY_ERAS",
             lambda p, ms: _open_memory_at(p, ms, BUFFER_MIGRATIONS), _engine, "memory.db", "memory"),
        Kind("memory.buffer.db", BUFFER_MIGRATIONS, BUFFER_ERAS, "BUFFER_ERAS",
             lambda p, ms: _open_memory_at(p, MIGRATIONS, ms), _engine, "memory.db", "buffer"),
        Kind("gateway.db", SESSION_MIGRATIONS, GATEWAY_ERAS, "GATEWAY_ERAS",
             lambda p, ms: Database.open(p, ms), _sessions, "gateway.db", "gateway",
             rewritten=frozenset({("outbox", "extra")})),
        Kind("cron.db", CRON_MIGRATIONS, CRON_ERAS, "CRON_ERAS", lambda p, ms: Database.open(p, ms), _cron, "cron.db", "cron"),
    ]
}


def era(kind: Kind, version: int) -> Era:
    step = kind.migrations[version - 1]
    name = getattr(step, "__name__", repr(step))
    if name not in kind.eras:
        raise AssertionError(
            f"{kind.name}'s migration {version} ({name}) has no representative rows: add {name!r} to "
            f"{kind.eras_name} in {__file__}: the rows the code of that version writes (its new tables and "
            "columns filled, as a user's data would be), or the previous version's rows if it only adds an index"
        )
    return kind.eras[name]


async def _fill(db: Database, rows: list[Row]) -> None:
    async with db.transaction() as conn:
        for table, cols in rows:
            names = ", ".join(cols)
            await conn.execute(f"INSERT INTO {table} ({names}) VALUES ({', '.join('?' * len(cols))})", list(cols.values()))


async def write_history(kind: Kind, path: Path, upto: int) -> list[Row]:
    """Open ``path`` with the code of version 1, 2, ... ``upto``, each
    writing its own rows; the rows written."""
    written: list[Row] = []
    for v in range(1, upto + 1):
        rows = era(kind, v)(v)
        db = await kind.open_at(path, kind.migrations[:v])
        try:
            assert await _schema_version(kind, db) == v
            await _fill(db, rows)
        finally:
            await db.close()
        written += rows
    return written


async def _version(db: Database, schema: str = "main") -> int:
    row = await db.fetchone(f"PRAGMA {schema}.user_version")
    assert row is not None
    return int(row[0])


def _schema_version(kind: Kind, db: Database) -> Awaitable[int]:
    return _version(db, BUFFER_SCHEMA if kind.migrations is BUFFER_MIGRATIONS else "main")


async def check_current(kind: Kind, path: Path, written: list[Row]) -> None:
    """The current code opens ``path``: latest version, every row there."""
    async with kind.current(path) as db:
        assert await _schema_version(kind, db) == len(kind.migrations)
        assert [tuple(r) for r in await db.fetchall("PRAGMA main.integrity_check")] == [("ok",)]
        for table, cols in written:
            kept = {c: v for c, v in cols.items() if (table, c) not in kind.rewritten}
            where = " AND ".join(f"{c} IS ?" for c in kept)
            row = await db.fetchone(f"SELECT COUNT(*) FROM {table} WHERE {where}", list(kept.values()))
            assert row is not None and row[0] == 1, f"{kind.name}: lost or changed in {table}: {cols}"


def _prefixes() -> list[tuple[str, int]]:
    return [(k.name, n) for k in KINDS.values() for n in range(len(k.migrations) + 1)]


def test_every_list_of_migrations_and_every_data_file_is_tested_here() -> None:
    """A new database (a module-level ``list[Migration]``) or a new data
    file backed up must come with a :class:`Kind` in :data:`KINDS`."""
    import importlib
    import re

    from gateway.backup import schema_versions
    from gateway.config import Config, Paths

    root = Path(__file__).parent.parent
    lists = {}
    for package in ("gateway", "memory", "channels"):
        for source in (root / package).rglob("*.py"):
            for name in re.findall(r"^(\w+): list\[Migration\] =", source.read_text(encoding="utf-8"), re.M):
                module = ".".join(source.relative_to(root).with_suffix("").parts)
                lists[f"{module}.{name}"] = getattr(importlib.import_module(module), name)
    tested = [k.migrations for k in KINDS.values()]
    untested = [where for where, found in lists.items() if not any(found is t for t in tested)]
    assert not untested, f"add a Kind to KINDS in {__file__} for {untested}"
    assert len(lists) == len(KINDS)
    roles = set(Paths(Path("/nonexistent")).data_files(Config()))
    assert roles == set(schema_versions()) == {k.role for k in KINDS.values()}


def test_every_migration_has_representative_rows() -> None:
    for kind in KINDS.values():
        for v in range(1, len(kind.migrations) + 1):
            era(kind, v)  # fails with what to add
        names = {getattr(m, "__name__", "") for m in kind.migrations}
        assert set(kind.eras) <= names, f"{kind.eras_name} names migrations {kind.name} does not have"


@pytest.mark.parametrize(("name", "upto"), _prefixes())
async def test_a_file_of_any_version_opens_with_everything_it_held(tmp_path: Path, name: str, upto: int) -> None:
    kind = KINDS[name]
    path = tmp_path / kind.file
    written = await write_history(kind, path, upto)
    await check_current(kind, path, written)
    await check_current(kind, path, written)  # and again: nothing migrated twice


# -- a migration cut mid-way -----------------------------------------------------


def _snapshot(path: Path, *, side: bool) -> list[tuple[Any, ...]]:
    """The schema and every row of ``path`` (and of its buffer file if ``side``)."""
    conn = sqlite3.connect(path)
    try:
        out: list[tuple[Any, ...]] = []
        schemas = ["main"]
        if side:
            conn.execute("ATTACH DATABASE ? AS buffer", (str(buffer_path(path)),))
            schemas.append("buffer")
        for s in schemas:
            out.append((s, conn.execute(f"PRAGMA {s}.user_version").fetchone()[0]))
            assert conn.execute(f"PRAGMA {s}.integrity_check").fetchall() == [("ok",)]
            tables = conn.execute(
                f"SELECT type, name, sql FROM {s}.sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name"
            ).fetchall()
            out += tables
            for kind_, table, sql in tables:
                if kind_ == "table" and not (sql or "").upper().startswith("CREATE VIRTUAL"):
                    out += [(table, *r) for r in conn.execute(f"SELECT * FROM {s}.{table} ORDER BY 1")]
        return out
    finally:
        conn.close()


def _cut(step: Migration, how: str) -> Migration:
    async def cut(conn: aiosqlite.Connection) -> None:
        await step(conn)  # every statement of the step, not committed
        if how == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        raise RuntimeError("cut mid-way")

    cut.__name__ = getattr(step, "__name__", "step")
    return cut


async def migrate_cut(name: str, path: Path, version: int, how: str) -> None:
    """Open ``path`` (at ``version - 1``) with migration ``version`` cut mid-way."""
    kind = KINDS[name]
    steps = [*kind.migrations[: version - 1], _cut(kind.migrations[version - 1], how)]
    db = await kind.open_at(path, steps)
    await db.close()


def _cuts() -> list[tuple[str, int, str]]:
    """Every migration cut by an exception; by SIGKILL (a process each,
    ~1 s) the latest of each file and memory.db's move of the buffer (two
    transactions over two files)."""
    raised = [(k.name, n, "raise") for k in KINDS.values() for n in range(1, len(k.migrations) + 1)]
    killed = [(k.name, len(k.migrations), "kill") for k in KINDS.values()]
    return list(dict.fromkeys([*raised, *killed, ("memory.db", ADOPTED, "kill")]))


@pytest.mark.parametrize(("name", "version", "how"), _cuts())
async def test_a_migration_cut_mid_way_leaves_the_old_version_and_the_next_start_finishes_it(
    tmp_path: Path, name: str, version: int, how: str
) -> None:
    kind = KINDS[name]
    path = tmp_path / kind.file
    written = await write_history(kind, path, version - 1)
    # The buffer file's rows are copied there and committed before memory.db's
    # step that lets go of them (memory/schema.py, _adopt_buffer): compared
    # only when it was there before.
    side = buffer_path(path).exists()
    before = _snapshot(path, side=side) if path.exists() else None
    if how == "raise":
        with pytest.raises(RuntimeError, match="cut mid-way"):
            await migrate_cut(name, path, version, how)
    else:  # the process killed between the step's statements and its COMMIT
        code = (f"import asyncio, pathlib, tests.test_upgrade as t; "
                f"asyncio.run(t.migrate_cut({name!r}, pathlib.Path({str(path)!r}), {version}, 'kill'))")
        proc = await asyncio.to_thread(
            subprocess.run, [sys.executable, "-c", code], cwd=Path(__file__).parent.parent, capture_output=True, text=True
        )
        assert proc.returncode == -signal.SIGKILL, proc.stderr
    if before is not None:
        assert _snapshot(path, side=side) == before  # the old version, as it was
    await check_current(kind, path, written)


# -- backups of another version ----------------------------------------------------

BACKED_UP = ["memory.db", "gateway.db", "cron.db"]  # the buffer file rides with memory.db


@pytest.fixture
def cli_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], Path]:
    """``MYCLAW_HOME`` set to ``tmp_path / name`` (with a config): the
    homes of an old install and of this one."""
    for n in [n for n in os.environ if n.startswith("MYCLAW_")]:
        monkeypatch.delenv(n)

    def home(name: str) -> Path:
        h = tmp_path / name
        (h / "data").mkdir(parents=True, exist_ok=True)
        (h / "config.json").write_text(json.dumps({"provider": {"apiKey": "sk-test"}}), encoding="utf-8")
        monkeypatch.setenv("MYCLAW_HOME", str(h))
        return h

    return home


def cli(*args: str) -> Any:
    from click.testing import CliRunner

    from gateway.cli import main

    return CliRunner().invoke(main, list(args))


@pytest.mark.parametrize("age", ["first", "previous"])
def test_a_backup_of_an_older_version_restores_and_migrates_with_nothing_lost(
    cli_home: Callable[[str], Path], age: str
) -> None:
    old = cli_home("old")
    written = {}
    for name in BACKED_UP:
        kind = KINDS[name]
        upto = 1 if age == "first" else len(kind.migrations) - 1
        written[name] = asyncio.run(write_history(kind, old / "data" / kind.file, upto))
    r = cli("backup", str(old / "backup"))
    assert r.exit_code == 0, r.output

    new = cli_home("new")  # this version's install, with its own (newer) rows
    async def current() -> None:
        for name in BACKED_UP:
            async with KINDS[name].current(new / "data" / KINDS[name].file):
                pass
    asyncio.run(current())
    r = cli("restore", str(old / "backup"), "--yes")
    assert r.exit_code == 0, r.output
    for name in BACKED_UP:
        asyncio.run(check_current(KINDS[name], new / "data" / KINDS[name].file, written[name]))
    aside = next((new / "data").glob("before-restore-*"))
    assert {p.name for p in aside.iterdir()} >= {"memory.db", "buffer.db", "gateway.db", "cron.db"}


def _newer(backup: Path, role: str, *, version: int | None = None, new_role: str | None = None) -> None:
    """Make ``backup``'s file of ``role`` what a newer myclaw would have
    written: a later schema version, or a role this one does not know."""
    import hashlib

    manifest = json.loads((backup / "manifest.json").read_text())
    f = next(f for f in manifest["files"] if f["role"] == role)
    if version is not None:
        with sqlite3.connect(backup / f["name"]) as conn:
            conn.execute(f"PRAGMA user_version = {version}")
        conn.close()
        f["schema_version"] = version
    if new_role is not None:
        f = {**f, "role": new_role, "name": f"{new_role}.db"}
        (backup / f["name"]).write_bytes((backup / f"{role}.db").read_bytes())
        manifest["files"].append(f)
    f["bytes"] = (backup / f["name"]).stat().st_size
    f["sha256"] = hashlib.sha256((backup / f["name"]).read_bytes()).hexdigest()
    (backup / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize("role", ["buffer", "memory", "gateway", "cron", "a new file"])
def test_a_backup_from_a_newer_version_is_refused_before_anything_is_replaced(
    cli_home: Callable[[str], Path], role: str
) -> None:
    home = cli_home("home")
    async def current() -> None:
        for name in BACKED_UP:
            async with KINDS[name].current(home / "data" / KINDS[name].file):
                pass
    asyncio.run(current())
    assert cli("backup", str(home / "b")).exit_code == 0
    if role == "a new file":
        _newer(home / "b", "cron", new_role="web")
        said = "web.db"
    else:
        latest = {"buffer": len(BUFFER_MIGRATIONS), "memory": len(MIGRATIONS), "gateway": len(SESSION_MIGRATIONS),
                  "cron": len(CRON_MIGRATIONS)}[role]
        _newer(home / "b", role, version=latest + 1)
        said = f"schema version {latest + 1}"
    before = {p.name: p.read_bytes() for p in (home / "data").iterdir() if p.is_file()}
    for args in (["--yes"], ["--check"]):
        r = cli("restore", str(home / "b"), *args)
        assert r.exit_code == 1, r.output
        assert said in r.output and "newer myclaw" in r.output, r.output
    assert {p.name: p.read_bytes() for p in (home / "data").iterdir() if p.is_file()} == before
    assert not list((home / "data").glob("before-restore-*"))


async def test_a_feishu_line_waiting_from_before_v4_is_learnt_as_a_groups(tmp_path: Path) -> None:
    """A Feishu chat id does not tell a group; a line buffered before the
    kind was kept (or by v3, which could not tell) is taken for a group's
    (fail closed); a Telegram private line stays private."""
    path = tmp_path / "memory.db"
    db = await _open_memory_at(path, MIGRATIONS, BUFFER_MIGRATIONS[:3])
    try:
        await _fill(db, [
            ("extraction_buffer", {"id": 1, "owner": "feishu:ou_carol", "channel": "feishu", "chat_id": "oc_team",
                                   "sender_id": "ou_carol", "message_id": "om_1", "role": "user",
                                   "content": "our launch is Friday", "token_count": 5, "created_at": at(1)}),
            ("extraction_buffer", {"id": 2, "owner": "telegram:dana", "channel": "telegram", "chat_id": "42",
                                   "sender_id": "42", "message_id": "1", "role": "user",
                                   "content": "my launch is Friday", "token_count": 5, "created_at": at(1)}),
        ])
    finally:
        await db.close()
    async with _engine(path) as current:
        rows = await current.fetchall("SELECT id, in_group FROM buffer.extraction_buffer ORDER BY id")
    assert [tuple(r) for r in rows] == [(1, 1), (2, 0)]
