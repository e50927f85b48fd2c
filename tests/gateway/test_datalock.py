from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gateway.datalock import DataBusy, DataLock

REPO = Path(__file__).resolve().parents[2]


def test_many_share_it_and_one_alone_excludes_them(tmp_path: Path) -> None:
    a, b, alone = DataLock(tmp_path), DataLock(tmp_path), DataLock(tmp_path)
    a.share()
    b.share()  # two gateways' worth of readers-and-writers: fine
    with pytest.raises(DataBusy, match="is running"):
        alone.exclusive()
    a.release()
    b.release()
    b.release()  # safe twice
    alone.exclusive()
    with pytest.raises(DataBusy, match="merge-identities"):
        a.share()
    alone.release()
    a.share()
    a.release()


def test_a_holder_that_dies_leaves_no_lock(tmp_path: Path) -> None:
    code = (
        "import sys, time; from pathlib import Path; from gateway.datalock import DataLock; "
        "lock = DataLock(Path(sys.argv[1])); lock.share(); print('held', flush=True); time.sleep(60)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        with pytest.raises(DataBusy):
            DataLock(tmp_path).exclusive()
    finally:
        proc.kill()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
    lock = DataLock(tmp_path)
    lock.exclusive()  # the kernel let go of the dead gateway's lock
    lock.release()
