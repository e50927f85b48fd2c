"""What is on the disk, not in the tables: for tests (and the erasure
benchmark) that an erased word left the database files."""

from __future__ import annotations

from pathlib import Path

__all__ = ["on_disk"]


def on_disk(folder: Path, needle: str | bytes) -> int:
    """How often ``needle`` occurs in the files of ``folder`` (a database,
    its WAL, anything beside them)."""
    raw = needle.encode() if isinstance(needle, str) else needle
    return sum(f.read_bytes().count(raw) for f in folder.iterdir() if f.is_file())
