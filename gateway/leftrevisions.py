"""Applying, at start, the edits, recalls and members' leavings a stop
or a crash cut.

A recall (Feishu) or an edit (Telegram) is kept in gateway.db's
``revisions`` table from the moment it is taken (gateway/inbox.py) until
the process loop applied it. One the last run never applied (queued
behind a turn the stop cut, still in a Feishu chat's lane, on the bus at
a crash) is applied here, in arrival order, before the extraction worker
starts (the recalled words are then never sent to the memory model) and
before the cut turns and the inbox's messages are resumed:

* a recall drops the recalled message from the inbox if it is still
  there (never answered: the user withdrew it), then is applied as the
  loop applies one (gateway/revisions.py: Tier 0, the extraction buffer,
  the facts drawn from it, a reply to it waiting in the outbox);
* an edit is applied as the loop applies one; an edit of a message still
  waiting in the inbox (its turn never began) changes the words kept
  there, so it is answered as the user now has it (a comment sent with
  forwards: that comment's words among the message's);
* a member's leaving a group (LEFT) takes away what spoke for them there
  (``left``: the loop's :meth:`~gateway.loop.ProcessLoop.member_gone`,
  their cron jobs in that group); doing it twice removes nothing more.

A revision that fails to apply stays for the next start (logged, its
attempts counted); after :data:`~gateway.inbox.REVISION_ATTEMPTS` failures
it is dropped (gateway/inbox.py). The others go on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog

from .bus import EDIT, LEFT, RECALL, InboundMessage
from .inbox import Inbox
from .logging import error_fields
from .revisions import Revisions

__all__ = ["LeftRevisions", "apply_left_revisions"]

log = structlog.get_logger(component="gateway")


@dataclass(frozen=True)
class LeftRevisions:
    """What :func:`apply_left_revisions` did: the recalls applied (their
    channels may still have a reply of the bot's to withdraw), how many
    edits and leavings were applied, how many failed (left for the next
    start, but for those ``dropped`` after their last attempt)."""

    recalls: tuple[InboundMessage, ...] = ()
    edits: int = 0
    failed: int = 0
    left: int = 0
    dropped: int = 0


async def apply_left_revisions(
    inbox: Inbox, revisions: Revisions, left: Callable[[InboundMessage], Awaitable[object]] | None = None
) -> LeftRevisions:
    recalls: list[InboundMessage] = []
    edits = failed = gone = dropped = 0
    for rev in await inbox.revisions():
        msg = rev.msg
        try:
            if msg.kind == RECALL:
                dropped = await inbox.drop_message(msg.channel, msg.chat_id, msg.message_id)
                done = await revisions.apply(msg)
                recalls.append(msg)
                log.info("recall a stop left unapplied applied", chat=msg.session_key, message_id=msg.message_id,
                         done=done, waiting_dropped=dropped)
            elif msg.kind == EDIT:
                done = await revisions.apply(msg)
                if done == "unknown" and await inbox.edit_waiting(msg):
                    done = "edited waiting"
                edits += 1
                log.info("edit a stop left unapplied applied", chat=msg.session_key, message_id=msg.message_id,
                         done=done)
            elif msg.kind == LEFT and left is not None:
                await left(msg)
                gone += 1
            await inbox.drop_revision(rev)
        except Exception as exc:  # gateway.db or memory failing: kept for the next start, the rest still tried
            failed += 1
            log.error("edit, recall or leaving a stop left unapplied could not be applied; tried again at the next "
                      "start", chat=msg.session_key, message_id=msg.message_id, kind=msg.kind, **error_fields(exc))
            try:
                dropped += await inbox.revision_failed(rev)
            except Exception as count_exc:  # gateway.db itself failing: the row stays as it was
                log.error("failed edit, recall or leaving not counted", id=rev.id, **error_fields(count_exc))
    return LeftRevisions(tuple(recalls), edits, failed, gone, dropped)
