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

Pictures: a candidate whose model refuses them (``LLMBadRequest.refuses_images``)
has not failed: it is not cooled down, and the same request, pictures and
all, goes to the next candidate, since a fallback that sees answers better
than any model answering without the pictures. A cooling candidate is not
waited for then (it would be the last resort only): when no candidate could
read them, the picture refusal is raised, and the agent asks again with the
pictures replaced by a note (``gateway.prompt.without_images``), which the
first candidate that is up answers. Which model refused is remembered by its
client (``LLMClient``), so later photos cost no request to it.

Cooldowns are kept per endpoint in an :class:`EndpointCooldowns` the App
shares with the memory model's client (``memory/failover.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import httpx

from memory.clock import Clock
from memory.failover import Cooldowns, EndpointCooldowns, Scope, candidate_label

from .config import FallbackConfig, ProviderConfig
from .llm import (
    ChatResult,
    LLMAuthError,
    LLMBadRequest,
    LLMClient,
    LLMError,
    LLMRateLimited,
    LLMTimeout,
    fails_over,
    has_images,
)

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
        on_text: Callable[[str], None] | None = None,
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


def _scope(exc: LLMError) -> Scope:
    """What a failure says is down (``memory/failover.py``): no answer at
    all, the whole host; a refused or rate-limited key, that key; else the
    model there."""
    if isinstance(exc, LLMAuthError | LLMRateLimited):
        return "key"
    if exc.status is None and not (isinstance(exc, LLMTimeout) and isinstance(exc.__cause__, httpx.ReadTimeout)):
        return "host"  # unreachable, refused, a connect timeout (a read timeout: the host answered the call)
    return "model"


class FailoverLLM:
    """Chat completions from the first candidate that answers."""

    def __init__(
        self,
        candidates: Sequence[tuple[str, LLMClient, str]],
        clock: Clock,
        *,
        cooldowns: EndpointCooldowns | None = None,
    ) -> None:
        """``cooldowns``: the endpoints' state shared with other callers
        (the App's); None: these candidates' own."""
        self._candidates = [_Candidate(label, client, model) for label, client, model in candidates]
        self.cooldowns = Cooldowns(
            [c.label for c in self._candidates], [c.model for c in self._candidates], clock,
            scopes=[c.client.scopes(c.model) for c in self._candidates], shared=cooldowns,
        )
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
        cooldowns: EndpointCooldowns | None = None,
        **kw: Any,
    ) -> FailoverLLM:
        """``setting`` names the candidates in logs ("agent", "agent.fallbacks[0]").
        A fallback without its own provider shares the primary's client.
        No client repeats any candidate's key from a provider's text."""
        keys = [p.api_key.get_secret_value() for p in (provider, *(fb.provider for fb in fallbacks if fb.provider))]
        kw = {"redact": [k for k in keys if k], **kw}
        primary = LLMClient.from_config(provider, model=model, client=client, **kw)
        out = [(candidate_label(setting, 0), primary, model)]
        for i, fb in enumerate(fallbacks, start=1):
            llm = primary if fb.provider is None else LLMClient.from_config(
                fb.provider, model=fb.model, client=client, setting=f"{candidate_label(setting, i)}.provider", **kw)
            out.append((candidate_label(setting, i), llm, fb.model))
        return cls(out, clock, cooldowns=cooldowns)

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
        on_text: Callable[[str], None] | None = None,
    ) -> ChatResult:
        """``on_text``: streamed, as :meth:`LLMClient.chat`; the candidate
        asked after a failed one starts the text over."""
        plan = self.cooldowns.plan()
        blind: LLMBadRequest | None = None  # a candidate that cannot read the pictures said so
        last: LLMError | None = None
        was_cooling = {i for i in plan if self.cooldowns.cooling(i)}
        for n, index in enumerate(plan):
            if self.cooldowns.cooling(index) and index not in was_cooling:
                continue  # cooled by a failure of this call: the same host (or model) just failed
            if blind is not None and self.cooldowns.cooling(index):
                break  # a model that is up answers without the pictures sooner than a cooling one with them
            cand = self._candidates[index]
            try:
                result = await cand.client.chat(
                    messages, tools=tools, model=cand.model, max_tokens=max_tokens,
                    temperature=temperature, extra=extra, fail_fast=n < len(plan) - 1, on_text=on_text,
                )
            except LLMBadRequest as exc:
                if exc.refuses_images and has_images(messages):
                    blind = exc  # not the endpoint's failure: the next may see
                    continue
                if not fails_over(exc):
                    raise  # this request's own fault: no candidate would take it
                last = self._failed(index, exc)
                continue
            except LLMError as exc:
                last = self._failed(index, exc)
                continue
            self.cooldowns.succeeded(index)
            return replace(result, model=result.model or cand.model, candidate=cand.label)
        # Nobody answered: the pictures' refusal first, so that the agent
        # asks again without them, else the last failure.
        error = blind or last
        assert error is not None, "a plan has at least one candidate"
        raise error

    def _failed(self, index: int, exc: LLMError) -> LLMError:
        self.cooldowns.failed(index, _reason(exc), retry_after=exc.retry_after, scope=_scope(exc))
        return exc
