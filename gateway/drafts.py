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
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import replace

from .bus import InboundMessage, MessageBus, OutboundMessage

__all__ = ["Drafts"]


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
        self._last = float("-inf")  # when the last draft was published
        self._shown = ""
        self.published = 0

    def __call__(self, text: str) -> None:
        now = self._monotonic()
        if now - self._started < self._delay or now - self._last < self._interval:
            return
        text = text.strip()
        if not text or text == self._shown:
            return
        if self.bus.offer_outbound(replace(self._template, text=text)):
            self._last = now
            self._shown = text
            self.published += 1

    def reply(self, msg: OutboundMessage) -> OutboundMessage:
        """``msg``, the finished reply (or the apology), under this reply's
        ``send_key``, so that it takes the drafts' place."""
        return replace(msg, send_key=self.send_key, draft=False)
