"""scripts/bench_cost.py drives the App for a few days and counts what the
fake model was sent, by kind and part."""

from __future__ import annotations

from pathlib import Path

from tests.scripts._load import load_script


async def test_bench_cost_two_days_counts_every_kind_and_part(tmp_path: Path) -> None:
    bench = load_script("bench_cost")
    out, requests = await bench.run(tmp_path, days=2, per_day=9, seed=7)
    assert out["user_days"] == 6 and out["calls"]["chat"] == 2 * 9 * 3
    # Each sitting's lines were extracted, each night's day compressed.
    assert out["calls"]["extract"] >= 3 and out["calls"]["compress"] >= 3
    chat = out["tokens"]["chat"]
    assert chat["system.memory_rules"] > 0 and chat["tools.memory"] > 0 and chat["history"] > 0
    assert chat["system.core"] > 0 and chat["message.recalled"] > 0  # day 2 remembers day 1
    assert len(requests) == sum(out["calls"].values())  # every request the fake received, counted once
    assert 0 < out["memory_share_of_chat_prompt"] < out["memory_share_with_rules_and_tools"] < 1
