"""What an erasure costs (docs/BENCHMARKS.md, "Erasure").

``MemoryEngine.purge_erased`` runs after every erasure (``myclaw memory
delete --purge``, ``forget``, the memory page's erase): it merges the FTS5
segments, which keep a deleted row's words until they merge, then rewrites
the file (``VACUUM``) and empties the WAL. This times it on a real SQLite
file of N memories (20 users, English facts of ~15 words with their source
text), and checks that the erased word is gone from the files.

``--chats N`` also times what ``memory_forget`` adds on the reply path
(and how long another chat's Tier 0 append waits meanwhile):
the gateway's Tier 0 history (gateway.db, N chats with two windows of 20
messages each, as pruning leaves them) loses the lines that said the fact,
and a WAL checkpoint overwrites their old pages so their bytes leave the
disk too. The VACUUM it replaced is timed after it, for comparison.

    .venv/bin/python scripts/bench_erase.py [--sizes 10000 50000] [--chats 1000 10000] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import structlog  # noqa: E402

from memory import MemoryEngine, NewMemory  # noqa: E402
from tests.disk import on_disk  # noqa: E402

WORDS = (
    "alpha beta gamma delta tea coffee weather project deploy server redis postgres meeting friday monday "
    "sister lisbon car blue tesla cat dog garden music guitar piano book novel travel tokyo paris"
).split()
SECRET = "zqxjkv4711"


async def measure(n: int, seed: int = 1) -> dict[str, Any]:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        async with await MemoryEngine.open(folder / "memory.db") as engine:
            items = [
                (
                    NewMemory(
                        owner=f"u{i % 20}",
                        content=" ".join(rng.choices(WORDS, k=14)) + f" n{i}",
                        source_text=" ".join(rng.choices(WORDS, k=20)),
                    ),
                    None,
                )
                for i in range(n)
            ]
            for k in range(0, n, 1000):
                await engine.add_many(items[k : k + 1000])
            secret = await engine.add(NewMemory(owner="u0", content=f"the door code is {SECRET}"))
            await engine.delete(secret.id)
            await engine.db.compact()  # settle the file first: time the purge alone
            size = (folder / "memory.db").stat().st_size
            before = on_disk(folder, SECRET)
            t0 = time.perf_counter()
            await engine.purge_erased()
            took = time.perf_counter() - t0
            after = on_disk(folder, SECRET)
    return {"memories": n, "db_mb": round(size / 1e6, 1), "purge_ms": round(took * 1000, 1),
            "secret_before": before, "secret_after": after}


async def measure_history(chats: int, seed: int = 1) -> dict[str, Any]:
    from gateway.sessions import SessionStore

    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        async with await SessionStore.open(folder / "gateway.db") as store:
            for c in range(chats):
                owner = f"telegram:{c}"
                for m in range(40):
                    text = " ".join(rng.choices(WORDS, k=12))
                    if c == 0 and m == 7:
                        text = f"my door code is {SECRET}"
                    await store.append(
                        f"telegram:{c}", channel="telegram", chat_id=str(c), owner=owner,
                        role="user" if m % 2 == 0 else "assistant", content=text,
                    )
            await store.flush()
            await store.db.compact()  # settle the file first: time the erasure alone
            size = (folder / "gateway.db").stat().st_size
            before = on_disk(folder, SECRET)
            t0 = time.perf_counter()
            erasing = asyncio.create_task(store.erase_matching("telegram:0", [f"door code is {SECRET}"]))
            await asyncio.sleep(0.002)  # the erasure is under way when another chat's message arrives
            a0 = time.perf_counter()
            await store.append("telegram:1", channel="telegram", chat_id="1", owner="telegram:1", role="user",
                               content="meanwhile in another chat")
            await store.flush()  # its Tier 0 row committed: what the erasure made it wait for
            append_ms = (time.perf_counter() - a0) * 1000
            gone = await erasing
            t1 = time.perf_counter()
            await store.db.checkpoint()  # what the gateway does (App._forget_history)
            t2 = time.perf_counter()
            after = on_disk(folder, SECRET)
            await store.db.compact()
            t3 = time.perf_counter()
    assert gone == 1, gone
    return {"chats": chats, "db_mb": round(size / 1e6, 1), "erase_ms": round((t1 - t0) * 1000, 1),
            "append_during_ms": round(append_ms, 1),
            "checkpoint_ms": round((t2 - t1) * 1000, 1), "vacuum_ms": round((t3 - t2) * 1000, 1),
            "secret_before": before, "secret_after": after}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 50_000])
    ap.add_argument("--chats", type=int, nargs="*", default=[], help="also time gateway.db's erasure at N chats")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))  # warnings and up
    rows = [asyncio.run(measure(n)) for n in args.sizes]
    print(f"{'memories':>9} {'db MB':>7} {'purge ms':>9} {'erased word on disk before / after':>36}")
    for r in rows:
        print(f"{r['memories']:>9} {r['db_mb']:>7} {r['purge_ms']:>9} {r['secret_before']:>17} / {r['secret_after']}")
    history = [asyncio.run(measure_history(n)) for n in args.chats]
    if history:
        print(f"\n{'chats':>9} {'db MB':>7} {'erase ms':>9} {'append meanwhile ms':>20} {'checkpoint ms':>14} "
              f"{'(VACUUM ms)':>12} {'erased word on disk before / after':>36}")
        for h in history:
            print(f"{h['chats']:>9} {h['db_mb']:>7} {h['erase_ms']:>9} {h['append_during_ms']:>20} "
                  f"{h['checkpoint_ms']:>14} {h['vacuum_ms']:>12} {h['secret_before']:>17} / {h['secret_after']}")
    if args.json:
        args.json.write_text(json.dumps({"memory": rows, "history": history} if history else rows, indent=2))


if __name__ == "__main__":
    main()
