"""scripts/bench_erase.py runs, and the word it erases is gone from the files."""

from __future__ import annotations

import json
from pathlib import Path

from tests.scripts._load import load_script


def test_bench_erase_small(tmp_path: Path) -> None:
    bench = load_script("bench_erase")
    out = tmp_path / "erase.json"
    bench.main(["--sizes", "300", "--json", str(out)])
    (row,) = json.loads(out.read_text())
    assert row["memories"] == 300 and row["purge_ms"] > 0
    assert row["secret_before"] > 0 and row["secret_after"] == 0
