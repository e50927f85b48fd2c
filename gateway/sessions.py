"""Tier 0: the recent messages of each chat, in ``gateway.db``.

A chat (``InboundMessage.session_key``) has one *current* session; ``/new``
ends it and starts another (the old rows stay, unused). The prompt sees the
last ``window`` messages of the current session.

Nothing leaves the window unremembered (issue 4, pre-compaction flush):
every row is written with ``buffered = 0`` and only becomes ``1`` after the
process loop handed it to ``MemoryBackend.buffer``, or ``2`` when memory must
never learn from it: a scheduled job's turn and an incognito turn are
written as ``2``, a turn that erased memory is marked so without being
handed over. An edit of a ``2`` row changes Tier 0 only
(``StoredMessage.learn``). :meth:`SessionStore.prune`
deletes old rows only when they are buffered, and :meth:`unbuffered` lets the
loop find (and buffer) rows a crash or a failed buffer call left behind
before it builds the next prompt. See ``gateway/loop.py`` for the order.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import aiosqlite

from memory.backend import Turn
from memory.clock import Clock, SystemClock, format_ts, parse_ts
from memory.batch import RowBatcher, insert_statement
from memory.db import SMALL_CACHE_KIB, Database, Migration, run_script
from memory.forgetting import repeats_forgotten
from memory.lru import LRU

__all__ = ["APOLOGISED", "MIGRATIONS", "SessionStore", "StoredMessage", "moved_message_id"]

_HISTORY = "history"  # Database.stamp name of the cached windows
# A user row's ``context`` once the message was answered with an apology
# (no reply row: an apology is not part of the conversation): its one
# answer, so the next start does not answer it again (gateway/resume.py).
APOLOGISED = "apologised"
# Tables here whose rows belong to a chat, by (channel, chat_id): they follow it to a new id.
# Not burst_comments: its rows name the old chat's message ids, which an
# edit of those messages names with the old chat's id still; under the new
# id they would meet the supergroup's own (it numbers its messages from 1).
_CHAT_TABLES = ("outbox", "sent_replies", "draft_messages")


def moved_message_id(old_chat: str, message_id: str) -> str:
    """What a row of a chat moved from ``old_chat`` calls its platform
    message ``message_id``: the old chat's id in front, so it is never the
    id of a message of the new chat."""
    return f"{old_chat}/{message_id}"


async def _m001_sessions(conn: aiosqlite.Connection) -> None:
    await run_script(
        conn,
        """
        CREATE TABLE sessions (
            id         INTEGER PRIMARY KEY AUTOINCREMENT,
            key        TEXT NOT NULL,
            channel    TEXT NOT NULL,
            chat_id    TEXT NOT NULL,
            started_at TEXT NOT NULL,
            ended_at   TEXT
        );
        -- At most one current session per chat.
        CREATE UNIQUE INDEX idx_sessions_current ON sessions(key) WHERE ended_at IS NULL;

        CREATE TABLE session_messages (
            id         INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id INTEGER NOT NULL REFERENCES sessions(id),
            role       TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
            content    TEXT NOT NULL,
            owner      TEXT NOT NULL,
            sender_id  TEXT NOT NULL DEFAULT '',
            message_id TEXT NOT NULL,
            created_at TEXT NOT NULL,
            buffered   INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX idx_session_messages ON session_messages(session_id, id);
        CREATE INDEX idx_session_unbuffered ON session_messages(session_id, id) WHERE buffered = 0;
        """,
    )


async def _m002_message_ids(conn: aiosqlite.Connection) -> None:
    # An edit or a recall names a message by its platform id, in its chat
    # (gateway/revisions.py): found by index, not by scanning every chat.
    await run_script(
        conn,
        "CREATE INDEX IF NOT EXISTS idx_session_messages_mid ON session_messages(message_id, session_id);",
    )


async def _m003_outbox(conn: aiosqlite.Connection) -> None:
    # Replies that could not be delivered yet (gateway/outbox.py). The
    # OutboundMessage fields are columns where SQL needs them (a chat's
    # rows in order, erasing a user's) and JSON otherwise: ``metadata``,
    # and ``extra`` for any field added to OutboundMessage later. ``owner``:
    # whose message the reply answers, for `myclaw memory forget --user`.
    await run_script(
        conn,
        """
        CREATE TABLE outbox (
            id              INTEGER PRIMARY KEY AUTOINCREMENT,
            channel         TEXT NOT NULL,
            chat_id         TEXT NOT NULL,
            text            TEXT NOT NULL,
            reply_to        TEXT NOT NULL DEFAULT '',
            metadata        TEXT NOT NULL DEFAULT '{}',
            extra           TEXT NOT NULL DEFAULT '{}',
            owner           TEXT NOT NULL DEFAULT '',
            created_at      TEXT NOT NULL,
            attempts        INTEGER NOT NULL DEFAULT 0,
            next_attempt_at TEXT NOT NULL,
            last_error      TEXT NOT NULL DEFAULT ''
        );
        CREATE INDEX idx_outbox_chat ON outbox(channel, chat_id, id);
        CREATE INDEX idx_outbox_owner ON outbox(owner);
        """,
    )


async def _m004_user_timezones(conn: aiosqlite.Connection) -> None:
    # Each user's own zone (gateway/timezones.py), set with /timezone.
    await run_script(
        conn,
        """
        CREATE TABLE user_timezones (
            owner      TEXT PRIMARY KEY,
            timezone   TEXT NOT NULL,
            updated_at TEXT NOT NULL
        ) WITHOUT ROWID;
        """,
    )


async def _m005_outbox_send_keys(conn: aiosqlite.Connection) -> None:
    # ``OutboundMessage.send_key`` (rides in ``extra``): the same on every
    # attempt at a reply, so Feishu's uuid de-duplicates a part resent after
    # a cut. A row kept before it existed would get a new key at each read;
    # it gets one for good here.
    await conn.execute(
        "UPDATE outbox SET extra = json_set(extra, '$.send_key', lower(hex(randomblob(16)))) "
        "WHERE json_extract(extra, '$.send_key') IS NULL"
    )


async def _m006_sent_replies(conn: aiosqlite.Connection) -> None:
    # Which of the bot's messages answer which inbound message, per channel
    # (gateway/sentreplies.py; Feishu's ReplyLog writes behind it), so a
    # recall after a restart still withdraws the reply. Platform ids and a
    # time only, no words and no owner; rows go after the recall window.
    await run_script(
        conn,
        """
        CREATE TABLE sent_replies (
            channel    TEXT NOT NULL,
            chat_id    TEXT NOT NULL,
            answers    TEXT NOT NULL,
            message_id TEXT NOT NULL,
            sent_at    REAL NOT NULL
        );
        CREATE INDEX idx_sent_replies_answers ON sent_replies(channel, answers, chat_id);
        CREATE INDEX idx_sent_replies_age ON sent_replies(sent_at);
        """,
    )


async def _m007_seen_ids(conn: aiosqlite.Connection) -> None:
    # Ids a channel has seen, by kind (gateway/seenids.py; Feishu's event
    # ids and recalled messages, written behind by its RecentIds), so a
    # redelivery or a recall is still known after a restart. Platform ids
    # and a time only; rows go after their TTL (hours).
    await run_script(
        conn,
        """
        CREATE TABLE seen_ids (
            channel TEXT NOT NULL,
            kind    TEXT NOT NULL,
            id      TEXT NOT NULL,
            seen_at REAL NOT NULL,
            PRIMARY KEY (channel, kind, id)
        ) WITHOUT ROWID;
        CREATE INDEX idx_seen_ids_age ON seen_ids(channel, kind, seen_at);
        """,
    )


async def _m008_user_incognito(conn: aiosqlite.Connection) -> None:
    # Users who turned incognito on (gateway/incognito.py, /incognito): their
    # turns are kept in Tier 0 as never to be learnt, until they turn it off.
    await run_script(
        conn,
        """
        CREATE TABLE user_incognito (
            owner TEXT PRIMARY KEY,
            since TEXT NOT NULL
        ) WITHOUT ROWID;
        """,
    )


async def _m009_draft_messages(conn: aiosqlite.Connection) -> None:
    # The message showing a reply's drafts, per channel and reply send_key
    # (gateway/draftmessages.py; Feishu's drafts), from its first draft until
    # the reply is out, so a reply sent after a restart becomes it and one
    # whose reply never comes is withdrawn at the next start. Platform ids,
    # the send key and a time only; rows go after a day at most.
    await run_script(
        conn,
        """
        CREATE TABLE draft_messages (
            channel    TEXT NOT NULL,
            send_key   TEXT NOT NULL,
            chat_id    TEXT NOT NULL,
            message_id TEXT NOT NULL,
            created_at REAL NOT NULL,
            finishing  INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (channel, send_key)
        ) WITHOUT ROWID;
        CREATE INDEX idx_draft_messages_age ON draft_messages(channel, created_at);
        """,
    )


async def _m010_burst_comments(conn: aiosqlite.Connection) -> None:
    # Which comment went into which burst of forwards (gateway/burstcomments.py,
    # the Telegram channel's), so its edit after a restart still finds their
    # message. Platform ids, lengths and a time only; rows go after the
    # edit window (48 h).
    await run_script(
        conn,
        """
        CREATE TABLE burst_comments (
            channel    TEXT NOT NULL,
            chat_id    TEXT NOT NULL,
            comment_id TEXT NOT NULL,
            burst_id   TEXT NOT NULL,
            comments   TEXT NOT NULL,
            kept_at    REAL NOT NULL,
            PRIMARY KEY (channel, chat_id, comment_id)
        );
        CREATE INDEX idx_burst_comments_age ON burst_comments(channel, kept_at);
        """,
    )


async def _m011_recent_files(conn: aiosqlite.Connection) -> None:
    # A chat's recent files for file_read (gateway/recent_files.py), so a
    # restart does not forget them: the text zlib-compressed, who sent it
    # (for /forget all) and when (rows go after a day). Ids are given by
    # the store, not AUTOINCREMENT: it plans its bounds before it writes.
    await run_script(
        conn,
        """
        CREATE TABLE recent_files (
            id       INTEGER PRIMARY KEY,
            chat     TEXT NOT NULL,
            owner    TEXT NOT NULL,
            name     TEXT NOT NULL,
            pages    INTEGER,
            chars    INTEGER NOT NULL,
            received REAL NOT NULL,
            text     BLOB NOT NULL
        );
        CREATE INDEX idx_recent_files_chat ON recent_files(chat);
        CREATE INDEX idx_recent_files_owner ON recent_files(owner);
        CREATE INDEX idx_recent_files_age ON recent_files(received);
        """,
    )


async def _m012_message_context(conn: aiosqlite.Connection) -> None:
    # How a user's message was to be answered, as the loop got it (group or
    # not, addressed or not, its routing, a forward's authors and dates, what
    # a private chat's message replied to: gateway/resume.py's TurnContext,
    # JSON), so a turn a crash cut can be answered the same way at the next
    # start. "" for rows written before, a job's and the bot's own;
    # APOLOGISED once an apology answered it.
    columns = {r[1] for r in await conn.execute_fetchall("PRAGMA table_info(session_messages)")}
    if "context" not in columns:
        await conn.execute("ALTER TABLE session_messages ADD COLUMN context TEXT NOT NULL DEFAULT ''")


async def _m013_sender_names(conn: aiosqlite.Connection) -> None:
    # Who said a group chat's line, by the name the platform gave them then:
    # the prompt labels each member's turns with it (gateway/prompt.py), so
    # the words themselves stay the user's own (an edit or recall still
    # finds them). Erased with the row.
    cols = {str(r[1]) for r in await conn.execute_fetchall("PRAGMA table_info(session_messages)")}
    if "sender_name" not in cols:
        await run_script(conn, "ALTER TABLE session_messages ADD COLUMN sender_name TEXT NOT NULL DEFAULT '';")


async def _m014_admin_sessions(conn: aiosqlite.Connection) -> None:
    # The memory page's sign-ins (gateway/web/_store.py), so a restart does
    # not sign everyone out: a keyed hash of each session's id, never the
    # cookie; and the wrong-token lockout, so a restart does not reopen it.
    await run_script(
        conn,
        """
        CREATE TABLE IF NOT EXISTS admin_sessions (
            id_hash    TEXT PRIMARY KEY,
            expires_at INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS admin_failures (
            who TEXT NOT NULL,
            at  REAL NOT NULL
        );
        CREATE INDEX IF NOT EXISTS idx_admin_failures ON admin_failures(who, at);
        CREATE INDEX IF NOT EXISTS idx_admin_failures_at ON admin_failures(at);
        """,
    )


async def _m015_inbox(conn: aiosqlite.Connection) -> None:
    # Messages taken from a platform (Telegram's offset will pass them,
    # Feishu is answered) whose turn has not ended (gateway/inbox.py): what
    # a crash would otherwise lose, answered at the next start. A row lives
    # from the message's arrival to its turn's end.
    await run_script(
        conn,
        """
        CREATE TABLE IF NOT EXISTS inbox (
            id          INTEGER PRIMARY KEY AUTOINCREMENT,
            channel     TEXT NOT NULL,
            chat_id     TEXT NOT NULL,
            message_id  TEXT NOT NULL,
            received_at TEXT NOT NULL,
            payload     TEXT NOT NULL,
            UNIQUE (channel, chat_id, message_id)
        );
        """,
    )


async def _m016_chat_titles(conn: aiosqlite.Connection) -> None:
    # Group chats' titles as last seen (gateway/chattitles.py): /share, the
    # memory page and exports name a group by it, not channel:chat_id.
    await run_script(
        conn,
        """
        CREATE TABLE IF NOT EXISTS chat_titles (
            channel TEXT NOT NULL,
            chat_id TEXT NOT NULL,
            title   TEXT NOT NULL,
            seen_at TEXT NOT NULL,
            PRIMARY KEY (channel, chat_id)
        ) WITHOUT ROWID;
        """,
    )


async def _m017_outbox_sending(conn: aiosqlite.Connection) -> None:
    # A reply on its way (gateway/delivery.py): its row is written before
    # its Tier 0 row and the send, and names the run whose sender has it
    # (''  for a reply waiting). A row naming another run is one a kill
    # cut mid-send: the next start sends it from the outbox.
    await conn.execute("ALTER TABLE outbox ADD COLUMN sending TEXT NOT NULL DEFAULT ''")


async def _m018_revisions(conn: aiosqlite.Connection) -> None:
    # Edits and recalls taken from a platform (Feishu answered, Telegram's
    # offset past them) and not yet applied (gateway/inbox.py): a stop or a
    # crash would otherwise lose them, the recalled words staying in memory.
    # One row per message and kind; a later edit's words replace an earlier's.
    await run_script(
        conn,
        """
        CREATE TABLE IF NOT EXISTS revisions (
            id          INTEGER PRIMARY KEY AUTOINCREMENT,
            channel     TEXT NOT NULL,
            chat_id     TEXT NOT NULL,
            message_id  TEXT NOT NULL,
            kind        TEXT NOT NULL,
            received_at TEXT NOT NULL,
            payload     TEXT NOT NULL,
            UNIQUE (channel, chat_id, message_id, kind)
        );
        """,
    )


async def _m019_refused_permissions(conn: aiosqlite.Connection) -> None:
    # A permission a channel's platform refused the app (Feishu's
    # im:chat:readonly, gateway/chattitles.py), while it is: a row is
    # written at the refusal and deleted once an ask works, so `myclaw
    # doctor --offline` and the next run's /healthz know it too.
    await run_script(
        conn,
        """
        CREATE TABLE IF NOT EXISTS refused_permissions (
            channel    TEXT PRIMARY KEY,
            scope      TEXT NOT NULL,
            refused_at TEXT NOT NULL
        ) WITHOUT ROWID;
        """,
    )


async def _m020_job_replies(conn: aiosqlite.Connection) -> None:
    # The slot of a scheduled job whose reply is written (gateway/outbox.py,
    # ``Outbox.add``: in the same transaction as the reply's outbox row), so
    # a kill before cron.db records the run does not have the next start's
    # catch-up run the job again beside the outbox's send. One row a job:
    # cleared once cron.db has the run (``Outbox.job_recorded``).
    await run_script(
        conn,
        """
        CREATE TABLE IF NOT EXISTS job_replies (
            job        TEXT PRIMARY KEY,
            slot       TEXT NOT NULL,
            written_at TEXT NOT NULL
        ) WITHOUT ROWID;
        """,
    )


async def _m021_job_reply_fallback(conn: aiosqlite.Connection) -> None:
    # What a job's written reply was: 1 for its fallback (the model could
    # not be reached, the job's own words went: gateway/cron.py
    # ``fallback_text``), so a slot a kill left unrecorded is recorded as
    # such by the next start's catch-up, not as a run that went fine.
    await conn.execute("ALTER TABLE job_replies ADD COLUMN fallback INTEGER NOT NULL DEFAULT 0")


async def _m022_revision_attempts(conn: aiosqlite.Connection) -> None:
    # How often applying a kept edit, recall or member's leaving failed
    # (gateway/inbox.py): a failed one stays for the next start, and one
    # failing every time (a poison row) is dropped after REVISION_ATTEMPTS.
    cols = {str(r[1]) for r in await conn.execute_fetchall("PRAGMA table_info(revisions)")}
    if "attempts" not in cols:
        await conn.execute("ALTER TABLE revisions ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0")


async def _m023_erasure_requests(conn: aiosqlite.Connection) -> None:
    # `myclaw memory forget --user` asking a running gateway to erase a user
    # (gateway/erasure_requests.py): it reaches what that process holds of
    # them (queued messages, cached settings), which the files alone do not.
    # `whom`, not `owner`: a request, gone once answered, not the user's data
    # (neither erased nor moved by merge-identities as theirs).
    await run_script(
        conn,
        """
        CREATE TABLE IF NOT EXISTS erasure_requests (
            id       INTEGER PRIMARY KEY,
            whom     TEXT NOT NULL,
            asked_at TEXT NOT NULL,
            taken_at TEXT,
            done_at  TEXT,
            counts   TEXT
        );
        """,
    )


async def _m024_recent_file_messages(conn: aiosqlite.Connection) -> None:
    # The platform message a recent file came with (gateway/recent_files.py),
    # so a recall removes its files by that id even once the message's Tier 0
    # row, which names them too, is pruned. '' on the rows from before: a
    # recall finds those by the row alone, as it did.
    cols = {str(r[1]) for r in await conn.execute_fetchall("PRAGMA table_info(recent_files)")}
    if "message_id" not in cols:
        await conn.execute("ALTER TABLE recent_files ADD COLUMN message_id TEXT NOT NULL DEFAULT ''")


MIGRATIONS: list[Migration] = [
    _m001_sessions,
    _m002_message_ids,
    _m003_outbox,
    _m004_user_timezones,
    _m005_outbox_send_keys,
    _m006_sent_replies,
    _m007_seen_ids,
    _m008_user_incognito,
    _m009_draft_messages,
    _m010_burst_comments,
    _m011_recent_files,
    _m012_message_context,
    _m013_sender_names,
    _m014_admin_sessions,
    _m015_inbox,
    _m016_chat_titles,
    _m017_outbox_sending,
    _m018_revisions,
    _m019_refused_permissions,
    _m020_job_replies,
    _m021_job_reply_fallback,
    _m022_revision_attempts,
    _m023_erasure_requests,
    _m024_recent_file_messages,
]


# Read-only by convention: the cache hands its rows out. Not frozen: a frozen
# dataclass took 1.5 us a row to build against 0.4, read 20 a message when a
# busy gateway's window is not cached. Slots: up to CACHE_ROWS stay cached.
@dataclass(slots=True)
class StoredMessage:
    id: int
    session_id: int
    channel: str
    chat_id: str
    role: str  # "user" | "assistant"
    content: str
    owner: str  # memory owner the message belongs to
    sender_id: str
    message_id: str
    created_at: str
    buffered: bool
    learn: bool = True  # False: a turn memory must never learn from (buffered = 2)
    context: str = ""  # a user message's TurnContext (gateway/resume.py), JSON; "" when not kept; or APOLOGISED
    sender_name: str = ""  # the sender's display name when it was said; "" when unknown

    def turn(self, *, group: bool = False) -> Turn:
        """For memory; ``group``: the chat is a group (Tier 0 does not keep
        that with every row: gateway/loop.py knows it)."""
        return Turn(
            owner=self.owner,
            channel=self.channel,
            chat_id=self.chat_id,
            role=self.role,
            content=self.content,
            sender_id=self.sender_id,
            message_id=self.message_id,
            at=parse_ts(self.created_at),
            group=group,
            speaker_name=self.sender_name if group else "",
        )


_SELECT = """SELECT m.id, m.session_id, s.channel, s.chat_id, m.role, m.content, m.owner, m.sender_id, m.message_id,
                    m.created_at, m.buffered, m.context, m.sender_name
             FROM session_messages m JOIN sessions s ON s.id = m.session_id"""
_INSERT_HEAD = (
    "INSERT INTO session_messages (session_id, role, content, owner, sender_id, message_id, created_at, buffered, "
    "context, sender_name)"
)
_INSERT_MESSAGE = f"{_INSERT_HEAD} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"


CACHE_ROWS = 2048
# Chats whose current session id and prune count are kept in memory (a
# gateway meets thousands over months; a chat forgotten costs one indexed read).
CHATS_KEPT = 4096
"""Rows of Tier 0 the store keeps in memory (least recently used chats go
first): every chat's whole window in a personal or team gateway (~100
chats), about 1 MB. A busier gateway reads the rest from SQLite: 65 us
alone, ~0.2 ms under load (every commit to gateway.db drops the reader's
page cache); ``gateway.historyCacheRows`` trades memory for it. A cache
sized by chats (1,024 x 20 rows) grew RSS by ~5 MB over the gateway
bench's run (docs/BENCHMARKS.md, RSS)."""


def _rows(rows: Iterable[Sequence[Any]]) -> list[StoredMessage]:
    """Rows of ``_SELECT`` (by position: a lookup by name cost 2 us a row),
    the strings every row of a chat repeats held once."""
    shared: dict[str, str] = {}
    one = shared.setdefault
    return [
        StoredMessage(
            r[0], r[1], one(r[2], r[2]), one(r[3], r[3]), one(r[4], r[4]), r[5],
            one(r[6], r[6]), one(r[7], r[7]), r[8], r[9], bool(r[10]), r[10] != 2, r[11], one(r[12], r[12]),
        )
        for r in rows
    ]


class SessionStore:
    def __init__(
        self,
        db: Database,
        clock: Clock | None = None,
        *,
        window: int = 20,
        cache_rows: int = CACHE_ROWS,
        chats_kept: int = CHATS_KEPT,
    ) -> None:
        self.db = db
        self.clock = clock or SystemClock()
        self.window_size = window
        # key -> (stamp, the last `window` rows of the current session): a
        # write-through cache of what every message reads, so the prompt
        # costs no round trip to SQLite. At most `cache_rows` rows (least
        # recently used chats go); dropped when this process erases history
        # (forget_owner) and when another process writes gateway.db (`myclaw
        # memory forget --user`), noticed within a second (Database.stamp).
        self.cache_rows = cache_rows
        self._windows: OrderedDict[str, tuple[tuple[int, int], list[StoredMessage]]] = OrderedDict()
        self._cached_rows = 0
        self._appends = 0  # a window read from SQLite is cached only if no append ran meanwhile
        # key -> current session id; one process owns gateway.db. The most
        # recently used `chats_kept` chats: a chat forgotten is read again.
        self._current: LRU[str, int] = LRU(chats_kept)
        # key -> rows marked buffered since the chat was last pruned. Pruning
        # every `window` rows instead of every turn halves the writes per
        # message; gateway.db holds at most ~2 windows per chat (~3 for one
        # whose count was forgotten: capped like _current, it starts again at 0).
        self._unpruned: LRU[str, int] = LRU(chats_kept)
        # Group commit (memory/batch.py): concurrent chats' appends and
        # marks are one statement per round trip to the writer thread.
        self._inserts = RowBatcher(db, insert_statement(_INSERT_HEAD, 10, returning="id"), 10, returning=True)
        self._marks = RowBatcher(
            db, lambda n: f"UPDATE session_messages SET buffered = 1 WHERE buffered = 0 AND id IN ({','.join('?' * n)})", 1
        )
        self._unlearnt = RowBatcher(
            db, lambda n: f"UPDATE session_messages SET buffered = 2 WHERE id IN ({','.join('?' * n)})", 1
        )

    def footprint(self) -> dict[str, Collection[object]]:
        """Its per-chat caches, by name, read-only: for measuring (scripts/bench_soak.py), not to change."""
        return {"windows": self._windows, "current": self._current.view(), "unpruned": self._unpruned.view()}

    async def flush(self) -> None:
        """Wait until every append and mark queued so far is written."""
        await self._inserts.drain()
        await self._marks.drain()
        await self._unlearnt.drain()

    @classmethod
    async def open(
        cls,
        path: Path | str,
        clock: Clock | None = None,
        *,
        window: int = 20,
        cache_rows: int = CACHE_ROWS,
        chats_kept: int = CHATS_KEPT,
        monotonic: Callable[[], float] = time.monotonic,
        busy_ms: int = 5000,
    ) -> SessionStore:
        """``monotonic``: how often to look for another process's commits
        (:meth:`Database.stamp`); tests move it by hand. ``busy_ms``: how
        long a write waits for another process's write lock before it fails."""
        db = await Database.open(path, MIGRATIONS, busy_ms=busy_ms, inline_cache_kib=SMALL_CACHE_KIB,
                                 monotonic=monotonic)
        return cls(db, clock, window=window, cache_rows=cache_rows, chats_kept=chats_kept)

    async def close(self) -> None:
        await self.flush()
        await self.db.close()

    async def __aenter__(self) -> SessionStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def current(self, key: str) -> int | None:
        """Id of the chat's current session, None before its first message."""
        sid = self._current.get(key)
        if sid is None:
            # Short indexed reads run on the loop thread (Database.reader): a
            # hop to the reader thread cost a chat's first message ~3 ms.
            rows = await self.db.reader.execute_fetchall(
                "SELECT id FROM sessions WHERE key = ? AND ended_at IS NULL", (key,)
            )
            row = next(iter(rows), None)
            if row is None:
                return None
            sid = self._current[key] = int(row["id"])
        return sid

    async def append(
        self,
        key: str,
        *,
        channel: str,
        chat_id: str,
        role: str,
        content: str,
        owner: str,
        sender_id: str = "",
        message_id: str = "",
        buffered: bool = False,
        context: str = "",
        sender_name: str = "",
    ) -> StoredMessage:
        """Add a message (``buffered = 0``) to the chat's current session.

        A message without a platform id gets a random one, so buffering it
        again after a crash is recognised as the same message. ``buffered``
        writes a row that is not for memory (a scheduled job's turn, an
        incognito one) as never to be learnt (``buffered = 2``), so no crash
        leaves it for :meth:`unbuffered` and no edit hands it over later.
        ``context``: how a user's message was to be answered (gateway/resume.py)."""
        message_id = message_id or f"g-{secrets.token_hex(8)}"
        now = format_ts(self.clock.now())
        values = (role, content, owner, sender_id, message_id, now, 2 if buffered else 0, context, sender_name)
        sid = await self.current(key)
        if sid is not None:
            # The common case: one row of a multi-row INSERT shared with the
            # other chats writing now (no BEGIN/COMMIT holding the lock).
            (mid,) = await self._inserts.write([(sid, *values)])
        else:
            # A chat's first message: its session, then the message, each one
            # statement (no transaction holding the writer lock across round
            # trips: 1,000 new chats at once queued every write behind them).
            # A crash in between leaves an empty current session, used next time.
            sid, created = await self.db.write(
                "INSERT OR IGNORE INTO sessions (key, channel, chat_id, started_at) VALUES (?, ?, ?, ?)",
                (key, channel, chat_id, now),
            )
            if not created:  # the unique index: a current session appeared meanwhile
                self._current.pop(key, None)
                sid = await self.current(key) or 0
            self._current[key] = sid
            mid, _ = await self.db.write(_INSERT_MESSAGE, (sid, *values))
        self._appends += 1
        row = StoredMessage(
            mid, sid, channel, chat_id, role, content, owner, sender_id, message_id, now, buffered, not buffered,
            context, sender_name,
        )
        cached = self._windows.get(key)
        if cached is not None:
            rows = cached[1]
            if rows and rows[-1].session_id != sid:  # a session this cache did not see
                self._uncache(key)
            else:
                rows.append(row)
                dropped = max(0, len(rows) - self.window_size)
                del rows[:dropped]
                self._cached_rows += 1 - dropped
                self._trim_cache()
        return row

    def _uncache(self, key: str) -> None:
        cached = self._windows.pop(key, None)
        if cached is not None:
            self._cached_rows -= len(cached[1])

    def _trim_cache(self) -> None:
        while self._cached_rows > self.cache_rows and self._windows:
            _, (_, rows) = self._windows.popitem(last=False)
            self._cached_rows -= len(rows)

    async def window(self, key: str, limit: int | None = None) -> list[StoredMessage]:
        """The last ``limit`` (default: the window size) messages of the
        current session, oldest first."""
        limit = limit or self.window_size
        stamp = await self.db.stamp(_HISTORY)
        cached = self._windows.get(key)
        if cached is not None and limit <= self.window_size:
            if cached[0] == stamp:
                self._windows.move_to_end(key)
                return cached[1][-limit:]
            self._uncache(key)
        appends = self._appends
        sid = await self.current(key)
        if sid is None:
            return []
        rows = await self.db.reader.execute_fetchall(
            f"{_SELECT} WHERE m.session_id = ? ORDER BY m.id DESC LIMIT ?", (sid, max(limit, self.window_size))
        )
        window = _rows(reversed(list(rows)))
        unchanged = appends == self._appends and self._current.get(key) == sid
        if self.cache_rows > 0 and unchanged and await self.db.stamp(_HISTORY) == stamp:
            self._uncache(key)
            kept = window[-self.window_size :]
            self._windows[key] = (stamp, kept)
            self._cached_rows += len(kept)
            self._trim_cache()
        return window[-limit:]

    async def unbuffered(self, key: str) -> list[StoredMessage]:
        """Messages of this chat (any session) not yet handed to memory."""
        await self.flush()  # rows still queued are not in SQLite yet
        rows = await self.db.reader.execute_fetchall(  # loop thread: short and indexed
            f"{_SELECT} WHERE s.key = ? AND m.buffered = 0 ORDER BY m.id", (key,)
        )
        return _rows(rows)

    async def unanswered_last(self, since: str) -> list[StoredMessage]:
        """The user rows written at ``since`` or later with no reply after
        them in their chat's current session (the chat's last rows), oldest
        first: the turns a stop may have cut (gateway/resume.py). A chat's
        turns run one after the other, so only its last row can be one,
        save the messages a stop found still waiting their turn, written
        after it (ProcessLoop.close); an apology's row is among them, so marked."""
        await self.flush()
        rows = await self.db.fetchall(
            f"""{_SELECT} WHERE s.ended_at IS NULL AND m.role = 'user' AND m.created_at >= ?
                   AND NOT EXISTS (SELECT 1 FROM session_messages a
                                    WHERE a.session_id = s.id AND a.id > m.id AND a.role = 'assistant')
                 ORDER BY m.id""",
            (since,),
        )
        return _rows(rows)

    async def chats_of(self, owners: Sequence[str], channel: str) -> list[tuple[str, str]]:
        """The chats of ``channel`` whose history holds a message of one of
        ``owners`` (a person and their handles), newest first, each with
        the time of its newest such message: where a job for them could
        answer (``myclaw cron add`` without ``--chat-id``). The history
        keeps only recent chats."""
        if not owners:
            return []
        await self.flush()
        marks = ",".join("?" * len(owners))
        rows = await self.db.fetchall(
            f"""SELECT s.chat_id, MAX(m.created_at) AS last
                  FROM session_messages m JOIN sessions s ON s.id = m.session_id
                 WHERE s.channel = ? AND m.role = 'user' AND m.owner IN ({marks})
                 GROUP BY s.chat_id ORDER BY last DESC, s.chat_id""",
            (channel, *owners),
        )
        return [(str(c), str(t)) for c, t in rows]

    async def chat_kind(self, channel: str, chat_id: str, owner: str) -> Literal["group", "theirs", "another's", "unknown"]:
        """What the stored user rows of a chat say it is (gateway/privatechat.py):
        a group (any row came in one), ``owner``'s private chat, another
        user's, or unknown (no row with its context kept)."""
        await self.flush()
        rows = await self.db.fetchall(
            """SELECT DISTINCT json_extract(m.context, '$.g'), m.owner
                 FROM session_messages m JOIN sessions s ON s.id = m.session_id
                WHERE s.channel = ? AND s.chat_id = ? AND m.role = 'user' AND json_valid(m.context)""",
            (channel, chat_id),
        )
        if any(g for g, _ in rows):
            return "group"
        owners = {o for _, o in rows}
        return "theirs" if owner in owners else "another's" if owners else "unknown"

    async def mark_buffered(self, ids: Sequence[int], *, prune_key: str | None = None, learn: bool = True) -> None:
        """Record that memory has these messages (without ``learn``: that
        memory must never have them); then prune ``prune_key``'s chat in the
        same transaction (once a window's worth of rows has been marked
        since the last prune)."""
        if not ids:
            return
        n = self._unpruned.get(prune_key, 0) + len(ids) if prune_key is not None else 0
        # Single statements, no transaction: pruning deletes only rows
        # marked buffered, so a crash between the two just prunes later.
        marks = self._marks if learn else self._unlearnt
        for start in range(0, len(ids), marks.max_rows):
            await marks.write([(i,) for i in ids[start : start + marks.max_rows]])
        if prune_key is not None and n >= self.window_size:
            await self.prune(prune_key)
            n = 0
        if prune_key is not None:
            self._unpruned[prune_key] = n
            cached = self._windows.get(prune_key)
            if cached is not None:  # keep the cached rows' flags true
                marked = set(ids)
                cached[1][:] = [
                    replace(r, buffered=True, learn=r.learn and learn) if r.id in marked else r for r in cached[1]
                ]

    async def prune(self, key: str) -> int:
        # Only rows memory already has may go; an unbuffered row stays, however
        # old, until the loop buffers it. One statement (atomic on its own).
        sid = await self.current(key)
        if sid is None:
            return 0
        _, deleted = await self.db.write(
            """DELETE FROM session_messages
               WHERE session_id = ? AND buffered != 0 AND id < COALESCE(
                   (SELECT id FROM session_messages WHERE session_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?), 0)""",
            (sid, sid, self.window_size - 1),
        )
        return deleted

    async def forget_owner(self, owner: str) -> int:
        """Erase every Tier 0 message that belongs to ``owner`` (their words
        and the replies to them), in every chat."""
        await self.flush()  # an append still queued would land after the DELETE
        async with self.db.transaction() as conn:
            self.db.bump(_HISTORY)  # every cached window may hold their words
            cur = await conn.execute("DELETE FROM session_messages WHERE owner = ?", (owner,))
        return cur.rowcount

    async def owners(self) -> list[str]:
        """Whose Tier 0 messages are kept (the whole store's export names them)."""
        rows = await self.db.fetchall("SELECT DISTINCT owner FROM session_messages WHERE owner != '' ORDER BY owner")
        return [str(r[0]) for r in rows]

    async def owned(self, owner: str) -> int:
        """How many Tier 0 messages belong to ``owner``."""
        row = await self.db.fetchone("SELECT COUNT(*) FROM session_messages WHERE owner = ?", (owner,))
        return int(row[0]) if row else 0

    async def move_owner(self, old: str, new: str) -> int:
        """Hand ``old``'s Tier 0 messages to ``new`` (``myclaw memory
        merge-identities``), in one transaction; returns how many. Their
        owner is who a row is buffered for: one still unbuffered would
        otherwise be learnt under the handle it was written as."""
        await self.flush()  # an append still queued would land after the UPDATE
        async with self.db.transaction() as conn:
            self.db.bump(_HISTORY)  # cached windows hold the rows, owner included
            cur = await conn.execute("UPDATE session_messages SET owner = ? WHERE owner = ?", (new, old))
        return cur.rowcount

    async def erase_matching(self, owner: str, texts: Sequence[str]) -> int:
        """Erase ``owner``'s Tier 0 messages that an erased memory was drawn
        from or that repeat it (``memory_forget``), so the next prompt's
        history no longer shows them; returns how many went."""
        if not texts:
            return 0
        await self.flush()  # an append still queued would land after the DELETE
        # Found on the reader, erased on the writer: the scan of every chat's
        # rows (39 ms at 10k chats) held the writer, so every chat's Tier 0
        # append waited for it. Only the DELETE of the few rows found does.
        rows = await self.db.fetchall("SELECT id, content FROM session_messages WHERE owner = ?", (owner,))
        drop = [(r[0], owner) for r in rows if repeats_forgotten(r[1], texts)]
        if drop:
            async with self.db.transaction() as conn:
                self.db.bump(_HISTORY)
                await conn.executemany("DELETE FROM session_messages WHERE id = ? AND owner = ?", drop)
        return len(drop)

    async def find(self, key: str, message_id: str, *, role: str = "user") -> StoredMessage | None:
        """The chat's stored ``role`` row of platform message ``message_id``,
        in any session of the chat (``/new`` keeps the old rows); None when
        it was never stored (a group message not addressed to the bot) or
        has been pruned. An assistant row carries the id of the message it
        answers."""
        if not message_id:
            return None
        await self.flush()  # a row still queued is not in SQLite yet
        rows = await self.db.reader.execute_fetchall(
            f"{_SELECT} WHERE m.message_id = ? AND s.key = ? AND m.role = ? ORDER BY m.id DESC LIMIT 1",
            (message_id, key, role),
        )
        found = _rows(list(rows))
        return found[0] if found else None

    async def owner_of(self, key: str, message_id: str = "") -> str:
        """Whose message a reply in chat ``key`` answers: the owner of the
        user row ``message_id`` (a group reply names it), else of the chat's
        newest user row (a private chat has one owner); "" when the chat
        has none (a scheduled job in a fresh chat, a note on a photo)."""
        await self.flush()  # a row still queued is not in SQLite yet
        head = (
            "SELECT m.owner FROM session_messages m JOIN sessions s ON s.id = m.session_id "
            "WHERE s.key = ? AND m.role = 'user'"
        )
        rows: list[Any] = []
        if message_id:
            rows = list(await self.db.reader.execute_fetchall(f"{head} AND m.message_id = ? LIMIT 1", (key, message_id)))
        if not rows:
            rows = list(await self.db.reader.execute_fetchall(f"{head} ORDER BY m.id DESC LIMIT 1", (key,)))
        return str(rows[0][0]) if rows else ""

    async def revise(self, row_id: int, content: str) -> None:
        """Give a stored row new words (the user edited their message); the
        next prompt's window shows them."""
        await self.flush()
        async with self.db.transaction() as conn:
            self.db.bump(_HISTORY)  # a cached window may hold the old words
            await conn.execute("UPDATE session_messages SET content = ? WHERE id = ?", (content, row_id))

    async def mark_apologised(self, key: str, message_id: str) -> int:
        """Record that the user's message ``message_id`` in the chat's
        current session was answered with an apology, or with a reply whose
        own row could not be written (its row's context becomes
        :data:`APOLOGISED`): the next start leaves it alone. How
        many rows; 0 when it was never stored."""
        if not message_id:
            return 0
        await self.flush()  # its row may still be queued
        sid = await self.current(key)
        if sid is None:
            return 0
        _, n = await self.db.write(
            "UPDATE session_messages SET context = ? WHERE session_id = ? AND role = 'user' AND message_id = ?",
            (APOLOGISED, sid, message_id),
        )
        cached = self._windows.get(key)
        if cached is not None:  # keep the cached rows true, as mark_buffered does
            cached[1][:] = [replace(r, context=APOLOGISED) if r.role == "user" and r.message_id == message_id else r
                            for r in cached[1]]
        return n

    async def erase_message(self, key: str, message_id: str, owner: str) -> int:
        """Erase platform message ``message_id`` of ``owner`` from the chat's
        history, in every session, with the reply to it (reply rows carry the
        id of the message they answer, and often repeat it); returns how
        many rows went. Another owner's rows with the same id stay."""
        if not message_id:
            return 0
        await self.flush()  # an append still queued would land after the DELETE
        async with self.db.transaction() as conn:
            cur = await conn.execute(
                "DELETE FROM session_messages WHERE message_id = ? AND owner = ? "
                "AND session_id IN (SELECT id FROM sessions WHERE key = ?)",
                (message_id, owner, key),
            )
            if cur.rowcount:
                self.db.bump(_HISTORY)
        return cur.rowcount

    async def erase_rows(self, ids: Sequence[int], owner: str) -> int:
        """Erase the rows ``ids`` of ``owner`` (a scheduled job's prompt and
        reply, which carry no platform message id for :meth:`erase_message`
        to find them by); returns how many went."""
        if not ids:
            return 0
        await self.flush()  # an append still queued would land after the DELETE
        async with self.db.transaction() as conn:
            cur = await conn.execute(
                f"DELETE FROM session_messages WHERE owner = ? AND id IN ({','.join('?' * len(ids))})",
                (owner, *ids),
            )
            if cur.rowcount:
                self.db.bump(_HISTORY)
        return cur.rowcount

    async def move_chat(self, channel: str, old_chat: str, new_chat: str) -> dict[str, int]:
        """The chat ``old_chat`` goes on as ``new_chat`` (a Telegram group
        upgraded to a supergroup): its sessions take the new id, so the
        conversation reads on. Should the new chat have spoken already,
        the old current session's messages join its current one (they are
        older, so they come first). Its other rows here go along in the
        same transaction: replies waiting in the outbox, the bot's replies
        a recall or quote finds (``sent_replies``), draft messages
        (``recent_files`` moves with its store's index,
        :meth:`RecentFiles.move_chat`). The moved rows' message ids become
        the old chat's (:func:`moved_message_id`), and moved replies quote
        nothing: the new chat numbers its messages anew. Burst comments stay
        under the old id, which edits of those comments name. Returns how
        many rows of each moved (``messages`` for the history); a second
        call finds nothing to move."""
        old_key, new_key = f"{channel}:{old_chat}", f"{channel}:{new_chat}"
        moved = {"messages": 0, **{table: 0 for table in _CHAT_TABLES}}
        if old_key == new_key:
            return moved
        now = format_ts(self.clock.now())
        await self.flush()  # an append still queued would land in the old chat after the move
        async with self.db.transaction() as conn:
            self.db.bump(_HISTORY)
            rows = list(await conn.execute_fetchall(
                "SELECT COUNT(*) FROM session_messages WHERE session_id IN (SELECT id FROM sessions WHERE key = ?)",
                (old_key,),
            ))
            moved["messages"] = int(rows[0][0]) if rows else 0
            # The new chat's message ids are another count (a supergroup's
            # from 1, a basic group's the bot's own): a moved reply quotes no
            # message there, and a moved row's id is made the old chat's
            # (moved_message_id), so a new message of the same number is not
            # taken for one answered already, nor its edit for the old one's.
            await conn.execute("UPDATE outbox SET reply_to = '' WHERE channel = ? AND chat_id = ?", (channel, old_chat))
            await conn.execute(
                "UPDATE session_messages SET message_id = ? || message_id WHERE message_id != '' AND session_id IN"
                " (SELECT id FROM sessions WHERE key = ?)",
                (moved_message_id(old_chat, ""), old_key),
            )
            for table in _CHAT_TABLES:  # OR REPLACE: should a key hold the chat, the newer row wins
                cur = await conn.execute(
                    f"UPDATE OR REPLACE {table} SET chat_id = ? WHERE channel = ? AND chat_id = ?",
                    (new_chat, channel, old_chat),
                )
                moved[table] = cur.rowcount
            current = list(await conn.execute_fetchall(
                "SELECT id FROM sessions WHERE key = ? AND ended_at IS NULL", (new_key,)
            ))
            if current:
                await conn.execute(
                    "UPDATE session_messages SET session_id = ? WHERE session_id IN"
                    " (SELECT id FROM sessions WHERE key = ? AND ended_at IS NULL)",
                    (int(current[0][0]), old_key),
                )
                await conn.execute("UPDATE sessions SET ended_at = ? WHERE key = ? AND ended_at IS NULL", (now, old_key))
            await conn.execute("UPDATE sessions SET key = ?, chat_id = ? WHERE key = ?", (new_key, new_chat, old_key))
            for key in (old_key, new_key):
                self._current.pop(key, None)
                self._uncache(key)
        return moved

    async def new_session(self, key: str, *, channel: str, chat_id: str) -> int:
        """End the current session (its rows are kept) and start a fresh one."""
        now = format_ts(self.clock.now())
        await self.flush()
        async with self.db.transaction() as conn:
            await conn.execute("UPDATE sessions SET ended_at = ? WHERE key = ? AND ended_at IS NULL", (now, key))
            self._current.pop(key, None)
            self._uncache(key)
            cur = await conn.execute(
                "INSERT INTO sessions (key, channel, chat_id, started_at) VALUES (?, ?, ?, ?)",
                (key, channel, chat_id, now),
            )
            sid = int(cur.lastrowid or 0)
        self._current[key] = sid
        return sid
