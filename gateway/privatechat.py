"""Whether a chat is a user's own private chat, for a cron job that would
use their private memory (``CronJob.private``): posted into a group, or
into someone else's private chat, it would hand their profile and
credentials to others.

Telegram says it by the id: a group's is negative, a private chat's is
the user's own id. A Feishu chat id (``oc_``) says nothing; what the
gateway stored of the chat does (Tier 0 keeps with each message whether
it came in a group, gateway/resume.py's ``TurnContext``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Protocol

from memory.identity import IdentityMap

if TYPE_CHECKING:
    from memory.engine import MemoryEngine

__all__ = ["ChatKinds", "label_private_chats", "private_chat_refusal"]

ChatKind = Literal["group", "theirs", "another's", "unknown"]


class ChatKinds(Protocol):
    async def chat_kind(self, channel: str, chat_id: str, owner: str) -> ChatKind: ...


async def private_chat_refusal(
    kinds: ChatKinds | None, identities: IdentityMap, *, channel: str, chat_id: str, user: str, proven: bool
) -> str:
    """"" when ``chat_id`` may get ``user``'s private memory, else why not.

    ``proven``: a chat not known either way is refused too (a job being
    made: the operator can say so only of a chat the user wrote in);
    without it, only a chat known to be a group or another's (a job made
    before this check, or from the user's private chat by the agent)."""
    if channel == "telegram":
        if chat_id.startswith("-"):
            return f"telegram chat {chat_id} is a group"
        own = [h.split(":", 1)[1] for h in identities.handles(user) if h.startswith("telegram:")]
        if chat_id not in own:
            return (f"telegram chat {chat_id} is not {user}'s private chat (a private chat's id is its user's "
                    f"Telegram id: {', '.join(own) or 'none known'})")
        return ""
    kind = await kinds.chat_kind(channel, chat_id, user) if kinds is not None else "unknown"
    if kind == "group":
        return f"{channel} chat {chat_id} is a group"
    if kind == "another's":
        return f"{channel} chat {chat_id} is another user's private chat, not {user}'s"
    if kind == "unknown" and proven:
        return (f"{channel} chat {chat_id} is not known as {user}'s private chat "
                "(known once they have written to the bot there)")
    return ""


async def label_private_chats(engine: MemoryEngine, kinds: ChatKinds) -> int:
    """Label private the Feishu facts and Tier 3 events from before the
    chat kind was kept (taken for a group's) whose chat Tier 0 knows was a
    private one (memory/chatkinds.py); a chat it does not know stays as it
    is. At start; how many rows were labelled."""
    from memory.chatkinds import label_private, unlabelled_chats  # memory is loaded only when enabled

    private = [c for c in await unlabelled_chats(engine)
               if await kinds.chat_kind("feishu", c, "") in ("theirs", "another's")]
    return await label_private(engine, private)
