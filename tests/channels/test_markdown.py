"""Markdown to Telegram HTML (channels/markdown.py). Every rendering is
also read by the fake Telegram server's parser, which refuses what
Telegram refuses, so "accepted" here means accepted there."""

from __future__ import annotations

import html

from hypothesis import given, settings
from hypothesis import strategies as st

from channels.markdown import feishu_md, part_openers, might_have_markup, plain_length, telegram_html
from tests.fakes.telegram_server import parse_html


def shown(md: str) -> str:
    """What the chat shows for a reply written as ``md``."""
    return parse_html(telegram_html(md))


def test_emphasis_code_and_links_become_telegram_tags() -> None:
    md = "**Note:** run `pip install x` and read [the docs](https://example.com/a?b=1&c=2), *then* ~~wait~~."
    assert telegram_html(md) == (
        '<b>Note:</b> run <code>pip install x</code> and read '
        '<a href="https://example.com/a?b=1&amp;c=2">the docs</a>, <i>then</i> <s>wait</s>.'
    )
    assert shown(md) == "Note: run pip install x and read the docs, then wait."


def test_what_telegram_has_no_tag_for_becomes_text() -> None:
    md = "# Plan for 周末\n\n1. pack\n2. drive\n   - fuel *first*\n\n- tea\n- 咖啡\n\n---\n\n> quoted **bold**\n> > nested"
    assert shown(md) == "Plan for 周末\n\n1. pack\n2. drive\n   • fuel first\n\n• tea\n• 咖啡\n\n──────────\n\nquoted bold\nnested"
    assert "<b>Plan for 周末</b>" in telegram_html(md)
    assert telegram_html(md).count("<blockquote>") == 1  # Telegram does not nest quotes


def test_blocks_written_without_a_blank_line_between_them_stay_that_close() -> None:
    """A list under its heading line ("Newest:" then "- ..."), a quote or a
    code block right under a line: no blank line appears that was not written."""
    assert shown("Newest:\n- tea\n- 咖啡\n\nDone.") == "Newest:\n• tea\n• 咖啡\n\nDone."
    assert shown("# Plan\nPack *light*.\n> quoted\n\nBye.") == "Plan\nPack light.\nquoted\n\nBye."
    assert telegram_html("Run:\n```\nls\n```\nthen wait.") == "Run:\n<pre>ls</pre>\nthen wait."
    assert shown("Newest:\n\n- tea") == "Newest:\n\n• tea"  # a blank line written stays


def test_code_blocks_keep_their_text_and_language() -> None:
    md = "Try:\n\n```python\nif a < b and c > d:\n    print('&')\n```"
    assert telegram_html(md) == (
        "Try:\n\n<pre><code class=\"language-python\">if a &lt; b and c &gt; d:\n    print('&amp;')</code></pre>"
    )
    assert shown("```\nno **bold** in code\n```") == "no **bold** in code"


def test_a_table_is_a_monospaced_block_with_aligned_columns() -> None:
    md = "| item | 数量 |\n|---|---|\n| apple | 3 |\n| 香蕉 | 10 |"
    assert shown(md) == "item  | 数量\n------+-----\napple | 3\n香蕉  | 10"


def test_prose_that_only_looks_like_markdown_stays_as_written() -> None:
    for text in ("snake_case_name stays", "2 * 3 * 4 = 24", "**unclosed bold", "a < b & c > d", "    indented prose"):
        assert shown(text) == text.strip()
    # Raw HTML in a reply is text, and a link may not run a script.
    assert shown("<b>hi</b> [x](javascript:alert(1))") == "<b>hi</b> [x](javascript:alert(1))"


def test_a_part_that_begins_inside_a_code_block_renders_as_code() -> None:
    parts = ["Here:\n```sql\nSELECT 1;", "SELECT 2;\n```\nDone.", "~~~\nx"]
    assert part_openers(parts) == ["", "```sql", ""]
    assert telegram_html(parts[1], opener="```sql") == (
        '<pre><code class="language-sql">SELECT 2;</code></pre>\nDone.'  # as written: no blank line
    )
    assert part_openers(["````\n```\nstill code", "end\n````", "x"]) == ["", "````", ""]


def test_a_part_that_begins_inside_a_table_carries_its_header() -> None:
    head = "| name | qty |\n|---|--:|"
    parts = [f"Stock:\n\n{head}\n| pen | 3 |", "| ink | 12 |\n| cap | 1 |\n\nThat is all.", "| not | a table |"]
    assert part_openers(parts) == ["", head, ""]  # the table ended before the third part
    assert telegram_html(parts[1], opener=head) == "<pre>name | qty\n-----+----\nink  | 12\ncap  | 1</pre>\n\nThat is all."
    # A table inside a code block is code; a pipe-less line ends a table.
    assert part_openers(["```\n| a | b |\n|---|---|\n| 1 | 2 |", "| 3 | 4 |\n```"]) == ["", "```"]
    assert part_openers([f"{head}\n| pen | 3 |\nprose", "| x | y |"]) == ["", ""]
    assert part_openers([f"{head}\n| pen | 3 |", "prose after"]) == ["", ""]


def test_plain_length_counts_what_telegram_counts() -> None:
    assert plain_length("<b>a&amp;b</b> 😀") == 6  # "a&b 😀": the emoji is two UTF-16 units


_PIECES = st.sampled_from([
    "*", "**", "_", "__", "~~", "`", "```", "\n", "\n\n", "> ", "- ", "1. ", "# ", "[", "]", "(", ")",
    "https://x.io/?a=1&b=2", "<", ">", "&", "&amp;", "|", "---", " ", "word", "中文", "😀", "\\", "![a](b)", "=", "+ ", "1) ", "-",
])


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=40).map("".join))
def test_any_reply_renders_to_html_telegram_accepts(md: str) -> None:
    rendered = telegram_html(md)
    parse_html(rendered)  # raises on anything Telegram would refuse
    # No blow-up: the send path falls back to the source past 4096, but that should be rare.
    assert plain_length(rendered) <= 2 * len(md) + 10


def test_feishu_gets_its_own_markdown_with_headings_made_bold() -> None:
    assert feishu_md("plain words, a < b") is None  # a text message, not a post
    md = "# Title\n\n```bash\n# a comment, not a heading\n```\n### Next ###\n- item"
    assert feishu_md(md) == "**Title**\n\n```bash\n# a comment, not a heading\n```\n**Next**\n- item"
    assert feishu_md("rest of it\n```", opener="```py") == "```py\nrest of it\n```"


def test_an_indented_rule_or_list_item_is_not_taken_for_plain_text() -> None:
    # Indented code is off, so four spaces do not make these code: they
    # render as a rule and a list item (hypothesis found "    ---").
    for md in ("    ---", "\t---", "     - item", "        1. x", "    ==="):
        assert might_have_markup(md), md


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=40).map("".join))
def test_text_the_quick_check_lets_through_as_plain_shows_its_words(md: str) -> None:
    # The shortcut may only skip texts that Telegram would show as written
    # (up to the whitespace a paragraph trims).
    if not might_have_markup(md):
        assert " ".join(shown(md).split()) == " ".join(html.unescape(md).split())


def test_a_table_on_feishu_is_a_code_block_of_aligned_columns() -> None:
    md = "Prices:\n\n| item | 数量 |\n|---|---|\n| **apple** | 3 |\n| 香蕉 | 10 |\n\n# Total"
    assert feishu_md(md) == (
        "Prices:\n\n```\nitem  | 数量\n------+-----\napple | 3\n香蕉  | 10\n```\n\n**Total**"
    )  # the same columns as Telegram's monospaced block
    # In a list item or a quote it keeps the line's prefix; a cell's
    # backticks cannot close the block early.
    nested = "- costs\n\n  | a | b |\n  |---|---|\n  | ```x | 2 |\n\n> | q |\n> |---|\n> | 1 |"
    assert feishu_md(nested) == (
        "- costs\n\n  ````\n  a    | b\n  -----+--\n  ```x | 2\n  ````\n\n> ```\n> q\n> -\n> 1\n> ```"
    )
    # Inside a code block (a part continuing one) pipes are code, left alone.
    assert feishu_md("| a |\n|---|\n| 1 |", opener="```") == "```\n| a |\n|---|\n| 1 |"
