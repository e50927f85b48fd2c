"""Token estimates without a tokenizer model: good enough for budgets.

Han/kana/hangul characters are about one token each; other text is about
four characters a token.
"""

from __future__ import annotations

import re

__all__ = ["WIDE_CHARS", "estimate_tokens"]

# Kana, CJK, hangul: a token each (the character class, for others to reuse).
WIDE_CHARS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_WIDE = re.compile(f"[{WIDE_CHARS}]")


def estimate_tokens(text: str) -> int:
    if not text:
        return 0
    wide = len(_WIDE.findall(text))
    return wide + (len(text) - wide + 3) // 4
