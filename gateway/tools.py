"""Tools the agent offers the LLM through function calling.

A tool is a name, a description, a JSON schema for its arguments and an async
handler. The handler gets the parsed arguments and a :class:`ToolContext`
saying who is asking, so a tool can never act for another user.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import tzinfo
from typing import Any

__all__ = ["Tool", "ToolContext", "ToolError"]


class ToolError(Exception):
    """A tool call the model got wrong; the message goes back to the model."""


@dataclass(frozen=True)
class ToolContext:
    user: str  # resolved memory owner of the asking person
    channel: str
    chat_id: str
    private: bool  # False in group chats
    message_id: str = ""
    sender_id: str = ""
    message_text: str = ""  # the message being answered: a saved memory is indexed with it
    tz: tzinfo | None = None  # the user's own zone (/timezone); None: the gateway's
    # The message carries others' words (messages it forwards, a file it
    # sends): a memory saved in its turn may be theirs, and is cited so.
    forwards: bool = False
    files: bool = False
    sender_name: str = ""  # in a group, the asker's name there (a note saved names who said it)


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: Mapping[str, Any]  # JSON schema of the arguments object
    handler: Callable[[Mapping[str, Any], ToolContext], Awaitable[str]]
    private_only: bool = False  # not offered in group chats
    metadata: Mapping[str, Any] = field(default_factory=dict)
    # Offered only where this says it can help (file_read: a chat with a
    # recent file): every tool offered costs each request its tokens.
    useful: Callable[[ToolContext], bool] | None = None
    # It changes something (a job, a memory), so a turn that ran it is never
    # begun again nor dropped half way (an edit or recall during the turn,
    # gateway/loop.py): that would do it twice, or leave it done unsaid.
    # False only for a tool that reads.
    acts: bool = True

    def offered(self, ctx: ToolContext) -> bool:
        if self.private_only and not ctx.private:
            return False
        return self.useful is None or self.useful(ctx)

    def spec(self) -> dict[str, Any]:
        """The OpenAI ``tools`` entry."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": dict(self.parameters)},
        }
