"""A new user's first contact, end to end on the fakes of Telegram and an
OpenAI-compatible API: what a walk through the product as a newcomer
found (session 37)."""

from __future__ import annotations

from pathlib import Path

from memory import ManualClock

from .test_chat_language_e2e import _replies, _running


async def test_a_deep_links_start_is_answered_with_the_welcome_not_by_the_model(tmp_path: Path, clock: ManualClock) -> None:
    """Opening the bot from a link (t.me/myclaw_bot?start=ref_42) sends
    "/start ref_42": the payload is the link's, not the user's words, so
    the newcomer gets the welcome, in their app's language, as a bare
    /start does; "/help me with this" stays words for the model."""
    async with _running(tmp_path, clock) as (llm, tg, app):
        tg.user_languages[42] = "zh-hans"
        tg.push_text(42, 42, "/start ref_42-Ab")
        [welcome] = await _replies(tg, app, 1)
        tg.user_languages[43] = "en"
        tg.push_text(43, 43, "/start@myclaw_bot c29tZS1wYXlsb2Fk")
        [_, english] = await _replies(tg, app, 2)
        assert llm.chat_requests() == []  # the model never saw them
        llm.queue_reply("Sure, what with?")
        tg.push_text(43, 43, "/help me with this")
        [*_, words] = await _replies(tg, app, 3)
    assert welcome.startswith("myclaw 会在一次次对话中记住") and "/帮助" in welcome, welcome
    assert english.startswith("myclaw remembers"), english
    assert words == "Sure, what with?"
