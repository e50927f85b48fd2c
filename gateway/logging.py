"""Logging with structlog: readable on a TTY, JSON lines otherwise.

Secrets never reach a log line. Two layers do that:

* values under keys that look secret (``api_key``, ``token``, ...) are
  replaced by ``"***"``;
* every string is scrubbed of the configured secret values and of common
  secret shapes (``Bearer ...``, ``sk-...``, Telegram's ``bot<id>:<hash>``
  URL segment, which httpx logs on every Bot API request).

The stdlib loggers of httpx, python-telegram-bot and lark-oapi go through
the same processors, so their lines are redacted too.

Redaction takes out secrets, not words: an exception's text may quote what
a user sent. Where an unexpected exception is logged at the edge of a
request, :func:`error_fields` (memory/errorlog.py) gives its type, the
frames it came through and its codes (errno name, SQLite's error name,
HTTP status) instead, at every level (the log holds no user's words at
DEBUG either); a traceback logged with ``exc_info`` (a library's
``logger.exception``) is turned into the same fields.
"""

from __future__ import annotations

import asyncio
import logging
import re
import sys
from collections.abc import Iterable, MutableMapping
from typing import Any, TextIO

import structlog

from memory.errorlog import error_brief, error_fields
from memory.groupowner import logged_owner
from memory.redact import KEY_SHAPES, redact_credentials, scrub_provider_text

__all__ = ["Redactor", "configure_logging", "error_fields", "get_logger", "loop_exception_handler", "provider_text"]

_SECRET_KEY = re.compile(r"(api[_-]?key|token|secret|password|passwd|authorization|encrypt[_-]?key|cookie)", re.I)
_SECRET_SHAPES = [
    *KEY_SHAPES,  # Bearer ..., sk-..., shared with the clients' own scrubbing of provider text
    (re.compile(r"/bot\d+:[A-Za-z0-9_-]{10,}"), "/bot***"),
    (re.compile(r"\bt-[A-Za-z0-9._-]{16,}"), "t-***"),  # Feishu tenant tokens
    # Feishu long-connection URLs carry credentials in the query string.
    (re.compile(r"(?i)\b(access_key|ticket|app_secret|token)=[^&\s\"']+"), r"\1=***"),
]

# A group owner id (memory/groupowner.py): ``group:<channel>:<chat_id>``, the
# chat id up to a space, quote or bracket, not a trailing full stop; one
# already logged by its tag (``#3f9a``) is left as it is.
_GROUP_OWNER = re.compile(r"""\bgroup:[A-Za-z0-9_-]+:(?!#)[^\s"'<>,;()\[\]{}]*[^\s"'<>,;()\[\]{}.:]""")


class Redactor:
    """A structlog processor that removes secrets from an event dict."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: set[str] = set()
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        # Very short values would redact ordinary words; real secrets are long.
        self._secrets.update(s for s in secrets if s and len(s) >= 6)

    @property
    def secrets(self) -> frozenset[str]:
        return frozenset(self._secrets)

    def scrub(self, text: str) -> str:
        # Longest first: a secret that contains another is replaced whole,
        # not left with its remainder showing.
        for s in sorted(self._secrets, key=len, reverse=True):
            if s in text:
                text = text.replace(s, "***")
        for pattern, repl in _SECRET_SHAPES:
            text = pattern.sub(repl, text)
        # A group's own memory named by its chat id (personal data: a
        # private group's, a Feishu oc_ id): by its tag instead, as the
        # erasures log it (memory/groupowner.py logged_owner).
        if "group:" in text:
            text = _GROUP_OWNER.sub(lambda m: logged_owner(m.group(0)), text)
        # What a user may have typed (a key, a card, a private key: memory
        # keeps none of it; a password line, which memory may keep for its
        # owner): a log line keeps none of it.
        return redact_credentials(text, passwords=True)

    def _clean(self, key: str, value: Any) -> Any:
        if key and _SECRET_KEY.search(key) and not key.endswith(("_count", "_tokens", "tokens")):
            return "***" if value not in (None, "") else value
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, dict):
            return {k: self._clean(str(k), v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self._clean("", v) for v in value)
        if isinstance(value, BaseException):  # logged as a value (error=exc): its kind and codes, never its text
            return error_brief(value)
        return value

    def __call__(self, logger: Any, method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        for k in list(event.keys()):
            if k in ("timestamp", "level", "logger"):
                continue
            event[k] = self._clean(k, event[k])
        return event


_redactor = Redactor()
def _exc_info_as_fields(logger: Any, method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """``exc_info`` (``logger.exception`` in a library, ``exc_info=True``)
    as :func:`error_fields`: a rendered traceback ends with the exception's
    text, which may quote a message; its type, frames and codes do not."""
    info = event.pop("exc_info", None)
    if info is True:
        info = sys.exc_info()
    exc = info if isinstance(info, BaseException) else info[1] if isinstance(info, tuple) and len(info) == 3 else None
    if isinstance(exc, BaseException):
        for key, value in error_fields(exc).items():
            event.setdefault(key, value)
    return event


def provider_text(text: str, secrets: Iterable[str] = ()) -> str:
    """A provider's (or a transcription endpoint's) error text for a log
    line: :func:`memory.redact.scrub_provider_text` with ``secrets`` and
    every secret logging was configured with (all candidates' keys), on one
    line and cut short. The log's own redaction runs later too; this one
    also holds where that is not set up (``capture_logs``, a library's
    handler) and keeps an echoed prompt out by the length."""
    return scrub_provider_text(text, [*secrets, *_redactor.secrets])


def configure_logging(
    *,
    level: str = "INFO",
    secrets: Iterable[str] = (),
    stream: TextIO | None = None,
    json_output: bool | None = None,
) -> Redactor:
    """Set up structlog and route stdlib logging through it.

    ``json_output=None`` picks the console renderer on a TTY, JSON otherwise.
    """
    stream = stream or sys.stderr
    _redactor.add(secrets)
    if json_output is None:
        json_output = not stream.isatty()
    renderer: Any = structlog.processors.JSONRenderer(ensure_ascii=False) if json_output else structlog.dev.ConsoleRenderer()
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _exc_info_as_fields,  # before format_exc_info, which would render its text
        structlog.processors.format_exc_info,
        _redactor,
    ]
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # Chatty libraries: keep their warnings, drop per-request info lines
    # (aiosqlite's debug lines hold every statement's parameters: users' words).
    for name in ("httpx", "httpcore", "telegram", "telegram.ext", "Lark", "aiohttp.access", "jieba", "websockets",
                 "aiosqlite"):
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))
    return _redactor


# What asyncio says in a context's message, its own phrases: the rest of a
# message (a task's or a callback's repr, their arguments, the error's
# text) is never logged.
_ASYNCIO_SAYS = (
    "Task exception was never retrieved", "Future exception was never retrieved",
    "Task was destroyed but it is pending", "Exception in callback", "Fatal error on SSL transport",
    "Fatal error on transport", "Fatal read error on socket transport", "Fatal write error on socket transport",
    "Fatal error: protocol.", "Unhandled error in exception handler", "an error occurred during closing of asynchronous generator",
    "asyncgen", "Error on reading from the event loop self pipe", "socket.send() raised exception.",
)


def loop_exception_handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The gateway's loop's handler for an error nobody awaited ("Task
    exception was never retrieved", a callback's error). asyncio's default
    logs the task's repr, which ends with the exception's, text and all;
    this logs asyncio's own phrase, the task's name and coroutine, and
    the error as :func:`error_fields`."""
    message = str(context.get("message") or "")
    event = next((p for p in _ASYNCIO_SAYS if message.startswith(p)), "asyncio error")
    fields: dict[str, Any] = {}
    task = context.get("task") or context.get("future")
    if isinstance(task, asyncio.Task):
        fields["task"] = task.get_name()  # ours name their chat or job by ids
        coro = task.get_coro()
        fields["coroutine"] = getattr(coro, "__qualname__", type(coro).__name__)
    exc = context.get("exception")
    if isinstance(exc, BaseException):
        fields.update(error_fields(exc))
    structlog.get_logger("asyncio").error(event, **fields)


def get_logger(component: str | None = None, **bound: Any) -> Any:
    """A structlog logger; ``component="memory"`` marks memory events."""
    if component:
        bound = {"component": component, **bound}
    # Lazy proxy: binding now would freeze the processors of this moment, and
    # a logger made at import time would then bypass redaction set up later.
    return structlog.get_logger(**bound)
