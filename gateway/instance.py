"""One gateway per home: ``data/gateway.lock``.

Two gateways on the same ``MYCLAW_HOME`` would both poll Telegram (each
getUpdates call cuts the other's off), answer Feishu events twice and run
every scheduled job twice. The gateway holds an exclusive ``flock`` on the
lock file while it runs; the kernel drops it when the process dies, so a
crash never leaves a stale lock. The file records the holder's pid for the
message. ``myclaw chat`` and the CLI do not take it: they share the data
files with a running gateway by design (SQLite WAL, the job leases).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["AlreadyRunning", "InstanceLock", "running_pid"]

try:
    import fcntl
except ImportError:  # Windows: no flock; one gateway per home is then on the operator
    fcntl = None  # type: ignore[assignment]


class AlreadyRunning(Exception):
    """Another gateway holds the lock; the message names its pid and the fix."""


def _read_pid(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="utf-8").split()
        return int(text[0]) if text else None
    except (OSError, ValueError):
        return None


class InstanceLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        if fcntl is None or self._fd is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            pid = _read_pid(self.path)
            raise AlreadyRunning(
                f"another gateway is running on {self.path.parent.parent}"
                + (f" (pid {pid})" if pid else "")
                + "; stop it first, or give this one its own MYCLAW_HOME"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)  # no pid left behind to mislead the next reader
        finally:
            os.close(fd)  # closing drops the flock


def running_pid(path: Path) -> int | None:
    """The pid of the gateway holding ``path`` (0 when its pid is unknown),
    or None when no gateway holds it. Takes the lock for an instant to
    find out, and never creates the file."""
    if fcntl is None or not path.exists():
        return None
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_pid(path) or 0
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
