"""Answering, at start, the messages whose turn a stop cut.

The gateway killed (SIGKILL, OOM, power) while the model writes a reply
leaves the user's message in Tier 0 (written while the model runs,
gateway/loop.py) and nothing answering it; the platform will not send it
again (Telegram's offset is confirmed by the next poll, Feishu's event was
acknowledged). At the next start, :func:`resume_cut_turns` hands each such
message back to the process loop, as if redelivered (its row is not
written twice), oldest first. That runs before any channel or webhook can
deliver a message (a new one would no longer leave the cut turn its
chat's last row, or be taken for one and answered ahead of it), and the
resumed turns wait (``ProcessLoop.resume_gate``) until the replies kept
in the outbox from the last run are held, so theirs go out after.

The message is rebuilt from its row's words (as an edit may have left
them) and its context: one that forwards messages is taken apart again
into the forwards (authors and dates kept in the context, words as the
history shows them) and the user's own words, so it is recalled for,
answered and cited (memory_save: "from a message you forwarded") as the
forward it was.

A cut turn is the last row of its chat's current session (a chat's turns
run one after another), a user row, with:

* its :class:`TurnContext`, how the loop got it (group or not, addressed
  or not, its routing, what a private chat's message replied to). Rows
  without one are not answered: written before it was kept, a scheduled
  job's (the scheduler runs those again), or a message whose pictures,
  files or (in a group) quoted message Tier 0 does not keep (answering the
  words alone would answer something else);
* a platform message id (one the gateway made up answers nothing);
* memory allowed to learn from it: an incognito turn is not answered
  again (the user turned the bot's attention away; not picked up later);
* no reply to it waiting in the outbox (that goes out from there, once);
* no apology sent for it, no reply whose own row could not be written
  (a full disk), and not refused over the rate limit when it was resumed
  (the row's context is then ``APOLOGISED``, written before the apology,
  the reply or the limit's note is sent): that was its one answer;
* written within ``gateway.resumeWithinMinutes``: an older one gets
  nothing, logged.

Not answered because never stored: commands (kept out of Tier 0; a cut
``/forget all`` is not run again unasked), messages over the rate limit
(the user was told), group messages not addressed to the bot, stickers.
A superseded turn's rows are erased before the turn that took it in
starts, and a recalled message's row is erased with it.

The reply's own row is written before the reply is sent (gateway/loop.py),
so a reply that went out is never answered again; the cost is the other
way round: a stop after the row is written but before the send finishes
loses that reply (the row says answered), as a stop always lost a reply
still queued. Once sent, a second answer would be worse than none.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

import structlog

from memory.clock import format_ts, parse_ts

from .bus import MESSAGE, ROUTING_KEYS, InboundMessage, Quoted, forwards_from_history
from .outbox import Outbox
from .prompt import QUOTE_CHARS
from .sessions import APOLOGISED, SessionStore, StoredMessage

__all__ = ["Resumed", "TurnContext", "resume_cut_turns"]

log = structlog.get_logger(component="gateway")

# Rows older than the window are still looked at (and logged as skipped) this far back.
_LOOK_BACK = timedelta(days=1)


@dataclass(frozen=True)
class TurnContext:
    """What the loop knew of a message beyond its words and sender."""

    is_group: bool = False
    mentioned: bool = False
    reply_to_bot: bool = False
    sender_name: str = ""
    routing: Mapping[str, Any] = field(default_factory=dict)  # bus.ROUTING_KEYS (a forum topic)
    locale: str = ""
    # Each forwarded message's author and when it was first sent: with the
    # row's words (which hold the forwards' own) the message is rebuilt as
    # the forward it was, so it is answered and cited as one.
    forwards: tuple[tuple[str, datetime | None], ...] = ()
    # What a private chat's message replied to (the bot's words, the user's
    # own, a post they chose to bring), as much as the prompt shows; a
    # group's is never kept (another member's words).
    quoted: Quoted | None = None

    @classmethod
    def of(cls, msg: InboundMessage) -> TurnContext | None:
        """None for a message Tier 0 does not keep whole: its pictures,
        files or (in a group) the message it quotes went to the model with it only."""
        if msg.kind != MESSAGE or msg.images or msg.documents or (msg.quoted is not None and msg.is_group):
            return None
        q = msg.quoted
        return cls(
            quoted=None if q is None else Quoted(q.author, q.text.strip()[:QUOTE_CHARS], q.partial),
            is_group=msg.is_group, mentioned=msg.mentioned, reply_to_bot=msg.reply_to_bot,
            sender_name=msg.sender_name, routing={k: msg.metadata[k] for k in ROUTING_KEYS if k in msg.metadata},
            locale=msg.locale, forwards=tuple((f.author, f.sent_at) for f in msg.forwarded),
        )

    def dumps(self) -> str:
        d: dict[str, Any] = {"g": self.is_group, "m": self.mentioned, "r": self.reply_to_bot, "n": self.sender_name,
                             "k": dict(self.routing), "l": self.locale}
        if self.forwards:
            d["f"] = [[a, format_ts(t) if t is not None else ""] for a, t in self.forwards]
        if self.quoted is not None:
            d["q"] = [self.quoted.author, self.quoted.text, self.quoted.partial]
        return json.dumps(d, ensure_ascii=False)

    @classmethod
    def loads(cls, text: str) -> TurnContext | None:
        """None for "" (not kept) or anything unreadable."""
        try:
            d = json.loads(text) if text else None
        except ValueError:
            return None
        if not isinstance(d, dict):
            return None
        routing = d.get("k")
        forwards = d.get("f")
        try:
            origins = tuple((str(a), parse_ts(t) if t else None) for a, t in forwards) if isinstance(forwards, list) else ()
        except (TypeError, ValueError):
            return None
        q = d.get("q")
        if q is not None and not (isinstance(q, list) and len(q) == 3):
            return None
        return cls(is_group=bool(d.get("g")), mentioned=bool(d.get("m")), reply_to_bot=bool(d.get("r")),
                   sender_name=str(d.get("n") or ""), routing=routing if isinstance(routing, dict) else {},
                   locale=str(d.get("l") or ""), forwards=origins,
                   quoted=None if q is None else Quoted(str(q[0]), str(q[1]), bool(q[2])))

    def message(self, row: StoredMessage) -> InboundMessage:
        """``row`` as the loop first got it: its words as Tier 0 keeps them,
        a forward's taken apart again (the user's own words, the forwards
        as the history shows them)."""
        placeholder, forwarded, text = forwards_from_history(row.content, self.forwards)
        return InboundMessage(
            channel=row.channel, chat_id=row.chat_id, sender_id=row.sender_id, text=text,
            message_id=row.message_id, timestamp=parse_ts(row.created_at), is_group=self.is_group,
            mentioned=self.mentioned, reply_to_bot=self.reply_to_bot, sender_name=self.sender_name,
            metadata=dict(self.routing), locale=self.locale, placeholder=placeholder, forwarded=forwarded,
            quoted=self.quoted,
        )


class Resumer(Protocol):
    def resume(self, msg: InboundMessage, row: StoredMessage) -> None: ...


@dataclass(frozen=True)
class Resumed:
    answered: list[StoredMessage]  # handed to the loop, oldest first
    skipped: list[tuple[StoredMessage, str]]  # with why


async def resume_cut_turns(
    loop: Resumer, sessions: SessionStore, outbox: Outbox, *, now: datetime, within: timedelta
) -> Resumed:
    """Hand the turns a stop cut within ``within`` of ``now`` back to
    ``loop`` (see the module docstring); logs each one skipped, with its
    chat, id, age and why, never its words."""
    done = Resumed([], [])
    if within <= timedelta(0):
        return done
    since = now - max(within, _LOOK_BACK)
    for row in await sessions.unanswered_last(format_ts(since)):
        context = TurnContext.loads(row.context)
        age = now - parse_ts(row.created_at)
        why = ""
        if row.context == APOLOGISED:
            why = "answered with an apology"  # or with the rate limit's note (resumed, refused)
        elif context is None:
            why = "not kept whole (a job's, a picture's, a file's, a quote's, or from before)"
        elif not row.message_id or row.message_id.startswith("g-"):
            why = "no platform message id"
        elif not row.learn:
            why = "incognito"
        elif age > within:
            why = "older than gateway.resumeWithinMinutes"
        elif context.is_group and not (context.mentioned or context.reply_to_bot):
            why = "a group message not addressed to the bot"
        elif await outbox.answering(row.channel, row.chat_id, row.message_id):
            why = "its reply waits in the outbox"
        if why:
            done.skipped.append((row, why))
            log.info("message a stop left unanswered: not answered now", reason=why, channel=row.channel,
                     chat_id=row.chat_id, message_id=row.message_id, age_s=round(age.total_seconds()))
            continue
        assert context is not None
        done.answered.append(row)
        log.warning("answering a message a stop left unanswered", channel=row.channel, chat_id=row.chat_id,
                    message_id=row.message_id, age_s=round(age.total_seconds()))
        loop.resume(context.message(row), row)
    return done
