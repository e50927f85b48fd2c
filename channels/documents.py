"""Files users send (notes, a log, a PDF, a Word, Excel or PowerPoint
file or its OpenDocument kin), read as text for the model with their
message (``agent.documents``).

A channel downloads the bytes its own way and hands them to
:func:`read_document`, which decides what they are from the bytes, not
from the file name or the platform's type: a PDF (``%PDF-``, its text
layer read by pypdf), an Office file (a zip holding ``word/document.xml``,
``xl/workbook.xml`` or ``ppt/presentation.xml``, or an OpenDocument zip
whose ``mimetype`` part says text, spreadsheet or presentation, or a flat
OpenDocument XML file whose root says so: channels/office.py and odf.py
read its paragraphs, sheets as tables, slides and their notes), or plain
text in
UTF-8, UTF-16/32 with a byte order mark, GB18030 (Chinese Windows' default)
or Windows-1252. Anything else (an archive, an old binary .doc/.xls/.ppt,
a program, a scanned PDF without text) is refused with a
:class:`~channels.media.ImageError` whose reason picks the note the user
gets (:func:`document_note`): the old Office formats' note names the fix.
A scanned PDF goes to a model that reads pictures as its first pages'
scans instead (:func:`read_scanned`, called by the channel base).

The text is cut to ``max_tokens`` (estimated as memory/tokens.py does):
a file is read for one turn, and a whole book would cost every reply's
budget. Reading runs in a worker thread: a PDF is parsed in pure Python.
"""

from __future__ import annotations

import io
import re
import zlib
from typing import Any

from gateway.bus import FILE_NOT_READ, Document, Image
from memory.tokens import prefix_within

from .media import FAILED, MAX_IMAGES, TOO_LARGE, UNSUPPORTED, ImageError, _megabytes, as_image, sniff_mime
from .odf import flat_odf_type
from .png import GREY, PALETTE, RGB, png
from .office import ENCRYPTED, OLD_OFFICE, OLE2_MAGIC, flat_odf_text, office_text, old_office_refusal

__all__ = [
    "ENCRYPTED", "FILE_NOT_READ", "KEEP_CHARS", "NO_TEXT", "OLD_OFFICE",
    "document_note", "document_placeholder", "read_document", "read_scanned",
]

NO_TEXT = "no_text"  # a PDF of scanned pages: pictures, no text layer
# What is kept of a file for reading on (gateway/recent_files.py): a long
# book; a PDF's pages are read up to it, which costs time once.
KEEP_CHARS = 500_000
_MAX_PAGES = 1000  # a PDF's pages read at most (its text usually runs out of budget well before)
# Control characters (Unicode Cc) but tab, line breaks and escape (ANSI
# colours in a log): more than 1% of them means binary.
_CONTROLS = re.compile(r"[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f-\x9f]")
# Counted as what is left once the others are removed: findall would make
# a string of every match (a Chinese file is mostly matches).
_ASCII_RUNS = re.compile(r"[\x00-\x7f]+")
_CHINESE_RUNS = re.compile(r"[\u4e00-\u9fff\u3000-\u303f\uff00-\uffef]+")  # Han, CJK punctuation, full width


def read_document(data: bytes, name: str, *, max_bytes: int, max_tokens: int) -> Document:
    """The text of the file ``name`` (``data``), cut to ``max_tokens``; raises
    :class:`~channels.media.ImageError` when it is over ``max_bytes`` or not
    a file whose text can be read."""
    if len(data) > max_bytes:
        raise ImageError(TOO_LARGE, f"{len(data)} bytes, over the {max_bytes} byte limit")
    head = data[:1024]
    if b"%PDF-" in head:
        text, pages = _pdf_text(data, max_chars=KEEP_CHARS)
    elif data.startswith(b"PK\x03\x04"):
        text, pages = office_text(data, max_chars=KEEP_CHARS), None
    elif data.startswith(OLE2_MAGIC):
        raise old_office_refusal(data)
    elif sniff_mime(data) is not None:
        raise ImageError(UNSUPPORTED, "a picture, not a text file")
    elif (flat := flat_odf_type(data)) is not None:  # XML, but read as the document it is, not its source
        text, pages = flat_odf_text(data, flat, max_chars=KEEP_CHARS), None
    else:
        decoded = _decode(data)
        if decoded is None:
            raise ImageError(UNSUPPORTED, f"not text ({len(data)} bytes)")
        text, pages = decoded, None
    text = text.replace("\r\n", "\n").replace("\r", "\n").strip()
    if not text:
        raise ImageError(NO_TEXT if pages else UNSUPPORTED, "no text in the file")
    shown = prefix_within(text, max_tokens).rstrip("\n")
    more = text[:KEEP_CHARS] if len(shown) < len(text) else ""
    return Document(name=_safe_name(name), text=shown, total_chars=len(text), pages=pages, more=more)


def read_scanned(data: bytes, name: str, *, max_image_bytes: int) -> tuple[Document, tuple[Image, ...]] | None:
    """A scanned PDF (no text layer, :data:`NO_TEXT`) for a model that reads
    pictures: its first pages' scans, at most ``MAX_IMAGES``, each up to
    ``max_image_bytes``, with a note for the model in place of the text.
    JPEG scans (what scanners and phone apps mostly write), whose bytes are
    a picture as they are, and Flate-encoded ones (what PNG-like scans and
    many PDF writers give) framed as a PNG; None when there is none to send.
    Other encodings (CCITT fax, JBIG2, JPEG 2000) are not pictures a model
    takes and would need an image library to convert."""
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    pictures: list[Image] = []
    last = 0  # the last page a scan was taken from
    try:
        reader = PdfReader(io.BytesIO(data))
        count = len(reader.pages)
        for number, page in enumerate(reader.pages, 1):
            if number > MAX_IMAGES or len(pictures) >= MAX_IMAGES:
                break
            resources = page.get("/Resources")
            objects = resources.get_object().get("/XObject") if resources is not None else None
            for ref in objects.get_object().values() if objects is not None else ():
                image = ref.get_object()
                picture = _scan(image, max_image_bytes) if image.get("/Subtype") == "/Image" else None
                if picture is None:
                    continue
                try:
                    pictures.append(as_image(picture, max_image_bytes))
                except ImageError:  # too large, or not a JPEG after all: the next one
                    continue
                last = number
                if len(pictures) >= MAX_IMAGES:
                    break
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, RecursionError, NotImplementedError,
            zlib.error):  # zlib: a damaged Flate image
        return None
    if not pictures:
        return None
    which = "Its page" if count == 1 else "Page 1" if last == 1 else f"Pages 1-{last}"
    scans = "a picture" if len(pictures) == 1 else f"{len(pictures)} pictures"
    note = (f"(A scanned PDF of {count} page{'s' if count > 1 else ''} with no text layer. {which} attached as"
            f" {scans}: read the text from {'it' if len(pictures) == 1 else 'them'}."
            + (" The later pages were not sent: say so when that matters." if count > last else "") + ")")
    return Document(name=_safe_name(name), text=note, total_chars=len(note), pages=count), tuple(pictures)


def _scan(image: Any, max_bytes: int) -> bytes | None:
    """A PDF page image's bytes as a picture: a JPEG's as they are, Flate-
    encoded samples as a PNG (:func:`~channels.png.png`); None for another
    kind, or one whose samples alone are over ten times ``max_bytes``
    (checked before they are inflated)."""
    filters = image.get("/Filter")
    names = list(filters) if isinstance(filters, list) else [filters]
    if "/DCTDecode" in names:
        data: bytes = image.get_data()
        return data
    if names != ["/FlateDecode"] or image.get("/ImageMask") or image.get("/Decode") is not None:
        return None  # a mask, or samples whose values mean something else (inverted)
    colour, palette = _colour(image.get("/ColorSpace"))
    width, height, depth = (int(image.get(key, 0)) for key in ("/Width", "/Height", "/BitsPerComponent"))
    if colour is None or width * height * depth * (3 if colour == RGB else 1) > 80 * max_bytes:
        return None
    return png(width, height, colour, depth, image.get_data(), palette)


def _colour(space: Any) -> tuple[int | None, bytes]:
    """A PDF colour space as a PNG colour type (and its palette); None for
    one PNG has not (CMYK, Lab, separations)."""
    space = space.get_object() if hasattr(space, "get_object") else space
    if space in ("/DeviceGray", "/CalGray"):
        return GREY, b""
    if space in ("/DeviceRGB", "/CalRGB"):
        return RGB, b""
    if not isinstance(space, list) or not space:
        return None, b""
    family = space[0]
    if family in ("/CalGray", "/CalRGB"):
        return _colour(family)
    if family == "/ICCBased" and len(space) > 1:
        components = space[1].get_object().get("/N")
        return {1: (GREY, b""), 3: (RGB, b"")}.get(int(components or 0), (None, b""))
    if family == "/Indexed" and len(space) > 3 and _colour(space[1])[0] == RGB:
        lookup = space[3].get_object()
        table = lookup.get_data() if hasattr(lookup, "get_data") else (
            lookup.get_original_bytes() if hasattr(lookup, "get_original_bytes") else bytes(lookup))
        return PALETTE, bytes(table[:3 * (int(space[2]) + 1)])
    return None, b""


def document_placeholder(name: str) -> str:
    """What stands for a file in the history and memory: ``[file notes.md]``."""
    return f"[file {_safe_name(name)}]"


def document_note(reason: str, max_bytes: int, *, has_text: bool, zh: bool = False) -> str:
    """The short note a user gets for a file that was not read; ``zh``: in Chinese."""
    if zh:
        return _DOCUMENT_NOTES_ZH[reason].format(limit=_megabytes(max_bytes, zh=True)) + ("我先根据你的文字回复。" if has_text else "")
    if reason == TOO_LARGE:
        note = f"That file is too large for me to read (the limit is {_megabytes(max_bytes)})."
    elif reason == UNSUPPORTED:
        note = ("I can read text files, PDFs and Word documents (and Excel and PowerPoint files, "
                "and LibreOffice's .odt, .ods, .odp and .fodt, .fods, .fodp), but not that kind of file.")
    elif reason == ENCRYPTED:
        note = "That file is protected by a password, so I could not read it."
    elif reason == OLD_OFFICE:
        note = ("That is an old Office file (.doc, .xls or .ppt), which I cannot read. "
                "Save it as .docx / .xlsx / .pptx or PDF and send it again.")
    elif reason == NO_TEXT:
        note = "That PDF has no text I can read (scanned pages?). A text PDF or a screenshot would work."
    else:
        assert reason == FAILED, reason
        note = "Sorry, I could not download that file. Please send it again."
    return note + (" I am answering your text without it." if has_text else "")


_DOCUMENT_NOTES_ZH = {
    TOO_LARGE: "这个文件太大了，我读不了（上限 {limit}）。",
    UNSUPPORTED: ("我能读文本文件、PDF 和 Word 文档（以及 Excel、PowerPoint 文件，和 LibreOffice 的"
                  " .odt、.ods、.odp、.fodt、.fods、.fodp），但读不了这种文件。"),
    ENCRYPTED: "这个文件设了密码，我打不开。",
    OLD_OFFICE: "这是旧版 Office 文件（.doc、.xls 或 .ppt），我读不了。请另存为 .docx / .xlsx / .pptx 或 PDF 后重新发送。",
    NO_TEXT: "这个 PDF 里没有我能读取的文字（可能是扫描件？）。发文字版 PDF 或截图都可以。",
    FAILED: "抱歉，这个文件没能下载下来，请重新发送。",
}


def _safe_name(name: str) -> str:
    # A file name is the sender's text: one line, no brackets closing the marker.
    flat = " ".join((name or "file").split()).replace("[", "(").replace("]", ")")
    return flat[:80] or "file"


def _decode(data: bytes) -> str | None:
    """``data`` as text, or None when it does not read as text."""
    for bom, encoding in (
        (b"\xef\xbb\xbf", "utf-8"),
        (b"\xff\xfe\x00\x00", "utf-32-le"),
        (b"\x00\x00\xfe\xff", "utf-32-be"),
        (b"\xff\xfe", "utf-16-le"),
        (b"\xfe\xff", "utf-16-be"),
    ):
        if data.startswith(bom):
            try:
                return _textual(data[len(bom):].decode(encoding))
            except UnicodeDecodeError:
                return None
    if b"\x00" in data[:8192]:  # UTF-16 without a mark, or binary: either way not ours to guess
        return None
    try:
        return _textual(data.decode("utf-8"))
    except UnicodeDecodeError:
        pass
    try:
        text = data.decode("gb18030")
    except UnicodeDecodeError:
        text = ""
    # Windows-1252 bytes may happen to pair up as GB18030; a real GB18030
    # file is mostly Chinese wherever it is not ASCII.
    wide = len(_ASCII_RUNS.sub("", text))
    if wide and len(text) - len(_CHINESE_RUNS.sub("", text)) >= 0.8 * wide:
        return _textual(text)
    try:
        return _textual(data.decode("cp1252"))
    except UnicodeDecodeError:
        return None


def _textual(text: str) -> str | None:
    return text if len(_CONTROLS.findall(text)) <= len(text) // 100 else None


def _pdf_text(data: bytes, *, max_chars: int) -> tuple[str, int]:
    """The text layer of a PDF, page by page until ``max_chars``; and its
    page count."""
    from pypdf import PdfReader  # imported when a PDF comes: it is not on the reply path otherwise
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):  # an owner password alone still opens
            raise ImageError(ENCRYPTED, "a PDF protected by a password")
        count = len(reader.pages)
        parts: list[str] = []
        chars = 0
        for number, page in enumerate(reader.pages, 1):
            if number > _MAX_PAGES or chars > max_chars:
                break
            words = (page.extract_text() or "").strip()
            if words:
                parts.append(f"[page {number}]\n{words}" if count > 1 else words)
                chars += len(words)
    except ImageError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, RecursionError, NotImplementedError) as exc:
        # pypdf raises a range of errors on a damaged file; none may lose the message.
        raise ImageError(UNSUPPORTED, f"a PDF that could not be read ({type(exc).__name__})") from exc
    return "\n\n".join(parts), count
