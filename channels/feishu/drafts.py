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

Kept in memory, bounded in count and age (:class:`Drafts`): after a
restart, or :data:`DRAFT_TTL` after its first draft, a reply goes out as
new messages and its last draft stays as it was.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from channels.markdown import part_openers

from .client import EDIT_LIMIT, render, split_text

__all__ = ["DRAFT_EDITS", "DRAFT_TTL", "EDIT_INTERVAL", "Draft", "Drafts", "preview"]

DRAFT_EDITS = EDIT_LIMIT - 2  # the reply's edit, and one retry of it, stay free
EDIT_INTERVAL = 1.5  # seconds between two edits of one draft message
DRAFT_TTL = 600.0  # seconds a reply's draft message is remembered
_FENCE_MARKER = re.compile(r" {0,3}(`{3,}|~{3,})")


@dataclass
class Draft:
    """The message showing one reply's drafts. ``lock``: a reply's drafts
    and the reply itself go out one at a time, so the reply never misses a
    draft message still being sent."""

    born: float
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    message_id: str = ""  # "" until the first draft is out
    shown: tuple[str, str] | None = None  # (content, msg_type) Feishu last accepted
    edits: int = 0  # tried, not only answered: a lost answer may have counted
    last_at: float = float("-inf")  # when it was last sent or edited
    done: bool = False  # it is the reply's first part now (or cannot be): drafts leave it alone


class Drafts:
    """Reply ``send_key`` -> its :class:`Draft`, the oldest forgotten first."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, *, maxsize: int = 1000,
                 ttl: float = DRAFT_TTL) -> None:
        self._clock = clock
        self._maxsize = maxsize
        self._ttl = ttl
        self._drafts: OrderedDict[str, Draft] = OrderedDict()

    def get(self, key: str) -> Draft | None:
        self._expire()
        return self._drafts.get(key)

    def open(self, key: str) -> Draft:
        """The draft of reply ``key``, new if it has none."""
        self._expire()
        draft = self._drafts.get(key)
        if draft is None:
            draft = self._drafts[key] = Draft(born=self._clock())
            while len(self._drafts) > self._maxsize:
                self._drafts.popitem(last=False)
        return draft

    def __len__(self) -> int:
        return len(self._drafts)

    def _expire(self) -> None:
        now = self._clock()
        while self._drafts and now - next(iter(self._drafts.values())).born >= self._ttl:
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
