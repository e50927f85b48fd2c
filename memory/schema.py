"""Ordered migrations of ``memory.db``. Append; never edit a shipped step.

Departures from seed 3.2, on purpose:

* ``owner`` on every row: memories, events and buffered messages belong to
  one user (or ``_global``); retrieval reads the asking user's rows only.
* ``status`` (active / superseded / archived) with ``superseded_by`` instead of
  ``is_archived``, so a fact can be replaced without losing history.
* ``provenance`` (JSON) so answers can cite channel, chat, messages, dates.
* The FTS tables hold *pre-tokenised* text (see ``memory.tokenize``) written
  by the engine in the same transaction as the row, instead of triggers over
  ``unicode61``, which treats a run of Han characters as one token and so
  cannot find a two-character Chinese word inside a sentence. Only active
  rows are indexed; the ``owner`` column holds a one-token key so a MATCH can
  be scoped to one user inside the index.
* The extraction buffer lives in a file of its own, ``memory.buffer.db``
  (schema ``buffer``, :data:`BUFFER_MIGRATIONS`; why: memory/db.py, how
  its deletes stay atomic with memory.db: memory/buffer.py). Open both
  with :func:`open_memory_db`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import aiosqlite

from .db import Attachment, Database, Migration, run_script
from .retold import withdraw_retold_day_logs

__all__ = ["BUFFER_MIGRATIONS", "BUFFER_SCHEMA", "MIGRATIONS", "buffer_path", "open_memory_db"]

CATEGORIES = "'identity','config','credential','decision','solution','event','conversation','temp','debug'"


async def _v1_core(conn: aiosqlite.Connection) -> None:
    await run_script(
        conn,
        f"""
        CREATE TABLE meta (
            key   TEXT PRIMARY KEY,
            value TEXT NOT NULL
        );

        CREATE TABLE memories (
            id            INTEGER PRIMARY KEY AUTOINCREMENT,
            owner         TEXT    NOT NULL,
            tier          INTEGER NOT NULL DEFAULT 2 CHECK (tier IN (1, 2)),
            project       TEXT    NOT NULL DEFAULT '_global',
            topic         TEXT    NOT NULL DEFAULT '_general',
            category      TEXT    NOT NULL DEFAULT 'event' CHECK (category IN ({CATEGORIES})),
            content       TEXT    NOT NULL CHECK (length(content) > 0),
            content_hash  TEXT    NOT NULL,
            importance    REAL    NOT NULL DEFAULT 0.5 CHECK (importance >= 0 AND importance <= 1),
            source        TEXT    NOT NULL DEFAULT 'extraction'
                          CHECK (source IN ('extraction','compression','manual','migration')),
            status        TEXT    NOT NULL DEFAULT 'active' CHECK (status IN ('active','superseded','archived')),
            superseded_by INTEGER REFERENCES memories(id) ON DELETE SET NULL,
            provenance    TEXT    NOT NULL DEFAULT '{{}}',
            created_at    TEXT    NOT NULL,
            updated_at    TEXT    NOT NULL,
            last_accessed TEXT    NOT NULL,
            access_count  INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX idx_memories_owner ON memories(owner, status, tier, project, topic);
        CREATE INDEX idx_memories_category ON memories(category, last_accessed);
        CREATE INDEX idx_memories_created ON memories(created_at);
        CREATE INDEX idx_memories_hash ON memories(owner, content_hash);

        CREATE VIRTUAL TABLE memories_fts USING fts5(
            owner, text,
            tokenize = 'unicode61 remove_diacritics 2',
            detail = full
        );
        -- Per-term document counts, read by the retriever for its own IDF.
        CREATE VIRTUAL TABLE memories_vocab USING fts5vocab(memories_fts, 'row');

        CREATE TABLE daily_events (
            id            INTEGER PRIMARY KEY AUTOINCREMENT,
            owner         TEXT    NOT NULL,
            event_date    TEXT    NOT NULL,
            channel       TEXT    NOT NULL DEFAULT 'unknown',
            chat_id       TEXT    NOT NULL DEFAULT '',
            summary       TEXT    NOT NULL CHECK (length(summary) > 0),
            raw_tokens    INTEGER NOT NULL DEFAULT 0,
            is_compressed INTEGER NOT NULL DEFAULT 0,
            provenance    TEXT    NOT NULL DEFAULT '{{}}',
            created_at    TEXT    NOT NULL
        );
        CREATE INDEX idx_events_owner_date ON daily_events(owner, event_date, is_compressed);

        CREATE VIRTUAL TABLE events_fts USING fts5(
            owner, text,
            tokenize = 'unicode61 remove_diacritics 2',
            detail = full
        );
        CREATE VIRTUAL TABLE events_vocab USING fts5vocab(events_fts, 'row');

        CREATE TABLE extraction_buffer (
            id              INTEGER PRIMARY KEY AUTOINCREMENT,
            owner           TEXT    NOT NULL,
            channel         TEXT    NOT NULL,
            chat_id         TEXT    NOT NULL DEFAULT '',
            sender_id       TEXT    NOT NULL DEFAULT '',
            message_id      TEXT    NOT NULL DEFAULT '',
            role            TEXT    NOT NULL CHECK (role IN ('user', 'assistant')),
            content         TEXT    NOT NULL,
            token_count     INTEGER NOT NULL DEFAULT 0,
            created_at      TEXT    NOT NULL,
            attempts        INTEGER NOT NULL DEFAULT 0,
            next_attempt_at TEXT,
            last_error      TEXT
        );
        CREATE INDEX idx_buffer_owner ON extraction_buffer(owner, id);
        CREATE INDEX idx_buffer_created ON extraction_buffer(created_at);
        -- A message is buffered once even if the gateway retries the write.
        CREATE UNIQUE INDEX idx_buffer_message ON extraction_buffer(owner, channel, chat_id, message_id, role)
            WHERE message_id != '';

        -- Single-writer interlock for background jobs (seed 002 4.4).
        CREATE TABLE job_leases (
            name       TEXT PRIMARY KEY,
            holder     TEXT NOT NULL,
            expires_at TEXT NOT NULL
        );

        -- What each compression / merge / supersede did and why.
        CREATE TABLE memory_log (
            id         INTEGER PRIMARY KEY AUTOINCREMENT,
            at         TEXT NOT NULL,
            job        TEXT NOT NULL,
            owner      TEXT NOT NULL DEFAULT '',
            action     TEXT NOT NULL,
            memory_id  INTEGER,
            detail     TEXT NOT NULL DEFAULT ''
        );
        CREATE INDEX idx_log_at ON memory_log(at);
        """
    )


async def _v2_memories_by_owner_date(conn: aiosqlite.Connection) -> None:
    # Retrieval matches a time reference ("last week", 上个月) against the
    # dates of the asking user's rows: a range scan, not a walk of all of them.
    await run_script(
        conn, "CREATE INDEX IF NOT EXISTS idx_memories_owner_created ON memories(owner, status, created_at);"
    )


async def _v3_memory_source_text(conn: aiosqlite.Connection) -> None:
    # The words a memory was drawn from, indexed with it (the FTS row holds
    # content + source_text) and never shown. Existing rows have none, so
    # their index rows are already right.
    await run_script(conn, "ALTER TABLE memories ADD COLUMN source_text TEXT NOT NULL DEFAULT '';")


async def _v4_embeddings(conn: aiosqlite.Connection) -> None:
    # Seed 003: vectors for hybrid search, optional (empty when no embedding
    # endpoint is configured). ``embedding_cache`` is keyed by the SHA-256 of
    # the exact text embedded and the model, so the same words are never sent
    # twice; ``dimension`` lets a model switch drop old vectors wholesale.
    # ``memory_vectors`` holds one L2-normalised float32 vector per memory;
    # its ``content_hash`` (the memory's own) tells an edited memory's vector
    # is stale. Deleting a memory deletes its vector (foreign keys are on).
    await run_script(
        conn,
        """
        CREATE TABLE embedding_cache (
            text_hash    TEXT    NOT NULL,
            model        TEXT    NOT NULL,
            dimension    INTEGER NOT NULL,
            vector       BLOB    NOT NULL,
            created_at   TEXT    NOT NULL,
            last_used_at TEXT    NOT NULL,
            PRIMARY KEY (text_hash, model)
        ) WITHOUT ROWID;
        CREATE INDEX idx_embedding_cache_last_used ON embedding_cache(last_used_at);

        CREATE TABLE memory_vectors (
            memory_id    INTEGER PRIMARY KEY REFERENCES memories(id) ON DELETE CASCADE,
            owner        TEXT    NOT NULL,
            model        TEXT    NOT NULL,
            content_hash TEXT    NOT NULL,
            vector       BLOB    NOT NULL
        );
        CREATE INDEX idx_memory_vectors_owner ON memory_vectors(owner, model);
        """,
    )


async def _v5_buffer_own_file(conn: aiosqlite.Connection) -> None:
    # The buffer's rows were copied into memory.buffer.db and committed
    # there by _adopt_buffer, in the transaction before this one.
    # buffer_gone: memory/buffer.py.
    await run_script(
        conn,
        """
        CREATE TABLE buffer_gone (id INTEGER PRIMARY KEY);
        DROP TABLE main.extraction_buffer;
        """,
    )


async def _v6_project_aliases(conn: aiosqlite.Connection) -> None:
    # A renamed project's other names ("we renamed atlas to orion"): each
    # alias points at the current name (memory/projects.py). Facts stay
    # filed under the name they were written with; recall counts them for
    # every name of their project.
    await run_script(
        conn,
        """
        CREATE TABLE project_aliases (
            owner      TEXT NOT NULL,
            alias      TEXT NOT NULL,
            project    TEXT NOT NULL,
            source     TEXT NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (owner, alias)
        ) WITHOUT ROWID;
        """,
    )


async def _v7_facts_under_current_project_name(conn: aiosqlite.Connection) -> None:
    # A rename now files the owner's facts under the new name (memory/
    # projects.py, move_facts); facts of a rename made before are moved
    # here the same way, so listings and the second look see one name.
    await conn.execute(
        "UPDATE memories SET project = (SELECT a.project FROM project_aliases a "
        "WHERE a.owner = memories.owner AND a.alias = memories.project) "
        "WHERE EXISTS (SELECT 1 FROM project_aliases a WHERE a.owner = memories.owner AND a.alias = memories.project)"
    )


async def _v8_small_talk_is_temp(conn: aiosqlite.Connection) -> None:
    # Small talk was filed as "conversation" (floor 10 %, never archived)
    # until the extraction prompt said it is "temp". The model rated it as
    # the prompt's scale has "temporary" (0.2); the gist of a discussion is
    # rated higher, and a restatement raises it. Such active Tier 2 facts
    # drawn by the model become temp, which fades and is archived (never
    # deleted). Logged as "relabel" so the operator sees what changed.
    await conn.execute(
        "INSERT INTO memory_log (at, job, owner, action, memory_id, detail) "
        "SELECT strftime('%Y-%m-%dT%H:%M:%SZ', 'now'), 'migration', owner, 'relabel', id, ? "
        f"FROM memories WHERE {_SMALL_TALK} ORDER BY id",
        ('{"from":"conversation","to":"temp"}',),
    )
    await conn.execute(f"UPDATE memories SET category = 'temp' WHERE {_SMALL_TALK}")


async def _v9_renamed_from(conn: aiosqlite.Connection) -> None:
    # The project a rename moved a fact from (memory/projects.py,
    # move_facts), so removing the alias files it there again. Facts moved
    # by a rename before this version carry none: which were moved is not
    # known, and they stay where they are.
    await conn.execute("ALTER TABLE memories ADD COLUMN renamed_from TEXT")


async def _v10_search_terms(conn: aiosqlite.Connection) -> None:
    # Words the extraction model gives a fact to be found by, in Chinese and
    # English (memory/cues.py), one a line; indexed after the fact's own
    # words, never shown as it. Existing rows have none; the FTS rows gain
    # their labels when the engine reindexes (INDEX_VERSION).
    await conn.execute("ALTER TABLE memories ADD COLUMN search_terms TEXT NOT NULL DEFAULT ''")


async def _v11_log_by_owner(conn: aiosqlite.Connection) -> None:
    # Core Memory reads a user's last refresh (memory_log action
    # 'profile_read') and the facts they said again since ('reinforce'):
    # by owner and action, not a walk of everyone's log (engine.refreshed_upto).
    await run_script(conn, "CREATE INDEX IF NOT EXISTS idx_log_owner_action ON memory_log(owner, action);")


async def _v12_global_day_logs_withdrawn(conn: aiosqlite.Connection) -> None:
    # The daily compression retold _global's events (the legacy top-level day
    # logs, the operator's record) as _global facts every user and group
    # reads, until it left them alone: those facts, and what was built on
    # them, are archived; what they replaced is current again (memory/retold.py).
    await withdraw_retold_day_logs(conn, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))


_SMALL_TALK = (
    "category = 'conversation' AND importance <= 0.2 AND tier = 2 AND status = 'active' "
    "AND source IN ('extraction', 'compression')"
)


MIGRATIONS: list[Migration] = [
    _v1_core,
    _v2_memories_by_owner_date,
    _v3_memory_source_text,
    _v4_embeddings,
    _v5_buffer_own_file,
    _v6_project_aliases,
    _v7_facts_under_current_project_name,
    _v8_small_talk_is_temp,
    _v9_renamed_from,
    _v10_search_terms,
    _v11_log_by_owner,
    _v12_global_day_logs_withdrawn,
]

BUFFER_SCHEMA = "buffer"
_BUFFER_COLUMNS = (
    "id, owner, channel, chat_id, sender_id, message_id, role, content, token_count, created_at, "
    "attempts, next_attempt_at, last_error"
)


async def _buffer_v1(conn: aiosqlite.Connection) -> None:
    # The shape of memory.db's extraction_buffer as of _v1_core (it never changed).
    await run_script(
        conn,
        """
        CREATE TABLE buffer.extraction_buffer (
            id              INTEGER PRIMARY KEY AUTOINCREMENT,
            owner           TEXT    NOT NULL,
            channel         TEXT    NOT NULL,
            chat_id         TEXT    NOT NULL DEFAULT '',
            sender_id       TEXT    NOT NULL DEFAULT '',
            message_id      TEXT    NOT NULL DEFAULT '',
            role            TEXT    NOT NULL CHECK (role IN ('user', 'assistant')),
            content         TEXT    NOT NULL,
            token_count     INTEGER NOT NULL DEFAULT 0,
            created_at      TEXT    NOT NULL,
            attempts        INTEGER NOT NULL DEFAULT 0,
            next_attempt_at TEXT,
            last_error      TEXT
        );
        CREATE INDEX buffer.idx_buffer_owner ON extraction_buffer(owner, id);
        CREATE INDEX buffer.idx_buffer_created ON extraction_buffer(created_at);
        -- A message is buffered once even if the gateway retries the write.
        CREATE UNIQUE INDEX buffer.idx_buffer_message ON extraction_buffer(owner, channel, chat_id, message_id, role)
            WHERE message_id != '';
        """,
    )


async def _buffer_v2_set_aside(conn: aiosqlite.Connection) -> None:
    # A line the memory model can never take, even alone (its reply cut at
    # max_tokens, the prompt over its context), is set aside: kept, counted,
    # erasable, exported, but never sent to extraction again
    # (memory/extraction.py). NULL: waiting as usual.
    async with conn.execute("PRAGMA buffer.table_info(extraction_buffer)") as cur:
        columns = {r[1] for r in await cur.fetchall()}
    if "set_aside_at" not in columns:
        await conn.execute("ALTER TABLE buffer.extraction_buffer ADD COLUMN set_aside_at TEXT")


async def _buffer_v3_in_group(conn: aiosqlite.Connection) -> None:
    # Whether a line was said in a group chat: learning from it then shows
    # the memory model only that group's facts of the member, and their own
    # lines as theirs (memory/extraction.py). A Feishu chat id does not say;
    # a Telegram group's is negative, so lines waiting from before are known.
    async with conn.execute("PRAGMA buffer.table_info(extraction_buffer)") as cur:
        columns = {r[1] for r in await cur.fetchall()}
    if "in_group" not in columns:
        await conn.execute("ALTER TABLE buffer.extraction_buffer ADD COLUMN in_group INTEGER NOT NULL DEFAULT 0")
    await conn.execute(
        "UPDATE buffer.extraction_buffer SET in_group = 1 WHERE channel = 'telegram' AND chat_id LIKE '-%'"
    )


async def _buffer_v4_feishu_lines_fail_closed(conn: aiosqlite.Connection) -> None:
    # v3 could tell a Telegram group's waiting lines by their id, not a
    # Feishu group's: a Feishu line waiting at the upgrade may be a group's,
    # and is learnt as one (shown only that chat's facts; memory/scope.py).
    # A private chat's line taken so loses nothing: its facts are still
    # read in the user's private chats, and no group has its chat id.
    await conn.execute("UPDATE buffer.extraction_buffer SET in_group = 1 WHERE channel = 'feishu' AND in_group = 0")


async def _buffer_v5_speaker(conn: aiosqlite.Connection) -> None:
    # A group's own copy of a line (owner ``group:<channel>:<chat>``,
    # memory/groupnotes.py) says who spoke: the member's owner id (for a
    # bot's reply, the member it answered), found by their erasure, and the
    # name the group knew them by, which the notes' extraction shows.
    # Lines from before are members' own: '' for both.
    async with conn.execute("PRAGMA buffer.table_info(extraction_buffer)") as cur:
        columns = {r[1] for r in await cur.fetchall()}
    if "speaker" not in columns:
        await conn.execute("ALTER TABLE buffer.extraction_buffer ADD COLUMN speaker TEXT NOT NULL DEFAULT ''")
    if "speaker_name" not in columns:
        await conn.execute("ALTER TABLE buffer.extraction_buffer ADD COLUMN speaker_name TEXT NOT NULL DEFAULT ''")


BUFFER_MIGRATIONS: list[Migration] = [_buffer_v1, _buffer_v2_set_aside, _buffer_v3_in_group,
                                      _buffer_v4_feishu_lines_fail_closed, _buffer_v5_speaker]
SET_ASIDE_SINCE = BUFFER_MIGRATIONS.index(_buffer_v2_set_aside) + 1
"""The buffer's schema version with ``set_aside_at`` (``myclaw doctor`` reads older files as they are)."""


async def _adopt_buffer(conn: aiosqlite.Connection) -> None:
    """Before _v5: copy memory.db's buffered lines into the buffer file,
    ids kept (facts cite them as ``buf:<id>``) and the id sequence carried
    on, so a new line never takes an id an old fact cites. Idempotent: a
    crash before _v5 commits copies again over the same rows."""
    await conn.execute(
        f"INSERT OR IGNORE INTO buffer.extraction_buffer ({_BUFFER_COLUMNS}) "
        f"SELECT {_BUFFER_COLUMNS} FROM main.extraction_buffer"
    )
    async with conn.execute("SELECT seq FROM main.sqlite_sequence WHERE name = 'extraction_buffer'") as cur:
        row = await cur.fetchone()
    if row is not None:
        await conn.execute("DELETE FROM buffer.sqlite_sequence WHERE name = 'extraction_buffer' AND seq < ?", (row[0],))
        await conn.execute(
            "INSERT INTO buffer.sqlite_sequence (name, seq) SELECT 'extraction_buffer', ? WHERE NOT EXISTS "
            "(SELECT 1 FROM buffer.sqlite_sequence WHERE name = 'extraction_buffer')",
            (row[0],),
        )


def buffer_path(path: Path | str) -> Path:
    """``memory.db`` -> ``memory.buffer.db``, beside it."""
    p = Path(path)
    if str(p) == ":memory:":
        return p
    return p.with_name(f"{p.stem}.buffer{p.suffix}")


async def open_memory_db(path: Path | str, *, monotonic: Callable[[], float] = time.monotonic) -> Database:
    """memory.db with its buffer file attached, both migrated."""
    return await Database.open(
        path,
        MIGRATIONS,
        attach=Attachment(BUFFER_SCHEMA, buffer_path(path), BUFFER_MIGRATIONS),
        before={5: _adopt_buffer},
        monotonic=monotonic,
    )
