"""Drafts of one streamed reply: when they are published, on a hand-moved
clock (no sleeping), and how the reply takes their place."""

from __future__ import annotations

from collections.abc import Callable

from gateway.bus import InboundMessage, MessageBus, OutboundMessage
from gateway.drafts import REFRESH, Drafts


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _drafts(bus: MessageBus, clock: Clock, *, delay: float = 1.0, interval: float = 1.0, group: bool = False) -> Drafts:
    msg = InboundMessage(channel="telegram", sender_id="7", chat_id="-5" if group else "7", text="q",
                         message_id="31", is_group=group, metadata={"message_thread_id": 9})
    return Drafts(bus, msg, owner="telegram:7", delay=delay, interval=interval, monotonic=clock)


def _queued(bus: MessageBus) -> list[OutboundMessage]:
    q = bus.outbound_queue("telegram")
    out = []
    while not q.empty():
        out.append(q.get_nowait())
    return out


def test_nothing_before_the_delay_then_at_most_one_per_interval() -> None:
    bus, clock = MessageBus(), Clock()
    drafts = _drafts(bus, clock)
    drafts("The")
    clock.now += 0.9
    drafts("The launch")
    assert _queued(bus) == []  # a reply done within the delay shows nothing
    clock.now += 0.2
    drafts("The launch moved")
    clock.now += 0.5
    drafts("The launch moved to")  # within the interval: skipped
    clock.now += 0.6
    drafts("The launch moved to")
    drafts("The launch moved to Thursday")
    sent = _queued(bus)
    assert [m.text for m in sent] == ["The launch moved", "The launch moved to"]
    assert all(m.draft and m.send_key == drafts.send_key and m.answers == "31" and m.owner == "telegram:7"
               for m in sent)
    assert sent[0].metadata == {"message_thread_id": 9}


def test_the_reply_takes_the_drafts_key_and_is_no_draft() -> None:
    bus, clock = MessageBus(), Clock()
    drafts = _drafts(bus, clock, group=True)
    reply = drafts.reply(OutboundMessage("telegram", "-5", "whole", reply_to="31"))
    assert reply.send_key == drafts.send_key and not reply.draft and reply.reply_to == "31"


def test_a_full_queue_loses_the_draft_not_the_stream() -> None:
    bus, clock = MessageBus(maxsize=1), Clock()
    drafts = _drafts(bus, clock, delay=0.0)
    bus.offer_outbound(OutboundMessage("telegram", "9", "someone else's reply"))
    drafts("words")  # returns at once; nothing queued
    assert [m.text for m in _queued(bus)] == ["someone else's reply"]
    drafts("words and more")  # not counted as shown: the next chance publishes it
    assert [m.text for m in _queued(bus)] == ["words and more"] and drafts.published == 1


class Timers:
    """``loop.call_later`` with the test as the clock: ``fire()`` runs the
    next timer, with the clock moved to its time."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.pending: list[tuple[float, Callable[[], None], Timer]] = []
        self.naps: list[float] = []

    def __call__(self, delay: float, callback: Callable[[], None]) -> Timer:
        timer = Timer()
        self.naps.append(delay)
        self.pending.append((self.clock.now + delay, callback, timer))
        return timer

    def fire(self) -> None:
        self.pending.sort(key=lambda p: p[0])
        at, callback, timer = self.pending.pop(0)
        assert not timer.cancelled
        self.clock.now = max(self.clock.now, at)
        callback()


class Timer:
    cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


def test_a_turn_done_within_the_delay_leaves_nothing_behind() -> None:
    bus, clock = MessageBus(), Clock()
    drafts = _drafts(bus, clock)
    timers = Timers(clock)
    drafts.start(timers)
    clock.now += 0.5
    drafts("the whole reply")  # within the delay: not shown
    drafts.stop()
    assert [t.cancelled for _, _, t in timers.pending] == [True] and _queued(bus) == [] and drafts.published == 0


def test_the_beat_shows_work_before_words_and_repeats_a_stale_draft() -> None:
    bus, clock = MessageBus(), Clock()
    drafts = _drafts(bus, clock)
    timers = Timers(clock)
    drafts.start(timers)
    assert _queued(bus) == [] and timers.naps == [1.0]  # waits out the delay
    timers.fire()
    [thinking] = _queued(bus)
    assert thinking.text == "" and thinking.draft  # at work, no words yet
    drafts("First words")  # words follow the empty draft at once, not an interval later
    assert [m.text for m in _queued(bus)] == ["First words"]
    timers.fire()
    assert [m.text for m in _queued(bus)] == ["First words"]  # repeated REFRESH after the empty one
    assert timers.naps[1] == REFRESH
    [(_, _, last)] = timers.pending
    drafts.stop()  # the turn is over: its timer goes with it
    assert last.cancelled and drafts.published == 3


def test_a_dropped_reply_tells_the_channel_once_and_only_after_drafts_were_shown() -> None:
    bus, clock = MessageBus(), Clock()
    quick = _drafts(bus, clock)
    quick("The")  # within the delay: nothing shown, nothing to take away
    quick.drop()
    assert _queued(bus) == []
    shown = _drafts(bus, clock)
    clock.now += 2
    shown("The launch")
    shown.drop()
    shown.drop()
    clock.now += 2
    shown("The launch moved")  # a late piece of a cancelled stream: the drafts are over
    [draft, dropped] = _queued(bus)
    assert draft.draft and draft.text == "The launch"
    assert dropped.dropped and not dropped.draft and dropped.text == "" and dropped.send_key == shown.send_key
    assert dropped.answers == "31" and dropped.owner == "telegram:7"
    # A reply that was made takes the drafts' place itself: no drop after it.
    answered = _drafts(bus, clock)
    clock.now += 2
    answered("The launch")
    answered.reply(OutboundMessage("telegram", "7", "The launch moved."))
    answered.drop()
    assert [m.dropped for m in _queued(bus)] == [False]
