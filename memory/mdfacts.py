"""A hand-written MEMORY.md as facts.

The file store writes one ``- fact`` line per fact, but people edit the file
(and other bots' files are migrated), so it also holds Markdown that a
line-per-fact reading gets wrong: each line of a code block became a fact of
its own ("fi", "}"), a wrapped list item became two half-facts, a quote kept
its ``>``, a table row its pipes, and the lines of a multi-line comment
became facts. Here each Markdown block is read as what it is:

* a list item, with its indented continuation lines, is one fact; a nested
  item under one that ends in a colon ("Projects:") is prefixed with it
  ("Projects: atlas, due in May"), and such a parent alone is no fact;
* a fenced code block (``` or ~~~) is one fact, fence and language kept, with
  the line before it when that introduces it (a heading, or a line ending
  in a colon) as its label; ``kind`` is ``"code"``;
* consecutive quote lines are one fact, without their ``>``;
* a table's rows are facts of "column: value" pairs;
* headings, rules, blank lines and comments (one line or several) are not
  facts;
* any other line is a fact of its own, as before.

Each fact carries the span of lines it came from, so the file store can
erase exactly those lines, and ``lines``, each source line as the old
per-line reading saw it (migration recognises facts it imported that way).

A fact's day: the file store ends each line it writes with
``<!-- YYYY-MM-DD -->``, a comment Markdown renders as nothing, which a
reader can skip, correct or delete. It is not part of the fact (its words,
hash and id are the same with or without it); a fact without one has
``day == ""`` (the file store then dates it by the file's mtime, as before
there were dates). Inside a code block the text is kept as written.

A fact's search terms (memory/cues.py, docs/RETRIEVAL.md §6c): a comment
``<!-- terms: 数据库, database -->`` at the end of a line (before or after
its date), written by the file store for a fact saved with terms and by
hand, and imported with the fact (memory/migrate.py). Not part of the fact
either; a code block has none (its text is kept as written).
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from collections.abc import Iterable
from datetime import date

from .cues import clean_terms

__all__ = ["MdFact", "clean_text", "facts", "line_fact", "render", "split_day", "split_marks", "unclosed_comment"]

_LIST_ITEM = re.compile(r"^(\s*)(?:[-*+]|\d+[.)])\s+(.*)$")
_LIST_MARK = re.compile(r"^(?:[-*+]|\d+[.)])\s+")
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})(.*)$")
_QUOTE = re.compile(r"^\s{0,3}>\s?")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_DAY = re.compile(r"\s*<!--\s*(\d{4}-\d{2}-\d{2})\s*-->\s*$")
_TERMS = re.compile(r"\s*<!--\s*terms\s*[:：]((?:(?!-->).)*)-->\s*$", re.IGNORECASE)


def split_day(line: str) -> tuple[str, str]:
    """``line`` without its trailing ``<!-- YYYY-MM-DD -->`` and that day
    ('' when there is none, or it is no real date: then the line stays whole)."""
    m = _DAY.search(line)
    if m is None:
        return line, ""
    try:
        date.fromisoformat(m.group(1))
    except ValueError:
        return line, ""
    return line[: m.start()], m.group(1)


def split_marks(line: str) -> tuple[str, str, tuple[str, ...]]:
    """``line`` without its trailing date and terms comments (either
    first), that day ('' as :func:`split_day` says) and those terms."""
    terms: tuple[str, ...] = ()
    day = ""
    for _ in range(2):
        m = _TERMS.search(line)
        if m is not None and not terms:
            terms = clean_terms(m.group(1))
            line = line[: m.start()]
        elif not day:
            line, day = split_day(line)
    return line, day, terms


def clean_text(text: str) -> str:
    """What can be written to a UTF-8 file: no lone surrogates, no NUL."""
    # U+FEFF: the byte-order mark an editor on Windows puts first; left in,
    # it hides a heading ("\ufeff# Notes") and the heading becomes a fact.
    return text.encode("utf-8", "ignore").decode("utf-8").replace("\x00", "").replace("\ufeff", "")


def line_fact(line: str) -> str:
    """One line read on its own as a fact: list marker and spacing removed;
    '' for blank lines, headings, rules and fences, which are not facts."""
    s = clean_text(line).strip()
    if not s or s.startswith(("#", "<!--", "```", "~~~")) or set(s) <= set("-*_= ") or set(s) <= set("|-:= "):
        return ""
    return _LIST_MARK.sub("", s).strip()


@dataclass(frozen=True)
class MdFact:
    text: str
    first: int  # 1-based line numbers, inclusive
    last: int
    kind: str = "line"  # "line", "item", "code", "quote", "table"
    lines: tuple[str, ...] = ()  # the span's lines as line_fact reads them
    day: str = ""  # YYYY-MM-DD from a line's trailing date comment, '' if none
    terms: tuple[str, ...] = ()  # from its lines' trailing terms comments (memory/cues.py)


def _cells(s: str) -> list[str]:
    s = s.strip()
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|") and not s.endswith("\\|"):
        s = s[:-1]
    return [c.strip() for c in re.split(r"(?<!\\)\|", s)]


def _colon(s: str) -> bool:
    return s.endswith((":", "："))


def _through_comment(text: str, raw: list[str], end: int, no: int, days: dict[int, str],
                     marks: dict[int, tuple[str, ...]]) -> tuple[str, int]:
    """A fact's ``text`` (its lines up to ``end``, exclusive) with the lines
    through the one closing a comment left open after its words, and the
    new end; as it was when none is open, or none closes it (the save is
    skipped then: :func:`unclosed_comment`). A date or terms comment so
    closed is read as one on a single line is (into ``days`` and ``marks``
    at line ``no``)."""
    if _open_comment(text) >= 0 and (k := _closing(raw, end - 1)) >= 0:
        text = " ".join([text, *(ln.strip() for ln in raw[end : k + 1])])
        end = k + 1
    if end - no < 1 or "-->" not in text:
        return text, end  # one line: its marks were read from it
    text, day, terms = split_marks(" ".join(text.split()))
    if day:
        days[no] = day
    if terms:
        marks[no] = (*marks.get(no, ()), *terms)
    return text, end


def facts(text: str) -> list[MdFact]:
    """The facts of a MEMORY.md ``text``, in file order."""
    written = clean_text(text).splitlines()  # code blocks are read from these, as written
    raw: list[str] = []
    days: dict[int, str] = {}  # line number -> its date comment
    marks: dict[int, tuple[str, ...]] = {}  # line number -> its terms comment's terms
    for no, ln in enumerate(written, start=1):
        body, day, terms = split_marks(ln)
        raw.append(body)
        if day:
            days[no] = day
        if terms:
            marks[no] = terms
    out: list[MdFact] = []
    drop: set[int] = set()  # list items that turned out to be labels
    n = len(raw)
    i = 0
    # Open list items by indent: (indent, text, index in out).
    stack: list[tuple[int, str, int]] = []
    # What introduces a following code block: a heading's text (index -1) or
    # a line ending in a colon (its index, dropped once used as the label).
    label: tuple[str, int] = ("", -1)

    def olds(a: int, b: int) -> tuple[str, ...]:
        return tuple(f for ln in raw[a - 1 : b] if (f := line_fact(ln)))

    while i < n:
        line = raw[i]
        s = line.strip()
        no = i + 1
        if not s:
            i += 1
            continue
        fence = _FENCE.match(line)
        if fence:
            marker = fence.group(1)
            end = i + 1
            while end < n and not raw[end].strip().startswith(marker[0] * len(marker)):
                end += 1
            body = textwrap.dedent("\n".join(written[i + 1 : end])).strip("\n")
            last = min(end, n - 1) + 1
            if body.strip():
                block = f"{marker}{fence.group(2).strip()}\n{body}\n{marker}"
                name = label[0].strip()
                if name and not _colon(name):
                    name += ":"  # written back, the line still introduces the block
                first = no
                if label[1] >= 0:  # the introducing line is part of this fact
                    drop.add(label[1])
                    first = out[label[1]].first
                out.append(MdFact(f"{name}\n{block}" if name else block, first, last, "code", olds(first, last),
                                  days.get(first, days.get(no, ""))))  # the label's or the fence's
            i = end + 1
            label = ("", -1)
            stack.clear()
            continue
        if s.startswith("<!--"):
            end = i
            while end < n and "-->" not in raw[end]:
                end += 1
            i = end + 1
            continue
        if s.startswith("#"):
            label = (s.lstrip("#").strip(), -1)
            stack.clear()
            i += 1
            continue
        label = ("", -1)
        if set(s) <= set("-*_= "):  # a rule
            stack.clear()
            i += 1
            continue
        if _QUOTE.match(line):
            end = i
            parts: list[str] = []
            while end < n and _QUOTE.match(raw[end]):
                inner = raw[end]
                while _QUOTE.match(inner):  # nested quotes: every ">" goes
                    inner = _QUOTE.sub("", inner, count=1)
                if inner.strip():
                    parts.append(line_fact(inner) or inner.strip())
                end += 1
            if parts:
                out.append(MdFact(" ".join(parts), no, end, "quote", olds(no, end)))
            i = end
            stack.clear()
            continue
        if s.startswith("|") and i + 1 < n and _TABLE_RULE.match(raw[i + 1]):
            head = _cells(s)
            end = i + 2
            while end < n and raw[end].strip().startswith("|"):
                vals = _cells(raw[end])
                pairs = [f"{h}: {v}" if h else v for h, v in zip(head, vals, strict=False) if v]
                if pairs:
                    out.append(MdFact("; ".join(pairs), end + 1, end + 1, "table", olds(end + 1, end + 1)))
                end += 1
            i = end
            stack.clear()
            continue
        item = _LIST_ITEM.match(line)
        if item:
            indent = len(item.group(1).expandtabs(4))
            text_ = item.group(2).strip()
            while stack and stack[-1][0] >= indent:
                stack.pop()
            if stack and _colon(stack[-1][1]):
                drop.add(stack[-1][2])  # a label with items under it is no fact itself
                text_ = f"{stack[-1][1]} {text_}"
            end = i + 1
            # Continuation: indented lines that are neither items nor blocks.
            while (
                end < n
                and raw[end][:1].isspace()
                and raw[end].strip()
                and not _LIST_ITEM.match(raw[end])
                and not _FENCE.match(raw[end])
                and not _QUOTE.match(raw[end])
            ):
                text_ += " " + raw[end].strip()
                end += 1
            text_, end = _through_comment(text_, raw, end, no, days, marks)
            text_ = " ".join(text_.split())
            out.append(MdFact(text_, no, end, "item", olds(no, end)))
            stack.append((indent, text_, len(out) - 1))
            if _colon(text_):
                label = (text_, len(out) - 1)
            i = end
            continue
        fact = line_fact(line)
        if fact and _open_comment(fact) >= 0 and _closing(raw, i) >= 0:
            fact, end = _through_comment(fact, raw, i + 1, no, days, marks)
            fact = " ".join(fact.split())
            out.append(MdFact(fact, no, end, "line", olds(no, end)))
            stack.clear()
            i = end
            continue
        if fact:
            out.append(MdFact(fact, no, no, "line", (fact,)))
            if _colon(fact):
                label = (fact, len(out) - 1)
        stack.clear()
        i += 1
    dated = []
    for k, f in enumerate(out):
        if k in drop:
            continue
        if f.kind != "code":
            day = f.day or next((days[n] for n in range(f.first, f.last + 1) if n in days), "")
            terms = clean_terms([t for n in range(f.first, f.last + 1) for t in marks.get(n, ())])
            f = MdFact(f.text, f.first, f.last, f.kind, f.lines, day, terms)
        dated.append(f)
    return dated


def _open_comment(line: str, start: int = 0) -> int:
    """Where in ``line`` (from ``start``) a ``<!--`` is left open, -1 when none is."""
    while (at := line.find("<!--", start)) >= 0:
        if (close := line.find("-->", at + 4)) < 0:
            return at
        start = close + 3
    return -1


def _closing(lines: list[str], after: int) -> int:
    """The line below ``after`` whose ``-->`` closes a comment opened after
    its words, within the paragraph (as Markdown reads an inline comment: a
    blank line, a fence, list item, quote or heading ends it first); -1
    when none does."""
    for k in range(after + 1, len(lines)):
        s = lines[k].strip()
        if not s or _FENCE.match(lines[k]) or _LIST_ITEM.match(lines[k]) or _QUOTE.match(lines[k]) or s[0] == "#":
            return -1  # what starts a block of its own
        if "-->" in lines[k]:
            return k
    return -1


def unclosed_comment(text: str) -> int:
    """The line (1-based) of a ``<!--`` that hides what follows it, 0 when
    there is none: one opening a line and never closed by a ``-->`` below,
    or one after a line's words not closed by the end of its paragraph
    (the file store writes its comments, dates and terms, on one line; by
    hand, a missing ``-->`` there would make the comment's words the
    fact's, or hide the next lines). One after a line's words closed on a
    later line of its paragraph is a comment, read with the fact
    (:func:`facts`). Code blocks are text as written, their ``<!--`` too."""
    lines = clean_text(text).splitlines()
    fence = ""
    i = 0
    while i < len(lines):
        line, start = lines[i], 0
        if fence:
            if line.strip().startswith(fence):
                fence = ""
            i += 1
            continue
        if m := _FENCE.match(line):
            fence = m.group(1)[0] * len(m.group(1))
            i += 1
            continue
        if line.strip().startswith("<!--"):  # a comment block: closed on this line or one below
            opened, start = i, line.index("<!--") + 4
            while (close := lines[i].find("-->", start)) < 0:
                i, start = i + 1, 0
                if i == len(lines):
                    return opened + 1
            line, start = lines[i], close + 3
        while _open_comment(line, start) >= 0:  # after words: closed on its line or in its paragraph
            if (k := _closing(lines, i)) < 0:
                return i + 1
            i, line = k, lines[k]
            start = line.index("-->") + 3
        i += 1
    return 0


def render(fact: str, day: str = "", terms: Iterable[str] = ()) -> str:
    """``fact`` as MEMORY.md lines that :func:`facts` reads back as it: a
    list item (ending in its ``terms`` comment and ``day``'s date comment
    when given), or a labelled code block as it is (no terms)."""
    if "\n" in fact:
        return fact
    # As they are read back: a term holding a separator is two; none may end the comment.
    kept = clean_terms(", ".join(t for t in terms if "-->" not in t and "<!--" not in t))
    return (f"- {fact}" + (f" <!-- terms: {', '.join(kept)} -->" if kept else "")
            + (f" <!-- {day} -->" if day else ""))
