"""Soak: what a long-running gateway keeps per chat (docs/BENCHMARKS.md, "Soak").

Many distinct private chats x a few messages through the real ``App`` and
``TelegramChannel`` against the loopback fake Telegram Bot API and fake LLM
(the fakes' process and the gateway's config are ``scripts/bench_gateway.py``'s,
reused, not copied). After every chat was answered, and again after an
idle period, it reports the gateway process's

* RSS (``/proc/self/status`` VmRSS; no psutil) and peak (VmHWM);
* open file descriptors (``/proc/self/fd``) and asyncio tasks;
* the sizes of the in-memory structures held per chat or per user (the
  process loop's queues, workers and "clean" set, the session store's
  caches, the rate limiter, the incognito and timezone caches, the
  delivery's sets, the Telegram channel's, memory's per-owner caches).

A structure that grows with the number of chats ever seen is a leak in a
gateway that runs for months; one bounded by a cap (or emptied when the
chats go quiet) is not. Structures an older tree does not have are left out,
so the same script measures before and after a fix.

    .venv/bin/python scripts/bench_soak.py                       # 5,000 chats x 3
    .venv/bin/python scripts/bench_soak.py --chats 500 --messages 2 --idle 2
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
import tempfile
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_gateway import API_KEY, fakes_process, rss_kib, seed  # noqa: E402  (scripts/ is sys.path[0])

def sizes(app: Any) -> tuple[dict[str, int], int]:
    """Each per-chat or per-user structure's length (gateway.footprint: each
    part names its own, so a renamed field is not silently left out), and
    roughly what they hold in all (KiB: the containers, their keys and
    their values' top objects)."""
    from gateway.footprint import footprint

    out: dict[str, int] = {}
    held = 0
    for label, found in sorted(footprint(app).items()):
        out[label] = len(found)
        held += _bytes(found)
    return out, held // 1024


def _bytes(container: Collection[object]) -> int:
    total = sys.getsizeof(container)
    items = container.items() if isinstance(container, Mapping) else ((k, None) for k in container)
    for key, value in items:
        total += sys.getsizeof(key) + (sys.getsizeof(value) if value is not None else 0)
        if isinstance(key, tuple):
            total += sum(sys.getsizeof(k) for k in key)
    return total


def snapshot(app: Any) -> dict[str, Any]:
    gc.collect()
    lengths, kib = sizes(app)
    return {
        "rss_mib": round(rss_kib() / 1024, 1),
        "open_fds": len(os.listdir("/proc/self/fd")),
        "asyncio_tasks": len(asyncio.all_tasks()),
        "structures_kib": kib,
        "structures": lengths,
    }


async def soak(args: argparse.Namespace) -> dict[str, Any]:
    from gateway.app import App
    from gateway.config import Paths, load_config
    from gateway.logging import configure_logging

    configure_logging(level="WARNING")
    # all at once (rate 0), no files: bench_gateway's fakes, which check every message is answered once, in order
    with fakes_process(args.chats, args.messages, args.timeout, 0.0, 1, 0) as parent:
        urls = await asyncio.to_thread(parent.recv)
        with tempfile.TemporaryDirectory(prefix="myclaw-soak-") as tmp:
            doc = {
                "provider": {"baseUrl": urls["openai"], "apiKey": API_KEY, "maxRetries": 0, "timeout": "30s"},
                "agent": {"model": "bench-model"},
                "channels": {"telegram": {"enabled": True, "token": urls["token"], "baseUrl": urls["telegram"]}},
                "gateway": {"rateLimit": {"perMinute": 10_000, "perHour": 100_000}},
            }
            (Path(tmp) / "config.json").write_text(json.dumps(doc), encoding="utf-8")
            cfg = load_config(Path(tmp) / "config.json", env={"MYCLAW_HOME": tmp}, require=True)
            app = App(cfg, Paths(Path(tmp)))
            try:
                await app.open()
                await seed(app, args.chats)
                await app.start()
                assert app.loop is not None and "telegram" in app.channels, app.failed_channels
                result: dict[str, Any] = {"chats": args.chats, "messages_per_chat": args.messages,
                                          "started": snapshot(app)}
                parent.send("go")
                fakes: dict[str, Any] = await asyncio.to_thread(parent.recv)
                result["answered"] = {k: fakes[k] for k in ("pushed", "answered_once", "missing", "duplicates")}
                result["after_chats"] = snapshot(app)
                await asyncio.sleep(args.idle)  # no traffic: per-chat tasks end, buffering settles
                result["after_idle"] = snapshot(app)
                result["idle_seconds"] = args.idle
                result["rss_peak_mib"] = round(rss_kib("VmHWM") / 1024, 1)
            finally:
                await app.close()
                parent.send("stop")
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description="Soak: per-chat state a long-running gateway keeps.")
    ap.add_argument("--chats", type=int, default=5000)
    ap.add_argument("--messages", type=int, default=3, help="messages per chat")
    ap.add_argument("--idle", type=float, default=10.0, help="seconds without traffic before the last snapshot")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for the last reply")
    ap.add_argument("--json", type=Path, help="also write the figures to this file")
    args = ap.parse_args()
    result = asyncio.run(soak(args))
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    sys.exit(0 if result["answered"]["missing"] == 0 and result["answered"]["duplicates"] == 0 else 1)


if __name__ == "__main__":
    main()
