"""Commands this run answered, for an edit that comes after: a command is
never stored (Tier 0, memory), so its edit has nothing to correct
(gateway/revisions.py finds no row), and it is not run again (a
``/forget`` twice, a ``/timezone`` the user may not have meant after
all). The loop tells the user once that the edit changed nothing; only
when the words changed (Telegram sends an edit for a link preview's change
too) and only for a command this run answered (the last
:data:`KEPT`; after a restart an edit of an earlier one is let be, as
before)."""

from __future__ import annotations

from collections import OrderedDict

__all__ = ["KEPT", "EDITED_COMMAND", "EDITED_COMMAND_ZH", "RanCommands"]

KEPT = 256
EDITED_COMMAND = ("Editing a command does not run it again: I did {command} as you first sent it. "
                  "To run the new words, send them as a new message.")
EDITED_COMMAND_ZH = "编辑命令不会让它重新执行：{command} 已按你最初发送的内容执行。要按新内容执行，请重新发一条消息。"


class RanCommands:
    """The words of the commands answered lately, by chat and message id."""

    def __init__(self, kept: int = KEPT) -> None:
        self._kept = kept
        self._words: OrderedDict[tuple[str, str, str], tuple[str, str]] = OrderedDict()

    def keep(self, chat: str, message_id: str, sender_id: str, text: str, command: str) -> None:
        """``text``, the message that ran ``command`` (its name, "timezone")."""
        if not message_id:
            return
        self._words[(chat, message_id, sender_id)] = (text, command)
        self._words.move_to_end((chat, message_id, sender_id))
        while len(self._words) > self._kept:
            self._words.popitem(last=False)

    def changed(self, chat: str, message_id: str, sender_id: str, text: str) -> str | None:
        """The command as first sent ("/timezone") when ``text`` edits the
        words of one answered here by its own sender; then forgotten, so the
        user is told once. None otherwise."""
        first = self._words.get((chat, message_id, sender_id))
        if first is None or first[0].strip() == text.strip():
            return None
        del self._words[(chat, message_id, sender_id)]
        return f"/{first[1]}"
