"""The Feishu (Lark) channel.

Receives by long connection (default; needs no public URL) or by webhook
on the gateway's HTTP server, and replies with text over the Open API.
lark-oapi is imported only by the long connection, in its own thread, so
importing this package is cheap and webhook mode never loads the SDK.

Modules: ``events`` (event -> InboundMessage), ``dedup`` (ids seen: events
taken, messages recalled; kept across restarts given a ``seen_store``),
``webhook`` (HTTP intake: verification, decryption, signature),
``longconn`` (lark-oapi websocket client), ``client`` (sending, token cache),
``replies`` (which messages the bot sent as the reply to which message),
``content`` (a message's content as words), ``records`` (chat records),
``drafts`` (a reply shown while it is written, one message edited; its id
kept across restarts given a ``draft_store``).

A recalled message takes the bot's reply along: the RECALL goes on the bus
(its stored words are erased, gateway/revisions.py) and the reply's parts
are withdrawn from the chat with ``DELETE /open-apis/im/v1/messages/:id``,
in the background so the event's intake (a webhook answered within
seconds, a long-connection ACK) never waits on Feishu. Which messages
answer which is kept across restarts when the gateway passes a
``reply_store`` (``replies.py``).

Intake goes through per-chat lanes (channels/lanes.py): an event whose
message needs Feishu read first (its pictures or recording, the message
it replies to, the messages of a chat record: ``records``) waits in its chat's lane, and so does any event of a chat
that has one pending, a recall included; a text of an idle chat goes to
the bus at once. So both intakes answer Feishu at once (a webhook within
its ~3 s; the long connection's single SDK thread is never held by a
download), one chat's download stalls no other chat, and a chat's events
reach the bus in the order they came: a recall after the message it
recalls (one recalled before its turn is dropped unread).

Delivery: Feishu is answered (webhook 200, long-connection ACK) once the
event is taken, before it is on the bus, and an answered event is not
sent again. Its event id is kept as seen from then on (a redelivery
while it is pending is dropped, after a restart too), and forgotten if
its job fails, so a copy Feishu sends anyway is taken. What was taken
is in the durable inbox first (gateway/inbox.py), with the keys and ids
to read its pictures, recording, file, quote or chat record again, so a
crash leaves it for the next start; so is a recall (its own table), which
the next start applies if no run did (gateway/leftrevisions.py). A stop loses nothing taken either:
``stop_receiving`` gives the lanes ``stop_grace`` seconds, then cuts the
downloads and reads still under way short; a message the inbox holds is
left there for the next start to read again and answer (no note, as
after a crash), any other goes on the bus at once with what a failed
download gets (the "[photo not read]" note, no quote), and every pending
recall after it, while the gateway still answers (it drains the bus next). Answering Feishu only once an
event is on the bus would need no cut, but a webhook cannot wait out a
30 s download (Feishu retries after 3 s) and the SDK thread serves every
chat.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
from aiohttp import web

from channels.base import BaseChannel, ChannelFatalError, FileTooLarge, LeftForLater, with_images
from channels.lanes import Job, Lanes
from channels.media import FAILED, MAX_IMAGES, TOO_LARGE, ImageError, as_image, audio_filename, placeholder
from gateway.bus import (
    AGAIN, Audio, Forwarded, Image, InboundMessage, MessageBus, NotKept, OutboundMessage, Quoted, audio_mark, notes_in_chinese,
)
from gateway.config import FeishuConfig
from gateway.http import HttpServer
from gateway.inbox import dumps, readable_again
from gateway.logging import error_fields
from memory.errorlog import codes, error_brief

from .client import (
    LOGIN_HINT,
    LOGIN_HINTS,
    MESSAGE_RATE_LIMIT_CODE,
    RECALL_TOO_LATE_CODE,
    FeishuApiError,
    FeishuClient,
    Resource,
    ResourceTooLarge,
    Withdrawal,
    draft_uuid,
    is_retryable,
    split_text,
)
from .dedup import IdStore, RecentIds
from .drafts import (
    DRAFT_EDITS,
    DRAFT_KEEP,
    EDIT_INTERVAL,
    MAX_PAUSE,
    RATE_LIMIT_PAUSE,
    Draft,
    Drafts,
    DraftStore,
    StoredDraft,
    preview,
)
from .events import (
    BOT_LEFT_EVENT,
    LEFT_EVENT,
    MESSAGE_EVENT,
    RECALL_EVENT,
    EventParseError,
    app_tenant_of,
    contact_id,
    event_id_of,
    event_type_of,
    parse_left_event,
    parse_message_event,
    parse_recall_event,
    quoted_of,
)
from .records import RECORD_NOT_READ, Names, flatten_record, people_in, record_note, sender_of, to_forwarded
from .replies import ReplyLog, ReplyStore
from .webhook import WebhookReceiver

__all__ = [
    "FeishuApiError", "FeishuChannel", "FeishuClient", "RecentIds", "ReplyLog", "Withdrawal", "app_locale", "split_text",
]

# A dropped reply's draft Feishu will not withdraw any more says this instead, by the app's locale.
_STOPPED = {"zh": "（已停止）", "": "(stopped)"}
_WITHDRAW_AT_STOP = 10.0  # seconds stop() gives withdrawals still under way
# POST /open-apis/im/v1/files: "文件大小不得超过 30 MB" for every file_type
# (opus, mp4, pdf, doc, xls, ppt, stream); decimal here, the safe reading.
MAX_UPLOAD_BYTES = 30_000_000
FILE_TOO_LARGE_CODE = 234006  # im/v1/files: over the size Feishu takes
# Reading the message a user replied to holds up their message (and a
# webhook's answer to Feishu, which wants one within 3 s): kept short.
QUOTE_TIMEOUT = 2.0
# What the lanes get once stop_receiving cut their downloads short: the
# jobs then only put their messages on the bus and their notes out.
_CUT_MARGIN = 2.0

T = TypeVar("T")


def app_locale(domain: str) -> str:
    """The language of the users an app on ``domain`` serves: Feishu
    (``open.feishu.cn``) is China's, Lark (``open.larksuite.com``) the
    world's; English for another (a private deployment, a test's server),
    which ``channels.feishu.language`` can say otherwise."""
    host = (urlsplit(domain).hostname or "").lower()
    if host == "feishu.cn" or host.endswith(".feishu.cn"):
        return "zh"
    return "en"


async def _to_the_end(work: Awaitable[T]) -> T:
    """``work``, run to its end even when the caller is cancelled (a
    stop: the gateway's senders are cancelled, then awaited), which then
    goes on once it is done. One request and one row at most."""
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait([task])
        if not task.cancelled():
            task.exception()  # its failure is the stop's to ignore, not an unread one
        raise


def _api_brief(exc: FeishuApiError) -> str:
    """A Feishu refusal in words of ours, for a log or a note's reason:
    its code and HTTP status say which it was; its ``msg`` is Feishu's
    text, which may echo what a chat holds (and a non-JSON answer's
    body, whatever a proxy put there)."""
    return f"Feishu API error {exc.code} (HTTP {exc.status})"


class _CutShort(Exception):
    """A download or quote read ended by the stop (``stop_receiving``)."""


class _CutDownload(ImageError):
    """A download ended by the stop: a failed one, unless its message is
    left in the inbox for the next start (:class:`~channels.base.LeftForLater`)."""


# What the inbox keeps of a message event before Feishu is answered: the
# message, and what is still to be read for it (gateway/inbox.py dumps).
_Kept = tuple[InboundMessage, dict[str, Any]]


class FeishuChannel(BaseChannel):
    name = "feishu"
    # Seconds stop_receiving lets pending downloads finish before it cuts
    # them short: within the half of the gateway's shutdown (10 s) that
    # intake gets, so the rest answers what it hands over.
    stop_grace: float = 3.0
    # Seconds the read of a message replied to may hold its reply up.
    quote_timeout: float = QUOTE_TIMEOUT

    def __init__(
        self,
        config: FeishuConfig,
        bus: MessageBus,
        http: HttpServer | None = None,
        *,
        dedup: RecentIds | None = None,
        replies: ReplyLog | None = None,
        reply_store: ReplyStore | None = None,
        seen_store: Callable[[str], IdStore] | None = None,
        draft_store: DraftStore | None = None,
        max_image_bytes: int | None = None,
        max_audio_bytes: int | None = None,
        max_document_bytes: int | None = None,
        max_document_tokens: int = 12_000,
        max_file_bytes: int | None = None,
        api_http: httpx.AsyncClient | None = None,
        **client_options: Any,
    ) -> None:
        """``client_options`` go to ``FeishuClient`` (``timeout``,
        ``max_attempts``, ``backoff``, ``clock``), ``api_http`` as its
        ``http`` (``http`` here is the webhook's server); ``reply_store``
        keeps the reply log across restarts (unless ``replies`` is given);
        ``seen_store(kind)`` makes the store that keeps one kind of id across
        restarts: ``"event"``, the event ids taken (unless ``dedup`` is
        given), and ``"recalled"``, the messages recalled (with the reply log);
        ``draft_store`` keeps each reply's draft message id until the reply
        is out, so a reply sent after a restart still becomes its draft
        (``drafts.py``);
        ``max_image_bytes`` (with ``agent.vision``): images and a post's
        pictures up to this size go to the model; ``max_audio_bytes`` (with
        ``agent.transcription``): audio messages up to this size are
        downloaded for transcription; ``max_document_bytes`` (with
        ``agent.documents``): file messages up to this size are read as text;
        ``max_file_bytes``: the largest file it uploads (default
        ``maxUploadBytes``, at most :data:`MAX_UPLOAD_BYTES`).
        The ``clock`` (monotonic seconds) also spaces a draft's edits."""
        super().__init__(bus, config.allow_from, max_image_bytes=max_image_bytes, max_audio_bytes=max_audio_bytes,
                         max_document_bytes=max_document_bytes, max_document_tokens=max_document_tokens,
                         max_file_bytes=config.max_upload_bytes if max_file_bytes is None else max_file_bytes)
        self.config = config
        self.http = http
        self.locale = app_locale(config.domain) if config.language == "auto" else config.language
        self.api = FeishuClient(config.app_id, config.app_secret.get_secret_value(), config.domain, http=api_http,
                                **client_options)
        # "is not None": an empty set is falsy (__len__), and the one given must be the one used
        self._dedup = dedup if dedup is not None else RecentIds(store=seen_store("event") if seen_store else None)
        self._sent_ids = RecentIds(maxsize=5000, ttl=7 * 86400)  # ours, for reply_to_bot
        # ours, by the message they answer: withdrawn with it
        self.replies = replies if replies is not None else ReplyLog(
            store=reply_store, recalled_store=seen_store("recalled") if seen_store else None
        )
        self._withdrawals: set[asyncio.Task[list[Withdrawal]]] = set()
        self._clock: Callable[[], float] = client_options.get("clock", time.monotonic)
        self._drafts = Drafts(self._clock)  # reply send_key -> the message showing its drafts
        self._draft_store = draft_store
        self.names = Names(self._contact_name)  # a chat record's authors
        self._app_tenant = ""  # the events' header tenant_key: whose user_ids the directory knows
        self.bot_open_id: str | None = None
        self._longconn: Any = None  # LongConnection, imported lazily
        self._route: tuple[str, str] | None = None
        self._receiver: WebhookReceiver | None = None
        self._receiving = True
        self._inflight = 0  # webhook requests being handled
        self._idle = asyncio.Event()
        self._idle.set()
        self._lanes = Lanes("feishu-lanes")  # per chat: the events taken, not on the bus yet
        self._cut = asyncio.Event()  # set at stop: downloads and quote reads end at once
        # Messages the inbox kept before Feishu was answered, once on the bus
        # (_put): one that never gets there lets its row go (_message_job).
        self._on_bus: dict[tuple[str, str], bool] = {}
        self._started = False
        self._stopped = False

    # -- lifecycle -----------------------------------------------------------------
    async def start(self) -> None:
        if self._started:
            raise RuntimeError("FeishuChannel cannot be started twice")
        self._started = True
        cfg = self.config
        if not cfg.app_id or not cfg.app_secret.get_secret_value():
            raise ChannelFatalError("channels.feishu needs appId and appSecret")
        if cfg.mode == "webhook":
            if self.http is None:
                raise ChannelFatalError("channels.feishu.mode=webhook needs the gateway HTTP server")
            if not cfg.verification_token.get_secret_value() and not cfg.encrypt_key.get_secret_value():
                # Without either, anyone who finds the URL could post events.
                raise ChannelFatalError("channels.feishu.mode=webhook needs verificationToken or encryptKey")
        await self._identify_bot()
        await self.replies.open()  # before any recall can come in
        await self._dedup.open()  # before any event: what was taken before a restart
        await self._clear_orphans()  # before any event: only the last run's drafts are looked at
        if cfg.mode == "webhook":
            self._start_webhook()
        else:
            await self._start_longconn()

    async def stop_receiving(self) -> None:
        """Accept no more events; replies still go out. The webhook answers
        503 from now on (Feishu delivers the event again later), requests
        already inside finish handing their event over, and the long
        connection closes (events it did not ACK are redelivered). The
        chats' pending jobs get ``stop_grace`` seconds; then the downloads
        and quote reads still under way are cut short. A message the inbox
        kept with the keys to read all it lacks again is left there for the
        next start (as after a kill: no note, answered once, whole); the
        others go on the bus as after a failed download (the user gets the
        note, their words are answered and kept); the recalls behind them follow.
        The same happens at once when the caller stops waiting (the
        gateway bounds this call). Only a job that cannot even put its
        message on the bus then (``_CUT_MARGIN``) is lost, logged as an
        error with how many. Safe to call twice."""
        self._receiving = False

        async def close_longconn() -> None:
            if self._longconn is not None:
                await self._longconn.stop()

        async def hand_over() -> None:
            await self._idle.wait()
            if not await self._lanes.wait_idle(self.stop_grace):
                await self._cut_short()

        try:
            # Side by side: the SDK thread may take seconds to end, and
            # events it still hands over are refused (not ACKed) meanwhile.
            await asyncio.gather(close_longconn(), hand_over())
        except asyncio.CancelledError:
            # The gateway stops waiting and drains the bus next: what is
            # pending goes there first (a bounded wait, then the cancel).
            await self._cut_short()
            raise

    async def _cut_short(self) -> None:
        pending = self._lanes.pending
        self._cut.set()
        if await self._lanes.wait_idle(_CUT_MARGIN):
            if pending:
                self.log.info("feishu downloads cut short at shutdown; their messages were left for the next "
                              "start or went on with a note", pending=pending)
        else:
            self.log.error("feishu messages still pending at shutdown are lost", pending=self._lanes.cancel())

    async def stop(self, timeout: float | None = None) -> None:
        """Stop receiving (as :meth:`stop_receiving`), let the withdrawals
        under way finish (within ``timeout``, at most 10 s: one cut leaves
        its reply in the chat), close; safe twice."""
        if self._stopped:
            return
        self._stopped = True
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        if self._route is not None and self.http is not None:
            self.http.remove_route(*self._route)
            self._route = None
        await self.stop_receiving()  # at once when the gateway called it already
        await self._lanes.close()
        await self._dedup.close()  # the last second's ids
        left = _WITHDRAW_AT_STOP if deadline is None else max(0.0, deadline - time.monotonic())
        await self.withdrawals_done(min(left, _WITHDRAW_AT_STOP))
        await self.replies.close()  # the last second's replies
        await self.api.aclose()
        self.log.info("feishu channel stopped")

    async def chat_title(self, chat_id: str) -> str:
        """A group's name, asked of Feishu (its events carry none), for
        gateway/chattitles.py. Raises :class:`NotPermitted` (the app lacks
        im:chat:readonly) or :class:`FeishuApiError`."""
        return await self.api.chat_title(chat_id)

    async def wait_failed(self) -> ChannelFatalError:
        """Return once the long connection has failed for good (the gateway
        watches this beside its other tasks and reports the channel failed;
        the other channels go on). A webhook has nothing to watch: its
        failures are per request."""
        if self._longconn is None:
            await asyncio.Event().wait()  # never set
        error = await self._longconn.wait_failed()
        # Feishu's text may echo a chat; its code says which refusal (514: no long-connection permission).
        code = codes(error).get("code")
        said = error_brief(error) + (f" (code {code})" if code is not None else "")
        return ChannelFatalError(f"the Feishu long connection stopped for good: {said}")

    async def _identify_bot(self) -> None:
        """Learn the bot's open_id, so a group message counts as addressed to
        the bot only when the bot itself is mentioned. Also proves the app
        credentials work before we start listening."""
        try:
            info = await self.api.bot_info()
        except FeishuApiError as exc:
            if exc.endpoint.endswith("tenant_access_token/internal") and not is_retryable(exc):
                hint = LOGIN_HINTS.get(exc.code, LOGIN_HINT)  # Feishu's msg may echo what it was sent: never said
                raise ChannelFatalError(f"Feishu refused the app's login (code {exc.code}): {hint}") from exc
            self.log.warning("could not fetch the Feishu bot identity; any @mention will count as one",
                             error=_api_brief(exc))
            return
        self.bot_open_id = str(info.get("open_id") or "") or None
        self.log.info("feishu bot identified", bot_open_id=self.bot_open_id, app_name=info.get("app_name"))

    def _start_webhook(self) -> None:
        assert self.http is not None
        receiver = WebhookReceiver(
            verification_token=self.config.verification_token.get_secret_value(),
            encrypt_key=self.config.encrypt_key.get_secret_value(),
            on_event=self.handle_event,
            # older: its id may be forgotten, so a replay would pass as new
            remembered_after=self._dedup.remembered_after,
        )
        self._receiver = receiver
        self._route = ("POST", self.config.webhook_path)
        self.http.add_route(*self._route, self._webhook)
        self.log.info("feishu webhook listening", path=self.config.webhook_path)

    async def _webhook(self, request: web.Request) -> web.StreamResponse:
        if not self._receiving or self._receiver is None:
            return web.json_response({"error": "shutting down"}, status=503)
        self._inflight += 1
        self._idle.clear()
        try:
            return await self._receiver.handle(request)
        finally:
            self._inflight -= 1
            if not self._inflight:
                self._idle.set()

    async def _start_longconn(self) -> None:
        from .longconn import LongConnection, LongConnectionBusyError

        self._longconn = LongConnection(
            self.config.app_id, self.config.app_secret.get_secret_value(), self.config.domain, self.handle_event
        )
        try:
            self._longconn.start()
        except LongConnectionBusyError as exc:
            raise ChannelFatalError(str(exc)) from exc

    # -- receiving -----------------------------------------------------------------
    async def handle_event(self, payload: dict[str, Any]) -> None:
        """One decoded event, from either intake. Returns once the event is
        taken: a quick one (a text, a recall) of a chat with nothing pending
        is on the bus already; one that reads Feishu first (the pictures, the
        recording, the message replied to) waits in its chat's lane, so the
        intake answers Feishu at once and other chats go on. Raises when it
        could not be taken, so Feishu delivers it again."""
        if not self._receiving:
            raise RuntimeError("the Feishu channel is stopping: event not taken")
        event_type = event_type_of(payload)
        if event_type not in (MESSAGE_EVENT, RECALL_EVENT, LEFT_EVENT, BOT_LEFT_EVENT):
            self.log.debug("feishu event ignored", event_type=event_type)
            return
        header = payload.get("header")
        app_id = str(header.get("app_id") or "") if isinstance(header, dict) else ""
        if app_id and app_id != self.config.app_id:
            # The token and the signature already vouch for it; an event
            # meant for another app is still none of ours (defence in depth).
            self.log.warning("feishu event for another app refused", app_id=app_id, event_type=event_type,
                             event_id=event_id_of(payload))
            return
        event_id = event_id_of(payload)
        # Marked on receipt, so a redelivery while the event is pending is
        # dropped too; forgotten if its job fails (_settled).
        if event_id and self._dedup.seen_before(event_id):
            self.log.info("duplicate feishu event dropped", event_id=event_id)
            return
        kept: list[_Kept] = []
        if event_type in (MESSAGE_EVENT, RECALL_EVENT):
            taken = self._message_job(payload, event_id) if event_type == MESSAGE_EVENT else \
                self._recall_job(payload, event_id)
            intake = None if taken is None else taken[:3]
            kept = [] if taken is None or taken[3] is None else [taken[3]]
        else:
            left = self._left_job(payload, event_id)
            intake = None if left is None else left[:3]
            kept = [] if left is None else [(gone, {}) for gone in left[3]]
        if intake is None:
            return
        chat, job, slow = intake
        for one in kept:
            # In gateway.db before Feishu is answered (a webhook's 200, the
            # SDK's ACK), its pictures or quote read after: a crash during
            # the download leaves it for the next start; so too a recall,
            # which a stop may cut in its lane or the loop's queue (the next
            # start applies it), and a member's leaving. Not writable (a full
            # disk): not answered, so Feishu sends it again later.
            try:
                await self.bus.keep(*one)
            except NotKept:
                if event_id:
                    self._dedup.forget(event_id)
                raise
        settled = self._settled(job, event_id)
        if slow:
            self._lanes.submit(chat, settled)
        else:
            await self._lanes.run(chat, settled)

    def _settled(self, job: Job, event_id: str) -> Job:
        async def settle() -> None:
            try:
                await job()
            except BaseException:
                # Not on the bus: a redelivery of it (before a 200 or an
                # ACK went out, or Feishu's own repeat) must not be dropped.
                if event_id:
                    self._dedup.forget(event_id)
                raise

        return settle

    def _recall_job(self, payload: dict[str, Any], event_id: str) -> tuple[str, Job, bool, _Kept] | None:
        """A message was withdrawn: its stored words go (gateway/revisions.py).
        Straight onto the bus, without the allow-list: the event names no
        sender, and it can only erase a message the gateway stored, which
        came from an allowed sender. In the chat's lane, behind the message
        it recalls if that is still pending there: applied before the
        message is stored, it would find nothing to erase. Kept in the
        inbox before Feishu is answered (gateway/inbox.py): a stop or a
        crash before it is applied leaves it to the next start."""
        try:
            recall = parse_recall_event(payload)
        except EventParseError as exc:
            self.log.warning("malformed feishu recall event", event_id=event_id, error=str(exc))
            return None
        # Marked at once: a reply to it still being made or sent is then
        # held back or withdrawn by send(), and the message itself, if still
        # waiting in its lane, is not put on the bus at all (_message_job).
        self.replies.mark_recalled(recall.message_id, recall.chat_id)

        async def job() -> None:
            await self.bus.publish_inbound(recall)
            self._withdraw_later(recall.message_id, recall.chat_id)

        return recall.chat_id, job, False, (recall, {})

    def _left_job(
        self, payload: dict[str, Any], event_id: str
    ) -> tuple[str, Job, bool, list[InboundMessage]] | None:
        """Members left a group: a LEFT each, without the allow-list (it
        only takes away what they set up there), in the chat's lane; each
        kept in the inbox before Feishu is answered (a stop may cut them
        in the lane or the loop's queue: the next start applies them)."""
        try:
            gone = parse_left_event(payload)
        except EventParseError as exc:
            self.log.warning("malformed feishu member event", event_id=event_id, error=str(exc))
            return None
        if not gone:
            return None

        async def job() -> None:
            for left in gone:
                await self.bus.publish_inbound(left)

        return gone[0].chat_id, job, False, gone

    def _message_job(self, payload: dict[str, Any], event_id: str) -> tuple[str, Job, bool, _Kept | None] | None:
        """The job that puts a message event on the bus (with its quote,
        pictures or recording), whether it reads Feishu first (slow), and
        what the inbox is to keep before Feishu is answered (the message,
        and what is still to be read for it, by its keys); None for one
        the inbox keeps no row for (a sender not allowed, a group message
        not addressed to the bot)."""
        try:
            parsed = parse_message_event(payload, bot_open_id=self.bot_open_id, bot_message_ids=self._sent_ids)
            self._app_tenant = app_tenant_of(payload) or self._app_tenant
        except EventParseError as exc:
            self.log.warning("malformed feishu message event", event_id=event_id, error=str(exc))
            return None
        if parsed is None:
            self.log.debug("feishu message without text ignored", event_id=event_id)
            return None
        # Feishu says nothing of the sender's language: the app's stands in (notes_in_chinese).
        msg, ids = dataclasses.replace(parsed.message, locale=self.locale), parsed.sender_ids
        parent = str(msg.metadata.get("parent_id") or "")
        quote = bool(parent) and (not msg.is_group or msg.mentioned or msg.reply_to_bot)
        images = parsed.image_keys[:MAX_IMAGES] if self.max_image_bytes is not None else ()
        audio = parsed.audio_key if self.max_audio_bytes is not None else ""
        file_key = parsed.file_key if self.max_document_bytes is not None else ""
        # A group member's message to the bot: the model is told who said it
        # (gateway/prompt.py); an event carries the sender's open_id only.
        named = msg.is_group and (msg.mentioned or msg.reply_to_bot) and bool(msg.sender_id) \
            and self.is_allowed(msg.sender_id, *ids)
        if named and (name := self.names.known(msg.sender_id)) is not None:
            msg = dataclasses.replace(msg, sender_name=name)  # in the inbox's row too: a resumed turn says who spoke
        # Its media's keys, kept with it in the inbox: a restart reads them
        # again from Feishu (read_again), their bytes never being kept; so
        # too the message it replied to (by its id) and a chat record's messages.
        again: dict[str, Any] = {}
        if quote:
            again["q"] = parent
        if parsed.record:
            again["r"] = True
        if images:
            again["i"] = list(images)
        if audio:
            again.update(a=audio, af=parsed.file_name if parsed.audio_name else "", an=parsed.audio_name)
        if file_key:
            again.update(f=file_key, fn=parsed.file_name)
        if again:
            msg = dataclasses.replace(msg, metadata={**msg.metadata, AGAIN: again})

        async def fetch() -> list[Image]:
            return [await unless_left(self._download(msg.message_id, key)) for key in images]

        async def record() -> Audio:
            return await unless_left(
                self._download_audio(msg.message_id, audio, parsed.file_name if parsed.audio_name else ""))

        async def read() -> bytes:
            got = self._resource(msg.message_id, file_key, kind="file", limit=self.max_document_bytes)
            return (await unless_left(got)).data

        async def unless_left(work: Awaitable[T]) -> T:
            try:
                return await work
            except _CutDownload:
                if leave:  # its row stays, with the keys to read it again: no note, no turn without it
                    raise LeftForLater from None
                raise

        slow = quote or images or audio or file_key or parsed.record or (named and not self.names.settled(msg.sender_id))
        waiting: dict[str, Any] = {}
        if images:
            waiting["i"] = len(images)
        if audio:
            waiting["a"] = True
        if file_key:
            waiting["f"] = parsed.file_name
        if parsed.record:
            waiting["r"] = True
        if quote:
            waiting["q"] = parent
        if keys := [*images, *([audio] if audio else []), *([file_key] if file_key else [])]:
            waiting["k"] = keys
        # A sticker (unreadable, nothing to read) gets a note, never a turn.
        readable = bool(waiting) or not msg.metadata.get("unreadable")
        if readable and named and not msg.sender_name and not self.names.settled(msg.sender_id):
            waiting["n"] = True  # looked up after: the row is written again with it
        kept = (msg, waiting) if readable and self.is_allowed(msg.sender_id, *ids) else None
        # A download the stop cuts leaves the message to the next start when
        # that start can read it all again (as after a kill), else it goes on
        # now with a note.
        leave = kept is not None and self.bus.inbox is not None and readable_again(dumps(msg, waiting))[0]

        async def job() -> None:
            cut = False
            try:
                await taken()
            except asyncio.CancelledError:
                cut = True  # a stop cut it: its row is the next start's to answer
                raise
            except LeftForLater:
                # Unless withdrawn meanwhile: then its row goes (below), never to be answered.
                cut = not self.replies.was_recalled(msg.message_id, msg.chat_id)
                self.log.info("feishu download cut short at shutdown; the message is left for the next start"
                              if cut else "recalled feishu message cut short at shutdown; not taken",
                              chat_id=msg.chat_id, message_id=msg.message_id)
            finally:
                on_bus = self._on_bus.pop((msg.chat_id, msg.message_id), False)
                if kept is not None and not on_bus and not cut:
                    self.bus.unkeep(msg)  # not to be answered after all (recalled; a picture alone not read)

        async def taken() -> None:
            message = msg
            if self.replies.was_recalled(message.message_id, message.chat_id):
                # Withdrawn before its turn: never read, stored or answered.
                self.log.info("recalled feishu message not taken", chat_id=message.chat_id,
                              message_id=message.message_id)
                return
            if named:
                try:
                    found = await self._unless_cut(self.names.of([message.sender_id]))
                except _CutShort:
                    found = {}  # a label will do
                message = dataclasses.replace(message, sender_name=found.get(message.sender_id, ""))
            if quote:
                message = dataclasses.replace(message, quoted=await self._quoted(parent, asker=message.sender_id,
                                                                                   chat=message.chat_id))
                if message.quoted is None and leave and self._cut.is_set():
                    raise LeftForLater  # the stop cut its read: not answered blind, read again at the next start
                # Read (or given up: answered without it), not to be read again after a restart.
                rest = {k: v for k, v in message.metadata[AGAIN].items() if k != "q"}
                message = dataclasses.replace(message, metadata={**message.metadata, AGAIN: rest})
            if images:
                await self.publish_image(message, fetch, *ids)
            elif audio:
                await self.publish_voice(message, record, *ids, name=parsed.audio_name)
            elif file_key:
                await self.publish_document(message, parsed.file_name, read, *ids)
            elif parsed.record:
                await self._publish_record(message, ids, leave=leave)
            elif kind := message.metadata.get("unreadable"):
                await self.decline_unreadable(message, kind, *ids)
            else:
                await self.publish(message, *ids)

        return msg.chat_id, job, bool(slow), kept

    async def _put(self, msg: InboundMessage) -> None:
        await super()._put(msg)
        self._on_bus[(msg.chat_id, msg.message_id)] = True

    async def _publish_record(self, msg: InboundMessage, ids: tuple[str, ...], *, leave: bool = False) -> None:
        """A chat record with its messages read (records.py), by the rules of
        a file: read in a private chat or a group message addressed to the
        bot (a record carries no mention: a reply to the bot), from an
        allowed sender; one not read gets the user a short note."""

        async def complete() -> InboundMessage:
            try:
                return dataclasses.replace(msg, forwarded=await self._read_record(msg))
            except _CutDownload:
                if leave:  # the stop cut its read: the next start reads it again (``leave``: it can)
                    raise LeftForLater from None
                raise

        await self._publish_fetched(msg, complete, ids, what="chat record", not_read=RECORD_NOT_READ,
                                    note=lambda _reason, has_text: record_note(has_text=has_text,
                                                                               zh=notes_in_chinese(msg)))

    async def _read_record(self, msg: InboundMessage) -> tuple[Forwarded, ...]:
        """The messages of the chat record ``msg``, with their authors."""
        try:
            items = await self._unless_cut(self.api.get_message_items(msg.message_id))
        except FeishuApiError as exc:
            raise ImageError(FAILED, _api_brief(exc)) from None
        except _CutShort:
            raise _CutDownload(FAILED, "cut short: the gateway is stopping") from None
        messages = flatten_record(items, msg.message_id)
        if not messages:
            raise ImageError(FAILED, "the record holds no messages")
        try:
            names = await self._unless_cut(self.names.of(people_in(messages, forwarder=msg.sender_id)))
        except _CutShort:
            names = {}  # labels will do
        return to_forwarded(messages, app_id=self.config.app_id, forwarder=msg.sender_id, names=names)

    async def _contact_name(self, sender: str) -> str:
        """``sender``'s name from the contact directory, asked by the type of
        id it is (events.contact_id); "" for another tenant's user_id."""
        ref = contact_id(sender, self._app_tenant)
        return await self.api.user_name(*ref) if ref is not None else ""

    async def _quoted(self, message_id: str, *, asker: str = "", strict: bool = False, chat: str = "") -> Quoted | None:
        """The message a user replied to, for the model (an event names its
        parent only), with its author: "you" (the bot), "the user" (the
        asker's own), or a person's name from the contact directory, as a
        chat record's authors are named (nameless when the app may not read
        it). A failure costs the quote, never the message; ``strict`` (read
        again after a restart), it raises :class:`ImageError` instead: the
        reply is asked for again rather than answered blind."""
        try:
            async with asyncio.timeout(self.quote_timeout):
                item = await self._unless_cut(self.api.get_message(message_id))
        except (FeishuApiError, TimeoutError) as exc:
            said = _api_brief(exc) if isinstance(exc, FeishuApiError) else error_brief(exc)
            self.log.warning("could not read the message replied to", parent_id=message_id, error=said)
            if strict:
                raise ImageError(FAILED, f"the message replied to was not read: {said}") from None
            return None
        except _CutShort:
            self.log.info("reading the message replied to cut short at shutdown", parent_id=message_id)
            if strict:
                raise ImageError(FAILED, "cut short: the gateway is stopping") from None
            return None
        if item and chat and str(item.get("chat_id") or chat) != chat:
            # The bot reads with its own rights, which reach every chat it is
            # in: a parent of another chat (a private one's) is not this
            # chat's to be shown, whoever named it.
            self.log.warning("message replied to is of another chat; not quoted", chat_id=chat, parent_id=message_id)
            return None
        quoted = quoted_of(item, app_id=self.config.app_id, bot_open_id=self.bot_open_id) if item else None
        if item is None or quoted is None or quoted.author:
            return quoted
        kind, author = sender_of(item)
        if kind != "user" or not author:
            return quoted
        if author == asker:
            return dataclasses.replace(quoted, author="the user")
        try:
            names = await self._unless_cut(self.names.of([author]))
        except _CutShort:
            return quoted
        return dataclasses.replace(quoted, author=names.get(author, ""))

    async def read_again(self, msg: InboundMessage) -> InboundMessage:
        """``msg`` as the inbox kept it from a run that stopped before its
        turn began, made whole again from Feishu as it was first taken: a
        group member's name looked up, the message it replied to and a chat
        record's messages read again by its id, its pictures, recording or
        file downloaded again by the keys it kept (metadata ``AGAIN``; a
        file already read is kept as text). Raises :class:`ImageError` when
        one cannot be had (the loop then asks the user to send it again)."""
        if msg.is_group and (msg.mentioned or msg.reply_to_bot) and msg.sender_id and not msg.sender_name:
            try:
                found = await self._unless_cut(self.names.of([msg.sender_id]))
            except _CutShort:
                found = {}  # a label will do
            msg = dataclasses.replace(msg, sender_name=found.get(msg.sender_id, ""))
        again = msg.metadata.get(AGAIN)
        if not isinstance(again, dict):
            return msg
        try:
            async with asyncio.timeout(self.image_timeout):
                if (parent := again.get("q")) and msg.quoted is None:
                    msg = dataclasses.replace(msg, quoted=await self._quoted(str(parent), asker=msg.sender_id, strict=True,
                                                                             chat=msg.chat_id))
                if again.get("r") and not msg.forwarded:
                    msg = dataclasses.replace(msg, forwarded=await self._read_record(msg))
                if keys := again.get("i"):
                    if self.max_image_bytes is None:
                        raise ImageError(FAILED, "pictures are not read (agent.vision is off)")
                    images = tuple([await self._download(msg.message_id, str(k)) for k in keys])
                    # Kept whole, its words already carry the mark.
                    bare = msg.placeholder.removeprefix(placeholder(len(images))).strip()
                    return with_images(dataclasses.replace(msg, placeholder=bare), images)
                if key := again.get("a"):
                    if self.max_audio_bytes is None:
                        raise ImageError(FAILED, "recordings are not read (agent.transcription is off)")
                    audio = await self._download_audio(msg.message_id, str(key), str(again.get("af") or ""))
                    name = str(again.get("an") or "")
                    return dataclasses.replace(msg, audio=dataclasses.replace(audio, name=name), placeholder=audio_mark(name))
                if (key := again.get("f")) and not msg.documents:
                    if self.max_document_bytes is None:
                        raise ImageError(FAILED, "files are not read (agent.documents is off)")
                    got = await self._resource(msg.message_id, str(key), kind="file", limit=self.max_document_bytes)
                    return await self.with_document(msg, str(again.get("fn") or "file"), got.data)
        except TimeoutError:
            raise ImageError(FAILED, f"no answer within {self.image_timeout:.0f}s") from None
        return msg

    async def _resource(self, message_id: str, key: str, *, kind: str, limit: int | None) -> Resource:
        """A file of a user's message, by the message resource API; what
        went wrong as an :class:`ImageError` the user is told about."""
        assert limit is not None
        try:
            return await self._unless_cut(self.api.message_resource(message_id, key, kind=kind, max_bytes=limit))
        except ResourceTooLarge as exc:
            raise ImageError(TOO_LARGE, str(exc)) from None
        except FeishuApiError as exc:
            raise ImageError(FAILED, _api_brief(exc)) from None
        except _CutShort:
            raise _CutDownload(FAILED, "cut short: the gateway is stopping") from None

    async def _unless_cut(self, work: Awaitable[T]) -> T:
        """``work`` (a read from Feishu), unless the stop cuts it short
        first (:class:`_CutShort`; the read is cancelled)."""
        if self._cut.is_set():
            raise _CutShort
        task = asyncio.ensure_future(work)
        cut = asyncio.ensure_future(self._cut.wait())
        try:
            await asyncio.wait((task, cut), return_when=asyncio.FIRST_COMPLETED)
        finally:
            cut.cancel()
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if task.cancelled():
            raise _CutShort
        return task.result()

    async def _download_audio(self, message_id: str, file_key: str, file_name: str = "") -> Audio:
        """An audio message's recording (Ogg/Opus), or an audio file's (``file_name``)."""
        got = await self._resource(message_id, file_key, kind="file", limit=self.max_audio_bytes)
        if file_name:
            mime = got.content_type or "application/octet-stream"
            return Audio(data=got.data, mime=mime, filename=audio_filename(file_name, mime))
        return Audio(data=got.data, mime=got.content_type or "audio/ogg", filename="voice.ogg")

    async def _download(self, message_id: str, image_key: str) -> Image:
        """One picture of a user's message."""
        limit = self.max_image_bytes
        got = await self._resource(message_id, image_key, kind="image", limit=limit)
        assert limit is not None
        return as_image(got.data, limit)

    # -- withdrawing replies -----------------------------------------------------------
    def withdraw_reply(self, answers: str, chat_id: str) -> None:
        """A recall the last run took but never applied was applied at this
        start (gateway/leftrevisions.py): the bot's reply to the recalled
        message leaves the chat now (the reply log is kept across restarts),
        and a reply to it still to come is held back."""
        self.replies.mark_recalled(answers, chat_id)
        self._withdraw_later(answers, chat_id)

    def _withdraw_later(self, answers: str, chat_id: str) -> None:
        task = asyncio.create_task(self._withdraw(answers, chat_id), name="feishu-withdraw")
        self._withdrawals.add(task)
        task.add_done_callback(self._withdrawals.discard)

    async def _withdraw(self, answers: str, chat_id: str) -> list[Withdrawal]:
        """Delete the bot's reply to ``answers`` in ``chat_id`` (every part
        of it); only ids our own sends returned, so never anyone else's
        message. A refusal is logged, never raised: the recall's erasure of
        the stored words does not depend on it."""
        done: list[Withdrawal] = []
        for message_id in self.replies.take(answers, chat_id):
            try:
                result = await self.api.delete_message(message_id)
            except FeishuApiError as exc:
                self.log.warning("could not withdraw the reply to a recalled message", chat_id=chat_id,
                                 recalled=answers, message_id=message_id, code=exc.code, status=exc.status)
                result = Withdrawal(message_id, False, exc.code, exc.msg)
            except Exception as exc:  # the client closed under us at shutdown, and kin
                self.log.warning("could not withdraw the reply to a recalled message", chat_id=chat_id,
                                 recalled=answers, message_id=message_id, **error_fields(exc))
                result = Withdrawal(message_id, False, -1, error_brief(exc))
            else:
                if not result.deleted:  # too old, or not ours to withdraw: Feishu's rules, not a fault
                    self.log.info("feishu refused to withdraw the reply to a recalled message", chat_id=chat_id,
                                  recalled=answers, message_id=message_id, code=result.code)
            done.append(result)
        if done:
            self.log.info("reply to a recalled message: withdrawal done", chat_id=chat_id, recalled=answers,
                          parts=len(done), withdrawn=sum(w.deleted for w in done))
        return done

    async def withdrawals_done(self, timeout: float | None = None) -> bool:
        """Wait for the withdrawals under way; False if some outlast ``timeout``."""
        pending = set(self._withdrawals)
        if not pending:
            return True
        _, late = await asyncio.wait(pending, timeout=timeout)
        for task in late:
            task.cancel()
        if late:
            self.log.warning("withdrawals of recalled replies left unfinished", count=len(late))
        return not late

    # -- drafts left by the last run ---------------------------------------------------
    async def _clear_orphans(self) -> None:
        """Find the draft messages the last run left whose reply will never
        come (``DraftStore.orphans``) and withdraw them in the background
        (:meth:`withdrawals_done` waits for it too). A store that cannot be
        read costs only this: they stay, and the next start tries again."""
        if self._draft_store is None:
            return
        try:
            orphans = await self._draft_store.orphans()
        except Exception as exc:  # a nicety: the channel starts all the same
            self.log.error("could not read the feishu drafts left by the last run", **error_fields(exc))
            return
        if orphans:
            task = asyncio.create_task(self._withdraw_orphans(orphans), name="feishu-orphan-drafts")
            self._withdrawals.add(task)
            task.add_done_callback(self._withdrawals.discard)

    async def _withdraw_orphans(self, orphans: list[StoredDraft]) -> list[Withdrawal]:
        """Withdraw each orphan draft (one marked finishing may be its
        reply's first part: left as it is) and forget its row; one Feishu
        could not be asked about now keeps its row for the next start."""
        assert self._draft_store is not None
        done: list[Withdrawal] = []
        stopped = 0  # refused as too old, edited into the "stopped" note instead
        now = time.time()
        for orphan in orphans:
            if not orphan.finishing and now - orphan.created_at < DRAFT_KEEP:
                try:
                    result = await self.api.delete_message(orphan.message_id)
                except FeishuApiError as exc:
                    self.log.warning("could not withdraw a feishu draft left by the last run", chat_id=orphan.chat_id,
                                     message_id=orphan.message_id, code=exc.code, status=exc.status)
                    if exc.retryable:
                        continue
                    result = Withdrawal(orphan.message_id, False, exc.code, exc.msg)
                if not result.deleted and await self._mark_stopped(orphan.chat_id, result):
                    stopped += 1
                done.append(result)
            try:
                await self._draft_store.remove(orphan.send_key)
            except Exception as exc:
                self.log.error("could not forget a feishu draft left by the last run", **error_fields(exc))
        if done:
            self.log.info("feishu drafts left by the last run withdrawn", chat_ids=sorted({o.chat_id for o in orphans}),
                          withdrawn=sum(w.deleted for w in done), marked_stopped=stopped,
                          refused=sum(not w.deleted for w in done) - stopped)
        return done

    async def _create_draft(self, msg: OutboundMessage, draft: Draft, content: str, msg_type: str) -> None:
        """The message showing ``msg``'s drafts, sent, and its id kept."""
        message_id = await self.api.send_one(
            msg.chat_id, content, msg_type=msg_type, reply_to=msg.reply_to,
            part_uuid=draft_uuid(msg.send_key), attempts=1,
        )
        self._recorder(msg)(message_id)
        draft.message_id = message_id
        await self._remember_draft(msg, draft)

    async def _remember_draft(self, msg: OutboundMessage, draft: Draft) -> None:
        """The first draft is out: keep its message id on disk until the
        reply is (best effort: without it, only a restart loses the draft)."""
        if self._draft_store is None:
            return
        now = time.time()
        try:
            await self._draft_store.put(StoredDraft(msg.send_key, msg.chat_id, draft.message_id, now),
                                        expired_before=now - DRAFT_KEEP)
            draft.stored = True
        except Exception as exc:
            self.log.error("could not keep a feishu draft message's id", chat_id=msg.chat_id, **error_fields(exc))

    async def _look_up_draft(self, msg: OutboundMessage, draft: Draft) -> None:
        """A reply whose drafts this run has not shown (sent from the
        outbox after a restart, or after :data:`~.drafts.DRAFT_TTL`): the
        draft message the store kept for it, if any, is the one to edit.
        Its edits so far are unknown: only the reply's edit is tried."""
        if self._draft_store is None or draft.looked_up or draft.message_id or draft.done:
            return
        draft.looked_up = True
        try:
            kept = await self._draft_store.get(msg.send_key)
        except Exception as exc:  # the reply goes out as new messages
            self.log.error("could not read a feishu draft message's id", chat_id=msg.chat_id, **error_fields(exc))
            return
        if kept is not None and kept.chat_id == msg.chat_id:
            draft.message_id, draft.stored, draft.edits = kept.message_id, True, DRAFT_EDITS

    async def _forget_draft(self, msg: OutboundMessage, draft: Draft) -> None:
        if self._draft_store is None or not draft.stored:
            return
        try:
            await self._draft_store.remove(msg.send_key)
            draft.stored = False
        except Exception as exc:  # the next start finds it with no reply waiting: withdrawn then, if not finishing
            self.log.error("could not forget a feishu draft message", chat_id=msg.chat_id, **error_fields(exc))

    # -- sending -------------------------------------------------------------------
    def _recorder(self, msg: OutboundMessage) -> Callable[[str], None]:
        """What notes a message sent as (part of) ``msg``: the bot's, for
        reply_to_bot, and under the message it answers, to withdraw with it."""

        def sent(message_id: str) -> None:
            self._sent_ids.seen_before(message_id)
            self.replies.record(msg.answers, msg.chat_id, message_id)

        return sent

    async def send(self, msg: OutboundMessage) -> None:
        """Raises ``FeishuApiError`` (with the Feishu code, ``retryable``
        and, after a partial send, ``remaining``) when Feishu refuses or
        cannot be reached; the gateway keeps a retryable one for later.
        A reply with a file (``attachment``) is uploaded, then its text
        and the file message go out. Each part sent is recorded under the message it answers
        (``msg.answers``), as it goes out. A reply to a message recalled
        meanwhile is not sent, and the parts of one recalled while it was
        being sent are withdrawn at once. A reply whose drafts were shown
        (:meth:`send_draft`, same ``send_key``) turns their message into its
        first part (:meth:`_send_over_draft`)."""
        if msg.answers and self.replies.was_recalled(msg.answers, msg.chat_id):
            self.log.info("reply to a recalled message not sent", chat_id=msg.chat_id, recalled=msg.answers)
            if msg.attachment is None:  # its draft went with the recall (the reply log)
                draft = self._drafts.open(msg.send_key)
                async with draft.lock:
                    await self._look_up_draft(msg, draft)
                    draft.done = True
                    await self._forget_draft(msg, draft)
            return
        sent = self._recorder(msg)
        try:
            if msg.attachment is None:
                # Opened even for a reply never drafted: a draft of it that
                # comes late (after the reply) must not show up on its own.
                draft = self._drafts.open(msg.send_key)
                async with draft.lock:
                    await self._look_up_draft(msg, draft)
                    try:
                        await self._send_over_draft(msg, draft, sent)
                    except FeishuApiError as exc:
                        # Kept for later (the outbox) with its draft still to edit: its row stays.
                        if (not exc.retryable or draft.done or not draft.message_id) and not msg.kept:
                            await self._forget_draft(msg, draft)
                        raise
                    # A reply with an outbox row (``kept``): the draft's row goes
                    # with that row, in one transaction (gateway/delivery.py); gone
                    # first, a kill between had the next start send it anew.
                    if not msg.kept:
                        await self._forget_draft(msg, draft)
            else:
                # Uploaded first: a refused upload leaves nothing half sent.
                # The caption goes as a text before the file (a file message has none).
                try:
                    key = await self.api.upload_file(msg.attachment.filename, msg.attachment.open)
                except FeishuApiError as exc:
                    if exc.code == FILE_TOO_LARGE_CODE:  # no use uploading it again; a gzipped one may go
                        raise FileTooLarge(f"Feishu refused the file for chat {msg.chat_id} as too large "
                                           f"({msg.attachment.size} bytes)") from None
                    raise
                if msg.text.strip():
                    await self.api.send_text(msg.chat_id, msg.text, reply_to=msg.reply_to, on_sent=sent,
                                             key=msg.send_key)
                for message_id in await self.api.send_file(msg.chat_id, key, reply_to=msg.reply_to, key=msg.send_key):
                    sent(message_id)
        finally:
            if msg.answers and self.replies.was_recalled(msg.answers, msg.chat_id):
                self._withdraw_later(msg.answers, msg.chat_id)

    async def _send_over_draft(self, msg: OutboundMessage, draft: Draft, sent: Callable[[str], None]) -> None:
        """The finished reply: its first part edited into the draft message
        (not edited when the draft already shows exactly that), the rest
        sent as new messages, with ``send_text``'s uuids and ``remaining``.
        A transient failure of the edit raises (the outbox brings the reply
        back, and the draft message is still there to edit). A refusal
        (the message withdrawn, out of edits, past the edit window, ...)
        sends the whole reply as new messages and withdraws the draft
        message, best effort; so does a rate limit (230020) the client's
        retries did not outlast, unless the new messages are held back too:
        then the draft stays for the outbox's next try. Once the edit is done, a resend (of the rest,
        after a cut) goes out as new messages, and so does a reply with no
        draft message; drafts coming after the reply show nothing."""
        if not draft.message_id or draft.done:
            draft.done = True
            await self.api.send_text(msg.chat_id, msg.text, reply_to=msg.reply_to, on_sent=sent, key=msg.send_key)
            return
        if not split_text(msg.text):  # a reply of no words: nothing for the draft to become
            stale, draft.message_id, draft.done = draft.message_id, "", True
            await self._withdraw_draft(msg.chat_id, stale)
            return

        async def into_draft(content: str, msg_type: str) -> str:
            if draft.shown != (content, msg_type):
                if draft.stored and self._draft_store is not None:
                    try:  # a crash after the edit must not have the next start withdraw the reply
                        await self._draft_store.finishing(msg.send_key)
                    except Exception as exc:
                        self.log.error("could not mark a feishu draft message finishing", **error_fields(exc))
                draft.edits += 1
                await self.api.edit_message(draft.message_id, content, msg_type=msg_type)
                draft.shown = (content, msg_type)
            draft.done = True
            return draft.message_id

        try:
            await self.api.send_text(msg.chat_id, msg.text, reply_to=msg.reply_to, on_sent=sent,
                                     key=msg.send_key, first=into_draft)
        except FeishuApiError as exc:
            # Still rate limited after the client's retries: the edit is what
            # Feishu holds back, so new messages get the reply out now.
            if draft.done or (exc.retryable and exc.code != MESSAGE_RATE_LIMIT_CODE):
                raise
            stale, draft.message_id, draft.done = draft.message_id, "", True
            self.log.info("feishu draft message could not become the reply; sending it anew", chat_id=msg.chat_id,
                          message_id=stale, code=exc.code, status=exc.status)
            parts = 0

            def counted(message_id: str) -> None:
                nonlocal parts
                parts += 1
                sent(message_id)

            try:
                await self.api.send_text(msg.chat_id, msg.text, reply_to=msg.reply_to, on_sent=counted,
                                         key=msg.send_key)
            except BaseException as again:
                if parts == 0 and isinstance(again, FeishuApiError) and again.retryable:
                    # Nothing went out (Feishu limits the chat, not one
                    # message): the draft stays, for the outbox's next try
                    # to edit, rather than a chat with neither.
                    draft.message_id, draft.done = stale, False
                else:
                    await self._withdraw_draft(msg.chat_id, stale)
                raise
            await self._withdraw_draft(msg.chat_id, stale)

    async def drop_draft(self, msg: OutboundMessage) -> None:
        """The reply will not come (its turn was dropped): the message its
        drafts showed, half written, is withdrawn (as an orphan is at
        start, for the same reasons), and later drafts show nothing. A
        reply already in it is left. Feishu unreachable now: the row stays
        and the next start withdraws it; a refusal is logged."""
        draft = self._drafts.open(msg.send_key)
        async with draft.lock:
            # Shown more than DRAFT_TTL ago (a long turn), memory forgot it: the store did not.
            await self._look_up_draft(msg, draft)
            if draft.done:
                return
            draft.done = True
            stale, draft.message_id = draft.message_id, ""
            if not stale:
                return
            try:
                result = await self.api.delete_message(stale)
            except FeishuApiError as exc:
                self.log.warning("could not withdraw the draft of a dropped reply", chat_id=msg.chat_id,
                                 message_id=stale, code=exc.code, status=exc.status)
                if exc.retryable:
                    return
                result = Withdrawal(stale, False, exc.code, exc.msg)
            if not result.deleted and not await self._mark_stopped(msg.chat_id, result):
                self.log.warning("could not withdraw the draft of a dropped reply", chat_id=msg.chat_id,
                                 message_id=stale, code=result.code)
            await self._forget_draft(msg, draft)

    async def _mark_stopped(self, chat_id: str, refused: Withdrawal) -> bool:
        """A draft Feishu would not withdraw because it is past the tenant's
        recall window (its admin may set that to minutes; editing has a
        window of its own, often longer): its half-written words are edited
        into a short note that the reply stopped, so they do not read as
        the answer. True when that was done. A draft has edits to spare for
        it: drafts stop two short of Feishu's limit."""
        if refused.code != RECALL_TOO_LATE_CODE:
            return False
        try:
            await self.api.edit_message(refused.message_id, _STOPPED.get(self.locale, _STOPPED[""]), msg_type="text")
        except FeishuApiError as exc:
            self.log.warning("could not mark a feishu draft past its recall window as stopped", chat_id=chat_id,
                             message_id=refused.message_id, code=exc.code, status=exc.status)
            return False
        self.log.info("feishu draft past its recall window marked as stopped", chat_id=chat_id,
                      message_id=refused.message_id)
        return True

    async def _withdraw_draft(self, chat_id: str, message_id: str) -> None:
        """Best effort: a draft the reply could not replace stays in the
        chat if Feishu refuses its withdrawal too (logged)."""
        try:
            result = await self.api.delete_message(message_id)
        except FeishuApiError as exc:
            result = Withdrawal(message_id, False, exc.code, exc.msg)
        if not result.deleted:
            self.log.warning("could not withdraw a stale feishu draft message", chat_id=chat_id,
                             message_id=message_id, code=result.code)

    async def send_draft(self, msg: OutboundMessage) -> bool:
        """Show a reply still being written (``msg.draft``): its first draft
        as a new message (answering ``reply_to`` as the reply will), recorded
        as the reply's parts are; later ones edit that message, at most
        ``DRAFT_EDITS`` times and ``EDIT_INTERVAL`` seconds apart (a draft
        skipped for that, or unchanged, still returns True). False once the
        reply is out, and for a recalled question or a file. A transient
        failure skips the draft (logged; the next one tries again, after
        ``RATE_LIMIT_PAUSE`` and more when Feishu said "too often"); a
        refusal raises ``FeishuApiError``: the gateway sends no more drafts
        of this reply, which goes out all the same."""
        if msg.attachment is not None or (msg.answers and self.replies.was_recalled(msg.answers, msg.chat_id)):
            return False
        draft = self._drafts.open(msg.send_key)
        async with draft.lock:
            # A turn quiet past DRAFT_TTL (a long tool call) has its message
            # in the store only: that one is edited on, not a second sent.
            await self._look_up_draft(msg, draft)
            if draft.done:
                return False
            shown = preview(msg.text)
            if shown is None or shown == draft.shown:
                return True
            now = self._clock()
            if now < draft.resume_at:
                return True
            if draft.message_id and (draft.edits >= DRAFT_EDITS or now - draft.last_at < EDIT_INTERVAL):
                return True
            content, msg_type = shown
            draft.last_at = now
            try:
                if draft.message_id:
                    draft.edits += 1
                    await self.api.edit_message(draft.message_id, content, msg_type=msg_type, attempts=1)
                else:
                    # Sent and its id kept as one: a stop cutting in between
                    # (found under load) left a draft in the chat that no row
                    # named, so the next start could not withdraw it.
                    await _to_the_end(self._create_draft(msg, draft, content, msg_type))
            except FeishuApiError as exc:
                if not exc.retryable:
                    raise
                if exc.rate_limited:
                    draft.pause = min(max(2 * draft.pause, RATE_LIMIT_PAUSE), MAX_PAUSE)
                    draft.resume_at = now + draft.pause
                self.log.info("feishu draft skipped", chat_id=msg.chat_id, code=exc.code, status=exc.status,
                              **({"pause_s": draft.pause} if exc.rate_limited else {}))
                return True
            finally:
                if msg.answers and self.replies.was_recalled(msg.answers, msg.chat_id):
                    self._withdraw_later(msg.answers, msg.chat_id)  # recalled while the draft went out
            draft.shown = shown
            draft.pause = 0.0
            return True
