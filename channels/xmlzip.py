"""What the Office (OOXML) and OpenDocument readers share: a zip of XML
parts read within one budget of unpacked bytes, parts streamed through
the parser and let go of as they are read, and tables written as Markdown.

A hostile package is bounded before and while it is unpacked: the parts'
unpacked bytes together are capped at :data:`MAX_XML` (counted as they are
read; zipfile holds a part to the size the zip states), an XML part that
declares a DTD is refused before its first element (its entities could
expand far past the budget: expat's amplification check allows a hundred
times the input), and a part nested deeper than :data:`MAX_DEPTH` is
refused as damaged. A long part is read only as far as it is used:
:class:`Walk` builds only the pieces its reader takes, lets go of each
once taken, and keeps no more than the text kept of any one of them (a
paragraph of 60 MB is cut as its text arrives). A flat OpenDocument file
is read as a package of one part (:meth:`Package.single`).
"""

from __future__ import annotations

import contextlib
import io
import re
import zipfile
import zlib
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import IO
from xml.etree import ElementTree
from xml.parsers import expat

from .media import UNSUPPORTED, ImageError

__all__ = [
    "DAMAGE", "ENCRYPTED", "MAX_COLUMNS", "MAX_DEPTH", "MAX_ROWS", "MAX_XML", "OPEN", "SKIP", "WHOLE",
    "Event", "Package", "Sheet", "Walk", "column_name", "local", "table",
]

ENCRYPTED = "encrypted"  # a PDF or an office file behind a password
# Part names an error may say (it is logged): the standard ones, a number
# the only free part. Any other name is the file's own words (a sheet's
# path comes from the workbook's relationships).
_STANDARD_PART = re.compile(
    r"(?:(?:word|xl|ppt|xl/worksheets|ppt/slides|ppt/notesSlides|META-INF)/)?(?:_rels/)?"
    r"(?:document|workbook|sharedStrings|styles|presentation|settings|content|meta|manifest|numbering|footnotes"
    r"|endnotes|comments|sheet\d+|slide\d+|notesSlide\d+|\[Content_Types\])?\.(?:xml|rels|xml\.rels)")


def part_label(name: str) -> str:
    """``name`` for an error's text if it is a standard part's, else
    "another part": a name of the file's own may carry anyone's words."""
    return name if _STANDARD_PART.fullmatch(name) else "another part"


MAX_XML = 64 * 1024 * 1024  # XML unpacked from one file, all parts together: no zip bomb
MAX_ROWS = 5000  # of one sheet (a 1M-row sheet is read from its start)
MAX_COLUMNS = 64  # of one sheet, A..BL: a stray cell at XFD1 adds no 16,000 empty columns
_CHUNK = 64 * 1024  # a part streamed into the parser this much at a time
MAX_DEPTH = 256  # elements nested in a part: real documents stay under 50
# Elements in one piece a walk takes whole (a paragraph, a spreadsheet row,
# a slide's shape): a real one has hundreds. Past it the text is cut there.
_MAX_PIECE = 50_000
DAMAGE = (
    zipfile.BadZipFile, zipfile.LargeZipFile, ElementTree.ParseError, expat.ExpatError, OSError, EOFError,
    RuntimeError, ValueError, KeyError, IndexError, LookupError, NotImplementedError, RecursionError, zlib.error,
)  # what zipfile and expat raise on a damaged or exotic file (RuntimeError: a zip with a password;
#    LookupError: an XML declaration naming an unknown encoding)


def local(tag: object) -> str:
    """An element's name without its namespace (transitional and strict
    OOXML name the same parts in different namespaces). A comment's tag is
    a function: no name."""
    return tag.rpartition("}")[2] if isinstance(tag, str) else ""


class _Root(Exception):
    """The prolog's end: the first element started."""


class _Prolog:
    """Refuses an XML part that declares a DTD. It is fed the part's bytes
    ahead of the real parser until the first element starts (a DOCTYPE
    can only come before it), so an entity is never declared, let alone
    expanded. OOXML and ODF parts never have one."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.done = False
        self.parser = expat.ParserCreate()
        self.parser.StartDoctypeDeclHandler = self._doctype
        self.parser.StartElementHandler = self._element

    def _doctype(self, *_: object) -> None:
        raise ImageError(UNSUPPORTED, f"an XML part declaring a DTD, which no office file has ({part_label(self.name)})")

    def _element(self, *_: object) -> None:
        raise _Root

    def feed(self, chunk: bytes, *, last: bool = False) -> None:
        if self.done:
            return
        try:
            self.parser.Parse(chunk, last)
        except _Root:
            self.done = True


class Package:
    """The parts of a zip of XML parts (or of one XML file: a flat
    OpenDocument, :meth:`single`), read within one budget of unpacked bytes."""

    def __init__(self, archive: zipfile.ZipFile | None, *, single: tuple[str, bytes] | None = None) -> None:
        self.archive = archive
        self.parts: dict[str, zipfile.ZipInfo] = {info.filename: info for info in archive.infolist()} if archive else {}
        self._single = single
        self.budget = MAX_XML
        self.exhausted = False  # a part was left unread: the budget ran out

    @classmethod
    def single(cls, name: str, data: bytes) -> Package:
        """One XML file read as a package of one part, ``name``."""
        return cls(None, single=(name, data))

    def has(self, name: str) -> bool:
        return name in self.parts or (self._single is not None and self._single[0] == name)

    def _size(self, name: str) -> int | None:
        if self._single is not None:
            return len(self._single[1]) if self._single[0] == name else None
        info = self.parts.get(name)
        return None if info is None else info.file_size

    def _open(self, name: str) -> IO[bytes]:
        if self._single is not None:
            return io.BytesIO(self._single[1])
        assert self.archive is not None
        return self.archive.open(self.parts[name])  # held to the size the zip states

    def _over(self, name: str) -> ImageError:
        return ImageError(UNSUPPORTED, f"an office file of over {MAX_XML} bytes unpacked ({part_label(name)})")

    def raw(self, name: str, limit: int) -> bytes | None:
        """The first ``limit`` bytes of the part ``name`` (not XML: ODF's
        ``mimetype``); None when there is no such part."""
        if self._size(name) is None:
            return None
        with self._open(name) as part:
            data = part.read(min(limit, self.budget))
        self.budget -= len(data)
        return data

    def xml(self, name: str) -> ElementTree.Element | None:
        """The part ``name`` parsed whole (a small one: relationships,
        styles, a manifest); None when the file has no such part."""
        size = self._size(name)
        if size is None:
            return None
        if size > self.budget:
            raise self._over(name)
        self.budget -= size
        with self._open(name) as part:
            data = part.read(size + 1)
        _Prolog(name).feed(data, last=True)
        return ElementTree.fromstring(data)

    def chunks(self, name: str, *, whole: bool = False) -> Generator[bytes, None, None]:
        """The part ``name``'s bytes, a chunk at a time, its prolog checked
        (no DTD), ending with ``b""`` when the part is read to its end: a
        long part is read only as far as it is used (close the iterator to
        stop). Its unpacked bytes count against the budget as they are
        read; where the budget ends, so does the part (:attr:`exhausted`).
        ``whole``: a part of use only whole (the shared strings, a Word
        document) is refused up front when it is over the budget."""
        size = self._size(name)
        if size is None:
            return
        if whole and size > self.budget:
            raise self._over(name)
        prolog = _Prolog(name)
        with self._open(name) as part:
            while True:
                if self.budget <= 0:
                    self.exhausted = True
                    return
                chunk = part.read(min(_CHUNK, self.budget))
                prolog.feed(chunk, last=not chunk)
                self.budget -= len(chunk)
                yield chunk
                if not chunk:
                    return

    def stream(self, name: str, *, whole: bool = False) -> Generator[list[tuple[str, ElementTree.Element]], None, None]:
        """The part ``name``'s start and end events, a chunk's at a time,
        fed to the parser as :meth:`chunks` reads them."""
        parser: ElementTree.XMLPullParser[ElementTree.Element] = ElementTree.XMLPullParser(events=("start", "end"))
        with contextlib.closing(self.chunks(name, whole=whole)) as chunks:
            for chunk in chunks:
                if chunk:
                    parser.feed(chunk)
                else:
                    parser.close()
                # start and end events only were asked for: each an element
                yield [(item[0], item[1]) for item in parser.read_events() if isinstance(item[-1], ElementTree.Element)]


# How a walk takes an element, as its rule says from the element's tag and
# its parent's kind: OPEN, its children each taken by the rule in turn (a
# document's body, a table, a sheet); WHOLE, handed over complete, then let
# go of (a paragraph, a row); SKIP, let go of unread (a tracked deletion).
OPEN, WHOLE, SKIP = "open", "whole", "skip"
_INNER = "inner"  # inside a WHOLE element: it is handed over with it
Rule = Callable[[str, str], tuple[str, str]]  # (tag, parent's kind) -> (kind, how)
Event = tuple[str, str, ElementTree.Element]  # ("start" or "end", kind, element)


class _Cut(Exception):
    """The walk's target has read as much as it may."""


class _Target:
    """The parser's target for a :class:`Walk`: it sorts elements by the
    rule as they start, builds only what the reader is handed (an OPEN
    element without its children, a WHOLE one complete; nothing of a SKIP
    one), and keeps at most ``max_chars`` of a WHOLE element's text, counted
    as the text arrives: one paragraph of 60 MB is not held whole."""

    def __init__(self, walk: Walk, max_chars: int) -> None:
        self.walk = walk
        self.max_chars = max_chars
        self.stack: list[tuple[ElementTree.Element | None, str, str, str]] = []  # element, kind, how, tag
        self.events: list[Event] = []
        self.builder: ElementTree.TreeBuilder | None = None  # of the WHOLE element being read
        self.piece = 0  # elements in it
        self.chars = 0  # characters of text kept in it
        self.cut = False  # a limit was reached: nothing more is taken

    def start(self, tag: str, attrib: dict[str, str]) -> None:
        if self.cut:
            return
        stack = self.stack
        if len(stack) >= MAX_DEPTH:
            raise ImageError(UNSUPPORTED, f"XML nested over {MAX_DEPTH} deep ({part_label(self.walk.part)})")
        if not stack:
            kind, how = self.walk.root, OPEN
        else:
            _, parent, within, _ = stack[-1]
            if within == OPEN:
                kind, how = self.walk.rule(tag, parent)
            else:
                kind, how = parent, (SKIP if within == SKIP else _INNER)
        node: ElementTree.Element | None = None
        if how == _INNER:
            self.piece += 1
            if self.piece > _MAX_PIECE:
                self._stop()
            assert self.builder is not None
            node = self.builder.start(tag, attrib)
        elif how == WHOLE:
            self.builder, self.piece, self.chars = ElementTree.TreeBuilder(), 1, 0
            node = self.builder.start(tag, attrib)
        elif how == OPEN:
            node = ElementTree.Element(tag, attrib)
            self.events.append(("start", kind, node))
        stack.append((node, kind, how, tag))

    def data(self, text: str) -> None:
        if self.cut or not self.stack or self.builder is None or self.stack[-1][2] not in (WHOLE, _INNER):
            return  # white space between OPEN elements' children, or a SKIP element's text
        room = self.max_chars - self.chars
        self.chars += len(text)
        self.builder.data(text[:max(room, 0)] if len(text) > room else text)
        if self.chars > self.max_chars:
            self._stop()

    def end(self, tag: str) -> None:
        if self.cut:
            return
        node, kind, how, _ = self.stack.pop()
        if how == _INNER:
            assert self.builder is not None
            self.builder.end(tag)
        elif how == WHOLE:
            assert self.builder is not None and node is not None
            self.builder.end(tag)
            self.builder = None
            self.events.append(("end", kind, node))
        elif how == OPEN:
            assert node is not None
            self.events.append(("end", kind, node))

    def _stop(self) -> None:
        self.cut = True
        raise _Cut

    def unwind(self) -> None:
        """The elements still open end where the reading did, innermost
        first (a WHOLE element with what was read of it)."""
        while self.stack:
            node, kind, how, tag = self.stack.pop()
            if how in (WHOLE, _INNER) and self.builder is not None:
                self.builder.end(tag)
            if how in (OPEN, WHOLE) and node is not None:
                self.events.append(("end", kind, node))


class Walk:
    """A part's elements as its reader takes them, streamed: iterating
    gives ``("start", kind, element)`` for an OPEN element (its attributes
    are there, not its children) and ``("end", kind, element)`` for an OPEN
    or WHOLE one, complete; nothing else of the part is kept, so a long
    document costs the memory of one piece at a time.

    :meth:`stop` (the reader has read enough) or the part's end before
    its elements close (the budget ran out, a piece over :data:`_MAX_PIECE`
    elements or ``max_chars`` characters) ends the walk with the open
    elements' ends, innermost first, so the reader closes what it started;
    :attr:`cut` then says the rest was not read."""

    def __init__(self, package: Package, part: str, rule: Rule, root: str, *, max_chars: int,
                 whole: bool = True) -> None:
        self.package = package
        self.whole = whole  # see Package.chunks
        self.part = part
        self.rule = rule
        self.root = root
        self.max_chars = max_chars
        self.cut = False
        self._stopped = False

    def stop(self) -> None:
        self._stopped = True

    def __iter__(self) -> Iterator[Event]:
        return self._walk()

    def _walk(self) -> Generator[Event, None, None]:
        target = _Target(self, self.max_chars)
        parser = ElementTree.XMLParser(target=target)
        opened: list[Event] = []  # the OPEN elements the reader was given the start of
        with contextlib.closing(self.package.chunks(self.part, whole=self.whole)) as chunks:
            for chunk in chunks:
                try:
                    if chunk:
                        parser.feed(chunk)
                    else:
                        parser.close()
                except _Cut:
                    pass
                events, target.events = target.events, []
                for event in events:
                    if event[0] == "start":
                        opened.append(event)
                    elif opened and event[2] is opened[-1][2]:
                        opened.pop()
                    yield event
                    if self._stopped:
                        break
                if self._stopped or target.cut:
                    break
        if self._stopped:
            # What the reader started ends here; the parser may have read on.
            self.cut = True
            for _, kind, node in reversed(opened):
                yield "end", kind, node
            return
        if target.stack:
            self.cut = True
            target.unwind()
            yield from target.events


def table(rows: Sequence[Sequence[str]]) -> list[str]:
    """Rows as a Markdown table, the first as its header; short rows padded."""
    width = max((len(row) for row in rows), default=0)
    if not width:
        return []
    lines = []
    for number, row in enumerate(rows):
        cells = [" ".join(cell.split()).replace("|", "\\|") for cell in row] + [""] * (width - len(row))
        lines.append("| " + " | ".join(cells) + " |")
        if number == 0:
            lines.append("|" + "---|" * width)
    return lines


def column_name(number: int) -> str:
    name = ""
    while number:
        number, rest = divmod(number - 1, 26)
        name = chr(65 + rest) + name
    return name


class Sheet:
    """A worksheet's rows as read: row number -> column -> text."""

    def __init__(self) -> None:
        self.rows: dict[int, dict[int, str]] = {}
        self.chars = 0
        self.wide = False  # a cell past MAX_COLUMNS was left out
        self.long = False  # rows past MAX_ROWS were left out
        self.cut = False  # rows past the text kept (max_chars) were left out
        self.cut_at: tuple[int, int] | None = None  # (row, column) of a cell cut mid-row: the row's rest unread

    def lines(self) -> list[str]:
        used = sorted({col for row in self.rows.values() for col in row})
        if not used:
            return []
        first, last = used[0], used[-1]
        header = ["", *(column_name(col) for col in range(first, last + 1))]
        cut_row, cut_col = self.cut_at or (0, 0)
        body = [[str(number), *(row.get(col, "…" if number == cut_row and col > cut_col else "")
                                for col in range(first, last + 1))]
                for number, row in sorted(self.rows.items())]  # a cut row's unread cells: "…", not empty
        lines = table([header, *body])
        if self.wide:
            lines.append(f"(columns after {column_name(MAX_COLUMNS)} not read)")
        if self.long:
            lines.append(f"(only the first {MAX_ROWS:,} rows read)")
        if self.cut_at is not None:
            row, col = self.cut_at
            lines.append(f"(row {row} cut at {column_name(col)}{row}: its cells after it not read)")
        if self.cut:
            lines.append("(the rest not read: the workbook is longer than I read)")
        return lines
