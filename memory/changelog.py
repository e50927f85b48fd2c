"""The write path's change log (``memory_log``): what each job merged,
superseded, promoted, demoted or archived, and why. ``myclaw memory log``
shows it. Entries are written on the job's own connection, so a rolled-back
change leaves no log line claiming it happened."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aiosqlite

from .db import Database

__all__ = ["LogEntry", "read_log", "write_log"]


@dataclass(frozen=True)
class LogEntry:
    id: int
    at: str
    job: str
    owner: str
    action: str
    memory_id: int | None
    detail: str


async def write_log(
    conn: aiosqlite.Connection,
    *,
    at: str,
    job: str,
    action: str,
    owner: str = "",
    memory_id: int | None = None,
    detail: str | dict[str, Any] = "",
) -> None:
    if not isinstance(detail, str):
        detail = json.dumps(detail, ensure_ascii=False, separators=(",", ":"))
    await conn.execute(
        "INSERT INTO memory_log(at, job, owner, action, memory_id, detail) VALUES (?, ?, ?, ?, ?, ?)",
        (at, job, owner, action, memory_id, detail),
    )


async def read_log(
    db: Database,
    *,
    job: str | None = None,
    owner: str | None = None,
    actions: Sequence[str] = (),
    since: str | None = None,
    limit: int = 100,
) -> list[LogEntry]:
    """Newest first."""
    where: list[str] = []
    args: list[object] = []
    if job:
        where.append("job = ?")
        args.append(job)
    if owner:
        where.append("owner = ?")
        args.append(owner)
    if actions:
        where.append(f"action IN ({','.join('?' * len(actions))})")
        args.extend(actions)
    if since:
        where.append("at >= ?")
        args.append(since)
    sql = "SELECT * FROM memory_log" + (" WHERE " + " AND ".join(where) if where else "")
    rows = await db.fetchall(sql + " ORDER BY id DESC LIMIT ?", [*args, limit])
    return [LogEntry(r["id"], r["at"], r["job"], r["owner"], r["action"], r["memory_id"], r["detail"]) for r in rows]
