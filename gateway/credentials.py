"""The credentials a configuration uses, and the example's placeholders
(its keys, and the Telegram allow-list it shows).

``myclaw doctor`` reports on each credential the enabled parts need;
``myclaw gateway`` and ``myclaw chat`` refuse to start while one of them
still holds a placeholder of ``config.example.json`` (every reply would
fail with the provider's 401, or the channel never connect), naming the
setting and its variable; ``myclaw gateway`` also while an enabled
channel's own credential is empty. :func:`config_secrets` is every secret
value, which the logs redact.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import SecretStr

from .config import ENV_OVERRIDES, Config

__all__ = [
    "EXAMPLE_ALLOW_FROM", "EXAMPLE_IDENTITIES", "EXAMPLE_PLACEHOLDERS", "Credential", "config_secrets",
    "credentials_in_use", "env_variable", "example_allow_from", "example_identities", "missing_in_use",
    "placeholders_in_use",
]

# The placeholders of config.example.json: copied but never filled in.
EXAMPLE_PLACEHOLDERS = frozenset(
    {"sk-your-key", "sk-memory-key", "123456789:your-bot-token", "your-app-secret", "cli_xxx"}
)


# Its Telegram allow-list: a name anyone may register, and someone's id.
EXAMPLE_ALLOW_FROM = ("your_username", "123456789")
# config.example.json's memory.identities: someone else's handles.
EXAMPLE_IDENTITIES = ("telegram:123456789", "feishu:ou_xxxxxxxx")


@dataclass(frozen=True)
class Credential:
    setting: str  # as written in the file: "memory.provider.apiKey"
    path: tuple[str | int, ...]  # in the JSON document
    value: SecretStr
    # What an empty one is: a local endpoint may need no key ("warning"),
    # a channel cannot run without its credentials ("error").
    if_empty: Literal["warning", "error"]
    channel: bool = False  # a channel's: `myclaw chat` runs none


def credentials_in_use(cfg: Config) -> list[Credential]:
    """Each credential the enabled parts of ``cfg`` send somewhere."""
    found = [Credential("provider.apiKey", ("provider", "apiKey"), cfg.provider.api_key, "warning")]
    m = cfg.memory
    if m.enabled and m.provider is not None:
        found.append(Credential("memory.provider.apiKey", ("memory", "provider", "apiKey"), m.provider.api_key,
                                "warning"))
    own_fallbacks = {"agent": cfg.agent.fallbacks, "memory": (m.fallbacks or []) if m.enabled else []}
    for section, fallbacks in own_fallbacks.items():
        for i, fb in enumerate(fallbacks):
            if fb.provider is not None:
                found.append(Credential(f"{section}.fallbacks[{i}].provider.apiKey",
                                        (section, "fallbacks", i, "provider", "apiKey"), fb.provider.api_key,
                                        "warning"))
    if m.enabled and m.embedding.enabled and m.embedding.provider is not None:
        found.append(Credential("memory.embedding.provider.apiKey", ("memory", "embedding", "provider", "apiKey"),
                                m.embedding.provider.api_key, "warning"))
    t = cfg.agent.transcription
    if t.enabled and t.provider is not None:
        found.append(Credential("agent.transcription.provider.apiKey",
                                ("agent", "transcription", "provider", "apiKey"), t.provider.api_key, "warning"))
    tg, fs = cfg.channels.telegram, cfg.channels.feishu
    if tg.enabled:
        found.append(Credential("channels.telegram.token", ("channels", "telegram", "token"), tg.token, "error",
                                channel=True))
    if fs.enabled:
        found.append(Credential("channels.feishu.appId", ("channels", "feishu", "appId"), SecretStr(fs.app_id),
                                "error", channel=True))
        found.append(Credential("channels.feishu.appSecret", ("channels", "feishu", "appSecret"), fs.app_secret,
                                "error", channel=True))
    return found


def placeholders_in_use(cfg: Config, *, channels: bool = True) -> list[str]:
    """The settings in use still holding an example placeholder, each with
    the variable that could set it instead ("provider.apiKey (or
    MYCLAW_PROVIDER_API_KEY)"); without ``channels``, the channels' are not
    in use. Never the value."""
    out = []
    for c in credentials_in_use(cfg):
        if c.value.get_secret_value() in EXAMPLE_PLACEHOLDERS and (channels or not c.channel):
            name = env_variable(c.path)
            out.append(f"{c.setting} (or {name})" if name else c.setting)
    if channels and (left := example_allow_from(cfg)):
        # The operator may not know their numeric id: the drop's log line tells it.
        out.append("channels.telegram.allowFrom: " + ", ".join(f'"{e}"' for e in left)
                   + " -> your users' Telegram ids or usernames (a sender not listed is logged with their sender_id;"
                   " [] lets anyone in)")
    return out


def missing_in_use(cfg: Config) -> list[str]:
    """The enabled channels' credentials left empty, each with its variable
    ("channels.telegram.token (or MYCLAW_TELEGRAM_TOKEN)"): the channel
    cannot start without them, so this is a configuration error."""
    out = []
    for c in credentials_in_use(cfg):
        if c.channel and c.if_empty == "error" and not c.value.get_secret_value().strip():
            name = env_variable(c.path)
            out.append(f"{c.setting} (or {name})" if name else c.setting)
    return out


def example_identities(cfg: Config) -> list[str]:
    """The example's handles ``memory.identities`` still maps to a user."""
    return [h for handles in cfg.memory.identities.values() for h in handles if h in EXAMPLE_IDENTITIES]


def example_allow_from(cfg: Config) -> list[str]:
    """The entries of the example's allow-list an enabled Telegram still lets in."""
    tg = cfg.channels.telegram
    return [e for e in tg.allow_from if e in EXAMPLE_ALLOW_FROM] if tg.enabled else []


def env_variable(path: tuple[str | int, ...]) -> str | None:
    """The ``MYCLAW_*`` variable that sets ``path``, if there is one."""
    name = next((n for n, (p, _kind) in ENV_OVERRIDES.items() if p == path), None)
    if name is None and len(path) == 5 and path[1:2] == ("fallbacks",) and path[3:] == ("provider", "apiKey"):
        return f"MYCLAW_{str(path[0]).upper()}_FALLBACKS_{path[2]}_API_KEY"
    return name


def config_secrets(cfg: Config) -> list[str]:
    """Every secret value in the config, for log redaction."""
    values = [
        cfg.provider.api_key,
        cfg.channels.telegram.token,
        cfg.channels.feishu.app_secret,
        cfg.channels.feishu.verification_token,
        cfg.channels.feishu.encrypt_key,
        cfg.gateway.admin.token,
    ]
    if cfg.memory.provider is not None:
        values.append(cfg.memory.provider.api_key)
    for fb in [*cfg.agent.fallbacks, *(cfg.memory.fallbacks or [])]:
        if fb.provider is not None:
            values.append(fb.provider.api_key)
    if cfg.memory.embedding.provider is not None:
        values.append(cfg.memory.embedding.provider.api_key)
    if cfg.agent.transcription.provider is not None:
        values.append(cfg.agent.transcription.provider.api_key)
    return [v.get_secret_value() for v in values if v.get_secret_value()]
