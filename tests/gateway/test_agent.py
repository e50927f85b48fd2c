from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gateway.agent import Agent, apology
from gateway.llm import LLMBadRequest, LLMClient, LLMTimeout
from gateway.memory_tools import memory_tools
from gateway.sessions import SessionStore
from gateway.tools import Tool, ToolContext
from memory import Category, MemoryEngine, NewMemory, Provenance
from memory.retrieval import Retriever
from memory.service import SqliteMemory
from tests.fakes.openai_server import FakeOpenAI, Reply, images, text_of
from tests.logjson import debug_json_log, lines

ALICE = ToolContext(user="alice", channel="telegram", chat_id="42", private=True, message_id="7", sender_id="100")
SYSTEM = [{"role": "system", "content": "sys"}, {"role": "user", "content": "question"}]


def _llm(fake: FakeOpenAI, **kw: Any) -> LLMClient:
    return LLMClient(base_url=fake.url, api_key=fake.api_key or "", model="m", max_retries=0, **kw)


def _tool_messages(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


async def test_plain_reply(fake_llm: FakeOpenAI, engine: MemoryEngine) -> None:
    fake_llm.queue_reply("hello")
    async with _llm(fake_llm) as llm:
        reply = await Agent(llm, tools=memory_tools(SqliteMemory(engine))).run(SYSTEM, ALICE)
    assert reply.ok and reply.text == "hello" and reply.rounds == 1 and reply.llm_ms > 0
    names = [t["function"]["name"] for t in fake_llm.requests[0]["tools"]]
    assert names == ["memory_search", "memory_save", "memory_forget"]


async def test_memory_search_is_scoped_to_the_asker(fake_llm: FakeOpenAI, engine: MemoryEngine) -> None:
    mem = SqliteMemory(engine)
    await mem.remember("alice", "Alice's cat is called Mochi", provenance=Provenance(channel="telegram", chat_id="42"))
    await mem.remember("bob", "Bob's cat is called Tiger", provenance=Provenance(channel="telegram", chat_id="43"))
    fake_llm.queue_reply(None, tool_calls=[{"name": "memory_search", "arguments": {"query": "cat called"}}])
    fake_llm.queue_reply("Your cat is Mochi.")
    async with _llm(fake_llm) as llm:
        reply = await Agent(llm, tools=memory_tools(mem)).run(SYSTEM, ALICE)
    assert reply.ok and reply.text == "Your cat is Mochi." and reply.tools_used == ("memory_search",)
    (result,) = _tool_messages(fake_llm.requests[1])
    assert "Mochi" in result and "[m1 · 2026-03-01 · told by you on Telegram]" in result
    assert "Tiger" not in fake_llm.prompts_text()
    # the assistant's tool call is echoed back before the result
    assert fake_llm.requests[1]["messages"][-2]["tool_calls"][0]["function"]["name"] == "memory_search"


async def test_memory_search_cites_in_chinese_when_the_message_is_chinese(
    fake_llm: FakeOpenAI, engine: MemoryEngine
) -> None:
    """The model repeats a citation's words to the user: they are in the
    language of the message it answers, as the recalled <memories> are."""
    mem = SqliteMemory(engine)
    await mem.remember("alice", "Alice's cat is called Mochi", provenance=Provenance(channel="telegram", chat_id="42"))
    for said, cited in (("[photo] 我的猫叫什么？", "[m1 · 2026-03-01 · 你在 Telegram 上告诉我的]"),
                        ("what is my cat called?", "[m1 · 2026-03-01 · told by you on Telegram]")):
        fake_llm.queue_reply(None, tool_calls=[{"name": "memory_search", "arguments": {"query": "cat"}}])
        fake_llm.queue_reply("Mochi")
        async with _llm(fake_llm) as llm:
            await Agent(llm, tools=memory_tools(mem)).run(SYSTEM, replace(ALICE, message_text=said))
        (result,) = _tool_messages(fake_llm.requests[-1])
        assert cited in result


async def test_memory_search_marks_what_was_said_next_to_a_match_as_context(
    fake_llm: FakeOpenAI, engine: MemoryEngine
) -> None:
    # "Miso, she is three" holds no "cat": it came in as the next turn of a
    # hit, and the model was handed it as one more match.
    chat = Provenance(channel="telegram", chat_id="42", session="s1")
    ask = (await engine.add(NewMemory(owner="alice", content="Alice asked what my cat is called",
                                      category=Category.CONVERSATION, provenance=chat))).id
    answer = (await engine.add(NewMemory(owner="alice", content="Miso, she is three",
                                         category=Category.CONVERSATION, provenance=chat))).id
    for said, heading in (("what is my cat called?", "Said next to a match in the same conversation "
                                                     "(context, not matches):"),
                          ("我的猫叫什么？", "同一对话中紧挨着匹配项说的（上下文，并非匹配）：")):
        fake_llm.queue_reply(None, tool_calls=[{"name": "memory_search", "arguments": {"query": "cat"}}])
        fake_llm.queue_reply("Miso")
        async with _llm(fake_llm) as llm:
            await Agent(llm, tools=memory_tools(SqliteMemory(engine))).run(SYSTEM, replace(ALICE, message_text=said))
        (result,) = _tool_messages(fake_llm.requests[-1])
        lines = result.splitlines()
        assert lines[0].startswith(f"- [m{ask} · ") and lines[1] == heading
        assert lines[2].startswith(f"- [m{answer} · ") and lines[2].endswith("Miso, she is three")


async def test_memory_save_writes_for_the_asker_with_provenance(fake_llm: FakeOpenAI, engine: MemoryEngine) -> None:
    fake_llm.queue_reply(None, tool_calls=[{"name": "memory_save", "arguments": {"content": "部署密码在 1Password 里", "category": "credential"}}])
    fake_llm.queue_reply("记住了")
    async with _llm(fake_llm) as llm:
        reply = await Agent(llm, tools=memory_tools(SqliteMemory(engine))).run(SYSTEM, ALICE)
    assert reply.text == "记住了"
    (m,) = await engine.list_memories("alice")
    assert m.content == "部署密码在 1Password 里" and m.category.value == "credential" and m.source.value == "manual"
    assert (m.provenance.channel, m.provenance.chat_id, m.provenance.message_ids) == ("telegram", "42", ("7",))
    assert await engine.list_memories("bob") == []
    assert _tool_messages(fake_llm.requests[1])[0].startswith("Saved [m1 · 2026-03-01")


async def test_memory_save_in_a_group_saves_the_groups_note_naming_the_asker(
    fake_llm: FakeOpenAI, engine: MemoryEngine
) -> None:
    """"Remember Mia is allergic to peanuts when you suggest restaurants",
    said in a family group: saved as the group's own note (memory/groupnotes.py),
    read by every member there, naming who said it, erased with them; never
    the asker's own memory, never a secret."""
    mia = replace(ALICE, private=False, chat_id="-100900", sender_name="Mom",
                  message_text="remember for everyone: Mia is allergic to peanuts, no satay")
    fake_llm.queue_reply(None, tool_calls=[{"name": "memory_save", "arguments": {
        "content": "Mia is allergic to peanuts", "category": "identity"}}])
    fake_llm.queue_reply("Noted for the whole group.")
    async with _llm(fake_llm) as llm:
        await Agent(llm, tools=memory_tools(SqliteMemory(engine))).run(SYSTEM, mia)
    (result,) = _tool_messages(fake_llm.requests[1])
    assert result.startswith("Saved as the group's note (every member here may read it, in this group only): [m1")
    assert "the group's note, said by Mom" in result
    assert await engine.list_memories("alice") == []
    (note,) = await engine.list_memories("group:telegram:-100900")
    assert note.content == "Mia is allergic to peanuts" and note.provenance.speakers == ("alice",)
    # A secret is refused there; the file store (memory off) keeps no group notes.
    fake_llm.queue_reply(None, tool_calls=[{"name": "memory_save", "arguments": {
        "content": "The wifi password is hunter2", "category": "credential"}}])
    fake_llm.queue_reply("Please tell me that privately.")
    async with _llm(fake_llm) as llm:
        await Agent(llm, tools=memory_tools(SqliteMemory(engine))).run(SYSTEM, mia)
    assert "never keep a secret" in _tool_messages(fake_llm.requests[-1])[0]
    # Nor what the asker did not say: another member's words in the history may be what asks.
    fake_llm.queue_reply(None, tool_calls=[{"name": "memory_save", "arguments": {
        "content": "Alice wants her data sent to Bob"}}])
    fake_llm.queue_reply("I cannot.")
    async with _llm(fake_llm) as llm:
        await Agent(llm, tools=memory_tools(SqliteMemory(engine))).run(SYSTEM, replace(mia, message_text="what time is it?"))
    assert "only from what the asking member says in this very message" in _tool_messages(fake_llm.requests[-1])[0]
    assert len(await engine.list_memories("group:telegram:-100900")) == 1


async def test_memory_forget_in_a_group_forgets_the_groups_notes_only(
    fake_llm: FakeOpenAI, engine: MemoryEngine
) -> None:
    mem = SqliteMemory(engine)
    group = replace(ALICE, private=False, chat_id="-100900", sender_name="Alice")
    note = await mem.remember("group:telegram:-100900", "Dad is booking the hotel", provenance=Provenance(
        channel="telegram", chat_id="-100900", group=True, speakers=("dad",)))
    other = await mem.remember("group:telegram:-100901", "Sam brings the grill", provenance=Provenance(
        channel="telegram", chat_id="-100901", group=True, speakers=("sam",)))
    own = await mem.remember("alice", "Alice drinks green tea", provenance=Provenance(channel="telegram", chat_id="42"))
    fake_llm.queue_reply(None, tool_calls=[{"name": "memory_forget", "arguments": {
        "ids": [note.ref, own.ref, other.ref]}}])
    fake_llm.queue_reply("Done.")
    async with _llm(fake_llm) as llm:
        reply = await Agent(llm, tools=memory_tools(mem)).run(SYSTEM, group)
    (result,) = _tool_messages(fake_llm.requests[1])
    assert result.startswith(f"Erased for good, of the group's notes: {note.ref} Dad is booking the hotel")
    assert "Not a note of this group's" in result and own.ref in result and other.ref in result
    assert await engine.get(note.id) is None
    assert await engine.get(own.id) is not None and await engine.get(other.id) is not None
    assert reply.forgot
    log = await engine.db.fetchone("SELECT owner, detail FROM memory_log WHERE action = 'forget-in-group'")
    assert log[0] == "group:telegram:-100900" and '"by":"alice"' in log[1]


async def test_memory_forget_erases_the_askers_memory_and_nothing_else(
    fake_llm: FakeOpenAI, engine: MemoryEngine, tmp_path: Path
) -> None:
    mem = SqliteMemory(engine)
    said = "remember my door code is 4711"
    door = await mem.remember("alice", "Alice's door code is 4711", provenance=Provenance(channel="telegram", chat_id="42"),
                              source_text=said)
    bobs = await mem.remember("bob", "Bob's door code is 1234", provenance=Provenance(channel="telegram", chat_id="43"))
    async with await SessionStore.open(tmp_path / "gateway.db") as history:
        for owner, role, text in [("alice", "user", said), ("alice", "assistant", "Saved: Alice's door code is 4711."),
                                  ("alice", "user", "and what's the weather?"), ("bob", "user", "remember my door code is 4711")]:
            await history.append(f"telegram:{owner}", channel="telegram", chat_id=owner, role=role, content=text, owner=owner)
        # The model was talked into passing bob's id too: it is answered as unknown, and kept.
        fake_llm.queue_reply(None, tool_calls=[{"name": "memory_forget", "arguments": {"ids": [door.ref, bobs.ref]}}])
        fake_llm.queue_reply("Done, I forgot your door code.")
        async with _llm(fake_llm) as llm:
            tools = memory_tools(mem, forget_history=history.erase_matching)
            reply = await Agent(llm, tools=tools).run(SYSTEM, ALICE)
        assert reply.text == "Done, I forgot your door code." and reply.tools_used == ("memory_forget",)
        assert reply.forgot  # the loop keeps this turn's words from extraction
        (result,) = _tool_messages(fake_llm.requests[1])
        assert result.startswith(f"Erased for good: {door.ref} Alice's door code is 4711")
        assert f"No memory of this user with id: {bobs.ref}" in result and "1234" not in result
        assert "Also erased from the conversation history: 2 message(s)" in result
        assert await engine.get(door.id) is None and await engine.get(bobs.id) is not None
        # The next prompt's history no longer shows it; bob's own line, the same words, stays.
        assert [m.content for m in await history.window("telegram:alice")] == ["and what's the weather?"]
        assert [m.content for m in await history.window("telegram:bob")] == ["remember my door code is 4711"]

    # Not in a group chat: the erasure would be of the sender's private memories in front of others.
    tea = await mem.remember("alice", "Alice drinks green tea", provenance=Provenance(channel="telegram", chat_id="42"))
    fake_llm.queue_reply(None, tool_calls=[{"name": "memory_forget", "arguments": {"ids": [tea.ref]}}])
    fake_llm.queue_reply("I can only do that in a private chat.")
    async with _llm(fake_llm) as llm:
        await Agent(llm, tools=memory_tools(mem)).run(SYSTEM, replace(ALICE, private=False))
    assert "forgotten only in a private chat" in _tool_messages(fake_llm.requests[-1])[0]
    assert await engine.get(tea.id) is not None


async def test_memory_forget_reaches_the_core_memory_and_names_what_it_was_drawn_from(
    fake_llm: FakeOpenAI, engine: MemoryEngine
) -> None:
    mem = SqliteMemory(engine)
    veg = await mem.remember("alice", "Alice is vegetarian", provenance=Provenance(channel="telegram", chat_id="42"))
    entry = await engine.add(NewMemory(owner="alice", tier=1, content="Vegetarian", category=Category.IDENTITY,
                                       provenance=Provenance(refs=("weekly", f"m:{veg.id}"))))
    # The Core Memory line carries its id, so the model can name it.
    assert await mem.profile("alice") == f"- [m{entry.id} · 2026-03-01] Vegetarian"
    fake_llm.queue_reply(None, tool_calls=[{"name": "memory_forget", "arguments": {"ids": [f"m{entry.id}"]}}])
    fake_llm.queue_reply(None, tool_calls=[{"name": "memory_forget", "arguments": {"ids": [veg.ref]}}])
    fake_llm.queue_reply("Forgotten.")
    async with _llm(fake_llm) as llm:
        reply = await Agent(llm, tools=memory_tools(mem)).run(SYSTEM, ALICE)
    assert reply.text == "Forgotten." and reply.tools_used == ("memory_forget", "memory_forget")
    first = _tool_messages(fake_llm.requests[1])[0]
    assert first.startswith(f"Erased for good: m{entry.id} Vegetarian")
    assert f"Not erased, records linked to it (what it was drawn from, or what was drawn from it): {veg.ref} Alice is vegetarian" in first
    # Named, not erased on the model's behalf: the second call still finds it.
    assert _tool_messages(fake_llm.requests[2])[-1].startswith(f"Erased for good: {veg.ref} Alice is vegetarian")
    assert await engine.list_memories("alice", status=None) == [] and await mem.profile("alice") == ""

    # The other way round: forgetting the fact takes the entry built on it.
    tea = await mem.remember("alice", "Alice drinks green tea", provenance=Provenance(channel="telegram", chat_id="42"))
    teas = await engine.add(NewMemory(owner="alice", tier=1, content="Green tea drinker", category=Category.IDENTITY,
                                      provenance=Provenance(refs=("weekly", f"m:{tea.id}"))))
    fake_llm.queue_reply(None, tool_calls=[{"name": "memory_forget", "arguments": {"ids": [tea.ref]}}])
    fake_llm.queue_reply("Forgotten.")
    async with _llm(fake_llm) as llm:
        await Agent(llm, tools=memory_tools(mem)).run(SYSTEM, ALICE)
    result = _tool_messages(fake_llm.requests[-1])[-1]
    assert f"Also erased, Core Memory entries built on it: m{teas.id} Green tea drinker" in result
    assert await engine.get(teas.id) is None and await mem.profile("alice") == ""


async def test_a_saved_memory_is_indexed_with_the_message_it_answers(fake_llm: FakeOpenAI, engine: MemoryEngine) -> None:
    said = "remember that the deploy password lives in 1Password, vault Ops"
    for _ in range(2):  # the second save restates it: no new row, nothing new to add
        fake_llm.queue_reply(None, tool_calls=[{"name": "memory_save", "arguments": {"content": "部署密码在 1Password 里"}}])
        fake_llm.queue_reply("ok")
        async with _llm(fake_llm) as llm:
            await Agent(llm, tools=memory_tools(SqliteMemory(engine))).run(SYSTEM, replace(ALICE, message_text=said))
    (m,) = await engine.list_memories("alice")
    assert m.source_text == said and m.access_count == 1
    hits = await Retriever(engine).retrieve("alice", "which vault holds the deploy password?")
    assert hits[0].id == m.id and hits[0].content == "部署密码在 1Password 里"


async def test_bad_tool_calls_go_back_to_the_model(fake_llm: FakeOpenAI, engine: MemoryEngine) -> None:
    fake_llm.queue_reply(
        None,
        tool_calls=[
            {"name": "rm_rf", "arguments": {}},
            {"name": "memory_save", "arguments": "{not json"},
            {"name": "memory_save", "arguments": {"content": "x", "category": "nonsense"}},
        ],
    )
    fake_llm.queue_reply("done")
    async with _llm(fake_llm) as llm:
        reply = await Agent(llm, tools=memory_tools(SqliteMemory(engine))).run(SYSTEM, ALICE)
    assert reply.ok and reply.text == "done" and not reply.forgot
    results = _tool_messages(fake_llm.requests[1])
    assert "no tool named 'rm_rf'" in results[0] and "not a JSON object" in results[1] and "unknown category" in results[2]
    assert await engine.list_memories("alice") == []


async def test_tool_rounds_are_bounded(fake_llm: FakeOpenAI, engine: MemoryEngine) -> None:
    def responder(body: dict[str, Any]) -> Reply:
        if body.get("tool_choice") == "none":
            return Reply(content="giving up on tools")
        return Reply(content=None, tool_calls=[{"name": "memory_search", "arguments": {"query": "loop"}}])

    fake_llm.responder = responder
    async with _llm(fake_llm) as llm:
        reply = await Agent(llm, tools=memory_tools(SqliteMemory(engine)), max_rounds=3).run(SYSTEM, ALICE)
    assert reply.text == "giving up on tools" and reply.rounds == 4 and len(fake_llm.requests) == 4


async def test_provider_without_tools_is_retried_once_without_them(fake_llm: FakeOpenAI, engine: MemoryEngine) -> None:
    fake_llm.queue_error(400, body="This model does not support tools")
    fake_llm.queue_reply("plain answer")
    fake_llm.queue_reply("second answer")
    async with _llm(fake_llm) as llm:
        agent = Agent(llm, tools=memory_tools(SqliteMemory(engine)))
        assert (await agent.run(SYSTEM, ALICE)).text == "plain answer"
        assert (await agent.run(SYSTEM, ALICE)).text == "second answer"
    first, *later = fake_llm.requests
    assert "tools" in first and len(later) == 2 and all("tools" not in body for body in later)
    assert not agent.tools_supported


async def test_failures_become_apologies_in_the_users_language(fake_llm: FakeOpenAI) -> None:
    fake_llm.queue_error(500)
    fake_llm.queue_error(500)
    fake_llm.queue_reply("")  # an empty answer is a failure too
    async with _llm(fake_llm) as llm:
        agent = Agent(llm)
        zh = await agent.run(SYSTEM, ALICE, user_text="我之前说过什么？")
        en = await agent.run(SYSTEM, ALICE, user_text="what did I say?")
        empty = await agent.run(SYSTEM, ALICE, user_text="hi")
    assert not zh.ok and zh.text.startswith("抱歉") and zh.error == "LLMUnavailable"
    assert not en.ok and en.text.startswith("Sorry")
    assert not empty.ok and empty.error == "LLMBadResponse"
    assert "took too long" in apology("x", LLMTimeout("t"))
    over = LLMBadRequest("400", status=400, body="This model's maximum context length is 8192 tokens")
    assert "too long" in apology("x", over) and "太长" in apology("总结一下", over)


async def test_private_only_tools_are_not_offered_in_groups(fake_llm: FakeOpenAI) -> None:
    async def secret(args: Any, ctx: ToolContext) -> str:
        return "s"

    tool = Tool("secret_tool", "d", {"type": "object", "properties": {}}, secret, private_only=True)
    async with _llm(fake_llm) as llm:
        agent = Agent(llm, tools=[tool])
        await agent.run(SYSTEM, ToolContext(user="a", channel="feishu", chat_id="g", private=False))
        await agent.run(SYSTEM, ALICE)
    assert "tools" not in fake_llm.requests[0]
    assert json.dumps(fake_llm.requests[1]["tools"]).count("secret_tool") == 1


# -- a model that cannot see ------------------------------------------------------------

JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + bytes(200)


def _photo_turn(caption: str, pictures: int = 1) -> list[dict[str, Any]]:
    from gateway.bus import Image
    from gateway.prompt import user_parts

    shots = [Image(JPEG, "image/jpeg")] * pictures
    return [{"role": "system", "content": "sys"},
            {"role": "user", "content": "earlier words"}, {"role": "assistant", "content": "earlier reply"},
            {"role": "user", "content": user_parts(f"[photo] {caption}", shots)}]


@pytest.mark.parametrize("wording", ["openai", "vllm", "ollama"])
async def test_a_model_that_cannot_see_answers_the_words_and_is_told_so(fake_llm: FakeOpenAI, wording: str) -> None:
    from structlog.testing import capture_logs

    from gateway.prompt import UNSEEN_NOTE

    fake_llm.blind_models = {"m": wording}
    fake_llm.responder = lambda body: Reply(content=f"re: {text_of(body['messages'][-1]['content'])}")
    with capture_logs() as logs:
        async with _llm(fake_llm) as llm:
            agent = Agent(llm, tools=memory_tools_stub())
            reply = await agent.run(_photo_turn("what does this note say?"), ALICE, user_text="what does this note say?")
            assert reply.ok, reply
            assert len(fake_llm.refused) == 1 and len(fake_llm.requests) == 1
            last = fake_llm.requests[0]["messages"][-1]
            # The same request, the picture replaced by a note the model reads: it answers the caption.
            assert last == {"role": "user", "content": "[photo] what does this note say?\n\n"
                            + UNSEEN_NOTE.format(what="photo")}
            assert fake_llm.requests[0]["messages"][:-1] == _photo_turn("x")[:-1]
            assert fake_llm.requests[0]["tools"]  # the tools stay offered: only the picture was the trouble
            assert "cannot read pictures; tell the user" in reply.text
            assert reply.images_unseen  # the loop then stores it as a photo nobody saw
            # Remembered: the next photo costs no refused request, two pictures are named as two.
            reply = await agent.run(_photo_turn("and this one?", pictures=2), ALICE, user_text="and this one?")
            assert reply.ok and reply.images_unseen and len(fake_llm.refused) == 1 and len(fake_llm.requests) == 2
            assert fake_llm.requests[1]["messages"][-1]["content"].endswith(UNSEEN_NOTE.format(what="2 photos"))
            # Words alone go on as ever.
            words = await agent.run(SYSTEM, ALICE)
            assert words.ok and not words.images_unseen and len(fake_llm.requests) == 3
    warned = [e for e in logs if e["event"].startswith("model does not read pictures")]
    assert len(warned) == 1 and warned[0]["log_level"] == "warning" and warned[0]["model"] == "m"
    assert not [e for e in logs if e["event"] == "LLM call failed"]


async def test_a_broken_picture_is_not_taken_for_a_model_that_cannot_see(fake_llm: FakeOpenAI) -> None:
    """A picture the API cannot decode says nothing of the model: the turn
    fails as any bad request does, and the next photo is sent as a photo."""
    from gateway.bus import Image
    from gateway.prompt import user_parts

    bad = [{"role": "user", "content": user_parts("[photo] look", [Image(b"not a picture at all", "image/jpeg")])}]
    async with _llm(fake_llm) as llm:
        agent = Agent(llm)
        assert not (await agent.run(bad, ALICE)).ok
        seen = await agent.run(_photo_turn("look again"), ALICE)
        assert seen.ok and not seen.images_unseen
    assert len(fake_llm.refused) == 1
    assert images(fake_llm.requests[-1]) == [("image/jpeg", JPEG)]


def memory_tools_stub() -> list[Tool]:
    async def nothing(args: Any, ctx: ToolContext) -> str:
        return "nothing"

    return [Tool("lookup", "look it up", {"type": "object", "properties": {}}, nothing)]


async def test_a_tool_result_over_the_models_context_is_cut_and_the_turn_answered(fake_llm: FakeOpenAI) -> None:
    """A small model asks for a long read: rather than the turn lost to a
    400, the result is cut (the older history went first) until it fits."""
    page = "".join(f"row {i}: shipped {i * 3} units\n" for i in range(1500))

    async def read(args: Any, ctx: ToolContext) -> str:
        return page

    def responder(body: dict[str, Any]) -> Reply:
        if not _tool_messages(body):
            return Reply(content=None, tool_calls=[{"name": "read_all", "arguments": {}}])
        return Reply(content=f"read {len(_tool_messages(body)[0])} characters")

    fake_llm.responder = responder
    fake_llm.context_windows["m"] = 2000
    tool = Tool("read_all", "d", {"type": "object", "properties": {}}, read)
    turn = [{"role": "system", "content": "sys"}, {"role": "user", "content": "old " * 300},
            {"role": "assistant", "content": "ok"}, {"role": "user", "content": "how much did row 7 ship?"}]
    async with _llm(fake_llm) as llm:
        reply = await Agent(llm, tools=[tool], max_tokens=500).run(turn, ALICE)
    assert reply.ok and reply.text.startswith("read ")
    final = fake_llm.requests[-1]
    [result] = _tool_messages(final)
    assert page.startswith(result.split("\n[cut to ")[0]) and "to fit this model's context" in result
    # The older history went first; the newest of it stays.
    assert [m["content"] for m in final["messages"][:3]] == ["sys", "ok", "how much did row 7 ship?"]
    assert len(fake_llm.refused) >= 2


async def test_a_broken_tools_log_line_names_the_error_and_where_not_its_arguments(fake_llm: FakeOpenAI) -> None:
    """A tool's arguments are the model's retelling of the user's words; an
    exception quoting them stays out of the log (DEBUG too): its type and
    place are logged, and the model is told the tool failed."""

    async def lookup(args: Any, ctx: ToolContext) -> str:
        raise KeyError(f"no clinic named {args['clinic']}")

    tool = Tool("clinic_lookup", "d", {"type": "object", "properties": {"clinic": {"type": "string"}}}, lookup)
    fake_llm.queue_reply(None, tool_calls=[{"name": "clinic_lookup", "arguments": {"clinic": "Okonkwo oncology Lisbon"}}])
    fake_llm.queue_reply("done")
    with debug_json_log() as out:
        async with _llm(fake_llm) as llm:
            reply = await Agent(llm, tools=[tool]).run(SYSTEM, ALICE)
    assert reply.text == "done" and "the tool failed" in _tool_messages(fake_llm.requests[1])[0]
    [line] = lines(out, "tool failed")
    assert line["tool"] == "clinic_lookup" and line["error"] == "KeyError"
    assert line["at"].startswith("tests/gateway/test_agent.py:") and line["at"].endswith(" in lookup"), line
    for words in ("Okonkwo", "oncology", "Lisbon"):
        assert words not in out.getvalue()



async def test_the_turn_hears_before_a_tool_that_changes_something_runs_and_not_for_one_that_reads(
    fake_llm: FakeOpenAI, engine: MemoryEngine
) -> None:
    """``on_act`` (a turn past being begun again, gateway/loop.py) is called
    just before a tool that ``acts`` runs; a tool that reads, and one the
    model made up, do not call it. Of the shipped memory tools, search reads."""
    happened: list[str] = []

    def tool(name: str, acts: bool) -> Tool:
        async def run(args: Any, ctx: ToolContext) -> str:
            happened.append(name)
            return "done"

        return Tool(name, name, {"type": "object", "properties": {}}, run, acts=acts)

    fake_llm.queue_reply(None, tool_calls=[{"name": "look", "arguments": {}}, {"name": "no_such_tool", "arguments": {}}])
    fake_llm.queue_reply(None, tool_calls=[{"name": "book", "arguments": {}}])
    fake_llm.queue_reply("Booked.")
    async with _llm(fake_llm) as llm:
        agent = Agent(llm, tools=[tool("look", False), tool("book", True)])
        reply = await agent.run(SYSTEM, ALICE, on_act=lambda: happened.append("acting"))
    assert reply.ok and reply.tools_used == ("look", "no_such_tool", "book")
    assert happened == ["look", "acting", "book"]
    assert [t.name for t in memory_tools(SqliteMemory(engine)) if t.acts] == ["memory_save", "memory_forget"]
