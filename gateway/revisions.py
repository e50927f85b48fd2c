"""Edited and recalled messages: a change to a message the user sent
earlier (``InboundMessage.kind`` EDIT or RECALL, ``message_id`` naming it),
applied to what the gateway stored of it.

The process loop calls :meth:`Revisions.apply` in the chat's own queue, so
a change comes after the message it changes has been answered, stored in
Tier 0 and handed to memory (``ProcessLoop._settle``). Nothing is answered:
re-answering an edited message would mostly answer typo fixes, and a recall
asks for less, not more. A change that comes before the answer is out
reaches the message itself instead (gateway/loop.py): an edit of a message
still queued changes its words (``_edit_queued``), one during its model
call cancels the call and the turn begins again with the edited words
(``_edit_current``); a recall drops the message unanswered, queued or
under way (``_recall_pending``). A turn whose model already ran a tool
that changes something (``Tool.acts``: a job made, a memory saved) is left
to end, and the change applies here after it: begun again, it would do that twice.
A command is never stored, so its edit after the answer finds nothing
here (``unknown``); it is not run again, and the loop tells the user so
when the words changed (gateway/editedcommands.py).

* **Edit** (Telegram ``edited_message``): the chat's stored row of that
  message (Tier 0) gets the new words, so the next prompt shows them and
  not the old ones; memory replaces the line still waiting for extraction,
  or, if it was extracted already, buffers the new words as a correction
  whose facts supersede the old ones (``SqliteMemory.revise``); a row
  memory must never learn from (an incognito turn, one that erased memory)
  changes in Tier 0 only. Only the row's own sender edits it. A comment
  sent with forwards is stored at the end of their message (Telegram: the
  burst's); the channel sends its edit as that message's, saying which of
  its comments it is and how long each was (metadata ``comment``,
  ``comments``: no words kept), and only those words change. A recording's
  row holds its transcript after the caption (``[voice] caption\ntranscript``):
  only the caption changes, where the channel kept how long it was
  (metadata ``caption``) or where the row's form leaves one reading
  (gateway/transcription.py ``recaptioned``); otherwise the row is kept
  as it is, logged, rather than cut at a guess. A message the bot never stored (a group
  message not addressed to it, or one pruned from Tier 0) is left alone.
* **Recall** (Feishu ``im.message.recalled_v1``): the message and the reply
  to it leave Tier 0 (their bytes too: a checkpoint), and memory erases its
  waiting lines and what was drawn from it (``SqliteMemory.retract``). The
  event names no sender, so the stored row says whose it was, and only that
  owner's rows are touched; a message nobody stored touches nothing.
  What the chat shows is the channel's part: the Feishu channel withdraws
  its own reply there (``OutboundMessage.answers`` names what it answered).
  A reply to it still waiting in the outbox (the platform was unreachable)
  is dropped here, whoever's message it was, so it is never sent late:
  the note on a recalled photo was never stored in Tier 0, and yet it
  answers the recalled message all the same.

The file store (``FileMemory.revise`` / ``retract``) keeps no message ids:
it finds the logged line by its words, so an edit passes the old words
(``before=``, the row's content until now) and a recall the row's text; an
edit rewrites the line, a recall erases it with the reply logged after it
and the owner's MEMORY.md lines repeating it. A backend with neither only
has the Tier 0 part done.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import structlog

from memory.backend import MemoryBackend

from .bus import EDIT, RECALL, InboundMessage, picture_mark
from .outbox import Outbox
from .recent_files import RecentFiles
from .transcription import recaptioned, recording_mark
from .sessions import SessionStore

__all__ = ["Revisions", "edited_words", "splice_comment"]

log = structlog.get_logger(component="gateway")


class Revisions:
    def __init__(self, sessions: SessionStore, backend: MemoryBackend, outbox: Outbox | None = None,
                 files: RecentFiles | None = None) -> None:
        self.sessions = sessions
        self.backend = backend
        self.outbox = outbox or Outbox(sessions.db)  # the outbox lives in gateway.db too
        self.files = files

    async def apply(self, msg: InboundMessage) -> str:
        """Apply an EDIT or RECALL; returns what was done (for logs and
        tests): ``unknown`` (no such stored message), ``refused`` (an edit
        by someone else), ``unchanged``, ``kept`` (a recording's caption
        whose end in the stored row is not known: the row stays, logged),
        ``edited`` / ``recalled``."""
        if msg.kind == EDIT:
            return await self._edit(msg)
        if msg.kind == RECALL:
            return await self._recall(msg)
        raise ValueError(f"not an edit or a recall: {msg.kind!r}")

    async def _edit(self, msg: InboundMessage) -> str:
        key = msg.session_key
        row = await self.sessions.find(key, msg.message_id)
        if row is None:
            log.info("edit of a message not in the history ignored", chat=key, message_id=msg.message_id)
            return "unknown"
        if row.sender_id != msg.sender_id:
            log.warning("edit by another sender ignored", chat=key, message_id=msg.message_id)
            return "refused"
        text = msg.history_text.strip()  # an edited caption keeps its "[photo]"
        # ... and the mark stored with it: an album's "[3 photos]", a "[photo not read]"
        # (the channel knows only that the edited message has a picture).
        mark = picture_mark(row.content) if msg.placeholder else ""
        if mark:
            text = f"{mark} {msg.text.strip()}".strip()
        elif msg.placeholder and msg.text.strip() and recording_mark(row.content):
            # A recording's row holds its transcript after the caption: only
            # the caption changes, where the row says (or the channel kept)
            # where it ends; else the row stays as it is rather than lose the
            # transcript to a guess.
            caption = msg.metadata.get("caption")
            words = recaptioned(row.content, msg.text.strip(), caption if isinstance(caption, int) else None)
            if words is None:
                log.warning("edit of a recording's caption not applied: where its caption ends is not known; "
                            "the stored message is kept", chat=key, message_id=msg.message_id)
                return "kept"
            text = words
        lengths, at = msg.metadata.get("comments"), msg.metadata.get("comment")
        if isinstance(lengths, list) and isinstance(at, int):
            # A comment sent with forwards, stored at the end of their message
            # (InboundMessage.history_text): only those words change, so the
            # forwards (and a transcript, a picture's mark) stay as stored.
            spliced = _splice(row.content, lengths, at, msg.text.strip())
            if spliced is None:
                log.info("edit of a comment sent with forwards not applied: the stored words differ",
                         chat=key, message_id=msg.message_id)
                return "unknown"
            text = spliced
        if not msg.text.strip() or text == row.content:
            return "unchanged"
        memory = "untracked" if row.learn else "not learnt"  # an incognito turn's edit stays out of memory too
        revise: Any = getattr(self.backend, "revise", None)
        if callable(revise) and row.learn:
            # Memory first (doing it again replaces its own line): if it
            # raises, Tier 0 still has the old words, so the edit kept for
            # the next start is not found "unchanged" there and skipped.
            memory = await revise(replace(row, content=text).turn(group=msg.is_group), before=row.content)
        await self.sessions.revise(row.id, text)
        log.info("message edited", chat=key, message_id=msg.message_id, memory=memory)
        return "edited"

    async def _recall(self, msg: InboundMessage) -> str:
        key = msg.session_key
        # Before the rest: the redelivery pass must not pick the reply up meanwhile.
        waiting = await self.outbox.drop_answering(msg.channel, msg.chat_id, msg.message_id)
        if waiting:
            log.info("replies to a recalled message dropped from the outbox", chat=key, message_id=msg.message_id,
                     replies=waiting)
        row = await self.sessions.find(key, msg.message_id)
        owner = row.owner if row is not None else None
        rows = files = 0
        from .resume import TurnContext  # here: resume imports inbox, which imports this module

        if self.files is not None:
            # Its files go too: file_read would read a withdrawn file to
            # whoever asks in the chat, members who never saw it included.
            # Found by the message's id, which each file keeps: its row here
            # may be pruned already (the row's ids: a file kept before that).
            context = TurnContext.loads(row.context) if row is not None else None
            files = await self.files.forget_message(key, msg.message_id, [f.id for f in context.files] if context else ())
            if files:
                log.info("recalled message's files dropped", chat=key, message_id=msg.message_id, files=files)
        if owner is not None:
            rows = await self.sessions.erase_message(key, msg.message_id, owner)
        if rows or files:
            await self.sessions.db.checkpoint()  # the deleted rows' old pages (a file's too), as _forget_history
        retract: Any = getattr(self.backend, "retract", None)
        if callable(retract):
            done = await retract(
                msg.channel, msg.chat_id, msg.message_id, owner=owner, text=row.content if row is not None else ""
            )
            if owner is None:  # pruned from Tier 0: its reply may still be there
                for cited in done.owners:
                    rows += await self.sessions.erase_message(key, msg.message_id, cited)
            if not rows and not done.owners:
                log.info("recall of a message not stored ignored", chat=key, message_id=msg.message_id)
                return "recalled" if waiting or files else "unknown"
        elif not rows:
            return "recalled" if waiting or files else "unknown"
        log.info("message recalled: erased from history and memory", chat=key, message_id=msg.message_id,
                 history_rows=rows)
        return "recalled"


def edited_words(words: str, edit: InboundMessage) -> str | None:
    """The own words (``InboundMessage.text``) of a message whose turn has
    not begun (queued, or kept in the inbox), as ``edit`` has them: its
    new words, or for a comment sent with forwards (metadata ``comments``,
    ``comment``) that comment's among the others; None when the edit does
    not fit them (no words, or the comments are not those lengths)."""
    new = edit.text.strip()
    if edit.kind != EDIT or not new:
        return None
    lengths, at = edit.metadata.get("comments"), edit.metadata.get("comment")
    if isinstance(lengths, list) and isinstance(at, int):
        return splice_comment(words, lengths, at, new)
    return None if "comments" in edit.metadata else new


def _splice(content: str, lengths: list[object], at: int, words: str) -> str | None:
    """``content`` (a burst's stored message: its forwards, a blank line,
    its comments one a line) with comment ``at`` of those ``lengths`` (in
    characters, in order) now ``words``; None when the stored row does not
    end that way (it was edited otherwise, or is not that message)."""
    span = _span(lengths)
    if span is None or span > len(content):
        return None
    head, tail = content[: len(content) - span], content[len(content) - span :]
    comments = splice_comment(tail, lengths, at, words)
    if comments is None or not head.endswith("\n\n"):
        return None
    return (head + comments).strip()


def _span(lengths: list[object]) -> int | None:
    if not lengths or not all(isinstance(n, int) and n > 0 for n in lengths):
        return None
    sizes = [n for n in lengths if isinstance(n, int)]
    return sum(sizes) + len(sizes) - 1


def splice_comment(comments: str, lengths: list[object], at: int, words: str) -> str | None:
    """``comments`` (a burst's own words: its comments one a line, as its
    message's ``text`` has them) with comment ``at`` of those ``lengths``
    now ``words``; None when they are not that long."""
    span = _span(lengths)
    if span is None or span != len(comments) or not 0 <= at < len(lengths):
        return None
    sizes = [n for n in lengths if isinstance(n, int)]
    tail = comments
    pieces, pos = [], 0
    for i, n in enumerate(sizes):
        pieces.append(tail[pos : pos + n])
        pos += n
        if i < len(sizes) - 1:
            if tail[pos : pos + 1] != "\n":
                return None
            pos += 1
    pieces[at] = words
    return "\n".join(p for p in pieces if p.strip())
