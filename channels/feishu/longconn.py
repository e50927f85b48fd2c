"""Event intake by long connection: lark-oapi's websocket client.

The SDK's ``ws.Client.start()`` blocks forever and runs on an event loop
that ``lark_oapi.ws.client`` captured *at import time* (a module global
named ``loop``). So it gets a thread of its own with a fresh loop, which we
install as that global before starting; events are handed back to the
gateway's loop with ``run_coroutine_threadsafe``. Because the loop is a
module global, only one long connection can run per process: a second one
is refused instead of silently sharing the first one's loop.

The SDK has no ``stop()``. We stop its loop from outside, then close the
websocket and cancel the SDK's tasks ourselves (touching ``_conn`` and
``_auto_reconnect``: private, but there is no public way, and without it
the SDK would reconnect forever).

The SDK is never imported in our thread. ``import lark_oapi`` loads some
11,000 modules and gives up the GIL at each file read; a thread doing that
while the gateway's loop is busy waits a switch interval (5 ms) every time,
and the connection came up minutes late (460 s against a busy loop,
measured; 4 s on one thread). ``myclaw gateway`` calls ``preload_sdk()``
before its loop runs; otherwise ``start()`` imports it on the loop, once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import re
import sys
import threading
from collections.abc import Callable, Coroutine
from typing import Any

import structlog

from gateway.logging import error_fields

from .events import BOT_LEFT_EVENT, LEFT_EVENT, MESSAGE_EVENT, RECALL_EVENT

__all__ = ["LongConnection", "LongConnectionBusyError", "preload_sdk"]

# a coroutine, not any awaitable: run_coroutine_threadsafe needs one
EventHandler = Callable[[dict[str, Any]], Coroutine[Any, Any, None]]
_ONE_PER_PROCESS = threading.Lock()
_HANDOFF_TIMEOUT = 5.0  # seconds the SDK thread waits for the channel to take the event


class EventNotTaken(RuntimeError):
    """What the SDK is told when the channel failed to take an event: the
    error's type, never its text (the SDK logs it)."""


class LongConnectionBusyError(RuntimeError):
    """Another long connection already runs in this process."""


class LongConnection:
    def __init__(self, app_id: str, app_secret: str, domain: str, on_event: EventHandler) -> None:
        self._app_id = app_id
        self._app_secret = app_secret
        self._domain = domain.rstrip("/")
        self._on_event = on_event
        self._log = structlog.get_logger(channel="feishu", component="longconn")
        self._main_loop: asyncio.AbstractEventLoop | None = None
        self._ws_loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._client: Any = None
        # Guards _stopping/_cleaning/_client between stop() and the SDK thread.
        self._state = threading.Lock()
        self._stopping = False
        self._cleaning = False
        self._holds_lock = False
        self.error: BaseException | None = None  # why the SDK gave up, if it did
        self._failed: asyncio.Future[BaseException] | None = None  # on the gateway's loop

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("LongConnection cannot be started twice")
        if not _ONE_PER_PROCESS.acquire(blocking=False):
            raise LongConnectionBusyError(
                "a Feishu long connection already runs in this process (lark-oapi's websocket client uses a module-level loop)"
            )
        self._holds_lock = True
        self._main_loop = asyncio.get_running_loop()
        try:
            _import_sdk()
        except BaseException:
            self._holds_lock = False
            _ONE_PER_PROCESS.release()
            raise
        self._failed = self._main_loop.create_future()
        _SDK_FILTER.stopping = False  # one long connection per process: an earlier one's stop is over
        self._ws_loop = asyncio.new_event_loop()
        self._ws_loop.set_exception_handler(self._loop_error)
        self._thread = threading.Thread(target=self._run, name="feishu-longconn", daemon=True)
        self._thread.start()

    async def stop(self, timeout: float = 10.0) -> None:
        """Stop the SDK loop and wait for its thread; safe to call twice."""
        thread, ws_loop = self._thread, self._ws_loop
        if thread is None or ws_loop is None:
            return
        with self._state:
            first = not self._stopping
            self._stopping = True
            _SDK_FILTER.stopping = True
            if self._client is not None:
                # Without this the SDK treats the stop as a lost connection
                # and reconnects (start() catches the loop's RuntimeError).
                self._client._auto_reconnect = False
            if first and not self._cleaning and not ws_loop.is_closed():
                ws_loop.call_soon_threadsafe(ws_loop.stop)
        await asyncio.to_thread(thread.join, timeout)
        if thread.is_alive():
            # Stuck in the SDK's blocking endpoint request; it is a daemon
            # thread, so it cannot keep the process alive.
            self._log.warning("feishu long connection thread did not stop in time", timeout=timeout)
        elif self._holds_lock:
            self._holds_lock = False
            _ONE_PER_PROCESS.release()

    async def wait_failed(self) -> BaseException:
        """Return the error once the SDK has given up for good (bad
        credentials, no long-connection permission: it reconnects by itself
        after network trouble). Never returns after a normal stop()."""
        if self._failed is None:
            raise RuntimeError("LongConnection is not started")
        return await asyncio.shield(self._failed)

    def _report_failure(self) -> None:  # on the gateway's loop
        if self._failed is not None and not self._failed.done() and self.error is not None and not self._stopping:
            self._failed.set_result(self.error)

    def _loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """The SDK loop's unhandled errors: its receive loop, ended by our
        stop's close, dies with the close ("Task exception was never
        retrieved", said when the task is collected); not an error then."""
        if self._stopping:
            exc = context.get("exception")
            self._log.debug("feishu long connection task ended at the stop",
                            error=type(exc).__name__ if exc is not None else "")
            return
        loop.default_exception_handler(context)

    # -- the SDK thread -------------------------------------------------------------
    def _run(self) -> None:
        loop = self._ws_loop
        assert loop is not None
        asyncio.set_event_loop(loop)
        client = None
        try:
            import lark_oapi as lark  # already imported by start(): a lookup
            from lark_oapi.ws import client as ws_client

            ws_client.loop = loop
            asyncio.set_event_loop(loop)
            _route_sdk_logs_through_root()
            handler = (
                lark.EventDispatcherHandler.builder("", "")
                .register_p2_customized_event(MESSAGE_EVENT, self._on_sdk_event)
                # Raw, as the message event: one parser for both intakes.
                .register_p2_customized_event(RECALL_EVENT, self._on_sdk_event)
                .register_p2_customized_event(LEFT_EVENT, self._on_sdk_event)
                .register_p2_customized_event(BOT_LEFT_EVENT, self._on_sdk_event)
                .build()
            )
            client = lark.ws.Client(
                self._app_id,
                self._app_secret,
                event_handler=handler,
                domain=self._domain,
                log_level=lark.LogLevel.WARNING,  # INFO lines carry the connection URL with its ticket
                auto_reconnect=True,
            )
            with self._state:
                self._client = client
                if self._stopping:  # stopped while the SDK was still importing
                    return
            self._log.info("feishu long connection starting")
            client.start()
        except RuntimeError as exc:
            if not self._stopping:  # loop.stop() from stop() ends start() with a RuntimeError
                self.error = exc
                self._log.error("feishu long connection failed", **error_fields(exc))
        except Exception as exc:  # the SDK's ClientException (bad credentials) and kin
            # Its text is Feishu's, which may echo a chat: type and code only.
            self.error = exc
            self._log.error("feishu long connection failed", **error_fields(exc))
        finally:
            self._shutdown_sdk(loop, client)
            main = self._main_loop
            if self.error is not None and main is not None and not main.is_closed():
                try:
                    main.call_soon_threadsafe(self._report_failure)
                except RuntimeError:  # the gateway's loop closed meanwhile
                    pass

    def _on_sdk_event(self, data: Any) -> None:
        """Called by the SDK, on its loop, for each message or recall event.
        Waits (briefly) until the channel has taken the event (on our bus,
        or in its chat's lane: a download never holds this thread, which
        serves every chat) so the SDK's ACK means it was really taken; on
        failure the SDK answers 500 and Feishu redelivers (the dedup absorbs
        an extra copy, and forgets an event whose handling failed)."""
        header = data.header
        payload: dict[str, Any] = {
            "schema": getattr(data, "schema", None) or "2.0",
            "header": {
                k: getattr(header, k, None)
                for k in ("event_id", "event_type", "create_time", "token", "app_id", "tenant_key")
            },
            "event": data.event or {},
        }
        assert self._main_loop is not None
        fut = asyncio.run_coroutine_threadsafe(self._on_event(payload), self._main_loop)
        try:
            fut.result(timeout=_HANDOFF_TIMEOUT)
        except concurrent.futures.TimeoutError:
            self._log.warning("feishu event hand-off timed out; Feishu will redeliver", event_id=payload["header"]["event_id"])
            raise
        except Exception as exc:
            # The SDK logs what it is handed, text and all ("err: ..."), and an
            # error may quote the message: it gets the type alone, the log
            # the type and place (error_fields), and Feishu no ACK still.
            self._log.error("feishu event not taken; Feishu will redeliver", event_id=payload["header"]["event_id"],
                            **error_fields(exc))
            raise EventNotTaken(type(exc).__name__) from None

    def _shutdown_sdk(self, loop: asyncio.AbstractEventLoop, client: Any) -> None:
        with self._state:
            self._cleaning = True  # from now on stop() only joins
        try:
            # One loop iteration runs off a stop() that arrived after the SDK
            # had already given up, so it cannot cut the cleanup short.
            loop.call_soon(loop.stop)
            loop.run_forever()
            if client is not None:
                client._auto_reconnect = False
                # Cancel the SDK's tasks before closing the socket: its receive
                # loop would log every orderly close as an error.
                tasks = self._cancel_all(loop)
                conn = client._conn
                if conn is not None:
                    try:
                        loop.run_until_complete(asyncio.wait_for(conn.close(), 3))
                    except (Exception, asyncio.CancelledError) as exc:
                        self._log.debug("closing the feishu websocket failed", **error_fields(exc))
                tasks |= self._cancel_all(loop)
                for t in tasks:
                    if t.done() and not t.cancelled():
                        t.exception()  # retrieved: no "exception was never retrieved" noise
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()
            self._log.info("feishu long connection stopped")

    @staticmethod
    def _cancel_all(loop: asyncio.AbstractEventLoop) -> set[asyncio.Task[Any]]:
        tasks = asyncio.all_tasks(loop)
        # The SDK's ping loop sleeps in a `finally`, so one cancel may not
        # end it: cancel, wait a little, repeat.
        for _ in range(3):
            pending = [t for t in tasks if not t.done()]
            if not pending:
                break
            for t in pending:
                t.cancel()
            loop.run_until_complete(asyncio.wait(pending, timeout=1.0))
        return tasks


def _import_sdk() -> None:
    """Import lark-oapi on this thread (see the module's docstring). Its
    ``ws.client`` captures the running loop as its module global; our
    thread installs its own loop there before starting."""
    import lark_oapi  # noqa: F401
    from lark_oapi.ws import client  # noqa: F401


def preload_sdk() -> None:
    """Import lark-oapi before any event loop runs, so starting the long
    connection blocks nothing. ``ws.client`` asks for the current loop at
    import: give it a throwaway one rather than have it create and leak
    one (our thread installs its own before use)."""
    if "lark_oapi.ws.client" in sys.modules:
        return
    throwaway = asyncio.new_event_loop()
    asyncio.set_event_loop(throwaway)
    try:
        _import_sdk()
    finally:
        asyncio.set_event_loop(None)
        throwaway.close()


# What follows these in a lark-oapi line is an error's text or an event's
# payload, up to the connection id it ends with.
_SDK_TEXT = re.compile(r"\b(err: |payload: |raised: ).*?(?=( \[conn_id=[^\]]*\])?$)", re.S)


class _SdkWords(logging.Filter):
    """lark-oapi formats an error into its line ("connect failed, err:
    514: ...", "receive message loop exit, err: ...") and an event's
    payload into its debug line: Feishu's text, a close reason, a
    message's words. The line keeps its shape with the text withheld;
    the error being handled, if any, goes on as ``exc_info``, which the
    log turns into its type, place and code (gateway/logging.py).

    Once our stop began (``stopping``) its lines are debug: the stop cuts
    the SDK short (a connect under way fails, its socket closes under its
    receive loop), which it reports as errors. A drop before the stop
    stays an error."""

    def __init__(self) -> None:
        super().__init__()
        self.stopping = False

    def filter(self, record: logging.LogRecord) -> bool:
        if self.stopping and record.levelno > logging.DEBUG:
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        text = record.getMessage()
        cut = _SDK_TEXT.sub(r"\1(withheld)", text)
        if cut != text:
            record.msg, record.args = cut, None
            if record.exc_info is None and sys.exc_info()[1] is not None:  # called in the SDK's except block
                record.exc_info = sys.exc_info()
        return True


_SDK_FILTER = _SdkWords()


def _route_sdk_logs_through_root() -> None:
    # lark-oapi's "Lark" logger prints to stdout with its own handler, which
    # would bypass our redacting formatter; keep only propagation to root.
    lark_logger = logging.getLogger("Lark")
    for h in list(lark_logger.handlers):
        if isinstance(h, logging.StreamHandler):
            lark_logger.removeHandler(h)
    lark_logger.addFilter(_SDK_FILTER)  # once: addFilter skips one already there
    # websockets logs the handshake request line at DEBUG, and the long
    # connection URL carries its access_key and ticket in the query.
    ws_logger = logging.getLogger("websockets.client")
    ws_logger.setLevel(max(logging.INFO, ws_logger.getEffectiveLevel()))
