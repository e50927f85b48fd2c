"""The process loop (seed 10.3), for every inbound message:

    resolve user -> should_retrieve -> recall -> prompt -> agent (LLM)
    -> outbound reply -> buffer user + assistant turns (background)

Concurrency: each chat (``session_key``) has a FIFO queue drained by one
worker task, so a chat's messages are answered in order while different
chats run side by side, at most ``max_concurrent_chats`` of them inside the
pipeline at once. One slow LLM call holds one slot, not the loop. At most
``max_pending`` messages wait inside the loop; beyond that the dispatcher
stops taking from the bus, whose bounded queue then pushes back on the
channels.

Buffering order (nothing leaves the Tier 0 window unremembered): a turn's
rows are handed to ``MemoryBackend.buffer`` in a background task, so the
reply never waits for it. The *next* message of the same chat first waits
until that task has handed the rows to memory, queued in order (not for
memory.db's commit, which may wait behind an extraction's transaction), and
buffers any row still marked unbuffered (a crash, a failed write) before it
reads the window (:meth:`ProcessLoop._settle`). Rows are marked buffered
only once memory committed them, so by the time the window can slide past a
message, memory has it. Two kinds
of turn are kept from memory (marked handled, never buffered): a scheduled
job's, whose prompt the user did not say, and one in which memory was erased
at the user's request, whose words repeat what was erased.
"""

from __future__ import annotations

import asyncio
import difflib
import errno
import functools
import logging
import re
import sqlite3
import time
from array import array
from collections import deque
from collections.abc import Awaitable, Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta, tzinfo

import structlog

from memory.backend import MemoryBackend
from memory.clock import ZoneUnread, format_ts, parse_ts
from memory.errorlog import Wordless
from memory.identity import IdentityMap
from memory.lru import LRU
from memory.namesakes import GroupNames
from memory.prefilter import should_retrieve
from memory.scope import Chat, in_group
from memory.types import Hit

from .agent import Agent, AgentReply, apology
from .bus import (
    BOT_LEFT, EDIT, FILE_NOT_READ, LEFT, MESSAGE, MOVED, PHOTO_NOT_READ, RECALL, Attachment, Forwarded, InboundMessage,
    MessageBus, OutboundMessage, app_in_chinese, audio_not_read, not_heard, notes_in_chinese, words_in_chinese,
)
from .chattitles import ChatTitles
from .commands import BARE, COMMANDS, UserCommands, runs_itself
from .drafts import Drafts
from .erasures import Erasures
from .logging import error_fields
from .prompt import QUOTE_CHARS, PromptBuilder, Speaker, speaker_labels
from .ratelimit import RateLimiter, limited_note
from .recent_files import KeptFile, RecentFiles
from .resume import Reread, TurnContext
from .editedcommands import EDITED_COMMAND, EDITED_COMMAND_ZH, RanCommands
from .revisions import Revisions, edited_words
from .sessions import APOLOGISED, SessionStore, StoredMessage
from .inbox import Inbox, revision
from .inbox import kept as held_in_inbox
from .incognito import Incognito
from .timezones import UserTimezones
from .tools import ToolContext
from .transcription import (
    Transcriber,
    TranscriptionError,
    forwarded_not_heard_note,
    hear_forwarded,
    not_heard_note,
    with_transcript,
)

__all__ = [
    "HELP_TEXT", "HELP_TEXT_ZH", "JobFailed", "JobReply", "LoopStats", "ProcessLoop", "Samples", "parse_command", "percentile",
    "split_command",
]

# Lazy: resolved at each call, so it follows configure_logging (and its
# redaction) even though this module is imported before logging is set up.
log = structlog.get_logger(component="gateway")

KnownProjects = Callable[[str], Awaitable[Iterable[str]]]

# A paragraph is one line: a chat shows every newline, and the app wraps
# the line to its own width.
HELP_TEXT = (
    "myclaw remembers what matters across conversations.\n\n"
    "Ask me what I remember about you or tell me something to remember. In a "
    "private chat you can also ask me to forget something (\"forget that my cat "
    "is called Miso\"): it is erased, not hidden. I can send a message on a "
    "schedule too (\"every weekday at 9, summarise my plans\"), and read a file "
    "you send me (PDF, Word, Excel, PowerPoint, OpenDocument, text) or messages "
    "you forward (a Feishu chat record too), and answer about them.\n\n"
    "/new  start a fresh conversation (long-term memory is kept)\n"
    "/memory  what I remember about you (/memory words: search it)\n"
    "/forget m12  erase a memory for good, by the id /memory shows\n"
    "/forget all  erase everything I keep about you (asks to confirm)\n"
    "/export  a file of everything I keep about you (/导出)\n"
    "/timezone Asia/Shanghai  your time zone, for dates and schedules\n"
    "/incognito  stop learning from what you say (/incognito off)\n"
    "/project atlas orion  a project was renamed: what I know of atlas counts for orion\n"
    "/jobs  your scheduled messages (/jobs remove <id> cancels one)\n"
    "/share m12  let a memory be used in groups too (/unshare m12 takes it back; /share lists them)\n"
    "/help  this message\n\n"
    "In a group, mention me or reply to me to get an answer; there I leave out "
    "your profile and anything secret you told me."
)

HELP_TEXT_ZH = (
    "myclaw 会在一次次对话中记住重要的事。\n\n"
    "你可以问我记得你哪些事，也可以告诉我一件要记住的事。在私聊中还可以让我忘掉某件事"
    "（“忘掉我的猫叫 Miso”）：它会被真正删除，而不只是隐藏。我也能定时给你发消息"
    "（“每个工作日 9 点帮我总结计划”“明天 9 点提醒我打电话”）。发给我文件（PDF、Word、Excel、"
    "PowerPoint、OpenDocument、纯文本），或转发消息给我（包括飞书的合并转发聊天记录），我读完后回答相关问题。\n\n"
    "/new  开始新的对话（长期记忆保留）\n"
    "/memory  看看我记得你哪些事（/memory 关键词：搜索）\n"
    "/forget m12  按 /memory 显示的编号永久删除一条记忆\n"
    "/forget all  删除我保存的关于你的一切（会先请你确认）\n"
    "/导出  把我保存的关于你的一切导出成文件（/export）\n"
    "/timezone 上海  设置你的时区，日期和定时任务都按它计算\n"
    "/incognito  无痕模式：不从你说的话中学习（/incognito off 关闭；也可发 /无痕）\n"
    "/project 旧名 新名  项目改名了：旧名下记得的事归到新名下\n"
    "/jobs  你的定时消息（/jobs remove 编号 取消一个）\n"
    "/share m12  允许在群聊中也使用一条记忆（/unshare m12 收回；/share 列出已共享的）\n"
    "/帮助  显示这段说明（/help）\n\n"
    "在群聊中，@我 或回复我的消息，我才会回答；在群里我不会用到你的个人资料和你告诉我的秘密。"
)

# A command a stop cut or found waiting (ProcessLoop._park).
_CUT_COMMAND = "Sorry, I restarted before I could answer {command}. Please send it again."
_CUT_COMMAND_ZH = "抱歉，我在回答 {command} 之前重启了。请再发一次。"

_MISTYPED = "{typed} is not a command I know. Did you mean {meant}? /help lists them all."
_MISTYPED_ZH = "{typed} 不是我认识的命令。你是想发 {meant} 吗？发 /帮助 看全部命令。"
_KNOWN = tuple(c for c in (*COMMANDS, *BARE) if c.isascii())


def _meant(command: str) -> str | None:
    """The command ``command`` is a near miss of ("memroy" -> "memory"),
    or None: a known one, or nothing close ("shrug", "s" go to the model)."""
    if command in _KNOWN or not command.isascii():
        return None
    close = difflib.get_close_matches(command, _KNOWN, n=1, cutoff=0.75)
    return close[0] if close else None


_NEW_TEXT = "New conversation started. I still remember what you told me before."
_NEW_TEXT_ZH = "已开始新的对话。之前告诉我的事我仍然记得。"

# A command is ASCII, as Telegram's are; a Chinese alias (/导出) too.
_COMMAND = re.compile(
    r"^(?:@\S+\s+)?/([a-z_]+|[\u4e00-\u9fff]+)(?:@\S+)?(?:\s+(.*))?$", re.IGNORECASE | re.DOTALL
)
_CONTEXT_TURNS = 4  # recent messages recall may use to disambiguate a short message
# ... said within this long before it: the conversation under way, not the
# topic a user left off on weeks ago, which steered a new question's recall.
_CONTEXT_WITHIN = timedelta(hours=2)
# What the history keeps of a turn that erased memory at the user's request
# (ProcessLoop._blank_forgetting_turn): its place, not its words.
ERASED_TURN = {"user": "[Erased at the user's request: they asked to forget something.]",
               "assistant": "[Erased at the user's request.]"}


def parse_command(text: str) -> str | None:
    """``"/new"``, ``"/new@my_bot"``, ``"@my_bot /help"`` -> ``"new"`` / ``"help"``;
    None when arguments follow (see :func:`split_command`)."""
    found = split_command(text)
    return found[0] if found is not None and not found[1] else None


def split_command(text: str) -> tuple[str, str] | None:
    """``"/forget m12 e3"`` -> ``("forget", "m12 e3")``; ``"/new"`` -> ``("new", "")``."""
    m = _COMMAND.match(text.strip())
    return (m.group(1).lower(), (m.group(2) or "").strip()) if m else None


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (nearest rank); 0.0 for no values."""
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


STATS_SAMPLES = 10_000
MARK_RETRY_MAX = 30.0  # seconds between a held reply's tries at its mark, at most (ProcessLoop._until_marked)
# Chats known to have nothing left unbuffered (ProcessLoop._clean): the recent ones.
CHATS_KEPT = 4096


class Samples:
    """The latest ``capacity`` timings, in a ring of C doubles allocated up
    front: 80 KB a series whatever the traffic. A ``deque`` of floats held
    a 24-byte object per sample and grew as it filled, ~1 MB over the
    gateway bench's run across the four series (docs/BENCHMARKS.md, RSS)."""

    __slots__ = ("_buf", "_capacity", "_next", "_count")

    def __init__(self, capacity: int = STATS_SAMPLES) -> None:
        self._buf = array("d", bytes(8 * capacity))
        self._capacity = capacity
        self._next = 0  # where the next sample goes
        self._count = 0

    def append(self, value: float) -> None:
        self._buf[self._next] = value
        self._next = (self._next + 1) % self._capacity
        self._count = min(self._count + 1, self._capacity)

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[float]:
        """Oldest first."""
        if self._count < self._capacity:
            return iter(self._buf[: self._count])
        return iter(self._buf[self._next :] + self._buf[: self._next])


@dataclass
class LoopStats:
    """Counters for tests, logs and ``scripts/bench_gateway.py``.

    ``added_ms`` is what the gateway's own work adds to a reply: from the
    moment a message's handling starts (its chat's turn, a concurrency slot)
    to the reply on the outbound queue, minus the LLM calls. ``wait_ms`` is
    the time before that, in the chat's queue and waiting for a slot: it
    grows only when more chats are busy than ``max_concurrent_chats``.
    """

    received: int = 0
    replied: int = 0
    ignored: int = 0  # group messages without a mention
    commands: int = 0
    failed: int = 0  # answered with an apology
    errors: int = 0  # unexpected exceptions (logged)
    retrievals: int = 0
    buffered: int = 0  # rows handed to memory
    buffer_errors: int = 0
    redelivered: int = 0  # a message already answered, delivered again (ignored)
    # Replies held until a record says their message was answered (its row
    # and the mark both failed: a full disk; ProcessLoop._until_marked).
    held: int = 0
    limited: int = 0  # over a user's rate limit: not answered (gateway/ratelimit.py)
    revised: int = 0  # edits and recalls of earlier messages applied (gateway/revisions.py)
    superseded: int = 0  # turns dropped unanswered for a message that takes them in (metadata "supersedes")
    # Turns cancelled during their model call for an edit of their message, and begun again with its words.
    redone: int = 0
    recalled: int = 0  # turns dropped unanswered for a recall of their message (queued, or cancelled under way)
    # The latest STATS_SAMPLES of each: percentiles of recent traffic, not a
    # gateway's whole life (200,000 were 25 MB).
    added_ms: Samples = field(default_factory=Samples)
    wait_ms: Samples = field(default_factory=Samples)
    retrieval_ms: Samples = field(default_factory=Samples)
    llm_ms: Samples = field(default_factory=Samples)

    def summary(self) -> dict[str, float]:
        added = list(self.added_ms)
        return {
            "received": self.received,
            "replied": self.replied,
            "failed": self.failed,
            "added_p50_ms": round(percentile(added, 0.50), 3),
            "added_p95_ms": round(percentile(added, 0.95), 3),
            "added_max_ms": round(max(added, default=0.0), 3),
            "wait_p95_ms": round(percentile(list(self.wait_ms), 0.95), 3),
        }


class JobFailed(Wordless):
    """A scheduled job's model call failed and it had no fallback: nothing
    was sent, and nothing of it is in Tier 0 (the scheduler tries again).
    Its text is the agent's error type (AgentReply.error), fit for a log."""


class _TakenIn(Exception):
    """A turn's message was taken in by a later one before its reply went (ProcessLoop._handle_current)."""


class _Erased(_TakenIn):
    """A turn's message was erased at its sender's request (``/forget all``)
    while the model answered it: its answer is dropped, its rows go."""


class TurnNotSaved(Wordless):
    """The user's message could not be written to Tier 0 (gateway.db's write
    lock held by another process past the wait, or its disk full): the
    answer was made but is not sent, as nothing would remember it; the user
    is told to try again. Not raised for a message the durable inbox holds:
    that one is answered (:meth:`ProcessLoop._held`). ``full``: the disk was, so "busy" would not be true."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(type(cause).__name__)  # not its text: it may quote the row
        self.full = _disk_full(cause)


def _disk_full(exc: BaseException) -> bool:
    if isinstance(exc, sqlite3.Error):  # SQLITE_FULL, or an IO error (ENOSPC/EFBIG on the WAL)
        return (getattr(exc, "sqlite_errorcode", 0) & 0xFF) in (sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR)
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)


_NOT_SAVED = "Sorry, I could not save your message (my storage was busy), so my answer was not sent. Please try again."
_NOT_SAVED_ZH = "抱歉，你的消息没能保存（存储正忙），所以我的回答没有发出。请再试一次。"
_NOT_SAVED_FULL = (
    "Sorry, I could not save your message (my storage is full), so my answer was not sent. "
    "Please try again later."
)
_NOT_SAVED_FULL_ZH = "抱歉，你的消息没能保存（存储空间已满），所以我的回答没有发出。请稍后再试。"


@dataclass(frozen=True)
class JobReply:
    text: str  # what the chat got
    answered: bool  # False: the model failed and the job's fallback was sent


@dataclass
class _Item:
    msg: InboundMessage
    received: float  # perf_counter when the loop took it
    user: str | None = None  # set for jobs: run as this user
    future: asyncio.Future[str] | None = None  # set for jobs: the reply
    counted: bool = True  # holds a max_pending slot
    started: float = 0.0  # perf_counter when its handling began (slot taken)
    # A job's text for the chat if the model fails, given the chat's
    # language (None: raise JobFailed).
    fallback: Callable[[bool | None], str] | None = None
    fell_back: bool = False  # the fallback was sent
    job_slot: str = ""  # a job's run, named on its reply (OutboundMessage.job_slot)
    # The reply's drafts (agent.streaming), once its model call began: an
    # apology after a crash takes their place too.
    drafts: Drafts | None = None
    # Its model has answered: the turn is past being superseded (a reply may be going out).
    answering: bool = False
    # On its way to the model (past the commands, which are never cut half
    # done, and the rate limit): an edit or a recall may cancel it from here
    # (ProcessLoop._edit_current).
    asking: bool = False
    # Its model ran a tool that changes something (Tool.acts): the turn is
    # past being dropped or begun again, which would leave it done unsaid or do it twice.
    acted: bool = False
    # Cancelled for an edit during its model call (ProcessLoop._edit_current):
    # ``msg`` has the edited words, and the turn begins again with them.
    redo: bool = False
    redone: bool = False  # begun again so: the rate limit counted it once already
    superseded: bool = False  # dropped for a message that takes it in (ProcessLoop._supersede)
    recalled: bool = False  # ... or for a recall of it (ProcessLoop._recall_pending): its files go too
    # Set for a message a stop left unanswered (gateway/resume.py): its
    # row, already in Tier 0, is not written again.
    resumed: StoredMessage | None = None
    # Waits for the resumed turns to start (``resume_gate``): a message the
    # inbox kept from the last run (:meth:`ProcessLoop.redeliver`).
    gated: bool = False
    # A resumed message whose files or pictures are not to be had again:
    # answered with this note alone (gateway/resume.py lost_note).
    lost: str = ""
    # A message the inbox kept, made whole again from its platform in its
    # turn (its pictures, a member's name); ``lost`` if that fails.
    again: Reread | None = None
    # Its user row is written (or being written): a stop now leaves a cut
    # turn the next start answers; before, the stop writes it (_park).
    saved: bool = False
    kept: list[KeptFile] | None = None  # its files as recent files kept them, once they are
    # Its recording's transcript ("": not heard, the user told) and its
    # forwards as heard, once they are: a turn begun again for an edit has
    # them already (each transcription is a paid call).
    heard: str | None = None
    heard_forwards: tuple[Forwarded, ...] | None = None
    # An edit applied to the message it changes while that still waited in
    # the queue (ProcessLoop._edit_queued): answered and stored as edited, nothing is left to change.
    applied: bool = False
    # Erasures.mark when the loop took it: a job or resumed turn of a user
    # erased since is not run (ProcessLoop._erased).
    taken: int = 0

    def act(self) -> None:
        """The agent's ``on_act``: a tool that changes something is about to run."""
        self.acted = True

    @property
    def undoable(self) -> bool:
        """Under way and nothing of it is out or done: it may be dropped or begun again."""
        return not (self.answering or self.superseded or self.acted)

    @property
    def revisable(self) -> bool:
        """An edit or a recall of its message may cancel it: :attr:`undoable`, on its way to the model."""
        return self.asking and self.undoable


class ProcessLoop:
    def __init__(
        self,
        *,
        bus: MessageBus,
        sessions: SessionStore,
        backend: MemoryBackend,
        agent: Agent,
        prompts: PromptBuilder,
        identities: IdentityMap | None = None,
        known_projects: KnownProjects | None = None,
        max_concurrent_chats: int = 64,
        max_pending: int = 1000,
        limiter: RateLimiter | None = None,
        commands: UserCommands | None = None,
        timezones: UserTimezones | None = None,
        transcriber: Transcriber | None = None,
        files: RecentFiles | None = None,
        incognito: Incognito | None = None,
        stream_delay: float | None = None,
        stream_interval: float = 1.0,
        chats_kept: int = CHATS_KEPT,
        inbox: Inbox | None = None,
        titles: ChatTitles | None = None,
        hold: Callable[[OutboundMessage], Awaitable[OutboundMessage]] | None = None,
        mark_retry: float = 0.5,
        erasures: Erasures | None = None,
    ) -> None:
        """``stream_delay``: replies are streamed, and one taking longer
        than this many seconds shows as drafts every ``stream_interval``
        (gateway/drafts.py); None: no streaming. ``chats_kept``: chats
        remembered as having nothing left unbuffered (the most recent).
        ``hold``: writes a reply to the outbox as on its way before its
        Tier 0 row (``Delivery.hold``), so a kill before its send leaves it
        for the next start to send rather than answered and never sent.
        ``mark_retry``: seconds before a held reply's mark is tried again
        (doubling up to :data:`MARK_RETRY_MAX`; :meth:`_until_marked`)."""
        self.bus = bus
        self.mark_retry = mark_retry
        self._unmarked = 0  # replies held since the last held one was sent (one error, then a count)
        self.hold = hold
        self.inbox = inbox  # the messages taken and not done with (gateway/inbox.py): a row goes when its turn ends
        # Users erased in this run (/forget all; UserData.erase marks them):
        # their jobs and resumed turns taken before are not run.
        self.erasures = erasures or Erasures()
        self.stream_delay = stream_delay
        self.stream_interval = stream_interval
        self.incognito = incognito  # users who asked not to be learnt from (/incognito)
        self.titles = titles  # groups' titles as seen, to name them in /share and on the memory page
        self.files = files  # each chat's recent files, for file_read
        self.transcriber = transcriber  # voice messages' words (agent.transcription)
        self.sessions = sessions
        self.backend = backend
        self.agent = agent
        self.prompts = prompts
        self.identities = identities or IdentityMap()
        self.known_projects = known_projects
        self.stats = LoopStats()
        self._not_saved = 0  # messages not saved since the last one that was (TurnNotSaved)
        self._unbuffered = 0  # failed buffering attempts since the last that worked
        self.limiter = limiter
        self.commands = commands or UserCommands(backend)
        self.timezones = timezones  # each user's own (/timezone); None: the gateway's for all
        self.revisions = Revisions(sessions, backend, files=files)
        self._ran_commands = RanCommands()  # for an edit of one after its answer (gateway/editedcommands.py)
        self._slots = asyncio.Semaphore(max_concurrent_chats)
        self._pending = asyncio.Semaphore(max_pending)
        self._queues: dict[str, deque[_Item]] = {}
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._buffering: dict[str, asyncio.Task[None]] = {}
        # Set once that task has handed its rows to memory (or ended): what
        # _settle waits for, not memory.db's commit (:meth:`_buffer`).
        self._handed: dict[str, asyncio.Event] = {}
        # The turn each chat's worker is handling, for a message that supersedes it.
        self._current: dict[str, tuple[_Item, asyncio.Task[str]]] = {}
        # Chats known to have no unbuffered row (checked in gateway.db once,
        # then kept true by _buffer), so _settle skips the query per message.
        # Capped: a chat forgotten is checked again, once, at its next message.
        self._clean: LRU[str, None] = LRU(chats_kept)
        # A chat being moved to its new id (MOVED): the new id's key -> the old one's, whose worker runs the move.
        self._moving: dict[str, str] = {}
        # What else follows a chat to a new id, outside gateway.db's own
        # move (cron.db's jobs, the outbox's hold): name -> its move, how many.
        self.chat_moves: dict[str, Callable[[str, str, str], Awaitable[int]]] = {}
        # What a member set up in a group to speak for them there, taken
        # away when they leave it (LEFT; cron.db's jobs): name -> its
        # removal ``(channel, chat_id, user)``, how many.
        self.member_left: dict[str, Callable[[str, str, str], Awaitable[int]]] = {}
        # What goes when the bot itself is removed from a group (a LEFT of
        # BOT_LEFT: the group's own memory): name -> ``(channel, chat_id)``, how many.
        self.bot_left: dict[str, Callable[[str, str], Awaitable[int]]] = {}
        # The names two members of a group have gone by ``(channel, chat_id)``,
        # tagged in its prompt as in its notes (memory/namesakes.py); None: the file store.
        self.same_names: Callable[[str, str], Awaitable[GroupNames]] | None = None
        # Told after a turn is buffered where the chat's window now starts
        # ``(channel, chat_id, oldest row's time)``: memory extracts what
        # left it (ExtractionService.left_window, the pre-compaction flush).
        self.window_moved: list[Callable[[str, str, str], None]] = []
        # Messages whose turn a stop cut before their row was written (_work): _park writes them.
        self._cut: list[_Item] = []
        # Resumed turns (:meth:`resume`) wait for it: the App hands them over
        # before any channel can deliver a message, so each is first in its
        # chat, and opens it once the replies kept from the last run are held.
        self.resume_gate = asyncio.Event()
        self.resume_gate.set()
        self._closed = False

    # -- dispatch ---------------------------------------------------------------

    def footprint(self) -> dict[str, Collection[object]]:
        """Its per-chat state, by name, read-only: for measuring (scripts/bench_soak.py), not to change."""
        return {"queues": self._queues, "workers": self._workers, "buffering": self._buffering,
                "current": self._current, "clean": self._clean.view(), "moving": self._moving}

    async def run(self) -> None:
        """Take messages off the bus until cancelled."""
        while True:
            await self._pending.acquire()
            try:
                msg = await self.bus.consume_inbound()
            except BaseException:
                self._pending.release()
                raise
            self.stats.received += 1
            self._enqueue(_Item(msg, time.perf_counter()))

    def resume(self, msg: InboundMessage, row: StoredMessage, *, lost: str = "") -> None:
        """Answer ``msg``, stored as ``row`` by a run that stopped before
        answering it (gateway/resume.py), as if it came again; with
        ``lost``, that note alone answers it."""
        self.stats.received += 1
        self._enqueue(_Item(msg, time.perf_counter(), counted=False, resumed=row, lost=lost))

    def redeliver(self, msg: InboundMessage, *, lost: str = "", again: Reread | None = None) -> None:
        """Answer ``msg``, kept in the inbox by a run that stopped before
        its turn began (gateway/resume.py), as if it came again: its turn
        writes its row; it starts with the resumed turns, behind any in its
        chat. With ``lost`` (its pictures or recording are gone), that note
        alone answers it, in its turn: after the replies to those before it;
        with ``again``, that reads them again first, the note only if it fails."""
        self.stats.received += 1
        self._enqueue(_Item(msg, time.perf_counter(), counted=False, gated=True, lost=lost, again=again))

    def _enqueue(self, item: _Item) -> None:
        if self._closed:
            raise RuntimeError("process loop is closed")
        item.taken = self.erasures.mark
        key = self._moving.get(item.msg.session_key, item.msg.session_key)
        moved_from = item.msg.metadata.get("moved_from") if item.msg.kind == MOVED else None
        if isinstance(moved_from, str) and moved_from and moved_from != item.msg.chat_id:
            # Through the old chat's worker, after its turn under way (whose
            # reply is then stored before the rows move, not under the old id
            # after); the new id's messages queue behind it until it is done,
            # and a worker the new id has already stops at its next message
            # (_work), the move waiting for its turn under way (_quiet).
            key = f"{item.msg.channel}:{moved_from}"
            self._moving[item.msg.session_key] = key
        gone = item.msg.metadata.get("supersedes") if item.user is None else None
        if isinstance(gone, str) and gone:
            self._supersede(key, item.msg, gone)
        if item.msg.kind == EDIT and item.user is None:
            self._edit_queued(key, item)
            if not item.applied:
                self._edit_current(key, item)
        elif item.msg.kind == RECALL and item.user is None:
            self._recall_pending(key, item.msg)
        q = self._queues.get(key)
        if q is None:
            q = self._queues[key] = deque()
        q.append(item)
        if key not in self._workers:
            self._workers[key] = asyncio.create_task(self._work(key, q), name=f"chat:{key}")

    def _supersede(self, key: str, msg: InboundMessage, message_id: str) -> None:
        """``msg`` takes in the sender's earlier message ``message_id`` (a
        comment whose forwards came in a later poll, channels/telegram.py):
        that message's turn is dropped unanswered if it has not answered
        yet (still queued, or its model call under way: cancelled, its
        rows erased by :meth:`_work`), so the chat gets one reply that
        reads both. Answered already, it stays, and ``msg`` is answered
        as well. No await: a turn seen unanswered here cannot answer
        before it is cancelled (``_Item.answering``)."""

        def same(old: _Item) -> bool:
            return (old.user is None and old.msg.kind == MESSAGE and old.msg.message_id == message_id
                    and old.msg.sender_id == msg.sender_id)

        for old in self._queues.get(key, ()):
            if same(old):
                self._unqueue(key, old)
                self.stats.superseded += 1
                log.info("queued message taken in by a later one", chat=key, message_id=message_id, by=msg.message_id)
                return
        current = self._current.get(key)
        if current is not None and same(current[0]) and current[0].undoable:
            current[0].superseded = True
            current[1].cancel()
            self.stats.superseded += 1
            log.info("turn under way taken in by a later message; its answer dropped", chat=key,
                     message_id=message_id, by=msg.message_id)

    def _edit_queued(self, key: str, edit: _Item) -> None:
        """``edit`` changes the sender's message still queued here (its turn
        not begun): that message is answered, stored and learnt with the
        edited words (a comment sent with forwards: that comment's, the
        forwards kept). The edit keeps its place (and its inbox row: a crash
        before that turn has the next start edit the message's inbox row,
        gateway/leftrevisions.py), with nothing left to change. No await:
        a turn seen queued here has not begun."""
        msg = edit.msg
        for old in self._queues.get(key, ()):
            # Not one to be read again from the platform in its turn: that
            # would bring back the words as first kept (the edit then applies after it).
            if (old.user is None and old.resumed is None and old.again is None and old.msg.kind == MESSAGE
                    and old.msg.message_id == msg.message_id and old.msg.sender_id == msg.sender_id):
                words = edited_words(old.msg.text, msg)
                if words is None:
                    return  # applied to its stored row after its turn, as the words there allow (gateway/revisions.py)
                old.msg = replace(old.msg, text=words)
                edit.applied = True
                log.info("edit of a queued message applied before its turn", chat=key, message_id=msg.message_id)
                return

    def _edit_current(self, key: str, edit: _Item) -> None:
        """``edit`` changes the sender's message whose turn is under way and
        has sent nothing but drafts: the turn is cancelled and begun again
        with the edited words (:meth:`_handle_current`), so the answer, the
        stored row and memory all have what the message says now. Not once
        its model has answered (the reply may be out: the edit applies to
        what was stored, after it), nor once it ran a tool that changes
        something (a job made, a memory saved: begun again, it would do it
        twice), nor for a turn that reads its words from elsewhere (a
        resumed row, the platform), as :meth:`_edit_queued`. No await, as there."""
        current = self._current.get(key)
        if current is None:
            return
        turn, task = current
        msg = edit.msg
        if not (turn.user is None and turn.resumed is None and turn.again is None and turn.msg.kind == MESSAGE
                and turn.msg.message_id == msg.message_id and turn.msg.sender_id == msg.sender_id):
            return
        if turn.superseded:
            return  # dropped: the edit finds its stored row, if any, in its own turn
        if not turn.revisable:
            log.info("edit of a message being answered applies after its answer: a command, or its model "
                     "has answered or changed something", chat=key, message_id=msg.message_id)
            return
        words = edited_words(turn.msg.text, msg)
        if words is None or words == turn.msg.text:
            return  # (Telegram sends an edit for a link preview's change too: nothing to answer again)
        # Already cancelled for an earlier edit (not yet begun again): the later words stand.
        if not turn.redo and not task.cancel():
            return  # it ended meanwhile (an error, its apology): the edit applies after it
        turn.msg = replace(turn.msg, text=words)
        turn.redo = edit.applied = True
        log.info("edit of a message during its model call: the call is given up and the edited words answered",
                 chat=key, message_id=msg.message_id)

    def _unqueue(self, key: str, old: _Item) -> None:
        """Take ``old`` out of its chat's queue unanswered (superseded or recalled)."""
        self._queues[key].remove(old)
        self._done(old)
        if old.counted:
            self._pending.release()

    def _recall_pending(self, key: str, recall: InboundMessage) -> None:
        """``recall`` withdraws a message not answered yet: still queued, it
        leaves the queue; its turn under way (nothing of it out but drafts,
        nothing done by its tools), it is cancelled, its drafts taken away
        and its rows erased (:meth:`_handle_current`). Never answered, nor
        asked of the model; the recall itself applies in its turn as ever.
        The recall names no sender: the message's id in its chat is its own."""

        def same(old: _Item) -> bool:
            return old.user is None and old.msg.kind == MESSAGE and old.msg.message_id == recall.message_id

        for old in self._queues.get(key, ()):
            if same(old):
                self._unqueue(key, old)
                self.stats.recalled += 1
                log.info("queued message recalled: not answered", chat=key, message_id=recall.message_id)
                return
        current = self._current.get(key)
        if current is not None and same(current[0]) and current[0].revisable:
            current[0].superseded = current[0].recalled = True
            current[1].cancel()
            self.stats.recalled += 1
            log.info("message recalled during its model call: the call is given up, not answered", chat=key,
                     message_id=recall.message_id)

    async def _handle_current(self, key: str, item: _Item) -> str:
        """:meth:`_handle`, cancellable on its own by :meth:`_supersede`,
        :meth:`_recall_pending` and :meth:`_edit_current`: a turn dropped
        leaves no row in the chat's history; one cancelled for an edit
        leaves none either and begins again with the edited words. The
        turn stays ``_current`` until it is over, so an edit that comes
        while its rows are erased still has its words answered."""
        try:
            while True:
                handling = asyncio.create_task(self._handle(item), name=f"turn:{key}")
                self._current[key] = (item, handling)
                try:
                    return await handling
                except (asyncio.CancelledError, _TakenIn) as exc:
                    # Superseded, taken in, recalled, edited or cut by a stop: no reply takes
                    # its drafts' place, so they are taken away (a Feishu message half written).
                    if item.drafts is not None:
                        item.drafts.drop()
                    task = asyncio.current_task()
                    if isinstance(exc, asyncio.CancelledError) and (
                        not (item.superseded or item.redo) or (task is not None and task.cancelling())
                    ):
                        raise  # the worker itself is stopped
                user = self.identities.resolve(item.msg.channel, item.msg.sender_id)
                rows = await self.sessions.erase_message(key, item.msg.message_id, user)
                if item.recalled and item.kept and self.files is not None:
                    # Withdrawn for every member: file_read must not read it to one (gateway/revisions.py).
                    await self.files.forget_message(key, item.msg.message_id, [f.id for f in item.kept])
                if item.superseded:
                    log.info("superseded turn's rows erased", chat=key, message_id=item.msg.message_id, rows=rows)
                    if self._erased(item):
                        await self.sessions.db.checkpoint()  # as the erasure itself: the rows' old pages go from the WAL
                    return ""
                # Begun again as it came, its row to be written anew (a stop now parks it, _work).
                item.redo, item.redone, item.saved, item.asking, item.drafts = False, True, False, False, None
                self.stats.redone += 1
                log.info("turn begun again with the edited words", chat=key, message_id=item.msg.message_id,
                         rows=rows)
        finally:
            self._current.pop(key, None)

    async def _work(self, key: str, q: deque[_Item]) -> None:
        try:
            while q:
                if key in self._moving:
                    # A move into this chat is pending: it waits for the turn
                    # just done, and the rest of the queue goes on after it (_moved).
                    break
                item = q.popleft()
                cut = failed = False
                try:
                    if item.resumed is not None or item.gated:
                        await self.resume_gate.wait()
                    if item.msg.kind == MOVED:
                        await self._quiet(item.msg.session_key)
                    async with self._slots:
                        item.started = time.perf_counter()
                        self.stats.wait_ms.append((item.started - item.received) * 1000)
                        await self._settle(key)
                        text = await self._handle_current(key, item)
                    if item.future is not None and not item.future.done():
                        item.future.set_result(text)
                except asyncio.CancelledError:
                    cut = True  # a stop: the inbox keeps it for the next start
                    if item.future is not None and not item.future.done():
                        item.future.cancel()
                    if self._closed and not item.saved:
                        self._cut.append(item)  # stopped before its row was written: close() parks it
                    raise
                except JobFailed as exc:  # the scheduler's to retry; nothing was sent
                    self.stats.failed += 1
                    log.warning("scheduled job: the model failed", chat=key, error=str(exc))
                    if item.future is not None and not item.future.done():
                        item.future.set_exception(exc)
                except Exception as exc:  # one bad message must not stop the chat
                    self.stats.errors += 1
                    failed = True
                    if isinstance(exc, TurnNotSaved):
                        # Its cause is known (gateway.db full or locked) and
                        # every message fails alike until it passes: one
                        # error, then a count ("messages are saved again").
                        self._not_saved += 1
                        (log.error if self._not_saved == 1 else log.info)(
                            "message not saved, so not answered; later ones are counted until one is",
                            chat=key, full=exc.full, **error_fields(exc),
                        )
                    else:
                        log.error("handling a message failed", chat=key, **error_fields(exc))  # not its text: it may quote the message
                    if item.future is not None:
                        if not item.future.done():
                            item.future.set_exception(exc)
                    elif item.msg.kind == MESSAGE and (
                        not item.msg.is_group or item.msg.mentioned or item.msg.reply_to_bot
                    ):
                        await self._apologise(
                            item.msg, item.user or self.identities.resolve(item.msg.channel, item.msg.sender_id),
                            item.drafts, exc,
                        )
                finally:
                    if not cut:
                        self._done(item, failed=failed)
                    if item.counted:
                        self._pending.release()
                    if item.msg.kind == MOVED:  # however it ended, the new id's messages go on (once)
                        self._moved(f"{item.msg.channel}:{item.msg.metadata.get('moved_from') or ''}",
                                    item.msg.session_key)
        finally:
            # No await between the last `while q` check and here, so no
            # message can slip into a queue nobody drains.
            self._workers.pop(key, None)
            if not q:
                self._queues.pop(key, None)

    def _moved(self, old_key: str, new_key: str) -> None:
        """The move from ``old_key`` is done: the new id's messages that
        queued behind it in the old chat's worker go on in the new id's
        own, in order, and so do those that come next (no await here, so
        none slips in between)."""
        if self._moving.get(new_key) != old_key:
            return
        del self._moving[new_key]
        q = self._queues.get(old_key)
        rest = [i for i in q if i.msg.session_key == new_key] if q else []
        for i in rest:
            assert q is not None
            q.remove(i)
        nq = self._queues.get(new_key)  # left by the new id's own worker, stopped for the move
        if nq is None:
            if not rest:
                return
            nq = self._queues[new_key] = deque()
        nq.extend(rest)
        if nq and new_key not in self._workers:
            self._workers[new_key] = asyncio.create_task(self._work(new_key, nq), name=f"chat:{new_key}")

    async def _quiet(self, new_key: str) -> None:
        """Wait until the new id of a chat being moved has no turn under
        way: its worker stops before its next message while the move is
        pending (:meth:`_work`), so the rows never move beneath a turn.
        Outside ``_slots``: that turn may be waiting for one."""
        worker = self._workers.get(new_key)
        if worker is not None and worker is not asyncio.current_task():
            await asyncio.wait({worker})

    # -- one message ------------------------------------------------------------

    def _erased(self, item: _Item) -> bool:
        """Was ``item``'s message erased at its sender's request while the
        loop held it (``/forget all`` in another chat, or in this one
        behind it: gateway/userdata.py)? Said before the erasure, it must
        not reach the model nor be stored; what they send after is new.
        A message is known by its inbox row the erasure dropped; a job
        (its cron entry erased, the run already taken) and a turn resumed
        after a stop (its row in Tier 0 only) by their owner's erasure
        since the loop took them."""
        if item.user is None and self.inbox is not None and self.inbox.erased(item.msg):
            return True
        if item.user is None and item.resumed is None:
            return False
        owner = item.user or self.identities.resolve(item.msg.channel, item.msg.sender_id)
        return self.erasures.since(owner, item.taken)

    def _done(self, item: _Item, *, failed: bool = False) -> None:
        """``item``'s turn is over, however it ended: the inbox lets it go;
        but an edit, recall or leaving that ``failed`` to apply stays there
        for the next start (gateway/leftrevisions.py), counted."""
        if self.inbox is not None and item.user is None:
            self.inbox.done(item.msg, failed=failed)

    async def member_gone(self, msg: InboundMessage) -> dict[str, int]:
        """A member left a group (LEFT): what spoke for them there goes
        (``member_left``: their cron jobs); how many of each. Again for
        the same member removes nothing more (the next start's, a redelivery)."""
        if msg.sender_id == BOT_LEFT:
            erased = {name: await forget(msg.channel, msg.chat_id) for name, forget in self.bot_left.items()}
            log.info("bot removed from a group; the group's own memory erased", chat=msg.session_key, **erased)
            return erased
        gone = self.identities.resolve(msg.channel, msg.sender_id)
        removed = {name: await remove(msg.channel, msg.chat_id, gone) for name, remove in self.member_left.items()}
        log.info("member left a group; what spoke for them there removed", chat=msg.session_key, user=gone, **removed)
        return removed

    async def _handle(self, item: _Item) -> str:
        msg = item.msg
        if self._erased(item):  # queued behind a turn (another's, or their own) when they erased everything
            self.stats.ignored += 1
            log.info("queued message erased at its sender's request; not answered", chat=msg.session_key,
                     message_id=msg.message_id, job=item.user is not None, resumed=item.resumed is not None)
            return ""
        if msg.kind == MOVED:  # the chat has a new id: its history follows, no reply
            old = str(msg.metadata.get("moved_from") or "")
            moved: dict[str, int] = {}
            try:
                if old:  # gateway.db's rows in one transaction, the files with their index, then the rest
                    moved = await self.sessions.move_chat(msg.channel, old, msg.chat_id)
                    if self.files is not None:
                        moved["files"] = await self.files.move_chat(f"{msg.channel}:{old}", msg.session_key)
                    for name, move in self.chat_moves.items():
                        moved[name] = await move(msg.channel, old, msg.chat_id)
            finally:
                self._moved(f"{msg.channel}:{old}", msg.session_key)
            self._clean.discard(f"{msg.channel}:{old}")
            self._clean.discard(msg.session_key)
            log.info("chat moved to a new id; its history follows", channel=msg.channel, chat_id=old,
                     new_chat_id=msg.chat_id, **moved)
            return ""
        if msg.kind == LEFT:  # a member left the group: their jobs there no longer post as them, no reply
            await self.member_gone(msg)
            return ""
        if msg.kind != MESSAGE:  # an edit or recall of an earlier message: stored words change, no reply
            if not item.applied and await self.revisions.apply(msg) == "unknown" and msg.kind == EDIT:
                await self._edited_command(msg)  # unless it was a command: not stored, not run again
            self.stats.revised += 1
            return ""
        if item.again is not None:
            msg = await self._read_again(item)
        if item.lost and item.resumed is None:
            # Redelivered from the inbox without its pictures or recording
            # (never kept): asked for again, no row, no model call (its
            # caption alone could read as a command, or as nothing at all).
            # On its way first, then its inbox row goes (the note is its one
            # answer): a kill between leaves the note in the outbox, not silence.
            owner = self.identities.resolve(msg.channel, msg.sender_id)
            out = await self._on_its_way(self._outgoing(msg, item.lost, owner))
            # (a picture alone: not what `kept` keeps now)
            if item.user is None and not await self._inbox_answered(msg):
                return item.lost  # the next start sends it (see _inbox_answered)
            await self._publish(out)
            return item.lost
        if self.titles is not None and msg.is_group and item.user is None:
            if msg.metadata.get("chat_title"):
                await self.titles.seen(msg.channel, msg.chat_id, str(msg.metadata["chat_title"]),
                                       at=format_ts(self.sessions.clock.now()))
            else:  # a Feishu event: asked of Feishu in the background, never waited for
                self.titles.untitled(msg.channel, msg.chat_id)
        if item.user is None and msg.is_group and not (msg.mentioned or msg.reply_to_bot):
            self.stats.ignored += 1
            return ""
        if not msg.text.strip() and not (msg.images or msg.documents or msg.forwarded) and msg.audio is None:  # a sticker
            self.stats.ignored += 1
            return ""
        user = item.user or self.identities.resolve(msg.channel, msg.sender_id)
        private = not msg.is_group
        key = msg.session_key

        # A photo's or file's caption is a question about it, never a command
        # (nor is a forward's comment, or a forwarded "/new").
        attached = bool(msg.images or msg.documents or msg.forwarded) or msg.audio is not None
        found = split_command(msg.text) if item.user is None and not attached else None
        command, args = found if found is not None else (None, "")
        if item.gated and command is not None and runs_itself(command, args):
            # Kept by the inbox, its turn never begun before a kill (a stop
            # tells it at once, _park): not run again unasked either; told once.
            text = await self._cut_command(msg, command)
            await self._reply(msg, text, user, answer=True)
            log.warning("command a stop left unanswered; the user is asked to send it again",
                        chat=msg.session_key, message_id=msg.message_id)
            return text
        if command in COMMANDS:
            # Answered here, not by the model, and kept out of Tier 0 and
            # memory: a listing of memories is not something to learn again.
            self.stats.commands += 1
            self._ran_commands.keep(key, msg.message_id, msg.sender_id, msg.text, command)
            # They speak as the chat does, as /help does; with nothing said
            # to tell by, as what they show, then as the sender's app.
            chat_zh = await self._chat_is_chinese(msg)
            answer = await self.commands.answer(command, args, user=user, private=private, chat_zh=chat_zh,
                                                app_zh=app_in_chinese(msg), chat=(msg.channel, msg.chat_id),
                                                asking=(msg.channel, msg.chat_id, msg.message_id))
            await self._reply(msg, answer.text, user, answer.attachment, answer=True, ahead=not answer.erased)
            return answer.text
        if command in BARE and not args:
            self.stats.commands += 1
            self._ran_commands.keep(key, msg.message_id, msg.sender_id, msg.text, command)
            # "/help" has no words to tell the language by: the sender's
            # recent ones do, else the app's (a new user's /start).
            chat_zh = await self._chat_is_chinese(msg)
            zh = command == "帮助" or (app_in_chinese(msg) if chat_zh is None else chat_zh)
            if command == "new":
                await self.sessions.new_session(key, channel=msg.channel, chat_id=msg.chat_id)
                if self.files is not None:
                    await self.files.forget_chat(key)  # a fresh conversation: its files go too
                text = _NEW_TEXT_ZH if zh else _NEW_TEXT
            else:
                text = HELP_TEXT_ZH if zh else HELP_TEXT
            await self._reply(msg, text, user, answer=True)
            return text
        meant = _meant(command) if command is not None and private else None
        if meant is not None:
            # "/memroy": a near miss of a command is answered with the one
            # meant, not by the model (an improvised answer, and the typo
            # kept to be learnt). In a group it may be another bot's.
            self.stats.commands += 1
            chat_zh = await self._chat_is_chinese(msg)
            zh = app_in_chinese(msg) if chat_zh is None else chat_zh
            text = (_MISTYPED_ZH if zh else _MISTYPED).format(typed=f"/{command}", meant=" ".join((f"/{meant}", args)).strip())
            await self._reply(msg, text, user, answer=True)
            return text

        started = item.started or item.received
        t0 = time.perf_counter()
        history = await self.sessions.window(key)
        if msg.message_id and item.user is None and _answered(history, msg.message_id):
            # At-least-once delivery: Feishu retries a webhook whose answer
            # was late and redelivers after a reconnect, Telegram resends the
            # last batch when the process stopped before confirming it. The
            # reply row carries the message's id and is in Tier 0, so this
            # holds across restarts too. (Asked but never answered: answered
            # now. Answered with an apology: that was its answer, as at a
            # restart; the user retries with a message of their own.)
            self.stats.redelivered += 1
            log.info("message already answered; ignoring the redelivery", chat=key, message_id=msg.message_id)
            return ""
        resumed = item.resumed
        if resumed is not None:
            # The history it was asked after, not itself nor the messages a
            # stop wrote after it, still to be answered; with the replies
            # since to those before it (a stop wrote it before they came).
            history = [m for m in history if m.id < resumed.id or (m.id > resumed.id and m.role == "assistant")]
        if item.lost:
            # Its files or pictures are gone with the stop: asked for again,
            # once (marked first, as an apology is, once on its way), no model call.
            out = await self._on_its_way(self._outgoing(msg, item.lost, user))
            if not await self._marked_first(msg, functools.partial(
                    self.sessions.mark_apologised, msg.session_key, msg.message_id)):
                return item.lost  # the stop's: the next start sends it (see _marked_first)
            await self._publish(out)
            return item.lost
        if item.user is None and self.limiter is not None and not item.redone:
            decision = self.limiter.check(user)
            if not decision.allowed:
                self.stats.limited += 1
                if resumed is not None:
                    # Refused is its one answer (the note, now or earlier in
                    # the window): the next start must not answer it after all.
                    await self._mark_apologised(msg)
                if decision.notify:
                    log.warning(
                        "user over the rate limit; messages not answered",
                        user=user, window=decision.window, retry_after_s=round(decision.retry_after),
                    )
                    # Not on its way first: a note lost to a kill costs nothing
                    # (the limit still holds, the next message over it is told).
                    await self._reply(msg, limited_note(decision, chinese=notes_in_chinese(msg)), user)
                return ""
        # Past the rate limit (counted once: a turn begun again is not checked
        # again): an edit may begin it again from here, a recall drop it.
        item.asking = True
        if msg.audio is not None:  # after the rate limit: each one is a paid call
            heard = await self._transcribe(msg, user, item)
            if heard is None:
                return ""
            msg = heard
        if any(f.audio is not None for f in msg.forwarded):  # forwarded recordings: their authors' words
            heard = await self._transcribe_forwarded(msg, user, item)
            if heard is None:
                return ""
            msg = heard
        # Incognito: answered with what is remembered, never learnt from.
        quiet = item.user is None and self.incognito is not None and await self.incognito.since(user) is not None
        kept: list[KeptFile] = []
        if msg.documents and self.files is not None and resumed is None:  # a resumed turn's are kept already
            # A later message may ask about them (file_read): kept in memory
            # at once, written to gateway.db in the background (compressing
            # a 200 KB file and its transaction are not the reply's to wait
            # for); an incognito turn's stay in memory only.
            # (Kept once: a turn begun again for an edit has them already.)
            kept = item.kept = item.kept if item.kept is not None else await self.files.keep(
                key, user, msg.documents, incognito=quiet, message_id=msg.message_id)
        tz = await self._zone(user)
        # What the message is about beyond its own words: the message it
        # replies to, the messages it forwards (maybe all there is).
        about = "\n".join([*([msg.quoted.text] if msg.quoted is not None else []), *(f.text for f in msg.forwarded)])
        # A forward is passed on for the bot to act on, and "moved to
        # Thursday" needs what it moved: recalled even when the prefilter
        # would find its words too plain. "Yesterday" is read on the calendar
        # of the prompt's date: with no /timezone, the gateway's (the day log
        # is dated on it), not UTC's.
        hits = await self._recall(user, msg.text or about[:QUOTE_CHARS], history, private=private,
                                  tz=tz or self.prompts.tz,
                                  quoted=about, always=bool(msg.forwarded), chat=(msg.channel, msg.chat_id))
        retrieval_ms = (time.perf_counter() - t0) * 1000

        # The words as stored: a resumed message's row, which an edit may have changed since.
        said = msg.history_text if resumed is None else resumed.content
        ctx = ToolContext(
            user=user,
            channel=msg.channel,
            chat_id=msg.chat_id,
            private=private,
            message_id=msg.message_id,
            sender_id=msg.sender_id,
            message_text=said,
            tz=tz,
            forwards=bool(msg.forwarded),
            files=bool(msg.documents),
            sender_name=msg.sender_name if msg.is_group else "",
        )
        # In a group every user turn is marked with who said it, and the
        # rules name whose memories were recalled: the sender's, or for a
        # scheduled job's prompt (marked as the job's, "cron") its maker's,
        # whose turns the window may show. A private chat's prompt is left as it was.
        speaker: Speaker | None = None
        if msg.is_group:
            speaker = Speaker("cron") if item.user is not None else Speaker(msg.sender_id, msg.sender_name, user)
        asker, made_by = "", ""
        shared: GroupNames | None = None
        if speaker is not None:
            if self.same_names is not None:
                shared = await self.same_names(msg.channel, msg.chat_id)
            labels = speaker_labels(history, speaker, shared)
            if item.user is None:
                asker = labels[speaker.sender_id]
            else:
                maker = next((m.sender_id for m in reversed(history) if m.role == "user" and m.owner == item.user
                              and m.sender_id not in ("", "cron")), None)
                made_by = labels.get(maker, "") if maker is not None else ""
        system = await self.prompts.system_prompt(user, private=private, tools=bool(self.agent.tools_for(ctx)), tz=tz,
                                                  incognito=quiet, asker=asker, job=item.user is not None,
                                                  made_by=made_by)
        # Citations in the chat's language: the model may repeat their words.
        block = self.prompts.memory_block(hits, zh=notes_in_chinese(msg))
        # A photo or file goes to the model with its message only; the
        # history, and memory from it, keep its placeholder (msg.history_text),
        # never its bytes: what it showed is learnt from the reply, which
        # describes it.
        messages = self.prompts.messages(
            system, history, said, block, self.prompts.time_of_day(tz), msg.images, msg.quoted, msg.documents,
            speaker, self.prompts.earlier_day(tz), shared,
        )
        # The user's message goes to Tier 0 while the LLM runs (the write is
        # queued to SQLite before the request leaves), and is durable before
        # the reply is sent: a crash during the call still leaves it in Tier 0
        # and, via _settle, in memory. Awaiting it first cost a writer round
        # trip per message on the reply path (2.3 ms p50 at 100 messages/s).
        # A scheduled job's prompt is not something the user said now, nor is
        # its reply an answer to them: both stay in Tier 0, so the chat reads
        # right, but are written as handled, never buffered for extraction
        # ("Remind me to drink water" became a fact of the user's). The
        # prompt is written only once the model answered (or the job's
        # fallback is sent): a failed attempt leaves no trace in the chat, as
        # the scheduler tries again, and a stop mid-call runs the job again
        # at start.
        job = item.user is not None
        user_write: asyncio.Task[StoredMessage] | None = None
        item.saved = True
        if resumed is not None:
            user_write = asyncio.create_task(_stored(resumed))
        elif not job:
            context = TurnContext.of(msg, kept)  # for answering it at the next start, should a stop cut this turn
            user_write = self._save(msg, "user", msg.history_text, user, sender_id=msg.sender_id,
                                    message_id=msg.message_id, buffered=quiet,
                                    context=context.dumps() if context is not None else "",
                                    sender_name=msg.sender_name if speaker is not None else "")
        # A scheduled job's reply is not waited for by anyone watching: whole.
        drafts = item.drafts = None if job or self.stream_delay is None else Drafts(
            self.bus, msg, owner=user, delay=self.stream_delay, interval=self.stream_interval,
            started=started, monotonic=time.perf_counter,
        )
        if drafts is not None:
            drafts.start(asyncio.get_running_loop().call_later)
        try:
            reply: AgentReply = await self.agent.run(messages, ctx, user_text=msg.text, zh=notes_in_chinese(msg),
                                                  on_text=drafts, on_act=item.act)
        finally:
            if drafts is not None:
                drafts.stop()
            if user_write is not None and not user_write.done():  # also when cancelled: the write must finish
                await asyncio.wait([user_write])
        if item.user is None and await self.bus.taken_in(key, item.msg.message_id):
            # Answered while a burst of forwards taking it in was gathered
            # (gateway/bus.py): the burst's reply reads both; this one is not sent.
            item.superseded = True
            self.stats.superseded += 1
            log.info("answered turn taken in by a burst published meanwhile; its answer dropped", chat=key,
                     message_id=item.msg.message_id)
            raise _TakenIn
        if self._erased(item):
            # Erased while the model answered (/forget all in another chat):
            # its answer is dropped and its rows go (_handle_current), as a
            # superseded turn's: nothing of it is stored or learnt after.
            item.superseded = True
            log.info("turn under way erased at its sender's request; its answer dropped", chat=key,
                     message_id=item.msg.message_id)
            raise _Erased
        item.answering = True  # before anything is sent: from here on the turn is not superseded
        if job and not reply.ok:
            if item.fallback is None:
                raise JobFailed(reply.error or "the model gave no answer")
            log.warning("scheduled job: the model failed again; sending the job's own text", chat=key,
                        error=reply.error)
            item.fell_back = True
            # The bot speaks by itself: as the chat does, then as the channel's app.
            chat_zh = await self._chat_is_chinese(msg)
            text = item.fallback(app_in_chinese(msg) if chat_zh is None and msg.locale else chat_zh)
            reply = AgentReply(text=text, ok=True, llm_ms=reply.llm_ms, rounds=reply.rounds,
                               tools_used=reply.tools_used, error=reply.error, forgot=reply.forgot)
            self.stats.failed += 1
        if user_write is None:
            user_write = self._save(msg, "user", msg.text, user, sender_id="cron", message_id=msg.message_id,
                                    buffered=True)
            await asyncio.wait([user_write])
        user_row: StoredMessage | None = None
        try:
            user_row = user_write.result()
        except Exception as exc:
            if not self._held(item):  # nothing else keeps it: not sent, the user told why
                raise TurnNotSaved(exc) from exc
            # The inbox keeps it, so it is answered; it is missing from the
            # chat's history and from memory (one error, then a count).
            self._not_saved += 1
            (log.error if self._not_saved == 1 else log.info)(
                "message not saved in the chat's history; answered all the same (the inbox holds it), "
                "not learnt from; later ones are counted until one is saved",
                chat=key, full=_disk_full(exc), **error_fields(exc),
            )
        if user_row is not None and self._not_saved:
            log.warning("messages are saved again", not_saved=self._not_saved)
            self._not_saved = 0
        # A turn in which memory was erased at the user's request is not
        # learnt from either: its rows were to be buffered after the erasure
        # (which dropped the buffered lines repeating the fact), and the
        # request itself says the fact ("forget that my cat is called Miso"),
        # so the next extraction wrote it again. Whatever else the message
        # said is lost to memory with it: forgetting errs on forgetting.
        # A reply whose question is not in Tier 0 is not learnt from alone.
        learn = not job and not reply.forgot and not quiet and user_row is not None
        reply_write: asyncio.Task[StoredMessage] | None = None
        marked = True  # something durable says the message was answered, or nothing would answer it again
        # On its way before any row says the message was answered (the reply's, or
        # the apology's mark): a kill from here on leaves it in the outbox, not lost.
        # Not awaited first: its task runs first, and its insert reaches the
        # writer thread (one connection, statements in order) ahead of the
        # reply row's, so it commits first without a round trip of its own
        # on the reply path (docs/BENCHMARKS.md, "A reply on its way").
        out = self._outgoing(msg, reply.text, user, drafts=drafts)
        if item.job_slot:  # the slot's mark: what went, for cron.db (a kill may fall before it records the run)
            out = replace(out, job_slot=item.job_slot, job_fallback=item.fell_back)
        holding = asyncio.create_task(self._on_its_way(out))
        if reply.ok:  # an apology is not part of the conversation
            # Written before the reply is sent: a stop in between must not
            # leave a reply out with no row saying so, or the next start
            # would answer the message again (gateway/resume.py); the reply
            # is already in the outbox (``out``), which sends it after a kill.
            # A failed write still sends the reply (_buffer logs it).
            reply_write = self._save(msg, "assistant", reply.text, user, message_id=msg.message_id, buffered=not learn)
            await asyncio.wait([reply_write])
            if reply_write.exception() is not None and msg.message_id:
                # No row says it was answered (a full disk takes no insert):
                # the user row is marked so, an update, which it may still take.
                marked = await self._mark_answered(msg, item, saved=user_row is not None)
        else:
            # An apology is not held: a real answer after a restart is welcome.
            self.stats.failed += 1
            await self._mark_apologised(msg)
            if user_row is None:
                await self._mark_answered(msg, item, saved=False)
        out = await holding
        if not marked:
            await self._until_marked(msg, functools.partial(self._record_answered, msg, item, saved=user_row is not None))
        await self._publish(out)
        if self._erased(item):
            # Erased while its reply was written and sent: its rows, written
            # after the erasure's, go now, never buffered to be learnt.
            if job:  # its prompt and reply carry no message id: by their rows
                written = reply_write.result() if reply_write is not None and reply_write.exception() is None else None
                rows = await self.sessions.erase_rows([r.id for r in (user_row, written) if r is not None], user)
            else:
                rows = await self.sessions.erase_message(key, msg.message_id, user)
            await self.sessions.db.checkpoint()
            log.info("answered turn erased at its sender's request; its rows erased", chat=key,
                     message_id=msg.message_id, rows=rows)
            return reply.text
        if reply.forgot and reply.ok:
            written = reply_write.result() if reply_write is not None and reply_write.exception() is None else None
            await self._blank_forgetting_turn([r for r in (user_row, written) if r is not None])
        total_ms = (time.perf_counter() - started) * 1000
        self.stats.added_ms.append(max(0.0, total_ms - reply.llm_ms))
        self.stats.retrieval_ms.append(retrieval_ms)
        self.stats.llm_ms.append(reply.llm_ms)
        if log_debug_enabled():
            log.debug(
                "message handled",
                channel=msg.channel,
                chat_id=msg.chat_id,
                user=user,
                hits=len(hits),
                tools=list(reply.tools_used),
                ok=reply.ok,
                model=reply.candidate or None,  # which of agent.model / agent.fallbacks[i] answered
                retrieval_ms=round(retrieval_ms, 2),
                llm_ms=round(reply.llm_ms, 2),
                total_ms=round(total_ms, 2),
            )
        if reply.images_unseen and msg.images and user_row is not None:  # after the reply: it does not wait for this write
            user_row = await self._mark_unseen(msg, user_row)
        # A resumed row was buffered by _settle before this turn began.
        self._buffer_later(key, [user_row] if resumed is None and user_row is not None else [], reply_write,
                           learn=learn, group=msg.is_group)
        return reply.text

    async def _mark_unseen(self, msg: InboundMessage, row: StoredMessage) -> StoredMessage:
        """The user's row of a message whose pictures the model could not
        read (it answered the words alone): marked as a picture nobody saw,
        so memory does not take the reply for what it showed. Written before
        it is buffered; a failed write costs Tier 0's mark, not the reply,
        and memory still gets the corrected row."""
        # A scanned PDF's pages went as pictures: the file is what nobody read.
        mark = FILE_NOT_READ if msg.documents else PHOTO_NOT_READ
        content = replace(msg, placeholder=mark).history_text  # a forward's words stay
        try:
            await self.sessions.revise(row.id, content)
        except Exception as exc:
            log.error("marking a photo the model could not see failed", chat=msg.session_key, **error_fields(exc))
        return replace(row, content=content)

    async def _chat_is_chinese(self, msg: InboundMessage) -> bool | None:
        """Are most of the sender's recent words in the chat Chinese? In a
        group where they said none yet: their app's language if known, else
        most of everyone's. Messages without words (👍, a photo) do not
        count; None: nothing to tell by. (Commands are rare: a window read
        is cheap.)"""
        key = msg.session_key
        try:
            history = await self.sessions.window(key)
        except Exception as exc:  # the answer goes by what it shows, it is not lost
            log.warning("chat history not read for a command's language", chat=key, **error_fields(exc))
            return None
        # A job's own rows ("cron") are its text, not the chat speaking.
        said = [m for m in history if m.role == "user" and m.sender_id != "cron"
                and words_in_chinese(m.content) is not None]
        theirs = [m for m in said if m.sender_id == msg.sender_id]
        if not theirs and msg.is_group and msg.locale and msg.sender_id:  # a job has no sender: the group's words
            return app_in_chinese(msg)
        votes = [words_in_chinese(m.content) for m in (theirs or said)[-_CONTEXT_TURNS:]]
        return votes.count(True) * 2 >= len(votes) if votes else None

    def _save(
        self,
        msg: InboundMessage,
        role: str,
        content: str,
        owner: str,
        *,
        sender_id: str = "",
        message_id: str,
        buffered: bool = False,
        context: str = "",
        sender_name: str = "",
    ) -> asyncio.Task[StoredMessage]:
        """Append a row to the chat's Tier 0 in a task of its own (see _handle
        for when it is awaited); ``buffered``: not for memory, written as handled."""
        key = msg.session_key
        return asyncio.create_task(
            self.sessions.append(
                key,
                channel=msg.channel,
                chat_id=msg.chat_id,
                role=role,
                content=content,
                owner=owner,
                sender_id=sender_id,
                message_id=message_id,
                buffered=buffered,
                context=context,
                sender_name=sender_name,
            ),
            name=f"tier0:{key}",
        )

    async def _transcribe(self, msg: InboundMessage, user: str, item: _Item) -> InboundMessage | None:
        """``msg`` with its recording's transcript as its words (after a
        caption, if any), or None when there is nothing left to answer: the
        user is told the recording was not read, and a caption goes on.
        Once a turn: begun again for an edit, it has ``item.heard``."""
        assert msg.audio is not None
        words, told = item.heard or "", item.heard is not None
        if not told:
            try:
                if self.transcriber is None:
                    raise TranscriptionError("agent.transcription is off")
                words = await self.transcriber.transcribe(msg.audio)
            except TranscriptionError as exc:
                log.warning("voice message not transcribed", chat=msg.session_key, error=str(exc))
            item.heard = words
        if words:
            return replace(msg, text=with_transcript(msg.text, msg.audio, words), audio=None)
        # Not on its way first: a caption may still be answered after it, and
        # a row waiting would have the next start take the message as answered.
        if not told:
            await self._reply(msg, not_heard_note(msg.audio, zh=notes_in_chinese(msg)), user)
        if not msg.text.strip():
            return None
        return replace(msg, audio=None, placeholder=audio_not_read(msg.audio.name))

    async def _transcribe_forwarded(self, msg: InboundMessage, user: str, item: _Item) -> InboundMessage | None:
        """``msg`` with its forwarded recordings' transcripts in their own
        words (gateway/transcription.py), or None when a recording not
        heard was all there was to answer: the user is told. Once a turn,
        as :meth:`_transcribe`."""
        if item.heard_forwards is not None:  # begun again for an edit: heard, and told, already
            return replace(msg, forwarded=item.heard_forwards)
        forwarded, missed = await hear_forwarded(self.transcriber, msg.forwarded)
        item.heard_forwards = forwarded
        msg = replace(msg, forwarded=forwarded)
        if missed:
            log.warning("forwarded recordings not transcribed", chat=msg.session_key, missed=len(missed))
            left = bool(msg.text.strip()) or any(not not_heard(f.text) for f in forwarded)
            await self._reply(msg, forwarded_not_heard_note(missed, zh=notes_in_chinese(msg), rest=left), user)
            if not left:
                return None
        return msg

    async def _zone(self, user: str) -> tzinfo | None:
        """The user's own zone (cached after their first message)."""
        if self.timezones is None:
            return None
        try:
            return await self.timezones.get(user)
        except ZoneUnread:
            return None  # said once by UserTimezones, not once a message
        except Exception as exc:  # gateway.db trouble costs the zone (the gateway's is used), not the reply
            log.error("user time zone not read", user=user, **error_fields(exc))
            return None

    async def _recall(
        self,
        user: str,
        text: str,
        history: Sequence[StoredMessage],
        *,
        private: bool,
        tz: tzinfo | None = None,
        quoted: str = "",
        always: bool = False,
        chat: Chat | None = None,
    ) -> list[Hit]:
        """``chat``: where the answer is read; a group reads only what the
        user said there (memory/scope.py)."""
        try:
            projects: Iterable[str] = await self.known_projects(user) if self.known_projects else ()
            if not always and not should_retrieve(text, projects) and not (quoted and should_retrieve(quoted, projects)):
                return []
            self.stats.retrievals += 1
            # The user's own last turns (the assistant's replies would only
            # echo them); bench_recall scores MADial the same way. In a group,
            # the asker's alone: another member's lines must not steer which
            # of the asker's memories the whole group is shown.
            since = self.sessions.clock.now() - _CONTEXT_WITHIN
            context: list[str] = []
            # From the newest back, parsing times only until enough are found
            # (the history holds a whole window; recall wants the last few).
            for m in reversed(history):
                if len(context) == _CONTEXT_TURNS:
                    break
                if m.role == "user" and (private or m.owner == user) and parse_ts(m.created_at) >= since:
                    context.append(m.content)
            context.reverse()
            if quoted:  # "what do you think of this?": the message replied to says what "this" is
                context.append(quoted[:QUOTE_CHARS])
            hits = await self.backend.recall(user, text, context=context, private=private, tz=tz, chat=chat)
            return await self._titled(hits) if private else hits
        except Exception as exc:  # memory trouble costs the memory block, not the reply
            log.error("memory recall failed", user=user, **error_fields(exc))  # FTS5 quotes the query
            return []

    async def _titled(self, hits: list[Hit]) -> list[Hit]:
        """In a private chat, a memory said in a group is cited by the
        group's title as last seen (gateway/chattitles.py), when known."""
        groups = {h.provenance.channel + ":" + h.provenance.chat_id: h for h in hits
                  if h.provenance.chat_id and in_group(h.provenance)}
        if self.titles is None or not groups:
            return hits
        names = await self.titles.names(groups)
        return [replace(h, title=names.get(h.provenance.channel + ":" + h.provenance.chat_id, "")) for h in hits]

    async def _reply(
        self, msg: InboundMessage, text: str, owner: str, attachment: Attachment | None = None, *,
        drafts: Drafts | None = None, answer: bool = False, ahead: bool = True,
    ) -> None:
        """``owner``: whose message it answers, named on the reply so that,
        kept in the outbox, it goes with their data (a message not stored
        in Tier 0 could not be traced back to them). ``drafts``: the
        reply's drafts, whose place it takes. ``answer``: the message's one
        answer (a command's), written to the outbox as on its way first, so
        a kill before its send leaves it for the next start (a cut command
        is not run again); unless not ``ahead``: a ``/forget`` answer quotes
        what it erased, and a kill losing the confirmation costs less than
        the erased words written back to disk."""
        out = self._outgoing(msg, text, owner, attachment, drafts=drafts)
        if answer:
            if ahead:
                out = await self._on_its_way(out)
            if held_in_inbox(msg) and not await self._inbox_answered(msg):
                # Its inbox row goes before the send, not after the turn: a
                # kill after the send must not leave the next start a command
                # to tell the user was never answered (resume_inbox).
                return  # the stop's: the next start sends it (see _inbox_answered)
        await self._publish(out)

    @staticmethod
    def _outgoing(
        msg: InboundMessage, text: str, owner: str, attachment: Attachment | None = None, *,
        drafts: Drafts | None = None,
    ) -> OutboundMessage:
        out = OutboundMessage.answering(msg, text, attachment, owner=owner)
        return drafts.reply(out) if drafts is not None else out

    async def _edited_command(self, msg: InboundMessage) -> None:
        """An edit of a command this run answered, its words changed: not
        run again, and the user told so (gateway/editedcommands.py)."""
        command = self._ran_commands.changed(msg.session_key, msg.message_id, msg.sender_id, msg.text)
        if command is None:
            return
        chat_zh = await self._chat_is_chinese(msg)
        zh = app_in_chinese(msg) if chat_zh is None else chat_zh
        await self._reply(msg, (EDITED_COMMAND_ZH if zh else EDITED_COMMAND).format(command=command),
                          self.identities.resolve(msg.channel, msg.sender_id))
        log.info("edit of a command after its answer: not run again, the user told", chat=msg.session_key,
                 message_id=msg.message_id)

    async def _cut_command(self, msg: InboundMessage, command: str) -> str:
        """The note for a command a stop left unanswered, in the chat's language."""
        chat_zh = await self._chat_is_chinese(msg)
        zh = command in ("帮助", "导出", "无痕") or (app_in_chinese(msg) if chat_zh is None else chat_zh)
        return (_CUT_COMMAND_ZH if zh else _CUT_COMMAND).format(command=f"/{command}")

    async def _on_its_way(self, out: OutboundMessage) -> OutboundMessage:
        """``out`` written to the outbox as on its way (``hold``). A
        scheduled job's too: its run is recorded (gateway/cron.py) once the
        reply is published, so a kill after that record and before the
        send lost the reminder; now the next start sends it. A kill between
        this row and that record does not run the job again: the row marks
        its slot answered (``job_slot``), which the catch-up asks first."""
        if self.hold is None or not out.text:
            return out
        return await self.hold(out)

    async def _publish(self, out: OutboundMessage) -> None:
        if not out.text:
            return
        await self.bus.publish_outbound(out)
        self.stats.replied += 1

    async def _apologise(
        self, msg: InboundMessage, owner: str, drafts: Drafts | None = None, exc: BaseException | None = None
    ) -> None:
        if isinstance(exc, TurnNotSaved):  # the answer was made: say what failed, not that it was not
            zh = notes_in_chinese(msg)
            text = (_NOT_SAVED_FULL_ZH if zh else _NOT_SAVED_FULL) if exc.full else (_NOT_SAVED_ZH if zh else _NOT_SAVED)
        else:
            text = apology(msg.text, zh=notes_in_chinese(msg))
            await self._mark_apologised(msg)
        try:
            await self._reply(msg, text, owner, drafts=drafts)
        except Exception as exc:  # the bus itself is gone; nothing more to do
            log.error("could not send the apology", chat=msg.session_key, **error_fields(exc))

    async def _read_again(self, item: _Item) -> InboundMessage:
        """``item``'s message made whole from its platform (``item.again``);
        when that fails and its pictures or file are missing (``item.lost``),
        the note is its one answer (:meth:`_handle` sends it, its inbox row gone)."""
        read, item.again = item.again, None
        assert read is not None
        msg = item.msg
        try:
            item.msg = await read()
        except Exception as exc:  # not to be had (expired, deleted, too large now): asked for again
            log.warning("message taken before a stop not read again from the platform", chat=msg.session_key,
                        message_id=msg.message_id, asked_again=bool(item.lost), **error_fields(exc))
            return msg
        item.lost = ""
        return item.msg

    def _held(self, item: _Item) -> bool:
        """Is ``item``'s message in the durable inbox until its turn ends
        (a platform's message, written there before it was on the bus)?"""
        return self.inbox is not None and item.user is None and item.resumed is None and held_in_inbox(item.msg)

    async def _blank_forgetting_turn(self, rows: Sequence[StoredMessage]) -> None:
        """A turn in which memory was erased at the user's request keeps its
        rows (the reply's says the message was answered) but not their
        words: they were written after the erasure took the history lines
        that said the fact, and a request naming it or a reply restating it
        ("done, I no longer remember 4711") showed it in every next prompt."""
        for row in rows:
            await self.sessions.revise(row.id, ERASED_TURN[row.role])
        if rows:
            await self.sessions.db.checkpoint()  # the old words' pages leave the WAL (secure_delete)

    async def _inbox_answered(self, msg: InboundMessage) -> bool:
        """``msg``'s inbox row goes before its one answer is sent (a note
        asking for it again, a command's answer: no Tier 0 row says they
        went); True: send it. As :meth:`_marked_first`, whose next start
        sends it once, from the outbox (its row on its way) or, that row
        not written either, from the inbox."""
        if self.inbox is None:
            return True
        return await self._marked_first(msg, functools.partial(self.inbox.answered, msg))

    async def _marked_first(self, msg: InboundMessage, mark: Callable[[], Awaitable[object]]) -> bool:
        """``mark`` records that ``msg`` has its one answer (its inbox row
        deleted, its Tier 0 row marked :data:`APOLOGISED`), before that
        answer is sent; True: send it. A write storage refuses (a full
        disk) holds the answer until it goes (:meth:`_until_marked`): sent
        first, every later start would say it again. Not in the stop
        (False, not sent: :meth:`_park` must not wait on the disk): the next
        start sends it once. Any other failure is logged and it goes (a
        restart may say it again: the lesser harm)."""
        try:
            await mark()
        except (sqlite3.Error, OSError) as exc:
            if self._closed:
                log.error("could not record that the message was answered; its answer is left to the next start",
                          chat=msg.session_key, **error_fields(exc))
                return False
            await self._until_marked(msg, mark)
        except Exception as exc:
            log.error("could not record that the message was answered; a restart may answer it again",
                      chat=msg.session_key, **error_fields(exc))
        return True

    async def _mark_answered(self, msg: InboundMessage, item: _Item, *, saved: bool = True) -> bool:
        """The reply goes out but its row could not be written: its message
        is marked as :meth:`_mark_apologised` marks it, so a restart does not
        answer it a second time. Not ``saved`` (no user row to mark): its
        inbox row, which the next start would answer, goes first instead.
        False when that write failed (logged)."""
        try:
            await self._record_answered(msg, item, saved=saved)
        except Exception as exc:
            log.error("could not record that the message was answered; a restart may answer it again",
                      chat=msg.session_key, **error_fields(exc))
            return False
        return True

    async def _record_answered(self, msg: InboundMessage, item: _Item, *, saved: bool) -> None:
        if saved:
            await self.sessions.mark_apologised(msg.session_key, msg.message_id)
        elif self.inbox is not None and self._held(item):
            await self.inbox.answered(item.msg)

    async def _until_marked(self, msg: InboundMessage, mark: Callable[[], Awaitable[object]]) -> None:
        """The reply is made but nothing durable says its message was
        answered (its row and :meth:`_mark_answered` both failed, or its
        inbox row's delete, :meth:`_inbox_answered`: a full disk). Sent
        now, a restart would answer the message again (its inbox row, or
        its user row with no answer): it is held instead, the mark
        (``mark``) tried again after a pause doubling up to
        :data:`MARK_RETRY_MAX`, and sent once the mark is written. A late
        answer beats two. A stop meanwhile leaves the message to the next
        start, which answers it once (from the outbox when the reply's row
        on its way was written, else by the model). The chat's next
        messages wait behind it, in order; other chats go on. Only storage
        errors are waited out; any other sends the reply at once."""
        self.stats.held += 1
        self._unmarked += 1
        (log.error if self._unmarked == 1 else log.info)(
            "reply held until its message is recorded as answered (sent now, a restart would answer it again); "
            "tried again until there is room, later ones counted", chat=msg.session_key, message_id=msg.message_id)
        delay = self.mark_retry
        while True:
            await asyncio.sleep(delay)
            try:
                await mark()
                break
            except (sqlite3.Error, OSError):  # still full (or locked): the pause grows
                delay = min(MARK_RETRY_MAX, delay * 2)
            except Exception as exc:
                # Not the disk but a bug, which waiting will not mend: the
                # chat would hear nothing more until a restart. Sent now; a
                # restart may answer it again, the lesser harm.
                log.error("could not record the message as answered; its reply goes now, a restart may answer it "
                          "again", chat=msg.session_key, message_id=msg.message_id, **error_fields(exc))
                break
        if self._unmarked:
            log.warning("held replies are recorded and sent again", held=self._unmarked)
            self._unmarked = 0

    async def _mark_apologised(self, msg: InboundMessage) -> None:
        """Before an apology goes out: it is the message's one answer, so a
        restart must not answer it again (gateway/resume.py). A failed
        write still lets the apology go (a second answer after a crash
        beats none now)."""
        try:
            await self.sessions.mark_apologised(msg.session_key, msg.message_id)
        except Exception as exc:
            log.error("could not record the apology; a restart may answer the message again",
                      chat=msg.session_key, **error_fields(exc))

    # -- buffering for extraction ---------------------------------------------

    def _buffer_later(
        self,
        key: str,
        rows: list[StoredMessage],
        pending: asyncio.Task[StoredMessage] | None = None,
        *,
        learn: bool = True,
        group: bool = False,
    ) -> None:
        handed = asyncio.Event()
        task = asyncio.create_task(self._buffer(key, rows, pending, learn=learn, group=group, handed=handed),
                                   name=f"buffer:{key}")
        self._buffering[key] = task
        self._handed[key] = handed

        def _forget(t: asyncio.Task[None]) -> None:
            if self._buffering.get(key) is t:
                del self._buffering[key]
                del self._handed[key]

        task.add_done_callback(_forget)

    async def _buffer(
        self,
        key: str,
        rows: Sequence[StoredMessage],
        pending: asyncio.Task[StoredMessage] | None = None,
        *,
        learn: bool = True,
        group: bool | None = None,
        handed: asyncio.Event | None = None,
    ) -> None:
        """Hand rows (and ``pending``'s row, once written) to memory, then
        mark them so the window may drop them. Without ``learn``, only mark
        them: a turn memory must not learn from (see _handle). ``group``:
        the chat is a group (None: as Tier 0 tells, :meth:`_in_group`);
        memory learns from a group's turns only as that group's. ``handed``
        is set once memory has the rows queued, in order (or this ends)."""
        try:
            await self._hand_over(key, rows, pending, learn=learn, group=group, handed=handed)
        finally:
            if handed is not None:
                handed.set()

    async def _hand_over(
        self,
        key: str,
        rows: Sequence[StoredMessage],
        pending: asyncio.Task[StoredMessage] | None,
        *,
        learn: bool,
        group: bool | None,
        handed: asyncio.Event | None,
    ) -> None:
        if pending is not None:
            try:
                rows = [*rows, await asyncio.shield(pending)]
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the reply was sent; only its Tier 0 copy is missing
                self.stats.errors += 1
                log.error("saving the reply to Tier 0 failed", chat=key, **error_fields(exc))
        if not learn:
            try:
                await self.sessions.mark_buffered([r.id for r in rows], prune_key=key, learn=False)
            except Exception as exc:
                # Left unbuffered, but the chat stays clean: _settle must not
                # hand these rows to memory (a restart would; the extraction
                # prompt says not to learn from a request to forget).
                log.error("marking rows handled failed", chat=key, **error_fields(exc))
            return
        try:
            if group is None:
                group = await self._in_group(rows)
            # Memory queues the rows in the order its buffer calls begin
            # (memory.db's row batcher; the file store's per-user lock). The
            # waiter woken here runs only once this task suspends, inside
            # the call, its rows queued: the chat's next message need not
            # wait for their commit, which queues behind whatever holds
            # memory.db's writer (an extraction flush's transaction: 30-340
            # ms at 100 messages/s).
            write = self.backend.buffer([r.turn(group=group) for r in rows])
            if handed is not None:
                handed.set()
            await write
        except Exception as exc:  # the rows stay unbuffered; _settle retries
            self._clean.discard(key)
            self.stats.buffer_errors += 1
            self._unbuffered += 1  # one error while it lasts (a full disk fails every turn alike), then a count
            (log.error if self._unbuffered == 1 else log.info)(
                "buffering for extraction failed; will retry", chat=key, rows=len(rows), **error_fields(exc))
            return
        if self._unbuffered:
            log.warning("buffering for extraction works again", failed=self._unbuffered)
            self._unbuffered = 0
        self.stats.buffered += len(rows)
        try:
            await self.sessions.mark_buffered([r.id for r in rows], prune_key=key)
        except Exception as exc:  # memory has them; re-buffering later is idempotent
            self._clean.discard(key)
            log.error("marking rows buffered failed", chat=key, **error_fields(exc))
        if self.window_moved and rows:
            try:
                window = await self.sessions.window(key)
            except Exception as exc:  # the quiet gap extracts them all the same
                log.error("reading the window after buffering failed", chat=key, **error_fields(exc))
                return
            if window:
                for moved in self.window_moved:
                    moved(rows[0].channel, rows[0].chat_id, window[0].created_at)

    async def _in_group(self, rows: Sequence[StoredMessage]) -> bool:
        """Rows buffered late (after a stop): is their chat a group? Tier 0
        says so in a kept message's context (or a Telegram group's id);
        unknown counts as a group, memory's narrower way to learn."""
        if not rows:
            return False
        channel, chat_id = rows[0].channel, rows[0].chat_id
        if channel == "telegram":
            return chat_id.startswith("-")
        return await self.sessions.chat_kind(channel, chat_id, rows[0].owner) in ("group", "unknown")

    async def _settle(self, key: str) -> None:
        """Before a chat's next message reads its window: the previous turn's
        rows are with memory (queued, in order) and no row of the chat is
        left unbuffered."""
        task = self._buffering.get(key)
        if task is not None:
            if key in self._clean:
                # Memory has the rows queued, in order: their commit (and
                # Tier 0's mark, which the window's pruning waits for) goes
                # on in the background. A reply never waits on memory.db.
                await self._handed[key].wait()
                return
            # Rows may be left to buffer again: after the write in flight
            # ends, or they would be handed twice.
            await asyncio.shield(task)  # stopping this worker must not cancel the write
        if key in self._clean:
            return
        leftover = await self.sessions.unbuffered(key)
        self._clean[key] = None  # _buffer takes it back out if this fails
        if leftover:
            log.info("buffering messages left unbuffered", chat=key, rows=len(leftover))
            await self._buffer(key, leftover)

    # -- scheduled jobs -----------------------------------------------------------

    async def run_job(
        self, *, channel: str, chat_id: str, user: str, text: str, private: bool = False,
        fallback: Callable[[bool | None], str] | None = None, locale: str = "", slot: str = "",
    ) -> JobReply:
        """Run ``text`` through the agent as ``user`` and publish the reply to
        ``channel``/``chat_id``. In order with the chat's messages.

        Answered as in a group (shared memory, no private-only tools) unless
        ``private``: then with the user's private memory, which callers may
        ask for only when the chat is the user's own private chat.

        If the model fails, no apology is sent (nobody asked anything): with
        ``fallback`` that text is sent instead (``answered`` False), without
        it :class:`JobFailed` is raised and nothing was sent or stored;
        ``fallback(chat_zh)`` is told the chat's language (None: nothing
        tells). ``locale``: the channel's app language, when it has one for
        all its users (Feishu's). ``slot``: the run's ``job_slot``
        (gateway/outbox.py), marked answered with the reply's outbox row."""
        msg = InboundMessage(channel=channel, chat_id=chat_id, sender_id="", text=text, is_group=not private,
                             locale=locale)
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        item = _Item(msg, time.perf_counter(), user=user, future=future, counted=False, fallback=fallback,
                     job_slot=slot)
        self._enqueue(item)
        return JobReply(await future, answered=not item.fell_back)

    # -- lifecycle ----------------------------------------------------------------

    async def drain(self, timeout: float | None = None, *, include_bus: bool = True) -> bool:
        """Wait until every message (those still on the bus too, unless
        ``include_bus`` is false) is answered and buffered, and its files written."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._workers or self._buffering or self._filing() or (include_bus and not self.bus.inbound.empty()):
            pending = [*self._workers.values(), *self._buffering.values(), *self._filing()]
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            if pending:
                await asyncio.wait(pending, timeout=left)
            else:  # on the bus, not yet taken by run()
                await asyncio.sleep(0.005)
        return True

    def _filing(self) -> list[asyncio.Task[None]]:
        """The recent files' background write, if one is under way."""
        writing = self.files.writing if self.files is not None else None
        return [writing] if writing is not None else []

    async def close(self, timeout: float = 10.0) -> None:
        """Finish what is in flight (up to ``timeout``), then cancel the rest.
        Buffer writes already started are always awaited."""
        self._closed = True
        if not await self.drain(timeout, include_bus=False):
            # Again while any is left: a cancelled move starts its new id's worker (_moved).
            while live := [t for t in self._workers.values() if not t.done()]:
                for t in live:
                    t.cancel()
                await asyncio.gather(*live, return_exceptions=True)
        await self._park_left()
        if self._buffering:
            await asyncio.gather(*self._buffering.values(), return_exceptions=True)

    async def _park_left(self) -> None:
        """The messages taken but not answered when the stop came (cut
        before their row was written, queued behind a turn, still on the
        bus): the platform will not send them again (Telegram's offset is
        confirmed at the stop, Feishu acknowledged them), so each is
        written to Tier 0 as it would have been, for the next start to
        answer (gateway/resume.py), in order."""
        left = [*self._cut, *(i for q in self._queues.values() for i in q)]
        self._cut.clear()
        self._queues.clear()
        while not self.bus.inbound.empty():
            left.append(_Item(self.bus.inbound.get_nowait(), time.perf_counter()))
        parked = inboxed = 0
        for item in left:
            try:
                parked += await self._park(item)
            except Exception as exc:  # gateway.db failing: the rest are still tried
                if self._held(item):  # its inbox row stays: the next start answers it from there
                    inboxed += 1
                    (log.error if inboxed == 1 else log.debug)(
                        "message left by the stop not saved; the inbox keeps it, the next start answers it; "
                        "later ones counted", chat=item.msg.session_key, message_id=item.msg.message_id,
                        **error_fields(exc))
                    continue
                log.error("message left by the stop not saved; it will not be answered", chat=item.msg.session_key,
                          message_id=item.msg.message_id, **error_fields(exc))
        # Edits, recalls and leavings stay in the inbox's table: the next start applies them (gateway/leftrevisions.py).
        revisions = sum(1 for i in left if revision(i.msg) and i.user is None) if self.inbox else 0
        if left:
            log.warning("messages left unanswered by the stop saved; the next start answers them",
                        saved=parked, in_inbox=inboxed, dropped=len(left) - parked - inboxed - revisions,
                        revisions_kept=revisions)

    async def _park(self, item: _Item) -> bool:
        """Write ``item``'s row as its turn would have (its words, its
        context: its files kept in recent files, its pictures and recording
        counted, as their bytes are not kept); False for what no row is
        written for (a job, the scheduler's to run again; an edit, a
        command, a sticker, a group message not addressed to the bot)."""
        msg = item.msg
        if item.user is not None or item.resumed is not None or msg.kind != MESSAGE or not msg.message_id:
            return False
        if item.lost:  # redelivered without its pictures (gateway/resume.py): asked for again now, or from the outbox
            await self._reply(msg, item.lost, self.identities.resolve(msg.channel, msg.sender_id), answer=True)
            return False
        if msg.is_group and not (msg.mentioned or msg.reply_to_bot):
            return False
        attached = bool(msg.images or msg.documents or msg.forwarded) or msg.audio is not None
        if not msg.text.strip() and not attached:
            return False
        user = self.identities.resolve(msg.channel, msg.sender_id)
        found = split_command(msg.text) if not attached else None
        if found is not None and runs_itself(*found):
            # Kept out of Tier 0 and not run again unasked (a half-run
            # "/forget all"): the user is told, now or from the outbox.
            # Its one answer: its inbox row goes, or the next start would tell it again.
            await self._reply(msg, await self._cut_command(msg, found[0]), user, answer=True)
            log.warning("command left unanswered by the stop; the user is asked to send it again",
                        chat=msg.session_key, message_id=msg.message_id)
            return False
        key = msg.session_key
        quiet = self.incognito is not None and await self.incognito.since(user) is not None
        kept = item.kept
        if kept is None and msg.documents and self.files is not None:
            kept = await self.files.keep(key, user, msg.documents, incognito=quiet, message_id=msg.message_id)
        context = TurnContext.of(msg, kept or [])
        await self.sessions.append(
            key, channel=msg.channel, chat_id=msg.chat_id, role="user", content=msg.history_text, owner=user,
            sender_id=msg.sender_id, message_id=msg.message_id, buffered=quiet,
            context=context.dumps() if context is not None else "",
            sender_name=msg.sender_name if msg.is_group else "",
        )
        return True


async def _stored(row: StoredMessage) -> StoredMessage:
    return row


def _answered(history: Sequence[StoredMessage], message_id: str) -> bool:
    """Is there a reply to ``message_id`` in the window (reply rows carry the
    id of the message they answer), or an apology (its row so marked)?"""
    return any(m.message_id == message_id and (m.role == "assistant" or m.context == APOLOGISED) for m in history)


def log_debug_enabled() -> bool:
    # structlog renders the event before the stdlib level check; skip that
    # work per message when debug is off.
    return logging.getLogger().isEnabledFor(logging.DEBUG)
