"""Who holds a job lease, and whether that process is provably gone.

A lease row's ``holder`` names its process so that a process on the same
machine can tell, at once, that the holder died (SIGKILL, power cut of a
container) instead of waiting out the lease's expiry::

    daily_compress@4242:1f2e3d4c host=box boot=<boot id> pidns=4026531836 uid=1000 start=873311

``boot`` (``/proc/sys/kernel/random/boot_id``) and ``pidns`` (the pid
namespace's inode) say which kernel and which pid numbering ``4242`` belongs
to; ``start`` (``/proc/<pid>/stat`` field 22, clock ticks since boot) tells
the holder from a later process that was given the same pid.

Gone is claimed only when it is proved: the same host, boot, pid namespace
and user, and no process with that pid and start time (or only its zombie,
which can no longer write). A holder elsewhere, one written before holders
said who they are (``daily_compress@4242:...`` alone), or one this process
cannot look at (no ``/proc``: not Linux) is "unknown", and its lease is left
to expire.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = ["Holder", "HolderState", "ProcessProbe"]

_FIELDS = ("host", "boot", "pidns", "uid", "start")


@dataclass(frozen=True)
class Holder:
    job: str
    pid: int | None
    token: str
    host: str | None = None
    boot: str | None = None
    pidns: str | None = None
    uid: int | None = None
    start: int | None = None

    def format(self) -> str:
        head = f"{self.job}@{self.pid}:{self.token}"
        fields = {k: getattr(self, k) for k in _FIELDS}
        if any(v is None for v in fields.values()):
            return head  # not provable: others wait for the expiry, as before
        return head + "".join(f" {k}={v}" for k, v in fields.items())

    @classmethod
    def parse(cls, text: str) -> Holder:
        """Any holder string; the fields it does not carry (an old-format or
        hand-written holder) are ``None``, and such a holder is never proved gone."""
        head, *rest = text.split(" ")
        job, _, who = head.rpartition("@")
        pid_text, _, token = who.partition(":")
        pid = int(pid_text) if pid_text.isdigit() else None
        kv = dict(part.split("=", 1) for part in rest if "=" in part)
        return cls(
            job=job or head, pid=pid, token=token,
            host=kv.get("host"), boot=kv.get("boot"), pidns=kv.get("pidns"),
            uid=_int(kv.get("uid")), start=_int(kv.get("start")),
        )


@dataclass(frozen=True)
class HolderState:
    state: Literal["alive", "gone", "unknown"]
    why: str

    @property
    def gone(self) -> bool:
        return self.state == "gone"


class ProcessProbe:
    """Reads ``/proc`` (``proc`` is passed in so a test can take it away)."""

    def __init__(self, proc: Path = Path("/proc")) -> None:
        self.proc = proc
        self._mine: Holder | None = None

    @property
    def _me(self) -> Holder:
        if self._mine is None or self._mine.pid != os.getpid():  # read once a process (a fork is another)
            self._mine = self._read_me()
        return self._mine

    def _read_me(self) -> Holder:
        return Holder(job="", pid=os.getpid(), token="", host=socket.gethostname(), boot=self._boot(),
                      pidns=self._pidns(), uid=os.getuid() if hasattr(os, "getuid") else None,
                      start=self._start_of(os.getpid()))

    def new_holder(self, job: str) -> str:
        me = self._me
        return Holder(job, me.pid, uuid.uuid4().hex[:8], me.host, me.boot, me.pidns, me.uid, me.start).format()

    def state(self, holder: str) -> HolderState:
        h, me = Holder.parse(holder), self._me
        if h.pid is None or any(getattr(h, k) is None for k in _FIELDS):
            return HolderState("unknown", "not known to be gone: an old-format holder")
        if any(getattr(me, k) is None for k in _FIELDS):
            return HolderState("unknown", "not known to be gone: no /proc here")
        if (h.host, h.boot, h.pidns) != (me.host, me.boot, me.pidns):
            return HolderState("unknown", "not known to be gone: another machine or container")
        if h.uid != me.uid:
            return HolderState("unknown", "not known to be gone: another user")
        try:
            state, start = self._stat(h.pid)
        except FileNotFoundError:
            return self._no_proc_entry(h.pid)
        except (OSError, ValueError, IndexError):
            return HolderState("unknown", "not known to be gone: its process could not be read")
        if start != h.start:
            return HolderState("gone", "gone: its pid is another process now")
        if state in ("Z", "X"):
            # A zombie (killed, not yet reaped by its parent) runs no code. Its
            # main thread shows Z too while its other threads are still on
            # their way out, or running on after the main one exited.
            if self._threads(h.pid) == 1:
                return HolderState("gone", "gone: killed")
            return HolderState("unknown", "not known to be gone: its threads have not all ended")
        return HolderState("alive", "running")

    def _no_proc_entry(self, pid: int) -> HolderState:
        # /proc mounted with hidepid hides other users' processes: ask the
        # kernel directly before calling it gone.
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return HolderState("gone", "gone: exited")
        except OSError:
            pass
        return HolderState("unknown", "not known to be gone: its process could not be read")

    def _stat(self, pid: int) -> tuple[str, int]:
        raw = (self.proc / str(pid) / "stat").read_text()
        # "pid (comm) S ppid ...": comm may hold spaces and parentheses.
        fields = raw[raw.rindex(")") + 2:].split()
        return fields[0], int(fields[19])  # field 3 (state) and field 22 (starttime)

    def _threads(self, pid: int) -> int | None:
        try:
            return len(os.listdir(self.proc / str(pid) / "task"))
        except OSError:
            return None

    def _start_of(self, pid: int) -> int | None:
        try:
            return self._stat(pid)[1]
        except (OSError, ValueError, IndexError):
            return None

    def _boot(self) -> str | None:
        try:
            return (self.proc / "sys/kernel/random/boot_id").read_text().strip() or None
        except OSError:
            return None

    def _pidns(self) -> str | None:
        try:
            link = os.readlink(self.proc / "self/ns/pid")  # "pid:[4026531836]"
        except OSError:
            return None
        return link.partition("[")[2].rstrip("]") or None


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None
