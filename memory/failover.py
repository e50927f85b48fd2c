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
success clears it. The clock is passed in, so tests move time instead of
sleeping.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import structlog

from .clock import Clock

__all__ = ["COOLDOWN_BASE", "COOLDOWN_MAX", "Cooldowns", "candidate_label", "model_missing"]

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


def model_missing(status: int | None, text: str) -> bool:
    """The endpoint does not serve the model asked for: another may."""
    if status == 404:
        return True
    return status in (400, 422) and bool(_MODEL_MISSING.search(text)) and not _TOO_LONG.search(text)


def candidate_label(setting: str, index: int) -> str:
    """``"agent"`` for the primary, ``"agent.fallbacks[0]"`` for the first
    fallback: the config path an operator looks up."""
    return setting if index == 0 else f"{setting}.fallbacks[{index - 1}]"


@dataclass
class _State:
    failures: int = 0
    failed_at: datetime | None = None
    until: datetime | None = None


class Cooldowns:
    """Cooldown state of ``len(names)`` candidates, index 0 the primary."""

    def __init__(
        self,
        names: Sequence[str],
        models: Sequence[str],
        clock: Clock,
        *,
        base: timedelta = COOLDOWN_BASE,
        cap: timedelta = COOLDOWN_MAX,
    ) -> None:
        if not names or len(names) != len(models):
            raise ValueError("one name and one model per candidate, at least one")
        self.names = tuple(names)
        self.models = tuple(models)
        self.clock = clock
        self.base = base
        self.cap = cap
        self._states = [_State() for _ in names]

    def __len__(self) -> int:
        return len(self.names)

    def cooling(self, index: int) -> bool:
        until = self._states[index].until
        return until is not None and until > self.clock.now()

    def plan(self) -> list[int]:
        """The candidates a call tries, in order."""
        ready = [i for i in range(len(self.names)) if not self.cooling(i)]
        waiting = [i for i in range(len(self.names)) if self.cooling(i)]
        # The oldest failure first: it is the likeliest to have recovered.
        waiting.sort(key=lambda i: self._states[i].failed_at or self.clock.now())
        return ready + waiting[:1]

    def failed(self, index: int, reason: str, *, retry_after: float | None = None) -> timedelta:
        """Record a failure (``reason``: an error class and status, never a
        provider's message, which may quote the prompt); returns the cooldown.
        A lone candidate has nothing to fail over to: it is asked every time,
        as without fallbacks, and its failure is the caller's to log."""
        if len(self.names) == 1:
            return timedelta(0)
        state = self._states[index]
        state.failures += 1
        now = self.clock.now()
        pause = min(self.cap, self.base * (1 << min(state.failures - 1, 30)))
        if retry_after is not None:
            pause = max(pause, min(self.cap, timedelta(seconds=retry_after)))
        state.failed_at = now
        state.until = now + pause
        log.warning(
            "model endpoint failed; cooling down",
            candidate=self.names[index],
            model=self.models[index],
            reason=reason,
            failures=state.failures,
            cooldown_s=round(pause.total_seconds()),
        )
        return pause

    def succeeded(self, index: int) -> None:
        state = self._states[index]
        if state.failures:
            log.info(
                "model endpoint recovered",
                candidate=self.names[index],
                model=self.models[index],
                primary=index == 0,
                after_failures=state.failures,
            )
        self._states[index] = _State()

    def failures(self, index: int) -> int:
        return self._states[index].failures
