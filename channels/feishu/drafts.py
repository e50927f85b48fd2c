"""A reply shown while it is written: one Feishu message per reply, edited.

The first draft of a reply (``OutboundMessage.draft``, keyed by its
``send_key``) goes out as a message of its own; later drafts edit that
message (``PUT /open-apis/im/v1/messages/:id``), and the finished reply
edits it once more into its first part (``FeishuChannel.send``). Feishu
allows :data:`~.client.EDIT_LIMIT` (20) edits per message, so drafts stop
at :data:`DRAFT_EDITS`, which keeps two for the reply: its own edit and a
retry of it whose first answer was lost (it may have counted). Edits are
spaced at least :data:`EDIT_INTERVAL` apart; a draft that comes sooner is
skipped (the next one, or the reply, shows its words anyway).

A draft shows what its reply's first part would, cut at one message
(:func:`preview`): the same post/md or text as the reply, with a code
block the model has opened but not yet closed closed, so the rest of the
message does not read as code and the fence is not shown raw. Unfinished
emphasis ("**bo") needs nothing: Markdown leaves it as text.

Rate limits: an edit or first send Feishu answers with a rate limit
(230020, "This operation triggers the frequency limit.", or the platform's
99991400 / HTTP 429) skips that draft, and the reply's later drafts wait
:data:`RATE_LIMIT_PAUSE` (doubling to :data:`MAX_PAUSE` while the limit
lasts). The reply's own edit is retried by the client (its bounded
backoff); still limited after that, the reply goes out as new messages
and the draft message is withdrawn, as for a message that cannot be
edited any more.

Kept in memory, bounded in count and age (:class:`Drafts`), and, given a
:class:`DraftStore` (the gateway passes its table in gateway.db,
``gateway/draftmessages.py``), the draft message's id per reply
``send_key`` is kept on disk from its first draft until the reply is out,
so a reply sent later (from the outbox, after a restart) still becomes
that message. A row is marked :meth:`DraftStore.finishing` before the
reply's edit, and removed once the reply is out (or the draft withdrawn).
At start the channel withdraws the draft messages whose reply will never
come (:meth:`DraftStore.orphans`: no row of theirs waits in the outbox; the
run that showed them stopped mid-turn): withdrawn rather than edited into
a "(reply interrupted)" note, because a withdrawal needs none of the
message's 20 edits, which a long draft may have spent, nor a guess at the
chat's language, and it is what a stale draft gets anyway. One marked
finishing may already be the reply's first part: it is left in the chat,
its row dropped. The small window between Feishu answering a first draft
and its row being written is not covered: a crash there leaves that draft
standing, as before. A reply the gateway drops after its drafts were shown
(its turn superseded, or cut by a stop: ``OutboundMessage.dropped``) has
its draft message withdrawn at once (``FeishuChannel.drop_draft``); one
Feishu could not withdraw then is an orphan for the next start. One Feishu
refuses to withdraw as past the tenant's recall window (230009: its admin
may set it to minutes) is edited into a short "(stopped)" note instead,
the one edit a note needs being among the two drafts keep free.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from channels.markdown import part_openers

from .client import EDIT_LIMIT, render, split_text

__all__ = [
    "DRAFT_EDITS", "DRAFT_KEEP", "DRAFT_TTL", "EDIT_INTERVAL", "MAX_PAUSE", "RATE_LIMIT_PAUSE", "Draft", "DraftStore",
    "Drafts", "StoredDraft", "preview",
]

DRAFT_EDITS = EDIT_LIMIT - 2  # the reply's edit, and one retry of it, stay free
EDIT_INTERVAL = 1.5  # seconds between two edits of one draft message
DRAFT_TTL = 600.0  # seconds a reply's draft message is remembered in memory, unused (the store keeps it on)
DRAFT_KEEP = 24 * 3600.0  # seconds a stored one is: past it Feishu refuses to withdraw it, the outbox drops its reply
RATE_LIMIT_PAUSE = 3.0  # seconds a reply's drafts wait after Feishu said "too often"
MAX_PAUSE = 30.0  # ... doubling while it keeps saying so
_FENCE_MARKER = re.compile(r" {0,3}(`{3,}|~{3,})")


@dataclass
class Draft:
    """The message showing one reply's drafts. ``lock``: a reply's drafts
    and the reply itself go out one at a time, so the reply never misses a
    draft message still being sent."""

    used: float  # when it was last opened or looked at (Drafts forgets the least recently used)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    message_id: str = ""  # "" until the first draft is out
    shown: tuple[str, str] | None = None  # (content, msg_type) Feishu last accepted
    edits: int = 0  # tried, not only answered: a lost answer may have counted
    last_at: float = float("-inf")  # when it was last sent or edited
    done: bool = False  # it is the reply's first part now (or cannot be): drafts leave it alone
    pause: float = 0.0  # the last rate limit's wait, 0 once Feishu took one again
    resume_at: float = float("-inf")  # no draft goes out before (a rate limit)
    stored: bool = False  # its message id has a row in the DraftStore
    looked_up: bool = False  # the DraftStore was asked for it (a reply coming after a restart)


@dataclass(frozen=True)
class StoredDraft:
    """A draft message kept on disk: reply ``send_key``'s drafts show in
    ``message_id`` of ``chat_id``, since ``created_at`` (wall-clock
    seconds). ``finishing``: the reply was being edited into it."""

    send_key: str
    chat_id: str
    message_id: str
    created_at: float
    finishing: bool = False


class DraftStore(Protocol):
    """Where a channel keeps its draft messages across restarts. Each call
    is one statement or one transaction: a crash leaves a row or none."""

    async def put(self, draft: StoredDraft, *, expired_before: float) -> None:
        """Keep ``draft`` (replacing the key's row) and drop rows created
        before ``expired_before``."""
        ...

    async def get(self, send_key: str) -> StoredDraft | None: ...

    async def finishing(self, send_key: str) -> None:
        """The reply is about to be edited into the draft."""
        ...

    async def remove(self, send_key: str) -> None: ...

    async def orphans(self) -> list[StoredDraft]:
        """Rows whose reply does not wait in the outbox, oldest first."""
        ...


class Drafts:
    """Reply ``send_key`` -> its :class:`Draft`; one unused for ``ttl``
    is forgotten, the least recently used first. By use, not by age: a
    turn still drafting after ``ttl`` (tool calls, a slow model) must keep
    its message, not start a second one."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, *, maxsize: int = 1000,
                 ttl: float = DRAFT_TTL) -> None:
        self._clock = clock
        self._maxsize = maxsize
        self._ttl = ttl
        self._drafts: OrderedDict[str, Draft] = OrderedDict()

    def get(self, key: str) -> Draft | None:
        self._expire()
        draft = self._drafts.get(key)
        if draft is not None:
            self._use(key, draft)
        return draft

    def open(self, key: str) -> Draft:
        """The draft of reply ``key``, new if it has none."""
        self._expire()
        draft = self._drafts.get(key)
        if draft is None:
            draft = self._drafts[key] = Draft(used=self._clock())
            while len(self._drafts) > self._maxsize:
                self._drafts.popitem(last=False)
        else:
            self._use(key, draft)
        return draft

    def _use(self, key: str, draft: Draft) -> None:
        draft.used = self._clock()
        self._drafts.move_to_end(key)

    def __len__(self) -> int:
        return len(self._drafts)

    def _expire(self) -> None:
        now = self._clock()
        while self._drafts and now - next(iter(self._drafts.values())).used >= self._ttl:
            self._drafts.popitem(last=False)


def preview(text: str) -> tuple[str, str] | None:
    """A draft's ``(content, msg_type)``, formatted as the reply's first
    part will be (:func:`~.client.render`); None when there is nothing to
    show yet. Past one message, the first message's worth and "…" (the
    reply sends the rest); a code block left open is closed."""
    chunks = split_text(text)
    if not chunks:
        return None
    shown = chunks[0] + ("…" if len(chunks) > 1 else "")
    opener = part_openers([shown, ""])[1]
    if "\n" not in opener and (m := _FENCE_MARKER.match(opener)) is not None:  # a table's opener has two lines
        shown += "\n" + m.group(1)
    return render(shown)
