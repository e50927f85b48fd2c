from __future__ import annotations

from memory.mdfacts import facts, render


def texts(md: str) -> list[tuple[str, str]]:
    return [(f.kind, f.text) for f in facts(md)]


def test_one_fact_per_line_as_the_file_store_writes() -> None:
    md = "# Long-term memory\n\n- Prefers answers in Chinese\n- 住在杭州\n1. Numbered\nplain line\n"
    assert texts(md) == [
        ("item", "Prefers answers in Chinese"),
        ("item", "住在杭州"),
        ("item", "Numbered"),
        ("line", "plain line"),
    ]


def test_a_wrapped_item_is_one_fact_with_its_span() -> None:
    [f] = facts("- Works on atlas,\n  which ships\n  in May\n")
    assert (f.text, f.first, f.last) == ("Works on atlas, which ships in May", 1, 3)
    assert f.lines == ("Works on atlas,", "which ships", "in May")


def test_a_nested_list_under_a_label_carries_the_label() -> None:
    md = "- 项目：\n  - atlas 账单重写\n  - hermes\n- Pets:\n  - Miso, a cat\n- Standalone\n  - detail\n"
    assert texts(md) == [
        ("item", "项目： atlas 账单重写"),
        ("item", "项目： hermes"),
        ("item", "Pets: Miso, a cat"),
        ("item", "Standalone"),  # not a label: its child is a fact of its own
        ("item", "detail"),
    ]


def test_a_code_block_is_one_fact_with_its_label() -> None:
    md = "## Server\n~~~\nssh atlas\n~~~\nDeploy:\n  ```sh\n  cd /srv\n    make\n  ```\n```\n\n```\n"
    [server, deploy] = facts(md)
    assert (server.kind, server.text, server.first, server.last) == ("code", "Server:\n~~~\nssh atlas\n~~~", 2, 4)
    # The introducing line belongs to the fact (erased with it); indentation kept relative.
    assert (deploy.text, deploy.first, deploy.last) == ("Deploy:\n```sh\ncd /srv\n  make\n```", 5, 9)


def test_an_unclosed_fence_runs_to_the_end() -> None:
    assert texts("```\nline one\nline two") == [("code", "```\nline one\nline two\n```")]


def test_quotes_tables_comments_and_rules() -> None:
    md = (
        "> Ship small,\n>> ship often.\n\n<!-- a\nmulti-line\ncomment -->\n---\n"
        "| tool | version |\n| :--- | ---: |\n| python | 3.12 |\n| node | |\n| a \\| b | x |\n"
    )
    assert texts(md) == [
        ("quote", "Ship small, ship often."),
        ("table", "tool: python; version: 3.12"),
        ("table", "tool: node"),
        ("table", "tool: a \\| b; version: x"),
    ]


def test_a_pipe_line_without_a_rule_is_a_plain_fact() -> None:
    assert texts("| not a table\n") == [("line", "| not a table")]


def test_render_reads_back_as_the_same_fact() -> None:
    for md in ("- Works on atlas,\n  which ships\n", "Deploy:\n```sh\nmake\n```\n", "| a | b |\n|---|---|\n| 1 | 2 |\n"):
        for f in facts(md):
            assert [g.text for g in facts(render(f.text))] == [f.text]


def test_hostile_text_never_raises() -> None:
    for md in ("```", "<!--", "|\n|-|", "-", ">", "  - \n    ```\n", "\x00\ud800# x", "|---|\n|---|"):
        facts(md)


def test_a_trailing_date_comment_dates_the_fact_and_is_not_part_of_it() -> None:
    """The file store dates each line with ``<!-- YYYY-MM-DD -->`` at its
    end: a comment Markdown shows as nothing and a reader can skip, edit
    or delete. Only a real date there counts; a line without one has none."""
    md = (
        "- Prefers tea <!-- 2026-03-01 -->\n"
        "- Works on atlas,\n  due in May <!--2026-02-10-->\n"
        "- No date here\n"
        "- Not a date <!-- 2026-02-30 -->\n"
        "<!-- 2026-03-02 -->\n"
        "```html\n<b>x</b> <!-- 2026-01-01 -->\n```\n"
    )
    assert [(f.text, f.day) for f in facts(md)] == [
        ("Prefers tea", "2026-03-01"),
        ("Works on atlas, due in May", "2026-02-10"),
        ("No date here", ""),
        ("Not a date <!-- 2026-02-30 -->", ""),
        ("```html\n<b>x</b> <!-- 2026-01-01 -->\n```", ""),  # code is kept as written
    ]
    assert facts(md)[0].lines == ("Prefers tea",)  # as an import of the undated line saw it


def test_render_with_a_day_reads_back_with_it() -> None:
    assert render("Prefers tea", "2026-03-01") == "- Prefers tea <!-- 2026-03-01 -->"
    assert [(f.text, f.day) for f in facts(render("Prefers tea", "2026-03-01"))] == [("Prefers tea", "2026-03-01")]
    assert render("Prefers tea") == "- Prefers tea"


def test_a_terms_comment_gives_the_fact_search_terms_not_words() -> None:
    md = (
        "- We picked Postgres over MySQL <!-- terms: 数据库, database、选型 --> <!-- 2026-03-01 -->\n"
        "- 住在杭州 <!-- 2026-03-02 --> <!--terms:Hangzhou-->\n"
        "- Plain fact\n"
    )
    got = [(f.text, f.day, f.terms) for f in facts(md)]
    assert got == [
        ("We picked Postgres over MySQL", "2026-03-01", ("数据库", "database", "选型")),
        ("住在杭州", "2026-03-02", ("Hangzhou",)),
        ("Plain fact", "", ()),
    ]
    # A wrapped item's terms may end any of its lines; a code block keeps its text as written.
    [item, code] = facts("- Works on atlas,\n  which ships <!-- terms: 项目 -->\n```\nx <!-- terms: y -->\n```\n")
    assert (item.text, item.terms) == ("Works on atlas, which ships", ("项目",))
    assert (code.text, code.terms) == ("```\nx <!-- terms: y -->\n```", ())


def test_render_with_terms_reads_back_with_them() -> None:
    line = render("We picked Postgres", "2026-03-01", ("数据库", "database"))
    assert line == "- We picked Postgres <!-- terms: 数据库, database --> <!-- 2026-03-01 -->"
    [f] = facts(line)
    assert (f.text, f.day, f.terms) == ("We picked Postgres", "2026-03-01", ("数据库", "database"))
    # Terms that hold a separator or would end the comment are written as they are read back.
    odd = ("a, b", "c-->d", "<!--e", "ok")
    [g] = facts(render("Fact", "", odd))
    assert (g.text, g.terms) == ("Fact", ("a", "b", "ok"))
    assert facts(render("Fact", "", ())) == facts("- Fact")


def test_an_unclosed_comment_is_found_by_its_line() -> None:
    """What hides the lines after it as Markdown renders it: a ``<!--``
    opening a line and never closed below, or one after a line's words not
    closed in its paragraph (the file store writes its comments on one line); closed
    ones, several on a line, and a code block's text are fine."""
    from memory.mdfacts import unclosed_comment

    assert unclosed_comment("- a\n<!-- a note\n- b\n- c\n") == 2
    assert unclosed_comment("- a\n<!-- a note\n- b -->\n- c\n") == 0
    assert unclosed_comment("- a <!-- terms: db, 数据库\n- b <!-- 2026-01-02 -->\n") == 1
    assert unclosed_comment("- a <!-- terms: db --> <!-- 2026-01-02 -->\n") == 0
    assert unclosed_comment("<!-- a\nb --> c <!-- d\n") == 2
    assert unclosed_comment("```html\n<!-- in code\n```\n- a\n") == 0
    assert unclosed_comment("<!---->\n- a\n") == 0


def test_a_comment_after_a_lines_words_closed_on_a_later_line_is_closed() -> None:
    """``- fact <!-- a note`` whose ``-->`` comes on a later line of the same
    paragraph is a comment, as Markdown renders it: not unclosed (the save
    was skipped for it), and its lines are the fact's, not facts of their
    own; a terms or date comment so written is read as on one line. A
    blank line, list item, quote, heading or fence before the ``-->`` ends
    the paragraph: still unclosed."""
    from memory.mdfacts import unclosed_comment

    wrapped = "- Meets Ana on Fridays <!-- ask her\nabout the garden -->\nPlays chess <!-- since\n2019 -->\n- Likes tea\n"
    assert unclosed_comment(wrapped) == 0
    assert [(f.text, f.first, f.last) for f in facts(wrapped)] == [
        ("Meets Ana on Fridays <!-- ask her about the garden -->", 1, 2),
        ("Plays chess <!-- since 2019 -->", 3, 4),
        ("Likes tea", 5, 5),
    ]
    [f, _] = facts("- Uses postgres <!-- terms: 数据库,\ndatabase --> <!-- 2026-01-02 -->\n- Likes tea\n")
    assert (f.text, f.terms, f.day, f.last) == ("Uses postgres", ("数据库", "database"), "2026-01-02", 2)
    assert unclosed_comment("- a <!-- note\n  and more --> <!-- b\nc -->\n- d\n") == 0
    for cut in ("\n\n", "\n- b ", "\n> b ", "\n# b ", "\n```\n"):
        assert unclosed_comment(f"- a <!-- note{cut}-->\n") == 1, cut
