"""Hybrid recall through the whole App: a memory stated in other words is
embedded in the background and comes back by meaning, over the real bus,
SQLite files and the OpenAI-compatible fake (chat and /v1/embeddings)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx

from gateway.app import App, config_secrets
from memory import ManualClock, Provenance
from memory.types import NewMemory
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway import test_remembering_e2e as remembering
from tests.gateway.test_app import _config
from tests.gateway.test_remembering_e2e import Model, fact, say

KEY = "sk-embed-e2e-0123456789"
CONCEPTS = {"automobile": "car"}


def running(tmp_path: Path, clock: ManualClock, *, gateway: dict[str, Any] | None = None, by_hand: bool = False,
            **embedding: Any) -> Any:
    section = {"enabled": True, "model": "fake-embed", "minSimilarity": 0.1, **embedding}
    fake = {"embedding_concepts": CONCEPTS, "embedding_dim": 1024}
    more = {"gateway": gateway} if gateway is not None else {}
    return remembering.running(tmp_path, Model(), clock, fake_options=fake, memory={"embedding": section},
                               by_hand=by_hand, **more)


async def seed(app: App) -> None:
    engine = app.backend.engine  # type: ignore[union-attr]
    for owner, text in [("echo:alice", "Alice's automobile is a blue Tesla"), ("echo:alice", "Alice's sister lives in Lisbon"),
                        ("echo:bob", "Bob's automobile is a red Fiat")]:
        await engine.add(NewMemory(owner=owner, content=text))
    assert await app.vectorizer.drain() == 3  # what the background service does every interval


def prompt_of(fake: FakeOpenAI) -> str:
    return json.dumps(fake.last_chat()["messages"], ensure_ascii=False)


async def test_a_memory_in_other_words_reaches_the_prompt(tmp_path: Path) -> None:
    clock = ManualClock("2026-03-02T10:00:00Z")
    async with running(tmp_path, clock) as (app, fake):
        assert app.vectorizer is not None and app.vectorizer in app._started_services
        await seed(app)
        await say(app, clock, "what colour is my car?", "alice")
        prompt = prompt_of(fake)
        assert "Alice's automobile is a blue Tesla" in prompt
        assert "Bob's automobile" not in prompt  # one user's memories never reach another's prompt
        # The message's vector was asked for with the key, and is not stored.
        assert fake.embedding_requests[-1] == ["what colour is my car?"]
        rows = await app.backend.engine.db.fetchall("SELECT count(*) FROM embedding_cache")  # type: ignore[union-attr]
        assert rows[0][0] == 3  # the three memories only


async def test_without_embeddings_the_same_question_misses(tmp_path: Path) -> None:
    clock = ManualClock("2026-03-02T10:00:00Z")
    async with running(tmp_path, clock, enabled=False) as (app, fake):
        assert app.vectorizer is None
        engine = app.backend.engine  # type: ignore[union-attr]
        await engine.add(NewMemory(owner="echo:alice", content="Alice's automobile is a blue Tesla"))
        await say(app, clock, "what colour is my car?", "alice")
        assert "blue Tesla" not in prompt_of(fake)
        assert fake.embedding_requests == []


async def test_a_down_endpoint_still_gets_a_reply_with_lexical_recall(tmp_path: Path) -> None:
    clock = ManualClock("2026-03-02T10:00:00Z")
    async with running(tmp_path, clock, queryTimeout="200ms") as (app, fake):
        await seed(app)
        fake.queue_embedding_error(500, times=5)
        reply = await say(app, clock, "where does my sister live?", "alice")
        assert reply
        assert "Lisbon" in prompt_of(fake)  # found by its words
        fake.embedding_delay = 2.0
        reply = await say(app, clock, "what colour is my car?", "alice")
        assert reply and "blue Tesla" not in prompt_of(fake)  # answered without waiting for the vector
        assert app.backend.retriever.fallbacks == 2  # type: ignore[union-attr]


def test_the_embedding_key_is_a_secret(tmp_path: Path) -> None:
    fake = FakeOpenAI(api_key=KEY)
    fake.port = 1
    cfg, _ = _config(tmp_path, fake, memory={"embedding": {"enabled": True, "provider": {"apiKey": "sk-embed-only-987654"}}})
    assert "sk-embed-only-987654" in config_secrets(cfg)


async def test_a_fact_saved_or_extracted_is_found_by_meaning_at_once(tmp_path: Path) -> None:
    """The vectorizer polls hourly here: only the wake after a save or an
    extraction can embed the new facts before the next question."""
    clock = ManualClock("2026-03-02T10:00:00Z")
    async with running(tmp_path, clock, interval="1h", by_hand=True) as (app, fake):
        index = app.vectorizer.index

        async def embedded(n: int) -> bool:
            for _ in range(300):
                if await index.count() == n:
                    return True
                await asyncio.sleep(0.01)
            return False

        # What the memory_save tool does.
        await app.backend.remember("echo:alice", "Alice's automobile is a blue Tesla", provenance=Provenance(channel="echo"))
        assert await embedded(1)
        await say(app, clock, "what colour is my car?", "alice")
        assert "Alice's automobile is a blue Tesla" in prompt_of(fake)

        # What the extraction service writes after a quiet gap.
        model = fake.responder
        model.extractions.append(("Oporto", {"facts": [fact("Alice's sister moved to Oporto")], "summary": "family"}))
        await say(app, clock, "my sister moved to Oporto last week", "alice")
        clock.advance(200)
        assert [r.ok for r in await app.extraction.tick()] == [True]
        assert await embedded(2)


async def test_a_new_dimensions_setting_embeds_every_memory_again(tmp_path: Path) -> None:
    """The operator changes ``dimensions`` of the same model: the cached
    vectors of the old size must not be stored as the new size's, or every
    query (of the new size) misses every memory (of the old one) for good."""
    clock = ManualClock("2026-03-02T10:00:00Z")
    async with running(tmp_path, clock, dimensions=256) as (app, fake):
        await seed(app)
    async with running(tmp_path, clock, dimensions=128) as (app, fake):
        await app.vectorizer.drain()  # the background service may have done them already, as it starts
        rows = await app.backend.engine.db.fetchall(  # type: ignore[union-attr]
            "SELECT model, length(vector) FROM memory_vectors"
        )
        assert [tuple(r) for r in rows] == [("fake-embed@128", 4 * 128)] * 3
        await say(app, clock, "what colour is my car?", "alice")
        assert "Alice's automobile is a blue Tesla" in prompt_of(fake)


async def test_turned_off_and_on_again_nothing_breaks_and_nothing_is_embedded_twice(tmp_path: Path) -> None:
    clock = ManualClock("2026-03-02T10:00:00Z")
    async with running(tmp_path, clock) as (app, fake):
        await seed(app)
    async with running(tmp_path, clock, enabled=False) as (app, fake):
        engine = app.backend.engine  # type: ignore[union-attr]
        assert app.vectorizer is None
        assert await say(app, clock, "where does my sister live?", "alice")
        assert "Lisbon" in prompt_of(fake) and fake.embedding_requests == []
        [sister] = [m for m in await engine.list_memories("echo:alice") if "Lisbon" in m.content]
        await engine.delete(sister.id)  # forgotten while off: its vector goes with it
        await engine.purge_erased()
        rows = await engine.db.fetchall("SELECT count(*) FROM memory_vectors")
        assert rows[0][0] == 2
    async with running(tmp_path, clock) as (app, fake):
        assert await app.vectorizer.drain() == 0 and fake.embedding_requests == []  # the kept vectors serve
        await say(app, clock, "what colour is my car?", "alice")
        assert "Alice's automobile is a blue Tesla" in prompt_of(fake)
        assert "Lisbon" not in prompt_of(fake)


async def test_a_memory_added_or_edited_on_the_memory_page_is_found_by_meaning_at_once(tmp_path: Path) -> None:
    """The vectorizer polls hourly here: only a wake from the memory page can
    embed the new words before the next question (it used to wait up to the
    interval, 15 s by default, and recall missed the edit meanwhile)."""
    clock = ManualClock("2026-03-02T10:00:00Z")
    token = "page-token-" + "x" * 24
    async with running(tmp_path, clock, interval="1h", gateway={"port": 0, "admin": {"enabled": True, "token": token}}) as (
        app, fake
    ):
        index = app.vectorizer.index
        await seed(app)

        async def current() -> bool:
            for _ in range(300):
                if not await index.pending():
                    return True
                await asyncio.sleep(0.01)
            return False

        async with httpx.AsyncClient(base_url=app.http.url, timeout=10,
                                     headers={"Authorization": f"Bearer {token}"}) as c:
            r = await asyncio.wait_for(c.post("/memory/api/add", json={
                "user": "echo:alice", "content": "Alice keeps her kitten Miso at her mother's"}), 10)
            assert r.status_code == 201, r.text
            assert await current()
            [sister] = [m for m in await app.backend.engine.list_memories("echo:alice")  # type: ignore[union-attr]
                        if "Lisbon" in m.content]
            r = await asyncio.wait_for(c.post("/memory/api/edit", json={
                "id": sister.id, "user": "echo:alice", "content": "Alice's sister bought an automobile in Lisbon"}), 10)
            assert r.status_code == 200, r.text
            assert await current()
        await say(app, clock, "which car does my sibling use?", "alice")
        assert "Alice's sister bought an automobile in Lisbon" in prompt_of(fake)


async def test_a_memory_added_by_the_cli_is_found_by_meaning_within_a_second(tmp_path: Path) -> None:
    """`myclaw memory add` is another process: it cannot wake the running
    gateway's vectorizer (polling hourly here). The gateway notices the
    other connection's commit on its one-second tick and embeds the memory,
    so the next question finds it by meaning."""
    import os
    import sys

    from tests.gateway.test_app import REPO
    from tests.procs import finished

    clock = ManualClock("2026-03-02T10:00:00Z")
    async with running(tmp_path, clock, interval="1h") as (app, fake):
        index = app.vectorizer.index
        await seed(app)
        env = {k: v for k, v in os.environ.items() if not k.startswith("MYCLAW_")}
        env["MYCLAW_HOME"] = str(tmp_path)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", "from gateway.cli import main; main()", "memory", "add",
            "Alice's automobile is parked at the airport", "--user", "echo:alice",
            cwd=REPO, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        out, err = await finished(proc)
        assert proc.returncode == 0, err.decode()
        assert "added memory" in out.decode()

        async def embedded() -> bool:
            for _ in range(500):  # 5 s: the tick is 1 s, the interval an hour
                if await index.count() == 4:
                    return True
                await asyncio.sleep(0.01)
            return False

        assert await embedded()
        await say(app, clock, "where did I leave my car?", "alice")
        assert "Alice's automobile is parked at the airport" in prompt_of(fake)


async def test_a_memory_file_edited_by_hand_is_embedded_at_once(tmp_path: Path) -> None:
    """The vectorizer polls hourly here: a MEMORY.md line the file sync
    imports while the gateway runs must wake it, as a fact saved or
    edited on the memory page does, or the new words are found by their
    words only until the next interval (15 s by default)."""
    from memory.filestore import owner_record, user_slug

    clock = ManualClock("2026-03-02T10:00:00Z")
    async with running(tmp_path, clock, interval="1h") as (app, fake):
        assert app.file_sync is not None
        index = app.vectorizer.index
        folder = app.paths.workspace(app.cfg) / "memory" / "users" / user_slug("echo:alice")
        folder.mkdir(parents=True)
        (folder / ".owner").write_text(owner_record("echo:alice"), encoding="utf-8")
        (folder / "MEMORY.md").write_text("- Alice's automobile is a blue Tesla\n", encoding="utf-8")

        async def embedded(words: str) -> bool:
            for _ in range(300):
                if any(m.content == words for m in await index.pending()):
                    await asyncio.sleep(0.01)
                    continue
                rows = await app.backend.engine.db.fetchall(  # type: ignore[union-attr]
                    "SELECT count(*) FROM memory_vectors v JOIN memories m ON m.id = v.memory_id WHERE m.content = ?",
                    (words,))
                if rows[0][0] == 1:
                    return True
                await asyncio.sleep(0.01)
            return False

        await app.file_sync.poll()  # notes the new file
        await app.file_sync.poll()  # imports it, unchanged since
        assert await embedded("Alice's automobile is a blue Tesla")
        # Edited by hand: the new words get their own vector.
        (folder / "MEMORY.md").write_text("- Alice's automobile is a red Fiat\n", encoding="utf-8")
        await app.file_sync.poll()
        await app.file_sync.poll()
        assert await embedded("Alice's automobile is a red Fiat")
