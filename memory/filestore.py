"""``FileMemory``: the :class:`~memory.backend.MemoryBackend` used when
``memory.enabled`` is false (seed 000 §1.1, §12.3): markdown files in the
workspace instead of SQLite. No LLM, no index; small enough to read whole.

Layout under ``<workspace>/memory/`` (owner scoping holds here too)::

    MEMORY.md                        shared long-term memory (owner _global),
                                     edited by the operator
    YYYY-MM-DD.md                    daily logs of _global (the legacy,
                                     single-user layout); never shown to users
    users/<slug>/.owner              the exact user name, for migration
    users/<slug>/MEMORY.md           that user's long-term memory
    users/<slug>/YYYY-MM-DD.md       that user's conversation log of the day

A line :meth:`FileMemory.remember` writes ends with its day,
``- fact <!-- 2026-03-01 -->`` (:func:`memory.mdfacts.split_day`), which
search, the overview and the export date it by; a line without one is
dated by the file's mtime.

``<slug>`` is the user name reduced to ``[A-Za-z0-9_-]`` plus a hash of the
exact name, so no name can climb out of ``users/`` (``../x``) and two names
that reduce alike (``telegram:1`` / ``telegram_1``, ``Bob`` / ``bob`` on a
case-insensitive disk) never share a directory.

Context (``profile``) is long-term memory plus the last 7 days, as the
legacy store did; a group chat (``private=False``) gets the shared
``MEMORY.md`` only. ``recall``/``search`` are keyword searches over the same
files; a message naming a time ("上上周我们聊了什么？", memory/timeref.py, read
on the user's calendar) also gets lines of those days' logs, however old, as
the SQLite store gets that period's chat summaries. Entries are cited by a
hash of their words (``m``/``e`` + :func:`entry_id`), which
:meth:`FileMemory.forget` erases them by.
An edited message (:meth:`FileMemory.revise`) gets its logged line
rewritten, a recalled one (:meth:`FileMemory.retract`) erased with the reply
logged after it; the log has no message ids, so both find the line by its
words. ``category`` and ``importance`` of :meth:`FileMemory.remember` have
nowhere to go in a one-fact-per-line file and are ignored; ``myclaw memory
migrate`` later imports the lines as Tier 1 (seed 12.2).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import re
import tempfile
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta, tzinfo
from pathlib import Path

import structlog

from .backend import MemoryBackend, Turn
from .clock import Clock, SystemClock, ZoneOf, owner_zone
from .cues import safe_terms
from .db import private_dirs
from .engine import content_hash
from .forgetting import Forgotten, repeats_forgotten
from .groupowner import is_group_owner
from .mdfacts import clean_text, line_fact, render
from .mdfacts import facts as md_facts
from .redact import redact_credentials
from .scope import Chat
from .service import EDITED_MARK, RECALL_EVENTS, Retracted
from .timeref import periods
from .tokenize import GLUE_BIGRAM_WEIGHT, UNIGRAM_WEIGHT, ZH_CONTENT_BIGRAMS, index_terms, normalize
from .tokens import estimate_tokens
from .types import (
    GLOBAL_OWNER,
    Category,
    ErasedAll,
    Event,
    Hit,
    Memory,
    MemoryOverview,
    OwnerData,
    OwnerIndex,
    Provenance,
    Source,
    Status,
)

__all__ = [
    "LONG_TERM",
    "OWNER_FILE",
    "USERS_DIR",
    "FileMemory",
    "FileMove",
    "MemoryFile",
    "clean_line",
    "clean_text",
    "entry_id",
    "erase_file",
    "is_daily_name",
    "owner_record",
    "read_owner",
    "user_slug",
]

# Lazy: a logger bound at import would ignore configure_logging (and its redaction).
log = structlog.get_logger(component="memory")

LONG_TERM = "MEMORY.md"
OWNER_FILE = ".owner"
USERS_DIR = "users"
RECENT_DAYS = 7
_DAILY_RE = re.compile(r"(\d{4}-\d{2}-\d{2})\.md")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
_LIST_MARK = re.compile(r"^(?:[-*+]|\d+[.)])\s+")
_REF = re.compile(r"^\[?\s*([me])(\d{1,12})\b", re.IGNORECASE)
_LOGGED = re.compile(r"^\d{2}:\d{2} [\w-]+: ", re.ASCII)  # "14:30 user: " in front of a logged message
_LOGGED_PARTS = re.compile(r"^(\d{2}:\d{2}) ([\w-]+): ", re.ASCII)


def user_slug(user: str) -> str:
    """A directory name for ``user``: readable, traversal-proof, collision-free."""
    readable = _UNSAFE.sub("_", user).strip("_")[:40] or "user"
    digest = hashlib.sha256(user.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{readable}-{digest}"


def owner_record(user: str) -> str:
    """``.owner`` content: the name as a JSON string, so any name (even one
    with a newline or a lone surrogate) survives the round trip exactly."""
    return json.dumps(user) + "\n"


def read_owner(text: str) -> str:
    """The user named by a ``.owner`` file ('' if none); a hand-written
    plain name is accepted too."""
    s = text.strip()
    try:
        value = json.loads(s)
    except ValueError:
        return s
    return value if isinstance(value, str) else ""


def is_daily_name(name: str) -> str | None:
    """``'2026-03-01'`` for ``'2026-03-01.md'`` (a real date), else None."""
    m = _DAILY_RE.fullmatch(name)
    if not m:
        return None
    try:
        date.fromisoformat(m.group(1))
    except ValueError:
        return None
    return m.group(1)


clean_line = line_fact  # one line read on its own (a daily log's, or the old per-line reading)


def entry_id(day: str | None, text: str) -> int:
    """The id an entry is cited by (``m``/``e`` + this): a hash of its words
    (and day), not its line number, so an id still names its entry after
    lines above it are erased, and a stale one names nothing. 32 bits: two
    entries of one user alike by chance are rare, and :meth:`FileMemory.forget`
    refuses an id that names two different texts."""
    key = content_hash(text) if day is None else f"{day}\0{text}"
    return int(hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:8], 16)


@dataclass(frozen=True)
class MemoryFile:
    """One file of one owner's store."""

    owner: str
    path: Path
    day: str | None  # YYYY-MM-DD for a daily log, None for MEMORY.md

    @property
    def name(self) -> str:
        return self.path.name


@dataclass(frozen=True)
class FileMove:
    """One file of a user's folder moving to another user's
    (:meth:`FileMemory.plan_move`): ``merged`` is what the destination will
    hold, or None when it does not exist yet and the file is just renamed."""

    name: str
    src: Path
    dst: Path
    source: str
    before: str | None
    merged: str | None

    @property
    def after(self) -> str:
        return self.source if self.merged is None else self.merged


def _blocks(text: str) -> list[str]:
    """A daily log's entries as written (a line and its indented
    continuation lines); headings and blank lines are not entries."""
    out: list[str] = []
    for raw in text.splitlines():
        if not raw.strip():
            continue
        if raw[:1].isspace() and out:
            out[-1] += "\n" + raw
        elif not raw.lstrip().startswith("#"):
            out.append(raw)
    return out


def _merge_daily(before: str, source: str) -> str:
    """``before`` with the entries of ``source`` it does not hold yet
    appended. Counted as a multiset, so merging again after a crash adds
    nothing twice, and the destination stays a prefix of the result (the
    shape ``memory.migrate`` imports as "the file grew"). The price: an
    entry the same to the minute, role and word as one already in
    ``before`` counts as that entry (a second "- 12:00 user: ok")."""
    have: dict[str, int] = {}
    for b in _blocks(before):
        have[b] = have.get(b, 0) + 1
    add: list[str] = []
    for b in _blocks(source):
        if have.get(b, 0) > 0:
            have[b] -= 1
        else:
            add.append(b)
    if not add:
        return before
    return before + ("" if not before or before.endswith("\n") else "\n") + "".join(b + "\n" for b in add)


def _merge_long_term(before: str, source: str) -> str:
    """``before`` with the facts of ``source`` whose wording it lacks, one
    ``- fact`` line each, as :meth:`FileMemory.remember` writes them."""
    have = {content_hash(f.text) for f in md_facts(before)}
    lines = before.splitlines() or ["# Long-term memory", ""]
    n = len(lines)
    for fact in md_facts(source):
        if (h := content_hash(fact.text)) not in have:
            have.add(h)
            lines.append(render(fact.text, fact.day, fact.terms))
    return before if len(lines) == n else "\n".join(lines) + "\n"


@dataclass(frozen=True)
class _Entry:
    """A searchable unit: a MEMORY.md line or one logged message."""

    file: MemoryFile
    line_no: int
    text: str
    date: str
    end_no: int = 0  # last line of a logged message with continuation lines (0: line_no)

    @property
    def id(self) -> int:
        return entry_id(self.file.day, self.text)

    @property
    def ref(self) -> str:
        return f"{'m' if self.file.day is None else 'e'}{self.id}"

    @property
    def said(self) -> str:
        """The words alone: a logged message without its time and role."""
        return _LOGGED.sub("", self.text, count=1) if self.file.day else self.text


def _read(path: Path) -> str:
    try:
        # The operator edits these files by hand: a bad byte must not hide the rest.
        text = path.read_text(encoding="utf-8", errors="replace")
        if "\x00" in text:
            # Opened just before a forget replaced the file and zeroed the
            # old one (_rewrite_erasing): the new file is in place now.
            text = path.read_text(encoding="utf-8", errors="replace")
        return text
    except FileNotFoundError:
        return ""


def _read_exact(path: Path) -> str:
    """``path`` for rewriting: a byte that is not UTF-8 (a line an editor
    saved as Latin-1) becomes a lone surrogate that :func:`_write_atomic`
    writes back as that byte, so a rewrite never turns it into U+FFFD.
    Its lines are :func:`_read`'s lines: neither decoding makes a line
    break. Never shown, hashed or logged: those read :func:`_read`."""
    try:
        return path.read_bytes().decode("utf-8", "surrogateescape")
    except FileNotFoundError:
        return ""


def _write_atomic(path: Path, text: str) -> None:
    # Folders owner-only, as memory.db's; mkstemp makes the file 0600.
    private_dirs(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as f:  # see _read_exact
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    """Make a rename durable: until the directory is synced, a power cut can
    bring back the old file (or no file) after the new one was reported
    written. Not possible on every platform (Windows); best effort there."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _rewrite_erasing(path: Path, text: str | None) -> None:
    """Replace ``path`` with ``text`` (None: remove it), then overwrite the
    old file's bytes, so erased words do not linger in freed disk blocks
    (best effort, as SQLite's ``secure_delete``). The old inode is zeroed
    only once the new file is in place and nothing else links to it."""
    try:
        old = open(path, "r+b")  # noqa: SIM115 - held across the replace on purpose
    except FileNotFoundError:
        old = None
    try:
        if text is None:
            path.unlink(missing_ok=True)
        else:
            _write_atomic(path, text)
        if old is not None:
            st = os.fstat(old.fileno())
            if st.st_nlink == 0:
                old.write(b"\0" * st.st_size)
                old.flush()
                os.fsync(old.fileno())
    finally:
        if old is not None:
            old.close()


def erase_file(path: Path) -> None:
    """Remove ``path``, its bytes zeroed first (as :func:`_rewrite_erasing`)."""
    _rewrite_erasing(path, None)


def _append(path: Path, text: str, header: str) -> None:
    private_dirs(path.parent)
    # "a+b", but a new file is created owner-only: it holds what a user said.
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
    with open(fd, "a+b") as f:
        end = f.seek(0, os.SEEK_END)
        if end == 0:
            f.write(header.encode("utf-8"))
        else:
            f.seek(end - 1)
            if f.read(1) != b"\n":
                # The last append was cut short (a crash, a full disk) or the
                # operator saved without a final newline: start on a line of
                # our own, or this entry would run into that one.
                f.write(b"\n")
        f.write(text.encode("utf-8"))
        f.flush()
        os.fsync(f.fileno())


def _log_line(hhmm: str, role: str, text: str) -> str:
    """A logged message as :meth:`FileMemory.buffer` writes it; continuation
    lines are indented so the entry stays one list item."""
    first, *rest = text.splitlines() or [""]
    return f"- {hhmm} {role}: " + first + "".join(f"\n  {ln}" for ln in rest) + "\n"


def _said_as(e: _Entry) -> tuple[str, str, str]:
    """A logged message's (HH:MM, role, words with whitespace collapsed);
    ('', '', '') for a line not in the logged shape (hand-written)."""
    m = _LOGGED_PARTS.match(e.text)
    if m is None:
        return "", "", ""
    return m.group(1), m.group(2), " ".join(e.text[m.end():].split())


def _entries(f: MemoryFile, text: str, mtime_day: str) -> list[_Entry]:
    """Split a file into entries; indented lines continue the previous one."""
    out: list[_Entry] = []
    if f.day is None:  # a line's own date comment, else the file's mtime
        return [_Entry(f, m.first, m.text, m.day or mtime_day, m.last) for m in md_facts(text)]
    for no, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        if raw[:1].isspace() and out:
            prev = out[-1]
            out[-1] = _Entry(f, prev.line_no, prev.text + "\n" + raw.strip(), prev.date, no)
        else:
            out.append(_Entry(f, no, _LIST_MARK.sub("", raw.strip()), f.day))
    return out


def _erase_entries(parsed: Sequence[tuple[MemoryFile, str, list[_Entry]]], drop: Sequence[_Entry]) -> None:
    """Rewrite each parsed file without the lines of the ``drop`` entries,
    erasing the old bytes (:func:`_rewrite_erasing`). A day with nothing
    left goes whole; MEMORY.md keeps its header."""
    for f, text, entries in parsed:
        gone = {n for e in drop if e.file == f for n in range(e.line_no, max(e.end_no, e.line_no) + 1)}
        if not gone:
            continue
        lines = _read_exact(f.path).splitlines(keepends=True)  # the kept lines' own bytes
        kept = "".join(ln for no, ln in enumerate(lines, start=1) if no not in gone)
        left = len(entries) - sum(1 for e in entries if e in drop)
        _rewrite_erasing(f.path, None if f.day and left == 0 else kept)


# Function words dropped from queries. A short list of our own: the fallback
# store must keep working whatever the SQLite retriever's tuning becomes.
_STOP = frozenset(
    """a an the and or but if then so of to in on at by for with from as is am are was were be been do does did
    have has had i me my you your we our us he him his she her they them their it its this that these those
    what which who when where why how not no can could would should will about tell know remember recall
    please hey hi ok 的 了 是 吗 呢 吧 啊 么 我 你 他 她 它 在 有 和 就 也 都 这 那 个 一 不 要 会 说 过
    我的 你的 什么 怎么 记得 之前 以前 一下 一个 这个 那个 我们 你们 是不 不是 有没 没有 可以 告诉 知道""".split()
)
_MAX_QUERY_CHARS = 2000  # a pasted 1 MB message is not a 1 MB query


def _query_units(query: str) -> dict[str, float]:
    """Weighted query terms (words, Han bigrams and characters), from the
    same tokenizer as the SQLite index so both stores match alike."""
    terms = [t for t in index_terms(query[:_MAX_QUERY_CHARS]) if t not in _STOP]
    has_words = any(len(t) > 1 for t in terms)
    units: dict[str, float] = {}
    for t in terms:
        if len(t) == 1 and t.isascii():
            continue
        w = UNIGRAM_WEIGHT if len(t) == 1 and has_words else 1.0
        if len(t) == 2 and not t.isascii():
            glue = (t[0] in _STOP) + (t[1] in _STOP)
            if glue == 2:
                continue
            if glue and t not in ZH_CONTENT_BIGRAMS:
                w = GLUE_BIGRAM_WEIGHT  # straddles a grammar character: 码是 in 密码是
        units[t] = max(w, units.get(t, 0.0))
    return dict(list(units.items())[:32])


def _on_days(day: str, days: Sequence[tuple[str, str]]) -> bool:
    return any(a <= day < b for a, b in days)


def _matches(unit: str, terms: set[str], norm_text: str) -> bool:
    # Whether a lone Han character is its own index term depends on the
    # tokenizer version: fall back to looking for it in the text.
    return unit in terms or (len(unit) == 1 and unit in norm_text)


class FileMemory(MemoryBackend):
    """Markdown-file memory rooted at ``<workspace>/memory``.

    ``tz`` is the gateway's timezone; a user's lines and daily files are
    dated in their own zone (``zone_of``, /timezone) when written, the
    gateway's when they set none. No history is kept: the zone then is
    the zone the line was said in. A later /timezone moves no line (a
    line keeps its day and wall time, not its instant), so what was said
    before a user's first one keeps the gateway's day, where the SQLite
    store reads it in the zone named (docs/ARCHITECTURE.md).
    """

    kind = "files"

    def __init__(
        self,
        workspace: Path | str,
        clock: Clock | None = None,
        *,
        tz: tzinfo = UTC,
        recent_days: int = RECENT_DAYS,
        max_hits: int = 5,
        max_profile_chars: int = 16_000,
    ) -> None:
        self.root = Path(workspace) / "memory"
        self.clock = clock or SystemClock()
        self.tz = tz
        self.zone_of: ZoneOf | None = None  # each user's own (set by the App)
        self.recent_days = recent_days
        self.max_hits = max_hits
        self.max_profile_chars = max_profile_chars
        self._locks: dict[str, asyncio.Lock] = {}
        # Keys of recently written messages, so a retried buffer() call does
        # not log a message twice (the SQLite store has a unique index).
        self._seen: OrderedDict[tuple[str, ...], None] = OrderedDict()

    # -- layout -------------------------------------------------------------

    def user_dir(self, user: str) -> Path:
        if user == GLOBAL_OWNER:
            return self.root
        return self.root / USERS_DIR / user_slug(user)

    def _lock(self, user: str) -> asyncio.Lock:
        return self._locks.setdefault(user, asyncio.Lock())

    def _ensure_user_dir(self, user: str) -> Path:
        d = self.user_dir(user)
        if user != GLOBAL_OWNER and not (d / OWNER_FILE).exists():
            _write_atomic(d / OWNER_FILE, owner_record(user))
        private_dirs(d)
        return d

    def long_term_file(self, user: str) -> MemoryFile:
        return MemoryFile(user, self.user_dir(user) / LONG_TERM, None)

    def daily_files(self, user: str, *, since: str | None = None) -> list[MemoryFile]:
        """This owner's daily logs, oldest first (``since``: YYYY-MM-DD)."""
        d = self.user_dir(user)
        if not d.is_dir():
            return []
        found = []
        for p in d.iterdir():
            day = is_daily_name(p.name)
            if day and p.is_file() and (since is None or day >= since):
                found.append(MemoryFile(user, p, day))
        return sorted(found, key=lambda f: f.day or "")

    def _local(self, at: datetime, tz: tzinfo) -> datetime:
        """``at`` in ``tz`` (naive: UTC), as the logs show times."""
        return (at if at.tzinfo else at.replace(tzinfo=UTC)).astimezone(tz)

    async def _zone(self, owner: str) -> tzinfo:
        """``owner``'s zone now, what their lines are dated in: theirs, else the gateway's."""
        return await owner_zone(self.zone_of, owner, self.tz)

    def today(self) -> date:
        return self.clock.now().astimezone(self.tz).date()

    def _recent_since(self) -> str:
        return (self.today() - timedelta(days=self.recent_days - 1)).isoformat()

    def _visible_files(self, user: str, *, private: bool, recent_only: bool) -> list[MemoryFile]:
        """The files ``user`` may read: shared MEMORY.md always; in a private
        chat also their own MEMORY.md and daily logs. ``_global`` daily logs
        are nobody's context."""
        files = [self.long_term_file(GLOBAL_OWNER)]
        if private and user != GLOBAL_OWNER:
            files.insert(0, self.long_term_file(user))
            files.extend(self.daily_files(user, since=self._recent_since() if recent_only else None))
        return files

    # -- MemoryBackend ------------------------------------------------------

    async def profile(self, user: str, *, private: bool = True, tz: tzinfo | None = None) -> str:
        # The daily files are named by the day they were written on already.
        return await asyncio.to_thread(self._profile, user, private)

    def _profile(self, user: str, private: bool) -> str:
        """Long-term facts, then recent days; each line starts with the id
        it is cited and forgotten by (``- [m9] ...``), as the SQLite store's
        Core Memory does."""
        facts: list[str] = []
        seen: set[str] = set()
        days: list[tuple[str, str]] = []
        for f in self._visible_files(user, private=private, recent_only=True):
            text = _read(f.path)
            if f.day is None:
                for e in _entries(f, text, ""):
                    if (h := content_hash(e.text)) not in seen:
                        seen.add(h)
                        facts.append(f"- [{e.ref}] " + e.text.replace("\n", "\n  "))  # a code block stays in its item
            else:
                body = "\n".join(f"- [{e.ref}] " + e.text.replace("\n", "\n  ") for e in _entries(f, text, ""))
                if body:
                    days.append((f.day or "", body))
        parts: list[str] = []
        budget = self.max_profile_chars
        if facts:
            block = "## Long-term memory\n" + "\n".join(facts)
            parts.append(block[:budget])
            budget -= len(parts[-1])
        # Newest days first under the budget, shown oldest first.
        kept: list[str] = []
        for day, body in sorted(days, reverse=True):
            block = f"### {day}\n{body}"
            if len(block) > budget:
                break
            kept.append(block)
            budget -= len(block)
        if kept:
            parts.append("## Recent days\n" + "\n\n".join(reversed(kept)))
        return "\n\n".join(parts)

    async def recall(
        self, user: str, query: str, *, context: Sequence[str] = (), private: bool = True, tz: tzinfo | None = None,
        chat: Chat | None = None,  # a group reads the shared MEMORY.md only, whichever group
    ) -> list[Hit]:
        days = self._named_days(query, tz)
        return await asyncio.to_thread(self._search, user, query, self.max_hits, private, True, days)

    async def search(
        self, user: str, query: str, *, limit: int = 8, private: bool = True, tz: tzinfo | None = None,
        chat: Chat | None = None,
    ) -> list[Hit]:
        return await asyncio.to_thread(self._search, user, query, limit, private, False, self._named_days(query, tz))

    def _named_days(self, query: str, tz: tzinfo | None) -> list[tuple[str, str]]:
        """The log days (``[first, end)``, the store's calendar) of the time
        references in ``query``, read on the user's (``tz``) as the SQLite
        store reads them ("上周", and loose words such as 最近)."""
        out = []
        for a, b in periods(normalize(query[:_MAX_QUERY_CHARS]), self.clock.now(), tz or self.tz, loose=True):
            # The days their logs are dated on: their zone's (each line dated in it when written).
            first, end = a.astimezone(tz or self.tz), b.astimezone(tz or self.tz)
            whole = end.time() == datetime.min.time()  # 刚才 ends within a day: that day counts
            last = end.date() if whole else end.date() + timedelta(days=1)
            out.append((first.date().isoformat(), last.isoformat()))
        return out

    def _search(self, user: str, query: str, limit: int, private: bool, recent_only: bool,
                days: Sequence[tuple[str, str]] = ()) -> list[Hit]:
        """Keyword search: a hit's score is the IDF-weighted share of query
        words it contains, so a line sharing only a common word ranks low.
        ``days``: a time reference's log days; their lines are candidates
        too (older than the last week included), the period one more query
        unit they hold, and at most :data:`~memory.service.RECALL_EVENTS`
        of them are in by their date alone."""
        units = _query_units(query)
        if (not units and not days) or limit <= 0:
            return []
        files = self._visible_files(user, private=private, recent_only=recent_only)
        if days and private and user != GLOBAL_OWNER:
            have = {f.path for f in files}
            files += [f for f in self.daily_files(user) if f.path not in have and _on_days(f.day or "", days)]
        entries: list[_Entry] = []
        for f in files:
            if not f.path.is_file():
                continue
            mday = datetime.fromtimestamp(f.path.stat().st_mtime, UTC).astimezone(self.tz).date().isoformat()
            entries.extend(_entries(f, _read(f.path), mday))
        if not entries:
            return []
        prepared = [(e, set(index_terms(e.text)), normalize(e.text)) for e in entries]
        n = len(prepared)
        df = {u: sum(1 for _, terms, norm in prepared if _matches(u, terms, norm)) for u in units}
        idf = {u: w * math.log(1.0 + n / (df[u] or 1)) for u, w in units.items()}
        dated = {id(e) for e, _, _ in prepared if e.file.day is not None and _on_days(e.date, days)}
        when = math.log(1.0 + n / len(dated)) if dated else 0.0  # the period as a unit, weight 1
        total = sum(idf.values()) + when
        scored: list[tuple[float, _Entry]] = []
        by_date = 0
        for e, terms, norm in sorted(prepared, key=lambda p: p[0].date, reverse=True):  # the newest lines first
            got = sum(idf[u] for u in units if df[u] and _matches(u, terms, norm))
            if id(e) in dated:
                if got == 0.0:
                    by_date += 1
                    if by_date > RECALL_EVENTS:
                        continue
                got += when
            if got > 0:
                scored.append((got / total, e))
        # Best first; among equals, long-term facts, then the most recent day.
        scored.sort(key=lambda se: se[1].line_no)
        scored.sort(key=lambda se: se[1].date, reverse=True)
        scored.sort(key=lambda se: (-se[0], se[1].file.day is not None))
        return [self._hit(e, score) for score, e in scored[:limit]]

    @staticmethod
    def _hit(e: _Entry, score: float) -> Hit:
        where = e.file.name if e.file.owner != GLOBAL_OWNER or e.file.day else f"shared {e.file.name}"
        return Hit(
            kind="memory" if e.file.day is None else "event",
            id=e.id,
            content=e.text,
            score=round(score, 4),
            date=e.date,
            category="" if e.file.day is None else "event",
            source="file",
            provenance=Provenance(refs=(where,), date_from=e.date, date_to=e.date),
        )

    async def overview(self, user: str, *, limit: int = 10, tz: tzinfo | None = None) -> MemoryOverview:
        # ``tz`` unused: the files' lines are dated in the store's own zone as written.
        return await asyncio.to_thread(self._overview, user, limit)

    def _overview(self, user: str, limit: int) -> MemoryOverview:
        """MEMORY.md's lines (always in the prompt, as Core Memory) and the
        newest logged lines of the daily files."""
        if user == GLOBAL_OWNER:
            return MemoryOverview([], [], 0, 0)
        f = self.long_term_file(user)
        profile = [self._hit(e, 1.0) for e in _entries(f, _read(f.path), "")] if f.path.is_file() else []
        recent: list[Hit] = []
        logged = 0
        for day in reversed(self.daily_files(user)):
            entries = _entries(day, _read(day.path), day.day or "")
            logged += len(entries)
            recent.extend(self._hit(e, 1.0) for e in reversed(entries) if len(recent) < limit)
        return MemoryOverview(profile=profile, recent=recent[:limit], facts=len(profile), events=logged)

    async def owner_data(self, user: str) -> OwnerData:
        async with self._lock(user):
            return await asyncio.to_thread(self._owner_data, user)

    async def owner_index(self, user: str) -> OwnerIndex:
        """From :meth:`owner_data`: the files are small (a day's log, MEMORY.md)."""
        data = await self.owner_data(user)
        cjk = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")  # as gateway/export.py's mostly_chinese
        return OwnerIndex(
            owner=user,
            memory_ids=tuple(m.id for m in sorted(data.memories, key=lambda m: (m.tier, m.project, m.id))),
            event_ids=tuple(e.id for e in sorted(data.events, key=lambda e: (e.event_date, e.id))),
            chinese=sum(1 for t in (*(m.content for m in data.memories), *(e.summary for e in data.events))
                        if cjk.search(t)),
            waiting=data.waiting,
            set_aside=data.set_aside,
        )

    async def owner_rows(self, user: str, ids: OwnerIndex, *, page: int = 500) -> AsyncIterator[Memory | Event]:
        data = await self.owner_data(user)
        memories, events = {m.id: m for m in data.memories}, {e.id: e for e in data.events}
        for mid in ids.memory_ids:
            if (m := memories.get(mid)) is not None:
                yield m
        for eid in ids.event_ids:
            if (e := events.get(eid)) is not None:
                yield e

    def _owner_data(self, user: str) -> OwnerData:
        """MEMORY.md's lines as Tier 1 memories and each logged message as an
        event of its day, with the ids they are cited by; nothing waits for
        extraction here (the files are the memory)."""
        memories: list[Memory] = []
        f = self.long_term_file(user)
        if f.path.is_file():
            mday = datetime.fromtimestamp(f.path.stat().st_mtime, UTC).astimezone(self.tz).date().isoformat()
            for e in _entries(f, _read(f.path), mday):
                memories.append(Memory(
                    id=e.id, owner=user, tier=1, project=GLOBAL_OWNER, topic="_profile", category=Category.IDENTITY,
                    content=e.text, importance=1.0, source=Source.MANUAL, status=Status.ACTIVE, superseded_by=None,
                    provenance=Provenance(refs=(f.name,)), created_at=e.date, updated_at=e.date, last_accessed="",
                    access_count=0,
                ))
        events: list[Event] = []
        for day in self.daily_files(user):
            for e in _entries(day, _read(day.path), day.day or ""):
                events.append(Event(
                    id=e.id, owner=user, event_date=e.date, channel="", chat_id="", summary=e.text,
                    raw_tokens=estimate_tokens(e.text), is_compressed=False,
                    provenance=Provenance(refs=(day.name,), date_from=e.date, date_to=e.date), created_at=e.date,
                ))
        return OwnerData(owner=user, memories=memories, events=events)

    async def remember(
        self,
        user: str,
        content: str,
        *,
        provenance: Provenance,
        category: str = "event",
        importance: float = 0.7,
        source_text: str = "",  # no index here: the files hold the fact only
        search_terms: Sequence[str] = (),
    ) -> Hit:
        # One fact per line: newlines and runs of spaces collapse.
        fact = " ".join(redact_credentials(clean_text(content)).split())
        if not fact:
            raise ValueError("memory content is empty")
        today = self.today().isoformat()
        # Written in its line's terms comment (memory/mdfacts.py), for migrate to import.
        terms = safe_terms(search_terms, credential=category == Category.CREDENTIAL.value)
        async with self._lock(user):
            line_no, stored, added, day = await asyncio.to_thread(self._remember, user, fact, today, terms)
        log.info("memory saved", owner=user, store="files", added=added)
        f = self.long_term_file(user)
        return self._hit(_Entry(f, line_no, stored, day), 1.0)

    def _remember(self, user: str, fact: str, today: str, terms: Sequence[str] = ()) -> tuple[int, str, bool, str]:
        """(line number, the fact as stored, whether it was added, its day):
        a fact already there in other case or spacing is that line. A new
        line ends with ``today``'s date comment (memory/mdfacts.py)."""
        self._ensure_user_dir(user)
        path = self.user_dir(user) / LONG_TERM
        text = _read(path)
        want = content_hash(fact)
        for m in md_facts(text):
            if content_hash(m.text) == want:
                return m.first, m.text, False, m.day or today
        # Appended to the other lines' own bytes, in the file's own line
        # ending: joined again with "\n" a Windows file lost its CRLFs (each
        # line a change in a diff), and a form feed inside a line split it.
        kept = _read_exact(path) or "# Long-term memory\n\n"
        end = "\r\n" if "\r\n" in kept else "\n"
        if not kept.endswith(("\n", "\r")):
            kept += end  # saved without a final newline: ours starts a line of its own
        _write_atomic(path, kept + render(fact, today, terms) + end)
        return len(kept.splitlines()) + 1, fact, True, today

    async def forget(self, user: str, refs: Sequence[str]) -> Forgotten:
        """Erase, for good, the entries of ``user``'s own files that ``refs``
        name as cited (``m<id>``: a line of their MEMORY.md, ``e<id>``: a
        logged message), and with a fact the logged messages that repeat it
        (:func:`~memory.forgetting.repeats_forgotten`), which the recent-days
        context would otherwise keep showing. The shared MEMORY.md is the
        operator's (``Forgotten.shared``); another user's ids are unknown here."""
        out = Forgotten()
        want: dict[tuple[str, int], str] = {}
        for ref in refs:
            m = _REF.match(ref.strip()) if isinstance(ref, str) else None
            if m is None:
                out.unknown.append(str(ref))
                continue
            kind = m.group(1).lower()
            want[(kind, int(m.group(2)))] = f"{kind}{m.group(2)}"
        if not want:
            return out
        if user == GLOBAL_OWNER:
            out.unknown += want.values()
            return out
        async with self._lock(user):
            await asyncio.to_thread(self._forget, user, want, out)
        if out.erased:
            log.info("memories forgotten", owner=user, store="files", erased=len(out.erased))
        return out

    async def forget_words(self, user: str, facts: Sequence[str]) -> int:
        """SQLite is the backend and erased ``facts`` of ``user``: the lines of
        their MEMORY.md with the same words go too (a fact imported from
        it, from a time memory was off), with the logged messages that
        repeat them (as :meth:`forget`); bytes zeroed. How many entries.
        The import ledger keeps the line's hash, so the erased line's
        absence archives nothing and reads nothing back."""
        if user == GLOBAL_OWNER or not facts or not self.user_dir(user).is_dir():
            return 0
        done = await self.forget(user, [f"m{entry_id(None, f)}" for f in dict.fromkeys(facts)])
        return len(done.erased)

    async def forget_days(self, user: str, days: Sequence[tuple[str, str]]) -> int:
        """SQLite is the backend and erased days imported from ``user``'s
        logs (``(day, text)``, the event's words): those logged lines go
        from the day's file too, bytes zeroed; how many. Else the file,
        changed by some later erasure, would be imported again, the erased
        day with it."""
        if user == GLOBAL_OWNER or not days or not self.user_dir(user).is_dir():
            return 0
        refs = [f"e{e.id}" for day, text in days
                for e in _entries(MemoryFile(user, self.user_dir(user) / f"{day}.md", day), text, day)]
        return len((await self.forget(user, list(dict.fromkeys(refs)))).erased) if refs else 0

    def _forget(self, user: str, want: dict[tuple[str, int], str], out: Forgotten) -> None:
        files = [self.long_term_file(user), *self.daily_files(user)]
        parsed = [(f, text, _entries(f, text, f.day or "")) for f in files if (text := _read(f.path))]
        named: dict[tuple[str, int], list[_Entry]] = {}
        for _, _, entries in parsed:
            for e in entries:
                key = ("m" if e.file.day is None else "e", e.id)
                if key in want:
                    named.setdefault(key, []).append(e)
        drop: list[_Entry] = []
        for key, ref in want.items():
            found = named.get(key, [])
            if len({content_hash(e.text) for e in found}) > 1:
                out.unknown.append(ref)  # two different entries share the id: erase neither
            elif found:
                drop += found
                out.erased.append(self._hit(found[0], 1.0))
            elif key[0] == "m" and any(
                e.id == key[1] for e in _entries(self.long_term_file(GLOBAL_OWNER), _read(self.root / LONG_TERM), "")
            ):
                out.shared.append(ref)
            else:
                out.unknown.append(ref)
        facts = [" ".join(e.text.split()) for e in drop if e.file.day is None]
        out.texts = facts + [" ".join(e.said.split()) for e in drop if e.file.day]
        # The messages a forgotten fact was said in: the recent-days context
        # shows them in every prompt, and a later import would read them.
        if facts:
            for _, _, entries in parsed:
                for e in entries:
                    if e.file.day and e not in drop and repeats_forgotten(e.said, facts):
                        drop.append(e)
                        out.erased.append(self._hit(e, 1.0))
                        out.texts.append(" ".join(e.said.split()))
        _erase_entries(parsed, drop)

    async def forget_all(self, user: str) -> ErasedAll:
        """``user``'s folder goes: each file's bytes are overwritten as it is
        removed (as :meth:`forget` does), then the folder."""
        if user == GLOBAL_OWNER:
            raise ValueError("_global is shared by everyone; its memories are erased one by one")
        async with self._lock(user):
            out = await asyncio.to_thread(self._forget_all, user)
        log.info("owner forgotten", owner=user, store="files", files=out.files)
        return out

    def _forget_all(self, user: str) -> ErasedAll:
        d = self.user_dir(user)
        if not d.is_dir():
            return ErasedAll()
        before = self._overview(user, 0)
        files = 0
        for path in sorted(d.iterdir()):
            if path.is_file() and path.name != OWNER_FILE:
                _rewrite_erasing(path, None)
                files += 1
        if not self.remove_user_dir(user):
            log.warning("user folder not empty after forget_all; left for the operator", owner=user)
        return ErasedAll(memories=before.facts, events=before.events, files=files)

    async def buffer(self, turns: Sequence[Turn]) -> None:
        fresh = []
        for t in turns:
            if t.group or is_group_owner(t.owner):
                # A group's words are kept only by the SQLite store, which reads
                # them in that group alone (memory/scope.py, memory/groupnotes.py);
                # this store's logs are read in private chats, so no group line
                # (nor the bot's reply there) goes into a member's file.
                continue
            key = (t.owner, t.channel, t.chat_id, t.message_id, t.role)
            if t.message_id and key in self._seen:
                continue
            fresh.append(t)
        by_owner: dict[str, list[Turn]] = {}
        for t in fresh:
            by_owner.setdefault(t.owner, []).append(t)
        for owner, owned in by_owner.items():
            tz = await self._zone(owner)
            async with self._lock(owner):
                await asyncio.to_thread(self._buffer, owner, owned, tz)
        for t in fresh:
            if t.message_id:
                self._seen[(t.owner, t.channel, t.chat_id, t.message_id, t.role)] = None
        while len(self._seen) > 2048:
            self._seen.popitem(last=False)

    def _buffer(self, owner: str, turns: Sequence[Turn], tz: tzinfo) -> None:
        d = self._ensure_user_dir(owner)
        per_day: dict[str, list[str]] = {}
        now = self.clock.now()
        for t in turns:
            at = self._local(t.at or now, tz)
            text = redact_credentials(clean_text(t.content)).strip()  # no credential in the files
            if not text:
                continue
            per_day.setdefault(at.date().isoformat(), []).append(_log_line(f"{at:%H:%M}", t.role, text))
        for day, lines in sorted(per_day.items()):
            _append(d / f"{day}.md", "".join(lines), f"# {day}\n\n")

    # -- edited and recalled messages (gateway/revisions.py) ------------------

    def _logged_message(
        self, parsed: Sequence[tuple[MemoryFile, str, list[_Entry]]], said: str, at: datetime | None,
        tz: tzinfo | None = None,
    ) -> _Entry | None:
        """The logged line of a user's message. The log has no message ids,
        so it is found by its words (``said``, whitespace collapsed; a
        correction logged as ``(edited) <words>`` counts) and, when ``at``
        is known, its day and minute: that line if the words match there,
        else the newest line with those words (a message recalled or edited
        is a recent one; an older copy of the same words is another message).
        Without ``said``, only a single user line at ``at`` is taken."""
        local = None if at is None else self._local(at, tz or self.tz)  # the owner's zone, as it was logged
        when = None if local is None else (local.date().isoformat(), f"{local:%H:%M}")
        best: _Entry | None = None
        alone: list[_Entry] = []
        for f, _, entries in parsed:
            if f.day is None:
                continue
            for e in entries:
                hhmm, role, words = _said_as(e)
                if role != "user":
                    continue
                there = when == (f.day, hhmm)
                if not said:
                    if there:
                        alone.append(e)
                    continue
                if words == said or words == f"{EDITED_MARK} {said}":
                    if there:
                        return e
                    best = e  # files oldest first, lines in order: the last is the newest
        return best if said else (alone[0] if len(alone) == 1 else None)

    def _parsed_logs(self, owner: str, *, long_term: bool) -> list[tuple[MemoryFile, str, list[_Entry]]]:
        files = [self.long_term_file(owner)] if long_term and owner != GLOBAL_OWNER else []
        files += self.daily_files(owner)
        return [(f, text, _entries(f, text, f.day or "")) for f in files if (text := _read(f.path))]

    async def revise(self, turn: Turn, *, before: str = "") -> str:
        """The user edited message ``turn.message_id`` into ``turn.content``;
        ``before``: its words until now (Tier 0's row), which the log finds
        its line by (the log keeps no message ids; ``turn.at`` narrows it to
        the minute). Returns, as :meth:`SqliteMemory.revise
        <memory.service.SqliteMemory.revise>`:

        * ``"replaced"``: the logged line now holds the new words, and the
          old ones are erased from the disk (a typo'd phone number, a
          password typed into the wrong box);
        * ``"corrected"``: no logged line was found (edited by hand, or
          erased by ``forget``); the new words are logged now as
          ``(edited) ...`` so a reader sees the correction;
        * ``"untracked"``: nothing to do (no id, no words, not a user's).

        MEMORY.md is left alone: a fact the model saved from the old words
        is the user's to correct or forget."""
        content = redact_credentials(clean_text(turn.content)).strip()
        if not turn.message_id or not content or turn.role != "user":
            return "untracked"
        said = " ".join(redact_credentials(clean_text(before)).split())  # as it was logged
        tz = await self._zone(turn.owner)
        async with self._lock(turn.owner):
            outcome = await asyncio.to_thread(self._revise, turn, content, said, tz)
        log.info("edited message handed to memory", owner=turn.owner, store="files", outcome=outcome)
        return outcome

    def _revise(self, turn: Turn, content: str, said: str, tz: tzinfo) -> str:
        parsed = self._parsed_logs(turn.owner, long_term=False)
        found = self._logged_message(parsed, said, turn.at, tz)
        if found is None:
            self._buffer(turn.owner, [replace(turn, content=f"{EDITED_MARK} {content}", at=None)], tz)
            return "corrected"
        hhmm, role, words = _said_as(found)
        if words.startswith(f"{EDITED_MARK} ") and not content.startswith(EDITED_MARK):
            content = f"{EDITED_MARK} {content}"  # a correction stays one
        f = found.file
        text = _read_exact(f.path)  # the other lines' own bytes
        lines = text.splitlines(keepends=True)
        end = max(found.end_no, found.line_no)
        new = "".join(lines[: found.line_no - 1]) + _log_line(hhmm, role, content) + "".join(lines[end:])
        if new != text:
            _rewrite_erasing(f.path, new)
        return "replaced"

    async def retract(
        self, channel: str, chat_id: str, message_id: str, *, owner: str | None, text: str = ""
    ) -> Retracted:
        """The sender recalled message ``message_id``: erase it from
        ``owner``'s files, for good (the old bytes zeroed, as :meth:`forget`).

        * its logged line goes, found by its words ``text`` (the log keeps no
          message ids; with several lines of the same words, the newest: an
          older copy is another message, which stays), and the reply logged
          right after it (written with it by the same ``buffer`` call);
        * lines of the owner's MEMORY.md that repeat its words
          (:func:`~memory.forgetting.repeats_forgotten`: the same words, or
          a long line inside them) go too, as the SQLite store erases a fact
          whose words repeat a recalled message: MEMORY.md keeps no source,
          so whether the fact was drawn from this message is unknown, and
          erasing is the safe side. A paraphrase stays (the user can ask to
          forget it). The shared MEMORY.md is the operator's and stays.

        ``Retracted.buffered_lines`` counts the logged lines erased,
        ``erased`` the MEMORY.md lines. Without ``owner`` (the gateway no
        longer has the row) or ``text`` nothing can be found: nothing is
        touched, and no other user's files ever are."""
        out = Retracted()
        said = " ".join(redact_credentials(clean_text(text)).split())  # as it was logged
        if not message_id or owner is None or not said:
            return out
        async with self._lock(owner):
            await asyncio.to_thread(self._retract, owner, said, out)
        out.owners = [owner]
        if out.buffered_lines or out.erased:
            log.info("recalled message erased from memory", owner=owner, store="files",
                     logged_lines=out.buffered_lines, erased=len(out.erased))
        return out

    def _retract(self, owner: str, said: str, out: Retracted) -> None:
        parsed = self._parsed_logs(owner, long_term=True)
        drop: list[_Entry] = []
        found = self._logged_message(parsed, said, None)
        if found is not None:
            drop.append(found)
            entries = next(entries for f, _, entries in parsed if f == found.file)
            after = entries[entries.index(found) + 1:]
            if after and _said_as(after[0])[1] == "assistant":
                drop.append(after[0])  # the reply: buffered with the message, often repeating it
        for f, _, entries in parsed:
            if f.day is None:
                for e in entries:
                    if repeats_forgotten(e.text, [said]):
                        drop.append(e)
                        out.erased.append(self._hit(e, 1.0))
        out.buffered_lines = sum(1 for e in drop if e.file.day)
        _erase_entries(parsed, drop)

    async def close(self) -> None:
        """Nothing stays open: every write is flushed when it returns."""

    # -- moving a user's folder (myclaw memory merge-identities) ----------------

    def plan_move(self, old: str, new: str) -> list[FileMove]:
        """What moving ``old``'s files into ``new``'s folder would write:
        MEMORY.md gains the facts it lacks, a day's log the entries it lacks,
        a file ``new`` does not have is renamed. Reads only."""
        if GLOBAL_OWNER in (old, new) or old == new:
            raise ValueError("only one user's folder moves into another user's")
        src_dir, dst_dir = self.user_dir(old), self.user_dir(new)
        if not src_dir.is_dir():
            return []
        moves = []
        for f in [self.long_term_file(old), *self.daily_files(old)]:
            if not f.path.is_file():
                continue
            dst = dst_dir / f.name
            source = _read(f.path)
            before = _read(dst) if dst.is_file() else None
            merged = None
            if before is not None:
                merged = _merge_long_term(before, source) if f.day is None else _merge_daily(before, source)
            moves.append(FileMove(f.name, f.path, dst, source, before, merged))
        return moves

    def apply_move(self, move: FileMove, new: str) -> None:
        """Write ``move``'s destination, then remove its source: a crash in
        between leaves the source, which :meth:`plan_move` merges again
        without adding anything twice."""
        self._ensure_user_dir(new)
        if move.merged is None:
            os.replace(move.src, move.dst)  # same filesystem: atomic, the bytes and mtime kept
            return
        if move.merged != move.before:
            _write_atomic(move.dst, move.merged)
        move.src.unlink(missing_ok=True)

    def remove_user_dir(self, user: str) -> bool:
        """Remove ``user``'s folder once its files have moved: its
        ``.owner`` and the (empty) folder. False if something else is left
        in it, which is the operator's to look at."""
        d = self.user_dir(user)
        if user == GLOBAL_OWNER or not d.is_dir():
            return True
        (d / OWNER_FILE).unlink(missing_ok=True)
        try:
            d.rmdir()
        except OSError:
            return False
        return True

