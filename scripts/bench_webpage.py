"""How heavy the memory page is (docs/BENCHMARKS.md, "Memory page").

Builds one user's memories (N facts of ~25 words, every fifth in Chinese)
in a temp SQLite file, serves the page with the real HttpServer on
127.0.0.1, and fetches a user's first list page, a search and a page of
the "all" tab's second page with httpx; reports each page's bytes (raw,
and gzip -6 as a compressing reverse proxy would send it; the gateway
itself does not compress), the stylesheet's once (a browser caches it), and its form controls (input, select, textarea,
option, button: the DOM a phone builds). Runs unchanged in an older worktree for an
A/B comparison.

    .venv/bin/python scripts/bench_webpage.py [--sizes 50 500] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import random
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx  # noqa: E402
import structlog  # noqa: E402

from gateway.http import HttpServer  # noqa: E402
from gateway.web import mount_memory_page  # noqa: E402
from memory import MemoryEngine, NewMemory  # noqa: E402
from memory.retrieval import Retriever  # noqa: E402

TOKEN = "bench-admin-token-0123456789"
USER = "telegram:42"
WORDS = ("alpha beta gamma delta tea coffee weather project deploy server redis postgres meeting friday monday "
         "sister lisbon car blue tesla cat dog garden music guitar piano book novel travel tokyo paris").split()
ZH = "用户喜欢喝绿茶每周五去健身房项目上线数据库迁移妹妹住在里斯本开特斯拉养了一只猫"


async def _measure(n: int, rng: random.Random) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        engine = await MemoryEngine.open(Path(tmp) / "memory.db")
        try:
            for i in range(n):
                text = ("".join(rng.choices(ZH, k=40)) if i % 5 == 0 else " ".join(rng.choices(WORDS, k=25))) + f" n{i}"
                await engine.add(NewMemory(owner=USER, content=text))
            http = HttpServer("127.0.0.1", 0)
            mount_memory_page(http, engine, Retriever(engine), TOKEN)
            await http.start()
            try:
                out: dict[str, Any] = {"memories": n}
                async with httpx.AsyncClient(base_url=http.url, headers={"Authorization": f"Bearer {TOKEN}"}) as c:
                    for name, params in [("list", {"user": USER}), ("search", {"user": USER, "q": "tea coffee"}),
                                         ("all", {"user": USER, "status": "all", "offset": "20"})]:
                        r = await c.get("/memory", params=params)
                        r.raise_for_status()
                        out[name] = {"bytes": len(r.content), "gzip": len(gzip.compress(r.content, 6)),
                                     "controls": len(re.findall(r"<(?:input|select|textarea|option|button)\b", r.text))}
                    # A stylesheet (since session 26) is fetched once and then cached: listed apart.
                    if style := re.search(r'<link rel="stylesheet" href="([^"]+)"', r.text):
                        css = (await c.get(style.group(1))).content
                        out["stylesheet, once"] = {"bytes": len(css), "gzip": len(gzip.compress(css, 6)), "controls": 0}
                return out
            finally:
                await http.stop()
        finally:
            await engine.close()


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[50, 500])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    rows = [await _measure(n, random.Random(7)) for n in args.sizes]
    for row in rows:
        print(f"{row['memories']:>5} memories: " + ", ".join(
            f"{k} {v['bytes'] / 1024:.1f} KiB (gzip {v['gzip'] / 1024:.1f}, {v['controls']} controls)" for k, v in row.items() if k != "memories"))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
