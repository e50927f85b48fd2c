"""Small real files of the kinds users send, built byte by byte for tests
(no fixture files to keep in step): a PDF with a text layer per page, a
PDF of a scanned page (an image, no text), Word, Excel and PowerPoint
files, their OOXML parts written by hand as Office writes them, and
OpenDocument ones as LibreOffice writes them."""

from __future__ import annotations

import io
import os
import struct
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from itertools import groupby

__all__ = [
    "Cell", "Formula", "Inline", "Number", "OdsCell", "Rich", "Slide", "docx", "flate_image", "jpeg", "odf", "odp", "ods",
    "ole2",
    "pdf", "pptx", "scanned_pdf", "xlsx",
]


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def _assemble(objects: list[bytes]) -> bytes:
    """Objects 1..n into a PDF with a correct cross-reference table."""
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def _stream(data: bytes) -> bytes:
    return b"<< /Length %d >>\nstream\n" % len(data) + data + b"\nendstream"


def pdf(pages: list[str]) -> bytes:
    """A PDF whose page i shows the lines of ``pages[i]`` in Helvetica
    (Latin-1 text only: enough for the tests)."""
    n = len(pages)
    font = 3 + 2 * n
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(n))
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", f"<< /Type /Pages /Kids [{kids}] /Count {n} >>".encode()]
    for i, text in enumerate(pages):
        lines = " ".join(f"({_escape(line)}) Tj T*" for line in text.split("\n"))
        content = f"BT /F1 12 Tf 14 TL 72 720 Td {lines} ET".encode("latin-1")
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 {font} 0 R >> >>"
            f" /Contents {4 + 2 * i} 0 R >>".encode()
        )
        objects.append(_stream(content))
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    return _assemble(objects)


def jpeg() -> bytes:
    """A real baseline JPEG: one 8x8 block of mid grey (a DC difference of 0,
    then end of block), with one-code Huffman tables."""
    quant = b"\xff\xdb\x00\x43\x00" + b"\x01" * 64
    frame = b"\xff\xc0\x00\x0b\x08\x00\x08\x00\x08\x01\x01\x11\x00"
    dc = b"\xff\xc4\x00\x14\x00\x01" + bytes(15) + b"\x00"
    ac = b"\xff\xc4\x00\x14\x10\x01" + bytes(15) + b"\x00"
    scan = b"\xff\xda\x00\x08\x01\x01\x00\x00\x3f\x00" + b"\x3f"  # bits 0 (DC: 0), 0 (EOB), padded with 1s
    return b"\xff\xd8" + quant + frame + dc + ac + scan + b"\xff\xd9"


def flate_image(width: int, height: int, samples: bytes, *, space: str = "/DeviceGray", depth: int = 8,
                components: int = 1, predictor: bool = False, extra: str = "") -> bytes:
    """A page image object as PDF writers make a lossless scan: samples
    deflated (FlateDecode), with ``predictor`` each row PNG-filtered first
    (Sub, as /Predictor 15 allows), ``space`` its colour space."""
    row = (width * components * depth + 7) // 8
    parms = ""
    if predictor:  # each row: filter type 1 (Sub), each byte less the one a pixel before it
        step = max(components * depth // 8, 1)
        filtered = b""
        for at in range(0, row * height, row):
            line = samples[at:at + row]
            filtered += b"\x01" + bytes((line[i] - (line[i - step] if i >= step else 0)) % 256 for i in range(row))
        samples = filtered
        parms = (f" /DecodeParms << /Predictor 15 /Colors {components} /BitsPerComponent {depth}"
                 f" /Columns {width} >>")
    data = zlib.compress(samples)
    head = (f"<< /Type /XObject /Subtype /Image /Width {width} /Height {height} /ColorSpace {space}"
            f" /BitsPerComponent {depth} /Filter /FlateDecode{parms}{extra} /Length {len(data)} >>\nstream\n")
    return head.encode() + data + b"\nendstream"


def scanned_pdf(pages: int = 1, *, scans: bool = False, image: bytes = b"") -> bytes:
    """Pages that are only a picture: no text layer. A 1x1 grey image in
    raw pixels, or with ``scans`` a JPEG (:func:`jpeg`, DCTDecode) as a
    scanner writes it, or ``image`` (:func:`flate_image`)."""
    if not image and scans:
        data = jpeg()
        image = b"<< /Type /XObject /Subtype /Image /Width 8 /Height 8 /ColorSpace /DeviceGray"
        image += b" /BitsPerComponent 8 /Filter /DCTDecode /Length %d >>\nstream\n" % len(data) + data + b"\nendstream"
    elif not image:
        image = b"<< /Type /XObject /Subtype /Image /Width 1 /Height 1 /ColorSpace /DeviceGray /BitsPerComponent 8"
        image += b" /Length 1 >>\nstream\n\x80\nendstream"
    kids = " ".join(f"{3 + i} 0 R" for i in range(pages))
    contents, picture = 3 + pages, 4 + pages
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode()]
    objects += [
        f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /XObject << /Im1 {picture} 0 R >> >>"
        f" /Contents {contents} 0 R >>".encode()
        for _ in range(pages)
    ]
    objects += [_stream(b"q 612 0 0 792 0 0 cm /Im1 Do Q"), image]
    return _assemble(objects)


_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_A = "http://schemas.openxmlformats.org/drawingml/2006/main"
_P = "http://schemas.openxmlformats.org/presentationml/2006/main"
_S = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/"
_XML = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'


def _x(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _zip(parts: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in parts.items():
            archive.writestr(name, text)
    return buf.getvalue()


def _types(overrides: dict[str, str]) -> str:
    return (
        _XML + '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
        '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
        '<Default Extension="xml" ContentType="application/xml"/>'
        + "".join(f'<Override PartName="/{name}" ContentType="{kind}"/>' for name, kind in overrides.items())
        + "</Types>"
    )


def _rels(targets: Sequence[tuple[str, str, str]]) -> str:
    """A part's relationships: (id, type's last word, target)."""
    return (
        _XML + '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        + "".join(f'<Relationship Id="{rid}" Type="{_REL}{kind}" Target="{target}"/>' for rid, kind, target in targets)
        + "</Relationships>"
    )


def _text_box(text: str) -> str:
    """A text box as Word 2010+ writes it: DrawingML for new readers (the
    Choice) and the same box as VML for old ones (the Fallback)."""
    inner = f'<w:txbxContent><w:p><w:r><w:t>{_x(text)}</w:t></w:r></w:p></w:txbxContent>'
    return (
        '<w:r><mc:AlternateContent><mc:Choice Requires="wps"><w:drawing><wp:anchor><a:graphic>'
        '<a:graphicData uri="http://schemas.microsoft.com/office/word/2010/wordprocessingShape">'
        f'<wps:wsp><wps:txbx>{inner}</wps:txbx></wps:wsp></a:graphicData></a:graphic></wp:anchor></w:drawing>'
        f'</mc:Choice><mc:Fallback><w:pict><v:shape><v:textbox>{inner}</v:textbox></v:shape></w:pict>'
        '</mc:Fallback></mc:AlternateContent></w:r>'
    )


def docx(paragraphs: list[str], *, text_box: str | None = None, table: Sequence[Sequence[str]] = ()) -> bytes:
    """A minimal Word document (.docx) with these paragraphs; ``text_box``:
    a text box anchored in the first one; ``table``: a table after them."""
    body = "".join(
        "<w:p><w:r><w:t xml:space=\"preserve\">" + _x(p) + "</w:t></w:r>"
        + (_text_box(text_box) if text_box is not None and i == 0 else "")
        + "</w:p>"
        for i, p in enumerate(paragraphs)
    )
    if table:
        body += "<w:tbl><w:tblPr/><w:tblGrid/>" + "".join(
            "<w:tr>"
            + "".join(f"<w:tc><w:tcPr/><w:p><w:r><w:t>{_x(c)}</w:t></w:r></w:p></w:tc>" for c in row)
            + "</w:tr>"
            for row in table
        ) + "</w:tbl>"
    namespaces = (
        f'xmlns:w="{_W}" xmlns:a="{_A}" '
        'xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006" '
        'xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing" '
        'xmlns:wps="http://schemas.microsoft.com/office/word/2010/wordprocessingShape" '
        'xmlns:v="urn:schemas-microsoft-com:vml" mc:Ignorable="wps"'
    )
    document = f"{_XML}<w:document {namespaces}><w:body>{body}<w:sectPr/></w:body></w:document>"
    main = "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"
    return _zip({"[Content_Types].xml": _types({"word/document.xml": main}), "word/document.xml": document})


@dataclass(frozen=True)
class Inline:
    """A cell's text written in the cell (``t="inlineStr"``), as some
    exporters do, not in the shared strings."""

    text: str


@dataclass(frozen=True)
class Rich:
    """A shared string in rich-text runs (part of it bold, say)."""

    runs: tuple[str, ...]


@dataclass(frozen=True)
class Formula:
    """A formula with the result Excel cached when it saved the file."""

    formula: str
    cached: float | str


@dataclass(frozen=True)
class Number:
    """A number shown in a number format of the workbook's own."""

    value: float
    format: str


Cell = str | Inline | Rich | Formula | Number | bool | int | float | date | None


def _serial(value: date, date1904: bool) -> float:
    """An Excel date number: days since 1904-01-01, or in the 1900 system
    (from March 1900 on) since 1899-12-30."""
    moment = value if isinstance(value, datetime) else datetime(value.year, value.month, value.day)
    delta = moment - (datetime(1904, 1, 1) if date1904 else datetime(1899, 12, 30))
    return delta.days + delta.seconds / 86400


def _column_name(number: int) -> str:
    name = ""
    while number:
        number, rest = divmod(number - 1, 26)
        name = chr(65 + rest) + name
    return name


def xlsx(sheets: dict[str, Sequence[Sequence[Cell]]], *, hidden: Sequence[str] = (), date1904: bool = False) -> bytes:
    """An Excel workbook: each sheet's rows of cells from A1 (None: an empty
    cell, not written; an empty row is not written either, as Excel does).
    Strings are shared; dates are numbers in date styles (built-in 14 for a
    day, a custom ``yyyy-mm-dd hh:mm`` for a moment); ``date1904``: the
    Mac's old date system."""
    strings: list[str] = []
    formats: list[str] = []  # custom number formats: ids from 165, cell styles from 3

    def style_of(code: str) -> int:
        if code not in formats:
            formats.append(code)
        return 3 + formats.index(code)

    def shared(xml: str) -> int:
        strings.append(xml)
        return len(strings) - 1

    parts: dict[str, str] = {}
    sheet_entries, workbook_rels, overrides = [], [], {}
    for number, (name, rows) in enumerate(sheets.items(), 1):
        xml_rows = []
        for r, row in enumerate(rows, 1):
            cells = []
            for c, value in enumerate(row, 1):
                ref = f"{_column_name(c)}{r}"
                if value is None:
                    continue
                if isinstance(value, bool):
                    cells.append(f'<c r="{ref}" t="b"><v>{int(value)}</v></c>')
                elif isinstance(value, str):
                    cells.append(f'<c r="{ref}" t="s"><v>{shared(f"<t>{_x(value)}</t>")}</v></c>')
                elif isinstance(value, Rich):
                    runs = "".join(f'<r><rPr><b/></rPr><t xml:space="preserve">{_x(t)}</t></r>' for t in value.runs)
                    cells.append(f'<c r="{ref}" t="s"><v>{shared(runs)}</v></c>')
                elif isinstance(value, Inline):
                    cells.append(f'<c r="{ref}" t="inlineStr"><is><t>{_x(value.text)}</t></is></c>')
                elif isinstance(value, Formula):
                    kind = ' t="str"' if isinstance(value.cached, str) else ""
                    cells.append(f'<c r="{ref}"{kind}><f>{_x(value.formula)}</f><v>{value.cached}</v></c>')
                elif isinstance(value, date):
                    style = 2 if isinstance(value, datetime) else 1
                    cells.append(f'<c r="{ref}" s="{style}"><v>{_serial(value, date1904):.10g}</v></c>')
                elif isinstance(value, Number):
                    cells.append(f'<c r="{ref}" s="{style_of(value.format)}"><v>{value.value}</v></c>')
                else:
                    cells.append(f'<c r="{ref}"><v>{value}</v></c>')
            if cells:
                xml_rows.append(f'<row r="{r}">{"".join(cells)}</row>')
        path = f"xl/worksheets/sheet{number}.xml"
        parts[path] = f'{_XML}<worksheet xmlns="{_S}"><sheetData>{"".join(xml_rows)}</sheetData></worksheet>'
        state = ' state="hidden"' if name in hidden else ""
        sheet_entries.append(f'<sheet name="{_x(name)}" sheetId="{number}"{state} r:id="rId{number}"/>')
        workbook_rels.append((f"rId{number}", "worksheet", f"worksheets/sheet{number}.xml"))
        overrides[path] = "application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"
    n = len(sheets)
    workbook_rels += [(f"rId{n + 1}", "sharedStrings", "sharedStrings.xml"), (f"rId{n + 2}", "styles", "styles.xml")]
    properties = '<workbookPr date1904="1"/>' if date1904 else "<workbookPr/>"
    parts["xl/workbook.xml"] = (
        f'{_XML}<workbook xmlns="{_S}" xmlns:r="{_R}">{properties}<sheets>{"".join(sheet_entries)}</sheets></workbook>'
    )
    parts["xl/_rels/workbook.xml.rels"] = _rels(workbook_rels)
    parts["xl/sharedStrings.xml"] = (
        f'{_XML}<sst xmlns="{_S}" count="{len(strings)}" uniqueCount="{len(strings)}">'
        + "".join(f"<si>{s}</si>" for s in strings) + "</sst>"
    )
    custom = "".join(f'<numFmt numFmtId="{165 + i}" formatCode="{_x(code)}"/>' for i, code in enumerate(formats))
    styles = "".join(f'<xf numFmtId="{165 + i}" applyNumberFormat="1"/>' for i in range(len(formats)))
    parts["xl/styles.xml"] = (
        f'{_XML}<styleSheet xmlns="{_S}"><numFmts count="{1 + len(formats)}">'
        f'<numFmt numFmtId="164" formatCode="yyyy\\-mm\\-dd\\ hh:mm"/>{custom}</numFmts>'
        f'<cellXfs count="{3 + len(formats)}"><xf numFmtId="0"/><xf numFmtId="14" applyNumberFormat="1"/>'
        f'<xf numFmtId="164" applyNumberFormat="1"/>{styles}</cellXfs></styleSheet>'
    )
    overrides["xl/workbook.xml"] = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"
    parts["[Content_Types].xml"] = _types(overrides)
    parts["_rels/.rels"] = _rels([("rId1", "officeDocument", "xl/workbook.xml")])
    return _zip(parts)


@dataclass(frozen=True)
class Slide:
    """A slide's text boxes' paragraphs, a table on it, its speaker notes."""

    paragraphs: Sequence[str]
    notes: str = ""
    table: Sequence[Sequence[str]] = field(default=())


def _shape(paragraphs: Sequence[str], placeholder: str = "") -> str:
    ph = f'<p:nvPr><p:ph type="{placeholder}"/></p:nvPr>' if placeholder else "<p:nvPr/>"
    body = "".join(f'<a:p><a:r><a:rPr lang="en-US"/><a:t>{_x(p)}</a:t></a:r></a:p>' for p in paragraphs)
    return f'<p:sp><p:nvSpPr><p:cNvPr id="2" name="Text"/><p:cNvSpPr/>{ph}</p:nvSpPr><p:spPr/>' \
           f'<p:txBody><a:bodyPr/><a:lstStyle/>{body}</p:txBody></p:sp>'


def _slide_number() -> str:
    return '<p:sp><p:nvSpPr><p:cNvPr id="9" name="Slide Number"/><p:cNvSpPr/><p:nvPr><p:ph type="sldNum"/></p:nvPr>' \
           '</p:nvSpPr><p:spPr/><p:txBody><a:bodyPr/><a:p><a:fld type="slidenum"><a:t>7</a:t></a:fld></a:p>' \
           '</p:txBody></p:sp>'


def pptx(slides: Sequence[Slide]) -> bytes:
    """A PowerPoint presentation. Slide files are numbered backwards
    (the first slide is the last file), as after slides are reordered:
    only the presentation's list says the order. Each slide and notes page
    carries a slide number placeholder, as PowerPoint's do."""
    ns = f'xmlns:a="{_A}" xmlns:r="{_R}" xmlns:p="{_P}"'
    parts: dict[str, str] = {}
    ids, rels, overrides = [], [], {}
    n = len(slides)
    for i, slide in enumerate(slides):
        file_number = n - i
        path = f"ppt/slides/slide{file_number}.xml"
        shapes = _shape(slide.paragraphs[:1], "title") + _shape(slide.paragraphs[1:]) + _slide_number()
        if slide.table:
            cell = "<a:tc><a:txBody><a:bodyPr/><a:p><a:r><a:t>{}</a:t></a:r></a:p></a:txBody></a:tc>"
            rows = "".join("<a:tr>" + "".join(cell.format(_x(c)) for c in row) + "</a:tr>" for row in slide.table)
            shapes += (f"<p:graphicFrame><a:graphic><a:graphicData><a:tbl>{rows}</a:tbl></a:graphicData></a:graphic>"
                       "</p:graphicFrame>")
        parts[path] = f"{_XML}<p:sld {ns}><p:cSld><p:spTree>{shapes}</p:spTree></p:cSld></p:sld>"
        slide_rels = [("rId1", "slideLayout", "../slideLayouts/slideLayout1.xml")]
        if slide.notes:
            notes_path = f"ppt/notesSlides/notesSlide{file_number}.xml"
            notes_shapes = (
                '<p:sp><p:nvSpPr><p:cNvPr id="2" name="Slide Image"/><p:cNvSpPr/><p:nvPr><p:ph type="sldImg"/></p:nvPr>'
                '</p:nvSpPr><p:spPr/></p:sp>' + _shape(slide.notes.split("\n"), "body") + _slide_number()
            )
            parts[notes_path] = f"{_XML}<p:notes {ns}><p:cSld><p:spTree>{notes_shapes}</p:spTree></p:cSld></p:notes>"
            slide_rels.append(("rId2", "notesSlide", f"../notesSlides/notesSlide{file_number}.xml"))
        parts[f"ppt/slides/_rels/slide{file_number}.xml.rels"] = _rels(slide_rels)
        ids.append(f'<p:sldId id="{256 + i}" r:id="rId{i + 2}"/>')
        rels.append((f"rId{i + 2}", "slide", f"slides/slide{file_number}.xml"))
        overrides[path] = "application/vnd.openxmlformats-officedocument.presentationml.slide+xml"
    rels.append(("rId1", "slideMaster", "slideMasters/slideMaster1.xml"))
    parts["ppt/presentation.xml"] = (
        f'{_XML}<p:presentation {ns}><p:sldMasterIdLst><p:sldMasterId id="2147483648" r:id="rId1"/></p:sldMasterIdLst>'
        f'<p:sldIdLst>{"".join(ids)}</p:sldIdLst><p:sldSz cx="12192000" cy="6858000"/></p:presentation>'
    )
    parts["ppt/_rels/presentation.xml.rels"] = _rels(rels)
    overrides["ppt/presentation.xml"] = (
        "application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml"
    )
    parts["[Content_Types].xml"] = _types(overrides)
    parts["_rels/.rels"] = _rels([("rId1", "officeDocument", "ppt/presentation.xml")])
    return _zip(dict(sorted(parts.items())))


_NO_SECTOR, _END_OF_CHAIN, _FAT_SECTOR = 0xFFFFFFFF, 0xFFFFFFFE, 0xFFFFFFFD


def ole2(streams: Sequence[str]) -> bytes:
    """An OLE2 compound file (MS-CFB version 3), the container of the old
    binary .doc, .xls and .ppt and of a .docx/.xlsx/.pptx behind a
    password, whose directory holds these (empty) streams: a header, one
    FAT sector and one directory sector."""
    assert len(streams) <= 3, "one directory sector: the root and three streams"
    header = struct.pack(
        "<8s16sHHHHH6sIIIIIIIII109I",
        b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", bytes(16), 0x3E, 3, 0xFFFE, 9, 6, bytes(6),
        0, 1, 1, 0, 4096, _END_OF_CHAIN, 0, _END_OF_CHAIN, 0, 0, *([_NO_SECTOR] * 108),
    )
    fat = struct.pack("<128I", _FAT_SECTOR, _END_OF_CHAIN, *([_NO_SECTOR] * 126))

    def entry(name: str, kind: int, right: int, child: int) -> bytes:
        encoded = (name + "\0").encode("utf-16-le")
        return struct.pack("<64sHBBIII16sIQQIQ", encoded, len(encoded), kind, 1, _NO_SECTOR, right, child,
                           bytes(16), 0, 0, 0, _END_OF_CHAIN, 0)

    directory = entry("Root Entry", 5, _NO_SECTOR, 1 if streams else _NO_SECTOR)
    for i, name in enumerate(streams, 1):  # siblings as a chain to the right
        directory += entry(name, 2, i + 1 if i < len(streams) else _NO_SECTOR, _NO_SECTOR)
    directory += struct.pack("<64sHBBIII16sIQQIQ", b"", 0, 0, 0, _NO_SECTOR, _NO_SECTOR, _NO_SECTOR,
                             bytes(16), 0, 0, 0, 0, 0) * (3 - len(streams))
    return header + fat + directory


# ---- OpenDocument ----

ODF_NAMESPACES = " ".join(f'xmlns:{prefix}="urn:oasis:names:tc:opendocument:xmlns:{name}:1.0"' for prefix, name in (
    ("office", "office"), ("text", "text"), ("table", "table"), ("draw", "drawing"), ("presentation", "presentation"),
    ("style", "style"), ("fo", "xsl-fo-compatible"), ("svg", "svg-compatible"), ("config", "config"),
))
_MANIFEST = "urn:oasis:names:tc:opendocument:xmlns:manifest:1.0"


def _settings(sheets: Sequence[str]) -> str:
    """office:settings as LibreOffice writes them: the view settings, whose
    map of the sheets names each one, in the workbook's order."""
    tables = "".join(
        f'<config:config-item-map-entry config:name="{_x(name)}"><config:config-item config:name="CursorPositionX"'
        ' config:type="int">0</config:config-item></config:config-item-map-entry>' for name in sheets)
    return (
        '<office:settings><config:config-item-set config:name="ooo:view-settings">'
        '<config:config-item config:name="VisibleAreaTop" config:type="int">0</config:config-item>'
        '<config:config-item-map-indexed config:name="Views"><config:config-item-map-entry>'
        '<config:config-item config:name="ViewId" config:type="string">view1</config:config-item>'
        f'<config:config-item-map-named config:name="Tables">{tables}</config:config-item-map-named>'
        f'<config:config-item config:name="ActiveTable" config:type="string">{_x(sheets[0] if sheets else "")}'
        '</config:config-item></config:config-item-map-entry></config:config-item-map-indexed></config:config-item-set>'
        '<config:config-item-set config:name="ooo:configuration-settings"><config:config-item-map-named'
        ' config:name="ScriptConfiguration"><config:config-item-map-entry config:name="Sheet9">'
        '<config:config-item config:name="CodeName" config:type="string">Sheet9</config:config-item>'
        '</config:config-item-map-entry></config:config-item-map-named></config:config-item-set></office:settings>'
    )


def odf(kind: str, body: str, *, styles: str = "", encrypted: bool = False, prolog: str = "",
        sheets: Sequence[str] | None = None, flat: bool = False) -> bytes:
    """An OpenDocument package of ``kind`` (text, spreadsheet,
    presentation) whose ``office:body`` holds ``<office:{kind}>body``:
    the ``mimetype`` part first and stored, as the format requires, the
    manifest, content.xml with ``styles`` as its automatic styles, and
    styles.xml. ``encrypted``: content.xml behind a password, as
    LibreOffice writes it (random bytes here; the manifest says how).
    ``prolog``: written between the XML declaration and the root.
    ``sheets``: settings.xml written too, naming these sheets.
    ``flat``: the flat file instead (.fodt, .fods, .fodp), one XML
    document whose root says what it is, its settings first."""
    media = f"application/vnd.oasis.opendocument.{kind}"
    inner = ('<office:font-face-decls><style:font-face style:name="Liberation Serif"/></office:font-face-decls>'
             f"<office:automatic-styles>{styles}</office:automatic-styles>")
    content_body = f"<office:body><office:{kind}>{body}</office:{kind}></office:body>"
    settings = _settings(sheets) if sheets is not None else ""
    if flat:
        return (f'{_XML}{prolog}<office:document {ODF_NAMESPACES} office:version="1.3" office:mimetype="{media}">'
                f"{settings}{inner}<office:styles/><office:master-styles/>{content_body}</office:document>").encode()
    content = f'{_XML}{prolog}<office:document-content {ODF_NAMESPACES} office:version="1.3">{inner}{content_body}' \
              "</office:document-content>"
    secret = (
        f'<manifest:encryption-data manifest:checksum-type="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0#sha256-1k"'
        ' manifest:checksum="AAAA"><manifest:algorithm manifest:algorithm-name="http://www.w3.org/2001/04/xmlenc#aes256-cbc"'
        ' manifest:initialisation-vector="AAAA"/><manifest:key-derivation manifest:key-derivation-name="PBKDF2"'
        ' manifest:key-size="32" manifest:iteration-count="100000" manifest:salt="AAAA"/></manifest:encryption-data>'
    ) if encrypted else ""
    manifest = (
        f'{_XML}<manifest:manifest xmlns:manifest="{_MANIFEST}" manifest:version="1.3">'
        f'<manifest:file-entry manifest:full-path="/" manifest:version="1.3" manifest:media-type="{media}"/>'
        f'<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml">{secret}'
        '</manifest:file-entry><manifest:file-entry manifest:full-path="styles.xml" manifest:media-type="text/xml"/>'
        "</manifest:manifest>"
    )
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), media, compress_type=zipfile.ZIP_STORED)
        archive.writestr("content.xml", os.urandom(400) if encrypted else content.encode())
        archive.writestr("styles.xml", f"{_XML}<office:document-styles {ODF_NAMESPACES}/>")
        if settings:
            archive.writestr("settings.xml", f'{_XML}<office:document-settings {ODF_NAMESPACES} office:version="1.3">'
                                             f"{settings}</office:document-settings>")
        archive.writestr("META-INF/manifest.xml", manifest)
    return buf.getvalue()


OdsCell = str | bool | int | float | date | None


def _ods_cell(value: OdsCell) -> str:
    """A cell as LibreOffice writes it: its value typed, and what it shows."""
    if value is None:
        return "<table:table-cell/>"
    if isinstance(value, bool):
        kind = f'office:value-type="boolean" office:boolean-value="{str(value).lower()}"'
        shown = str(value).upper()
    elif isinstance(value, datetime):
        kind = f'office:value-type="date" office:date-value="{value.isoformat()}"'
        shown = value.strftime("%m/%d/%Y %H:%M")
    elif isinstance(value, date):
        kind = f'office:value-type="date" office:date-value="{value.isoformat()}"'
        shown = value.strftime("%m/%d/%Y")
    elif isinstance(value, (int, float)):
        kind = f'office:value-type="float" office:value="{value}"'
        shown = f"{value:,}"
    else:
        return f'<table:table-cell office:value-type="string"><text:p>{_x(value)}</text:p></table:table-cell>'
    return f'<table:table-cell {kind}><text:p>{shown}</text:p></table:table-cell>'


def ods(sheets: dict[str, Sequence[Sequence[OdsCell]]], *, settings: bool = True, flat: bool = False) -> bytes:
    """A spreadsheet as LibreOffice Calc writes it: each sheet's rows from
    A1 (None: an empty cell), runs of equal cells as one cell repeated,
    runs of equal rows as one row repeated, every row padded with empty
    cells to column AMJ and the sheet with empty rows to row 1048576;
    its settings naming the sheets (unless ``settings`` is false).
    ``flat``: a .fods."""
    tables = []
    for name, rows in sheets.items():
        xml_rows = []
        for row, same in groupby([_ods_row(list(cells)) for cells in rows]):
            count = len(list(same))
            repeat = f' table:number-rows-repeated="{count}"' if count > 1 else ""
            xml_rows.append(f'<table:table-row table:style-name="ro1"{repeat}>{row}</table:table-row>')
        xml_rows.append(f'<table:table-row table:style-name="ro1" table:number-rows-repeated="{1048576 - len(rows)}">'
                        '<table:table-cell table:number-columns-repeated="1024"/></table:table-row>')
        tables.append(f'<table:table table:name="{_x(name)}" table:style-name="ta1">'
                      '<table:table-column table:style-name="co1" table:number-columns-repeated="1024"/>'
                      + "".join(xml_rows) + "</table:table>")
    body = "".join(tables) + "<table:named-expressions/>"
    return odf("spreadsheet", body, sheets=list(sheets) if settings else None, flat=flat)


def _ods_row(cells: list[OdsCell]) -> str:
    out = []
    for cell, same in groupby(_ods_cell(value) for value in cells):
        count = len(list(same))
        out.append(cell.replace("<table:table-cell", f'<table:table-cell table:number-columns-repeated="{count}"', 1)
                   if count > 1 else cell)
    out.append(f'<table:table-cell table:number-columns-repeated="{1024 - len(cells)}"/>')
    return "".join(out)


def odp(slides: Sequence[Slide], *, names: Sequence[str] = (), flat: bool = False) -> bytes:
    """A presentation as LibreOffice Impress writes it: each slide a
    ``draw:page`` (named ``page1``... unless ``names`` says), its title
    and outline frames, a page-number frame, a table in a frame, and its
    notes page (a thumbnail and a notes frame). ``flat``: a .fodp."""
    pages = []
    for number, slide in enumerate(slides, 1):
        name = names[number - 1] if number <= len(names) else f"page{number}"
        frames = [_frame("title", slide.paragraphs[:1])]
        if slide.paragraphs[1:]:
            items = "".join(f"<text:list-item><text:p>{_x(p)}</text:p></text:list-item>" for p in slide.paragraphs[1:])
            frames.append('<draw:frame presentation:class="outline"><draw:text-box>'
                          f'<text:list text:style-name="L2">{items}</text:list></draw:text-box></draw:frame>')
        frames.append(_frame("page-number", [str(number)]))
        if slide.table:
            rows = "".join("<table:table-row>" + "".join(
                f"<table:table-cell><text:p>{_x(c)}</text:p></table:table-cell>" for c in row) + "</table:table-row>"
                for row in slide.table)
            frames.append(f'<draw:frame><table:table><table:table-column table:number-columns-repeated="{len(slide.table[0])}"/>'
                          f"{rows}</table:table></draw:frame>")
        notes = ('<presentation:notes draw:style-name="dp2"><draw:page-thumbnail presentation:class="page"/>'
                 + _frame("notes", slide.notes.split("\n")) + "</presentation:notes>") if slide.notes else ""
        pages.append(f'<draw:page draw:name="{_x(name)}" draw:style-name="dp1" draw:master-page-name="Default">'
                     f'{"".join(frames)}{notes}</draw:page>')
    return odf("presentation", "".join(pages) + "<presentation:settings/>", flat=flat)


def _frame(kind: str, paragraphs: Sequence[str]) -> str:
    body = "".join(f"<text:p>{_x(p)}</text:p>" for p in paragraphs)
    return f'<draw:frame presentation:class="{kind}"><draw:text-box>{body}</draw:text-box></draw:frame>'
