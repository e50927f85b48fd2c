"""Who is using ``$MYCLAW_HOME/data``: advisory locks in the data folder.

``data/myclaw.lock`` (:class:`DataLock`):

The gateway and ``myclaw chat`` hold it shared for as long as they run;
any number of them may. A command that changes whose rows are whose in
every data file at once (``myclaw memory merge-identities``) or puts
other files in their place (``myclaw restore``) holds it exclusively, so
it never runs beside a process that is writing those rows under the old
owner, and such a process does not start while it runs. ``myclaw memory``
and ``myclaw cron`` hold it shared while they run: beside a gateway, never
beside a restore (a file opened mid-restore could be the old one, or half
of the new). The exclusive holder writes its pid and its name into the
file, for the message the others refuse with.

``flock(2)``: the kernel drops the lock when its holder dies, so a crashed
gateway never leaves a stale one (a lease row would, until it expired).
Where ``fcntl`` does not exist (Windows) the lock is not taken and the
commands say so in their help only.

``data/gateway.lock`` (:class:`GatewayLock`): one gateway per home. Two
gateways on the same ``MYCLAW_HOME`` would both poll Telegram (each
getUpdates call cuts the other's off), answer Feishu events twice and run
every scheduled job twice, so the gateway holds this one exclusively;
``myclaw chat`` does not take it (it shares the files with a gateway by
design). The file records the holder's pid for the message.

``data/chat.lock`` (:class:`ChatLock`): held shared by each ``myclaw
chat``, exclusively by ``myclaw memory forget --user`` while it erases:
a chat takes no erasure requests, so the erasure is refused beside one.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from memory.db import private_dirs

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

__all__ = ["CHAT_LOCK_FILE", "GATEWAY_LOCK_FILE", "LOCK_FILE", "AlreadyRunning", "ChatLock", "ChatRunning", "DataBusy",
           "DataLock", "ErasureHold", "GatewayLock", "running_pid", "running_serves"]

LOCK_FILE = "myclaw.lock"
GATEWAY_LOCK_FILE = "gateway.lock"
CHAT_LOCK_FILE = "chat.lock"


def _open_private(path: Path, flags: int = 0) -> int:
    """Open (or create) a lock file owner-only, like the data files. One
    made before locks were created 0600 is 0644 under the usual umask and
    keeps that mode when opened: put it right (the lock file has no mode an
    operator chose; a file someone else owns is left, and still locks)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | flags, 0o600)
    try:
        if os.fstat(fd).st_mode & 0o077:
            with contextlib.suppress(PermissionError):
                os.fchmod(fd, 0o600)
    except BaseException:
        os.close(fd)
        raise
    return fd


class DataBusy(Exception):
    """Another process holds the data directory in a way that excludes us."""


class DataLock:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / LOCK_FILE
        self._file: IO[bytes] | None = None

    def share(self) -> None:
        """For a process that reads and writes the data files as it runs."""
        self._take(shared=True)

    def exclusive(self, by: str) -> None:
        """For a command that must be alone with the data files; ``by``
        names it ("`myclaw restore` (putting a backup in place)") for the
        message the others refuse with."""
        self._take(shared=False, by=by)

    def _holder(self) -> str:
        try:
            pid, _, by = self.path.read_text(encoding="utf-8").strip().partition(" ")
        except OSError:
            return "another myclaw command"
        return f"{by or 'another myclaw command'}" + (f" (pid {pid})" if pid.isdigit() else "")

    def _take(self, *, shared: bool, by: str = "") -> None:
        if self._file is not None:
            raise RuntimeError("the data lock is already held")
        if fcntl is None:
            return
        private_dirs(self.path.parent)
        # Held until release().
        f = os.fdopen(_open_private(self.path, os.O_APPEND), "a+b")
        try:
            fcntl.flock(f.fileno(), (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            if shared:
                raise DataBusy(f"{self.path.parent} is locked by {self._holder()}; start again when it is done") from None
            pid = running_pid(self.path.parent)
            if pid:  # the usual case, and the one process whose pid is on record
                raise DataBusy(f"the gateway (pid {pid}) is running on {self.path.parent}: stop it first, "
                               "then run this again") from None
            raise DataBusy(
                f"the gateway, `myclaw chat` or another myclaw command is running on {self.path.parent}: stop it "
                "first (or let the command finish), then run this again"
            ) from None
        except BaseException:
            f.close()
            raise
        if not shared:
            # Who holds it, for an operator looking at the file.
            f.truncate(0)
            f.write(f"{os.getpid()} {by}\n".encode())
            f.flush()
        self._file = f

    def release(self) -> None:
        """Let go; safe to call twice."""
        f, self._file = self._file, None
        if f is not None:
            f.close()  # closing the descriptor releases the flock


class AlreadyRunning(Exception):
    """Another gateway holds the lock; the message names its pid and the fix."""


def running_serves(data_dir: Path, what: str) -> bool:
    """Whether the gateway running on ``data_dir`` answers ``what`` (see
    :meth:`GatewayLock.serves`); False when none runs."""
    if running_pid(data_dir) is None:
        return False
    try:
        return what in (data_dir / GATEWAY_LOCK_FILE).read_text(encoding="utf-8").split()[1:]
    except OSError:
        return False


def _read_pid(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="utf-8").split()
        return int(text[0]) if text else None
    except (OSError, ValueError):
        return None


_ATTEMPTS = 10  # x 20 ms


class GatewayLock:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / GATEWAY_LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> None:
        if fcntl is None or self._fd is not None:
            return
        private_dirs(self.path.parent)
        fd = _open_private(self.path)
        try:
            # A few tries: `running_pid` (myclaw doctor) holds a shared lock
            # for an instant, which must not read as a running gateway.
            for attempt in range(_ATTEMPTS):
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if attempt == _ATTEMPTS - 1:
                        raise
                    time.sleep(0.02)
        except BlockingIOError:
            os.close(fd)
            pid = _read_pid(self.path)
            raise AlreadyRunning(
                f"another gateway is running on {self.path.parent.parent}"
                + (f" (pid {pid})" if pid else "")
                + "; stop it first, or give this one its own MYCLAW_HOME"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def serves(self, *what: str) -> None:
        """Say in the file what the running gateway answers besides its
        chats (``erasures``: gateway/erasure_requests.py), read by
        :func:`running_serves`: a process holding the lock without it (an
        older gateway) is not asked, and not waited for."""
        if self._fd is None:
            return
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, f"{os.getpid()} {' '.join(what)}\n".encode(), 0)

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)  # no pid left behind to mislead the next reader
        finally:
            os.close(fd)  # closing drops the flock


class ChatRunning(Exception):
    """A ``myclaw chat`` runs where an erasure would, or the other way round."""


class ChatLock:
    """``data/chat.lock``: every ``myclaw chat`` holds it shared while it
    runs; ``myclaw memory forget --user`` exclusively while it erases. A
    chat takes no erasure requests (gateway/erasure_requests.py: the
    gateway does, through its lock file), and what it holds of a user (its
    session's window, a turn at the model) would be written back after an
    erasure made beside it: so the erasure is refused while a chat runs,
    and a chat does not start while an erasure runs. Neither waits."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / CHAT_LOCK_FILE
        self._fd: int | None = None

    def share(self) -> None:
        """For ``myclaw chat``, as it starts."""
        if not self._take(fcntl.LOCK_SH if fcntl is not None else 0):
            raise ChatRunning(f"an erasure (myclaw memory forget) is running on {self.path.parent.parent}; "
                              "start the chat again when it is done")

    def exclusive(self) -> None:
        """For an erasure, before it changes anything."""
        if not self._take(fcntl.LOCK_EX if fcntl is not None else 0):
            if self._erasing():
                raise ChatRunning(f"another erasure (myclaw memory forget) is running on {self.path.parent.parent}; "
                                  "run this again when it is done")
            raise ChatRunning(f"myclaw chat is running on this home ({self.path.parent.parent}): it holds what it "
                              "has of the user and would write it back after the erasure; end it (Ctrl-D or "
                              "/exit), then run this again")

    @contextlib.contextmanager
    def erasing(self) -> Iterator[None]:
        """Held exclusively while an erasure made inside a running process
        runs: the gateway's ``/forget all`` and the memory page's erase-all
        (this lock not held otherwise), or ``myclaw chat``'s own ``/forget
        all`` (its share turned into it, then back: another chat on the
        home still holds what it has of the user). Raises
        :class:`ChatRunning`, nothing changed, when another chat or an
        erasure holds it. Not for ``myclaw memory forget``'s request to the
        gateway: the CLI holds it already."""
        if fcntl is None:
            yield
            return
        if self._fd is None:
            self.exclusive()
            try:
                yield
            finally:
                self.release()
            return
        fd = self._fd
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            # Linux drops the share before a conversion that fails: taken again.
            with contextlib.suppress(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            if self._erasing():
                raise ChatRunning(f"an erasure (myclaw memory forget) is running on {self.path.parent.parent}; "
                                  "try again when it is done") from None
            raise ChatRunning(f"another myclaw chat is running on this home ({self.path.parent.parent}): it holds "
                              "what it has of the user and would write it back after the erasure; end it, then "
                              "try again") from None
        try:
            yield
        finally:
            with contextlib.suppress(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)

    def _erasing(self) -> bool:
        """Whether the holder refusing an erasure is another erasure (it
        holds the lock exclusively: not even a chat's share is granted),
        not chats sharing it."""
        probe = ChatLock(self.path.parent)
        if probe._take(fcntl.LOCK_SH if fcntl is not None else 0):
            probe.release()
            return False
        return True

    def _take(self, mode: int) -> bool:
        if fcntl is None or self._fd is not None:
            return True
        private_dirs(self.path.parent)
        fd = _open_private(self.path)
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:  # ENOLCK on a network mount, say: the descriptor is not kept open
            os.close(fd)
            raise
        self._fd = fd
        return True

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing drops the flock


class ErasureHold:
    """The gateway's erasures (each user's ``/forget all``, the memory
    page's erase-all) hold ``chat.lock`` exclusively while any of them
    runs: they exclude a ``myclaw chat`` and ``myclaw memory forget``, not
    one another. (Each taking the lock through a descriptor of its own,
    the second of two at once was refused: flock refuses a second
    descriptor in the same process too.) Not thread-safe: the event loop's."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._lock: ChatLock | None = None
        self._held = 0

    @contextlib.contextmanager
    def erasing(self) -> Iterator[None]:
        """As :meth:`ChatLock.erasing`: raises :class:`ChatRunning`, nothing
        held, beside a chat or another process's erasure."""
        if self._lock is None:
            lock = ChatLock(self.data_dir)
            lock.exclusive()
            self._lock = lock
        self._held += 1
        try:
            yield
        finally:
            self._held -= 1
            if not self._held and self._lock is not None:
                self._lock.release()
                self._lock = None


def running_pid(data_dir: Path) -> int | None:
    """The pid of the gateway running on ``data_dir`` (0 when its pid is
    unknown), or None when none is. Takes the lock for an instant to find
    out, and never creates the file."""
    path = data_dir / GATEWAY_LOCK_FILE
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
