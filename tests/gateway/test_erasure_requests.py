"""gateway/erasure_requests.py on a real gateway.db: what ``myclaw memory
forget --user`` writes, what a running gateway takes, erases and answers."""

from __future__ import annotations

import asyncio
from pathlib import Path

from gateway.erasure_requests import ErasureRequests, serve
from gateway.sessions import SessionStore
from memory import ManualClock


async def test_a_request_is_taken_once_erased_and_its_counts_read_back(tmp_path: Path, clock: ManualClock) -> None:
    erased: list[str] = []

    async def erase(owner: str) -> dict[str, int]:
        erased.append(owner)
        return {"memories": 3, "timezone": 1}

    async with await SessionStore.open(tmp_path / "gateway.db", clock) as cli, \
            await SessionStore.open(tmp_path / "gateway.db", clock) as gw:
        asked = ErasureRequests(cli.db, clock)
        ready = asyncio.Event()
        server = asyncio.create_task(serve(ErasureRequests(gw.db, clock), erase, ready=ready.set, every=0.01))
        try:
            await asyncio.wait_for(ready.wait(), 10)  # asked before: void (the lock file did not say it yet)
            rid = await asked.ask("telegram:1001")
            async with asyncio.timeout(10):
                while (req := await asked.get(rid)) is None or req.counts is None:
                    await asyncio.sleep(0.01)
            assert req.counts == {"memories": 3, "timezone": 1} and req.taken and not req.error
            await asked.drop(rid)
            second = await asked.ask("feishu:ou_x")  # another process's commit: noticed again
            async with asyncio.timeout(10):
                while (req := await asked.get(second)) is None or req.counts is None:
                    await asyncio.sleep(0.01)
        finally:
            server.cancel()
            await asyncio.gather(server, return_exceptions=True)
    assert erased == ["telegram:1001", "feishu:ou_x"]  # each once


async def test_a_failed_erasure_is_answered_as_failed_and_the_poller_goes_on(tmp_path: Path, clock: ManualClock) -> None:
    async def erase(owner: str) -> dict[str, int]:
        if owner == "bad":
            raise OSError("disk full")
        return {"memories": 1}

    async with await SessionStore.open(tmp_path / "gateway.db", clock) as cli, \
            await SessionStore.open(tmp_path / "gateway.db", clock) as gw:
        asked = ErasureRequests(cli.db, clock)
        ready = asyncio.Event()
        server = asyncio.create_task(serve(ErasureRequests(gw.db, clock), erase, ready=ready.set, every=0.01))
        try:
            await asyncio.wait_for(ready.wait(), 10)
            bad, good = await asked.ask("bad"), await asked.ask("good")
            async with asyncio.timeout(10):
                while (g := await asked.get(good)) is None or g.counts is None:
                    await asyncio.sleep(0.01)
        finally:
            server.cancel()
            await asyncio.gather(server, return_exceptions=True)
        b = await asked.get(bad)
        assert b is not None and b.error == "OSError" and b.counts is None  # its text (a user's words?) not kept
        assert g.counts == {"memories": 1}


async def test_a_request_withdrawn_before_it_is_taken_is_never_acted_on(tmp_path: Path, clock: ManualClock) -> None:
    """The CLI gave up waiting (the gateway busy): withdrawn, then erased
    by the CLI itself; taken already, it cannot be withdrawn (the CLI waits)."""
    async with await SessionStore.open(tmp_path / "gateway.db", clock) as s:
        requests = ErasureRequests(s.db, clock)
        first, second = await requests.ask("alice"), await requests.ask("bob")
        assert await requests.withdraw(first)
        assert [r.owner for r in await requests.take()] == ["bob"]
        assert not await requests.withdraw(second)  # taken: the gateway is erasing
        assert await requests.take() == []


async def test_clearing_voids_what_an_earlier_run_was_asked(tmp_path: Path, clock: ManualClock) -> None:
    """A CLI killed while it waited leaves its row: the next start must not
    erase the user days later, after they came back."""
    async with await SessionStore.open(tmp_path / "gateway.db", clock) as s:
        requests = ErasureRequests(s.db, clock)
        left = await requests.ask("alice")
        await requests.done(await requests.ask("bob"), {"memories": 1})
        assert await requests.clear() == 2
        assert await requests.get(left) is None and await requests.take() == []


async def test_a_gateway_db_refusing_writes_delays_taking_requests_not_the_start(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A full disk at start: the rows left cannot be cleared, so the
    gateway does not say it takes requests (a CLI erases the files itself
    meanwhile); once writes work again it clears, says so, and serves."""
    ready = asyncio.Event()

    async def erase(owner: str) -> dict[str, int]:
        return {"memories": 1}

    async with await SessionStore.open(tmp_path / "gateway.db", clock) as cli, \
            await SessionStore.open(tmp_path / "gateway.db", clock) as gw:
        left = await ErasureRequests(cli.db, clock).ask("asked-of-the-last-run")
        await gw.db.write("PRAGMA query_only = 1")  # every write from here fails
        server = asyncio.create_task(serve(ErasureRequests(gw.db, clock), erase, ready=ready.set, every=0.01))
        try:
            await asyncio.sleep(0.1)
            assert not ready.is_set()
            await gw.db.write("PRAGMA query_only = 0")
            await asyncio.wait_for(ready.wait(), 10)
            asked = ErasureRequests(cli.db, clock)
            assert await asked.get(left) is None  # cleared before anything was taken
            rid = await asked.ask("alice")
            async with asyncio.timeout(10):
                while (req := await asked.get(rid)) is None or req.counts is None:
                    await asyncio.sleep(0.01)
        finally:
            server.cancel()
            await asyncio.gather(server, return_exceptions=True)
