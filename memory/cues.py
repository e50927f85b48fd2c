"""What a fact can be found by besides its words: its partition labels and
the search terms the extraction model gave it (docs/RETRIEVAL.md §6c).

A fact filed under topic ``database`` may never say "database"; an English
fact ("We picked Postgres over MySQL") shares no word with a Chinese
question (数据库我们最后选了什么？). At extraction the model also names a few
words someone would ask about the fact with, in Chinese and English
(``terms``); they are stored apart from the fact (``memories.search_terms``)
and indexed after :data:`CUE_MARK` in its FTS row, where the retriever
counts them at a low weight and only when the fact's own words lack them
(memory/retrieval.py). Never shown as the fact.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from .redact import redact_credentials

__all__ = [
    "CUE_MARK", "MAX_TERMS", "MAX_TERM_CHARS", "clean_terms", "cue_text", "join_terms", "parse_terms", "safe_terms",
    "split_terms",
]

CUE_MARK = "\ue001"
"""The index term after which a fact's FTS row holds its cues: a private-use
character, which no text tokenizes to (memory/mood.py's marks are ``\\ue000``
and a class name) and FTS5's ``unicode61`` keeps as a token."""

MAX_TERMS = 12
"""Search terms kept per fact: the first ones (a model listing everything
would bury the fact's own words)."""
MAX_TERM_CHARS = 40
"""A longer "term" is a sentence, not a search term: dropped, not cut."""

NO_LABEL = frozenset({"", "_global", "_general", "_profile"})
"""Partition labels that name nothing (the defaults)."""

_SPLIT = re.compile(r"[,，、;；\n]+")


def _clean_one(raw: object) -> str:
    if not isinstance(raw, str):
        return ""
    text = unicodedata.normalize("NFKC", raw.encode("utf-8", "ignore").decode("utf-8"))
    # Controls, format marks (bidi overrides) and private-use characters out.
    text = "".join(c for c in text if unicodedata.category(c)[0] != "C")
    return " ".join(text.split())


def clean_terms(raw: object) -> tuple[str, ...]:
    """The model's ``terms`` (a list of strings, or one string of them
    separated by commas or lines) as at most :data:`MAX_TERMS` distinct
    terms of at most :data:`MAX_TERM_CHARS` characters; anything else is
    dropped, never raised on: a fact stands without terms."""
    if isinstance(raw, str):
        raw = _SPLIT.split(raw)
    if not isinstance(raw, list | tuple):
        return ()
    out: dict[str, str] = {}  # casefolded -> first spelling
    for x in raw:
        t = _clean_one(x)
        if t and len(t) <= MAX_TERM_CHARS:
            out.setdefault(t.casefold(), t)
        if len(out) == MAX_TERMS:
            break
    return tuple(out.values())


def safe_terms(raw: object, *, credential: bool = False) -> tuple[str, ...]:
    """The terms a fact is stored with, from any writer (extraction, the
    ``memory_save`` tool, the weekly merge, a hand edit, a file):
    :func:`clean_terms`, less a term that holds a key's or password's
    shape; none for a credential, which is found by its own words only (a
    writer asked never to name a secret may still)."""
    if credential:
        return ()
    return tuple(t for t in clean_terms(raw) if redact_credentials(t, passwords=True) == t)


def parse_terms(text: str) -> tuple[str, ...]:
    """Terms typed by hand (``myclaw memory add --terms``, the memory page),
    separated by commas or lines as :func:`clean_terms` reads them; what it
    would drop without a word is a ``ValueError`` saying why (never the
    term: it may be a secret). ``""`` is none."""
    parts = [t for t in (_clean_one(x) for x in _SPLIT.split(text)) if t]
    if any(len(t) > MAX_TERM_CHARS for t in parts):
        n = max(len(t) for t in parts)
        raise ValueError(f"a search term is {n} characters; at most {MAX_TERM_CHARS} (a word or two, not a sentence)")
    if len({t.casefold() for t in parts}) > MAX_TERMS:
        raise ValueError(f"{len({t.casefold() for t in parts})} search terms; at most {MAX_TERMS}")
    if safe_terms(parts) != clean_terms(parts):
        raise ValueError("a search term has a key's or password's shape; memory keeps no secret in its terms")
    return clean_terms(parts)


def join_terms(terms: Iterable[str]) -> str:
    """As stored (``memories.search_terms``): one a line."""
    return "\n".join(clean_terms(list(terms)))


def split_terms(stored: str) -> tuple[str, ...]:
    return tuple(t for t in stored.split("\n") if t)


def cue_text(project: str, topic: str, terms: Iterable[str]) -> str:
    """The words a fact is also found by: its project's and topic's names
    (the defaults name nothing), then its search terms, one a line."""
    return "\n".join([*(x for x in (project, topic) if x not in NO_LABEL), *terms])
