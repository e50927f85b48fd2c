"""Which of several model endpoints a call goes to, and which are cooling down.

Both model clients use it: the chat agent's (``gateway/failover.py``) and the
memory model's (``memory/llm.py``); it lives here because ``memory`` must not
import ``gateway``. It knows nothing of HTTP: the caller says which
candidate failed and when, this keeps the cooldowns and the order.

A call tries, in configured order, every candidate that is not cooling down,
then one that is (the one whose last failure is the oldest) as a last
resort: when all are down each call still asks one of them, never refuses
outright, and never waits for every timeout in turn. A failure cools its
candidate down for 30 s, doubling with each further failure up to 10 min
(longer if the provider's ``Retry-After`` asked for it, within the cap); a
success clears it, and so does a clock stepped back past its end. The clock is passed in, so tests move time instead of
sleeping.

The chat model and the memory model often use the same endpoint (the
memory model is the chat model unless set apart). Their :class:`Cooldowns`
then share one :class:`EndpointCooldowns`, which the App owns and passes
to both (no global state), so an outage the extraction finds sends the
next chat turn straight to its fallback, and a success either finds ends
it for both. An endpoint is keyed at three scopes (:func:`endpoint_scopes`),
and a failure cools the one it says something about:

* ``host``: no answer at all (unreachable, refused connection, connect
  timeout): every model on that base URL;
* ``key``: the key refused (401/403) or rate limited (429): that base URL
  and model with that key (another key there may be fine);
* ``model``: anything else (5xx, a read timeout, the model unknown there):
  that base URL and model, whatever the key.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

import structlog

from .clock import Clock

__all__ = [
    "COOLDOWN_BASE", "COOLDOWN_MAX", "Cooldowns", "EndpointCooldowns", "Scope", "candidate_label",
    "context_exceeded", "endpoint_scopes", "model_missing",
]

log = structlog.get_logger(component="failover")

COOLDOWN_BASE = timedelta(seconds=30)
COOLDOWN_MAX = timedelta(minutes=10)


# How providers word "no such model" in a 400/422 (a 404 always counts):
# OpenAI's code model_not_found, vLLM's "The model `x` does not exist",
# Ollama's "model 'x' not found", others' "invalid model" / "unknown model".
_MODEL_MISSING = re.compile(
    r"model_not_found|\bmodel\b.{0,80}\b(?:not found|does not exist|not exist|not available|not supported|unsupported|no access)"
    r"|\b(?:invalid|unknown|unsupported|no such)\s+model\b",
    re.IGNORECASE | re.DOTALL,
)
# "This model's maximum context length is ..." names the model but is the request's fault.
_TOO_LONG = re.compile(r"context|too long|too many tokens|maximum.{0,40}tokens", re.IGNORECASE)


# How providers say a request is over the model's context: OpenAI's code
# "context_length_exceeded" and "This model's maximum context length is
# 128000 tokens" (vLLM and DeepSeek say the same), llama.cpp's "the request
# exceeds the available context size" (exceed_context_size_error),
# Anthropic-compatible "prompt is too long", Groq's "Please reduce the
# length of the messages".
_CONTEXT_EXCEEDED = re.compile(
    r"context_length_exceeded|maximum context length|exceeds? the (?:available )?context"
    r"|exceed_context_size|prompt is too long|reduce the length of the messages",
    re.IGNORECASE,
)


def context_exceeded(status: int | None, text: str) -> bool:
    """The request is over the model's context window: the same request
    with less in it may be answered, the same one never (nor elsewhere,
    as far as we know: it is not a failure to fail over)."""
    return status in (400, 413, 422) and bool(_CONTEXT_EXCEEDED.search(text))


def model_missing(status: int | None, text: str) -> bool:
    """The endpoint does not serve the model asked for: another may."""
    if status == 404:
        return True
    return status in (400, 422) and bool(_MODEL_MISSING.search(text)) and not _TOO_LONG.search(text)


def candidate_label(setting: str, index: int) -> str:
    """``"agent"`` for the primary, ``"agent.fallbacks[0]"`` for the first
    fallback: the config path an operator looks up."""
    return setting if index == 0 else f"{setting}.fallbacks[{index - 1}]"


Scope = Literal["host", "model", "key"]
_SCOPES: tuple[Scope, ...] = ("host", "model", "key")


def endpoint_scopes(base_url: str, model: str, api_key: str = "") -> tuple[str, str, str]:
    """The keys of one endpoint at each :data:`Scope` (host, model, key), as
    :class:`EndpointCooldowns` keeps them: the same base URL (a trailing
    ``/`` aside) and model are the same endpoint whoever calls it. The key
    is kept as a short hash, never as itself."""
    host = base_url.strip().rstrip("/")
    key = hashlib.sha256(api_key.encode("utf-8")).hexdigest()[:12]
    return f"host {host}", f"model {host} {model}", f"key {host} {model} {key}"


@dataclass
class _State:
    failures: int = 0
    failed_at: datetime | None = None
    until: datetime | None = None


class EndpointCooldowns:
    """The cooldown state of endpoints, by scope key (:func:`endpoint_scopes`),
    shared by every :class:`Cooldowns` given it. Holds state only: each
    :class:`Cooldowns` reads the time from its clock."""

    def __init__(self) -> None:
        self._states: dict[str, _State] = {}

    def state(self, key: str) -> _State:
        return self._states.setdefault(key, _State())

    def peek(self, key: str) -> _State | None:
        return self._states.get(key)

    def clear(self, key: str) -> None:
        self._states.pop(key, None)


class Cooldowns:
    """Cooldown state of ``len(names)`` candidates, index 0 the primary.

    ``scopes`` (one :func:`endpoint_scopes` per candidate) and ``shared``
    make candidates that use the same endpoint as another caller's share
    its state; without them the candidates are this caller's alone."""

    def __init__(
        self,
        names: Sequence[str],
        models: Sequence[str],
        clock: Clock,
        *,
        scopes: Sequence[tuple[str, str, str]] | None = None,
        shared: EndpointCooldowns | None = None,
        base: timedelta = COOLDOWN_BASE,
        cap: timedelta = COOLDOWN_MAX,
    ) -> None:
        if not names or len(names) != len(models) or (scopes is not None and len(scopes) != len(names)):
            raise ValueError("one name, one model (and one scope) per candidate, at least one")
        self.names = tuple(names)
        self.models = tuple(models)
        self.clock = clock
        self.base = base
        self.cap = cap
        self.shared = shared is not None
        self._board = shared if shared is not None else EndpointCooldowns()
        # Alone: one private key per candidate, whatever the scope.
        self._scopes = [tuple(s) for s in scopes] if scopes is not None else [(f"#{i}",) * 3 for i in range(len(names))]

    def __len__(self) -> int:
        return len(self.names)

    def _states(self, index: int) -> list[_State]:
        return [s for s in (self._board.peek(k) for k in dict.fromkeys(self._scopes[index])) if s is not None]

    def cooling(self, index: int) -> bool:
        now = self.clock.now()
        # A cooldown ending further ahead than the longest one: the clock was
        # stepped back since (an NTP correction); over, not waited out.
        return any(s.until is not None and now < s.until <= now + self.cap for s in self._states(index))

    def _failed_at(self, index: int) -> datetime:
        return max((s.failed_at for s in self._states(index) if s.failed_at is not None), default=self.clock.now())

    def plan(self) -> list[int]:
        """The candidates a call tries, in order."""
        ready = [i for i in range(len(self.names)) if not self.cooling(i)]
        waiting = [i for i in range(len(self.names)) if self.cooling(i)]
        # The oldest failure first: it is the likeliest to have recovered.
        waiting.sort(key=self._failed_at)
        return ready + waiting[:1]

    def failed(
        self, index: int, reason: str, *, retry_after: float | None = None, scope: Scope = "model"
    ) -> timedelta:
        """Record a failure (``reason``: an error class and status, never a
        provider's message, which may quote the prompt) at ``scope`` (see the
        module docstring); returns the cooldown. A lone candidate has
        nothing to fail over to: it is asked every time, as without
        fallbacks, and its failure is the caller's to log; with ``shared``
        state it is still recorded, for the other callers of the endpoint."""
        if len(self.names) == 1 and not self.shared:
            return timedelta(0)
        state = self._board.state(self._scopes[index][_SCOPES.index(scope)])
        state.failures += 1
        now = self.clock.now()
        pause = min(self.cap, self.base * (1 << min(state.failures - 1, 30)))
        if retry_after is not None:
            pause = max(pause, min(self.cap, timedelta(seconds=retry_after)))
        state.failed_at = now
        state.until = now + pause
        if len(self.names) == 1:
            return timedelta(0)
        log.warning(
            "model endpoint failed; cooling down",
            candidate=self.names[index],
            model=self.models[index],
            reason=reason,
            scope=scope,
            failures=state.failures,
            cooldown_s=round(pause.total_seconds()),
        )
        return pause

    def succeeded(self, index: int) -> None:
        """The endpoint answered: reachable, its model served, its key taken."""
        failures = self.failures(index)
        if failures and len(self.names) > 1:
            log.info(
                "model endpoint recovered",
                candidate=self.names[index],
                model=self.models[index],
                primary=index == 0,
                after_failures=failures,
            )
        for key in self._scopes[index]:
            self._board.clear(key)

    def failures(self, index: int) -> int:
        return max((s.failures for s in self._states(index)), default=0)
