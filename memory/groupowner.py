"""The owner of a group's own notes (memory/groupnotes.py), built and
recognised in one place: ``group:<channel>:<chat_id>``. It cannot be a
user's: an unmapped sender is ``<channel>:<sender_id>`` and no channel is
called ``group``; gateway/config.py refuses an identity named so. Light
(no engine): the config imports it."""

from __future__ import annotations

import hashlib

from .scope import Chat
from .types import GLOBAL_OWNER

__all__ = ["GROUP_PREFIX", "chat_of", "group_owner", "is_group_owner", "logged_owner", "member_label", "member_tag", "readers"]

GROUP_PREFIX = "group:"
"""Every group owner id starts so; no user's does (see the module's doc)."""


def group_owner(channel: str, chat_id: str) -> str:
    """The owner of the group chat's notes: ``group:telegram:-1001234``."""
    if not channel or not chat_id:
        raise ValueError("a group owner needs a channel and a chat id")
    return f"{GROUP_PREFIX}{channel}:{chat_id}"


def member_tag(member: str) -> str:
    """A short stable tag for a group member (their platform sender id, else
    their owner id), from the id but not the id itself (a platform id can be
    personal: a Feishu open_id, a phone number): two members of one name
    are told apart by it, in the chat prompt (gateway/prompt.py) and in the
    group's notes alike (``Dad #3f9a``)."""
    return hashlib.sha256(member.encode()).hexdigest()[:4]


def member_label(name: str) -> str:
    """A member's display name as the group's notes label their lines and
    name them (``said_by``; memory/extraction.py): one line, no colon to
    fake another label with, never the bot's; a member the gateway knew no
    name of is "a member". The chat prompt compares names so too."""
    flat = " ".join(name.replace(":", " ").replace("[", "(").replace("]", ")").split())[:60]
    if flat.casefold().startswith("assistant"):  # a member named so is not the bot
        flat = f"member {flat}"
    return flat or "a member"


def logged_owner(owner: str) -> str:
    """``owner`` as a log line names it: a group owner by its channel and a
    tag of its id (``group:telegram:#3f9a``, :func:`member_tag`), never the
    chat id, which is personal data (a private group's, a Feishu ``oc_``);
    anyone else's as it is."""
    if not is_group_owner(owner):
        return owner
    channel = owner[len(GROUP_PREFIX):].partition(":")[0]
    return f"{GROUP_PREFIX}{channel}:#{member_tag(owner)}"


def is_group_owner(owner: str) -> bool:
    return owner.startswith(GROUP_PREFIX)


def chat_of(owner: str) -> Chat | None:
    """The (channel, chat_id) a group owner id names; None for a user."""
    if not is_group_owner(owner):
        return None
    channel, sep, chat_id = owner[len(GROUP_PREFIX):].partition(":")
    return (channel, chat_id) if sep and channel and chat_id else None


def readers(user: str, *, private: bool, chat: Chat | None, notes: bool) -> list[str]:
    """Whose rows a search for ``user`` reads: their own and the shared
    ones; with ``notes``, in a group (``private`` false, ``chat`` named),
    that group's notes too. Never in a private chat, never another group's."""
    owners = [user] if user == GLOBAL_OWNER else [user, GLOBAL_OWNER]
    if notes and not private and chat is not None and all(chat) and not is_group_owner(user):
        owners.append(group_owner(*chat))
    return owners
