"""Wiring: everything the gateway runs, built from ``Config`` + ``Paths`` +
a clock, started in order and stopped in ``finally``.

    app = App(cfg, paths, clock=clock)
    await app.open()       # memory backend, gateway.db, LLM client, agent, loop
    await app.start()      # extraction/cron hooks, process loop, channels
    code = await app.wait(stop_event)
    await app.close()      # reverse order; safe after a failed open/start

Shutdown loses nothing: ``close()`` first has every channel stop receiving
(``BaseChannel.stop_receiving``, within half the timeout), then answers everything on the bus and in
flight (up to ``timeout``), sends the queued replies (every channel's at
once, up to ``QUEUED_WAIT`` within the timeout; a send under way gets up to
``SEND_GRACE`` more), and only then stops the channels, side by side
(Telegram confirms its offsets there, Feishu finishes its withdrawals, in
what is left of the timeout plus ``SEND_GRACE``). So a stop takes at most
its timeout plus ``SEND_GRACE``, and the channels' own closing. A message a channel did
not take stays with the platform and is delivered again after a restart.
Replies go out through ``app.delivery`` (gateway/delivery.py): one the
platform cannot take now, and any still queued when the shutdown times
out, waits in gateway.db's outbox and is sent by the next pass or start.

Channels come from :data:`CHANNELS`, a registry of (config section, module,
class). A module is imported only when its channel is enabled: lark-oapi
costs ~2 s and ~170 MB, so a Telegram-only gateway never loads it.

Channel failures: a channel that cannot start (``ChannelFatalError`` such as
a rejected token, or any other error) is logged loudly and left out; the
others keep running. A channel that fails for good later (one exposing
``wait_failed()``, as Telegram does) is stopped the same way. When no
channel is left, :meth:`App.wait` returns exit code 1. No channel enabled
at all is a configuration error (:class:`~gateway.config.ConfigError`).

The write path runs in the background and never blocks a reply. With
memory enabled, ``open()`` first imports what the file store wrote while
memory was off (``memory.migrate``, cheap when nothing changed), then builds
the extraction service (``app.extraction``: buffer -> LLM -> Tier 2/3) and
the compressor; with ``cron.enabled`` it builds the scheduler (``app.cron``)
with the internal daily/weekly compression jobs, user jobs that run through
``app.loop.run_job``, and the ``cron_*`` agent tools. Tests may replace
``app.extraction`` / ``app.cron`` (anything with ``async start()`` /
``async stop()``) between ``open()`` and ``start()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from zoneinfo import ZoneInfo

import httpx
import structlog

from channels.base import BaseChannel, ChannelFatalError
from memory.backend import MemoryBackend
from memory.clock import Clock, SystemClock
from memory.failover import EndpointCooldowns
from memory.groupowner import chat_of
from memory.identity import IdentityMap

from .agent import Agent
from .bus import MessageBus, OutboundMessage
from .chattitles import ChatTitles
from .commands import UserCommands
from .config import Config, ConfigError, Paths
from .credentials import config_secrets
from .datalock import AlreadyRunning, ChatLock, ChatRunning, DataBusy, DataLock, ErasureHold, GatewayLock
from .delivery import Delivery
from .erasure_requests import ErasureRequests, serve
from .erasures import Erasures
from .failover import FailoverLLM
from .logging import error_fields, loop_exception_handler
from .loop import MARK_RETRY_MAX, KnownProjects, ProcessLoop
from .memory_tools import memory_tools
from .outbox import Outbox
from .prompt import PromptBuilder
from .ratelimit import RateLimiter
from .recent_files import RecentFiles, file_tools
from .privatechat import label_private_chats, private_chat_refusal
from .inbox import Inbox
from .leftrevisions import LeftRevisions, apply_left_revisions
from .resume import ReadsAgain, Redelivered, Resumed, mark_later, resume_cut_turns, resume_inbox
from .sessions import SessionStore
from .incognito import Incognito
from .timezones import UserTimezones
from .userdata import UserData

if TYPE_CHECKING:
    from memory.filestore import FileMemory

__all__ = ["CHANNELS", "App", "ChannelSpec", "Service", "StorageError", "config_secrets"]

# The share of close()'s timeout the channels get to hand over what they
# took (a download still under way); the rest answers it.
INTAKE_SHARE = 0.5
# At most this long (and no longer than the stop's timeout), a stop waits
# for a send under way, a live reply's or a late one's (Delivery.stop).
# Past the stop's other waits: the queued replies' wait runs out just as
# a slow send is under way, and cut, Telegram may show it twice.
SEND_GRACE = 5.0
# At most this long (and within the stop's timeout), a stop waits for the
# queued replies, every channel's at once, before they go to the outbox: a
# platform that takes none should not hold the stop for all its timeout.
QUEUED_WAIT = 5.0

# Lazy: resolved at each call, so it follows configure_logging (and its
# redaction) even though this module is imported before logging is set up.
log = structlog.get_logger(component="gateway")


class Service(Protocol):
    async def start(self) -> object: ...  # the result is ignored (CronScheduler's: its catch-up runs)

    async def stop(self) -> None: ...


@dataclass(frozen=True)
class ChannelSpec:
    """How to build one kind of channel: ``cls(section, bus, **kwargs)``."""

    name: str
    module: str
    class_name: str
    section: Callable[[Config], Any]  # its config section (has ``enabled``)
    needs_http: Callable[[Config], bool] = lambda cfg: False
    # The channel remembers which of its messages answer which (to withdraw
    # them on a recall): given ``reply_store``, its rows in gateway.db.
    keeps_replies: bool = False
    # The channel drops what it took before (a platform delivering at least
    # once) and keeps the recalls it saw: given ``seen_store(kind)``, those
    # ids are kept in gateway.db, so a restart does not forget them.
    keeps_seen: bool = False
    # The channel shows a reply's drafts as a message of its own: given
    # ``draft_store``, that message's id is kept in gateway.db until the
    # reply is out (a reply sent after a restart still becomes it).
    keeps_drafts: bool = False
    # The channel gathers a comment with the forwards it was typed with, and
    # applies the comment's edits to their message: given ``comment_store``,
    # which went where is kept in gateway.db, so an edit after a restart too.
    keeps_comments: bool = False
    # The channel can fetch pictures and voice messages users send: with
    # agent.vision it is given ``max_image_bytes``, with agent.transcription
    # ``max_audio_bytes``.
    reads_media: bool = False

    def load(self) -> Callable[..., BaseChannel]:
        # Not type[BaseChannel]: channels take (section, bus, ...), BaseChannel (bus, allow_from).
        cls: Callable[..., BaseChannel] = getattr(importlib.import_module(self.module), self.class_name)
        return cls


CHANNELS: tuple[ChannelSpec, ...] = (
    ChannelSpec("telegram", "channels.telegram", "TelegramChannel", lambda c: c.channels.telegram, reads_media=True,
                keeps_comments=True),
    ChannelSpec(
        "feishu",
        "channels.feishu",
        "FeishuChannel",
        lambda c: c.channels.feishu,
        needs_http=lambda c: c.channels.feishu.mode == "webhook",
        keeps_replies=True,
        keeps_seen=True,
        keeps_drafts=True,
        reads_media=True,
    ),
)


class App:
    def __init__(
        self,
        cfg: Config,
        paths: Paths,
        *,
        clock: Clock | None = None,
        http_client: httpx.AsyncClient | None = None,
        config_channels: bool = True,
        channel_specs: Sequence[ChannelSpec] = CHANNELS,
    ) -> None:
        self.cfg = cfg
        self.paths = paths
        self.clock = clock or SystemClock()
        self.http_client = http_client
        self.config_channels = config_channels
        self.channel_specs = tuple(channel_specs)
        self.bus = MessageBus(cfg.gateway.queue_size)
        self.tz = ZoneInfo(cfg.gateway.timezone)
        # Set by open():
        self.backend: MemoryBackend | None = None
        self.sessions: SessionStore | None = None
        self.delivery: Delivery | None = None  # sends replies, keeps those that cannot go out yet
        self.inbox: Inbox | None = None
        self.redelivered: Redelivered | None = None  # the messages taken and never begun, as start() found them
        self.resumed: Resumed | None = None  # the messages a stop left unanswered, as start() found them
        self.erasures = Erasures()  # users erased in this run: the loop's jobs and resumed turns of theirs are not run
        self.revised = LeftRevisions()  # the edits and recalls a stop left unapplied, as start() applied them
        self.llm: FailoverLLM | None = None
        # One cooldown state per model endpoint for the chat and the memory
        # model: an outage either finds cools the other's use of it too.
        self.cooldowns = EndpointCooldowns()
        self.agent: Agent | None = None
        self.loop: ProcessLoop | None = None
        self.recent_files: RecentFiles | None = None  # set by open() when agent.documents is on
        self.http: Any = None  # gateway.http.HttpServer, only when a channel or the memory page needs it
        self.memory_web: Any = None  # gateway.web.MemoryWeb, when the memory page is served
        # Hook points (see the module docstring).
        self.extraction: Service | None = None
        self._left_window: Callable[[str, str, str], None] | None = None  # ExtractionService.left_window
        self.cron: Service | None = None
        self.vectorizer: Any = None  # memory.vectorize.Vectorizer when memory.embedding.enabled
        self.file_sync: Service | None = None  # memory.filesync.FileSync when memory.fileSync > 0
        self._embedder: Any = None  # memory.embedding.HttpEmbedder, closed in close()
        self.compressor: Any = None  # memory.compression.Compressor when memory is on
        self._memory_llm: Any = None  # memory.llm.MemoryLLM, closed in close()
        self._transcriber: Any = None  # gateway.transcription.Transcriber with agent.transcription, closed in close()
        self._cron_store: Any = None  # gateway.cron.CronStore
        self._folders: FileMemory | None = None  # the file store's folders, with SQLite on (erasures reach them)
        self.channels: dict[str, BaseChannel] = {}
        self.failed_channels: dict[str, str] = {}
        self._extra_channels: list[BaseChannel] = []
        self._tasks: list[asyncio.Task[Any]] = []
        self._watchers: dict[asyncio.Task[Any], str] = {}
        self._loop_task: asyncio.Task[None] | None = None
        self._handler: tuple[asyncio.AbstractEventLoop, Any] | None = None  # the loop's exception handler before ours
        self._started_services: list[Service] = []
        self._instance: GatewayLock | None = None  # while the gateway runs
        self._chat_lock: ChatLock | None = None  # while `myclaw chat` runs
        self._erasures_held = ErasureHold(paths.data_dir)  # chat.lock while the gateway's erasures run
        self._data_lock = DataLock(paths.data_dir)
        self._closed = False

    # -- build ----------------------------------------------------------------------

    async def open(self) -> None:
        """Open storage and build the pipeline; closes what it opened on failure."""
        try:
            await self._open()
        except BaseException:
            await self.close()
            raise

    async def _open(self) -> None:
        cfg = self.cfg
        if self.config_channels and not self._extra_channels and not any(
            spec.section(cfg).enabled for spec in self.channel_specs
        ):
            raise ConfigError(NO_CHANNEL)  # before any file is made: a config mistake leaves nothing behind
        data_dir = self.paths.data_dir
        try:
            if self.config_channels:  # the gateway, not `myclaw chat` (gateway/datalock.py)
                self._instance = GatewayLock(data_dir)
                self._instance.acquire()
            else:  # `myclaw chat`: `memory forget` does not erase beside it (ChatLock)
                self._chat_lock = ChatLock(data_dir)
                self._chat_lock.share()
            # Held while this process may write the data files (released in
            # close()): `myclaw memory merge-identities` waits for no one.
            self._data_lock.share()
        except (AlreadyRunning, DataBusy, ChatRunning) as exc:
            raise StorageError(str(exc)) from None
        except OSError as exc:  # the locks are the first files made there
            raise StorageError(
                f"{data_dir}: cannot use it as the data folder ({exc.strerror or exc}): make it a folder "
                "this account can write, or set MYCLAW_HOME to another home"
            ) from None
        known_projects: KnownProjects | None = None
        engine: Any = None
        if cfg.memory.enabled:
            from memory.engine import MemoryEngine
            from memory.filestore import FileMemory
            from memory.retrieval import Retriever
            from memory.service import SqliteMemory

            db_setting = "memory.dbPath (MYCLAW_MEMORY_DB_PATH)" if cfg.memory.db_path else ""
            async with _storage(self.paths.memory_db(cfg), db_setting):
                engine = await MemoryEngine.open(self.paths.memory_db(cfg), self.clock)
            r = cfg.memory.retrieval
            retriever: Any = Retriever(engine, max_hits=r.max_hits, token_budget=r.token_budget, max_chars=r.max_chars)
            if cfg.memory.embedding.enabled:
                retriever = self._open_hybrid(engine, retriever)
            # The file store's folders stay on disk after the import (memory was
            # off once): an erasure reaches them through this.
            self._folders = FileMemory(self.paths.workspace(cfg), self.clock, tz=self.tz)
            self.backend = SqliteMemory(engine, retriever, files=self._folders)
            known_projects = engine.known_projects
            await _warn_stranded_handles(engine, cfg.memory.identities)
            await self._open_write_path(engine)
            self._open_memory_page(engine)
        else:
            from memory.filestore import FileMemory  # the fallback, only when chosen

            if cfg.gateway.admin.enabled:
                log.warning("gateway.admin.enabled is set but memory.enabled is false: the memory page is not served")
            self.backend = FileMemory(self.paths.workspace(cfg), self.clock, tz=self.tz, max_hits=cfg.memory.retrieval.max_hits)
        async with _storage(self.paths.gateway_db()):
            self.sessions = await SessionStore.open(
                self.paths.gateway_db(),
                self.clock,
                window=cfg.agent.history_messages,
                cache_rows=cfg.gateway.history_cache_rows,
            )
        sessions = self.sessions
        if engine is not None:
            # Old Feishu facts and events of chats Tier 0 knows were private (gateway/privatechat.py).
            labelled = await label_private_chats(engine, sessions)
            if labelled:
                log.info("old feishu facts and events of private chats labelled private", rows=labelled)
        # Every message taken is written here before the platform learns it
        # arrived, until its turn ends (gateway/inbox.py): a crash loses none.
        self.inbox = Inbox(sessions.db, self.clock)
        self.bus.inbox = self.inbox
        if self.memory_web is not None:
            from .web import AdminStore

            # Sign-ins outlive a restart (before start(): no request comes sooner).
            await self.memory_web.auth.attach(AdminStore(sessions.db))
        secrets = config_secrets(cfg)

        async def owner_of(msg: OutboundMessage) -> str:
            return await sessions.owner_of(f"{msg.channel}:{msg.chat_id}", msg.answers or msg.reply_to)

        def scrub(text: str) -> str:
            for secret in secrets:
                text = text.replace(secret, "***")
            return text

        self.delivery = Delivery(
            self.bus, Outbox(sessions.db), self.channels, self.clock,
            max_age=timedelta(hours=cfg.gateway.outbox.max_age_hours), owner_of=owner_of, scrub=scrub,
        )
        # /forget all; cron joins when open
        self.timezones = UserTimezones(sessions.db)  # each user's own, set with /timezone
        self.incognito = Incognito(sessions.db)  # who asked not to be learnt from (/incognito)
        # Groups' titles as seen (/share, the memory page, exports); a channel
        # whose messages carry none (Feishu) adds its lookup as it starts.
        self.titles = ChatTitles(sessions.db, clock=self.clock)
        await self.titles.load()  # a refusal the last run met, for /healthz until this run asks again
        if self.memory_web is not None:
            self.memory_web.titles = self.titles
            self.memory_web.admin.zone_of = self.timezones.get  # a search's "昨天" on the user's calendar
        if self.extraction is not None:
            from memory.extraction import ExtractionService

            assert isinstance(self.extraction, ExtractionService)
            self.extraction.zone_of = self.timezones.get  # their messages' times and days, on their clock
        if self.compressor is not None:
            self.compressor.zone_of = self.timezones.get  # a user's day ends at their midnight
        if self.backend is not None and self.backend.kind == "files":
            from memory.filestore import FileMemory

            assert isinstance(self.backend, FileMemory)
            self.backend.zone_of = self.timezones.get  # each line dated where it is said, as it is written
        if engine is not None:
            engine.zone_of = self.timezones.get  # who is on the gateway's zone, and its old ones
            if await engine.gateway_zone(self.tz, at=self.clock.now()):
                log.info("gateway time zone changed since the last run: what was said before keeps its days",
                         timezone=self.cfg.gateway.timezone)
        # Files sent in each chat lately, for file_read (kept in gateway.db).
        self.recent_files = RecentFiles(sessions.db, self.clock) if cfg.agent.documents.enabled else None
        if self.recent_files is not None:
            await self.recent_files.load()
        identities = IdentityMap(cfg.memory.identities)  # whose a message is: the loop's and erasures' (the inbox's rows)
        if self.memory_web is not None:  # the page's export says how many of a user's messages wait
            self.memory_web.unanswered = functools.partial(self.inbox.owned, owner_of=identities.resolve)
        self._user_data = UserData(self.backend, self.sessions, outbox=self.delivery.outbox, timezones=self.timezones,
                                   files=self.recent_files, incognito=self.incognito, titles=self.titles,
                                   file_store=self._folders, exports=self.paths.exports_dir, inbox=self.inbox,
                                   owner_of=identities.resolve, erasures=self.erasures,
                                   handles_of=identities.handles)
        if self.memory_web is not None:  # the page's export of a user holds what the CLI's does beside memory
            self.memory_web.kept = self._user_data.kept
            from .web._kept_owners import KeptOwners  # its user list names them too, read once a TTL

            self.memory_web.admin.kept_owners = KeptOwners(self._user_data.owners).get
        self.llm = FailoverLLM.from_config(
            cfg.provider, cfg.agent.model, cfg.agent.fallbacks, self.clock, client=self.http_client,
            cooldowns=self.cooldowns,
        )
        t = cfg.agent.transcription
        if t.enabled:
            from .transcription import Transcriber

            self._transcriber = Transcriber.from_config(t.provider or cfg.provider, model=t.model, client=self.http_client)
        r = cfg.memory.retrieval
        # The file store answers the same tools: a user of the fallback can
        # still ask the bot to remember, look up or forget something.
        tools = memory_tools(
            self.backend, max_chars=r.max_chars, token_budget=r.token_budget,
            forget_history=self._forget_history, files=self.recent_files, default_tz=self.tz,
        )
        if self.recent_files is not None:
            tools += file_tools(self.recent_files, max_tokens=min(6000, cfg.agent.documents.max_tokens))
        self.agent = Agent(self.llm, max_tokens=cfg.agent.max_tokens, temperature=cfg.agent.temperature, tools=tools)
        prompts = PromptBuilder(
            self.paths.workspace(cfg),
            self.backend,
            clock=self.clock,
            tz=self.tz,
            max_hits=r.max_hits,
            max_chars=r.max_chars,
            token_budget=r.token_budget,
        )
        self.loop = ProcessLoop(
            bus=self.bus,
            sessions=self.sessions,
            backend=self.backend,
            agent=self.agent,
            prompts=prompts,
            identities=identities,
            known_projects=known_projects,
            max_concurrent_chats=cfg.gateway.max_concurrent_chats,
            max_pending=cfg.gateway.queue_size,
            transcriber=self._transcriber,
            files=self.recent_files,
            limiter=RateLimiter(
                self.clock, per_minute=cfg.gateway.rate_limit.per_minute, per_hour=cfg.gateway.rate_limit.per_hour
            ),
            commands=UserCommands(
                self.backend, forget_history=self._forget_history, everything=self._user_data, clock=self.clock,
                timezones=self.timezones, default_tz=self.tz, incognito=self.incognito,
                projects=getattr(self.backend, "engine", None),  # None: the file store
                titles=self.titles, erasing=self._chat_guard,
            ),
            timezones=self.timezones,
            incognito=self.incognito,
            stream_delay=cfg.agent.streaming.delay.total_seconds() if cfg.agent.streaming.enabled else None,
            stream_interval=cfg.agent.streaming.interval.total_seconds(),
            inbox=self.inbox,
            titles=self.titles,
            hold=self.delivery.hold,  # a reply on its way is in the outbox until the platform took it
            erasures=self.erasures,
        )
        self.loop.chat_moves["outbox_held"] = self.delivery.move_chat  # a moved chat's kept replies stay ahead
        if self._left_window is not None:  # what leaves a chat's window is extracted then (seed 003)
            self.loop.window_moved.append(self._left_window)
        moves = getattr(self.backend, "engine", None)  # None: the file store, which no group reads
        if moves is not None:  # a group reads what was said in it, under its new id too
            self.loop.chat_moves["memories"] = moves.move_chat
        if moves is not None:  # a group's own memory (memory/groupnotes.py)
            from memory.service import SqliteMemory

            assert isinstance(self.backend, SqliteMemory)  # the engine's store
            self.loop.chat_moves["group_memory"] = self.backend.move_group  # after its rows' chat moved
            self.loop.bot_left["group_memory"] = self.backend.forget_group  # the bot removed: it goes
            self.loop.same_names = self.backend.shared_names  # tagged in the prompt as in the notes

        if cfg.cron.enabled:
            await self._open_cron()

    def _open_health(self) -> None:
        """``/healthz`` says whether messages are answered (gateway/health.py)
        wherever the HTTP server runs; ``gateway.metrics`` adds ``/metrics``,
        starting the server for it. Only for the gateway, not ``myclaw chat``."""
        if self.cfg.gateway.metrics and self.config_channels:
            http = self._http_server()
            http.add_route("GET", "/metrics", http.metrics)
        if self.http is None:
            return
        from .health import Health

        engine = getattr(self.backend, "engine", None)
        assert self.loop is not None
        self.http.health = Health(
            clock=self.clock,
            bus=self.bus,
            loop_running=lambda: self._loop_task is not None and not self._loop_task.done(),
            stats=self.loop.stats,
            channels=self.channels,
            failed=self.failed_channels,
            backlog=engine.backlog if engine is not None else None,
            outbox=(lambda: delivery.waiting) if (delivery := self.delivery) is not None else None,
            refused=lambda: self.titles.refused,
        )

    def _open_hybrid(self, engine: Any, lexical: Any) -> Any:
        """Recall by meaning too (memory.embedding): the vectorizer embeds
        memories in the background, the hybrid retriever fuses rankings."""
        from memory.embedding import CachedEmbedder, HttpEmbedder, vector_model
        from memory.hybrid import HybridRetriever
        from memory.vectorize import Vectorizer
        from memory.vectors import VectorIndex

        e = self.cfg.memory.embedding
        provider = self.cfg.embedding_provider()
        raw = HttpEmbedder(
            base_url=provider.base_url,
            api_key=provider.api_key.get_secret_value(),
            model=e.model,
            client=self.http_client,
            timeout=provider.timeout.total_seconds(),
            batch_size=e.batch_size,
            dimensions=e.dimensions,
        )
        self._embedder = raw
        cached = CachedEmbedder(raw, engine.db, self.clock)
        # The index is per model and size: switching either re-embeds, each old vector replaced in turn.
        index = VectorIndex(engine.db, vector_model(e.model, e.dimensions), dimension=e.dimensions)
        # A query vector asked while a batch is out waits for it on a one-worker
        # endpoint: a batch holds it at most 0.4 of queryTimeout (0.2 s).
        self.vectorizer = Vectorizer(index, cached, interval=e.interval.total_seconds(), batch_size=e.batch_size,
                                     batch_seconds=0.4 * e.query_timeout.total_seconds())
        log.info("hybrid recall enabled", model=e.model, fusion=e.fusion, base_url=provider.base_url)
        return HybridRetriever(
            lexical,
            index,
            cached,
            timeout=e.query_timeout.total_seconds(),
            min_similarity=e.min_similarity,
            fusion=e.fusion,
            lexical_share=e.lexical_share,
        )

    def _chat_guard(self) -> contextlib.AbstractContextManager[None]:
        """Held while ``/forget all`` or the memory page's erase-all erases:
        refused (ChatRunning) while a ``myclaw chat`` runs on the home, as
        ``myclaw memory forget`` is (gateway/datalock.py ``ChatLock``). A
        chat's own share is turned into it; the gateway's erasures hold it
        together (``ErasureHold``: two users' at once do not refuse each other)."""
        if self._chat_lock is not None:
            return self._chat_lock.erasing()
        return self._erasures_held.erasing()

    async def _erase_asked(self, owner: str) -> dict[str, int]:
        """``myclaw memory forget --user owner`` asked: erased as ``/forget all``
        erases; ``--group`` (a group's owner) as the bot's removal does, its
        lines queued in this process drained first (``{"rows": n}``)."""
        if (chat := chat_of(owner)) is not None:
            from memory.service import SqliteMemory

            if not isinstance(self.backend, SqliteMemory):  # memory off: told to the CLI, which says so
                raise RuntimeError("a group's memory is erased by the SQLite store only")
            return {"rows": await self.backend.forget_group(*chat)}
        census = await self._user_data.erase(owner)
        return {k: int(v) for k, v in vars(census).items() if v}

    async def _forget_history(self, owner: str, texts: Sequence[str]) -> int:
        """Tier 0 lines that said an erased fact go (``memory_forget``, the
        memory page's cascade erase; the page is opened before the session
        store), and so do their bytes: while the gateway runs, gateway.db's
        WAL and main file keep the deleted rows' old pages (secure_delete
        only zeroes the new ones) until a checkpoint overwrites them. The
        history has no full-text index, so a checkpoint does what a VACUUM
        would, in a fraction of the time every chat waits for the writer
        (1,000 chats: scripts/bench_erase.py --chats)."""
        if self.sessions is None:
            return 0
        gone = await self.sessions.erase_matching(owner, texts)
        if gone:
            await self.sessions.db.checkpoint()
        return gone

    def _open_memory_page(self, engine: Any) -> None:
        """``/memory`` on the gateway's HTTP server (created for it if no
        channel needs one). Only for the gateway itself, not ``myclaw chat``."""
        admin = self.cfg.gateway.admin
        if not admin.enabled or not self.config_channels:
            return
        from .web import mount_memory_page

        assert self.backend is not None
        # An add or edit made on the page is embedded at once, as a saved fact is.
        wake = self.vectorizer.wake if self.vectorizer is not None else None
        self.memory_web = mount_memory_page(
            self._http_server(), engine, self.backend.retriever, admin.token.get_secret_value(),  # type: ignore[attr-defined]
            forget_history=self._forget_history, tz=self.tz,
            on_written=(lambda _owner: wake()) if wake is not None else None, files=self._folders,
            identities=IdentityMap(self.cfg.memory.identities), erasing=self._chat_guard,
        )
        from memory.service import SqliteMemory

        if isinstance(self.backend, SqliteMemory):  # its group wipe drains this process's queued lines first
            self.memory_web.admin.wipe_group = self.backend.forget_group
            self.memory_web.admin.drain_lines = self.backend.drained  # a group note's erasure: its queued lines first

    async def _open_write_path(self, engine: Any) -> None:
        from memory.compression import Compressor
        from memory.consolidate import Consolidator
        from memory.extraction import ExtractionService
        from memory.llm import MemoryLLM
        from memory.filesync import FileSync, migrate_leased
        from memory.lease import LeaseBusy, LeaseLost

        cfg = self.cfg
        sync = (FileSync(self.paths.workspace(cfg), engine, interval=cfg.memory.file_sync.total_seconds())
                if cfg.memory.file_sync.total_seconds() > 0 else None)
        # Switching back from memory.enabled=false loses nothing: whatever the
        # file store wrote meanwhile comes in now (idempotent, one stat per file).
        # Through the file sync when it runs: what this import read (or warned
        # about) is not read, nor warned about, again by its first polls.
        try:
            report = await (sync.import_all() if sync is not None
                            else migrate_leased(self.paths.workspace(cfg), engine, job="start"))
        except LeaseBusy as busy:  # `myclaw memory migrate` is at it; the file sync catches up after
            if busy.state is not None and busy.state.state != "alive":  # maybe none runs: say only what is known
                later = ("imported once it is free" if sync is not None
                         else "the next start or `myclaw memory migrate` imports them")
                log.warning("memory files not imported at start: their import lease is held by a process not known "
                            f"to be gone (a dead one elsewhere waits out its expiry); {later}", why=str(busy))
            else:
                log.warning("memory files not imported at start: another import is running", why=str(busy))
        except LeaseLost:  # stalled past its lease and taken over: not "another is running", it ran
            log.warning("memory files' import at start stopped: it outlived its lease and another import took it "
                        "over, which imports the rest; what this one imported stays")
        except (sqlite3.Error, OSError) as exc:  # memory.db full or read-only: the gateway comes up all the same
            log.error("memory files not imported at start (memory.db cannot be written); the next start or "
                      "`myclaw memory migrate` imports them", **error_fields(exc))
        else:
            if report.changed or report.problems:
                log.info("imported memory files written while memory was off", **report.log_fields())
        file_sync = self.file_sync = sync  # hand edits made while running (seed 004's file-to-database sync)
        self._memory_llm = MemoryLLM.from_config(cfg, clock=self.clock, cooldowns=self.cooldowns)
        ex = cfg.memory.extraction
        assert self.backend is not None
        # What a new fact may restate or replace is found the way recall finds
        # memories: by meaning too when hybrid recall is on (seed 003's dedup).
        consolidator = Consolidator(engine, self.backend.retriever)  # type: ignore[attr-defined]
        extraction = ExtractionService(
            engine,
            self._memory_llm,
            consolidator=consolidator,
            quiet_gap=ex.quiet_gap,
            token_budget=ex.token_budget,
            daily_flush=ex.daily_flush,
            timezone=cfg.gateway.timezone,
        )
        assert self.backend is not None
        extraction.attach(self.backend)  # type: ignore[arg-type]
        self._left_window = extraction.left_window
        if self.vectorizer is not None:
            # A fact saved or extracted is embedded at once, not at the next interval.
            wake = self.vectorizer.wake
            self.backend.on_remembered(lambda _owner: wake())  # type: ignore[attr-defined]
            extraction.on_memories_written(lambda _owner: wake())
            if file_sync is not None:  # a hand-edited line too
                file_sync.on_memories_written(lambda _owner: wake())
        self.extraction = extraction
        self.compressor = Compressor(engine, self._memory_llm, consolidator=consolidator, timezone=cfg.gateway.timezone)

    async def _open_cron(self) -> None:
        from .cron import CronError, CronJob, CronScheduler, CronStore, JobAttempt, memory_jobs
        from .cron_tools import cron_tools
        from .outbox import job_slot

        async with _storage(self.paths.cron_db()):
            self._cron_store = await CronStore.open(self.paths.cron_db(), self.clock, self.cfg.gateway.timezone)
            await self._cron_store.follow_gateway_zone()  # gateway.timezone changed since the last run
        self._user_data.cron = self._cron_store
        loop, store_ = self.loop, self._cron_store
        assert loop is not None and self.agent is not None
        loop.chat_moves["cron_jobs"] = self._cron_store.move_chat  # a moved chat's jobs run there (cron.db)
        loop.member_left["cron_jobs"] = self._cron_store.remove_member  # a member's jobs leave the group with them

        async def run_agent_job(job: CronJob, attempt: JobAttempt) -> bool:
            # The reply goes to the job's chat through the bus, like any reply;
            # to a channel this process does not run it would wait for a
            # sender that never comes: an error on the job (`cron list`)
            # and in the log, and no LLM call, instead of a silent "ok".
            if job.channel not in self._job_channels():
                raise CronError(
                    f"channel {job.channel!r} is not running in this gateway (enabled: "
                    f"{', '.join(sorted(self._job_channels())) or 'none'}); the reply would reach nobody"
                )
            if job.private and (why := await private_chat_refusal(
                    self.sessions, loop.identities, channel=job.channel, chat_id=job.chat_id, user=job.user,
                    proven=False)):
                # Made before `cron add` checked, or cron.db edited: the
                # user's private memory must not reach a group (no LLM call).
                log.error("private cron job refused: the chat is not the user's private chat", job=job.id,
                          channel=job.channel, chat_id=job.chat_id, reason=why)
                raise CronError(f"{why}: a private job (the user's private memory) is not run there")
            running = self.channels.get(job.channel)
            if await store_.get(job.id) is None:
                # Removed since the scheduler read it (its user erased
                # everything, or removed it): not run. No await from here
                # to the loop taking it, so an erasure that removes it
                # later ends after the loop took it and drops it there.
                log.info("cron job removed before its run; not run", job=job.id)
                return True
            sent = await loop.run_job(
                channel=job.channel, chat_id=job.chat_id, user=job.user, text=attempt.prompt, private=job.private,
                fallback=attempt.fallback, locale=running.locale if running is not None else "",
                slot=job_slot(job.id, job.slot),
            )
            return sent.answered

        # `myclaw chat` is another process on the same cron.db: the jobs
        # reply to Telegram or Feishu chats, which only the gateway reaches.
        # Run here, they would be marked done with the reply lost, so chat
        # runs only the internal memory jobs (their lease keeps one at a time).
        store: Any = self._cron_store if self.config_channels else _InternalJobsOnly(self._cron_store)
        self.cron = CronScheduler(
            store,
            run_agent_job=run_agent_job,
            internal=memory_jobs(self.compressor) if self.compressor is not None else (),
            # A slot whose reply a kill left in the outbox is not run again.
            replies=self.delivery.outbox if self.delivery is not None else None,
        )
        self.agent.add_tools(
            cron_tools(
                self._cron_store,
                max_jobs=self.cfg.cron.max_jobs_per_user,
                min_interval_minutes=self.cfg.cron.min_interval_minutes,
            )
        )

    def _job_channels(self) -> set[str]:
        """The channels this process sends to: the enabled ones (known before
        they start, for the jobs missed while down) and those added by hand."""
        names = {c.name for c in self._extra_channels}
        if self.config_channels:
            names |= {s.name for s in self.channel_specs if s.section(self.cfg).enabled}
        return names

    def add_channel(self, channel: BaseChannel) -> None:
        """A channel built by the caller (``myclaw chat``'s terminal, tests)."""
        self._extra_channels.append(channel)

    def _build_channels(self) -> list[BaseChannel]:
        built = list(self._extra_channels)
        if self.config_channels:
            built += self._build_config_channels()
        if self.loop is not None:
            for channel in built:  # the notes channels send themselves name their owner
                channel.owner_of_sender = self.loop.identities.resolve
        return built

    def _build_config_channels(self) -> list[BaseChannel]:
        built: list[BaseChannel] = []
        for spec in self.channel_specs:
            section = spec.section(self.cfg)
            if not section.enabled:
                continue
            try:
                cls = spec.load()
                kwargs: dict[str, Any] = {}
                if spec.needs_http(self.cfg):
                    kwargs["http"] = self._http_server()
                if spec.keeps_replies and self.sessions is not None:
                    from .sentreplies import SentReplies  # imports the Feishu channel's types

                    kwargs["reply_store"] = SentReplies(self.sessions.db, spec.name)
                if spec.keeps_seen and self.sessions is not None:
                    from .seenids import SeenIds  # imports the Feishu channel's types

                    kwargs["seen_store"] = functools.partial(SeenIds, self.sessions.db, spec.name)
                if spec.keeps_drafts and self.sessions is not None:
                    from .draftmessages import DraftMessages  # imports the Feishu channel's types

                    kwargs["draft_store"] = DraftMessages(self.sessions.db, spec.name)
                if spec.keeps_comments and self.sessions is not None:
                    from .burstcomments import BurstComments

                    kwargs["comment_store"] = BurstComments(self.sessions.db, spec.name)
                if spec.reads_media and self.cfg.agent.vision:
                    kwargs["max_image_bytes"] = self.cfg.agent.max_image_bytes
                if spec.reads_media and self.cfg.agent.transcription.enabled:
                    kwargs["max_audio_bytes"] = self.cfg.agent.transcription.max_audio_bytes
                if spec.reads_media and self.cfg.agent.documents.enabled:
                    kwargs["max_document_bytes"] = self.cfg.agent.documents.max_bytes
                    kwargs["max_document_tokens"] = self.cfg.agent.documents.max_tokens
                built.append(cls(section, self.bus, **kwargs))
            except Exception as exc:  # one channel's trouble must not stop the others
                self._channel_failed(spec.name, exc)
        return built

    def _http_server(self) -> Any:
        if self.http is None:
            from .http import HttpServer

            gw = self.cfg.gateway
            self.http = HttpServer(gw.host, gw.port, trusted_proxies=gw.trusted_proxies)
        return self.http

    def _channel_failed(self, name: str, exc: BaseException) -> None:
        if isinstance(exc, ChannelFatalError):  # the channel's own words for it (a token refused)
            reason = str(exc) or type(exc).__name__
            log.error(f"channel {name} cannot run: {reason}", channel=name)
        else:
            # A bug's text may quote a message it was handling: its type and place only.
            fields = error_fields(exc)
            reason = fields["error"]
            log.error(f"channel {name} failed", channel=name, **fields)
        self.failed_channels[name] = reason

    # -- run ------------------------------------------------------------------------

    async def start(self) -> None:
        """Start hooks, the loop and every channel. Raises ConfigError when no
        channel is enabled; returns normally even if channels failed (see
        ``failed_channels`` / :meth:`wait`)."""
        if self.loop is None:
            raise RuntimeError("App.open() must run before start()")
        # An error nobody awaited (a fire-and-forget task's) logged without
        # its text: asyncio's default logs the task's repr, which quotes it.
        running = asyncio.get_running_loop()
        self._handler = (running, running.get_exception_handler())
        running.set_exception_handler(loop_exception_handler)
        channels = self._build_channels()
        self._open_health()  # after the channels: a webhook may have made the HTTP server
        if not channels and not self.failed_channels:
            raise ConfigError(NO_CHANNEL)
        if self.inbox is not None:
            # The edits, recalls and leavings a stop or a crash left unapplied: before
            # the extraction worker reads a recalled line, and before the cut
            # turns and the inbox's messages are answered (gateway/leftrevisions.py).
            self.revised = await apply_left_revisions(self.inbox, self.loop.revisions, self.loop.member_gone)
        for svc in (self.extraction, self.vectorizer, self.file_sync):
            if svc is not None:
                await svc.start()
                self._started_services.append(svc)
        self._loop_task = asyncio.create_task(self.loop.run(), name="process-loop")
        if self.recent_files is not None:  # rows past the day deleted, not only hidden
            self._tasks.append(asyncio.create_task(self.recent_files.run_sweeper(), name="recent-files"))
        engine = getattr(self.backend, "engine", None)
        if engine is not None:
            # Recalled memories' access counts are written in batches, off the
            # reply path; close() writes what is still pending.
            self._tasks.append(asyncio.create_task(engine.run_access_flusher(), name="memory-access"))
        delivery = self.delivery
        assert delivery is not None
        # The messages a stop left unanswered, found before a webhook or a
        # channel can deliver a new one (which would no longer leave a cut
        # turn its chat's last row, or be taken for one), queue first in
        # their chats; they start once the replies kept from the last run are held.
        self.loop.resume_gate.clear()
        try:
            if self.sessions is not None:
                self.resumed = await resume_cut_turns(
                    self.loop, self.sessions, delivery.outbox, now=self.clock.now(),
                    within=timedelta(minutes=self.cfg.gateway.resume_within_minutes), files=self.recent_files)
                if self.resumed.unmarked:  # a full disk: marked answered once there is room
                    self._tasks.append(asyncio.create_task(mark_later(
                        self.sessions, self.resumed.unmarked, retry=self.loop.mark_retry, most=MARK_RETRY_MAX),
                        name="resume-marks"))
            if self.inbox is not None:  # after the cut turns: each chat's queued messages behind its cut turn
                self.redelivered = await resume_inbox(
                    self.loop, self.inbox, now=self.clock.now(),
                    within=timedelta(minutes=self.cfg.gateway.resume_within_minutes),
                    channels={c.name: c for c in channels if isinstance(c, ReadsAgain)}, outbox=delivery.outbox)
            if self.http is not None:
                try:
                    await self.http.start()
                except OSError as exc:  # most often another gateway on the same port: say so, not a traceback
                    from gateway.listen import cannot_listen

                    g = self.cfg.gateway
                    what, fix = cannot_listen(g.host, exc)
                    raise ConfigError(
                        f"cannot listen on {g.host}:{g.port} (gateway.host / gateway.port): {what}; {fix}"
                    ) from None
                if self.memory_web is not None:  # said once it listens: not before a taken port's error
                    log.info("memory page enabled", path="/memory", host=self.cfg.gateway.host, port=self.http.port)
            await self._start_channels(channels, delivery)
        finally:
            self.loop.resume_gate.set()
        for recall in self.revised.recalls:  # the bot's reply to it leaves the chat too (Feishu)
            withdraw = getattr(self.channels.get(recall.channel), "withdraw_reply", None)
            if withdraw is not None:
                withdraw(recall.message_id, recall.chat_id)
        # Last: its catch-up (the jobs missed while down) writes rows in their
        # chats, which before the resume above would hide a cut turn there
        # (no longer its chat's last row: never answered); now such a job
        # waits behind the resumed turn in its chat's queue.
        if self.cron is not None:
            await self.cron.start()
            self._started_services.append(self.cron)
        if self._instance is not None and self.sessions is not None:
            # `myclaw memory forget --user` beside this gateway asks it to erase
            # (gateway/erasure_requests.py): only this process reaches what it
            # holds of the user (queued messages, cached settings).
            # Said in the lock file once the rows an earlier run left are gone.
            requests, instance = ErasureRequests(self.sessions.db, self.clock), self._instance
            self._tasks.append(asyncio.create_task(
                serve(requests, self._erase_asked, ready=lambda: instance.serves("erasures", "group-erasures")), name="erasure-requests"))

    async def _start_channels(self, channels: list[BaseChannel], delivery: Delivery) -> None:
        try:
            results = await asyncio.gather(*(c.start() for c in channels), return_exceptions=True)
        except asyncio.CancelledError:
            # A stop during start-up: close() knows only the channels that
            # started, so the ones cut short mid-start are stopped here.
            await asyncio.gather(*(self._stop_channel(c) for c in channels))
            raise
        for channel, result in zip(channels, results, strict=True):
            if isinstance(result, BaseException):
                if isinstance(result, asyncio.CancelledError):
                    raise result
                self._channel_failed(channel.name, result)
                await self._stop_channel(channel)
                continue
            self.channels[channel.name] = channel
            title_of = getattr(channel, "chat_title", None)  # Feishu: its events carry no group title
            if title_of is not None and getattr(self, "titles", None) is not None:
                self.titles.lookups[channel.name] = title_of
            self._tasks.append(asyncio.create_task(delivery.run_sender(channel), name=f"send:{channel.name}"))
            wait_failed = getattr(channel, "wait_failed", None)
            if wait_failed is not None:
                self._watchers[asyncio.create_task(wait_failed(), name=f"watch:{channel.name}")] = channel.name
            log.info("channel started", channel=channel.name)
        # Replies kept from the last run go out now, before the new ones to
        # their chats (the resumed turns' too: channels are up, Feishu's orphan drafts gone).
        await delivery.start()

    async def wait(self, stop: asyncio.Event) -> int:
        """Run until ``stop`` is set (exit code 0), the process loop dies or no
        channel is left (exit code 1)."""
        if not self.channels:
            log.error("no channel is running; stopping", failed=self.failed_channels)
            return 1
        assert self._loop_task is not None
        stopper = asyncio.create_task(stop.wait(), name="stop-signal")
        try:
            while True:
                waiting = {stopper, self._loop_task, *self._watchers}
                done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                if stopper in done:
                    return 0
                if self._loop_task in done:
                    exc = self._loop_task.exception() if not self._loop_task.cancelled() else None
                    log.critical("process loop stopped", **(error_fields(exc) if exc is not None else {}))
                    return 1
                for watcher in done:
                    name = self._watchers.pop(watcher)
                    channel = self.channels.pop(name, None)
                    self._channel_failed(name, _failure_of(watcher))
                    if channel is not None:
                        await self._stop_channel(channel)
                if not self.channels:
                    log.error("no channel is left running; stopping", failed=self.failed_channels)
                    return 1
        finally:
            stopper.cancel()

    async def _stop_channel(self, channel: BaseChannel, timeout: float | None = None) -> None:
        try:
            await channel.stop(timeout)
        except Exception as exc:  # stopping the rest matters more
            log.error("channel did not stop cleanly", channel=channel.name, **error_fields(exc))

    async def _stop_receiving(self, channel: BaseChannel, timeout: float) -> None:
        """``channel.stop_receiving()`` for at most ``timeout``, then cut:
        begun in any case, so its cut (what is pending put on the bus, or
        dropped unconfirmed) happens now, while the loop still drains the
        bus. ``wait_for`` with no time left cancelled it before it began,
        and the channel's ``stop()`` ran it whole after the loop had closed:
        what it put on the bus then was never answered. A cut is logged as
        the warning it is (the stop gave too little time, nothing failed);
        a channel whose stop raised, as an error."""
        task = asyncio.create_task(channel.stop_receiving(), name=f"stop-receiving:{channel.name}")
        try:
            done, _ = await asyncio.wait({task}, timeout=max(timeout, 0.0))
            if not done:
                task.cancel()
                await asyncio.wait({task})
                log.warning("channel intake cut at shutdown: its share of the stop ran out", channel=channel.name,
                            seconds=max(timeout, 0.0))
                return
            task.result()
        except asyncio.CancelledError:
            task.cancel()
            raise
        except Exception as exc:  # stopping the rest matters more
            log.error("channel did not stop receiving cleanly", channel=channel.name, **error_fields(exc))

    async def _replies_sent(self, deadline: float) -> None:
        """Wait until ``deadline`` (``time.monotonic``) at most for every
        channel's queued replies to go out, the channels side by side."""
        deadline = min(deadline, time.monotonic() + QUEUED_WAIT)

        async def sent(name: str) -> None:
            q = self.bus.outbound_queue(name)
            # asyncio.wait, not wait_for: with no time left it still lets the
            # join look once, so an empty queue is not logged as cut.
            join = asyncio.create_task(q.join(), name=f"replies-sent:{name}")
            try:
                done, _ = await asyncio.wait({join}, timeout=max(0.0, deadline - time.monotonic()))
            finally:
                join.cancel()
            if not done:
                log.warning("replies still queued at shutdown go to the outbox", channel=name, count=q.qsize())

        await asyncio.gather(*(sent(name) for name in self.channels))

    async def close(self, timeout: float = 10.0) -> None:
        """Stop everything in reverse order; safe to call twice and after a
        failed open/start."""
        if self._closed:
            return
        self._closed = True
        deadline = time.monotonic() + timeout
        # 1. channels take nothing more in; what they did not take stays
        #    with the platform (Telegram offsets unconfirmed, Feishu not ACKed).
        #    What they took goes on the bus, the loop still running: at most
        #    half the time, so the rest answers it (Feishu, which told the
        #    platform it took a message, cuts its downloads short within it).
        await asyncio.gather(*(self._stop_receiving(c, timeout * INTAKE_SHARE) for c in self.channels.values()))
        # 2. answer everything already taken: on the bus and in flight
        #    (channels still up, so those replies can go out)
        if self._loop_task is not None:
            if not self._loop_task.done() and self.loop is not None:
                if not await self.loop.drain(max(0.0, deadline - time.monotonic())):
                    log.error("messages left unanswered at shutdown", on_bus=self.bus.inbound.qsize(), timeout=timeout)
            self._loop_task.cancel()
            await asyncio.gather(self._loop_task, return_exceptions=True)
        if self.loop is not None:
            await self.loop.close(max(0.0, deadline - time.monotonic()))
        if self.recent_files is not None:
            await self.recent_files.flush()  # files kept by the last turns, before gateway.db closes
        # 2. let queued replies go out, every channel's at once, for
        #    QUEUED_WAIT within the stop's deadline (what is left goes to the
        #    outbox); only a send under way gets more, the grace below
        await self._replies_sent(deadline)
        # 3. senders and redelivery (a send cut here keeps its reply in the
        #    outbox), then the channels, while they can still be sent to; a
        #    send under way ends first, up to SEND_GRACE, and no other begins
        #    (cut, the next start would send again what the platform may
        #    have taken)
        for w in self._watchers:
            w.cancel()
        if self.delivery is not None:
            await self.delivery.stop(grace=min(max(0.0, timeout), SEND_GRACE))
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, *self._watchers, return_exceptions=True)
        if getattr(self, "titles", None) is not None:
            await self.titles.aclose()  # title lookups use the channels' clients
        # What is left of the timeout and the grace bounds the channels'
        # waits on their platforms (Telegram's offset, Feishu's withdrawals).
        left = max(0.0, deadline + SEND_GRACE - time.monotonic())
        await asyncio.gather(*(self._stop_channel(c, left) for c in list(self.channels.values())))
        # 4. services, servers, storage
        for svc in reversed(self._started_services):
            try:
                await svc.stop()
            except Exception as exc:
                log.error("service did not stop cleanly", **error_fields(exc))
        if self.delivery is not None and self.sessions is not None:
            # Last replies (a scheduled job's included) wait in gateway.db for the next start.
            await self.delivery.keep_queued(self._job_channels())
        if self.http is not None:
            await self.http.stop()
        if self.llm is not None:
            await self.llm.aclose()
        if self._memory_llm is not None:
            await self._memory_llm.aclose()
        if self._transcriber is not None:
            await self._transcriber.aclose()
        hybrid = getattr(getattr(self.backend, "retriever", None), "aclose", None)
        if hybrid is not None:
            await hybrid()  # query vectors still in flight
        if self._embedder is not None:
            await self._embedder.aclose()
        if self._cron_store is not None:
            await self._cron_store.close()
        if self.inbox is not None:
            await self.inbox.close()  # the rows of the turns just ended go before gateway.db closes
        if self.sessions is not None:
            await self.sessions.close()
        if self.backend is not None:
            await self.backend.close()
        self._data_lock.release()
        if self._chat_lock is not None:
            self._chat_lock.release()
        if self._instance is not None:
            self._instance.release()  # last: another gateway may start once the files are closed
        if self._handler is not None:
            running, before = self._handler
            if running.get_exception_handler() is loop_exception_handler:
                running.set_exception_handler(before)

    async def __aenter__(self) -> App:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


NO_CHANNEL = (
    "no channel is enabled: set channels.telegram.enabled or channels.feishu.enabled "
    "(or try `myclaw chat` in a terminal)"
)


class StorageError(Exception):
    """A data file cannot be opened (not a database, written by a newer
    myclaw, no room for its folder); the message names the file."""


@asynccontextmanager
async def _storage(path: Path, setting: str = "") -> AsyncIterator[None]:
    """Opening ``path``: a failure becomes a :class:`StorageError` naming
    it, for the operator, instead of a traceback from deep in SQLite;
    ``setting``: the config that put the file there, named when its
    folder cannot be made or written."""
    from memory.db import SchemaTooNew

    try:
        yield
    except SchemaTooNew as exc:
        raise StorageError(f"{path}: {exc}") from None
    except sqlite3.DatabaseError as exc:
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
        # Often an upgrade's migration meeting a full disk: the file is
        # fine (the step rolled back), so not the advice for a damaged one.
        if code in (sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR):
            raise StorageError(
                f"{path}: cannot write it ({exc}): the disk is full (or failing); free some space and start again "
                "(the file is as it was: a change cut short is rolled back, and an upgrade resumes)"
            ) from None
        if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
            raise StorageError(
                f"{path}: another process kept it locked ({exc}): wait for it (a `myclaw memory` job?) and start again"
            ) from None
        raise StorageError(
            f"{path}: cannot open it as a myclaw database ({exc}); restore it from a backup or move it aside"
        ) from None
    except OSError as exc:
        if setting:
            raise StorageError(
                f"{path}: cannot open it ({exc.strerror or exc}): set {setting} to a file in a folder this "
                "account can write, or leave it empty for the data folder"
            ) from None
        raise StorageError(f"{path}: cannot open it: {exc}") from None


async def _warn_stranded_handles(engine: Any, identities: dict[str, list[str]]) -> None:
    """A handle added to ``memory.identities`` after its person talked to the
    bot: what was stored under the handle stays there, while their messages
    now read and write the mapped user's rows. Say so at start, or the bot
    just seems to have forgotten them."""
    mapped = {h: user for user, handles in identities.items() for h in handles}
    stranded = {h: mapped[h] for h in await engine.owners() if h in mapped}
    if stranded:
        log.warning(
            "memory.identities maps handles that still own memories, events or buffered messages: "
            "those are no longer recalled for the mapped user; move them to it with "
            "`myclaw memory merge-identities` (gateway stopped; --dry-run shows what would move)",
            stranded=stranded,
        )


class _InternalJobsOnly:
    """The cron store as ``myclaw chat`` sees it: only the internal memory
    jobs come due (see ``App._open_cron``); the rest is the store itself."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.clock = store.clock

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def due(self, now: Any, **kw: Any) -> list[Any]:
        return [j for j in await self._store.due(now, **kw) if j.internal]


def _failure_of(watcher: asyncio.Task[Any]) -> BaseException:
    """``wait_failed()`` returns the channel's fatal error (it may also raise)."""
    if watcher.cancelled():
        return RuntimeError("channel watcher cancelled")
    exc = watcher.exception()
    if exc is not None:
        return exc
    result = watcher.result()
    return result if isinstance(result, BaseException) else RuntimeError("channel stopped")
