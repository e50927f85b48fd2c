"""One turn of the agent: prompt -> LLM -> (tool calls -> LLM)* -> text.

:meth:`Agent.run` never raises for a provider or tool failure: it returns
an :class:`AgentReply` with ``ok=False`` and an apology in the user's
language, so one broken call never takes the process loop down.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from .bus import words_in_chinese
from .llm import (
    ChatResult,
    LLMAuthError,
    LLMBadRequest,
    LLMBadResponse,
    LLMError,
    LLMFiltered,
    LLMRateLimited,
    LLMTimeout,
    ToolCall,
    has_images,
)
from .failover import ChatModel
from .logging import error_fields, provider_text
from .prompt import smaller_for_context, without_images
from .tools import Tool, ToolContext, ToolError

__all__ = ["Agent", "AgentReply", "apology", "ending_note"]

# Lazy: resolved at each call, so it follows configure_logging (and its
# redaction) even though this module is imported before logging is set up.
log = structlog.get_logger(component="agent")

_TOOL_RESULT_MAX_CHARS = 8000


def _in_chinese(user_text: str, zh: bool | None) -> bool:
    # Japanese writes kanji too: words_in_chinese tells it by its kana.
    return words_in_chinese(user_text) is True if zh is None else zh


def apology(user_text: str, exc: BaseException | None = None, *, zh: bool | None = None) -> str:
    """What the user reads when no answer could be produced. ``zh``: in
    Chinese or not, as the caller knows (a message without words goes by
    the sender's app language); None: by ``user_text``'s words."""
    zh = _in_chinese(user_text, zh)
    if isinstance(exc, LLMTimeout):
        return "抱歉，模型这次响应超时了，请稍后再试。" if zh else "Sorry, the language model took too long to answer. Please try again in a moment."
    if isinstance(exc, LLMRateLimited):
        wait = exc.retry_after or 0.0
        if wait > 90:  # the provider said how long: "in a minute" would not be true
            minutes = round(wait / 60)
            if minutes < 90:
                zh_when, en_when = f"约 {minutes} 分钟后", f"in about {minutes} minutes"
            else:
                hours = round(wait / 3600)
                zh_when, en_when = f"约 {hours} 小时后", f"in about {hours} hour{'s' if hours != 1 else ''}"
            return (f"抱歉，模型服务现在太忙了（已达到使用上限），请{zh_when}再试。" if zh
                    else f"Sorry, the language model's usage limit is reached. Please try again {en_when}.")
        return "抱歉，模型服务现在太忙了，请过一会儿再试。" if zh else "Sorry, the language model is busy right now. Please try again in a minute."
    if isinstance(exc, LLMFiltered) or (isinstance(exc, LLMBadRequest) and exc.filtered):
        return (
            "抱歉，模型服务商的内容过滤拦下了这次回答。换个说法也许可以。"
            if zh
            else "Sorry, the model provider's content filter withheld this answer. Rephrasing it may help."
        )
    if isinstance(exc, LLMBadRequest) and exc.context_too_long:
        # Asked again with less until nothing was left to leave out: "try
        # again" would fail the same way, a shorter message (or a file, cut
        # to fit) would not.
        return (
            "抱歉，这些内容太长，即使去掉较早的消息，模型也读不下。请发短一些，或把长文作为文件发送。"
            if zh
            else "Sorry, this is too long for the model to read at once, even with the older messages left out. "
            "Please send it shorter, or send the text as a file."
        )
    if isinstance(exc, LLMAuthError):
        return (
            "抱歉，我现在无法连接模型服务（API 密钥未被接受），请联系管理员。"
            if zh
            else "Sorry, I cannot reach the language model (its API key was not accepted). Please tell the operator."
        )
    return "抱歉，我这次没能生成回复，请稍后再试。" if zh else "Sorry, I could not produce an answer this time. Please try again in a moment."


def ending_note(user_text: str, finish_reason: str, *, zh: bool | None = None) -> str:
    """What follows a reply the model did not finish: cut at its length
    limit, or the rest withheld by the provider's filter; "" otherwise.
    It stays in the history, so the next turn's model sees where it stopped.
    ``zh`` as for :func:`apology`."""
    zh = _in_chinese(user_text, zh)
    if finish_reason == "length":
        return ("\n\n（回答到这里被截断了：达到了模型的长度上限。说“继续”，我接着写。）" if zh
                else "\n\n(The answer was cut off here: it reached the model's length limit. Say \"go on\" and I will continue.)")
    if finish_reason == "content_filter":
        return ("\n\n（后面的内容被模型服务商的内容过滤拦下了。）" if zh
                else "\n\n(The rest was withheld by the model provider's content filter.)")
    return ""


@dataclass(frozen=True)
class AgentReply:
    text: str
    ok: bool
    llm_ms: float = 0.0
    rounds: int = 0  # LLM calls made
    tools_used: tuple[str, ...] = ()
    error: str = ""
    # A tool that erases memory (``Tool.metadata["forgets"]``) ran without
    # error, also when the turn then failed: the turn asked to forget
    # something, so its words must not be learnt again (ProcessLoop).
    forgot: bool = False
    # Who gave the last answer: the model and the setting it is configured
    # at ("agent", "agent.fallbacks[0]"; gateway/failover.py), for logs.
    model: str = ""
    candidate: str = ""
    # The turn's pictures were taken out because the model refused them
    # (``without_images``): nobody saw them, and the history must say so.
    images_unseen: bool = False


class Agent:
    def __init__(
        self,
        llm: ChatModel,
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        tools: Iterable[Tool] = (),
        max_rounds: int = 4,
    ) -> None:
        self.llm = llm
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.max_rounds = max_rounds
        self._tools: dict[str, Tool] = {}
        self.add_tools(tools)
        # Flipped once a provider says it does not do function calling, so
        # later turns do not pay a failed request each.
        self.tools_supported = True

    def add_tools(self, tools: Iterable[Tool]) -> None:
        """Offer more tools (e.g. the cron service's ``cron_add``)."""
        for t in tools:
            if t.name in self._tools:
                raise ValueError(f"tool {t.name!r} is registered twice")
            self._tools[t.name] = t

    @property
    def tools(self) -> list[Tool]:
        return list(self._tools.values())

    def tools_for(self, ctx: ToolContext) -> list[Tool]:
        return [t for t in self._tools.values() if t.offered(ctx)]

    async def run(
        self,
        messages: Sequence[Mapping[str, Any]],
        ctx: ToolContext,
        *,
        user_text: str = "",
        zh: bool | None = None,
        on_text: Callable[[str], None] | None = None,
        on_act: Callable[[], None] | None = None,
    ) -> AgentReply:
        """``on_text``: each completion is streamed and ``on_text`` hears
        its text so far (a round that calls tools may say a few words
        first; the next round's text starts over). ``on_act``: called just
        before a tool that changes something (``Tool.acts``) runs, with no
        await between, so a caller that cancels the turn can tell it is
        past undoing. ``zh``: whether the
        bot's own notes (an apology, a cut reply's note) are in Chinese;
        None: by ``user_text``'s words."""
        msgs: list[Mapping[str, Any]] = list(messages)
        offered = self.tools_for(ctx) if self.tools_supported else []
        by_name = {t.name: t for t in offered}
        specs = [t.spec() for t in offered]
        llm_ms = 0.0
        rounds = 0
        used: list[str] = []
        forgot = False
        pictures = has_images(msgs)  # _complete takes them out of msgs if the model refuses them
        try:
            for round_no in range(self.max_rounds + 1):
                # The last round may not call tools: the model has to answer.
                final = round_no == self.max_rounds
                started = time.perf_counter()
                try:
                    result = await self._complete(msgs, specs, final=final, on_text=on_text)
                finally:
                    llm_ms += (time.perf_counter() - started) * 1000
                    rounds += 1
                if not result.tool_calls or not specs or final:
                    text = result.content.strip()
                    if not text and result.finish_reason == "content_filter":
                        raise LLMFiltered("the provider's content filter withheld the reply")
                    if not text:
                        raise LLMBadResponse(f"empty reply (finish_reason={result.finish_reason or '?'})")
                    return AgentReply(
                        text + ending_note(user_text, result.finish_reason, zh=zh), True, llm_ms, rounds, tuple(used), forgot=forgot,
                        model=result.model, candidate=result.candidate,
                        images_unseen=pictures and not has_images(msgs),
                    )
                msgs.append(result.assistant_message())
                for call in result.tool_calls:
                    used.append(call.name)
                    if on_act is not None and call.name in by_name and by_name[call.name].acts:
                        on_act()
                    out, ok = await self._run_tool(call, by_name, ctx)
                    forgot = forgot or (ok and bool(by_name[call.name].metadata.get("forgets")))
                    msgs.append({"role": "tool", "tool_call_id": call.id, "content": out})
        except asyncio.CancelledError:
            raise
        except LLMError as exc:
            # The provider's words, scrubbed of every configured key and cut short.
            log.warning("LLM call failed", error=provider_text(str(exc)), error_type=type(exc).__name__,
                        chat_id=ctx.chat_id)
            return AgentReply(
                apology(user_text, exc, zh=zh), False, llm_ms, rounds, tuple(used), error=type(exc).__name__, forgot=forgot,
                images_unseen=pictures and not has_images(msgs),
            )
        raise AssertionError("unreachable: the final round always returns")  # pragma: no cover

    async def _complete(
        self,
        msgs: list[Mapping[str, Any]],
        specs: list[dict[str, Any]],
        *,
        final: bool,
        on_text: Callable[[str], None] | None = None,
    ) -> ChatResult:
        """One completion. A refusal that the request can do without is
        answered by asking again, once each: without the pictures (a
        model that cannot read them; ``msgs`` is changed in place, so the
        turn's later rounds do not send them again) and without tools; and
        a request over the model's context with less in it, as long as
        there is less to send (``smaller_for_context``)."""
        while True:
            extra = {"tool_choice": "none"} if final and specs else None
            try:
                return await self.llm.chat(
                    msgs, tools=specs, max_tokens=self.max_tokens, temperature=self.temperature, extra=extra,
                    on_text=on_text,
                )
            except LLMBadRequest as exc:
                if exc.context_too_long and (smaller := smaller_for_context(msgs)) is not None:
                    # A small model and a long file (or a long history): the
                    # turn is answered from less rather than not at all.
                    log.warning("request over the model's context; asking again with less", status=exc.status,
                                messages=len(msgs))
                    msgs[:] = smaller
                    continue
                if exc.refuses_images and has_images(msgs):
                    # The model (every candidate up) cannot see: it answers the
                    # words, told that a picture came it could not read. The
                    # client remembers the refusal and logs it once.
                    msgs[:] = without_images(msgs)
                    continue
                if not (specs and exc.mentions_tools):
                    raise
                log.warning("provider rejected tools; continuing without function calling", status=exc.status)
                self.tools_supported = False
                specs.clear()

    async def _run_tool(self, call: ToolCall, by_name: Mapping[str, Tool], ctx: ToolContext) -> tuple[str, bool]:
        """The tool's result for the model, and whether the tool ran without error."""
        tool = by_name.get(call.name)
        if tool is None:
            return f"error: there is no tool named {call.name!r}", False
        try:
            args = call.parsed_arguments()
        except (ValueError, json.JSONDecodeError) as exc:
            return f"error: arguments are not a JSON object ({exc})", False
        try:
            out = await tool.handler(args, ctx)
        except asyncio.CancelledError:
            raise
        except ToolError as exc:
            return f"error: {exc}", False
        except Exception as exc:  # a broken tool is reported to the model, not to the user as a crash
            # Its text may quote the arguments, the model's retelling of the user's words.
            log.error("tool failed", tool=call.name, **error_fields(exc))
            return "error: the tool failed; answer without it", False
        log.info("tool called", tool=call.name, user=ctx.user, chat_id=ctx.chat_id)
        return (out if len(out) <= _TOOL_RESULT_MAX_CHARS else out[:_TOOL_RESULT_MAX_CHARS] + "…"), True
