"""Text -> search terms, the same way for the index and for queries.

FTS5's ``unicode61`` tokenizer makes a whole run of Han characters one token
(``我的部署密码是`` is a single "word"), so a query for ``部署`` finds nothing;
``trigram`` cannot match two-character words at all. We therefore tokenise in
Python and store space-separated terms, which ``unicode61`` then splits on
spaces only:

* Latin/digit words: NFKC, lower-cased.
* Han runs: overlapping character bigrams (a lone character stays a
  unigram). Any 2-character word inside a sentence is then an exact term,
  longer words are phrases of consecutive bigrams, and no dictionary can
  miss a new project name. See docs/RETRIEVAL.md for the measurements.

Query terms are emitted already quoted, so no user text can reach the FTS5
query parser as syntax.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["TOKENIZER_VERSION", "index_terms", "index_text", "normalize", "query_terms"]

TOKENIZER_VERSION = "bigram-1"

# Han (CJK unified + ext A + compatibility), kana and hangul are "CJK runs";
# everything alphanumeric otherwise is a "word".
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af"
_TOKEN_RE = re.compile(rf"([{_CJK}]+)|([^\W_{_CJK}]+(?:['’][^\W_{_CJK}]+)?)", re.UNICODE)


def normalize(text: str) -> str:
    """NFKC + lower case; lone surrogates and NULs are dropped, not raised on."""
    if not text:
        return ""
    text = text.encode("utf-8", "ignore").decode("utf-8").replace("\x00", " ")
    return unicodedata.normalize("NFKC", text).lower()


def _cjk_terms(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def index_terms(text: str) -> list[str]:
    """Terms for the index, in text order."""
    out: list[str] = []
    for m in _TOKEN_RE.finditer(normalize(text)):
        cjk, word = m.group(1), m.group(2)
        if cjk:
            out.extend(_cjk_terms(cjk))
        elif word:
            out.append(word.replace("’", "'"))
    return out


def index_text(text: str) -> str:
    """The string stored in an FTS5 ``text`` column."""
    return " ".join(index_terms(text))


def query_terms(text: str) -> list[list[str]]:
    """Query units: each a list of terms that must appear as a phrase.

    A Han run becomes one phrase of its bigrams; a word is a one-term unit.
    """
    units: list[list[str]] = []
    for m in _TOKEN_RE.finditer(normalize(text)):
        cjk, word = m.group(1), m.group(2)
        if cjk:
            units.append(_cjk_terms(cjk))
        elif word:
            units.append([word.replace("’", "'")])
    return units


def quote(term: str) -> str:
    """An FTS5 string literal; a double quote inside is doubled."""
    return '"' + term.replace('"', '""') + '"'
