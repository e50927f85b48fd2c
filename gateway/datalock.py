"""Who is using ``$MYCLAW_HOME/data``: an advisory lock on ``data/myclaw.lock``.

The gateway and ``myclaw chat`` hold it shared for as long as they run;
any number of them may. A command that changes whose rows are whose in
every data file at once (``myclaw memory merge-identities``) holds it
exclusively, so it never runs beside a process that is writing those rows
under the old owner, and such a process does not start while it runs.

``flock(2)``: the kernel drops the lock when its holder dies, so a crashed
gateway never leaves a stale one (a lease row would, until it expired).
Where ``fcntl`` does not exist (Windows) the lock is not taken and the
commands say so in their help only.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCK_FILE", "DataBusy", "DataLock"]

LOCK_FILE = "myclaw.lock"


class DataBusy(Exception):
    """Another process holds the data directory in a way that excludes us."""


class DataLock:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / LOCK_FILE
        self._file: IO[bytes] | None = None

    def share(self) -> None:
        """For a process that reads and writes the data files as it runs."""
        self._take(shared=True)

    def exclusive(self) -> None:
        """For a command that must be alone with the data files."""
        self._take(shared=False)

    def _take(self, *, shared: bool) -> None:
        if self._file is not None:
            raise RuntimeError("the data lock is already held")
        if fcntl is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        f = open(self.path, "a+b")  # noqa: SIM115 - held until release()
        try:
            fcntl.flock(f.fileno(), (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            if shared:
                raise DataBusy(
                    f"{self.path.parent} is locked by `myclaw memory merge-identities` (moving memories to the "
                    "users memory.identities names); start again when it is done"
                ) from None
            raise DataBusy(
                f"the gateway or `myclaw chat` is running on {self.path.parent}: stop it first, then run this again"
            ) from None
        except BaseException:
            f.close()
            raise
        if not shared:
            # Who holds it, for an operator looking at the file.
            f.truncate(0)
            f.write(f"{os.getpid()}\n".encode())
            f.flush()
        self._file = f

    def release(self) -> None:
        """Let go; safe to call twice."""
        f, self._file = self._file, None
        if f is not None:
            f.close()  # closing the descriptor releases the flock
