"""Sending replies so that one the platform cannot take now is not lost.

Each channel's sender drains its outbound queue as ``BaseChannel.run_sender``
does, and a failed send is decided by the error (``channels.base.DeliveryError``):

* refused (``retryable`` False: chat not found, bot blocked, any error that
  is not a DeliveryError): logged as "reply dropped", as before;
* transient (network, 5xx, a long rate limit, the channel not running):
  the reply, or what was left of it when its first parts went out, is kept
  in the outbox (``gateway/outbox.py``, in gateway.db) and sent again by
  :meth:`Delivery.run`, with exponential backoff per row (30 s doubling to
  30 min, jittered) until it goes out, is refused, or is older than
  ``gateway.outbox.maxAgeHours`` (dropped with a warning naming the chat
  and the age, never the text). A row due more than the longest backoff
  ahead is due now: the clock was stepped back since it was kept.

Order within a chat: rows go oldest first, and a new reply to a chat with
rows waiting is queued in the outbox behind them rather than sent. The
alternative, sending the waiting ones first from the sender, would hold
the channel's sender, and so every other chat's replies, behind one
chat's backoff; queued, the new reply goes out right after the older
ones, in the same redelivery pass. Chats are independent: a pass sends
the due chats concurrently, each chat's rows one after the other.

A reply with a file (``OutboundMessage.attachment``: a user's ``/export``)
is sent now or never: it holds what is kept about them, so it is never
written to the outbox. When it cannot go out, it is dropped (logged
without its content) and the chat gets :data:`FILE_NOT_SENT` instead, a
text like any other (kept if need be); the user can ask again. A file
larger than the channel takes (``BaseChannel.max_file_bytes``: Telegram
50 MB, Feishu 30 MB) is gzipped first, streamed into another anonymous
temporary file (Markdown shrinks several times), and sent as ``.md.gz``;
still too large, the chat gets :func:`file_too_large` instead, which says
the operator can write it with ``myclaw memory export`` and never to ask
again (it would fail the same way). Not split into parts: a memory that
big is hundreds of MB of text, dozens of messages to put back together,
and a cut half way would leave part of it in the chat and part not.

A draft (``OutboundMessage.draft``: a reply still being written,
gateway/drafts.py) is never kept: it is shown only when nothing waits
behind it on the queue (the reply itself, a newer draft, another chat's
reply: each matters more), never in a chat whose replies wait in the
outbox, and a channel that shows none, or fails one, is not asked again
for that reply. Shutdown drops the drafts still queued. A reply dropped
after its drafts were shown (``OutboundMessage.dropped``) ends its drafts
and has the channel take them away (``BaseChannel.drop_draft``); it is
never kept either.

A reply on its way (:meth:`Delivery.hold`, called by the process loop):
a model's answer or apology is written to the outbox before its Tier 0
row (which says the message was answered) and before it is published,
marked as this run's sender's (``outbox.sending``; this run's passes leave
it alone), and removed once the platform took it (or refused it for
good; a removal that fails is tried again at each pass); a failed send turns it into an ordinary waiting row, as does a new
reply to a held chat (no second row). A kill anywhere between the row and
its removal leaves it to the next start, which takes another run's row as
waiting and sends it first, so the message is answered, not left with a
row saying it was. Feishu shows it once (the same ``send_key``, so the
same ``uuid``: a repeat of a send Feishu took is dropped; a drafted reply
is edited into its draft message, which is no orphan while the row
waits; the draft's row goes in the same transaction as the outbox row's
removal, ``Outbox.remove(drafted=True)``, so a kill never leaves the
outbox row alone to be sent anew beside the draft). Telegram has no idempotency key: a kill between Telegram taking
it and the row's removal (one write) shows it twice; at least once beats
never, and the next start logs how many it sends again. The cost is two
statements a reply, no fsync (WAL, ``synchronous = NORMAL``): the insert
before the reply row, on the reply path, and the delete after the send.
Held too: a command's answer, a note that is its message's one answer
(pictures to send again), and a scheduled job's reply (its run is
recorded once the reply is published: a kill after that record lost it;
gateway/loop.py ``_on_its_way``). Not held: a note another answer may
follow (a voice note not heard) or that costs nothing lost (the rate
limit's), a file, a draft, or a reply whose row cannot be
written (a full disk: sent all the same, as before, once something else
says its message was answered: gateway/loop.py ``_until_marked``).

A late reply is sent as it was written, with no "(delayed)" prefix: in a
group it still quotes the message it answers, and the log says how late
it was ("reply delivered late"). Shutdown (:meth:`Delivery.stop`): the
senders and the redelivery begin no other send, and a send under way, a
live reply's or a late one's, may end first, up to the stop's grace
(gateway/app.py ``SEND_GRACE``), so its row goes and the next start does
not send it again. A send cut all the same keeps the reply from the part
in flight on (whether that part reached the platform cannot be known;
the parts before it were answered: ``OutboundMessage.on_part_sent``), and
:meth:`Delivery.keep_queued` moves what is still queued into the outbox;
the next start sends every row at once.
"""

from __future__ import annotations

import asyncio
import gzip
import random
import shutil
import tempfile
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import structlog

from channels.base import BaseChannel, DeliveryError, FileTooLarge
from memory.clock import Clock
from memory.errorlog import Wordless, error_brief
from memory.lru import LRU

from .bus import Attachment, MessageBus, OutboundMessage, words_in_chinese
from .logging import error_fields
from .outbox import Outbox, Pending

__all__ = ["FILE_NOT_SENT", "FILE_NOT_SENT_ZH", "Delivery", "RetryPolicy", "file_too_large", "gzipped"]

log = structlog.get_logger(component="outbox")

Chat = tuple[str, str]  # (channel, chat_id)

# Send keys remembered as done with drafts: a reply's drafts come within
# its minute or so, and thousands of replies a minute is far beyond a gateway.
_DRAFT_KEYS = 4096
_REFUSED_KEPT = 4096  # chats whose refusals are logged at debug (Delivery._refused)

FILE_NOT_SENT = "I could not send you the file; please ask for it again in a minute."
FILE_NOT_SENT_ZH = "文件没能发出去，请过一分钟再向我要一次。"


@dataclass(frozen=True)
class RetryPolicy:
    """Seconds before a kept reply's next attempt: ``initial`` after the
    first failure, doubling up to ``maximum``, each scaled by a random
    factor in [0.5, 1] so that many rows (and gateways) do not retry in
    lockstep. Never longer than the unjittered delay: a test that moves
    its clock by that much always finds the row due."""

    initial: float = 30.0
    maximum: float = 1800.0
    factor: float = 2.0

    def delay(self, attempts: int, rng: random.Random) -> float:
        base = min(self.maximum, self.initial * self.factor ** max(0, attempts - 1))
        return base * rng.uniform(0.5, 1.0)


def _file_not_sent(msg: OutboundMessage) -> OutboundMessage:
    """The note sent instead of a file reply: another message, so another
    ``send_key``. With the file's, Feishu took the note's one part for the
    caption's last (the same uuid) when the caption had gone out, and the
    chat never saw it."""
    zh = words_in_chinese(msg.text) is True  # the caption is in the chat's language
    return replace(msg, text=FILE_NOT_SENT_ZH if zh else FILE_NOT_SENT, attachment=None, send_key=uuid.uuid4().hex)


GZIP_MIME = "application/gzip"


def _size(n: int) -> str:
    return f"{n / 1_000_000:.1f} MB" if n >= 100_000 else f"{n / 1000:.0f} KB"


def file_too_large(size: int, limit: int | None, *, zh: bool) -> str:
    """What the chat is told instead of a file it cannot take even
    gzipped (``size``: the file's bytes; ``limit``: what the chat takes,
    None when only the platform's refusal says so): where to get it
    instead, never to ask again."""
    if zh:
        over = f"压缩后仍超过这里的文件上限 {_size(limit)}" if limit is not None else "压缩后这里仍然收不下"
        return (f"你的导出文件太大，无法在这个聊天里发送：它有 {_size(size)}，{over}。"
                "请本机器人的管理员运行 myclaw memory export 把它写成文件交给你。")
    over = f"even compressed it is over the {_size(limit)} this chat takes" if limit is not None else \
        "even compressed this chat would not take it"
    return (f"Your export is too large for this chat: it is {_size(size)}, and {over}. The operator of this bot "
            "can write it to a file for you with myclaw memory export.")


def gzipped(file: Attachment) -> Attachment:
    """``file`` gzipped, streamed into an anonymous temporary file (0600,
    no name on disk) and named ``.gz``; blocking (run it in a thread).
    The caller closes both."""
    out = tempfile.TemporaryFile()
    try:
        with file.open() as src, gzip.GzipFile(filename=file.filename, mode="wb", fileobj=out, mtime=0) as gz:
            shutil.copyfileobj(src, gz, 1 << 16)
        out.flush()
    except BaseException:
        out.close()
        raise
    return Attachment(f"{file.filename}.gz", mime=GZIP_MIME, file=out)


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, DeliveryError) and exc.retryable


class Delivery:
    """``Delivery(bus, outbox, channels, clock)``: ``channels`` is the live
    mapping of running channels (a channel that fails later leaves it, and
    its rows wait). ``owner_of`` says whose message a reply answers when
    the reply does not name it (``OutboundMessage.owner``; kept on the row
    for ``myclaw memory forget --user``); ``scrub`` takes
    secrets out of an error before it is stored."""

    def __init__(
        self,
        bus: MessageBus,
        outbox: Outbox,
        channels: Mapping[str, BaseChannel],
        clock: Clock,
        *,
        max_age: timedelta = timedelta(hours=24),
        policy: RetryPolicy | None = None,
        owner_of: Callable[[OutboundMessage], Awaitable[str]] | None = None,
        scrub: Callable[[str], str] = lambda text: text,
        rng: random.Random | None = None,
        concurrency: int = 8,
        poll: float = 60.0,
        chats_kept: int = _REFUSED_KEPT,
    ) -> None:
        self.bus = bus
        self.outbox = outbox
        self.channels = channels
        self.clock = clock
        self.max_age = max_age
        self.policy = policy or RetryPolicy()
        self._owner_of = owner_of
        self._scrub = scrub
        self._rng = rng or random.Random()
        self._limit = asyncio.Semaphore(max(1, concurrency))
        self._poll = poll  # real seconds between passes at most (rows of a channel that comes back, expiry)
        self.waiting = 0  # rows in the outbox, as of the last pass (status output)
        # Chats whose new replies must queue behind rows in the outbox. A
        # chat is added before its row is written and released only when a
        # look at the table found none and no row was being added meanwhile
        # (``_adding`` in flight, ``_adds`` counts every add): otherwise a
        # reply written during that look could be overtaken by the next.
        self._held: set[Chat] = set()
        self._last_run: set[Chat] = set()  # chats with rows from the last run, at start: its first pass sends them
        self._adding: Counter[Chat] = Counter()
        self._adds: Counter[Chat] = Counter()
        self._pass = asyncio.Lock()
        self._wake = asyncio.Event()
        self._stopping = False  # stop() was asked: the send under way ends, no pass or row begins
        # The senders' messages taken off their queues and not yet done with:
        # a stop waits for them (up to its grace); ``_quiet`` is set at none.
        self._under_way = 0
        self._quiet = asyncio.Event()
        self._quiet.set()
        self._sending = asyncio.Event()  # cleared by stop(): the senders take nothing more off their queues
        self._sending.set()
        self._task: asyncio.Task[None] | None = None
        # Chats that refused a reply, logged: their next refusals (a user
        # who blocked the bot, every reply queued for them) are logged at
        # debug, until the chat takes a reply again. The most recent
        # `chats_kept`: one who blocked it and never came back goes, in time.
        self._refused: LRU[Chat, None] = LRU(chats_kept)
        # Replies (send keys) whose later drafts are not shown, oldest first.
        self._no_drafts: dict[str, None] = {}
        # Outbox rows sent whose removal failed (gateway.db full or locked):
        # never sent again; their removal is tried at the next pass.
        self._delivered: set[int] = set()
        self._unheld = 0  # replies not written to the outbox before their send since the last that was (hold)
        # Rows of replies sent on their way whose removal failed (_sent): drafted or not.
        self._unremoved: dict[int, bool] = {}
        # Replies (send keys) whose drafts a channel showed, oldest first: their
        # draft message's row goes with their outbox row (Outbox.remove ``drafted``).
        self._drafted: dict[str, None] = {}

    # -- lifecycle --------------------------------------------------------------------

    def footprint(self) -> dict[str, Collection[object]]:
        """Its per-chat state, by name, read-only: for measuring (scripts/bench_soak.py), not to change."""
        return {"held": self._held, "refused": self._refused.view(), "no_drafts": self._no_drafts}

    async def start(self) -> None:
        """Hold the chats with rows left from the last run (their new replies
        queue behind them) and start redelivering; the first pass sends every
        row at once, whatever its backoff said (those rows alone: on a loaded
        machine the pass may come after this run's first failed send, whose
        backoff it must keep)."""
        self._stopping = False
        self._sending.set()
        self._held.update(await self.outbox.chats())
        self._last_run = set(self._held)
        self.waiting = await self.outbox.count()
        cut = await self.outbox.cut()
        if cut:
            log.warning("replies a stop cut on their way are sent again now; a platform with no idempotency key "
                        "(Telegram) shows one twice if it had taken it just before", count=cut)
        if self.waiting:
            log.info("replies waiting in the outbox from the last run", count=self.waiting, chats=len(self._held))
        self._task = asyncio.create_task(self.run(), name="outbox")

    async def stop(self, grace: float = 0.0) -> None:
        """Stop sending: redelivery, and the senders (:meth:`run_sender`),
        which take nothing more off their queues (:meth:`keep_queued` moves
        what is left into the outbox). A send under way, a late reply's or
        a live one's, may end first, up to ``grace`` seconds, and its row
        go: cut, the platform may have taken it already and the next start
        would send it again (Telegram shows it twice). 0 cuts at once (as a
        kill); the caller cancels the senders after this."""
        task, self._task = self._task, None
        self._stopping = True
        self._sending.clear()
        self._wake.set()
        quiet = asyncio.ensure_future(self._quiet.wait())
        try:
            if grace > 0:
                await asyncio.wait({quiet} | ({task} if task is not None else set()), timeout=grace)
        finally:
            quiet.cancel()
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def wake(self) -> None:
        """Run a pass now (rows were added, or a test moved its clock)."""
        self._wake.set()

    async def run(self) -> None:
        forcing, self._last_run = self._last_run, set()
        while not self._stopping:
            next_due: datetime | None = None
            try:
                next_due = await self.sweep(forcing=forcing)
                forcing = set()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a database hiccup must not end redelivery
                log.error("outbox pass failed; trying again later", **error_fields(exc))  # not its text: a reply's words
            wait = self._poll
            if next_due is not None:
                wait = min(wait, max(0.0, (next_due - self.clock.now()).total_seconds()))
            try:
                await asyncio.wait_for(self._wake.wait(), wait)
            except TimeoutError:
                pass
            self._wake.clear()

    # -- the senders -------------------------------------------------------------------

    async def hold(self, msg: OutboundMessage) -> OutboundMessage:
        """Write ``msg``, a reply about to be published, to the outbox as
        on its way (before its Tier 0 row, which says it was answered):
        the sender removes the row once the platform took it, and a kill
        before that leaves it for the next start to send. Returns ``msg``
        naming its row; unchanged when the row cannot be written (sent all
        the same, as before: only a kill now would lose it). A file is not
        kept (sent now or never), nor a draft."""
        if msg.attachment is not None or msg.draft or msg.dropped or not msg.text:
            return msg
        now = self.clock.now()
        try:
            row = await self.outbox.add(msg, owner=await self._owner(msg), created_at=now, next_attempt_at=now,
                                        sending=True)
        except Exception as exc:
            # One error while it lasts (a full disk fails every reply alike), then a count.
            self._unheld += 1
            (log.error if self._unheld == 1 else log.info)(
                "reply not written to the outbox before its send; a kill now would lose it",
                channel=msg.channel, chat_id=msg.chat_id, failed=self._unheld, error=self._describe(exc, msg.text))
            return msg
        if self._unheld:
            log.warning("replies are written to the outbox before their send again", failed=self._unheld)
            self._unheld = 0
        return replace(msg, kept=row)

    async def run_sender(self, channel: BaseChannel) -> None:
        """Drain ``channel``'s outbound queue (instead of its own
        ``run_sender``): send, or keep for later, or drop."""
        q = self.bus.outbound_queue(channel.name)
        while True:
            await self._sending.wait()  # stopping: what is queued stays for keep_queued, in order
            msg = await q.get()
            self._under_way += 1
            self._quiet.clear()
            try:
                if self._stopping:  # came as the stop began, the sender idle: kept, not sent
                    await self._keep_at_stop(msg)
                elif msg.draft:
                    await self._send_draft(channel, msg, waiting=not q.empty())
                elif msg.dropped:
                    await self._drop_draft(channel, msg)
                else:
                    self._drafts_over(msg.send_key)
                    await self._send_new(channel, msg)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the outbox itself failed: one reply lost, the sender goes on
                log.error("reply dropped", reason="outbox unavailable", channel=msg.channel, chat_id=msg.chat_id,
                          error=self._describe(exc, msg.text))
            finally:
                self._under_way -= 1
                if not self._under_way:
                    self._quiet.set()
                q.task_done()

    async def _send_new(self, channel: BaseChannel, msg: OutboundMessage) -> None:
        if msg.attachment is not None:
            await self._send_file(channel, msg)
            return
        now = self.clock.now()
        if (msg.channel, msg.chat_id) in self._held:
            # Not due before the replies it waits behind: its row, written
            # before it was published (hold), may be older than theirs (a
            # note the channel sent meanwhile failed first), which makes it
            # the chat's head, and a pass sends the chat from its head on.
            last = await self.outbox.last_due(msg.channel, msg.chat_id)
            due = max(now, last) if last is not None else now
            await self._keep(msg, created_at=now, due=due, reason="earlier replies to the chat are waiting")
            return
        rests: list[str] = []  # what was left after each part that went out
        try:
            await channel.send(replace(msg, on_part_sent=rests.append))
            self._refused.discard((msg.channel, msg.chat_id))
        except asyncio.CancelledError:
            # The gateway is stopping with this send in flight: kept from
            # the part in flight on (the chat has the parts before it).
            left = replace(msg, text=rests[-1]) if rests else msg
            await self._keep(left, created_at=now, due=now, reason="gateway stopping",
                             drafted=bool(rests) and msg.send_key in self._drafted)
            raise
        except Exception as exc:
            if not _retryable(exc):
                self._log_refused(msg, self._describe(exc, msg.text))
                await self._sent(msg)
                return
            cut = isinstance(exc, DeliveryError) and bool(exc.remaining)  # its first parts went out
            rest = exc.remaining if isinstance(exc, DeliveryError) and exc.remaining else msg.text
            delay = self.policy.delay(1, self._rng)
            await self._keep(
                replace(msg, text=rest), created_at=now, due=now + timedelta(seconds=delay), attempts=1,
                error=self._describe(exc, msg.text), reason="send failed", retry_in_s=round(delay),
                drafted=cut and msg.send_key in self._drafted,
            )
            return
        await self._sent(msg)

    async def _sent(self, msg: OutboundMessage) -> None:
        """The platform took ``msg`` (or refused it for good): its row as a
        reply on its way goes. Right after the send: a kill in between has
        the next start send it again (Feishu drops the repeat by its uuid;
        Telegram shows it twice)."""
        if not msg.kept:
            return
        drafted = msg.send_key in self._drafted
        self._drafted.pop(msg.send_key, None)
        try:
            await self.outbox.remove(msg.kept, drafted=drafted)
        except Exception as exc:
            self._unremoved[msg.kept] = drafted  # tried again at each pass: a stop before that sends it again
            log.error("reply sent but its outbox row not removed yet; a stop before it is sends it again",
                      channel=msg.channel, chat_id=msg.chat_id, error=self._describe(exc, ""))

    async def _send_draft(self, channel: BaseChannel, msg: OutboundMessage, *, waiting: bool) -> None:
        """Show a draft when nothing is gained by holding it back: not when
        something waits behind it on the queue (the reply itself, or a
        newer draft, or another chat's reply: all come first), nor in a
        chat whose replies queue in the outbox, nor for a reply whose
        drafts the channel does not show or the reply itself went out."""
        key = msg.send_key
        if waiting or key in self._no_drafts or (msg.channel, msg.chat_id) in self._held:
            return
        try:
            shown = await channel.send_draft(msg)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a draft is a nicety: the reply still goes out whole
            log.info("draft not shown; the reply will come whole", channel=msg.channel, chat_id=msg.chat_id,
                     error=self._describe(exc, msg.text))
            shown = False
        if not shown:
            self._drafts_over(key)
        elif key not in self._drafted:
            self._drafted[key] = None
            while len(self._drafted) > _DRAFT_KEYS:
                del self._drafted[next(iter(self._drafted))]

    async def _drop_draft(self, channel: BaseChannel, msg: OutboundMessage) -> None:
        """The reply previewed under ``msg.send_key`` will not come: no
        more of its drafts are shown and the channel takes away those it
        showed. Never kept: a draft message left by a failure here is
        what the channel clears at its next start (Feishu's orphans)."""
        self._drafts_over(msg.send_key)
        try:
            await channel.drop_draft(msg)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.info("drafts of a dropped reply not taken away", channel=msg.channel, chat_id=msg.chat_id,
                     error=self._describe(exc, ""))

    def _drafts_over(self, key: str) -> None:
        """No more drafts for the reply sent under ``key``: it went out,
        or its channel shows none."""
        self._no_drafts[key] = None
        while len(self._no_drafts) > _DRAFT_KEYS:
            del self._no_drafts[next(iter(self._no_drafts))]

    async def _send_file(self, channel: BaseChannel, msg: OutboundMessage) -> None:
        """Send a reply with a file at once, even to a chat whose older
        replies wait (it cannot queue behind them), gzipped when it is over
        the channel's limit, or :func:`file_too_large` when even that is;
        on any failure drop it and send :data:`FILE_NOT_SENT` the usual way."""
        note = _file_not_sent(msg)
        original, first = msg.attachment, msg
        limit, say_limit = channel.max_file_bytes, True
        try:
            while True:
                fitted = await self._fit(channel, first, limit, say_limit=say_limit)
                if fitted is None:
                    return
                msg = fitted
                try:
                    await channel.send(msg)
                    return
                except FileTooLarge:
                    # The platform takes less than the channel's maxUploadBytes
                    # says (a local Bot API server's limit set for Telegram's own
                    # servers): gzipped, if it was not, and under what it refused.
                    refused = msg.attachment.size if msg.attachment is not None else 0
                    log.warning("file refused as too large by the platform", channel=msg.channel,
                                chat_id=msg.chat_id, size=refused, limit=channel.max_file_bytes,
                                hint=f"channels.{msg.channel}.maxUploadBytes is more than the platform takes")
                    if msg.attachment is not original or refused <= 1:
                        await self._too_large(channel, first, gzipped_size=refused, limit=None)
                        return
                    limit, say_limit = refused - 1, False
        except asyncio.CancelledError:
            log.warning("file dropped", reason="gateway stopping", channel=msg.channel, chat_id=msg.chat_id)
            now = self.clock.now()
            await self._keep(note, created_at=now, due=now, reason="gateway stopping")
            raise
        except Exception as exc:
            log.error("file dropped", reason="send failed", retryable=_retryable(exc), channel=msg.channel,
                      chat_id=msg.chat_id, error=self._describe(exc, msg.text))
            await self._send_new(channel, note)
        finally:
            # Sent or dropped: a large export's temporary files go now.
            for done in (original, msg.attachment):
                if done is not None:
                    done.close()

    async def _fit(
        self, channel: BaseChannel, msg: OutboundMessage, limit: int | None, *, say_limit: bool = True
    ) -> OutboundMessage | None:
        """``msg`` as ``channel`` can take its file (at most ``limit``
        bytes): as it is, or gzipped (the caption says so); None when even
        gzipped it is too large (the chat was told, :func:`file_too_large`,
        naming ``limit`` when ``say_limit``)."""
        file = msg.attachment
        if file is None or limit is None or file.size <= limit:
            return msg
        zh = words_in_chinese(msg.text) is True  # the caption is in the chat's language
        packed = await asyncio.to_thread(gzipped, file)
        size = packed.size
        if size <= limit:
            log.info("file gzipped to fit the chat", channel=msg.channel, chat_id=msg.chat_id, size=file.size,
                     gzipped=size, limit=limit)
            said = "（文件较大，已用 gzip 压缩。）" if zh else "(Compressed with gzip: too large for this chat as it is.)"
            return replace(msg, text=f"{msg.text}\n\n{said}" if msg.text.strip() else said, attachment=packed)
        packed.close()
        await self._too_large(channel, msg, gzipped_size=size, limit=limit if say_limit else None)
        return None

    async def _too_large(self, channel: BaseChannel, msg: OutboundMessage, *, gzipped_size: int,
                         limit: int | None) -> None:
        """Tell the chat its file (``msg``'s, as first asked for) cannot go even gzipped."""
        file = msg.attachment
        size = file.size if file is not None else 0
        log.warning("file too large for the chat", channel=msg.channel, chat_id=msg.chat_id, size=size,
                    gzipped=gzipped_size, limit=limit if limit is not None else channel.max_file_bytes)
        zh = bool(words_in_chinese(msg.text))
        await self._send_new(channel, replace(msg, text=file_too_large(size, limit, zh=zh), attachment=None,
                                              send_key=uuid.uuid4().hex))

    async def _keep(
        self,
        msg: OutboundMessage,
        *,
        created_at: datetime,
        due: datetime,
        reason: str,
        attempts: int = 0,
        error: str = "",
        retry_in_s: int = 0,
        drafted: bool = False,
    ) -> None:
        """``drafted``: a reply on its way whose first part went into its
        draft message: that message's row goes with the row's rest."""
        chat = (msg.channel, msg.chat_id)
        self._held.add(chat)  # before any await: the chat's next reply queues behind this one
        self._adding[chat] += 1
        self._adds[chat] += 1
        try:
            if msg.kept:  # a reply on its way has its row: it waits now
                await self.outbox.retry_later(msg.kept, text=msg.text, attempts=attempts, next_attempt_at=due,
                                              last_error=error, drafted=drafted)
            else:
                owner = await self._owner(msg)
                await self.outbox.add(
                    msg, owner=owner, created_at=created_at, next_attempt_at=due, attempts=attempts, last_error=error
                )
        finally:
            self._adding[chat] -= 1
            if not self._adding[chat]:
                del self._adding[chat]
        self.waiting += 1
        log.warning("reply kept for redelivery", reason=reason, channel=msg.channel, chat_id=msg.chat_id,
                    attempts=attempts, retry_in_s=retry_in_s, **({"error": error} if error else {}))
        self.wake()

    async def _owner(self, msg: OutboundMessage) -> str:
        # The builder's word first (the loop knows whom it answers, a
        # channel's own note its sender); the lookup is for the rest.
        if msg.owner or self._owner_of is None:
            return msg.owner
        try:
            return await self._owner_of(msg)
        except Exception as exc:  # the row is kept anyway, without an owner
            log.error("owner of a kept reply unknown", chat_id=msg.chat_id, **error_fields(exc))
            return ""

    async def keep_queued(self, channels: Iterable[str]) -> int:
        """Shutdown: move what is still on these channels' outbound queues
        (the senders are stopped) into the outbox, in order; returns how many."""
        kept = 0
        for name in channels:
            q = self.bus.outbound_queue(name)
            while not q.empty():
                try:
                    kept += await self._keep_at_stop(q.get_nowait())
                finally:
                    q.task_done()
        return kept

    async def _keep_at_stop(self, msg: OutboundMessage) -> bool:
        """A message the stop leaves unsent, into the outbox: True if kept
        (a draft is not, a file becomes the note that it was not sent)."""
        if msg.draft or msg.dropped:  # a preview: the reply it previews is kept, or was never finished
            return False
        if msg.attachment is not None:  # never stored: the chat hears it was not sent
            log.warning("file dropped", reason="gateway stopping", channel=msg.channel, chat_id=msg.chat_id)
            msg.attachment.close()
            msg = _file_not_sent(msg)
        try:
            now = self.clock.now()
            await self._keep(msg, created_at=now, due=now, reason="gateway stopping")
            return True
        except Exception as exc:
            log.error("reply dropped", reason="outbox unavailable", channel=msg.channel,
                      chat_id=msg.chat_id, error=self._describe(exc, msg.text))
            return False

    # -- redelivery -------------------------------------------------------------------

    async def sweep(self, *, force: bool = False, forcing: Collection[Chat] = ()) -> datetime | None:
        """One pass: drop rows older than ``max_age``, send every chat whose
        oldest row is due (all of them with ``force``, those of ``forcing``
        whatever their backoff), release chats with nothing left. Returns
        when the next row of a running channel is due."""
        async with self._pass:
            now = self.clock.now()
            for row_id, drafted in sorted(self._unremoved.items()):  # sent already: before the next start takes them for cut
                try:
                    await self.outbox.remove(row_id, drafted=drafted)
                except Exception:  # still full or locked: the next pass tries again, the rest of this one goes on
                    break
                del self._unremoved[row_id]
            for p in await self.outbox.older_than(now - self.max_age):
                await self.outbox.remove(p.id)
                log.warning("reply dropped", reason="older than gateway.outbox.maxAgeHours", channel=p.message.channel,
                            chat_id=p.message.chat_id, age_s=round((now - p.created_at).total_seconds()),
                            attempts=p.attempts)
            adds, adding = dict(self._adds), set(self._adding)
            heads = await self.outbox.heads()
            with_rows = {h.chat for h in heads}
            for chat in self._held - with_rows:  # delivered, or erased by `myclaw memory forget`
                if chat not in adding and self._adds[chat] == adds.get(chat, 0):
                    self._release(chat)
            due = [h for h in heads if h.message.channel in self.channels
                   and (force or h.chat in forcing or h.next_attempt_at <= now or self._clock_went_back(h, now))]
            failed = False
            for failure in await asyncio.gather(*(self._drain_chat(h) for h in due), return_exceptions=True):
                if isinstance(failure, asyncio.CancelledError):
                    raise failure
                if isinstance(failure, BaseException):  # that chat waits for the next pass
                    failed = True
                    log.error("outbox redelivery failed", **error_fields(failure))  # not its text: a reply's words
            self.waiting = await self.outbox.count()
            if failed:  # its row is still due: a pass at once would fail (and log) again at once
                return None
            later = [h.next_attempt_at for h in await self.outbox.heads(list(self.channels))]
            return min(later) if later else None

    def _clock_went_back(self, head: Pending, now: datetime) -> bool:
        """A row due further ahead than any backoff puts it: the clock was
        stepped back since it was kept (an NTP correction), and it would
        otherwise wait that step out on top of its backoff."""
        return head.next_attempt_at - now > timedelta(seconds=self.policy.maximum)

    async def move_chat(self, channel: str, old_chat: str, new_chat: str) -> int:
        """The chat's rows went to ``new_chat`` (SessionStore.move_chat): a
        chat held for them is held under the new id too, so its next reply
        still queues behind them, and a pass sends them now. 1 if held."""
        if (channel, old_chat) not in self._held:
            return 0
        self._held.add((channel, new_chat))
        self.wake()
        return 1

    def _log_refused(self, msg: OutboundMessage, error: str, **more: Any) -> None:
        """A reply refused for good: logged once a chat until the chat takes
        a reply again, so a user who blocked the bot with ten replies
        waiting makes one line, not ten (the rest at debug). Once 4,096 other
        chats refused since, it may be logged again: a line, not a leak."""
        chat = (msg.channel, msg.chat_id)
        said = log.debug if chat in self._refused else log.error
        self._refused[chat] = None
        said("reply dropped", reason="refused", channel=msg.channel, chat_id=msg.chat_id, error=error, **more)

    def _release(self, chat: Chat) -> None:
        self._held.discard(chat)
        self._adds.pop(chat, None)

    async def _drain_chat(self, head: Pending) -> None:
        """Send the chat's rows oldest first until one fails or none is left."""
        chat = head.chat
        row: Pending | None = head
        async with self._limit:
            while row is not None and not self._stopping:  # a stop lets the send under way end, begins none
                channel = self.channels.get(row.message.channel)
                if channel is None:
                    return
                if not await self._redeliver(channel, row):
                    return
                adds, adding = self._adds[chat], bool(self._adding[chat])
                row = await self.outbox.head(*chat)
                if row is None and not adding and self._adds[chat] == adds:
                    self._release(chat)

    async def _redeliver(self, channel: BaseChannel, row: Pending) -> bool:
        """Send one row; True when the chat may go on with its next one."""
        # Naming its row: a channel leaves the reply's draft message row to go
        # with it (drafted=True: whether this run or the last showed its
        # drafts is not known here; a row of a reply never drafted is one
        # statement more, on this rare path).
        msg = replace(row.message, kept=row.id)
        if row.id in self._delivered:  # sent already; only its removal failed
            await self.outbox.remove(row.id, drafted=True)
            self._delivered.discard(row.id)
            return True
        rests: list[str] = []  # what was left after each part that went out
        try:
            await channel.send(replace(msg, on_part_sent=rests.append))
        except asyncio.CancelledError:
            if rests:  # the row stays for the next start, without the parts the chat has
                await self.outbox.retry_later(row.id, text=rests[-1], attempts=row.attempts,
                                              next_attempt_at=row.next_attempt_at, last_error=row.last_error,
                                              drafted=True)
            raise
        except Exception as exc:
            error = self._describe(exc, msg.text)
            if not _retryable(exc):
                await self.outbox.remove(row.id, drafted=True)
                self._log_refused(msg, error, attempts=row.attempts + 1)
                return True
            attempts = row.attempts + 1
            delay = self.policy.delay(attempts, self._rng)
            cut = isinstance(exc, DeliveryError) and bool(exc.remaining)
            rest = exc.remaining if isinstance(exc, DeliveryError) and exc.remaining else msg.text
            await self.outbox.retry_later(
                row.id, text=rest, attempts=attempts,
                next_attempt_at=self.clock.now() + timedelta(seconds=delay), last_error=error, drafted=cut,
            )
            log.warning("reply kept for redelivery", reason="send failed again", channel=msg.channel,
                        chat_id=msg.chat_id, attempts=attempts, retry_in_s=round(delay), error=error)
            return False
        self._delivered.add(row.id)  # should the removal fail, it is not sent again
        await self.outbox.remove(row.id, drafted=True)
        self._delivered.discard(row.id)
        self._refused.discard(row.chat)
        log.info("reply delivered late", channel=msg.channel, chat_id=msg.chat_id, attempts=row.attempts + 1,
                 late_s=round((self.clock.now() - row.created_at).total_seconds()))
        return True

    def _describe(self, exc: BaseException, text: str) -> str:
        """The error as stored and logged: never the reply's words (an
        exception from deep down might quote them), never a secret. Only a
        :class:`~memory.errorlog.Wordless` error's text (a DeliveryError's:
        chat, part, the platform's refusal) is kept; any other's kind and
        codes ("BrokenPipeError (EPIPE)"), which a part of the reply it
        quoted cannot survive."""
        said = (str(exc) or type(exc).__name__) if isinstance(exc, Wordless) else error_brief(exc)
        if len(text.strip()) >= 8:
            said = said.replace(text, "[reply text]")
        return self._scrub(said)[:500]
