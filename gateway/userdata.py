"""Everything the gateway keeps about one user, counted and erased together:
the ``/forget all`` a user sends in a private chat; and gathered for their
``/export`` (:meth:`UserData.export`).

Memory (every tier, the extraction buffer, the change log: the backend's
:meth:`~memory.backend.MemoryBackend.forget_all`), the conversation history
of every chat (their messages and the replies to them, group chats too) and
the jobs they scheduled, the replies to them still waiting in the
outbox, their messages and edits kept in the inbox (a crash leaves them
for the next start to answer or apply: gateway/inbox.py; those the process
loop still holds, queued behind a turn or under way, are then neither
answered nor stored: ``Inbox.erased``; nor are their jobs and resumed
turns it holds: gateway/erasures.py), the files they
sent lately (kept a day for ``file_read``), the exports ``myclaw chat`` wrote for them, and their file store folder
(``MEMORY.md`` and daily logs written while memory was off; imported
since, but the files stay until erased). ``myclaw memory forget --user``
does the same from outside the gateway (beside it too, but the gateway's
caches keep what it read); this one runs inside it, so each part goes
through the component that owns it and its caches.

What stays: identity links in the config (the operator's), the rate
limiter's timestamps (no words), and log lines, which name users by id only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from memory.backend import MemoryBackend
from memory.identity import IdentityMap
from memory.sharing import shared_places
from memory.types import OwnerData, OwnerIndex
from memory.zonehistory import read_spans, zone_key

from .chattitles import ChatTitles
from .erasures import Erasures
from .export import UserExport, erase_exports
from .timezones import zone_name

if TYPE_CHECKING:
    from memory.filestore import FileMemory

    from .cron import CronStore
    from .inbox import Inbox, MessageKey
    from .incognito import Incognito
    from .outbox import Outbox
    from .sessions import SessionStore
    from .recent_files import RecentFiles
    from .timezones import UserTimezones

__all__ = ["Census", "UserData"]

log = structlog.get_logger(component="gateway")


@dataclass(frozen=True)
class Census:
    """How much is kept (or was erased) of one user."""

    memories: int = 0  # facts and profile entries (the file store: MEMORY.md lines)
    events: int = 0  # conversation summaries (the file store: logged lines)
    messages: int = 0  # conversation history (Tier 0), every chat, and replies waiting in the outbox
    jobs: int = 0  # scheduled jobs they made
    files: int = 0  # files they sent lately, kept a day for file_read (gateway/recent_files.py)
    # Messages they sent that wait to be answered (the inbox's rows: queued
    # behind a turn, under way, or left by a crash), the command asking aside.
    waiting: int = 0
    # Settings they made, data about them too: incognito on, a time zone of theirs.
    incognito: bool = False
    timezone: bool = False
    # The zones they left, kept in memory to date what they said there (memory/zonehistory.py).
    zones: int = 0
    # Groups' notes drawn from what they said there (memory/groupnotes.py): erased with them.
    group_notes: int = 0

    @property
    def empty(self) -> bool:
        return not (self.memories or self.events or self.messages or self.jobs or self.files or self.waiting
                    or self.incognito or self.timezone or self.zones or self.group_notes)


class UserData:
    """``cron`` is set by the App once the scheduler's store is open (it
    opens after the process loop is built)."""

    def __init__(
        self,
        backend: MemoryBackend,
        sessions: SessionStore | None,
        cron: CronStore | None = None,
        *,
        outbox: Outbox | None = None,
        timezones: UserTimezones | None = None,
        files: RecentFiles | None = None,
        incognito: Incognito | None = None,
        titles: ChatTitles | None = None,
        file_store: FileMemory | None = None,
        exports: Path | None = None,
        inbox: Inbox | None = None,
        owner_of: Callable[[str, str], str] | None = None,
        erasures: Erasures | None = None,
        handles_of: Callable[[str], list[str]] | None = None,
    ) -> None:
        self.backend = backend
        # The file store's folders when SQLite is the backend (the App's):
        # what it wrote while memory was off stays on disk after the import.
        self.file_store = file_store
        self.exports = exports  # where `myclaw chat` writes their /export files
        self.titles = titles  # the groups they shared with, named in the export
        self.incognito = incognito
        self.files = files
        self.sessions = sessions
        self.cron = cron
        self.outbox = outbox
        self.timezones = timezones
        self.inbox = inbox
        # Whose a message is, by channel and sender (the identity map's
        # resolve): inbox rows name their sender only.
        self.owner_of = owner_of or IdentityMap().resolve
        # Told as an erasure begins and once it ended: the process loop's
        # jobs and resumed turns of theirs taken before are not run (gateway/erasures.py).
        self.erasures = erasures
        # A user's handles (the identity map's): rows one stored before it
        # was mapped stay under it until merge-identities, and are theirs.
        self.handles_of = handles_of or IdentityMap().handles

    def _whose(self, user: str) -> list[str]:
        return [user, *(h for h in self.handles_of(user) if h != user)]

    async def census(self, user: str, *, asking: MessageKey | None = None) -> Census:
        """What :meth:`erase` would erase, their handles' rows from before
        the mapping included; ``asking``: the command asking (its own
        message waits in the inbox while it runs), not counted."""
        return _sum([await self._census(who, asking=asking) for who in self._whose(user)])


    async def _census(self, user: str, *, asking: MessageKey | None = None) -> Census:
        o = await self.backend.overview(user, limit=0)
        messages = await self.sessions.owned(user) if self.sessions is not None else 0
        messages += await self.outbox.owned(user) if self.outbox is not None else 0
        jobs = len(await self.cron.list(user)) if self.cron is not None else 0
        quiet = self.incognito is not None and await self.incognito.since(user) is not None
        zone = self.timezones is not None and await self.timezones.get(user) is not None
        files = len(self.files.owned(user)) if self.files is not None else 0
        waiting = await self.inbox.owned(user, self.owner_of, besides=asking) if self.inbox is not None else 0
        return Census(memories=o.facts, events=o.events, messages=messages, jobs=jobs, files=files, waiting=waiting,
                      incognito=quiet, timezone=zone, zones=await self._zones_left(user), group_notes=o.group_notes)

    async def _zones_left(self, user: str) -> int:
        engine = getattr(self.backend, "engine", None)  # None: the file store, which keeps no zone history
        return len(await read_spans(engine.db, user)) if engine is not None else 0

    async def export(self, user: str, *, asking: MessageKey | None = None) -> tuple[UserExport, OwnerIndex]:
        """What ``user``'s export starts from: their settings, scheduled jobs,
        how many lines of history are kept and how many of their messages
        wait to be answered (``asking``, the /export itself, aside), and the index of their
        memory's rows (the rows themselves are read page by page as the file
        is written: ``backend.owner_rows``); each read for ``user`` alone,
        and for each of their handles that stored rows before it was mapped
        (merge-identities not run yet: ``UserExport.earlier``; their jobs,
        history and files counted with theirs)."""
        index = await self.backend.owner_index(user)
        handles = [h for h in self._whose(user) if h != user]
        earlier = [(h, i) for h in handles
                   if (i := await self.backend.owner_index(h)).memory_ids or i.event_ids or i.waiting or i.set_aside]
        data = OwnerData(owner=user, memories=[], events=[], waiting=index.waiting,
                         set_aside=index.set_aside)  # rows: read as written
        whose = [user, *handles]
        jobs = ([j for who in whose for j in await self.cron.list(who) if not j.internal]
                if self.cron is not None else [])
        history = sum([await self.sessions.owned(who) for who in whose]) if self.sessions is not None else 0
        tz = await self.timezones.get(user) if self.timezones is not None else None
        since = await self.incognito.since(user) if self.incognito is not None else None
        files = ([(f.name, f.received) for who in whose for f in self.files.owned(who)]
                 if self.files is not None else [])
        engine = getattr(self.backend, "engine", None)  # None: the file store, which keeps no aliases
        # Their handles' rows are in the file too: the groups those were shared
        # with named, the projects the handles renamed said, as for theirs.
        projects = (list(dict.fromkeys([p for who in whose for p in await engine.owned_project_aliases(who)]))
                    if engine is not None else [])
        groups = (await self.titles.names([p for who in whose for p in await shared_places(engine, who)])
                  if engine is not None and self.titles is not None else {})
        waiting = await self.inbox.owned(user, self.owner_of, besides=asking) if self.inbox is not None else 0
        edits = await self.inbox.edits_owned(user, self.owner_of) if self.inbox is not None else 0
        zones = [(zone_key(z), s, u) for s, u, z in await read_spans(engine.db, user)] if engine is not None else []
        return UserExport(data=data, jobs=jobs, history=history, timezone=zone_name(tz) if tz is not None else "",
                          zones=zones, incognito_since=since, files=files, projects=projects, groups=groups,
                          unanswered=waiting, edits=edits, earlier=earlier), index

    async def kept(self, user: str) -> UserExport:
        """:meth:`export`'s first part: what the operator's export of ``user``
        (the memory page's, ``myclaw memory export``) says beside memory."""
        return (await self.export(user))[0]

    async def owners(self) -> list[str]:
        """Everyone the gateway keeps anything of beside memory (what
        :meth:`export` gathers: a time zone, incognito, kept history, recent
        files, scheduled jobs, messages and edits waiting in the inbox), so
        the whole store's export misses no one who has no memory row."""
        found: set[str] = set()
        if self.timezones is not None:
            found.update(await self.timezones.owners())
        if self.incognito is not None:
            found.update(await self.incognito.owners())
        if self.sessions is not None:
            found.update(await self.sessions.owners())
        if self.files is not None:
            found.update(self.files.owners())
        if self.cron is not None:
            found.update(j.user for j in await self.cron.list() if not j.internal and j.user)
        if self.inbox is not None:
            found.update(await self.inbox.owners(self.owner_of))
        return sorted(found)

    async def erase(self, user: str, *, asking: MessageKey | None = None) -> Census:
        """Erase everything of ``user`` and of their handles' rows from
        before the mapping; returns what went (``asking``, the ``/forget
        all`` itself, erased but not counted). Memory first: the history's
        rows could otherwise be buffered for extraction again. The file
        store's folder before memory: gone first, its import record (which
        memory erases) can no longer let it be read back in."""
        whose = self._whose(user)
        if self.erasures is not None:
            for who in whose:
                self.erasures.erase(who)  # what the loop holds of theirs from now on is from before
        try:
            return _sum([await self._erase(who, asking=asking) for who in whose])
        finally:
            if self.erasures is not None:
                # Once more at the end: a job taken while this ran (its cron
                # entry still there) is from before too.
                for who in whose:
                    self.erasures.erase(who)

    async def _erase(self, user: str, *, asking: MessageKey | None) -> Census:
        if self.file_store is not None:
            await self.file_store.forget_all(user)  # bytes zeroed, then the folder
        zones = await self._zones_left(user)  # memory's erasure below drops them (memory/zonehistory.py)
        mem = await self.backend.forget_all(user)
        messages = await self.outbox.forget_owner(user) if self.outbox is not None else 0
        # Where they live and their asking not to be learnt from are theirs too.
        zone = bool(await self.timezones.forget_owner(user)) if self.timezones is not None else False
        quiet = bool(await self.incognito.forget_owner(user)) if self.incognito is not None else False
        files = await self.files.forget_owner(user) if self.files is not None else 0  # kept for file_read
        if self.exports is not None:  # a copy of all of it
            await asyncio.to_thread(erase_exports, self.exports, user)
        if self.sessions is not None:
            messages += await self.sessions.forget_owner(user)
        waiting = edits = 0
        if self.inbox is not None:
            # Their messages and edits kept for a crash: the next start would
            # answer (and learn from) them, or apply an edit's new words; the
            # process loop, which may hold them still, drops them (Inbox.erased).
            # Their own /forget all's row goes too; its turn ends as any other.
            waiting, edits = await self.inbox.forget_owner(user, self.owner_of, besides=asking)
        if self.sessions is not None and (messages or files or waiting or edits):
            # The deleted rows' old pages stay in the WAL until a
            # checkpoint overwrites them (as App._forget_history).
            await self.sessions.db.checkpoint()
        jobs = 0
        if self.cron is not None:
            erased: list[str] = []
            for job in await self.cron.list(user):
                if not job.internal:
                    await self.cron.remove(job.id, user=user)
                    erased.append(job.id)
            jobs = len(erased)
            if self.outbox is not None:
                await self.outbox.forget_jobs(erased)
            if jobs:  # the jobs' words stay in cron.db's WAL until a checkpoint (as above)
                await self.cron.db.checkpoint()
        out = Census(memories=mem.memories, events=mem.events, messages=messages, jobs=jobs, files=files,
                     waiting=waiting, incognito=quiet, timezone=zone, zones=zones, group_notes=mem.group_notes)
        log.info("user forgotten", owner=user, memories=out.memories, events=out.events,
                 waiting=mem.waiting, messages=out.messages, inbox=waiting, edits=edits, jobs=out.jobs, files=mem.files, sent_files=files,
                 incognito=quiet, timezone=zone, zones=zones)
        return out


def _sum(parts: list[Census]) -> Census:
    return Census(
        memories=sum(c.memories for c in parts), events=sum(c.events for c in parts),
        messages=sum(c.messages for c in parts), jobs=sum(c.jobs for c in parts), files=sum(c.files for c in parts),
        waiting=sum(c.waiting for c in parts), incognito=any(c.incognito for c in parts), timezone=any(c.timezone for c in parts),
        zones=sum(c.zones for c in parts), group_notes=sum(c.group_notes for c in parts),
    )
