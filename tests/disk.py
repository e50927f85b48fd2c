"""The disk, for tests: what is on it, not in the tables (that an erased
word left the database files), and writes it refuses as a full disk does
(that a gateway degrades, never stops, when it cannot write)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

__all__ = ["FULL", "allow", "on_disk", "refuse"]

FULL = "database or disk is full"


def on_disk(folder: Path, needle: str | bytes) -> int:
    """How often ``needle`` occurs in the files of ``folder`` (a database,
    its WAL, anything beside them)."""
    raw = needle.encode() if isinstance(needle, str) else needle
    return sum(f.read_bytes().count(raw) for f in folder.iterdir() if f.is_file())


def refuse(db: Path, name: str, when: str) -> None:
    """From now on, the statements ``when`` names (a trigger's timing, as
    "BEFORE DELETE ON inbox") fail on ``db`` with a full disk's words, for
    every connection, this process's open ones too, until :func:`allow`."""
    with sqlite3.connect(db) as conn:
        conn.execute(f"CREATE TRIGGER refuse_{name} {when} BEGIN SELECT RAISE(ABORT, '{FULL}'); END")


def allow(db: Path, *names: str) -> None:
    """The writes :func:`refuse` refused under ``names`` go through again (space is back)."""
    with sqlite3.connect(db) as conn:
        for name in names:
            conn.execute(f"DROP TRIGGER IF EXISTS refuse_{name}")
