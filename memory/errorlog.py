"""An exception as log fields, without its text.

An exception's text may quote what a user sent or what memory keeps (a
CHECK failure quoting a value, FTS5 quoting the query, a file's name, a
provider's body echoing the prompt). :func:`error_fields` gives what an
operator needs instead: the type, where it was raised, the frames it came
through, the types of its causes, and the codes that say what went wrong
and are never words: an ``OSError``'s errno and its name (``ENOSPC``),
SQLite's error name (``SQLITE_FULL``, ``SQLITE_CONSTRAINT_CHECK``), an
HTTP status.

It lives in ``memory`` because ``memory`` must not import ``gateway``;
``gateway.logging`` re-exports it.
"""

from __future__ import annotations

import errno
import re
import traceback
from pathlib import Path
from typing import Any

__all__ = ["Wordless", "codes", "error_brief", "error_fields"]

class Wordless(Exception):
    """An exception whose text is written to be logged: no user's words,
    no secret (a type's name, a status, a provider's vetted summary). Its
    text is given as ``said`` by :func:`error_fields` and after its name by
    :func:`error_brief`; any other exception's text is never given."""


_SAID_MAX = 300
_SQLITE_NAME = re.compile(r"SQLITE_[A-Z_]+")
_ROOT = Path(__file__).resolve().parent.parent  # the project's files are named from here
_FRAMES_KEPT = 20
_CAUSES_KEPT = 5
_CODES_DEPTH = 8


def error_fields(exc: BaseException) -> dict[str, Any]:
    """A log line's fields for ``exc`` without its text: its type
    (``error``), the frame it was raised in (``at``: "path:line in
    function"), the frames it came through, innermost last (``frames``:
    not ``stack``, which structlog's console renderer takes for a string),
    the types of the exceptions it came from (``caused_by``), and, from
    it or else from the nearest cause that has them, ``errno`` and
    ``errno_name``, ``sqlite_error``, ``status`` and ``code``; and the text of a
    :class:`Wordless` exception (``said``)."""
    stack = [f"{_short(f.filename)}:{f.lineno} in {f.name}"
             for f in traceback.extract_tb(exc.__traceback__)[-_FRAMES_KEPT:]]
    out: dict[str, Any] = {"error": _type_name(exc), "at": stack[-1] if stack else "", "frames": stack}
    chain = [exc]
    e: BaseException | None = exc
    while e is not None and len(chain) <= _CAUSES_KEPT:
        e = e.__cause__ or (None if e.__suppress_context__ else e.__context__)
        if e is not None:
            chain.append(e)
    if isinstance(exc, Wordless) and (said := str(exc)):
        out["said"] = said[:_SAID_MAX]
    if len(chain) > 1:
        out["caused_by"] = [_type_name(c) for c in chain[1:]]
    out.update({k: v for k, v in codes(exc).items() if k not in out})
    return out


def codes(exc: BaseException) -> dict[str, Any]:
    """``errno``, ``errno_name``, ``sqlite_error``, ``status`` and ``code``, each from
    ``exc`` or else the nearest exception it came from that has it. A
    context hidden by ``raise ... from None`` is searched too: httpx does
    that to the kernel's ECONNREFUSED, and a code is never words."""
    out: dict[str, Any] = {}
    e: BaseException | None = exc
    for _ in range(_CODES_DEPTH):
        if e is None:
            break
        try:
            found = _codes(e)
        except Exception:  # a library's attribute that raises: a log line must not
            found = {}
        for key, value in found.items():
            out.setdefault(key, value)
        e = e.__cause__ or e.__context__
    return out


def error_brief(exc: BaseException) -> str:
    """``exc`` in a few words for an exception's or a report's text, none
    of them its own: "ConnectError (ECONNREFUSED)", "OperationalError
    (SQLITE_FULL)", "HTTPStatusError (HTTP 503)"."""
    found = codes(exc)
    said = [found.get("errno_name") or (f"errno {found['errno']}" if "errno" in found else ""),
            found.get("sqlite_error", ""), f"HTTP {found['status']}" if "status" in found else ""]
    said = [x for x in said if x]
    name = f"{type(exc).__name__}: {str(exc)[:_SAID_MAX]}" if isinstance(exc, Wordless) and str(exc) else type(exc).__name__
    return f"{name} ({', '.join(said)})" if said else name


def _codes(exc: BaseException) -> dict[str, Any]:
    """The numbers and names ``exc`` carries that say what failed; never
    its message, nor ``strerror`` or ``filename`` (a path may be a user's
    file's name)."""
    out: dict[str, Any] = {}
    number = exc.errno if isinstance(exc, OSError) else None
    if isinstance(number, int) and not isinstance(number, bool):
        out["errno"] = number
        if name := errno.errorcode.get(number):
            out["errno_name"] = name
    # Set by Python (3.11+) on the errors SQLite itself raised, not on one made by hand.
    if isinstance(name := getattr(exc, "sqlite_errorname", None), str) and _SQLITE_NAME.fullmatch(name):
        out["sqlite_error"] = name
    status = getattr(exc, "status", None)  # aiohttp's, ours (LLMUnavailable...)
    if not _is_int(status):
        status = getattr(getattr(exc, "response", None), "status_code", None)  # httpx.HTTPStatusError
    if _is_int(status):
        out["status"] = status
    if _is_int(code := getattr(exc, "code", None)):  # a platform's error code (Feishu's 230002)
        out["code"] = code
    return out


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _type_name(exc: BaseException) -> str:
    kind = type(exc)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def _short(filename: str) -> str:
    """A frame's file from the project's root, or a library's from its
    package ("aiohttp/web_protocol.py"), not the machine's paths."""
    path = Path(filename)
    try:
        return path.resolve().relative_to(_ROOT).as_posix()
    except (ValueError, OSError):
        parts = path.parts
        for marker in ("site-packages", "dist-packages"):
            if marker in parts:
                return "/".join(parts[parts.index(marker) + 1:])
        return path.name
