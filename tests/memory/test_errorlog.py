"""memory/errorlog.py: an exception's log fields without its text, with
the codes that tell an operator what went wrong (errno name, SQLite's
error name, an HTTP status)."""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

import httpx
import pytest

from memory.errorlog import error_fields

WORD = "zanzibar-8806"  # what a user said, in the exception's text


def test_type_place_and_frames_never_the_text() -> None:
    try:
        raise ValueError(f"my pin is {WORD}")
    except ValueError as exc:
        fields = error_fields(exc)
    assert fields["error"] == "ValueError"
    assert fields["at"].startswith("tests/memory/test_errorlog.py:") and fields["at"].endswith("in test_type_place_and_frames_never_the_text")
    assert WORD not in repr(fields)


def test_an_os_error_gives_its_errno_and_its_name_not_its_file(tmp_path: Path) -> None:
    try:
        os.rmdir(tmp_path / f"{WORD}.txt")  # the file's name is the user's
    except OSError as exc:
        fields = error_fields(exc)
    assert fields["errno"] == errno.ENOENT and fields["errno_name"] == "ENOENT"
    assert fields["error"] == "FileNotFoundError" and WORD not in repr(fields)


def test_a_full_disk_is_named() -> None:
    fields = error_fields(OSError(errno.ENOSPC, f"No space left on device: '{WORD}'"))
    assert fields["errno_name"] == "ENOSPC" and WORD not in repr(fields)


def test_an_errno_with_no_name_is_the_number_alone() -> None:
    fields = error_fields(OSError(-2, "Name or service not known"))  # socket.gaierror's kind
    assert fields["errno"] == -2 and "errno_name" not in fields


def test_a_sqlite_error_gives_sqlite_s_error_name_not_the_values_it_quotes(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "x.db")
    conn.execute("CREATE TABLE t (words TEXT CHECK (words NOT LIKE '%8806%'))")
    with pytest.raises(sqlite3.IntegrityError) as err:
        conn.execute("INSERT INTO t VALUES (?)", (WORD,))
    conn.close()
    fields = error_fields(err.value)
    assert fields["sqlite_error"] == "SQLITE_CONSTRAINT_CHECK"
    assert fields["error"] == "sqlite3.IntegrityError" and "8806" not in repr(fields)


def test_an_http_status_error_gives_the_status_not_the_body() -> None:
    request = httpx.Request("POST", f"https://api.example.com/v1/{WORD}")
    response = httpx.Response(503, request=request, text=f"upstream said {WORD}")
    try:
        response.raise_for_status()
    except httpx.HTTPStatusError as exc:
        fields = error_fields(exc)
    assert fields["status"] == 503 and fields["error"] == "httpx.HTTPStatusError" and WORD not in repr(fields)


def test_an_exception_s_own_integer_status_is_kept() -> None:
    class Refused(Exception):
        def __init__(self, text: str, status: int) -> None:
            super().__init__(text)
            self.status = status

    assert error_fields(Refused(WORD, 429))["status"] == 429
    odd = Refused(WORD, 0)
    odd.status = WORD  # type: ignore[assignment]  # not a number: not a field
    assert "status" not in error_fields(odd)


def test_the_codes_of_a_cause_are_found_when_the_error_itself_has_none() -> None:
    """A wrapper (the inbox's NotKept) raised from a full disk still says so."""
    class NotKept(Exception):
        pass

    try:
        try:
            raise sqlite3.OperationalError(f"database or disk is full: {WORD}")
        except sqlite3.OperationalError as low:
            raise NotKept("OperationalError") from low
    except NotKept as exc:
        fields = error_fields(exc)
    assert fields["caused_by"] == ["sqlite3.OperationalError"]
    assert WORD not in repr(fields)
    # Python sets sqlite_errorname only on errors SQLite raised: none here, and none made up.
    assert "sqlite_error" not in fields


def test_a_cause_s_errno_is_found() -> None:
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as low:
            raise RuntimeError(f"could not write {WORD}") from low
    except RuntimeError as exc:
        fields = error_fields(exc)
    assert fields["errno_name"] == "ENOSPC" and fields["caused_by"] == ["OSError"] and WORD not in repr(fields)


def test_a_code_behind_raise_from_none_is_found_and_briefed() -> None:
    """httpx hides the kernel's ECONNREFUSED behind ``from None``; the code is still what failed."""
    from memory.errorlog import error_brief

    try:
        try:
            raise ConnectionRefusedError(errno.ECONNREFUSED, f"Connect call failed ('{WORD}', 1)")
        except OSError:
            raise RuntimeError(f"All connection attempts failed: {WORD}") from None
    except RuntimeError as exc:
        fields, brief = error_fields(exc), error_brief(exc)
    assert "caused_by" not in fields and fields["errno_name"] == "ECONNREFUSED"
    assert brief == "RuntimeError (ECONNREFUSED)"
    assert error_brief(ValueError(WORD)) == "ValueError"
    assert error_brief(OSError(-2, WORD)) == "OSError (errno -2)"


def test_only_a_wordless_exception_s_text_is_given() -> None:
    from memory.errorlog import Wordless, error_brief

    class JobFailed(Wordless):
        pass

    try:
        raise JobFailed("RateLimitError")
    except JobFailed as exc:
        assert error_fields(exc)["said"] == "RateLimitError" and error_brief(exc) == "JobFailed: RateLimitError"
    assert "said" not in error_fields(ValueError(WORD)) and error_brief(ValueError(WORD)) == "ValueError"


def test_a_platform_s_integer_code_is_kept() -> None:
    class ApiError(Exception):
        code = 230002

    assert error_fields(ApiError(WORD))["code"] == 230002 and WORD not in repr(error_fields(ApiError(WORD)))


def test_an_attribute_that_raises_costs_its_codes_not_the_log_line() -> None:
    class Odd(Exception):
        @property
        def status(self) -> int:
            raise RuntimeError("not set")

    assert error_fields(Odd(WORD))["error"].endswith("Odd") and "status" not in error_fields(Odd(WORD))
