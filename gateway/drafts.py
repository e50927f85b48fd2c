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

While the turn runs, :meth:`Drafts.run` also repeats the latest draft every
:data:`REFRESH` seconds once ``delay`` has passed, with empty text before
any words came (the model still reading, a tool running): a channel shows
that the bot is at work (Telegram: "typing…" in a group, its "thinking"
draft in a private chat), and a platform that forgets an indicator or a
draft after a few seconds keeps showing it.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace

from .bus import InboundMessage, MessageBus, OutboundMessage

__all__ = ["REFRESH", "Drafts"]

# Seconds between repeats of an unchanged draft: Telegram's "typing…" lasts
# five seconds, its drafts thirty.
REFRESH = 4.0


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
        self._template = replace(OutboundMessage.answering(msg, "", owner=owner), send_key=self.send_key, draft=True)
        self._delay = delay
        self._interval = interval
        self._monotonic = monotonic
        self._started = monotonic() if started is None else started
        self._last = float("-inf")  # when the last draft with words was published
        self._sent = float("-inf")  # when the last draft of any kind was
        self._shown = ""
        self.published = 0

    def __call__(self, text: str) -> None:
        now = self._monotonic()
        if now - self._started < self._delay or now - self._last < self._interval:
            return
        text = text.strip()
        if not text or text == self._shown:
            return
        self._offer(text, now)

    def _offer(self, text: str, now: float) -> None:
        if self.bus.offer_outbound(replace(self._template, text=text)):
            if text:  # "at work" holds no words back: the first words follow it at once
                self._last = now
            self._sent = now
            self._shown = text
            self.published += 1

    async def run(self, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        """Until cancelled (the turn is over): from ``delay`` on, repeat the
        latest draft (empty before any words) whenever none went out for
        :data:`REFRESH` seconds."""
        while True:
            now = self._monotonic()
            due = max(self._started + self._delay, self._sent + REFRESH)
            if now >= due:
                self._offer(self._shown, now)
                due = now + REFRESH
            await sleep(max(0.05, due - now))

    def reply(self, msg: OutboundMessage) -> OutboundMessage:
        """``msg``, the finished reply (or the apology), under this reply's
        ``send_key``, so that it takes the drafts' place."""
        return replace(msg, send_key=self.send_key, draft=False)
