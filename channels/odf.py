"""OpenDocument files read as text (``.odt``, ``.ods``, ``.odp``, as
LibreOffice and WPS write them, and the flat ``.fodt``, ``.fods``, ``.fodp``), in the shapes the Office readers give
their kin (channels/office.py): a text document's paragraphs a line each
(headings as Markdown ``#``, lists as ``- `` items, tables as Markdown
tables, footnotes as ``[^1]`` with their text at the end), a spreadsheet's
sheets as tables with column letters and row numbers, a presentation's
slides in order with their speaker notes.

An ODF file is a zip whose first part, ``mimetype``, says what it is;
its text is all in ``content.xml``, streamed (:class:`~channels.xmlzip.Walk`)
and read up to about ``max_chars``. A flat one is that content alone, one
XML file under an ``office:document`` root that says what it is, read by
the same code. A spreadsheet cut short names the sheets it did not reach
from its settings (``settings.xml``, a flat file's ``office:settings``). One behind a password (its manifest
names how each part is encrypted) is refused as ENCRYPTED.

ODF text is mixed content: words sit in an element's text and in its
children's tails; runs of white space in them count as one space (ODF
1.2, 6.1.2), the real ones are ``text:s``, ``text:tab`` and
``text:line-break``.
"""

from __future__ import annotations

import re
from xml.etree import ElementTree

from .media import UNSUPPORTED, ImageError
from .xmlzip import ENCRYPTED, MAX_COLUMNS, MAX_ROWS, OPEN, SKIP, WHOLE, Package, Sheet, Walk, local, table

__all__ = ["FLAT_PART", "ODF_TYPES", "flat_odf_type", "odf_text"]

_TEXT_DOC, _SPREADSHEET, _PRESENTATION = "text", "spreadsheet", "presentation"
_ODF = "application/vnd.oasis.opendocument."
# What the mimetype part says -> what is read; templates read as documents.
ODF_TYPES = {
    _ODF + kind + suffix: kind
    for kind in (_TEXT_DOC, _SPREADSHEET, _PRESENTATION) for suffix in ("", "-template")
} | {_ODF + "text-master": _TEXT_DOC}

# A flat OpenDocument file (.fodt, .fods, .fodp): one XML file whose root,
# office:document, names what it is; read as the one part of a package.
FLAT_PART = "document.xml"
_FLAT_ROOT = re.compile(
    rb'\s*(?:<\?xml[^>]*\?>\s*)?(?:<!--.*?-->\s*)*(?:<!DOCTYPE[^\[>]*(?:\[.*?\])?\s*>\s*)?'
    rb'<(?:[\w.-]+:)?document\s[^>]*?\bmimetype="(application/vnd\.oasis\.opendocument\.[\w.-]+)"', re.DOTALL)
_FLAT_HEAD = 64 * 1024  # its root comes first, with its namespaces: a few KB
_SETTINGS_ROOM = 1024 * 1024  # of the unpacked budget, kept for settings.xml when the sheets run past it
_MAX_SLIDES = 1000
_ROOM = 10_000  # characters of a workbook's text kept for its last row and notes
_CUT = "(the rest not read: the document is longer than I read)"

_O = "{urn:oasis:names:tc:opendocument:xmlns:office:1.0}"
_T = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
_TB = "{urn:oasis:names:tc:opendocument:xmlns:table:1.0}"
_D = "{urn:oasis:names:tc:opendocument:xmlns:drawing:1.0}"
_P = "{urn:oasis:names:tc:opendocument:xmlns:presentation:1.0}"
_S = "{urn:oasis:names:tc:opendocument:xmlns:style:1.0}"
_DR3D = "{urn:oasis:names:tc:opendocument:xmlns:dr3d:1.0}"
_C = "{urn:oasis:names:tc:opendocument:xmlns:config:1.0}"

_PARAGRAPHS = frozenset([_T + "p", _T + "h"])
_LIST_ITEMS = frozenset([_T + "list-item", _T + "list-header"])
_ROW_GROUPS = frozenset([_TB + "table-header-rows", _TB + "table-rows", _TB + "table-row-group"])
_CELLS = frozenset([_TB + "table-cell", _TB + "covered-table-cell"])
# Blocks with no text for the reader: declarations, forms, comments, a
# table's column styles, and tracked deletions (the text that was deleted).
_NOT_TEXT = frozenset([
    _T + "tracked-changes", _T + "sequence-decls", _T + "variable-decls", _T + "user-field-decls",
    _T + "dde-connection-decls", _O + "forms", _O + "annotation", _O + "annotation-end", _T + "soft-page-break",
    _TB + "table-columns", _TB + "table-column", _TB + "table-header-columns", _TB + "table-column-group",
    _T + "ruby-text", _T + "note-citation", _P + "notes",
])
# A slide's furniture, as PowerPoint's placeholders (office.py's _FURNITURE).
_FURNITURE = frozenset(["page-number", "footer", "date-time", "header"])
_SPACES = re.compile(r"[ \t\r\n]+")
_DEFAULT_NAME = re.compile(r"(?i)(page|slide)\s*\d+")  # a slide LibreOffice or PowerPoint named
_DURATION = re.compile(r"-?PT(\d+)H(\d+)M(\d+(?:\.\d+)?)S")

# How content.xml is walked (kinds of element; see channels/xmlzip.py).
_DOC, _STYLES, _STYLE, _BODY = "document", "styles", "style", "body"
_BLOCK, _PARAGRAPH, _LIST, _ITEM, _SHAPE = "block", "paragraph", "list", "item", "shape"
_TABLE, _ROWS, _ROW, _CELL = "table", "rows", "row", "cell"
_SHEET, _SHEET_ROWS, _SHEET_ROW = "sheet", "sheet rows", "sheet row"
_PAGE, _NOTES = "page", "notes"
_SETTINGS = "settings"


def _rule(tag: str, parent: str) -> tuple[str, str]:
    if parent == _DOC:
        return {_O + "body": (_BODY, OPEN), _O + "automatic-styles": (_STYLES, OPEN),
                _O + "settings": (_SETTINGS, OPEN)}.get(tag, ("", SKIP))
    if parent == _SETTINGS:  # maps of maps, down to the sheets' names (_SheetsReader.settings)
        return ("", SKIP) if tag == _C + "config-item" else (_SETTINGS, OPEN)
    if parent == _STYLES:
        return (_STYLE, WHOLE) if tag == _S + "style" else ("", SKIP)
    if parent == _BODY:
        return {_O + "text": (_TEXT_DOC, OPEN), _O + "spreadsheet": (_SPREADSHEET, OPEN),
                _O + "presentation": (_PRESENTATION, OPEN)}.get(tag, ("", SKIP))
    if parent == _SPREADSHEET:
        return (_SHEET, OPEN) if tag == _TB + "table" else ("", SKIP)
    if parent in (_SHEET, _SHEET_ROWS):
        if tag == _TB + "table-row":
            return _SHEET_ROW, WHOLE
        return (_SHEET_ROWS, OPEN) if tag in _ROW_GROUPS else ("", SKIP)
    if parent == _PRESENTATION:
        return (_PAGE, OPEN) if tag == _D + "page" else ("", SKIP)
    if parent in (_PAGE, _NOTES):
        return (_NOTES, OPEN) if tag == _P + "notes" else (_SHAPE, WHOLE)
    if parent in (_TABLE, _ROWS):
        if tag == _TB + "table-row":
            return _ROW, OPEN
        return (_ROWS, OPEN) if tag in _ROW_GROUPS else ("", SKIP)
    if parent == _ROW:
        return (_CELL, OPEN) if tag in _CELLS else ("", SKIP)
    if parent == _LIST:
        return (_ITEM, WHOLE) if tag in _LIST_ITEMS else ("", SKIP)
    # A text document's blocks: in its body, a section, a table cell.
    if tag in _PARAGRAPHS:
        return _PARAGRAPH, WHOLE
    if tag == _T + "list":
        return _LIST, OPEN
    if tag == _TB + "table":
        return _TABLE, OPEN
    if tag in _NOT_TEXT or tag.endswith("-source"):  # an index's template (a table of contents')
        return "", SKIP
    if tag.startswith((_D, _DR3D)):
        return _SHAPE, WHOLE
    return _BLOCK, OPEN  # a section, an index's body...: what it holds is read


def flat_odf_type(data: bytes) -> str | None:
    """What a flat OpenDocument file says it is (its root's
    ``office:mimetype``); None when ``data`` is not one."""
    found = _FLAT_ROOT.match(data, 3 if data.startswith(b"\xef\xbb\xbf") else 0, _FLAT_HEAD)
    return found.group(1).decode("ascii") if found else None


def odf_text(package: Package, kind: str, *, max_chars: int, part: str = "content.xml") -> str:
    """The text of an OpenDocument ``kind`` (:data:`ODF_TYPES`' values)
    whose content is the part ``part`` (a flat file's: :data:`FLAT_PART`)."""
    manifest = package.xml("META-INF/manifest.xml")
    if package.has("encrypted-package") or any(
            local(node.tag) in ("encryption-data", "keyinfo") for node in (manifest.iter() if manifest is not None else ())):
        raise ImageError(ENCRYPTED, "an OpenDocument file protected by a password")
    if not package.has(part):
        raise ImageError(UNSUPPORTED, f"an OpenDocument file without its {part}")
    # A spreadsheet is of use as far as it is read: past the budget it is read
    # to it (and its sheets named), not refused.
    walk = Walk(package, part, _rule, _DOC, max_chars=max_chars, whole=kind != _SPREADSHEET)
    hidden: set[str] = set()  # styles of a hidden sheet or slide
    reader = {_TEXT_DOC: _TextReader, _SPREADSHEET: _SheetsReader, _PRESENTATION: _SlidesReader}[kind](
        walk, hidden, max_chars)
    room = _SETTINGS_ROOM if kind == _SPREADSHEET and package.has("settings.xml") else 0
    package.budget -= room
    _read(walk, reader, hidden)
    package.budget += room
    if isinstance(reader, _SheetsReader) and walk.cut and not reader.settings:
        # The sheets past where reading stopped are named in settings.xml (as LibreOffice and WPS write it).
        _read(Walk(package, "settings.xml", _rule, _DOC, max_chars=max_chars, whole=False), reader, hidden)
    return reader.text()


def _read(walk: Walk, reader: _Reader, hidden: set[str]) -> None:
    for event, what, node in walk:
        if what == _STYLE:
            for properties in node:
                if (properties.get(_TB + "display") == "false" or properties.get(_P + "visibility") == "hidden"):
                    hidden.add(node.get(_S + "name") or "")
        else:
            reader.take(event, what, node)


def _count(node: ElementTree.Element, attribute: str, cap: int) -> int:
    """A repeat count (``table:number-rows-repeated``...), 1 when not given,
    at most ``cap``: LibreOffice writes a million empty rows as one."""
    raw = node.get(attribute) or ""
    return max(1, min(int(raw), cap)) if raw.isdigit() and len(raw) < 12 else 1


class _Text:
    """ODF text elements as lines, and the footnotes met in them."""

    def __init__(self) -> None:
        self.notes: list[str] = []

    def blocks(self, node: ElementTree.Element, depth: int = 0) -> list[str]:
        return [line for child in node for line in self.block(child, depth)]

    def block(self, node: ElementTree.Element, depth: int = 0) -> list[str]:
        tag = node.tag
        if not isinstance(tag, str) or tag in _NOT_TEXT or tag.endswith("-source"):
            return []
        if tag in _PARAGRAPHS:
            text, shapes = self.paragraph(node)
            if tag == _T + "h" and text.strip():
                raw = node.get(_T + "outline-level") or ""
                level = int(raw) if raw.isdigit() and len(raw) < 3 else 1
                text = "#" * min(max(level, 1), 6) + " " + text
            return [text, *(line for shape in shapes for line in self.drawing(shape))]
        if tag == _T + "list":
            return [line for item in node if item.tag in _LIST_ITEMS for line in self.item(item, depth)]
        if tag == _TB + "table":
            return table(self.rows(node))
        if tag.startswith((_D, _DR3D)):
            return self.drawing(node)
        return self.blocks(node, depth)

    def item(self, item: ElementTree.Element, depth: int) -> list[str]:
        """A list item as ``- text``, its further paragraphs under it and
        a list in it indented; a list header has no bullet."""
        indent, marker = "  " * depth, "- " if item.tag == _T + "list-item" else "  "
        lines: list[str] = []
        for child in item:
            if child.tag == _T + "list":
                lines.extend(self.block(child, depth + 1))
            elif child.tag == _T + "h":  # a numbered heading is written in a list: still a heading
                lines.extend(self.block(child, depth))
            else:
                for line in self.block(child, depth):
                    if line.strip():
                        lines.append(indent + marker + line)
                        marker = "  "
        return lines

    def rows(self, node: ElementTree.Element) -> list[list[str]]:
        """A text table's rows (in row groups too), repeats written out."""
        rows: list[list[str]] = []
        for child in node:
            if child.tag in _ROW_GROUPS:
                rows.extend(self.rows(child))
            elif child.tag == _TB + "table-row":
                row: list[str] = []
                for cell in child:
                    if cell.tag in _CELLS:
                        text = " ".join(part for part in self.blocks(cell) if part.strip())
                        row.extend([text] * _count(cell, _TB + "number-columns-repeated", MAX_COLUMNS - len(row)))
                rows.extend([row] * (_count(child, _TB + "number-rows-repeated", MAX_ROWS) if any(row) else 1))
        return rows

    def drawing(self, node: ElementTree.Element) -> list[str]:
        """A frame's text box or table (its first: a frame's other children
        are the same content for other readers), a shape's or a group's text;
        not a slide's furniture, nor an empty placeholder."""
        if node.get(_P + "class") in _FURNITURE or node.get(_P + "placeholder") == "true":
            return []
        if node.tag == _D + "frame":
            for child in node:
                if child.tag == _D + "text-box":
                    return self.blocks(child)
                if child.tag == _TB + "table":
                    return table(self.rows(child))
            return []
        return self.blocks(node)

    def paragraph(self, node: ElementTree.Element) -> tuple[str, list[ElementTree.Element]]:
        """A paragraph's words, and the frames and shapes anchored in it (read after it)."""
        words: list[str] = []
        shapes: list[ElementTree.Element] = []
        self._inline(node, words, shapes)
        return "".join(words), shapes

    def _inline(self, node: ElementTree.Element, words: list[str], shapes: list[ElementTree.Element]) -> None:
        if node.text:
            words.append(_SPACES.sub(" ", node.text))
        for child in node:
            tag = child.tag
            if not isinstance(tag, str) or tag in _NOT_TEXT:
                pass
            elif tag == _T + "s":
                words.append(" " * _count(child, _T + "c", 1000))
            elif tag == _T + "tab":
                words.append("\t")
            elif tag == _T + "line-break":
                words.append("\n")
            elif tag == _T + "note":
                citation = (child.findtext(_T + "note-citation") or "").strip() or str(len(self.notes) + 1)
                body = child.find(_T + "note-body")
                said = " ".join(line.strip() for line in self.blocks(body) if line.strip()) if body is not None else ""
                words.append(f"[^{citation}]")
                self.notes.append(f"[^{citation}]: {said}")
            elif tag.startswith((_D, _DR3D)):
                shapes.append(child)
            else:  # a span, a link, a field (its text is what it shows)
                self._inline(child, words, shapes)
            if child.tail:
                words.append(_SPACES.sub(" ", child.tail))


class _Reader:
    """What a walk of content.xml gives, read as one kind of document."""

    def __init__(self, walk: Walk, hidden: set[str], max_chars: int) -> None:
        self.walk = walk
        self.hidden = hidden
        self.max_chars = max_chars
        self.chars = 0
        self.text_reader = _Text()

    def take(self, event: str, kind: str, node: ElementTree.Element) -> None:
        raise NotImplementedError

    def text(self) -> str:
        raise NotImplementedError


class _TextReader(_Reader):
    """A text document (.odt): its blocks a line each, tables as Markdown
    tables (a cell's blocks joined by a space), footnotes at the end."""

    def __init__(self, walk: Walk, hidden: set[str], max_chars: int) -> None:
        super().__init__(walk, hidden, max_chars)
        self.sinks: list[list[str]] = [[]]  # lines of the document, and of each table cell being read
        self.tables: list[list[list[str]]] = []
        self.repeats: list[int] = []  # each open cell's number-columns-repeated

    def take(self, event: str, kind: str, node: ElementTree.Element) -> None:
        if event == "start":
            if kind == _TABLE:
                self.tables.append([])
            elif kind == _ROW:
                self.tables[-1].append([])
            elif kind == _CELL:
                self.sinks.append([])
                self.repeats.append(_count(node, _TB + "number-columns-repeated", MAX_COLUMNS))
            return
        lines: list[str] = []
        if kind in (_PARAGRAPH, _SHAPE):
            lines = self.text_reader.block(node)
        elif kind == _ITEM:
            lines = self.text_reader.item(node, 0)
        elif kind == _CELL:
            text = " ".join(part for part in self.sinks.pop() if part.strip())
            row = self.tables[-1][-1]
            row.extend([text] * min(self.repeats.pop(), max(MAX_COLUMNS - len(row), 1)))
        elif kind == _ROW:
            row = self.tables[-1][-1]
            if any(row):
                self.tables[-1].extend([row] * (_count(node, _TB + "number-rows-repeated", MAX_ROWS) - 1))
        elif kind == _TABLE:
            lines = table(self.tables.pop())
        self.sinks[-1].extend(lines)
        self.chars += sum(len(line) + 1 for line in lines)
        if self.chars > self.max_chars:
            self.walk.stop()

    def text(self) -> str:
        lines = self.sinks[0]
        if self.walk.cut:
            lines.append(_CUT)
        notes = self.text_reader.notes
        return "\n".join([*lines, "", *notes] if notes else lines)


class _SheetsReader(_Reader):
    """A spreadsheet (.ods): each sheet as ``## Sheet: name`` and a
    Markdown table, as an Excel workbook's (office.py's _xlsx)."""

    def __init__(self, walk: Walk, hidden: set[str], max_chars: int) -> None:
        super().__init__(walk, hidden, max_chars)
        self.names: list[str] = []
        self.out: list[str] = []
        self.chars = _ROOM  # the last row read and the notes after it fit in the text kept
        self.sheet: Sheet | None = None  # the sheet being read; None past the text kept
        self.done = False  # the sheet's rows past its caps are not read
        self.row_number = self.rows_seen = 0
        self.said = False
        self.settings: list[str] = []  # every sheet's name, as the settings list them
        self.in_tables = False  # in the settings' map of the sheets

    def take(self, event: str, kind: str, node: ElementTree.Element) -> None:
        if kind == _SETTINGS:
            if node.tag == _C + "config-item-map-named":
                self.in_tables = event == "start" and node.get(_C + "name") == "Tables"
            elif self.in_tables and event == "start" and node.tag == _C + "config-item-map-entry":
                self.settings.append(node.get(_C + "name") or "")
        elif kind == _SHEET and event == "start":
            name = node.get(_TB + "name") or f"Sheet{len(self.names) + 1}"
            self.names.append(name)
            if self.chars >= self.max_chars or self.walk.cut:
                self.out.append(f"\n## Sheet: {name}\n(not read: the workbook is longer than I read)")
                self.sheet = None
                return
            hidden = node.get(_TB + "style-name") in self.hidden
            self.out.append(f"\n## Sheet: {name}" + (" (hidden)" if hidden else ""))
            self.sheet, self.done, self.row_number, self.rows_seen = Sheet(), False, 0, 0
        elif kind == _SHEET and self.sheet is not None:
            self.sheet.cut = self.sheet.cut or self.walk.cut
            self.chars += self.sheet.chars
            self.out.extend(self.sheet.lines() or ["(empty)"])
            self.said = self.said or bool(self.sheet.rows)
            self.sheet = None
        elif kind == _SHEET_ROW and self.sheet is not None and not self.done:
            self._row(self.sheet, node)

    def _row(self, sheet: Sheet, node: ElementTree.Element) -> None:
        repeat = _count(node, _TB + "number-rows-repeated", 1 << 20)
        cells: dict[int, str] = {}
        column = 0
        for cell in node:
            if cell.tag not in _CELLS:
                continue
            span = _count(cell, _TB + "number-columns-repeated", 1 << 14)
            text = self._cell(cell) if cell.tag == _TB + "table-cell" else ""
            # A cell as long as the text kept is cut (in the room kept for the last row), the notes after it
            # kept; the row says where it was cut, so the cells after it do not read as empty (as in an .xlsx).
            room = self.max_chars - self.chars - sheet.chars - sum(len(said) + 3 for said in cells.values()) + _ROOM // 2
            if len(text) > room:
                text, sheet.cut, self.done = text[:max(room, 0)] + " …", True, True
                sheet.cut_at, span, repeat = (self.row_number + 1, column + 1), 1, 1
            if text.strip():
                for at in range(column + 1, column + span + 1):
                    if at > MAX_COLUMNS:
                        sheet.wide = True
                        break
                    cells[at] = text
            column += span
            if sheet.cut_at is not None:
                break
        first = self.row_number + 1
        self.row_number += repeat
        if not cells:  # an empty run, however long, is one row read
            self.rows_seen += 1
            return
        size = sum(len(text) + 3 for text in cells.values())
        for number in range(first, first + repeat):  # a row repeated with its text: written out, within the caps
            if self.rows_seen >= MAX_ROWS:
                sheet.long = self.done = True
                return
            if sheet.chars >= self.max_chars - self.chars:
                sheet.cut = self.done = True
                sheet.cut_at = None  # a row cut mid-way but not shown at all names no cell
                return
            sheet.rows[number] = cells
            sheet.chars += size + len(str(number)) + 4
            self.rows_seen += 1

    def _cell(self, cell: ElementTree.Element) -> str:
        """What the cell shows (its paragraphs, as LibreOffice wrote them
        in the cell's format), else its value."""
        shown = "\n".join(line for line in self.text_reader.blocks(cell) if line.strip())
        if shown.strip():
            return shown
        kind = cell.get(_O + "value-type") or ""
        if kind == "date":
            moment = (cell.get(_O + "date-value") or "").replace("T", " ")
            return moment.removesuffix(" 00:00:00").removesuffix(":00")
        if kind == "time":
            match = _DURATION.fullmatch(cell.get(_O + "time-value") or "")
            return f"{int(match.group(1)):02d}:{match.group(2)}" if match else ""
        if kind == "boolean":
            return {"true": "TRUE", "false": "FALSE"}.get(cell.get(_O + "boolean-value") or "", "")
        if kind == "string":
            return cell.get(_O + "string-value") or ""
        value = cell.get(_O + "value") or ""
        if kind == "percentage":
            try:
                return f"{float(value) * 100:.12g}%"
            except ValueError:
                return value
        return value

    def text(self) -> str:
        if not self.said:
            return ""
        out, names = self.out, self.names
        if self.walk.cut:  # the sheets after the one reading stopped in, as the settings name them
            rest = [name for name in self.settings if name and name not in names]
            out = [*out, *(f"\n## Sheet: {name}\n(not read: the workbook is longer than I read)" for name in rest)]
            names = [*names, *rest]
            if not self.settings:
                out.append("(any sheets after it not read either: the workbook is longer than I read)")
        head = [f"A workbook of {len(names)} sheets: " + ", ".join(names)] if len(names) > 1 else []
        return "\n".join([*head, *out])


class _SlidesReader(_Reader):
    """A presentation (.odp): each slide as ``## Slide N`` (and the name
    given to it) with its text and its speaker notes, as a PowerPoint
    deck's (office.py's _pptx)."""

    def __init__(self, walk: Walk, hidden: set[str], max_chars: int) -> None:
        super().__init__(walk, hidden, max_chars)
        self.out: list[str] = []
        self.number = 0
        self.shown: list[str] = []
        self.spoken: list[str] = []
        self.in_notes = False
        self.said = False

    def take(self, event: str, kind: str, node: ElementTree.Element) -> None:
        if kind == _PAGE and event == "start":
            self.number += 1
            self.shown, self.spoken, self.in_notes = [], [], False
        elif kind == _NOTES:
            self.in_notes = event == "start"
        elif kind == _SHAPE:
            lines = [line for line in self.text_reader.drawing(node) if line.strip()]
            (self.spoken if self.in_notes else self.shown).extend(lines)
        elif kind == _PAGE:
            name = node.get(_D + "name") or ""
            title = f"\n## Slide {self.number}" + (f": {name}" if name and not _DEFAULT_NAME.fullmatch(name) else "")
            self.out.append(title + (" (hidden)" if node.get(_D + "style-name") in self.hidden else ""))
            self.out.extend(self.shown)
            if self.spoken:
                self.out.append("Notes:")
                self.out.extend(self.spoken)
            self.said = self.said or bool(self.shown or self.spoken)
            self.chars += sum(len(line) + 1 for line in (*self.shown, *self.spoken))
            if self.chars > self.max_chars or self.number >= _MAX_SLIDES:
                self.walk.stop()

    def text(self) -> str:
        if not self.said:
            return ""
        return "\n".join([*self.out, _CUT] if self.walk.cut else self.out)
