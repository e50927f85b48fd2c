"""What the Office (OOXML) and OpenDocument readers share: a zip of XML
parts read within one budget of unpacked bytes, parts streamed through
the parser and let go of as they are read, and tables written as Markdown.

A hostile package is bounded before and while it is unpacked: the parts'
unpacked bytes together are capped at :data:`MAX_XML` (counted as they are
read; zipfile holds a part to the size the zip states), an XML part that
declares a DTD is refused before its first element (its entities could
expand far past the budget: expat's amplification check allows a hundred
times the input), and a part nested deeper than :data:`_MAX_DEPTH` is
refused as damaged. A long part is read only as far as it is used:
:class:`Walk` lets go of each piece once its reader has taken it.
"""

from __future__ import annotations

import zipfile
import zlib
from collections.abc import Callable, Generator, Iterator, Sequence
from xml.etree import ElementTree
from xml.parsers import expat

from .media import UNSUPPORTED, ImageError

__all__ = [
    "DAMAGE", "ENCRYPTED", "MAX_COLUMNS", "MAX_ROWS", "MAX_XML", "OPEN", "SKIP", "WHOLE",
    "Package", "Sheet", "Walk", "column_name", "local", "table",
]

ENCRYPTED = "encrypted"  # a PDF or an office file behind a password
MAX_XML = 64 * 1024 * 1024  # XML unpacked from one file, all parts together: no zip bomb
MAX_ROWS = 5000  # of one sheet (a 1M-row sheet is read from its start)
MAX_COLUMNS = 64  # of one sheet, A..BL: a stray cell at XFD1 adds no 16,000 empty columns
_CHUNK = 64 * 1024  # a part streamed into the parser this much at a time
_MAX_DEPTH = 256  # elements nested in a part: real documents stay under 50
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
        raise ImageError(UNSUPPORTED, f"an XML part declaring a DTD, which no office file has ({self.name})")

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
    """The parts of a zip of XML parts, read within one budget of unpacked bytes."""

    def __init__(self, archive: zipfile.ZipFile) -> None:
        self.archive = archive
        self.parts = {info.filename: info for info in archive.infolist()}
        self.budget = MAX_XML
        self.exhausted = False  # a part was left unread: the budget ran out

    def has(self, name: str) -> bool:
        return name in self.parts

    def _over(self, name: str) -> ImageError:
        return ImageError(UNSUPPORTED, f"an office file of over {MAX_XML} bytes unpacked ({name})")

    def raw(self, name: str, limit: int) -> bytes | None:
        """The first ``limit`` bytes of the part ``name`` (not XML: ODF's
        ``mimetype``); None when there is no such part."""
        info = self.parts.get(name)
        if info is None:
            return None
        with self.archive.open(info) as part:
            data = part.read(min(limit, self.budget))
        self.budget -= len(data)
        return data

    def xml(self, name: str) -> ElementTree.Element | None:
        """The part ``name`` parsed whole (a small one: relationships,
        styles, a slide); None when the file has no such part."""
        info = self.parts.get(name)
        if info is None:
            return None
        if info.file_size > self.budget:
            raise self._over(name)
        self.budget -= info.file_size
        data = self.archive.read(info)
        _Prolog(name).feed(data, last=True)
        return ElementTree.fromstring(data)

    def stream(self, name: str, *, whole: bool = False) -> Generator[list[tuple[str, ElementTree.Element]], None, None]:
        """The part ``name``'s start and end events, a chunk's at a time,
        fed to the parser as it goes: a long part is read only as far as
        it is used (close the iterator to stop). Its unpacked bytes count
        against the budget as they are read; where the budget ends, so does
        the part (:attr:`exhausted`). ``whole``: a part of use only whole
        (the shared strings, a Word document) is refused up front when it
        is over the budget."""
        info = self.parts.get(name)
        if info is None:
            return
        if whole and info.file_size > self.budget:
            raise self._over(name)
        prolog = _Prolog(name)
        parser: ElementTree.XMLPullParser[ElementTree.Element] = ElementTree.XMLPullParser(events=("start", "end"))
        with self.archive.open(info) as part:
            while True:
                if self.budget <= 0:
                    self.exhausted = True
                    return
                chunk = part.read(min(_CHUNK, self.budget))
                prolog.feed(chunk, last=not chunk)
                if chunk:
                    self.budget -= len(chunk)
                    parser.feed(chunk)
                else:
                    parser.close()
                # start and end events only were asked for: each an element
                yield [(item[0], item[1]) for item in parser.read_events() if isinstance(item[-1], ElementTree.Element)]
                if not chunk:
                    return


# How a walk takes an element, as its rule says from the element's tag and
# its parent's kind: OPEN, its children each taken by the rule in turn (a
# document's body, a table, a sheet); WHOLE, handed over complete, then let
# go of (a paragraph, a row); SKIP, let go of unread (a tracked deletion).
OPEN, WHOLE, SKIP = "open", "whole", "skip"
_INNER = "inner"  # inside a WHOLE element: it is handed over with it
Rule = Callable[[str, str], tuple[str, str]]  # (tag, parent's kind) -> (kind, how)


class Walk:
    """A part's elements as its reader takes them, streamed: iterating
    gives ``("start", kind, element)`` for an OPEN element (its attributes
    are there, not its children) and ``("end", kind, element)`` for an OPEN
    or WHOLE one, complete; once the reader goes on, that element is let
    go of, so a long document costs the memory of one piece at a time.

    :meth:`stop` (the reader has read enough) or the part's end before
    its elements close (the budget ran out, a piece over :data:`_MAX_PIECE`)
    ends the walk with the open elements' ends, innermost first, so the
    reader closes what it started; :attr:`cut` then says the rest was not
    read."""

    def __init__(self, package: Package, part: str, rule: Rule, root: str) -> None:
        self.package = package
        self.part = part
        self.rule = rule
        self.root = root
        self.cut = False
        self._stopped = False

    def stop(self) -> None:
        self._stopped = True

    def __iter__(self) -> Iterator[tuple[str, str, ElementTree.Element]]:
        return self._walk()

    def _walk(self) -> Generator[tuple[str, str, ElementTree.Element], None, None]:
        stack: list[tuple[ElementTree.Element, str, str]] = []  # element, kind, how
        piece = 0  # elements in the WHOLE element being read
        events = self.package.stream(self.part, whole=True)
        try:
            for batch in events:
                for event, node in batch:
                    if event == "start":
                        if len(stack) >= _MAX_DEPTH:
                            raise ImageError(UNSUPPORTED, f"XML nested over {_MAX_DEPTH} deep ({self.part})")
                        if not stack:
                            kind, how = self.root, OPEN
                        else:
                            _, parent, within = stack[-1]
                            if within == OPEN:
                                kind, how = self.rule(node.tag, parent)
                            else:
                                kind, how = parent, (SKIP if within == SKIP else _INNER)
                        stack.append((node, kind, how))
                        if how == _INNER:
                            piece += 1
                            if piece > _MAX_PIECE:
                                self.cut = True
                                break
                        elif how == WHOLE:
                            piece = 0
                        elif how == OPEN:
                            yield "start", kind, node
                            if self._stopped:
                                break
                        continue
                    node, kind, how = stack.pop()
                    if how == _INNER:
                        continue
                    if how != SKIP:
                        yield "end", kind, node
                    if stack:
                        stack[-1][0].remove(node)
                    node.clear()
                    if self._stopped:
                        break
                else:
                    continue
                self.cut = True
                break
        finally:
            events.close()
        if stack:
            self.cut = True
        # What was open ends where the reading did (a WHOLE element as read so far).
        while stack:
            node, kind, how = stack.pop()
            if how in (OPEN, WHOLE):
                yield "end", kind, node


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

    def lines(self) -> list[str]:
        used = sorted({col for row in self.rows.values() for col in row})
        if not used:
            return []
        first, last = used[0], used[-1]
        header = ["", *(column_name(col) for col in range(first, last + 1))]
        body = [[str(number), *(row.get(col, "") for col in range(first, last + 1))]
                for number, row in sorted(self.rows.items())]
        lines = table([header, *body])
        if self.wide:
            lines.append(f"(columns after {column_name(MAX_COLUMNS)} not read)")
        if self.long:
            lines.append(f"(only the first {MAX_ROWS:,} rows read)")
        if self.cut:
            lines.append("(the rest not read: the workbook is longer than I read)")
        return lines
