"""Which of a user's memories a chat may read.

A private chat (``private=True``) reads all of the user's own memories and
the shared (``_global``) ones. A group is read by everyone in it, so it
reads, of the asking member's memories, only those learnt from what they
said in THAT group (the row's provenance names the group's channel and
chat), never their profile (Tier 1) nor a credential; the shared ones
too, less credentials. What a member told the bot in a private chat
(health, money, family...), what they said in another group, and rows of
no one chat (daily and weekly summaries drawn from several chats, notes
saved on the memory page or imported from files) stay out of every group.
A summary drawn from one group's words only keeps that group's name
(memory/compression.py), so it is read there. A member may let a fact of
theirs be read in one group or in every group they ask in (``/share``,
memory/sharing.py: the row's ``provenance.shared``), and take it back.
There it is matched on its own words, not those it was drawn from
(memory/retrieval.py). A newer fact said in that group that replaces it
(memory/consolidate.py) is read there instead: the shared one is left as
it is, and read in the owner's other chats (``provenance.replaced_in``).

Besides a member's own rows, a group reads its own notes: rows owned by
the group (``group:<channel>:<chat_id>``, memory/groupnotes.py), learnt
from what was said there, each naming who said it; their provenance names
the group, so the condition below lets them in there and nowhere else, and
only a search that adds that owner (``readers``) reads them: never a private
chat, never another group.

The same rule holds when memory learns: the memory model, learning from a
group's turns or day (memory/extraction.py, memory/compression.py), is
shown as existing facts only those the group may read, so a new group
fact cannot copy a private one's words. Tier 1 may be drawn from a
member's group facts: it is their own words, read by them alone.
"""

from __future__ import annotations

from .types import GLOBAL_OWNER, Provenance

__all__ = ["EVERY_GROUP", "Chat", "in_group", "place", "read_in", "said_in", "shared_with", "shown_in"]

Chat = tuple[str, str]
"""(channel, chat_id) of the chat an answer is read in."""

EVERY_GROUP = "*"
"""``provenance.shared`` for every group the owner asks in."""


def place(chat: Chat) -> str:
    """How ``provenance.shared`` and ``replaced_in`` name a group."""
    return f"{chat[0]}:{chat[1]}"


def in_group(provenance: Provenance) -> bool:
    """Was it said in a group chat? Recorded since the buffer kept the
    chat's kind; before, a Telegram group is known by its negative id, and
    a Feishu chat, whose id does not tell, is taken for a group (fail
    closed: a private chat reads its facts all the same)."""
    p = provenance
    if p.group is not None:
        return p.group
    return (p.channel == "telegram" and p.chat_id.startswith("-")) or (p.channel == "feishu" and bool(p.chat_id))


def said_in(provenance: Provenance, chat: Chat) -> bool:
    """Is ``provenance`` of ``chat`` (channel and chat id)? A group reads
    of a member's Tier 2 facts only those (:func:`shown_in`)."""
    return bool(all(chat)) and (provenance.channel, provenance.chat_id) == chat


def shared_with(provenance: Provenance, chat: Chat) -> bool:
    """Did its owner share it with ``chat`` (memory/sharing.py), and no
    newer fact said there replace it? (The SQL of :func:`shown_in` also
    lets it back once that fact is erased.)"""
    here = place(chat)
    return (bool(all(chat)) and not {EVERY_GROUP, here}.isdisjoint(provenance.shared)
            and all(where != here for where, _ in provenance.replaced_in))


def read_in(provenance: Provenance, chat: Chat) -> bool:
    """May the group ``chat`` read this Tier 2 fact of the member (not a
    credential)? Said there, or shared with it."""
    return said_in(provenance, chat) or shared_with(provenance, chat)


def _literal(text: str) -> str:
    # SQLite string literals have no escapes but the doubled quote.
    return "'" + text.replace("'", "''") + "'"


def shown_in(*, private: bool, chat: Chat | None, prefix: str = "x.") -> str:
    """An SQL condition (``AND ...``, or '' for a private chat) on the
    ``memories`` columns (``prefix``: the table's alias and a dot) that
    keeps the rows ``chat`` may read. A group with no ``chat`` named reads
    the shared rows only."""
    if private:
        return ""
    p = prefix
    shared = f"{p}owner = {_literal(GLOBAL_OWNER)}"
    said_here = "0"
    if chat is not None and all(chat) and "\x00" not in "".join(chat):
        channel, chat_id = chat
        # CASE: a row whose provenance is not JSON (hand-edited) is just not shown.
        here = _literal(place((channel, chat_id)))
        # Shared, unless a fact said here replaced it and still exists.
        replaced = (f"EXISTS (SELECT 1 FROM json_each({p}provenance, '$.replaced_in') r"
                    f" WHERE json_extract(r.value, '$[0]') = {here}"
                    " AND EXISTS (SELECT 1 FROM memories g WHERE g.id = json_extract(r.value, '$[1]')))")
        said_here = (f"({p}tier = 2 AND CASE WHEN json_valid({p}provenance) THEN"
                     f" (json_extract({p}provenance, '$.channel') = {_literal(channel)}"
                     f" AND json_extract({p}provenance, '$.chat_id') = {_literal(chat_id)})"
                     f" OR (EXISTS (SELECT 1 FROM json_each({p}provenance, '$.shared')"
                     f" WHERE value IN ({_literal(EVERY_GROUP)}, {here})) AND NOT {replaced})"
                     " ELSE 0 END)")
    return f"AND {p}category != 'credential' AND ({shared} OR {said_here})"
