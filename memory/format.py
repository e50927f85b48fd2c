"""Hits -> the memory block injected into the prompt (seed 001 budgets):
at most ``max_hits`` hits, each cut at ``max_chars`` characters, the whole
block within ``token_budget`` tokens, every hit with its source and date."""

from __future__ import annotations

import re
from collections.abc import Sequence

from .tokens import estimate_tokens
from .types import Hit

__all__ = ["NEIGHBOUR_HEADING", "defuse_tags", "fit_budget", "format_hit", "format_hits", "truncate"]

# Above the neighbours in the prompt's block (English, Chinese).
NEIGHBOUR_HEADING = ("Said next to a match in the same conversation (context, not a match):",
                     "同一对话中紧挨着匹配项说的（上下文，并非匹配）：")

# The tags the prompt marks its blocks with (gateway/prompt.py). A memory
# holds a user's words, shown later, maybe in another chat: one of these in
# it must not end its block or open another (a fake member's turn, a second
# <memories> block after the real one closed).
_PROMPT_TAG = re.compile(r"<(/?)(memories|said|quoted|file|time)\b", re.IGNORECASE)


def defuse_tags(text: str) -> str:
    """``text`` with the prompt's tags broken (``</memories`` -> ``</ memories``,
    ``<said`` -> ``< said``): still readable, no longer markup."""
    return _PROMPT_TAG.sub(r"<\1 \2", text)


def truncate(text: str, max_chars: int) -> str:
    """Whitespace collapsed, cut to ``max_chars`` characters with an ellipsis."""
    text = " ".join(text.split())
    if max_chars <= 0:
        return ""
    return text if len(text) <= max_chars else text[: max_chars - 1].rstrip() + "…"


def format_hit(hit: Hit, max_chars: int = 300, *, zh: bool = False) -> str:
    """``- [m12 · 2026-11-20 · from a chat on Telegram] text`` (the
    citation in Chinese with ``zh``); the fact it replaced, if recalled
    with it, on an indented line of its own, dated and marked as replaced."""
    line = f"- {hit.citation(zh=zh)} {truncate(defuse_tags(hit.content), max_chars)}"
    if hit.replaced is not None:
        day, words = hit.replaced
        old = truncate(defuse_tags(words), max_chars // 2)
        line += (f"\n  （它取代了 {day} 说的，已不再成立：{old}）" if zh
                 else f"\n  (it replaced what was said on {day}, no longer true: {old})")
    if hit.more_days > 0:
        n = hit.more_days
        line += (f"\n  （这段时间另有 {n} 天的聊天未列出，memory_search 可查）" if zh
                 else f"\n  ({n} more day{'s' if n > 1 else ''} of chats in that period not listed here; "
                      "memory_search finds them)")
    return line


def fit_budget(
    hits: Sequence[Hit],
    *,
    max_hits: int = 5,
    max_chars: int = 300,
    token_budget: int = 2048,
    zh: bool = False,
) -> list[Hit]:
    """The leading hits whose formatted lines fit the budget.

    Stops at the first hit that would overflow, so a lower-ranked short hit
    never jumps ahead of a better one. The first hit is always kept (it is
    cut to ``max_chars``, so it cannot be large).
    """
    kept: list[Hit] = []
    used = 0
    for h in hits[:max_hits]:
        cost = estimate_tokens(format_hit(h, max_chars, zh=zh))
        if kept and used + cost > token_budget:
            break
        kept.append(h)
        used += cost
    return kept


def format_hits(
    hits: Sequence[Hit],
    *,
    max_hits: int = 5,
    max_chars: int = 300,
    token_budget: int = 2048,
    zh: bool = False,
) -> str:
    """One line per hit; '' for no hits, so nothing is injected. ``zh``:
    citations in Chinese, for a chat held in Chinese. A neighbour (a turn
    said next to a match, holding none of the words) is listed after the
    matches under a heading that says so, as /memory and memory_search
    list them: the model would take the answer after a matching question
    for a match. The heading rides in the block, in the latest message, not
    in the system prompt: that is the cached prefix of every request, and
    must not change with what a message recalled."""
    heading = NEIGHBOUR_HEADING[1 if zh else 0]
    if any(h.neighbour for h in hits[:max_hits]):
        token_budget -= estimate_tokens(heading)  # paid for within the block's budget
    kept = fit_budget(hits, max_hits=max_hits, max_chars=max_chars, token_budget=token_budget, zh=zh)
    lines = [format_hit(h, max_chars, zh=zh) for h in kept if not h.neighbour]
    near = [format_hit(h, max_chars, zh=zh) for h in kept if h.neighbour]
    return "\n".join([*lines, heading, *near] if near else lines)
