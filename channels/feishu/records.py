"""Feishu chat records (合并转发, ``merge_forward``) as forwarded messages.

Why this exists: a chat record is what users most often send a bot on
Feishu ("summarise this for me"), and its event holds only a stand-in
("Merged and Forwarded Message"). The messages come from ``GET
/open-apis/im/v1/messages/:message_id``: the record first, then every
message in it, each naming its parent in ``upper_message_id`` (a record
inside the record nests the same way, in the same answer). Each becomes a
:class:`~gateway.bus.Forwarded` with its author and date, so the model
reads who said what, and memory never takes a colleague's words for the
user's own.

Authors: the API names senders by id only. This app is "you" (the model
wrote it), the user who forwarded the record "the user", another app "a
bot", and everyone else their name from the contact directory when the app
may read it (:class:`Names`, cached for the process), else "person 1",
"person 2", ... by first appearance, stable within the record.

A record inside the record is flattened in place: its messages, in order,
each with its own author and date. The user asks about what was said, not
about how it was packed, and one "[chat record: N messages]" line would hide
the very words they sent it for; a nesting deeper than :data:`MAX_DEPTH`
(or one whose messages the answer lacks) is that one line.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import structlog

from gateway.bus import Forwarded

from .client import SCOPE_DENIED_CODES, FeishuApiError
from .content import SHARED_TYPES, card_text, flatten_post_content, media_mark, resolve_placeholders, shared_words
from .events import RECORD_TYPE, EventParseError, content_of, fetched_mention_names

__all__ = [
    "MAX_DEPTH",
    "RECORD_NOT_READ",
    "Names",
    "flatten_record",
    "people_in",
    "record_note",
    "sender_of",
    "to_forwarded",
]

MAX_DEPTH = 4  # records inside records read through; deeper ones are one line
MAX_MESSAGES = 1000  # what one record yields at most (the model reads ~4000 tokens of it: FORWARD_TOKENS)
RECORD_NOT_READ = "[chat record not read]"
NAME_TIMEOUT = 3.0  # the record waits this long for names, then labels the rest
MAX_LOOKUPS = 20  # names asked for per record; the rest are labelled


def record_note(*, has_text: bool, zh: bool = False) -> str:
    """What the user is told when a record could not be read (it never has
    words of its own: a chat record carries none); ``zh``: in Chinese."""
    if zh:
        note = "抱歉，这份聊天记录没能读取。"
        return f"{note}请重新转发，或把需要的消息直接粘贴过来。" if not has_text else note
    note = "Sorry, I could not read that chat record."
    return f"{note} Please forward it again, or paste the messages you need." if not has_text else note


def flatten_record(items: Sequence[Mapping[str, Any]], record_id: str) -> list[Mapping[str, Any]]:
    """The messages of the record ``record_id`` in order, from the items
    ``GET .../messages/:id`` answered with: each message under its parent
    (``upper_message_id``; none: the record), a record inside it replaced by
    its own messages (down to :data:`MAX_DEPTH`), the order of the answer
    kept among siblings."""
    children: dict[str, list[Mapping[str, Any]]] = {}
    for item in items:
        mid = str(item.get("message_id") or "")
        if mid == record_id:
            continue
        parent = str(item.get("upper_message_id") or "") or record_id
        children.setdefault(parent, []).append(item)
    out: list[Mapping[str, Any]] = []

    def walk(parent: str, depth: int, seen: frozenset[str]) -> None:
        for item in children.get(parent, ()):
            if len(out) >= MAX_MESSAGES:
                return
            mid = str(item.get("message_id") or "")
            nested = item.get("msg_type") == RECORD_TYPE and mid and mid not in seen
            if nested and depth < MAX_DEPTH and children.get(mid):
                walk(mid, depth + 1, seen | {mid})
            else:
                out.append(item)

    walk(record_id, 1, frozenset({record_id}))
    return out


def sender_of(item: Mapping[str, Any]) -> tuple[str, str]:
    """(kind, id): kind "user" or "app" (anything not a user)."""
    sender = item.get("sender")
    sender = sender if isinstance(sender, Mapping) else {}
    kind = "user" if sender.get("sender_type", "user") == "user" else "app"
    return kind, str(sender.get("id") or "")


def people_in(messages: Iterable[Mapping[str, Any]], *, forwarder: str) -> list[str]:
    """The users (ids) who wrote ``messages``, but the one who forwarded
    them, by first appearance: whose names are worth looking up."""
    seen: dict[str, None] = {}
    for item in messages:
        kind, sid = sender_of(item)
        if kind == "user" and sid and sid != forwarder:
            seen.setdefault(sid, None)
    return list(seen)


def to_forwarded(
    messages: Sequence[Mapping[str, Any]], *, app_id: str, forwarder: str, names: Mapping[str, str]
) -> tuple[Forwarded, ...]:
    """``messages`` (:func:`flatten_record`) as forwarded messages: each
    one's words (a mark for what it held instead), its author (see the
    module docstring) and when it was first sent."""
    labels: dict[str, str] = {}
    out: list[Forwarded] = []
    for item in messages:
        kind, sid = sender_of(item)
        if kind == "app":
            author = "you" if sid == app_id else "a bot"
        elif sid and sid == forwarder:
            author = "the user"
        elif sid in names:
            author = names[sid]
        else:
            author = labels.setdefault(sid, f"person {len(labels) + 1}")
        out.append(Forwarded(author=author, text=message_words(item), sent_at=_sent_at(item.get("create_time"))))
    return tuple(out)


def message_words(item: Mapping[str, Any]) -> str:
    """One message of a record as words: a text's or post's (mentions by
    name), a card's, a mark for a picture, file, voice, video or sticker,
    a line for a shared location, task, vote, event, chat or contact."""
    msg_type = str(item.get("msg_type") or "")
    if item.get("deleted"):
        return "[message withdrawn]"
    try:
        content = content_of(item)
    except EventParseError:
        return f"[{msg_type or 'message'}]"
    # No bot_open_id: a mention of the bot in someone else's chat stays a name.
    names = fetched_mention_names(item, None)
    if msg_type == "text":
        words = resolve_placeholders(str(content.get("text") or ""), names)
    elif msg_type == "post":
        words = flatten_post_content(content, names, None)[0]
    elif msg_type == "interactive":
        words = card_text(content)
    elif msg_type in SHARED_TYPES:
        words = shared_words(msg_type, content)
    elif msg_type == RECORD_TYPE:
        words = "[chat record]"  # one whose messages the answer did not hold, or nested too deep
    else:
        words = media_mark(msg_type, content) or _other_mark(msg_type, content)
    return words.strip() or f"[{msg_type or 'message'}]"


def _other_mark(msg_type: str, content: Mapping[str, Any]) -> str:
    if msg_type == "hongbao":
        return "[red packet]"
    if msg_type == "video_chat":
        return "[video call]"
    if msg_type == "system":
        return "[system message]"
    return f"[{msg_type or 'message'}]"


def _sent_at(ms: Any) -> datetime | None:
    try:
        return datetime.fromtimestamp(int(ms) / 1000, UTC)
    except (TypeError, ValueError, OverflowError, OSError):
        return None


class Names:
    """Users' display names from the contact directory, for the authors of
    a chat record: cached for the process (a name found, a user out of the
    app's range). An app without the contact permission is asked again only
    after ``off_for`` seconds (granting it takes effect without a restart),
    and said so once a time at warning level; every other failure labels
    the authors quietly. Never raises: a name is a nicety, the record is
    read without it."""

    def __init__(
        self,
        lookup: Callable[[str], Awaitable[str]],
        *,
        timeout: float = NAME_TIMEOUT,
        off_for: float = 3600.0,
        clock: Callable[[], float] = time.monotonic,
        maxsize: int = 10_000,
    ) -> None:
        self._lookup = lookup
        self._timeout = timeout
        self._off_for = off_for
        self._clock = clock
        self._maxsize = maxsize
        self._names: dict[str, str] = {}
        self._missing: set[str] = set()  # out of the app's range, or no name it may read
        self._off_until: float | None = None
        self._log = structlog.get_logger(channel="feishu")
        self.lookups = 0  # asked of Feishu, for tests and debug output

    def settled(self, open_id: str) -> bool:
        """Whether asking for ``open_id``'s name now would not wait on
        Feishu: found before, out of the app's range, or the permission is off."""
        off = self._off_until is not None and self._clock() < self._off_until
        return off or open_id in self._names or open_id in self._missing

    def known(self, open_id: str) -> str | None:
        """``open_id``'s name when :meth:`settled` ("" when it has none to
        give); None when asking would wait on Feishu."""
        return self._names.get(open_id, "") if self.settled(open_id) else None

    async def of(self, open_ids: Sequence[str]) -> dict[str, str]:
        """The names known of ``open_ids`` (missing ones left out), looking
        up those not known yet within the timeout."""
        off = self._off_until is not None and self._clock() < self._off_until
        wanted = [] if off else [i for i in open_ids if i not in self._names and i not in self._missing]
        if wanted:
            tasks = [asyncio.ensure_future(self._one(i)) for i in wanted[:MAX_LOOKUPS]]
            _, late = await asyncio.wait(tasks, timeout=self._timeout)
            for task in late:
                task.cancel()
            if late:
                await asyncio.gather(*late, return_exceptions=True)
                self._log.debug("contact names not all found in time", late=len(late))
        return {i: self._names[i] for i in open_ids if i in self._names}

    async def _one(self, open_id: str) -> None:
        if self._off_until is not None and self._clock() < self._off_until:
            return  # another lookup of this record found the permission missing
        self.lookups += 1
        try:
            name = await self._lookup(open_id)
        except FeishuApiError as exc:
            # A missing scope, as against this one user being out of the app's range.
            if exc.code in SCOPE_DENIED_CODES:
                if self._off_until is None or self._clock() >= self._off_until:
                    self._log.warning("the Feishu app may not read contact names (contact:user.base:readonly); "
                                      "chat record authors are labelled instead", code=exc.code)
                self._off_until = self._clock() + self._off_for
            elif not exc.retryable:
                self._remember(self._missing, open_id)
                self._log.debug("no contact name for a chat record author", code=exc.code)
            else:
                self._log.debug("contact name lookup failed", code=exc.code, status=exc.status)
            return
        if name:
            self._remember(self._names, open_id, name)
        else:
            self._remember(self._missing, open_id)

    def _remember(self, store: dict[str, str] | set[str], key: str, value: str = "") -> None:
        if len(store) >= self._maxsize:
            store.clear()  # a crude bound: names are cheap to ask again
        if isinstance(store, dict):
            store[key] = value
        else:
            store.add(key)
