"""The XML of office files read within bounds (channels/xmlzip.py): a
part that declares a DTD is refused before any entity is expanded, and a
Word document, an OpenDocument's content and a PowerPoint slide are
streamed, read only up to the text kept (within one paragraph too) and
let go of as they are read."""

from __future__ import annotations

import io
import tracemalloc
import zipfile
from collections.abc import Callable
from xml.etree import ElementTree

import pytest

from channels import office
from channels.documents import read_document
from channels.media import UNSUPPORTED, ImageError
from channels.office import office_text
from tests.channels.test_documents import rezip
from tests.fakes import files
from tests.fakes.files import Slide, docx, odf, pptx, xlsx

MB = 1024 * 1024
# One entity of 100 KB said 60 times: 6 MB of text from 106 KB of XML,
# under expat's own check (it allows a hundred times the input), so it
# would be expanded. Within the 64 MB budget the same makes gigabytes.
_ENTITY = b'<!DOCTYPE w:document [<!ENTITY e "' + b"ha" * 50_000 + b'">]>'


def _quadratic(part: bytes) -> bytes:
    head, _, rest = part.partition(b"?>")
    return head + b"?>" + _ENTITY + rest.replace(b"Plan", b"&e;" * 60)


def refusal(data: bytes) -> ImageError:
    with pytest.raises(ImageError) as caught:
        read_document(data, "x", max_bytes=10 * MB, max_tokens=1000)
    return caught.value


def test_an_entity_expansion_in_a_word_document_is_refused_before_it_expands() -> None:
    bomb = rezip(docx(["Plan"]), lambda p, d: _quadratic(d) if p == "word/document.xml" else d)
    document = _quadratic(
        b'<?xml version="1.0"?><w:document xmlns:w="urn:w"><w:body><w:p><w:r><w:t>Plan</w:t></w:r></w:p>'
        b"</w:body></w:document>")
    assert len("".join(ElementTree.fromstring(document).itertext())) == 6_000_000  # what a plain parse builds
    refused = refusal(bomb)
    assert refused.reason == UNSUPPORTED and "DTD" in str(refused)


def test_a_dtd_in_any_part_is_refused_even_without_entities() -> None:
    """Office files never declare one; a sheet, the workbook or its
    relationships are guarded alike."""
    for name in ("xl/worksheets/sheet1.xml", "xl/workbook.xml", "xl/_rels/workbook.xml.rels"):
        book = rezip(xlsx({"S": [["x"]]}),
                     lambda p, d, n=name: d.replace(b"?>", b'?><!DOCTYPE x SYSTEM "http://evil/x.dtd">', 1)
                     if p == n else d)
        refused = refusal(book)
        assert refused.reason == UNSUPPORTED and "DTD" in str(refused), name


def test_a_part_the_file_names_itself_is_not_named_in_the_error() -> None:
    """A sheet's path comes from the workbook's relationships, the file's
    own words: the error, which is logged, names only a standard part."""
    book = xlsx({"S": [["x"]]})
    buf = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(book)) as source, zipfile.ZipFile(buf, "w") as out:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == "xl/worksheets/sheet1.xml":
                out.writestr("xl/worksheets/zebrafinch.xml",
                             data.replace(b"?>", b'?><!DOCTYPE x SYSTEM "http://evil/x.dtd">', 1))
            else:
                out.writestr(info.filename, data.replace(b"worksheets/sheet1.xml", b"worksheets/zebrafinch.xml"))
    refused = refusal(buf.getvalue())
    assert refused.reason == UNSUPPORTED and "DTD" in str(refused) and "zebrafinch" not in str(refused)
    standard = rezip(book, lambda p, d: d.replace(b"?>", b'?><!DOCTYPE x>', 1) if p == "xl/worksheets/sheet1.xml"
                     else d)
    assert "(xl/worksheets/sheet1.xml)" in str(refusal(standard))


def test_a_long_word_document_is_read_up_to_the_text_kept_and_says_so() -> None:
    paragraphs = [f"Paragraph {i}: we agreed to move the launch." for i in range(5000)]
    text = office_text(docx(paragraphs, table=[["Item", "Cost"]]), max_chars=10_000)
    lines = text.split("\n")
    assert lines[-1] == "(the rest not read: the document is longer than I read)"
    assert lines[:-1] == paragraphs[:len(lines) - 1]  # the start, in order, whole paragraphs
    assert 10_000 < len(text) < 10_200
    # Under the cap it is all there, the table after the paragraphs.
    assert office_text(docx(paragraphs[:3], table=[["Item", "Cost"]]), max_chars=10_000).split("\n") == [
        *paragraphs[:3], "| Item | Cost |", "|---|---|"]


def test_a_huge_word_document_is_read_in_memory_bounded_by_the_text_kept() -> None:
    """A 30 MB document.xml, read to 20,000 characters: a whole tree of it
    would be hundreds of MB."""
    big = docx([f"Paragraph {i}: we agreed to move the launch to Friday, budget 40k." for i in range(250_000)])
    tracemalloc.start()
    try:
        text = office_text(big, max_chars=20_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert text.endswith("(the rest not read: the document is longer than I read)")
    assert peak < 8 * MB


def test_a_streamed_word_document_reads_as_the_whole_tree_does() -> None:
    """Cells are streamed too (a layout table may hold the whole document):
    a nested table, a text box in a cell, a content control, read as the
    reader of a whole tree reads them."""
    nested = rezip(docx(["Intro"], text_box="Owner: Li Wei", table=[["a", "b"], ["c", "d"]]), lambda p, d: d.replace(
        b"<w:t>a</w:t></w:r></w:p>",
        b"<w:t>a</w:t></w:r></w:p><w:tbl><w:tr><w:tc><w:p><w:r><w:t>inner</w:t></w:r></w:p></w:tc></w:tr></w:tbl>"
    ).replace(b"<w:t>d</w:t></w:r>", b"<w:t>d</w:t></w:r>" + docx_box()).replace(
        b"<w:sectPr/>", b"<w:sdt><w:sdtPr/><w:sdtContent><w:p><w:r><w:t>signed</w:t></w:r></w:p></w:sdtContent></w:sdt>"
                        b"<w:sectPr/>") if p == "word/document.xml" else d)
    with zipfile.ZipFile(io.BytesIO(nested)) as archive:
        whole = "\n".join(office._word_blocks(ElementTree.fromstring(archive.read("word/document.xml"))))
    streamed = office_text(nested, max_chars=1000)
    assert streamed == whole
    assert streamed.split("\n") == [
        "Intro", "Owner: Li Wei", "| a \\| inner \\| \\|---\\| | b |", "|---|---|", "| c | d Box in a cell |", "signed"]


def docx_box() -> bytes:
    return files._text_box("Box in a cell").encode()


def peak_of(read: Callable[[], str]) -> tuple[str, int]:
    tracemalloc.start()
    try:
        text = read()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return text, peak


def test_one_huge_run_or_paragraph_is_kept_only_up_to_the_text_kept() -> None:
    """20 MB of text in one Word run, one ODF paragraph of spans, one
    slide's paragraph: the text is counted as it arrives, not held whole."""
    words = "".join(f"word{i} " for i in range(2_500_000))  # 20 MB, in order
    spans = "".join(f"<text:span>word{i} </text:span>" for i in range(1_000_000))
    slide = rezip(pptx([Slide(["Title", "stub"])]),
                  lambda p, d: d.replace(b"<a:t>stub</a:t>", f"<a:t>{words}</a:t>".encode()) if p.startswith(
                      "ppt/slides/slide") else d)
    cut_doc, cut_deck = ("(the rest not read: the document is longer than I read)",
                         "(the rest not read: the presentation is longer than I read)")
    for data, head, cut, said in (
        (docx([words]), [], cut_doc, words),
        (odf("text", f"<text:p>{spans}</text:p>"), [], cut_doc, words[:len(words) * 2 // 5]),
        (slide, ["## Slide 1", "Title"], cut_deck, words),
    ):
        text, peak = peak_of(lambda data=data: office_text(data, max_chars=100_000).lstrip("\n"))  # type: ignore[misc]
        lines = text.split("\n")
        assert lines[:len(head)] == head and lines[-1] == cut
        kept = lines[len(head)]
        assert len(lines) == len(head) + 2 and 90_000 < len(kept) <= 100_000 and said.startswith(kept)
        assert peak < 8 * MB


def test_a_huge_slide_is_read_a_paragraph_at_a_time_up_to_the_text_kept() -> None:
    """One slide of 200,000 paragraphs (a whole tree of it would be hundreds
    of MB): its start, in order, then the note; its notes are not reached."""
    points = [f"Point {i}: revenue grew in region {i % 7}." for i in range(200_000)]
    deck = pptx([Slide(["Everything", *points], notes="Say it slowly."), Slide(["Next"])])
    text, peak = peak_of(lambda: office_text(deck, max_chars=20_000).lstrip("\n"))
    lines = text.split("\n")
    assert lines[:2] == ["## Slide 1", "Everything"]
    assert lines[2:-1] == points[:len(lines) - 3]
    assert lines[-1] == "(the rest not read: the presentation is longer than I read)"
    assert 20_000 < len(text) < 20_200 and "Notes:" not in text and "Next" not in text
    assert peak < 8 * MB


def test_a_long_deck_is_read_in_whole_slides_with_their_notes_up_to_the_text_kept() -> None:
    deck = pptx([Slide([f"Slide {i}", f"Point of {i}"], notes=f"Say {i}.") for i in range(500)])
    text = office_text(deck, max_chars=3000).lstrip("\n")
    *read, last = text.split("\n\n")
    assert len(read) > 20
    for number, block in enumerate(read, 1):
        assert block == f"## Slide {number}\nSlide {number - 1}\nPoint of {number - 1}\nNotes:\nSay {number - 1}."
    assert last.endswith("\n(the rest not read: the presentation is longer than I read)")
    assert 3000 < len(text) < 3200
    assert "(the rest not read" not in office_text(pptx([Slide(["Only"], notes="n")]), max_chars=3000)


def test_a_streamed_slide_reads_as_the_whole_tree_does() -> None:
    """A group's shapes, a shape chosen once of its AlternateContent, a
    table, and the furniture left out: as the reader of a whole tree."""
    extra = (
        f'<p:grpSp><p:nvGrpSpPr/><p:grpSpPr/>{files._shape(["In a group", "second"])}'
        f'{files._shape(["12/03/2026"], "dt")}</p:grpSp>'
        '<mc:AlternateContent xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006">'
        f'<mc:Choice Requires="p14">{files._shape(["Chosen"])}</mc:Choice>'
        f'<mc:Fallback>{files._shape(["Fallback"])}</mc:Fallback></mc:AlternateContent>'
    ).encode()
    deck = rezip(pptx([Slide(["Title", "Body"], table=[["a", "b"], ["c", ""]])]),
                 lambda p, d: d.replace(b"</p:spTree>", extra + b"</p:spTree>") if p == "ppt/slides/slide1.xml" else d)
    with zipfile.ZipFile(io.BytesIO(deck)) as archive:
        whole = office._drawing_lines(ElementTree.fromstring(archive.read("ppt/slides/slide1.xml")))
    streamed = office_text(deck, max_chars=1000).lstrip("\n").split("\n")
    assert streamed == ["## Slide 1", *whole]
    assert whole == ["Title", "Body", "| a | b |", "|---|---|", "| c |  |", "In a group", "second", "Chosen"]
