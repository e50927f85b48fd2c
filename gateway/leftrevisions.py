"""Applying, at start, the edits and recalls a stop or a crash cut.

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
  there, so it is answered as the user now has it.

A revision that fails to apply stays for the next start (logged); the
others go on.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog

from .bus import EDIT, RECALL, InboundMessage
from .inbox import Inbox
from .logging import error_fields
from .revisions import Revisions

__all__ = ["LeftRevisions", "apply_left_revisions"]

log = structlog.get_logger(component="gateway")


@dataclass(frozen=True)
class LeftRevisions:
    """What :func:`apply_left_revisions` did: the recalls applied (their
    channels may still have a reply of the bot's to withdraw), how many
    edits were applied, how many are left for the next start."""

    recalls: tuple[InboundMessage, ...] = ()
    edits: int = 0
    failed: int = 0


async def apply_left_revisions(inbox: Inbox, revisions: Revisions) -> LeftRevisions:
    recalls: list[InboundMessage] = []
    edits = failed = 0
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
            await inbox.drop_revision(rev)
        except Exception as exc:  # gateway.db or memory failing: kept for the next start, the rest still tried
            failed += 1
            log.error("edit or recall a stop left unapplied could not be applied; tried again at the next start",
                      chat=msg.session_key, message_id=msg.message_id, kind=msg.kind, **error_fields(exc))
    return LeftRevisions(tuple(recalls), edits, failed)
