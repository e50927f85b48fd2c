"""The chat model with fallbacks: ``agent.model`` on ``provider``, then each
of ``agent.fallbacks`` in turn (``memory/failover.py`` keeps the order and
the cooldowns).

One :meth:`FailoverLLM.chat` goes to the first candidate not cooling down;
a failure another endpoint could fix (:func:`gateway.llm.fails_over`) cools
that candidate down and the next one is asked within the same call. A
candidate with another behind it is asked with ``fail_fast`` (one retry at
most, none after a timeout or 429); the last one a call may ask gets its
full ``maxRetries``. A bad request that any model would refuse is raised at
once. When every candidate fails, the last error is raised, so the agent's
apology is the one it gives today.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import httpx

from memory.clock import Clock
from memory.failover import Cooldowns, candidate_label

from .config import FallbackConfig, ProviderConfig
from .llm import ChatResult, LLMClient, LLMError, fails_over

__all__ = ["ChatModel", "FailoverLLM"]


class ChatModel(Protocol):
    """What the agent calls: an :class:`LLMClient` or a :class:`FailoverLLM`."""

    async def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] = (),
        max_tokens: int | None = None,
        temperature: float | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> ChatResult: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class _Candidate:
    label: str
    client: LLMClient
    model: str


def _reason(exc: LLMError) -> str:
    # The class and status only: a provider's message may quote the prompt.
    return type(exc).__name__ + (f" {exc.status}" if exc.status is not None else "")


class FailoverLLM:
    """Chat completions from the first candidate that answers."""

    def __init__(self, candidates: Sequence[tuple[str, LLMClient, str]], clock: Clock) -> None:
        self._candidates = [_Candidate(label, client, model) for label, client, model in candidates]
        self.cooldowns = Cooldowns([c.label for c in self._candidates], [c.model for c in self._candidates], clock)
        self._closed = False

    @classmethod
    def from_config(
        cls,
        provider: ProviderConfig,
        model: str,
        fallbacks: Sequence[FallbackConfig],
        clock: Clock,
        *,
        setting: str = "agent",
        client: httpx.AsyncClient | None = None,
        **kw: Any,
    ) -> FailoverLLM:
        """``setting`` names the candidates in logs ("agent", "agent.fallbacks[0]").
        A fallback without its own provider shares the primary's client."""
        primary = LLMClient.from_config(provider, model=model, client=client, **kw)
        out = [(candidate_label(setting, 0), primary, model)]
        for i, fb in enumerate(fallbacks, start=1):
            llm = primary if fb.provider is None else LLMClient.from_config(fb.provider, model=fb.model, client=client, **kw)
            out.append((candidate_label(setting, i), llm, fb.model))
        return cls(out, clock)

    @property
    def model(self) -> str:
        """The primary model (what the gateway is configured to use)."""
        return self._candidates[0].model

    async def aclose(self) -> None:
        """Closes each client once (fallbacks may share the primary's)."""
        if self._closed:
            return
        self._closed = True
        for client in {id(c.client): c.client for c in self._candidates}.values():
            await client.aclose()

    async def __aenter__(self) -> FailoverLLM:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] = (),
        max_tokens: int | None = None,
        temperature: float | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> ChatResult:
        plan = self.cooldowns.plan()
        for n, index in enumerate(plan):
            cand = self._candidates[index]
            try:
                result = await cand.client.chat(
                    messages, tools=tools, model=cand.model, max_tokens=max_tokens,
                    temperature=temperature, extra=extra, fail_fast=n < len(plan) - 1,
                )
            except LLMError as exc:
                if not fails_over(exc):
                    raise  # this request's own fault: no candidate would take it
                self.cooldowns.failed(index, _reason(exc), retry_after=exc.retry_after)
                if n == len(plan) - 1:
                    raise
                continue
            self.cooldowns.succeeded(index)
            return replace(result, model=result.model or cand.model, candidate=cand.label)
        raise AssertionError("unreachable: a plan has at least one candidate")  # pragma: no cover
