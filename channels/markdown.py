"""The model writes Markdown; chat apps show it raw ("**Note:**", "```").

:func:`telegram_html` renders a reply in the HTML subset Telegram's
``parse_mode=HTML`` accepts: bold, italic, strikethrough, inline code,
``<pre>`` blocks (with their language), links and blockquotes. What
Telegram has no markup for becomes text: headings bold, list items with
"•" or their number, a table a monospaced block, a rule a line. Blocks
are spaced as written: a blank line between two only where the source has
one ("Newest:" and the list right under it stay together).

Parsing is markdown-it-py's CommonMark (with GFM tables and
strikethrough), so ``snake_case``, "2 * 3" and an unclosed "**" stay
text, as they do in any Markdown viewer. Raw HTML in a reply is text, not
markup, and indented code is off: a model indents prose too, and fences
its code.

:func:`feishu_md` prepares a reply for the ``md`` element of a Feishu
``post``, which renders bold, italic, strikethrough, links, lists, code
blocks and quotes itself, but not headings (made bold here) nor tables
(made a code block of aligned columns here, as Telegram's monospaced block).

A reply too long for one message is split on its source (channels cut by
length first); :func:`part_openers` says which parts begin inside a code
block or a table, so each part renders as code, or as a table with its
header, on its own.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Sequence

from markdown_it import MarkdownIt
from markdown_it.token import Token

__all__ = ["part_openers", "feishu_md", "has_markup", "might_have_markup", "plain_length", "telegram_html"]

_MD = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"]).disable("code")
_LINK_SCHEMES = ("http://", "https://", "tg://", "mailto:")
_INLINE_TAGS = {"strong": "b", "em": "i", "s": "s"}
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_TAG = re.compile(r"<[^>]*>")
# Setext underlines and rules: "=" or "-" runs (spaced too: "- - -") alone on a line.
# Indented any depth: with indented code off (_MD), "    ---" is still a rule.
_MAYBE_MARKUP = re.compile(
    r"[*_`~#>\[|\\]|^[ \t]*(?:[-+]|\d{1,9}[.)])(?:[ \t]|$)|^[ \t]*(?:=+|(?:-[ \t]*)+)[ \t]*$", re.M
)
_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_RULE = "──────────"


def telegram_html(text: str, *, opener: str = "") -> str:
    """``text`` (Markdown) as Telegram HTML. ``opener``: a fence line
    ("```python") the text continues from (see :func:`part_openers`)."""
    source = f"{opener}\n{text}" if opener else text
    tokens = _MD.parse(source)
    lines = source.split("\n")
    blocks, _ = _blocks(tokens, 0, None, quoted=False, source=lines)
    return _joined(blocks, lines)


def might_have_markup(text: str) -> bool:
    """False when ``text`` holds nothing Markdown could turn into markup,
    so it goes as written without being parsed (most chat replies): no
    emphasis, code, heading, quote, link, table or escape character, no
    list item or heading underline at the start of a line."""
    return _MAYBE_MARKUP.search(text) is not None


def has_markup(text: str) -> bool:
    """Whether ``text`` renders as anything but its own words."""
    return might_have_markup(text) and telegram_html(text) != _esc(text)


def feishu_md(text: str, *, opener: str = "") -> str | None:
    """``text`` for a Feishu ``md`` element, or None when it has no markup
    (it then goes as a plain text message). ``opener`` as for :func:`telegram_html`."""
    source = f"{opener}\n{text}" if opener else text
    if not has_markup(source):
        return None
    lines = source.split("\n")
    tables = _feishu_tables(lines)
    out: list[str] = []
    fence = ""
    n = 0
    while n < len(lines):
        if n in tables:  # never inside a code block: markdown-it found it as a table
            end, block = tables[n]
            out.extend(block)
            n = end
            continue
        line = lines[n]
        n += 1
        m = _FENCE.match(line)
        marker, rest = (m.group(1), m.group(2)) if m is not None else ("", "")
        if marker and not fence and not (marker[0] == "`" and "`" in rest):
            fence = marker
        elif marker and fence and marker[0] == fence[0] and len(marker) >= len(fence) and not rest.strip():
            fence = ""
        elif not fence and (h := _HEADING.match(line)) is not None:
            line = f"**{h.group(1).strip()}**"
        out.append(line)
    return "\n".join(out)


def _feishu_tables(lines: list[str]) -> dict[int, tuple[int, list[str]]]:
    """The tables of ``lines`` (a Markdown source), by first line: where
    each ends and the code block of aligned columns it becomes (Feishu's
    ``md`` shows a table's pipes raw). A table in a list item or a quote
    keeps its lines' prefix; one whose lines do not share it stays as is."""
    tokens = _MD.parse("\n".join(lines))
    found: dict[int, tuple[int, list[str]]] = {}
    for i, t in enumerate(tokens):
        if t.type != "table_open" or t.map is None:
            continue
        start, end = t.map
        first = lines[start]
        prefix = first[: len(first) - len(first.lstrip(" \t>"))]  # a list item's indent, a quote's "> "
        if not all(line.startswith(prefix) for line in lines[start:end]):
            continue
        body = _table_text(_table_rows(tokens, i)[0])
        run = max((len(r) for r in re.findall(r"`+", body)), default=0)
        fence = "`" * max(3, run + 1)  # longer than any backtick run in a cell
        found[start] = (end, [prefix + ln if ln else prefix.rstrip() for ln in [fence, *body.split("\n"), fence]])
    return found


def plain_length(rendered: str) -> int:
    """What Telegram counts of a rendered message: its text, in UTF-16
    units, without tags and with entities read."""
    return len(html.unescape(_TAG.sub("", rendered)).encode("utf-16-le", "surrogatepass")) // 2


def part_openers(parts: Sequence[str]) -> list[str]:
    """For each part of a split reply, what it continues: the fence line
    of the code block it begins inside of ("```python"), or the header and
    delimiter rows of the table it begins inside of (so its rows render as
    a table with their column names, not as raw pipes); "" for neither."""
    out: list[str] = []
    open_line, open_marker, table = "", "", ""
    for part in parts:
        lines = part.split("\n")
        first = lines[0]
        out.append(open_line or (table if table and "|" in first and first.strip() else ""))
        if not open_line and table and not ("|" in first and first.strip()):
            table = ""
        for n, line in enumerate(lines):
            m = _FENCE.match(line)
            if m is not None:
                marker, rest = m.group(1), m.group(2)
                if not open_line:
                    if marker[0] == "`" and "`" in rest:
                        continue  # "```a` b```": inline code, not a fence
                    open_line, open_marker, table = line.strip(), marker, ""
                elif marker[0] == open_marker[0] and len(marker) >= len(open_marker) and not rest.strip():
                    open_line, open_marker = "", ""
                continue
            if open_line:
                continue
            if "|" in line and n + 1 < len(lines) and _TABLE_DELIMITER.match(lines[n + 1]):
                table = f"{line}\n{lines[n + 1]}"  # a new table's header
            elif table and not ("|" in line and line.strip()):
                table = ""  # a blank or pipe-less line ends a table
    return out


# A table's delimiter row: "---|:--:" or "| --- | --- |".
_TABLE_DELIMITER = re.compile(r"^ {0,3}\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")


def _esc(text: str) -> str:
    return html.escape(text, quote=False)


# A rendered block and the source lines it came from ([first, after last]).
_Block = tuple[str, list[int] | None]
_BLANK = re.compile(r"[\s>]*$")  # a blank line, inside a quote too


def _joined(blocks: list[_Block], source: list[str]) -> str:
    """The blocks, a blank line between two only where the source had one
    ("Newest:" with its list right under it stays so). A list's lines take
    in the blank one after it, so the line before the next block tells."""
    out: list[str] = []
    for text, lines in blocks:
        if not text:
            continue
        if out:
            tight = lines is not None and lines[0] > 0 and _BLANK.match(source[lines[0] - 1]) is None
            out.append("\n" if tight else "\n\n")
        out.append(text)
    return "".join(out)


def _blocks(tokens: list[Token], i: int, close: str | None, *, quoted: bool,
            source: list[str]) -> tuple[list[_Block], int]:
    """Render block tokens from ``i`` up to the ``close`` token (the end
    when None); returns the rendered blocks and the index after ``close``."""
    out: list[_Block] = []
    while i < len(tokens):
        t = tokens[i]
        if close is not None and t.type == close:
            return out, i + 1
        if t.type in ("paragraph_open", "heading_open"):
            inline = _inline(tokens[i + 1].children or [])
            out.append((f"<b>{inline}</b>" if t.type == "heading_open" and inline else inline, t.map))
            i += 3
        elif t.type == "fence":
            out.append((_pre(t.content, t.info), t.map))
            i += 1
        elif t.type == "hr":
            out.append((_RULE, t.map))
            i += 1
        elif t.type == "blockquote_open":
            lines = t.map
            inner, i = _blocks(tokens, i + 1, "blockquote_close", quoted=True, source=source)
            body = _joined(inner, source)
            # Telegram does not nest quotes: an inner one joins the outer.
            out.append((body if quoted else f"<blockquote>{body}</blockquote>", lines))
        elif t.type in ("bullet_list_open", "ordered_list_open"):
            lines = t.map
            rendered, i = _list(tokens, i, quoted=quoted, source=source)
            out.append((rendered, lines))
        elif t.type == "table_open":
            lines = t.map
            rendered, i = _table(tokens, i)
            out.append((rendered, lines))
        else:  # html_block is off; anything new in a later markdown-it is skipped, not shown raw
            i += 1
    return out, i


def _list(tokens: list[Token], i: int, *, quoted: bool, source: list[str]) -> tuple[str, int]:
    opening = tokens[i]
    ordered = opening.type == "ordered_list_open"
    close = "ordered_list_close" if ordered else "bullet_list_close"
    number = int(opening.attrs.get("start", 1) or 1) if ordered else 0
    items: list[str] = []
    i += 1
    while tokens[i].type != close:
        assert tokens[i].type == "list_item_open"
        inner, i = _blocks(tokens, i + 1, "list_item_close", quoted=quoted, source=source)
        marker = f"{number}. " if ordered else "• "
        number += 1
        pad = " " * len(marker)
        lines = "\n".join(b for b, _ in inner if b).split("\n")
        items.append(marker + "\n".join([lines[0], *(pad + ln if ln else ln for ln in lines[1:])]))
    return "\n".join(items), i + 1


def _table(tokens: list[Token], i: int) -> tuple[str, int]:
    """A table as a monospaced block, columns padded to their widest cell."""
    rows, i = _table_rows(tokens, i)
    return (f"<pre>{_esc(_table_text(rows))}</pre>" if rows else ""), i


def _table_rows(tokens: list[Token], i: int) -> tuple[list[list[str]], int]:
    """The cells' words of the table opening at ``tokens[i]``, row by row,
    and the index after its close."""
    rows: list[list[str]] = []
    i += 1
    while tokens[i].type != "table_close":
        t = tokens[i]
        if t.type == "tr_open":
            rows.append([])
        elif t.type == "inline" and rows:
            rows[-1].append(_plain(t.children or []))
        i += 1
    return rows, i + 1


def _table_text(rows: list[list[str]]) -> str:
    """``rows`` (the first one the header) as lines of columns padded to
    their widest cell (a CJK character counts two), header underlined."""
    if not rows:
        return ""
    n = max(len(r) for r in rows)
    widths = [max(_width(r[c]) if c < len(r) else 0 for r in rows) for c in range(n)]

    def line(r: list[str]) -> str:
        return " | ".join(
            (r[c] if c < len(r) else "") + " " * (widths[c] - _width(r[c] if c < len(r) else "")) for c in range(n)
        ).rstrip()

    return "\n".join([line(rows[0]), "-+-".join("-" * w for w in widths), *(line(r) for r in rows[1:])])


def _width(text: str) -> int:
    # A CJK character takes two columns in a monospaced font.
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _pre(code: str, info: str) -> str:
    code = code[:-1] if code.endswith("\n") else code
    if not code.strip():
        return ""
    lang = info.split()[0] if info.strip() else ""
    if lang and re.fullmatch(r"[\w+#.-]{1,32}", lang):
        return f'<pre><code class="language-{_esc(lang)}">{_esc(code)}</code></pre>'
    return f"<pre>{_esc(code)}</pre>"


def _inline(children: list[Token]) -> str:
    out: list[str] = []
    links: list[bool] = []  # per open link: whether it became an <a>
    for t in children:
        kind = t.type
        if kind == "text":
            out.append(_esc(t.content))
        elif kind in ("softbreak", "hardbreak"):
            out.append("\n")
        elif kind == "code_inline":
            out.append(f"<code>{_esc(t.content)}</code>")
        elif kind.endswith("_open") and kind[:-5] in _INLINE_TAGS:
            out.append(f"<{_INLINE_TAGS[kind[:-5]]}>")
        elif kind.endswith("_close") and kind[:-6] in _INLINE_TAGS:
            out.append(f"</{_INLINE_TAGS[kind[:-6]]}>")
        elif kind == "link_open":
            href = str(t.attrs.get("href") or "")
            ok = href.lower().startswith(_LINK_SCHEMES)
            links.append(ok)
            if ok:
                out.append(f'<a href="{html.escape(href, quote=True)}">')
        elif kind == "link_close":
            if links and links.pop():
                out.append("</a>")
        elif kind == "image":
            src = str(t.attrs.get("src") or "")
            alt = _esc(t.content or src)
            ok = src.lower().startswith(_LINK_SCHEMES)
            out.append(f'<a href="{html.escape(src, quote=True)}">{alt}</a>' if ok else alt)
        else:  # html_inline is off
            out.append(_esc(t.content))
    return "".join(out)


def _plain(children: list[Token]) -> str:
    """An inline's words without markup (a table cell in a monospaced block)."""
    out: list[str] = []
    for t in children:
        if t.type in ("text", "code_inline"):
            out.append(t.content)
        elif t.type in ("softbreak", "hardbreak"):
            out.append(" ")
        elif t.type == "image":
            out.append(t.content)
    return "".join(out)
