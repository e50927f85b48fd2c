"""A chat-completions URL that is not there: the endpoint answered 404 or
405 for the path itself, most often a ``baseUrl`` without ``/v1``. Only
``myclaw doctor`` said so; a gateway so configured started and logged
``answered 404`` for every message. :class:`WrongPath` says it once per
endpoint (not per message) as an error naming the setting to fix, the
path tried and the likely fix; the caller still raises its usual error,
so the user gets the usual failure reply. Shared by the chat model's
client (gateway/llm.py) and the memory model's (memory/llm.py)."""

from __future__ import annotations

import structlog

__all__ = ["NOT_THERE", "WrongPath"]

NOT_THERE = frozenset({404, 405})  # no such path, or no POST on it

log = structlog.get_logger(component="llm")


class WrongPath:
    """``which``: whose endpoint, in words ("chat model", "memory model")."""

    def __init__(self, which: str) -> None:
        self.which = which
        self._told: set[tuple[str, str]] = set()  # (setting, path) said already

    def answered(self, status: int, path: str, setting: str) -> bool:
        """Log, the first time for ``setting`` and ``path``, that ``status``
        says the path is wrong; whether it logged. ``path``: the URL's path
        only (a base URL may hold a password); ``setting``: the config
        path of the provider (``provider``, ``memory.provider``)."""
        if status not in NOT_THERE or (setting, path) in self._told:
            return False
        self._told.add((setting, path))
        log.error(
            f"the {self.which}'s endpoint answered {status} for {path}: check {setting}.baseUrl "
            "(an OpenAI-compatible URL usually ends in /v1, as https://api.openai.com/v1; "
            "if it is right, the model name; `myclaw doctor` checks both). Said once; each message still fails",
            status=status, path=path, setting=f"{setting}.baseUrl",
        )
        return True
