"""What a user's ``/export`` costs (docs/BENCHMARKS.md, "Export").

Builds one user's memory through the engine's write API in a temp dir: N
Tier 2 facts with the message each was drawn from (~60 words), a 100-entry
Tier 1, a credential, and D daily events; then runs the whole ``/export``
command (``UserCommands.answer``: the rows read, the Markdown rendered, the
file the channel is handed) and reports its wall time, the file's size and
the peak of Python's allocations (``tracemalloc``) during it. The command
is the same on every version of the gateway, so the script runs unchanged
in an older worktree for an A/B comparison.

``--cli``: the operator's ``myclaw memory export --format markdown -o FILE``
instead (the click command, in this process), on the same memory;
``--cli-format json`` the same command's JSON.

    .venv/bin/python scripts/bench_export.py [--facts 20000] [--days 365] [--cli [--cli-format json]] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import sys
import tempfile
import time
import tracemalloc
from datetime import date, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import structlog  # noqa: E402

from gateway.commands import UserCommands  # noqa: E402
from memory import MemoryEngine, NewMemory  # noqa: E402
from memory.service import SqliteMemory  # noqa: E402
from memory.types import Category, Provenance  # noqa: E402

WORDS = (
    "alpha beta gamma delta tea coffee weather project deploy server redis postgres meeting friday monday "
    "sister lisbon car blue tesla cat dog garden music guitar piano book novel travel tokyo paris"
).split()
USER = "telegram:42"


async def _build(engine: MemoryEngine, facts: int, days: int, rng: random.Random) -> None:
    where = Provenance(channel="telegram", chat_id="42")
    items = [
        (NewMemory(owner=USER, tier=1, category=Category.IDENTITY, content=" ".join(rng.choices(WORDS, k=10)) + f" p{i}",
                   provenance=where), None)
        for i in range(100)
    ]
    items.append((NewMemory(owner=USER, category=Category.CREDENTIAL, content="the vault password is tulip-4471",
                            source_text="my vault password is tulip-4471", provenance=where), None))
    items += [
        (NewMemory(owner=USER, content=" ".join(rng.choices(WORDS, k=14)) + f" n{i}",
                   project=("atlas" if i % 7 == 0 else "_global"),
                   source_text=" ".join(rng.choices(WORDS, k=60)), provenance=where), None)
        for i in range(facts)
    ]
    for k in range(0, len(items), 1000):
        await engine.add_many(items[k : k + 1000])
    first = date(2026, 1, 1)
    for d in range(days):
        await engine.add_event(USER, (first + timedelta(days=d)).isoformat(), " ".join(rng.choices(WORDS, k=40)),
                               channel="telegram", chat_id="42")


def _size(file: Any) -> int:
    data = getattr(file, "data", None)
    return len(data) if isinstance(data, bytes) and data else int(file.size)


async def measure(facts: int, days: int, seed: int = 1) -> dict[str, Any]:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        async with await MemoryEngine.open(folder / "memory.db") as engine:
            await _build(engine, facts, days, rng)
            await engine.db.checkpoint()
            db_mb = (folder / "memory.db").stat().st_size / 1e6
            commands = UserCommands(SqliteMemory(engine))
            gc.collect()
            tracemalloc.start()
            t0 = time.perf_counter()
            answer = await commands.answer("export", "", user=USER, private=True, chat_zh=False)
            took = time.perf_counter() - t0
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            file = answer.attachment
            assert file is not None, answer.text
            size = _size(file)
            discard = getattr(file, "discard", None)
            if discard is not None:  # a file on disk: the channel's sender removes it after sending
                discard()
    return {"facts": facts, "days": days, "db_mb": round(db_mb, 1), "file_mb": round(size / 1e6, 1),
            "wall_s": round(took, 2), "peak_mb": round(peak / 1e6, 1)}


def measure_cli(facts: int, days: int, seed: int = 1, fmt: str = "markdown") -> dict[str, Any]:
    """``myclaw memory export --format FMT`` into a file, on the memory
    :func:`measure` builds: the command as the operator runs it."""
    from click.testing import CliRunner

    from gateway.cli import main as cli

    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        db = folder / "memory.db"

        async def build() -> None:
            async with await MemoryEngine.open(db) as engine:
                await _build(engine, facts, days, rng)
                await engine.db.checkpoint()

        asyncio.run(build())
        db_mb = db.stat().st_size / 1e6
        out = folder / f"export.{'md' if fmt == 'markdown' else fmt}"
        gc.collect()
        tracemalloc.start()
        t0 = time.perf_counter()
        result = CliRunner().invoke(cli, ["memory", "export", "--format", fmt, "--db", str(db), "-o", str(out)],
                                    env={"MYCLAW_HOME": str(folder)})  # no operator config is read
        took = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert result.exit_code == 0, result.output
        size = out.stat().st_size
    return {"facts": facts, "days": days, "db_mb": round(db_mb, 1), "file_mb": round(size / 1e6, 1),
            "wall_s": round(took, 2), "peak_mb": round(peak / 1e6, 1)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--facts", type=int, default=20_000)
    ap.add_argument("--days", type=int, default=365)
    ap.add_argument("--cli", action="store_true", help="measure `myclaw memory export --format markdown -o FILE`")
    ap.add_argument("--cli-format", choices=("markdown", "json"), default="markdown",
                    help="with --cli: the export's format")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))  # warnings and up
    row = measure_cli(args.facts, args.days, fmt=args.cli_format) if args.cli else asyncio.run(measure(args.facts, args.days))
    print(f"{'facts':>7} {'days':>5} {'db MB':>6} {'file MB':>8} {'wall s':>7} {'peak MB':>8}")
    print(f"{row['facts']:>7} {row['days']:>5} {row['db_mb']:>6} {row['file_mb']:>8} {row['wall_s']:>7} "
          f"{row['peak_mb']:>8}")
    if args.json:
        args.json.write_text(json.dumps(row, indent=2))


if __name__ == "__main__":
    main()
