"""Drafts of a reply still being written (``agent.streaming``).

The agent streams the chat model's answer and hands each longer text to a
:class:`Drafts` (its ``on_text``). A reply that is done within ``delay``
publishes nothing, so a quick answer arrives whole, as without streaming;
a slower one publishes its text so far as a draft
(``OutboundMessage.draft``) once ``delay`` has passed, then at most once
per ``interval``. The finished reply goes out as usual under the same
``send_key`` (:attr:`Drafts.send_key`), which is how a channel ties it to
the drafts it showed.

Drafts are offered to the bus without waiting (``MessageBus.offer_outbound``):
the model's stream is never held up by a busy channel, and a draft that
finds the queue full is simply not shown.

While the turn runs, the beat (:meth:`Drafts.start`) also repeats the latest draft every
:data:`REFRESH` seconds once ``delay`` has passed, with empty text before
any words came (the model still reading, a tool running): a channel shows
that the bot is at work (Telegram: "typing…" in a group, its "thinking"
draft in a private chat), and a platform that forgets an indicator or a
draft after a few seconds keeps showing it. The beat is a timer on the
event loop, not a task: a turn that ends within ``delay`` costs one timer
set and cancelled.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from .bus import InboundMessage, MessageBus, OutboundMessage

__all__ = ["REFRESH", "Drafts", "Schedule"]

# Seconds between repeats of an unchanged draft: Telegram's "typing…" lasts
# five seconds, its drafts thirty.
REFRESH = 4.0


class _Timer(Protocol):
    def cancel(self) -> None: ...


# ``loop.call_later``: run a callback in so many seconds.
Schedule = Callable[[float, Callable[[], None]], _Timer]


class Drafts:
    """The ``on_text`` of one streamed reply to ``msg``."""

    def __init__(
        self,
        bus: MessageBus,
        msg: InboundMessage,
        *,
        owner: str,
        delay: float,
        interval: float,
        started: float | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        """``started``: when the turn began (``monotonic``'s clock; now by
        default): the delay counts from there, retrieval included."""
        self.bus = bus
        self.send_key = uuid.uuid4().hex
        self._msg, self._owner = msg, owner
        self._template: OutboundMessage | None = None  # made at the first draft: most replies show none
        self._delay = delay
        self._interval = interval
        self._monotonic = monotonic
        self._started = monotonic() if started is None else started
        self._last = float("-inf")  # when the last draft with words was published
        self._sent = float("-inf")  # when the last draft of any kind was
        self._shown = ""
        self._schedule: Schedule | None = None
        self._timer: _Timer | None = None
        self.published = 0
        self._replied = False  # reply() made the reply (or drop() dropped it)

    def __call__(self, text: str) -> None:
        now = self._monotonic()
        if self._replied or now - self._started < self._delay or now - self._last < self._interval:
            return
        text = text.strip()
        if not text or text == self._shown:
            return
        self._offer(text, now)

    def _offer(self, text: str, now: float) -> None:
        if self._template is None:
            self._template = replace(OutboundMessage.answering(self._msg, "", owner=self._owner),
                                     send_key=self.send_key, draft=True)
        if self.bus.offer_outbound(replace(self._template, text=text)):
            if text:  # "at work" holds no words back: the first words follow it at once
                self._last = now
            self._sent = now
            self._shown = text
            self.published += 1

    def start(self, schedule: Schedule) -> None:
        """Until :meth:`stop` (the turn is over): from ``delay`` on, repeat
        the latest draft (empty before any words) whenever none went out for
        :data:`REFRESH` seconds. ``schedule`` is ``loop.call_later``."""
        self._schedule = schedule
        self._beat()

    def stop(self) -> None:
        self._schedule = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _beat(self) -> None:
        if self._schedule is None:
            return
        now = self._monotonic()
        due = max(self._started + self._delay, self._sent + REFRESH)
        if now >= due:
            self._offer(self._shown, now)
            due = now + REFRESH
        self._timer = self._schedule(max(0.05, due - now), self._beat)

    def reply(self, msg: OutboundMessage) -> OutboundMessage:
        """``msg``, the finished reply (or the apology), under this reply's
        ``send_key``, so that it takes the drafts' place."""
        self._replied = True
        return replace(msg, send_key=self.send_key, draft=False)

    def drop(self) -> None:
        """The reply will not come (the turn was dropped): the drafts
        stop, and if any was offered, the channel is told to take them
        away (``OutboundMessage.dropped``). Offered, not awaited: it is
        called from a turn being cancelled. Nothing once :meth:`reply` made
        the reply, which takes the drafts' place itself; a full queue
        leaves them (Feishu withdraws its draft message at the next start)."""
        self.stop()
        if self._replied or self._template is None:
            return
        self._replied = True  # once
        self.bus.offer_outbound(replace(self._template, text="", draft=False, dropped=True))
