"""OpenDocument files (LibreOffice, WPS) read as their Office kin are
(channels/odf.py): a text document's headings, lists, tables and notes; a
spreadsheet's sheets as tables, repeated cells and rows written out within
the caps; a presentation's slides with their notes; told from other zips
by their mimetype part; one behind a password refused as such."""

from __future__ import annotations

import io
import tracemalloc
import zipfile
from datetime import date, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from channels.documents import ENCRYPTED, document_note, read_document
from channels.media import UNSUPPORTED, ImageError
from channels import xmlzip
from channels.office import office_text
from channels.xmlzip import MAX_ROWS
from tests.channels.test_documents import rezip
from tests.fakes.files import Slide, odf, odp, ods, xlsx

MB = 1024 * 1024


def read(data: bytes, name: str = "file", max_tokens: int = 10_000) -> str:
    return read_document(data, name, max_bytes=10 * MB, max_tokens=max_tokens).text


def refused(data: bytes) -> ImageError:
    with pytest.raises(ImageError) as caught:
        read_document(data, "x", max_bytes=10 * MB, max_tokens=1000)
    return caught.value


MINUTES = (
    # A table of contents: its template is not text, its body is.
    '<text:table-of-content><text:table-of-content-source><text:index-title-template>Contents'
    '</text:index-title-template></text:table-of-content-source><text:index-body>'
    '<text:p>Decisions 1</text:p></text:index-body></text:table-of-content>'
    '<text:tracked-changes><text:changed-region text:id="c1"><text:deletion><office:change-info/>'
    '<text:p>Budget 90k (deleted)</text:p></text:deletion></text:changed-region></text:tracked-changes>'
    '<text:h text:outline-level="1">Q3 <text:span text:style-name="T1">plan</text:span></text:h>'
    '<text:p>Ship on <text:span>Friday</text:span>,<text:s text:c="2"/>budget   40k'
    '<text:note text:id="n1" text:note-class="footnote"><text:note-citation>1</text:note-citation>'
    '<text:note-body><text:p>Before tax.</text:p></text:note-body></text:note>.<text:change text:change-id="c1"/>'
    '<office:annotation><dc:creator xmlns:dc="http://purl.org/dc/elements/1.1/">Li</dc:creator>'
    '<text:p>a comment</text:p></office:annotation></text:p>'
    '<text:p>Owner:<text:tab/>Li Wei<text:line-break/>Deputy:<text:tab/>Ana'
    # A frame anchored in the paragraph: its text box, read once (the image is another rendering).
    '<draw:frame draw:name="Box" text:anchor-type="paragraph"><draw:text-box><text:p>Risk: the vendor</text:p>'
    '</draw:text-box><draw:image><text:p>same box as a picture</text:p></draw:image></draw:frame></text:p>'
    '<text:section text:name="S1"><text:h text:outline-level="2">Steps</text:h>'
    '<text:list text:style-name="L1"><text:list-header><text:p>In order:</text:p></text:list-header>'
    '<text:list-item><text:p>Freeze</text:p><text:p>on Monday</text:p>'
    '<text:list><text:list-item><text:p>tag the release</text:p></text:list-item></text:list></text:list-item>'
    '<text:list-item><text:p>Deploy</text:p></text:list-item></text:list></text:section>'
    '<text:soft-page-break/>'
    '<table:table table:name="Costs"><table:table-column table:number-columns-repeated="3"/>'
    '<table:table-header-rows><table:table-row><table:table-cell><text:p>Item</text:p></table:table-cell>'
    '<table:table-cell table:number-columns-spanned="2"><text:p>Cost | EUR</text:p></table:table-cell>'
    '<table:covered-table-cell/></table:table-row></table:table-header-rows>'
    '<table:table-row><table:table-cell><text:p>Servers</text:p><text:p>and DB</text:p></table:table-cell>'
    '<table:table-cell table:number-columns-repeated="2"><text:p>20k</text:p></table:table-cell></table:table-row>'
    '</table:table>'
)


def test_a_text_document_reads_as_markdown() -> None:
    assert read(odf("text", MINUTES), "minutes.odt") == "\n".join([
        "Decisions 1",
        "# Q3 plan",
        "Ship on Friday,  budget 40k[^1].",
        "Owner:\tLi Wei\nDeputy:\tAna",
        "Risk: the vendor",
        "## Steps",
        "  In order:",
        "- Freeze",
        "  on Monday",
        "  - tag the release",
        "- Deploy",
        "| Item | Cost \\| EUR |  |",
        "|---|---|---|",
        "| Servers and DB | 20k | 20k |",
        "",
        "[^1]: Before tax.",
    ])


def test_a_long_text_document_is_read_up_to_the_text_kept() -> None:
    body = "".join(f"<text:p>Paragraph {i} of the minutes.</text:p>" for i in range(3000))
    text = office_text(odf("text", body), max_chars=5000)
    lines = text.split("\n")
    assert lines[-1] == "(the rest not read: the document is longer than I read)"
    assert lines[:-1] == [f"Paragraph {i} of the minutes." for i in range(len(lines) - 1)]
    assert 5000 < len(text) < 5100


def test_a_spreadsheet_reads_as_tables_with_letters_and_numbers() -> None:
    book = ods({
        "Budget": [
            ["Item", "Cost", "Due", "Paid"],
            ["Servers", 30000, date(2024, 3, 1), True],
            ["Servers", 30000, date(2024, 3, 1), True],  # the same row: written once, repeated
            [],
            ["Total | net", 60000.5, datetime(2024, 3, 1, 14, 30), False, None, "x", "x", "x"],
        ],
        "Notes": [[None, None, "see Budget"]],
    })
    assert read(book, "q1.ods") == "\n".join([
        "A workbook of 2 sheets: Budget, Notes",
        "",
        "## Sheet: Budget",
        "|  | A | B | C | D | E | F | G | H |",
        "|---|---|---|---|---|---|---|---|---|",
        "| 1 | Item | Cost | Due | Paid |  |  |  |  |",
        "| 2 | Servers | 30,000 | 03/01/2024 | TRUE |  |  |  |  |",  # what the cell shows
        "| 3 | Servers | 30,000 | 03/01/2024 | TRUE |  |  |  |  |",
        "| 5 | Total \\| net | 60,000.5 | 03/01/2024 14:30 | FALSE |  | x | x | x |",
        "",
        "## Sheet: Notes",
        "|  | C |",
        "|---|---|",
        "| 1 | see Budget |",
    ])


def test_a_cell_without_its_shown_text_gives_its_value_and_merged_cells_keep_their_place() -> None:
    cells = (
        '<table:table-cell office:value-type="date" office:date-value="2024-03-01"/>'
        '<table:table-cell office:value-type="date" office:date-value="2024-03-01T09:05:00"/>'
        '<table:table-cell office:value-type="time" office:time-value="PT14H30M00S"/>'
        '<table:table-cell office:value-type="percentage" office:value="0.125"/>'
        '<table:table-cell office:value-type="currency" office:currency="EUR" office:value="40000"/>'
        '<table:table-cell office:value-type="boolean" office:boolean-value="true"/>'
        '<table:table-cell office:value-type="string" office:string-value="plain"/>'
        '<table:table-cell table:number-columns-spanned="2"><text:p>merged</text:p></table:table-cell>'
        '<table:covered-table-cell><text:p>hidden by the merge</text:p></table:covered-table-cell>'
        '<table:table-cell><text:p>last</text:p><office:annotation><text:p>a comment</text:p></office:annotation>'
        '</table:table-cell>'
    )
    sheet = f'<table:table table:name="S"><table:table-row>{cells}</table:table-row></table:table>'
    assert read(odf("spreadsheet", sheet)).splitlines()[-1] == (
        "| 1 | 2024-03-01 | 2024-03-01 09:05 | 14:30 | 12.5% | 40000 | TRUE | plain | merged |  | last |")


def test_repeated_rows_and_columns_stay_within_the_caps() -> None:
    """LibreOffice ends every sheet with a million empty rows written as one
    (the fake does too): they cost nothing. Text repeated a million rows
    down or 16,000 columns across is written out only to the caps."""
    assert read(ods({"S": [["only"]]})) == "## Sheet: S\n|  | A |\n|---|---|\n| 1 | only |"
    row = ('<table:table-row table:number-rows-repeated="1000000"><table:table-cell office:value-type="string">'
           '<text:p>same</text:p></table:table-cell></table:table-row>')
    wide = ('<table:table-row><table:table-cell table:number-columns-repeated="16384"><text:p>w</text:p>'
            '</table:table-cell></table:table-row>')
    book = odf("spreadsheet", f'<table:table table:name="Long">{row}</table:table>'
                              f'<table:table table:name="Wide">{wide}</table:table>')
    text = read_document(book, "x", max_bytes=MB, max_tokens=100).full_text
    assert f"| {MAX_ROWS} | same |\n(only the first 5,000 rows read)\n\n## Sheet: Wide" in text
    assert f"| {MAX_ROWS + 1} |" not in text
    assert text.endswith("| 1 |" + " w |" * 64 + "\n(columns after BL not read)")


def test_a_spreadsheet_longer_than_the_text_kept_says_where_it_stopped() -> None:
    book = ods({"Big": [["x" * 1000, i] for i in range(1000)], "Next": [["y"]]})
    doc = read_document(book, "big.ods", max_bytes=20 * MB, max_tokens=1000)
    assert doc.cut and doc.total_chars <= 500_000
    assert doc.full_text.endswith("(the rest not read: the workbook is longer than I read)\n\n"
                                  "## Sheet: Next\n(not read: the workbook is longer than I read)")
    assert doc.full_text.startswith("A workbook of 2 sheets: Big, Next\n")


def test_a_hidden_sheet_and_a_hidden_slide_are_marked() -> None:
    styles = ('<style:style style:name="ta2" style:family="table"><style:table-properties table:display="false"/>'
              '</style:style><style:style style:name="dp9" style:family="drawing-page">'
              '<style:drawing-page-properties presentation:visibility="hidden"/></style:style>')
    sheets = ('<table:table table:name="Old" table:style-name="ta2"><table:table-row><table:table-cell>'
              '<text:p>kept for audit</text:p></table:table-cell></table:table-row></table:table>')
    assert "## Sheet: Old (hidden)\n" in read(odf("spreadsheet", sheets, styles=styles))
    page = ('<draw:page draw:name="page1" draw:style-name="dp9"><draw:frame presentation:class="title"><draw:text-box>'
            '<text:p>Backup slide</text:p></draw:text-box></draw:frame></draw:page>')
    assert read(odf("presentation", page, styles=styles)) == "## Slide 1 (hidden)\nBackup slide"


def test_slides_are_read_in_order_with_their_names_and_notes() -> None:
    deck = odp([
        Slide(["Q3 plan", "Ship on Friday", "Budget 40k"], notes="Mention the budget.\nAsk Li Wei."),
        Slide(["Costs"], table=[["Item", "Cost"], ["Servers", "40k"]]),
        Slide(["Questions?"]),
    ], names=["page1", "Costs"])
    assert read(deck, "q3.odp") == "\n".join([
        "## Slide 1", "Q3 plan", "- Ship on Friday", "- Budget 40k", "Notes:", "Mention the budget.", "Ask Li Wei.",
        "",
        "## Slide 2: Costs", "Costs", "| Item | Cost |", "|---|---|", "| Servers | 40k |",
        "",
        "## Slide 3", "Questions?",
    ])  # no page numbers (the page-number frames), no empty notes


def test_an_odf_file_is_known_by_its_mimetype_not_its_name() -> None:
    assert read(ods({"S": [["a"]]}), "budget.bin").endswith("| 1 | a |")
    drawing = rezip(odf("text", "<text:p>x</text:p>"),
                    lambda p, d: b"application/vnd.oasis.opendocument.graphics" if p == "mimetype" else d)
    assert refused(drawing).reason == UNSUPPORTED
    assert refused(rezip(odf("text", "<text:p>x</text:p>"),
                         lambda p, d: None if p == "content.xml" else d)).reason == UNSUPPORTED


def test_an_odf_kind_not_read_is_named_in_the_error_only_from_a_fixed_list() -> None:
    """The kind is the file's own words (its mimetype part, a flat file's
    root): the error, which is logged, names only a kind ODF defines."""
    for media in ("application/vnd.oasis.opendocument.zebrafinch-diary",
                  "application/vnd.oasis.opendocument.text.zebrafinch"):
        zipped = rezip(odf("text", "<text:p>x</text:p>"), lambda p, d, m=media: m.encode() if p == "mimetype" else d)
        for data in (zipped, flat(zipped)):
            error = refused(data)
            assert error.reason == UNSUPPORTED and "zebrafinch" not in str(error), media
            assert "a kind not read (another)" in str(error)
    drawing = rezip(odf("text", "<text:p>x</text:p>"),
                    lambda p, d: b"application/vnd.oasis.opendocument.graphics" if p == "mimetype" else d)
    assert "a kind not read (graphics)" in str(refused(drawing))


def test_an_odf_file_behind_a_password_is_refused_as_locked() -> None:
    for kind in ("text", "spreadsheet", "presentation"):
        locked = refused(odf(kind, "", encrypted=True))
        assert locked.reason == ENCRYPTED, kind
    assert "password" in document_note(ENCRYPTED, MB, has_text=False)


def test_an_entity_bomb_in_content_xml_is_refused() -> None:
    laughs = ('<!DOCTYPE office:document-content [<!ENTITY a "hahahahahahahaha">'
              + "".join(f'<!ENTITY {chr(c)} "{("&" + chr(c - 1) + ";") * 10}">' for c in range(ord("b"), ord("k")))
              + "]>")
    bomb = refused(odf("text", "<text:p>&j;</text:p>", prolog=laughs))
    assert bomb.reason == UNSUPPORTED and "DTD" in str(bomb)


def test_a_whole_spreadsheet_stays_small_in_memory() -> None:
    """Rows are let go of as they are read, and reading stops at the text
    kept: a 20,000-row sheet costs no XML tree."""
    book = ods({"S": [[f"row {i}", i, "text " * 10] for i in range(20_000)]})
    tracemalloc.start()
    try:
        text = office_text(book, max_chars=50_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "(the rest not read: the workbook is longer than I read)" in text
    assert peak < 6 * MB


def test_a_spreadsheet_cut_short_still_names_the_sheets_not_read_as_a_workbook_does() -> None:
    """A row over the text kept (one cell of 600,000 characters) ends the
    reading inside it; the sheets after it are named from the settings,
    and an .xlsx cut the same way reads the same."""
    sheets: dict[str, list[list[str | int | None]]] = {
        "Big": [["head"], ["z" * 600_000]], "Next": [["n"]], "Last": [["l"]]}
    tail = ("(the rest not read: the workbook is longer than I read)\n\n"
            "## Sheet: Next\n(not read: the workbook is longer than I read)\n\n"
            "## Sheet: Last\n(not read: the workbook is longer than I read)")
    for data in (ods(sheets), xlsx(sheets)):  # type: ignore[arg-type]
        text = read_document(data, "big", max_bytes=20 * MB, max_tokens=1000).full_text
        assert text.startswith("A workbook of 3 sheets: Big, Next, Last\n\n## Sheet: Big\n|  | A |\n|---|---|\n"
                               "| 1 | head |\n")
        assert text.endswith(tail)
        assert text.count("z") <= 500_000
    # Without settings the reader cannot know them, and says so.
    text = read_document(ods(sheets, settings=False), "big", max_bytes=20 * MB, max_tokens=1000).full_text
    assert text.startswith("## Sheet: Big\n")
    assert text.endswith("(the rest not read: the workbook is longer than I read)\n"
                         "(any sheets after it not read either: the workbook is longer than I read)")


def test_a_spreadsheet_past_the_unpacked_budget_is_read_to_it_and_names_the_rest(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """content.xml is read as far as the budget goes, not refused; what is
    kept back for settings.xml names the sheets it did not reach."""
    monkeypatch.setattr(xmlzip, "MAX_XML", 2 * MB)
    book = ods({name: [[f"{name} row {i}", i] for i in range(20_000)] for name in ("A", "B", "C")})
    with zipfile.ZipFile(io.BytesIO(book)) as archive:
        assert archive.getinfo("content.xml").file_size > 2 * MB
    text = read_document(book, "x", max_bytes=10 * MB, max_tokens=1000).full_text
    assert text.startswith("A workbook of 3 sheets: A, B, C\n\n## Sheet: A\n")
    assert "| 1 | A row 0 | 0 |\n| 2 | A row 1 | 1 |\n" in text
    assert text.endswith("## Sheet: B\n(not read: the workbook is longer than I read)\n\n"
                         "## Sheet: C\n(not read: the workbook is longer than I read)")


def flat(data: bytes) -> bytes:
    """The flat file of a zipped fake: the same content under an office:document root, its settings first."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        media = archive.read("mimetype").decode()
        content = archive.read("content.xml").decode()
        settings = archive.read("settings.xml").decode() if "settings.xml" in archive.namelist() else ""
    head, _, rest = content.partition("<office:document-content ")
    attributes, _, body = rest.partition(">")
    body = body.replace("</office:document-content>", "</office:document>")
    inner = settings[settings.find("<office:settings>"):settings.find("</office:document-settings>")]
    return f'{head}<office:document {attributes} office:mimetype="{media}">{inner}{body}'.encode()


def test_a_flat_odf_file_reads_as_its_zipped_kin() -> None:
    """.fodt, .fods, .fodp: one XML file, read by the same code: the same
    text, hidden styles and settings included."""
    hidden = ('<style:style style:name="ta2" style:family="table"><style:table-properties table:display="false"/>'
              '</style:style>')
    sheets = ('<table:table table:name="Old" table:style-name="ta2"><table:table-row><table:table-cell>'
              '<text:p>kept for audit</text:p></table:table-cell></table:table-row></table:table>')
    for zipped in (odf("text", MINUTES), ods({"Budget": [["Item", 3]], "Notes": [["x"]]}),
                   odf("spreadsheet", sheets, styles=hidden),
                   odp([Slide(["Q3 plan", "Ship"], notes="Say it."), Slide(["Costs"], table=[["a", "b"]])])):
        text = read(zipped)
        assert read(flat(zipped), "minutes.fodt") == text and text.strip()
    assert read(odf("spreadsheet", sheets, styles=hidden, flat=True)).startswith("## Sheet: Old (hidden)\n")


def test_a_flat_spreadsheet_cut_short_names_the_rest_from_its_own_settings() -> None:
    sheets: dict[str, list[list[str | int | None]]] = {"Big": [["z" * 600_000]], "Next": [["n"]]}
    text = read_document(ods(sheets, flat=True), "big.fods", max_bytes=20 * MB, max_tokens=1000).full_text
    assert text.startswith("A workbook of 2 sheets: Big, Next\n")
    assert text.endswith("(the rest not read: the workbook is longer than I read)\n\n"
                         "## Sheet: Next\n(not read: the workbook is longer than I read)")


def test_a_flat_odf_file_is_refused_as_the_zipped_one_is() -> None:
    laughs = ('<!DOCTYPE office:document [<!ENTITY a "hahahahahahahaha">'
              + "".join(f'<!ENTITY {chr(c)} "{("&" + chr(c - 1) + ";") * 10}">' for c in range(ord("b"), ord("k")))
              + "]>")
    bomb = refused(odf("text", "<text:p>&j;</text:p>", prolog=laughs, flat=True))
    assert bomb.reason == UNSUPPORTED and "DTD" in str(bomb)
    drawing = odf("text", "<text:p>x</text:p>", flat=True).replace(b"opendocument.text", b"opendocument.graphics")
    assert "a kind not read" in str(refused(drawing))
    truncated = odf("text", "<text:p>x</text:p>", flat=True)[:-30]
    assert "could not be read" in str(refused(truncated))


def test_xml_that_is_not_a_flat_odf_file_is_read_as_text() -> None:
    """Other XML (a config, an SVG's source) is text; the root decides, not
    a mention of the OpenDocument type somewhere in it."""
    config = ('<?xml version="1.0"?>\n<config><format mimetype="application/vnd.oasis.opendocument.text"/>'
              "</config>\n")
    assert read(config.encode(), "config.xml") == config.strip()
    assert read(b"<document>plain</document>") == "<document>plain</document>"


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["odt", "ods", "odp", "fodt", "fods", "fodp"]), st.integers(0, 10_000), st.integers(0, 60),
       st.binary(max_size=8))
def test_an_odf_file_with_damaged_xml_raises_only_a_refusal(kind: str, at: int, cut: int, junk: bytes) -> None:
    made = {
        "odt": lambda flat: odf("text", MINUTES, flat=flat),
        "ods": lambda flat: ods({"S": [["a", 1, date(2024, 1, 1), True]]}, flat=flat),
        "odp": lambda flat: odp([Slide(["Plan", "point"], notes="n", table=[["a"]])], flat=flat),
    }[kind.replace("fod", "od")]

    def damage(part: str, data: bytes) -> bytes:
        if part == "mimetype":
            return data
        where = at % (len(data) + 1)
        return data[:where] + junk + data[where + cut:]

    try:
        text = read(damage("", made(True)) if kind.startswith("f") else rezip(made(False), damage))
    except ImageError as exc:
        assert exc.reason in (UNSUPPORTED, ENCRYPTED)
    else:
        assert text.strip()


def test_the_mimetype_part_comes_first_and_stored_in_the_fakes() -> None:
    """What LibreOffice writes, and what the format asks (ODF 1.2, part 3, 3.3)."""
    with zipfile.ZipFile(io.BytesIO(ods({"S": [["a"]]}))) as archive:
        first = archive.infolist()[0]
        assert (first.filename, first.compress_type) == ("mimetype", zipfile.ZIP_STORED)


def test_an_ods_row_cut_by_the_text_kept_says_so_rather_than_show_empty_cells() -> None:
    """As in an .xlsx: the cells after the one cut are unread, not empty."""
    book = ods({"S": [["id", "note", "owner"], ["1", "y" * 600_000, "Li Wei"], ["2", "next", "Ana"]]})
    lines = read_document(book, "cut.ods", max_bytes=20 * MB, max_tokens=1000).full_text.splitlines()
    assert lines[-3].startswith("| 2 | 1 | yyy") and lines[-3].endswith("y … | … |")
    assert lines[-2:] == ["(row 2 cut at B2: its cells after it not read)",
                          "(the rest not read: the workbook is longer than I read)"]
    assert "Li Wei" not in "\n".join(lines) and "| 3 |" not in "\n".join(lines)
