from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gateway.instance import AlreadyRunning, InstanceLock, running_pid


def test_a_killed_gateway_leaves_no_lock_behind(tmp_path: Path) -> None:
    lock = tmp_path / "data" / "gateway.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from pathlib import Path; from gateway.instance import InstanceLock; "
         f"InstanceLock(Path({str(lock)!r})).acquire(); print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert running_pid(lock) == holder.pid
        with pytest.raises(AlreadyRunning, match=f"pid {holder.pid}"):
            InstanceLock(lock).acquire()
    finally:
        holder.kill()
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()
    assert running_pid(lock) is None  # the kernel dropped it: no stale lock after a crash
    mine = InstanceLock(lock)
    mine.acquire()
    mine.release()


def test_running_pid_never_creates_the_file(tmp_path: Path) -> None:
    assert running_pid(tmp_path / "data" / "gateway.lock") is None
    assert not (tmp_path / "data").exists()
