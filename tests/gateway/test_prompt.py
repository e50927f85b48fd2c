from __future__ import annotations

import base64
from pathlib import Path
from zoneinfo import ZoneInfo

from gateway.bus import Image
from gateway.prompt import PromptBuilder, fit_history, user_content, user_parts
from gateway.sessions import StoredMessage
from memory import Category, MemoryEngine, NewMemory, Provenance
from memory.clock import ManualClock
from memory.service import SqliteMemory


def _msg(i: int, role: str, text: str) -> StoredMessage:
    return StoredMessage(i, 1, "telegram", "1", role, text, "u", "", f"m{i}", "2026-03-01T00:00:00Z", True)


async def test_system_prompt_has_workspace_files_and_tier1(tmp_path: Path, engine: MemoryEngine, clock: ManualClock) -> None:
    (tmp_path / "AGENTS.md").write_text("You are myclaw.\n", encoding="utf-8")
    (tmp_path / "SOUL.md").write_text("Be brief.", encoding="utf-8")
    m = await engine.add(NewMemory(owner="alice", tier=1, content="Alice lives in Hangzhou", category=Category.IDENTITY))
    builder = PromptBuilder(tmp_path, SqliteMemory(engine), clock=clock)
    system = await builder.system_prompt("alice", private=True, tools=True)
    # Each entry with its id, so the model can name it to memory_forget.
    core = f"# Core Memory\n- [m{m.id}] Alice lives in Hangzhou"
    assert system.index("You are myclaw.") < system.index("Be brief.") < system.index(core)
    assert "memory_save" in system and "Current date: 2026-03-01 Sunday (UTC)" in system
    group = await builder.system_prompt("alice", private=False)
    assert "Hangzhou" not in group and "# Group chat" in group and "memory_save" not in group
    # An edited SOUL.md applies without a restart.
    (tmp_path / "SOUL.md").write_text("Be very detailed, always.", encoding="utf-8")
    assert "Be very detailed" in await builder.system_prompt("alice", private=True)


async def test_memory_block_cites_source_and_date(tmp_path: Path, engine: MemoryEngine, clock: ManualClock) -> None:
    mem = SqliteMemory(engine)
    await mem.remember("alice", "Alice drinks flat white", provenance=Provenance(channel="telegram", chat_id="42"))
    builder = PromptBuilder(tmp_path, mem, clock=clock)
    hits = await mem.recall("alice", "flat white")
    block = builder.memory_block(hits)
    assert block.startswith("- [m1 · 2026-03-01 · telegram chat 42] Alice drinks flat white")
    content = user_content("what coffee?", block)
    assert content.startswith("<memories>\n") and "</memories>\n\nwhat coffee?" in content
    assert user_content("hi", "") == "hi"
    # The time of day comes first, before the memories, and only here.
    assert user_content("what coffee?", block, "09:30").startswith("<time>09:30</time>\n<memories>\n")
    assert user_content("hi", "", "09:30") == "<time>09:30</time>\nhi"
    assert builder.time_of_day() == "12:00" and builder.time_of_day(ZoneInfo("Asia/Shanghai")) == "20:00"


def test_history_budget_cuts_assistant_replies_first_then_drops_oldest() -> None:
    long = "x" * 4000  # ~1000 tokens each
    msgs = [_msg(i, "user" if i % 2 == 0 else "assistant", long) for i in range(6)]
    out = fit_history(msgs, token_budget=3500, min_messages=2, max_chars=500)
    assert len(out) == 6  # cutting assistant replies to 500 chars was enough
    assert all(len(m["content"]) <= 500 for m in out if m["role"] == "assistant")
    assert all(len(m["content"]) == 4000 for m in out if m["role"] == "user")
    out = fit_history([_msg(i, "user", long) for i in range(10)], token_budget=100, min_messages=5, max_chars=500)
    assert len(out) == 5 and all(len(m["content"]) <= 500 for m in out)  # never fewer than the minimum
    short = [_msg(i, "user", "hi") for i in range(3)]
    assert fit_history(short) == [{"role": "user", "content": "hi"}] * 3


def test_the_latest_message_carries_its_pictures_as_content_parts() -> None:
    assert user_parts("hello", ()) == "hello"
    png = b"\x89PNG\r\n\x1a\n" + bytes(8)
    history = [_msg(1, "user", "[photo] old one")]
    messages = PromptBuilder.messages("sys", history, "[photo] and now?", "", "09:30", [Image(png, "image/png")])
    assert messages[1] == {"role": "user", "content": "[photo] old one"}  # the history: text only
    assert messages[-1]["content"] == [
        {"type": "text", "text": "<time>09:30</time>\n[photo] and now?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(png).decode()}},
    ]


def test_a_quoted_message_comes_before_the_words_marked_and_cut() -> None:
    from gateway.bus import Quoted
    from gateway.prompt import QUOTE_CHARS

    content = user_content("and this?", "", "09:30", Quoted('A "B" <C>', "x" * (QUOTE_CHARS + 50)))
    head, words = content.rsplit("\n\n", 1)
    assert words == "and this?"
    assert head.startswith('<time>09:30</time>\n<quoted from="A &quot;B&quot; &lt;C>">\n' + "x" * (QUOTE_CHARS - 1) + "…\n")
    assert user_content("hi", "", quoted=Quoted("Bob", "  ")) == "hi"  # nothing to quote: nothing added
