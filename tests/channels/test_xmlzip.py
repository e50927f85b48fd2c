"""The XML of office files read within bounds (channels/xmlzip.py): a
part that declares a DTD is refused before any entity is expanded, and a
Word document is streamed, read only up to the text kept and let go of as
it is read."""

from __future__ import annotations

import io
import tracemalloc
import zipfile
from xml.etree import ElementTree

import pytest

from channels import office
from channels.documents import read_document
from channels.media import UNSUPPORTED, ImageError
from channels.office import office_text
from tests.channels.test_documents import rezip
from tests.fakes import files
from tests.fakes.files import docx, xlsx

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
