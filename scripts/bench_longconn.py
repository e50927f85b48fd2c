"""How long the Feishu long connection takes to come up, and how long it
blocks the gateway's loop (docs/BENCHMARKS.md, "Feishu long connection
start").

Each case runs in a fresh interpreter (the first ``import lark_oapi`` is
what costs) against the loopback Feishu fake. The loop is kept busy by a
coroutine that computes in 2 ms slices, as a loaded gateway's would be; the
longest gap between its slices is how long the loop was blocked.

    .venv/bin/python scripts/bench_longconn.py [--cases thread loop preload] [--busy/--idle]

``thread`` imports the SDK in the connection's own thread (the old way),
``loop`` imports it in ``LongConnection.start()`` on the loop, ``preload``
imports it before the loop runs (``myclaw gateway``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CASE = r"""
import asyncio, json, sys, time
sys.path.insert(0, {root!r})
from channels.feishu import longconn
from tests.fakes.feishu_server import FakeFeishu

case, busy = {case!r}, {busy!r}
t0 = time.perf_counter()
if case == "preload":
    longconn.preload_sdk()
if case == "thread":
    longconn._import_sdk = lambda: None  # the connection's thread imports it
preload_s = time.perf_counter() - t0


async def spin(stop, gaps):
    last = time.perf_counter()
    while not stop.is_set():
        end = time.perf_counter() + 0.002
        while time.perf_counter() < end:
            pass
        await asyncio.sleep(0 if busy else 0.01)
        now = time.perf_counter()
        gaps.append(now - last - (0 if busy else 0.01))
        last = now


async def main():
    async with FakeFeishu() as fake:
        async def on_event(payload):
            pass
        stop, gaps = asyncio.Event(), []
        spinner = asyncio.create_task(spin(stop, gaps))
        await asyncio.sleep(0.05)
        t = time.perf_counter()
        conn = longconn.LongConnection(fake.app_id, fake.app_secret, fake.url, on_event)
        conn.start()
        await fake.wait_ws_connected(900)
        connected = time.perf_counter() - t
        stop.set()
        await spinner
        await conn.stop(timeout=20)
        print(json.dumps({{"preload_s": preload_s, "connected_s": connected, "max_block_s": max(gaps)}}))


asyncio.run(main())
"""


def run(case: str, busy: bool) -> dict[str, float]:
    code = _CASE.format(root=str(ROOT), case=case, busy=busy)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=1200)
    if done.returncode != 0:
        raise SystemExit(f"{case}: {done.stderr[-2000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", default=["thread", "loop", "preload"], choices=["thread", "loop", "preload"])
    parser.add_argument("--busy", action=argparse.BooleanOptionalAction, default=True,
                        help="keep the loop computing while the connection starts [default: busy]")
    args = parser.parse_args()
    print(f"loop {'busy' if args.busy else 'idle'}")
    print(f"{'case':<8} {'import before loop':>19} {'start to connected':>19} {'longest loop block':>19}")
    for case in args.cases:
        r = run(case, args.busy)
        print(f"{case:<8} {r['preload_s']:>18.2f}s {r['connected_s']:>18.2f}s {r['max_block_s']:>18.2f}s")


if __name__ == "__main__":
    main()
