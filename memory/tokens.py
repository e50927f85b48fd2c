"""Token estimates without a tokenizer model: good enough for budgets.

Han/kana/hangul characters are about one token each; other text is about
four characters a token.
"""

from __future__ import annotations

import re

__all__ = ["WIDE_CHARS", "estimate_tokens", "prefix_within"]

# Kana, CJK, hangul: a token each (the character class, for others to reuse).
WIDE_CHARS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_WIDE = re.compile(f"[{WIDE_CHARS}]")
_NOT_WIDE_RUNS = re.compile(f"[^{WIDE_CHARS}]+")


def estimate_tokens(text: str) -> int:
    if not text:
        return 0
    wide = len(_WIDE.findall(text))
    return wide + (len(text) - wide + 3) // 4


def _long_estimate(text: str) -> int:
    # The same count for a long text, without a string per match (a
    # Chinese file is mostly matches).
    wide = len(_NOT_WIDE_RUNS.sub("", text))
    return wide + (len(text) - wide + 3) // 4 if text else 0


def prefix_within(text: str, max_tokens: int) -> str:
    """The longest start of ``text`` whose estimate is within ``max_tokens``,
    ended just after a line break when one is in its last tenth (a file
    read in parts, each whole lines)."""
    if _long_estimate(text) <= max_tokens:
        return text
    # A character is at least a quarter of a token: no longer prefix can fit.
    lo, hi = 0, min(len(text), 4 * max_tokens + 4)
    while lo < hi:  # the estimate grows with the prefix
        mid = (lo + hi + 1) // 2
        if _long_estimate(text[:mid]) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    line = text.rfind("\n", 0, lo)
    return text[: line + 1] if line >= lo * 0.9 else text[:lo]
