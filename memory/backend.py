"""The interface the gateway calls, served by the SQLite engine
(``memory.service.SqliteMemory``) or by the file fallback
(``memory.filestore.FileMemory``) when ``memory.enabled`` is false.

``private=False`` is used for group chats: they never see a user's own
Tier 1 profile or any ``credential`` memory, and of the rest only what the
user said in that group, ``chat`` (memory/scope.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from .scope import Chat
from .types import ErasedAll, Event, Hit, Memory, MemoryOverview, OwnerData, OwnerIndex, Provenance

if TYPE_CHECKING:  # forgetting.py needs the engine; the interface does not
    from .forgetting import Forgotten

__all__ = ["MemoryBackend", "Turn"]


@dataclass(frozen=True)
class Turn:
    """One message of a conversation, handed to the write path."""

    owner: str
    channel: str
    chat_id: str
    role: str  # "user" | "assistant"
    content: str
    sender_id: str = ""
    message_id: str = ""
    at: datetime | None = None
    group: bool = False
    """Said in a group chat: extraction then shows the memory model only
    what that group may read of the member (memory/scope.py)."""
    speaker_name: str = ""
    """In a group, the sender's name as the group knows it (the bot's
    reply: ''): the group's own copy of the line says who spoke
    (memory/groupnotes.py)."""


@runtime_checkable
class MemoryBackend(Protocol):
    kind: str  # "sqlite" | "files"

    async def profile(self, user: str, *, private: bool = True, tz: tzinfo | None = None) -> str:
        """Markdown for the system prompt (Tier 1, or MEMORY.md + recent days);
        the days it names on the calendar of ``tz``, the user's."""
        ...

    async def recall(
        self, user: str, query: str, *, context: Sequence[str] = (), private: bool = True, tz: tzinfo | None = None,
        chat: Chat | None = None,
    ) -> list[Hit]:
        """The read path: top hits for this message, within the injection budget.
        No LLM call; must not raise on any text. ``tz``: the user's own zone
        (/timezone), for time references such as "yesterday"."""
        ...

    async def search(
        self, user: str, query: str, *, limit: int = 8, private: bool = True, tz: tzinfo | None = None,
        chat: Chat | None = None,
    ) -> list[Hit]:
        """The ``memory_search`` tool: Tier 2 and Tier 3 of this user (in a
        group, Tier 2 said in ``chat`` only)."""
        ...

    async def remember(
        self,
        user: str,
        content: str,
        *,
        provenance: Provenance,
        category: str = "event",
        importance: float = 0.7,
        source_text: str = "",
        search_terms: Sequence[str] = (),
    ) -> Hit:
        """The ``memory_save`` tool / "remember this": store a fact now.

        ``source_text``: the user's message it came from (indexed with the
        fact where the backend has an index; never shown). ``search_terms``:
        words to find it by (memory/cues.py; the model's, unchecked: the
        backend keeps the clean ones, none for a credential); a fact saved
        again gains those it lacked."""
        ...

    async def forget(self, user: str, refs: Sequence[str]) -> Forgotten:
        """Erase, for good, ``user``'s memories and events named by their
        citations (``m12``, ``e3``), with what goes with them; never another
        user's or a shared row (:class:`~memory.forgetting.Forgotten` says which)."""
        ...

    async def forget_all(self, user: str) -> ErasedAll:
        """Erase, for good, everything memory keeps about ``user`` (their
        ``/forget all``): every fact and event of every status, the lines
        waiting for extraction, the change log's entries; never the shared
        ``_global`` rows nor another user's. An extraction already reading
        their lines writes nothing."""
        ...

    async def overview(self, user: str, *, limit: int = 10, tz: tzinfo | None = None) -> MemoryOverview:
        """What ``user`` has stored, for their ``/memory`` command: their own
        rows only (not ``_global``), at most ``limit`` recent ones, dated on
        ``tz``'s calendar (the user's zone)."""
        ...

    async def owner_data(self, user: str) -> OwnerData:
        """All of ``user``'s own rows, for their ``/export`` and ``myclaw
        memory export``: facts and events of every status, and how many
        lines wait for extraction. Credentials included: the caller decides
        what to show."""
        ...

    async def owner_index(self, user: str) -> OwnerIndex:
        """What an export of ``user``'s rows needs first (ids in order, the
        credentials' source text, how many rows are Chinese), without the
        rows: a large memory is then exported page by page."""
        ...

    def owner_rows(self, user: str, ids: OwnerIndex, *, page: int = 500) -> AsyncIterator[Memory | Event]:
        """The rows ``ids`` names, read ``page`` at a time: its memories in
        its order, then its events. A row erased since the index was taken
        is skipped."""
        ...

    async def buffer(self, turns: Sequence[Turn]) -> None:
        """Durably queue turns for background extraction (never blocks a reply
        on an LLM)."""
        ...

    async def close(self) -> None: ...
