from __future__ import annotations

from gateway.config import Config
from gateway.credentials import credentials_in_use, env_variable, example_allow_from, placeholders_in_use


def test_only_the_credentials_in_use_are_named_with_their_variable() -> None:
    cfg = Config.model_validate({
        "provider": {"apiKey": "sk-your-key"},
        "agent": {"fallbacks": [{"model": "m", "provider": {"apiKey": "sk-memory-key"}}]},
        "channels": {"telegram": {"enabled": True, "token": "123456789:your-bot-token"},
                     "feishu": {"enabled": False, "appSecret": "your-app-secret"}},  # off: not in use
        "memory": {"embedding": {"enabled": False, "provider": {"apiKey": "sk-your-key"}}},
    })
    assert placeholders_in_use(cfg) == [
        "provider.apiKey (or MYCLAW_PROVIDER_API_KEY)",
        "agent.fallbacks[0].provider.apiKey (or MYCLAW_AGENT_FALLBACKS_0_API_KEY)",
        "channels.telegram.token (or MYCLAW_TELEGRAM_TOKEN)",
    ]
    assert placeholders_in_use(cfg, channels=False) == placeholders_in_use(cfg)[:2]
    assert [c.setting for c in credentials_in_use(cfg)] == [
        "provider.apiKey", "agent.fallbacks[0].provider.apiKey", "channels.telegram.token"]


def test_filled_in_credentials_are_not_placeholders() -> None:
    cfg = Config.model_validate({"provider": {"apiKey": "sk-real"}, "memory": {"provider": {"apiKey": ""}}})
    assert placeholders_in_use(cfg) == []
    assert env_variable(("agent", "transcription", "provider", "apiKey")) is None


def test_the_examples_allow_list_left_in_is_named() -> None:
    # "your_username" is a name anyone may register, 123456789 someone's id:
    # left in, a stranger may talk to the bot and fill its memory.
    cfg = Config.model_validate({"provider": {"apiKey": "sk-real"}, "channels": {"telegram": {
        "enabled": True, "token": "1:real", "allowFrom": ["your_username", 123456789, "ada"]}}})
    assert example_allow_from(cfg) == ["your_username", "123456789"]
    assert placeholders_in_use(cfg) == ['channels.telegram.allowFrom: "your_username", "123456789" -> your users\' '
                                        'Telegram ids or usernames (a sender not listed is logged with their '
                                        'sender_id; [] lets anyone in)']
    assert placeholders_in_use(cfg, channels=False) == []
    off = Config.model_validate({"channels": {"telegram": {"enabled": False, "allowFrom": ["your_username"]}}})
    assert example_allow_from(off) == []
