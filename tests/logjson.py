"""The gateway's real logging, at DEBUG and as JSON lines, for tests that
a log line holds no user's words."""

from __future__ import annotations

import contextlib
import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import structlog

from gateway.logging import configure_logging

__all__ = ["all_lines", "debug_json_log", "lines"]


@contextlib.contextmanager
def debug_json_log() -> Iterator[io.StringIO]:
    """configure_logging at DEBUG into a string; the root logger's handlers
    and level and structlog's setup restored after."""
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    stream = io.StringIO()
    configure_logging(level="DEBUG", stream=stream, json_output=True)
    try:
        yield stream
    finally:
        for h in list(root.handlers):
            root.removeHandler(h)
        for h in saved_handlers:
            root.addHandler(h)
        root.setLevel(saved_level)
        structlog.reset_defaults()


def lines(stream: io.StringIO, event: str) -> list[dict[str, Any]]:
    """The log lines whose event is ``event``, parsed."""
    parsed = [json.loads(x) for x in stream.getvalue().splitlines() if x.strip()]
    return [p for p in parsed if p.get("event") == event]


def all_lines(stream: io.StringIO) -> list[dict[str, Any]]:
    """Every log line, parsed."""
    return [json.loads(x) for x in stream.getvalue().splitlines() if x.strip()]
