"""Hits -> the memory block injected into the prompt (seed 001 budgets):
at most ``max_hits`` hits, each cut at ``max_chars`` characters, the whole
block within ``token_budget`` tokens, every hit with its source and date."""

from __future__ import annotations

from collections.abc import Sequence

from .tokens import estimate_tokens
from .types import Hit

__all__ = ["format_hits", "truncate"]


def truncate(text: str, max_chars: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= max_chars else text[: max_chars - 1].rstrip() + "…"


def format_hits(
    hits: Sequence[Hit],
    *,
    max_hits: int = 5,
    max_chars: int = 300,
    token_budget: int = 2048,
) -> str:
    """One line per hit: ``- [m12 · 2026-11-20 · telegram chat 42] text``.

    Returns '' for no hits, so nothing is injected."""
    lines: list[str] = []
    used = 0
    for h in hits[:max_hits]:
        line = f"- {h.citation()} {truncate(h.content, max_chars)}"
        cost = estimate_tokens(line)
        if lines and used + cost > token_budget:
            break
        lines.append(line)
        used += cost
    return "\n".join(lines)
