"""What listing gateway.db's users costs a memory page render
(docs/BENCHMARKS.md, "The memory page's user list").

The page's sidebar lists everyone exportable by ``?user=``: memory.db's
owners and, since session 34, those the gateway keeps only history,
inbox rows or settings of (``UserData.owners``). The history's owners are
found by a scan (no index on ``session_messages.owner``), so the list is
cached (gateway/web/_kept_owners.py). Builds U users with M history
messages each in a temp gateway.db (U/2 of them with a memory each in
memory.db), serves the page with the real HttpServer on 127.0.0.1 and
times R renders of ``/memory?user=`` with httpx, three ways: memory.db's
owners only (before), gateway.db read on every render (uncached), and
through the cache (after).

    .venv/bin/python scripts/bench_web_users.py [--users 2000] [--messages 50] [--renders 40]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx  # noqa: E402
import structlog  # noqa: E402

from gateway.http import HttpServer  # noqa: E402
from gateway.sessions import SessionStore  # noqa: E402
from gateway.web import mount_memory_page  # noqa: E402
from gateway.web._kept_owners import KeptOwners  # noqa: E402
from memory import MemoryEngine, NewMemory, SystemClock  # noqa: E402
from memory.retrieval import Retriever  # noqa: E402

TOKEN = "bench-admin-token-0123456789"


async def _fill(sessions: SessionStore, users: int, messages: int) -> None:
    async with sessions.db.transaction() as conn:
        for u in range(users):
            cur = await conn.execute("INSERT INTO sessions (key, channel, chat_id, started_at) VALUES (?, ?, ?, ?)",
                                     (f"telegram:{u}", "telegram", str(u), "2026-03-01T10:00:00Z"))
            sid = cur.lastrowid
            await conn.executemany(
                "INSERT INTO session_messages (session_id, role, content, owner, message_id, created_at, buffered) "
                "VALUES (?, ?, ?, ?, ?, ?, 1)",
                [(sid, "user" if m % 2 == 0 else "assistant", f"message {m} of user {u} about the weather",
                  f"telegram:{u}", str(m), "2026-03-01T10:00:00Z") for m in range(messages)])


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--users", type=int, default=2000)
    ap.add_argument("--messages", type=int, default=50)
    ap.add_argument("--renders", type=int, default=40)
    args = ap.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    with tempfile.TemporaryDirectory() as tmp:
        engine = await MemoryEngine.open(Path(tmp) / "memory.db")
        sessions = await SessionStore.open(Path(tmp) / "gateway.db", SystemClock())
        try:
            await _fill(sessions, args.users, args.messages)
            for u in range(0, args.users, 2):
                await engine.add(NewMemory(owner=f"telegram:{u}", content=f"user {u} likes tea"))
            http = HttpServer("127.0.0.1", 0)
            web = mount_memory_page(http, engine, Retriever(engine), TOKEN)
            await http.start()
            try:
                cached = KeptOwners(sessions.owners)
                ways = [("memory.db only (before)", None), ("gateway.db each render", sessions.owners),
                        ("cached, 30 s TTL (after)", cached.get)]
                async with httpx.AsyncClient(base_url=http.url, headers={"Authorization": f"Bearer {TOKEN}"},
                                             timeout=60) as c:
                    for name, fetch in ways:
                        web.admin.kept_owners = fetch
                        times = []
                        for _ in range(args.renders):
                            t0 = time.perf_counter()
                            r = await c.get("/memory", params={"user": "telegram:1"})
                            times.append((time.perf_counter() - t0) * 1000)
                            r.raise_for_status()
                        listed = r.text.count('href="/memory?user=telegram%3A')
                        print(f"{name:>26}: median {statistics.median(times):6.1f} ms, p90 "
                              f"{statistics.quantiles(times, n=10)[-1]:6.1f} ms, {listed} user links")
                print(f"cache reads of gateway.db: {cached.reads} in {args.renders} renders")
            finally:
                await http.stop()
        finally:
            await sessions.close()
            await engine.close()


if __name__ == "__main__":
    asyncio.run(main())
