"""A fact the chat model saves with ``memory_save`` is found by the search
terms it gave (memory/cues.py, docs/RETRIEVAL.md §6c), as an extracted
fact is: an English decision comes back to a Chinese question, without
embeddings. Through the real App, SQLite files and the OpenAI fake."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gateway.app import App
from memory import ManualClock
from tests.fakes.openai_server import FakeOpenAI, split_user_content, text_of
from tests.gateway.test_app import ECHO, EchoChannel, _config

FACT = "We picked Postgres over MySQL"


def _recalled(body: dict[str, Any]) -> str:
    return split_user_content(text_of(body["messages"][-1]["content"]))[0]


async def _saved(tmp_path: Path, clock: ManualClock, fake: FakeOpenAI, arguments: dict[str, Any]) -> tuple[App, Any]:
    cfg, paths = _config(tmp_path, fake)
    fake.queue_reply(None, tool_calls=[{"name": "memory_save", "arguments": arguments}])
    fake.queue_reply("Noted!")
    app = App(cfg, paths, clock=clock, channel_specs=[ECHO])
    await app.open()
    await app.start()
    echo = app.channels["echo"]
    assert isinstance(echo, EchoChannel)
    assert (await echo.say("remember that we went with Postgres, not MySQL")).text == "Noted!"
    [m] = await app.backend.engine.list_memories(None)  # type: ignore[attr-defined]
    return app, m


async def test_a_fact_the_model_saves_is_found_by_the_terms_it_gave(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    app, m = await _saved(tmp_path, clock, fake_llm, {
        "content": FACT, "category": "decision", "terms": ["数据库", "database", "选型", "Postgres"],
    })
    try:
        assert m.content == FACT and m.search_terms == ("数据库", "database", "选型", "Postgres")
        fake_llm.queue_reply("Postgres。")
        await app.channels["echo"].say("数据库我们最后选了什么？")  # type: ignore[attr-defined]
        assert FACT in _recalled(fake_llm.last_chat())
        # The terms are not the fact: never shown to the model as memory.
        assert "选型" not in _recalled(fake_llm.last_chat())
    finally:
        await app.close()


async def test_the_tool_offers_terms_and_hostile_ones_change_nothing_else(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    app, m = await _saved(tmp_path, clock, fake_llm, {
        "content": FACT, "category": "decision",
        "terms": ["x" * 500, {"a": 1}, 7, "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789", "数据\u202e库", "database"],
    })
    try:
        props = next(t for t in fake_llm.chat_requests()[0]["tools"] if t["function"]["name"] == "memory_save")
        assert props["function"]["parameters"]["properties"]["terms"]["type"] == "array"
        # Kept: the fact as given; of the terms, only the clean words (no key's shape, no bidi mark).
        assert (m.content, m.category.value, m.importance) == (FACT, "decision", 0.8)
        assert m.search_terms == ("数据库", "database")
    finally:
        await app.close()


async def test_terms_that_are_no_list_leave_the_fact_saved_without_terms(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    app, m = await _saved(tmp_path, clock, fake_llm, {"content": FACT, "terms": {"zh": "数据库"}})
    try:
        assert m.content == FACT and m.search_terms == ()
        assert "Saved" in str(fake_llm.chat_requests()[1]["messages"])  # the tool answered, not refused
    finally:
        await app.close()


async def test_a_saved_credential_gets_no_terms(tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI) -> None:
    app, m = await _saved(tmp_path, clock, fake_llm, {
        "content": "The wifi password is hunter22", "category": "credential", "terms": ["wifi", "密码", "hunter22"],
    })
    try:
        assert m.category.value == "credential" and m.search_terms == ()
    finally:
        await app.close()


async def test_saying_it_again_adds_the_new_terms_to_the_fact(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    app, m = await _saved(tmp_path, clock, fake_llm, {"content": FACT, "terms": ["数据库", "database"]})
    try:
        fake_llm.queue_reply(None, tool_calls=[{"name": "memory_save",
                                                "arguments": {"content": FACT, "terms": ["database", "选型"]}}])
        fake_llm.queue_reply("Noted again!")
        await app.channels["echo"].say("remember it: Postgres")  # type: ignore[attr-defined]
        [again] = await app.backend.engine.list_memories(None)  # type: ignore[attr-defined]
        assert again.id == m.id and again.search_terms == ("数据库", "database", "选型")
    finally:
        await app.close()
