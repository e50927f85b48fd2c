"""scripts/bench_export.py runs and reports the export it measured."""

from __future__ import annotations

import json
from pathlib import Path

from tests.scripts._load import load_script


def test_bench_export_small(tmp_path: Path) -> None:
    bench = load_script("bench_export")
    out = tmp_path / "export.json"
    bench.main(["--facts", "200", "--days", "5", "--json", str(out)])
    row = json.loads(out.read_text())
    assert row["facts"] == 200 and row["file_mb"] > 0 and row["peak_mb"] > 0


def test_bench_export_cli_small(tmp_path: Path) -> None:
    bench = load_script("bench_export")
    out = tmp_path / "export.json"
    bench.main(["--cli", "--facts", "200", "--days", "5", "--json", str(out)])
    row = json.loads(out.read_text())
    assert row["facts"] == 200 and row["file_mb"] > 0 and row["peak_mb"] > 0
