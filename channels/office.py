"""Office documents read as text, with zipfile and ElementTree only: Word
(``.docx``), Excel (``.xlsx``) and PowerPoint (``.pptx``) files, which are
zips of XML parts (Office Open XML, transitional or strict); their
OpenDocument kin (``.odt``, ``.ods``, ``.odp``: LibreOffice, WPS, and their
flat one-XML-file forms ``.fodt``, ``.fods``, ``.fodp``), read by
channels/odf.py; and the old binary ``.doc``/``.xls``/``.ppt`` (OLE2
compound files), which are refused with a note that names the fix.

Tables of all three are written as Markdown tables (``| a | b |``): models
have read a great many of them, an empty cell stays visible (a run of tabs
is one token and cannot be counted), and a sheet's column letters and row
numbers let the model name the cell the user sees in Excel ("C7").

A hostile zip is bounded before it is unpacked: each part's unpacked size
(the zip's own count, which zipfile holds it to) and all parts' together
are capped at :data:`~channels.xmlzip.MAX_XML`, a part declaring a DTD is
refused (channels/xmlzip.py), a Word document and a sheet are streamed and
read only until the text kept (``max_chars``) or :data:`MAX_ROWS` is
reached, and any damage is an :class:`~channels.media.ImageError`, never
another exception.
"""

from __future__ import annotations

import contextlib
import io
import math
import posixpath
import re
import zipfile
from array import array
from collections.abc import Iterator
from datetime import datetime, timedelta
from xml.etree import ElementTree

from .media import UNSUPPORTED, ImageError
from .odf import FLAT_PART, ODF_TYPES, odf_text
from .xmlzip import (
    DAMAGE, ENCRYPTED, MAX_COLUMNS, MAX_DEPTH, MAX_ROWS, OPEN, SKIP, WHOLE, Package, Sheet, Walk, local, table,
)

__all__ = ["ENCRYPTED", "OLD_OFFICE", "OLE2_MAGIC", "flat_odf_text", "office_text", "old_office_refusal"]

OLD_OFFICE = "old_office"  # a binary .doc/.xls/.ppt: save it as .docx/.xlsx/.pptx or PDF
OLE2_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"

_MAX_SLIDES = 1000
_ROOM = 10_000  # characters of a workbook's text kept for its last row and notes


def office_text(data: bytes, *, max_chars: int) -> str:
    """The text of a Word, Excel or PowerPoint file or an OpenDocument
    text, spreadsheet or presentation (a zip), read up to about
    ``max_chars``; raises :class:`~channels.media.ImageError` (UNSUPPORTED)
    for another zip or a damaged one, ENCRYPTED for one behind a password."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            package = Package(archive)
            # An OpenDocument package says what it is first thing: its "mimetype" part.
            kind = (package.raw("mimetype", 100) or b"").decode("ascii", "replace").strip()
            if kind.startswith("application/vnd.oasis.opendocument."):
                return _odf(package, kind, max_chars, "content.xml")
            if package.has("word/document.xml"):
                return _docx(package, max_chars)
            if package.has("xl/workbook.xml"):
                return _xlsx(package, max_chars)
            if package.has("ppt/presentation.xml"):
                return _pptx(package, max_chars)
    except ImageError:
        raise
    except DAMAGE as exc:
        raise ImageError(UNSUPPORTED, f"an Office file that could not be read ({type(exc).__name__})") from exc
    raise ImageError(UNSUPPORTED, "a zip archive, not an Office document")


def flat_odf_text(data: bytes, kind: str, *, max_chars: int) -> str:
    """The text of a flat OpenDocument file (``.fodt``, ``.fods``,
    ``.fodp``: one XML file) that says it is ``kind``
    (:func:`~channels.odf.flat_odf_type`), read as the zipped kind is:
    streamed, a DTD refused, within the same budgets."""
    try:
        return _odf(Package.single(FLAT_PART, data), kind, max_chars, FLAT_PART)
    except ImageError:
        raise
    except DAMAGE as exc:
        raise ImageError(UNSUPPORTED, f"an OpenDocument file that could not be read ({type(exc).__name__})") from exc


# OpenDocument kinds not read, as an error may name them (it is logged):
# the file's mimetype is its own words, so any other is "another".
_ODF_OTHER = frozenset({
    f"{kind}{suffix}" for kind in ("graphics", "chart", "formula", "image", "database", "text-web")
    for suffix in ("", "-template")} - {"database-template", "text-web-template"})


def _odf(package: Package, kind: str, max_chars: int, part: str) -> str:
    if kind not in ODF_TYPES:
        other = kind.removeprefix("application/vnd.oasis.opendocument.")
        raise ImageError(UNSUPPORTED, "an OpenDocument file of a kind not read "
                                      f"({other if other in _ODF_OTHER else 'another'})")
    return odf_text(package, ODF_TYPES[kind], max_chars=max_chars, part=part)


def old_office_refusal(data: bytes) -> ImageError:
    """Why an OLE2 compound file (:data:`OLE2_MAGIC`) is not read: a
    password-protected .docx/.xlsx/.pptx (they are wrapped in one), an old
    binary Office file, or something else (an Outlook message, an
    installer). The stream names are in the file's directory, in UTF-16."""

    def named(name: str) -> bool:
        return name.encode("utf-16-le") in data

    if named("EncryptedPackage"):
        return ImageError(ENCRYPTED, "an Office file protected by a password")
    for stream, kind in (("WordDocument", ".doc"), ("Workbook", ".xls"), ("Book", ".xls"),
                         ("PowerPoint Document", ".ppt")):
        if named(stream):
            return ImageError(OLD_OFFICE, f"an old binary Office file ({kind})")
    return ImageError(UNSUPPORTED, "an OLE2 compound file, not an Office document")


def _children(node: ElementTree.Element, name: str) -> Iterator[ElementTree.Element]:
    return (child for child in node if local(child.tag) == name)


def _child(node: ElementTree.Element, name: str) -> ElementTree.Element | None:
    return next(_children(node, name), None)


def _rels(package: Package, part: str) -> dict[str, tuple[str, str]]:
    """The relationships of ``part``: id -> (type's last word, part name)."""
    folder, _, base = part.rpartition("/")
    root = package.xml(f"{folder}/_rels/{base}.rels" if folder else f"_rels/{base}.rels")
    found: dict[str, tuple[str, str]] = {}
    for rel in root.iter() if root is not None else ():
        if local(rel.tag) != "Relationship" or rel.get("TargetMode") == "External":
            continue
        rid, target, kind = rel.get("Id"), rel.get("Target"), rel.get("Type") or ""
        if rid and target:
            path = target.lstrip("/") if target.startswith("/") else posixpath.join(folder, target)
            found[rid] = (kind.rpartition("/")[2], posixpath.normpath(path))
    return found


def _rid(node: ElementTree.Element) -> str:
    """The ``r:id`` of a sheet or slide entry, which names its part in the
    relationships (a slide's entry has an ``id`` of its own as well)."""
    for key, value in node.attrib.items():
        if key.startswith("{") and "relationships" in key and local(key) == "id":
            return value
    return ""


def _choice(node: ElementTree.Element) -> ElementTree.Element | None:
    """What to read of an ``mc:AlternateContent``: its first Choice. The
    Fallback holds the same content for older readers (a text box as VML),
    and reading both would say it twice."""
    chosen = _child(node, "Choice")
    return chosen if chosen is not None else _child(node, "Fallback")


# ---- Word ----

_WORD_NAMESPACES = ("{http://schemas.openxmlformats.org/wordprocessingml/2006/main}",
                    "{http://purl.oclc.org/ooxml/wordprocessingml/main}")
# What a run's pieces say (w:t, not a:t inside a picture nor m:t in an
# equation); None: the text of w:t. Properties (w:rPr, w:pPr) hold no text.
_WORD_INLINE: dict[str, str | None] = {
    ns + name: said
    for ns in _WORD_NAMESPACES
    for name, said in (("t", None), ("tab", "\t"), ("br", "\n"), ("cr", "\n"), ("noBreakHyphen", "-"),
                       ("rPr", ""), ("pPr", ""))
}


# How a Word document is walked (:class:`~channels.xmlzip.Walk`): the body,
# a table, its rows and cells are opened; a paragraph is opened too and its
# runs taken whole, so a document is held a run at a time.
_WORD_SKIP = frozenset(["sectPr", "tblPr", "tblGrid", "sdtPr", "sdtEndPr"])
_W_DOCUMENT, _W_TABLE, _W_ROW, _W_CELL, _W_PARAGRAPH, _W_RUN, _W_BLOCK = "document", "table", "row", "cell", "p", "run", "block"
_CUT = "(the rest not read: the document is longer than I read)"


def _word_rule(tag: str, parent: str) -> tuple[str, str]:
    name = local(tag)
    if parent == _W_PARAGRAPH:
        return _W_RUN, WHOLE
    if parent == _W_TABLE:
        return (_W_ROW, OPEN) if name == "tr" else ("", SKIP)
    if parent == _W_ROW:
        return (_W_CELL, OPEN) if name == "tc" else ("", SKIP)
    if name == "p":
        return _W_PARAGRAPH, OPEN
    if name == "tbl":
        return _W_TABLE, OPEN
    if name == "AlternateContent":
        return _W_BLOCK, WHOLE
    if name in _WORD_SKIP:
        return "", SKIP
    return _W_DOCUMENT, OPEN  # body, sdt (content controls), customXml, ins...: what they hold is read


def _docx(package: Package, max_chars: int) -> str:
    """The paragraphs of a Word document, one a line; a table's rows as a
    Markdown table; a text box's paragraphs after the paragraph it sits in.
    Streamed, and read up to about ``max_chars``."""
    walk = Walk(package, "word/document.xml", _word_rule, _W_DOCUMENT, max_chars=max_chars)
    sinks: list[list[str]] = [[]]  # lines of the document, and of each table cell being read
    tables: list[list[list[str]]] = []  # rows of each table being read
    words = _Words()
    chars = 0
    for event, kind, node in walk:
        if event == "start":
            if kind == _W_PARAGRAPH:
                words = _Words()
            elif kind == _W_TABLE:
                tables.append([])
            elif kind == _W_ROW:
                tables[-1].append([])
            elif kind == _W_CELL:
                sinks.append([])
            continue
        if kind == _W_RUN:
            said = len(words.words)
            words.take(node)
            chars += sum(len(word) for word in words.words[said:])
        elif kind == _W_PARAGRAPH:
            sinks[-1].append("".join(words.words))
            for box in words.boxes:
                sinks[-1].extend(_word_blocks(box))
            chars += 1
        elif kind == _W_BLOCK:
            sinks[-1].extend(lines := _word_block(node))
            chars += sum(len(line) + 1 for line in lines)
        elif kind == _W_CELL:
            cell = sinks.pop()
            tables[-1][-1].append(" ".join(part for part in cell if part.strip()))
        elif kind == _W_TABLE:
            sinks[-1].extend(table(tables.pop()))
        if chars > max_chars:
            walk.stop()
    lines = sinks[0]
    return "\n".join([*lines, _CUT] if walk.cut else lines)


def _word_blocks(node: ElementTree.Element) -> list[str]:
    return [line for child in node for line in _word_block(child)]


def _word_block(child: ElementTree.Element) -> list[str]:
    """The lines of a part of a document read whole (a text box's)."""
    name = local(child.tag)
    if name == "p":
        text, boxes = _word_paragraph(child)
        return [text, *(line for box in boxes for line in _word_blocks(box))]
    if name == "tbl":
        rows = [[" ".join(part for part in _word_blocks(cell) if part.strip()) for cell in _children(row, "tc")]
                for row in _children(child, "tr")]
        return table(rows)
    if name == "AlternateContent":
        chosen = _choice(child)
        return _word_blocks(chosen) if chosen is not None else []
    if name in _WORD_SKIP:
        return []
    return _word_blocks(child)  # sdt (content controls), customXml, ins...


class _Words:
    """A paragraph's words, and the text boxes anchored in it (read once:
    an AlternateContent's Choice, not its Fallback), taken a run at a time."""

    def __init__(self) -> None:
        self.words: list[str] = []
        self.boxes: list[ElementTree.Element] = []

    def take(self, child: ElementTree.Element) -> None:
        tag = child.tag
        if isinstance(tag, str) and tag in _WORD_INLINE:
            said = _WORD_INLINE[tag]
            self.words.append(child.text or "" if said is None else said)
            return
        name = local(tag)
        if name == "txbxContent":
            self.boxes.append(child)
        elif name == "AlternateContent":
            chosen = _choice(child)
            if chosen is not None:
                self.inline(chosen)
        else:
            self.inline(child)

    def inline(self, node: ElementTree.Element) -> None:
        for child in node:
            self.take(child)


def _word_paragraph(paragraph: ElementTree.Element) -> tuple[str, list[ElementTree.Element]]:
    words = _Words()
    words.inline(paragraph)
    return "".join(words.words), words.boxes


# ---- Excel ----

# Built-in number formats that are dates or times (ECMA-376 18.8.30); 27-36
# and 50-58 are the Chinese, Japanese and Korean date formats.
_DATE_FORMATS = frozenset([*range(14, 23), *range(27, 37), *range(45, 48), *range(50, 59)])
_TIME_FORMATS = frozenset([18, 19, 20, 21, 45, 46, 47])
_PERCENT_FORMATS = frozenset([9, 10])
_QUOTED = re.compile(r'"[^"]*"|\\.|_.|\*.')  # literal text, escaped characters, padding
_BRACKETS = re.compile(r"\[[^\]]*\]")  # [Red], [$-409], [>100]
_ELAPSED = re.compile(r"\[[hms]+\]", re.IGNORECASE)  # [h]:mm: a duration, not a time of day
_INTEGER = re.compile(r"-?\d{1,15}")
_CELL = re.compile(r"([A-Za-z]{1,3})(\d*)")
# A sheet's cells and rows, in the transitional and strict namespaces (compared
# whole: a sheet has hundreds of thousands of elements).
_SHEET_NAMESPACES = ("{http://schemas.openxmlformats.org/spreadsheetml/2006/main}",
                     "{http://purl.oclc.org/ooxml/spreadsheetml/main}", "")
_C = frozenset(ns + "c" for ns in _SHEET_NAMESPACES)
_ROW = frozenset(ns + "row" for ns in _SHEET_NAMESPACES)
_SHEET_DATA = frozenset(ns + "sheetData" for ns in _SHEET_NAMESPACES)
_DATE = "date"
_TIME = "time"
_PERCENT = "percent"


def _number_format(code: str) -> str | None:
    """What a custom number format shows a number as: a date, a time of
    day, a percentage or (None) a number."""
    bare = _QUOTED.sub("", code)
    if _ELAPSED.search(bare):
        return None
    bare = _BRACKETS.sub("", bare).lower()
    if "%" in bare:
        return _PERCENT
    if re.search("[dy]", bare):
        return _DATE
    if re.search("[hms]", bare):
        return _TIME if "h" in bare or "s" in bare else _DATE  # "mmm" alone is a month
    return None


def _styles(package: Package, path: str | None) -> list[str | None]:
    """Each cell style (a cell's ``s``) as :func:`_number_format` says."""
    root = package.xml(path) if path else None
    if root is None:
        return []
    custom: dict[int, str | None] = {}
    for fmt in root.iter():
        if local(fmt.tag) == "numFmt" and (fmt.get("numFmtId") or "").isdigit():
            custom[int(fmt.get("numFmtId") or 0)] = _number_format(fmt.get("formatCode") or "")
    kinds: list[str | None] = []
    xfs = _child(root, "cellXfs")
    for xf in _children(xfs, "xf") if xfs is not None else ():
        raw = xf.get("numFmtId") or "0"
        fid = int(raw) if raw.isdigit() else 0
        if fid in custom:
            kinds.append(custom[fid])
        elif fid in _TIME_FORMATS:
            kinds.append(_TIME)
        elif fid in _DATE_FORMATS:
            kinds.append(_DATE)
        else:
            kinds.append(_PERCENT if fid in _PERCENT_FORMATS else None)
    return kinds


def _string_item(node: ElementTree.Element) -> str:
    """A shared or inline string: its ``t``, or its rich-text runs' ``t``;
    not the phonetic reading (``rPh``) of Japanese text."""
    parts = []
    for child in node:
        name = local(child.tag)
        if name == "t":
            parts.append(child.text or "")
        elif name == "r":
            parts.extend(t.text or "" for t in _children(child, "t"))
    return "".join(parts)


class _SharedStrings:
    """A workbook's shared strings, streamed into one UTF-8 buffer and an
    array of offsets: about the part's own size at most, where a list of
    strings (and the parsed elements left on the root) took 230 MB and
    35 s for a 57 MB part of 1.5 million strings (docs/BENCHMARKS.md,
    session 21). The parser's target keeps only the text of each ``si``
    (its ``t``, or its runs' ``t``; not the phonetic reading, ``rPh``), at
    most ``max_chars`` of one (the text kept of the workbook), counted as
    it arrives: one string of 60 MB is not held whole. The part is read to
    its end (it is refused up front when over the budget)."""

    def __init__(self, package: Package, path: str | None, max_chars: int) -> None:
        self._text = bytearray()
        self._ends = array("Q")
        if path is None or not package.has(path):
            return
        target = _StringsTarget(self, max_chars)
        parser = ElementTree.XMLParser(target=target)
        with contextlib.closing(package.chunks(path, whole=True)) as chunks:
            for chunk in chunks:
                if chunk:
                    parser.feed(chunk)
                else:
                    parser.close()

    def add(self, text: str) -> None:
        self._text += text.encode("utf-8")
        self._ends.append(len(self._text))

    def get(self, index: int) -> str | None:
        """The string at ``index``; None when there is none."""
        if not 0 <= index < len(self._ends):
            return None
        start = self._ends[index - 1] if index else 0
        return self._text[start:self._ends[index]].decode("utf-8")


class _StringsTarget:
    """sharedStrings.xml's parser target: each ``si``'s text, nothing else kept."""

    def __init__(self, strings: _SharedStrings, max_chars: int) -> None:
        self.strings = strings
        self.max_chars = max_chars
        self.depth = 0
        self.within = 0  # depth of the si being read; 0: none
        self.skip = 0  # depth of an rPh (phonetic reading) inside it; 0: none
        self.taking = False  # inside a t of the si's own text
        self.parts: list[str] = []
        self.chars = 0

    def start(self, tag: str, attrib: dict[str, str]) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ImageError(UNSUPPORTED, f"XML nested over {MAX_DEPTH} deep (sharedStrings)")
        name = tag.rpartition("}")[2]
        if not self.within:
            if name == "si":
                self.within, self.parts, self.chars = self.depth, [], 0
        elif name == "rPh" and not self.skip:
            self.skip = self.depth
        elif name == "t" and not self.skip:
            self.taking = True

    def data(self, text: str) -> None:
        if self.taking and self.chars < self.max_chars:
            text = text[:self.max_chars - self.chars]
            self.parts.append(text)
            self.chars += len(text)

    def end(self, tag: str) -> None:
        if self.depth == self.within:
            self.strings.add("".join(self.parts))
            self.within, self.parts = 0, []
        elif self.depth == self.skip:
            self.skip = 0
        self.taking = False
        self.depth -= 1


def _serial_date(value: float, kind: str, date1904: bool) -> str | None:
    """An Excel date number as ISO 8601; None when it is not a date."""
    if not 0 <= value < 2958466:  # up to 9999-12-31
        return None
    if date1904:
        base = datetime(1904, 1, 1)
    else:  # Excel counts 1900-02-29 (Lotus 1-2-3's error): from March on, a day less
        base = datetime(1899, 12, 30) if value >= 61 else datetime(1899, 12, 31)
    moment = base + timedelta(seconds=round(value * 86400))
    clock = moment.strftime("%H:%M:%S" if moment.second else "%H:%M")
    if kind == _TIME and value < 1:
        return clock
    day = moment.date().isoformat()
    return day if moment.time() == datetime.min.time() else f"{day} {clock}"


def _number(raw: str, kind: str | None, date1904: bool) -> str:
    try:
        value = float(raw)
    except ValueError:
        return raw
    if not math.isfinite(value):
        return raw
    if kind in (_DATE, _TIME):
        return _serial_date(value, kind, date1904) or raw
    if kind == _PERCENT:
        return f"{value * 100:.12g}%"
    return raw if _INTEGER.fullmatch(raw) else f"{value:.15g}"  # Excel keeps 15 digits


def _column(letters: str) -> int:
    number = 0
    for letter in letters.upper():
        number = number * 26 + ord(letter) - 64
    return number


def _xlsx(package: Package, max_chars: int) -> str:
    """Each sheet as ``## Sheet: name`` and a Markdown table of its cells,
    with its column letters and row numbers; rows and columns with nothing
    in them left out."""
    workbook = package.xml("xl/workbook.xml")
    assert workbook is not None  # office_text checked
    rels = _rels(package, "xl/workbook.xml")
    by_kind = {kind: path for kind, path in rels.values()}
    properties = _child(workbook, "workbookPr")
    date1904 = properties is not None and properties.get("date1904") in ("1", "true")
    styles = _styles(package, by_kind.get("styles", "xl/styles.xml"))
    strings = _SharedStrings(package, by_kind.get("sharedStrings", "xl/sharedStrings.xml"), max_chars)
    sheets = []
    holder = _child(workbook, "sheets")
    for sheet in _children(holder, "sheet") if holder is not None else ():
        kind, path = rels.get(_rid(sheet), ("", ""))
        if kind == "worksheet" and package.has(path):  # a chart sheet has no cells
            hidden = sheet.get("state") in ("hidden", "veryHidden")
            sheets.append((sheet.get("name") or path, hidden, path))
    out: list[str] = []
    if len(sheets) > 1:
        out.append(f"A workbook of {len(sheets)} sheets: " + ", ".join(name for name, _, _ in sheets))
    chars = _ROOM  # the last row read and the notes after it fit in the text kept
    said = False  # a workbook with no cell in it has no text
    for name, hidden, path in sheets:
        if chars >= max_chars or package.exhausted:
            out.append(f"\n## Sheet: {name}\n(not read: the workbook is longer than I read)")
            continue
        read = _worksheet(package, path, strings, styles, date1904, max_chars - chars)
        chars += read.chars
        out.append(f"\n## Sheet: {name}" + (" (hidden)" if hidden else ""))
        out.extend(read.lines() or ["(empty)"])
        said = said or bool(read.rows)
    return "\n".join(out) if said else ""


def _worksheet(
    package: Package, path: str, strings: _SharedStrings, styles: list[str | None], date1904: bool, max_chars: int
) -> Sheet:
    sheet = Sheet()
    parent: ElementTree.Element | None = None  # sheetData: its finished rows are dropped
    row_number = column = rows_seen = 0
    cells: dict[int, str] = {}
    with contextlib.closing(package.stream(path)) as batches:
        for events in batches:
            for event, node in events:
                tag = node.tag
                if event == "end":
                    if tag in _C:
                        match = _CELL.fullmatch(node.get("r") or "")
                        column = _column(match.group(1)) if match else column + 1
                        if column > MAX_COLUMNS:
                            sheet.wide = True
                            continue
                        if sheet.cut_at is not None:  # the row was cut: the rest of it is not read
                            continue
                        text = _cell(node, tag[:-1], strings, styles, date1904)
                        # A cell as long as the text kept is cut (in the room kept for the last row),
                        # the notes after it kept; the row says where it was cut, so the cells
                        # after it do not read as empty.
                        room = max_chars - sheet.chars + _ROOM // 2
                        if len(text) > room:
                            text, sheet.cut, sheet.cut_at = text[:max(room, 0)] + " …", True, (row_number, column)
                        if text.strip():
                            cells[column] = text
                            sheet.chars += len(text) + 3
                    elif tag in _ROW:
                        rows_seen += 1
                        if cells:
                            sheet.rows[row_number] = cells
                            sheet.chars += len(str(row_number)) + 4
                        if parent is not None:
                            parent.clear()
                        if sheet.cut_at is not None:
                            return sheet
                elif tag in _ROW:
                    if rows_seen >= MAX_ROWS:
                        sheet.long = True
                        return sheet
                    if sheet.chars >= max_chars:
                        sheet.cut = True
                        return sheet
                    given = node.get("r") or ""
                    row_number = int(given) if given.isdigit() else row_number + 1
                    cells, column = {}, 0
                elif tag in _SHEET_DATA:
                    parent = node
    sheet.cut = sheet.cut or package.exhausted
    return sheet


def _cell(
    node: ElementTree.Element, ns: str, strings: _SharedStrings, styles: list[str | None], date1904: bool
) -> str:
    """A cell's text as Excel shows it, near enough: a formula's cached
    result. ``ns``: the cell's namespace, as ``{...}``, or ""."""
    kind = node.get("t") or "n"
    raw = node.findtext(ns + "v") or ""
    if kind == "inlineStr":
        inline = node.find(ns + "is")
        return _string_item(inline) if inline is not None else ""
    if kind == "s":
        index = int(raw) if raw.strip().isdigit() else -1
        return strings.get(index) or ""
    if kind == "b":
        return {"1": "TRUE", "0": "FALSE"}.get(raw.strip(), raw)
    if kind in ("str", "e", "d"):  # a formula's text, an error (#DIV/0!), an ISO date
        return raw
    if not raw:
        formula = node.findtext(ns + "f")
        return f"={formula}" if formula else ""
    style = node.get("s") or "0"
    index = int(style) if style.isdigit() else 0
    return _number(raw.strip(), styles[index] if index < len(styles) else None, date1904)


# ---- PowerPoint ----

# Placeholders whose text is the slide's furniture, not its content.
_FURNITURE = frozenset(["sldNum", "dt", "ftr", "hdr", "sldImg"])


# How a slide (or its notes page) is walked: its shape tree, groups, a
# shape and its text body are opened, and each paragraph taken whole, so a
# slide of any size is held a paragraph at a time; a table's rows and cells
# are opened as Word's are. A shape's non-visual properties (which say
# whether it is a placeholder, and which) come before its text.
_S_TREE, _S_SHAPE, _S_PROPS, _S_PARAGRAPH, _S_BLOCK = "tree", "shape", "props", "p", "block"
_S_TABLE, _S_ROW, _S_CELL = "table", "row", "cell"
_SLIDE_SKIP = frozenset(["spPr", "grpSpPr", "bodyPr", "lstStyle", "style", "extLst", "xfrm", "blipFill",
                         "nvGrpSpPr", "nvPicPr", "nvGraphicFramePr", "nvCxnSpPr", "tblPr", "tblGrid", "tcPr",
                         "clrMapOvr", "transition", "timing", "bg"])
_DECK_CUT = "(the rest not read: the presentation is longer than I read)"


def _slide_rule(tag: str, parent: str) -> tuple[str, str]:
    name = local(tag)
    if parent == _S_TABLE:
        return (_S_ROW, OPEN) if name == "tr" else ("", SKIP)
    if parent == _S_ROW:
        return (_S_CELL, OPEN) if name == "tc" else ("", SKIP)
    if parent == _S_SHAPE and name == "nvSpPr":
        return _S_PROPS, WHOLE
    if name == "p" and "drawingml" in tag:
        return _S_PARAGRAPH, WHOLE
    if name == "tbl":
        return _S_TABLE, OPEN
    if name == "sp":
        return _S_SHAPE, OPEN
    if name == "AlternateContent":
        return _S_BLOCK, WHOLE
    if name in _SLIDE_SKIP:
        return "", SKIP
    return _S_TREE, OPEN  # cSld, spTree, a group, a graphic frame, a text body: what they hold is read


def _pptx(package: Package, max_chars: int) -> str:
    """Each slide, in the presentation's order, as ``## Slide N`` with its
    text (a table as a Markdown table) and its speaker notes; streamed, and
    read up to about ``max_chars``."""
    presentation = package.xml("ppt/presentation.xml")
    assert presentation is not None  # office_text checked
    rels = _rels(package, "ppt/presentation.xml")
    listed = _child(presentation, "sldIdLst")
    out: list[str] = []
    chars = 0
    said = False  # a deck of pictures only has no text
    cut = False
    for number, slide_id in enumerate(_children(listed, "sldId") if listed is not None else (), 1):
        kind, path = rels.get(_rid(slide_id), ("", ""))
        if kind != "slide" or not package.has(path):
            continue
        if number > _MAX_SLIDES or chars >= max_chars or package.exhausted:
            cut = True  # a slide left: cut only when there was more to read
            break
        shown = _Slide(package, path, max_chars - chars, max_chars)
        out.append(title := f"\n## Slide {number}" + (" (hidden)" if shown.hidden else ""))
        out.extend(shown.lines)
        chars += len(title) + 1 + shown.chars
        said = said or bool(shown.lines)
        notes = [path for kind, path in _rels(package, path).values() if kind == "notesSlide"]
        if shown.cut or (notes and chars >= max_chars):
            cut = True
            break
        spoken = _Slide(package, notes[0], max_chars - chars, max_chars) if notes else None
        if spoken is not None and spoken.lines:
            out.append("Notes:")
            out.extend(spoken.lines)
            chars += len("Notes:\n") + spoken.chars
            said = True
        if spoken is not None and spoken.cut:
            cut = True
            break
    if not said:
        return ""
    return "\n".join([*out, _DECK_CUT] if cut else out)


class _Slide:
    """The text of a slide or notes page (:func:`_drawing_lines`' lines),
    streamed, read up to about ``max_chars`` (in whole paragraphs: one is
    cut only past ``piece``, the deck's whole budget)."""

    def __init__(self, package: Package, part: str, max_chars: int, piece: int) -> None:
        self.hidden = False
        self.chars = 0
        sinks: list[list[str]] = [[]]  # lines of the slide, and of each table cell being read
        tables: list[list[list[str]]] = []
        furniture = False  # the shape being read is a slide number, a date, a footer
        walk = Walk(package, part, _slide_rule, _S_TREE, max_chars=piece)
        for event, kind, node in walk:
            if event == "start":
                if local(node.tag) == "sld":  # the root
                    self.hidden = node.get("show") in ("0", "false")
                elif kind == _S_SHAPE:
                    furniture = False
                elif kind == _S_TABLE:
                    tables.append([])
                elif kind == _S_ROW:
                    tables[-1].append([])
                elif kind == _S_CELL:
                    sinks.append([])
                continue
            lines: list[str] = []
            if kind == _S_PROPS:
                furniture = _placeholder(node) in _FURNITURE
            elif kind == _S_PARAGRAPH and not furniture:
                text = _drawing_paragraph(node)
                lines = [text] if text.strip() else []
            elif kind == _S_BLOCK:
                chosen = _choice(node)
                lines = _drawing_lines(chosen) if chosen is not None else []
            elif kind == _S_CELL:
                tables[-1][-1].append(" ".join(sinks.pop()))
            elif kind == _S_TABLE:
                lines = table(tables.pop())
            elif kind == _S_SHAPE:
                furniture = False
            sinks[-1].extend(lines)
            self.chars += sum(len(line) + 1 for line in lines)
            if self.chars > max_chars:
                walk.stop()
        self.lines = sinks[0]
        self.cut = walk.cut


def _placeholder(shape: ElementTree.Element) -> str | None:
    for node in shape.iter():
        if local(node.tag) == "ph":
            return node.get("type") or "body"
    return None


def _drawing_lines(root: ElementTree.Element) -> list[str]:
    """The text of a slide's shapes, a paragraph a line, in the order the
    shapes are drawn; empty paragraphs left out."""
    lines: list[str] = []

    def walk(node: ElementTree.Element) -> None:
        for child in node:
            name = local(child.tag)
            if name == "AlternateContent":
                chosen = _choice(child)
                if chosen is not None:
                    walk(chosen)
            elif name == "sp" and _placeholder(child) in _FURNITURE:
                continue
            elif name == "tbl":
                rows = [[" ".join(_paragraphs(cell)) for cell in _children(row, "tc")]
                        for row in _children(child, "tr")]
                lines.extend(table(rows))
            elif name == "p" and "drawingml" in str(child.tag):
                text = _drawing_paragraph(child)
                if text.strip():
                    lines.append(text)
            else:
                walk(child)

    walk(root)
    return lines


def _paragraphs(node: ElementTree.Element) -> list[str]:
    return [text for p in node.iter() if local(p.tag) == "p" and (text := _drawing_paragraph(p)).strip()]


def _drawing_paragraph(paragraph: ElementTree.Element) -> str:
    words = []
    for node in paragraph.iter():
        name = local(node.tag)
        if name == "t":
            words.append(node.text or "")
        elif name == "br":
            words.append("\n")
    return "".join(words)
