"""Configuration: ``$MYCLAW_HOME/config.json`` (default ``~/.myclaw``) plus env overrides.

The JSON shape follows seed 000 section 9 (camelCase keys). Every field is
validated at start; a bad value raises :class:`ConfigError` naming the field
path and the value, never a silent fallback to defaults. Unknown keys are
errors too, so a typo such as ``"quietgap"`` does not go unnoticed.
"""

from __future__ import annotations

import json
import os
import re
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic.alias_generators import to_camel

from .proxies import trusted_networks
from .timezones import TimezoneError, parse_timezone, zone_name

__all__ = [
    "AdminConfig",
    "AgentConfig",
    "ChannelsConfig",
    "Config",
    "ConfigError",
    "ExtractionConfig",
    "FallbackConfig",
    "FeishuConfig",
    "GatewayConfig",
    "MemoryConfig",
    "OutboxConfig",
    "Paths",
    "ProviderConfig",
    "RetrievalConfig",
    "TelegramConfig",
    "TranscriptionConfig",
    "load_config",
    "parse_duration",
    "unknown_env",
]


class ConfigError(Exception):
    """The configuration cannot be used; the message names field and value."""


_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str | int | float) -> timedelta:
    """Parse ``"90s"``, ``"3m"``, ``"1h30m"`` (or a number of seconds)."""
    if isinstance(text, bool):
        raise ValueError(f"invalid duration {text!r}")
    if isinstance(text, int | float):
        if text < 0:
            raise ValueError(f"invalid duration {text!r}: negative")
        return timedelta(seconds=float(text))
    s = str(text).strip().lower()
    pos, total = 0, 0.0
    for m in _DURATION_RE.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
        pos = m.end()
    if not s or pos != len(s):
        raise ValueError(f"invalid duration {text!r} (use e.g. 30s, 3m, 2h, 1h30m)")
    return timedelta(seconds=total)


def _duration(v: Any) -> timedelta:
    return v if isinstance(v, timedelta) else parse_duration(v)


Duration = Annotated[timedelta, BeforeValidator(_duration)]


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        validate_default=True,
    )


MAX_FALLBACKS = 5  # each costs a failed request's wait before it is asked


class ProviderConfig(_Model):
    """An OpenAI-compatible endpoint."""

    type: Literal["openai"] = "openai"
    api_key: SecretStr = SecretStr("")
    base_url: str = "https://api.openai.com/v1"
    timeout: Duration = timedelta(seconds=60)
    max_retries: int = Field(default=3, ge=0, le=10)

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not re.match(r"^https?://", v):
            raise ValueError(f"invalid URL {v!r}: must start with http:// or https://")
        return v.rstrip("/")


class FallbackConfig(_Model):
    """A model asked when the ones before it fail (gateway/failover.py):
    ``model`` on ``provider``, or on the primary's provider when none."""

    model: str
    provider: ProviderConfig | None = None

    @field_validator("model")
    @classmethod
    def _model(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must name the fallback model")
        return v.strip()


MAX_IMAGE_BYTES = 20 * 1024 * 1024
MAX_AUDIO_BYTES = 25 * 1024 * 1024  # OpenAI's /audio/transcriptions limit


class TranscriptionConfig(_Model):
    """Voice messages read as text: an OpenAI-compatible
    ``/audio/transcriptions`` endpoint (Whisper and kin). Off: a voice
    message gets a note that only text is read."""

    enabled: bool = False
    model: str = "whisper-1"
    provider: ProviderConfig | None = None  # None: the chat provider
    # Larger recordings are not downloaded (the user is told); a Telegram
    # bot may download 20 MB at most.
    max_audio_bytes: int = Field(default=20 * 1024 * 1024, ge=1024, le=MAX_AUDIO_BYTES)

    @field_validator("model")
    @classmethod
    def _model(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must name the transcription model")
        return v


MAX_DOCUMENT_BYTES = 20 * 1024 * 1024  # what a Telegram bot may download


class DocumentsConfig(_Model):
    """Files users send (text, PDF, Word) read as text for the model with
    their message (channels/documents.py). Off: a file gets a note that
    only text is read."""

    enabled: bool = True
    # Larger files are not downloaded (the user is told).
    max_bytes: int = Field(default=10 * 1024 * 1024, ge=1024, le=MAX_DOCUMENT_BYTES)
    # The model reads at most this much of a file (estimated tokens), told
    # when it was cut: one file must not take a turn's whole context.
    max_tokens: int = Field(default=12_000, ge=200, le=200_000)


class StreamingConfig(_Model):
    """Replies shown while they are written: the chat model's answer is
    streamed, and a reply that takes longer than ``delay`` shows as a
    draft, brought up to date every ``interval``, until it is sent whole
    (Telegram: private chats, as a draft the app animates; Feishu: a
    message edited in place). Quick replies come whole, as before."""

    enabled: bool = True
    delay: Duration = timedelta(seconds=1)
    interval: Duration = timedelta(seconds=1)

    @field_validator("interval")
    @classmethod
    def _interval(cls, v: timedelta) -> timedelta:
        if v < timedelta(milliseconds=200):
            raise ValueError("must be at least 200ms (each draft is a request to the platform)")
        return v


class AgentConfig(_Model):
    model: str = "gpt-4o-mini"
    max_tokens: int = Field(default=4096, gt=0)
    temperature: float = Field(default=0.7, ge=0, le=2)
    workspace: str = ""  # empty: $MYCLAW_HOME/workspace
    history_messages: int = Field(default=20, ge=2, le=200)
    fallbacks: list[FallbackConfig] = Field(default_factory=list, max_length=MAX_FALLBACKS)
    # The chat model reads images: photos users send go to it with their
    # message. Off: a photo gets a note that only text is read.
    vision: bool = False
    # Larger pictures are not downloaded (the user is told); 20 MB is both
    # what a Telegram bot may download and OpenAI's limit per image.
    max_image_bytes: int = Field(default=5 * 1024 * 1024, ge=1024, le=MAX_IMAGE_BYTES)
    transcription: TranscriptionConfig = Field(default_factory=TranscriptionConfig)
    documents: DocumentsConfig = Field(default_factory=DocumentsConfig)
    streaming: StreamingConfig = Field(default_factory=StreamingConfig)


class TelegramConfig(_Model):
    enabled: bool = False
    token: SecretStr = SecretStr("")
    allow_from: list[str] = Field(default_factory=list)
    base_url: str = "https://api.telegram.org/bot"
    # Where files are downloaded from (photos, with agent.vision); empty:
    # baseUrl with its last "/bot" read as "/file/bot", as Telegram's are.
    base_file_url: str = ""
    poll_timeout: int = Field(default=30, ge=0, le=50)
    # The largest file the bot sends (an /export): the Bot API takes 50 MB;
    # a local Bot API server (baseUrl on your own host) takes up to 2000 MB.
    max_upload_bytes: int = Field(default=50_000_000, ge=1_000_000, le=2_000_000_000)

    @field_validator("allow_from", mode="before")
    @classmethod
    def _ids_as_text(cls, v: Any) -> Any:
        # Telegram ids are often written as numbers in JSON.
        if isinstance(v, list):
            return [str(x) if isinstance(x, int) and not isinstance(x, bool) else x for x in v]
        return v

    @property
    def file_url(self) -> str:
        """``baseFileUrl``, else derived from ``baseUrl`` (``.../bot`` ->
        ``.../file/bot``; a local Bot API server serves files the same way)."""
        if self.base_file_url:
            return self.base_file_url
        head, sep, tail = self.base_url.rpartition("/bot")
        return f"{head}/file/bot{tail}" if sep else self.base_url.rstrip("/") + "/file/bot"


class FeishuConfig(_Model):
    enabled: bool = False
    app_id: str = ""
    app_secret: SecretStr = SecretStr("")
    verification_token: SecretStr = SecretStr("")
    encrypt_key: SecretStr = SecretStr("")
    mode: Literal["websocket", "webhook"] = "websocket"
    domain: str = "https://open.feishu.cn"
    # What the bot's own notes speak when nothing said tells (Feishu does not
    # say a user's app language): "auto" is Chinese on feishu.cn, English on
    # larksuite.com or another domain (a private deployment: set "zh").
    language: Literal["auto", "zh", "en"] = "auto"
    allow_from: list[str] = Field(default_factory=list)
    webhook_path: str = "/feishu/events"
    # The largest file the bot uploads (an /export): Feishu's own limit is 30 MB.
    max_upload_bytes: int = Field(default=30_000_000, ge=1_000_000, le=30_000_000)


class ChannelsConfig(_Model):
    telegram: TelegramConfig = Field(default_factory=TelegramConfig)
    feishu: FeishuConfig = Field(default_factory=FeishuConfig)


ADMIN_TOKEN_MIN_CHARS = 16


class AdminConfig(_Model):
    """The memory management page (``gateway.web``) at ``/memory``."""

    enabled: bool = False
    token: SecretStr = SecretStr("")

    @field_validator("token")
    @classmethod
    def _token(cls, v: SecretStr, info: ValidationInfo) -> SecretStr:
        # `enabled` is declared first, so it is validated (and in info.data) already.
        if info.data.get("enabled") and len(v.get_secret_value().strip()) < ADMIN_TOKEN_MIN_CHARS:
            raise ValueError(
                f"must be at least {ADMIN_TOKEN_MIN_CHARS} characters when the admin page is enabled "
                "(e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')"
            )
        return v


class RateLimitConfig(_Model):
    """Messages one user may send the bot (gateway/ratelimit.py): each
    answer is a model call. 0 turns a window off. Scheduled jobs are not
    counted (``cron`` limits them)."""

    per_minute: int = Field(default=10, ge=0, le=10_000)
    per_hour: int = Field(default=200, ge=0, le=100_000)


class OutboxConfig(_Model):
    """Replies that could not be delivered (gateway/delivery.py) are sent
    again until they are this old, then dropped with a warning."""

    max_age_hours: float = Field(default=24.0, gt=0, le=24 * 30)


class GatewayConfig(_Model):
    host: str = "127.0.0.1"
    port: int = Field(default=18790, ge=0, le=65535)
    timezone: str = "UTC"
    max_concurrent_chats: int = Field(default=64, ge=1, le=4096)
    queue_size: int = Field(default=1000, ge=1)
    # Tier 0 rows kept in memory (gateway/sessions.py); more chats than fit
    # read their recent messages from gateway.db, ~0.1-0.2 ms a message.
    history_cache_rows: int = Field(default=2048, ge=0, le=1_000_000)
    rate_limit: RateLimitConfig = Field(default_factory=RateLimitConfig)
    admin: AdminConfig = Field(default_factory=AdminConfig)
    # Reverse proxies (addresses or CIDR networks) whose X-Forwarded-For names
    # the client (gateway/proxies.py): the memory page's sign-in lockout and
    # the log then see the real client, not the proxy. Empty: the header is
    # ignored, as anyone can send it.
    trusted_proxies: list[str] = Field(default_factory=list)
    # GET /metrics (Prometheus text) on host:port, the HTTP server started
    # for it if nothing else needs one; /healthz is then served too.
    metrics: bool = False
    outbox: OutboxConfig = Field(default_factory=OutboxConfig)
    # A message whose turn a crash cut (stored, never answered; the platform
    # will not send it again) is answered at the next start if it is at most
    # this old (gateway/resume.py); an older one gets nothing (a late answer
    # to "are you there?" is worse than none). 0 turns it off.
    resume_within_minutes: float = Field(default=10.0, ge=0, le=24 * 60)

    @field_validator("trusted_proxies")
    @classmethod
    def _proxies(cls, v: list[str]) -> list[str]:
        trusted_networks(v)  # ValueError names the bad entry
        return v

    @field_validator("timezone")
    @classmethod
    def _tz(cls, v: str) -> str:
        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown timezone {v!r} ({_zone_hint(v)})") from exc
        return v


def _zone_hint(v: str) -> str:
    """What to write instead of a zone name ZoneInfo does not know: the
    IANA name of what /timezone would make of it ("Beijing", "上海")."""
    try:
        name = zone_name(parse_timezone(v))
    except TimezoneError as exc:
        near = [c[0] for c in exc.choices] or ([exc.nearest] if exc.nearest else [])
        return f"did you mean {' or '.join(near)}?" if near else "an IANA name such as Asia/Shanghai"
    if name.startswith("UTC") and name != "UTC":
        return "an offset is not a zone name: write the place's, such as Asia/Shanghai or Europe/Berlin"
    return f"did you mean {name}?"


class ExtractionConfig(_Model):
    quiet_gap: Duration = timedelta(minutes=3)
    # Tokens buffered per user before a flush. The seed wrote this as a ratio
    # (0.6 -> ~6000 tokens); a value <= 1 is read that way, of 10,000 tokens.
    token_budget: float = Field(default=6000, gt=0)
    daily_flush: str = "03:00"

    @field_validator("token_budget")
    @classmethod
    def _budget(cls, v: float) -> float:
        return v * 10_000 if v <= 1 else v

    @field_validator("daily_flush")
    @classmethod
    def _hhmm(cls, v: str) -> str:
        m = re.fullmatch(r"([01]?\d|2[0-3]):([0-5]\d)", v.strip())
        if not m:
            raise ValueError(f"invalid time of day {v!r} (use HH:MM, e.g. 03:00)")
        return f"{int(m.group(1)):02d}:{m.group(2)}"


class RetrievalConfig(_Model):
    max_hits: int = Field(default=5, ge=1, le=20)
    token_budget: int = Field(default=2048, ge=64)
    max_chars: int = Field(default=300, ge=40)


class EmbeddingConfig(_Model):
    """Hybrid recall (seeds 003/004, docs/RETRIEVAL.md §10): memories are
    also found by meaning, through an OpenAI-compatible ``/embeddings``
    endpoint. Off by default; when off or failing, recall is lexical only.
    Pick a model that covers the languages your users write in: with RRF
    fusion an English-only model made Chinese recall worse (MADial zh 0.580
    -> 0.434); the default weighted fusion kept it about level (0.577)."""

    enabled: bool = False
    model: str = "text-embedding-3-small"
    provider: ProviderConfig | None = None  # None: memory.provider, then provider
    dimensions: int | None = Field(default=None, gt=0, le=8192)
    # How long a reply may wait for the message's vector before it is
    # answered with the lexical hits alone; the lexical search runs meanwhile.
    query_timeout: Duration = timedelta(milliseconds=500)
    fusion: Literal["weighted", "rrf"] = "weighted"
    lexical_share: float = Field(default=0.75, ge=0, le=1)
    min_similarity: float = Field(default=0.2, ge=-1, le=1)
    batch_size: int = Field(default=64, ge=1, le=2048)
    interval: Duration = timedelta(seconds=15)  # how often new memories are looked for

    @field_validator("model")
    @classmethod
    def _model(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must name the embedding model")
        return v.strip()


class MemoryConfig(_Model):
    enabled: bool = True
    model: str = ""  # empty: agent.model
    max_tokens: int = Field(default=0, ge=0)  # 0: agent.maxTokens
    provider: ProviderConfig | None = None  # None: the main provider
    # None: agent.fallbacks when the memory model is the chat model (no
    # memory.model nor memory.provider), else none; [] turns them off.
    fallbacks: list[FallbackConfig] | None = Field(default=None, max_length=MAX_FALLBACKS)
    db_path: str = ""  # empty: $MYCLAW_HOME/data/memory.db
    extraction: ExtractionConfig = Field(default_factory=ExtractionConfig)
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    embedding: EmbeddingConfig = Field(default_factory=EmbeddingConfig)
    # How often the gateway looks for hand edits of MEMORY.md and daily
    # files (a stat per file; memory/filesync.py); 0 turns it off.
    file_sync: Duration = timedelta(seconds=10)
    # person -> ["channel:sender_id", ...]; lets one person share memory
    # across Telegram and Feishu.
    identities: dict[str, list[str]] = Field(default_factory=dict)

    @field_validator("file_sync")
    @classmethod
    def _file_sync(cls, v: timedelta) -> timedelta:
        if timedelta(0) < v < timedelta(seconds=1):
            raise ValueError("must be 0s (off) or at least 1s: each look stats every memory file")
        return v

    @field_validator("identities")
    @classmethod
    def _identities(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        # Here, not at the top: importing the config stays light (BENCHMARKS.md).
        from memory.groupowner import GROUP_PREFIX, is_group_owner

        seen: dict[str, str] = {}
        for user, handles in v.items():
            if not user or user.startswith("_"):
                raise ValueError(f"invalid user name {user!r}: must be non-empty, not start with '_'")
            if is_group_owner(user):
                # A group's own notes are owned so (memory/groupnotes.py): a user named
                # so would read and erase them as theirs.
                raise ValueError(f"invalid user name {user!r}: '{GROUP_PREFIX}' names a group's own memory")
            for h in handles:
                if not re.fullmatch(r"[a-z]+:.+", h) or is_group_owner(h):
                    raise ValueError(f"invalid handle {h!r} for {user!r} (use channel:sender_id)")
                if h in seen and seen[h] != user:
                    raise ValueError(f"handle {h!r} is mapped to both {seen[h]!r} and {user!r}")
                seen[h] = user
        for user in v:
            # Named as another person's handle, they would be handed what
            # that handle stored before it was mapped (the other's words).
            if seen.get(user, user) != user:
                raise ValueError(f"user name {user!r} is a handle mapped to {seen[user]!r}")
            # Shaped as a handle it does not list: the unmapped sender of that
            # handle resolves to this very name (memory/identity.py), a stranger
            # sharing the person's memory.
            if re.fullmatch(r"[a-z]+:.+", user) and user not in seen:
                raise ValueError(f"user name {user!r} is shaped as a handle but not among its handles: list it "
                                 f"there if it is the same person, or choose a name without ':'")
        return v


class CronConfig(_Model):
    enabled: bool = True
    # Limits on jobs users make by asking the bot (``cron_add``); every run
    # is an LLM call and a message someone receives. The operator's
    # ``myclaw cron add`` is not limited.
    max_jobs_per_user: int = Field(default=10, ge=0, le=1000)
    # Up to an hour: a daily job fires twice an hour apart on a DST change.
    min_interval_minutes: int = Field(default=10, ge=1, le=60)


class Config(_Model):
    provider: ProviderConfig = Field(default_factory=ProviderConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    channels: ChannelsConfig = Field(default_factory=ChannelsConfig)
    gateway: GatewayConfig = Field(default_factory=GatewayConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    cron: CronConfig = Field(default_factory=CronConfig)

    def memory_provider(self) -> ProviderConfig:
        return self.memory.provider or self.provider

    def embedding_provider(self) -> ProviderConfig:
        return self.memory.embedding.provider or self.memory_provider()

    def memory_model(self) -> str:
        return self.memory.model or self.agent.model

    def memory_max_tokens(self) -> int:
        return self.memory.max_tokens or self.agent.max_tokens

    def memory_fallbacks(self) -> list[FallbackConfig]:
        """The memory model's fallbacks; one without a provider runs on
        :meth:`memory_provider`."""
        if self.memory.fallbacks is not None:
            return self.memory.fallbacks
        if not self.memory.model and self.memory.provider is None:
            return self.agent.fallbacks  # the memory model is the chat model: so are its fallbacks
        return []


@dataclass(frozen=True)
class Paths:
    """Where myclaw keeps its files; derived from ``MYCLAW_HOME``."""

    home: Path

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Paths:
        env = os.environ if env is None else env
        raw = env.get("MYCLAW_HOME") or "~/.myclaw"
        return cls(Path(raw).expanduser())

    @property
    def config_file(self) -> Path:
        return self.home / "config.json"

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    def memory_db(self, cfg: Config) -> Path:
        return Path(cfg.memory.db_path).expanduser() if cfg.memory.db_path else self.data_dir / "memory.db"

    def gateway_db(self) -> Path:
        return self.data_dir / "gateway.db"

    @property
    def exports_dir(self) -> Path:
        """Where ``myclaw chat`` writes the file of a user's ``/export``."""
        return self.home / "exports"

    def cron_db(self) -> Path:
        return self.data_dir / "cron.db"

    def data_files(self, cfg: Config | None) -> dict[str, Path]:
        """Role -> path of every SQLite file the gateway keeps. The order is
        the one a backup copies them in: the extraction buffer before
        memory.db (gateway/backup.py says why). Without a config, where
        memory.db lives is unknown: only the gateway's own files."""
        from memory.schema import buffer_path  # memory imports nothing from gateway

        files: dict[str, Path] = {}
        if cfg is not None:
            files = {"buffer": buffer_path(self.memory_db(cfg)), "memory": self.memory_db(cfg)}
        return {**files, "gateway": self.gateway_db(), "cron": self.cron_db()}

    def workspace(self, cfg: Config) -> Path:
        return Path(cfg.agent.workspace).expanduser() if cfg.agent.workspace else self.home / "workspace"


# env var -> (path in the JSON document, kind)
ENV_OVERRIDES: dict[str, tuple[tuple[str, ...], str]] = {
    "MYCLAW_PROVIDER_API_KEY": (("provider", "apiKey"), "str"),
    "MYCLAW_PROVIDER_BASE_URL": (("provider", "baseUrl"), "str"),
    "MYCLAW_AGENT_MODEL": (("agent", "model"), "str"),
    "MYCLAW_AGENT_WORKSPACE": (("agent", "workspace"), "str"),
    "MYCLAW_AGENT_VISION": (("agent", "vision"), "bool"),
    "MYCLAW_TRANSCRIPTION_ENABLED": (("agent", "transcription", "enabled"), "bool"),
    "MYCLAW_DOCUMENTS_ENABLED": (("agent", "documents", "enabled"), "bool"),
    "MYCLAW_MEMORY_ENABLED": (("memory", "enabled"), "bool"),
    "MYCLAW_MEMORY_MODEL": (("memory", "model"), "str"),
    "MYCLAW_MEMORY_API_KEY": (("memory", "provider", "apiKey"), "str"),
    "MYCLAW_MEMORY_BASE_URL": (("memory", "provider", "baseUrl"), "str"),
    "MYCLAW_MEMORY_DB_PATH": (("memory", "dbPath"), "str"),
    "MYCLAW_MEMORY_FILE_SYNC": (("memory", "fileSync"), "str"),
    "MYCLAW_EMBEDDING_ENABLED": (("memory", "embedding", "enabled"), "bool"),
    "MYCLAW_EMBEDDING_MODEL": (("memory", "embedding", "model"), "str"),
    "MYCLAW_EMBEDDING_API_KEY": (("memory", "embedding", "provider", "apiKey"), "str"),
    "MYCLAW_EMBEDDING_BASE_URL": (("memory", "embedding", "provider", "baseUrl"), "str"),
    "MYCLAW_TELEGRAM_ENABLED": (("channels", "telegram", "enabled"), "bool"),
    "MYCLAW_TELEGRAM_TOKEN": (("channels", "telegram", "token"), "str"),
    "MYCLAW_TELEGRAM_BASE_URL": (("channels", "telegram", "baseUrl"), "str"),
    "MYCLAW_FEISHU_ENABLED": (("channels", "feishu", "enabled"), "bool"),
    "MYCLAW_FEISHU_APP_ID": (("channels", "feishu", "appId"), "str"),
    "MYCLAW_FEISHU_APP_SECRET": (("channels", "feishu", "appSecret"), "str"),
    "MYCLAW_FEISHU_VERIFICATION_TOKEN": (("channels", "feishu", "verificationToken"), "str"),
    "MYCLAW_FEISHU_ENCRYPT_KEY": (("channels", "feishu", "encryptKey"), "str"),
    "MYCLAW_FEISHU_DOMAIN": (("channels", "feishu", "domain"), "str"),
    "MYCLAW_GATEWAY_HOST": (("gateway", "host"), "str"),
    "MYCLAW_GATEWAY_PORT": (("gateway", "port"), "int"),
    "MYCLAW_TIMEZONE": (("gateway", "timezone"), "str"),
    "MYCLAW_ADMIN_ENABLED": (("gateway", "admin", "enabled"), "bool"),
    "MYCLAW_ADMIN_TOKEN": (("gateway", "admin", "token"), "str"),
}

# Read elsewhere (Paths, the CLI's logging), not config overrides.
OTHER_ENV = frozenset({"MYCLAW_HOME", "MYCLAW_LOG_LEVEL"})

# A fallback's settings by its index in the list, counted from 0 as in the
# error messages: MYCLAW_AGENT_FALLBACKS_0_API_KEY is agent.fallbacks[0].provider.apiKey.
FALLBACK_ENV = re.compile(r"MYCLAW_(AGENT|MEMORY)_FALLBACKS_(\d{1,2})_(MODEL|API_KEY|BASE_URL)")
_FALLBACK_FIELDS: dict[str, tuple[str, ...]] = {
    "MODEL": ("model",),
    "API_KEY": ("provider", "apiKey"),
    "BASE_URL": ("provider", "baseUrl"),
}


def fallback_env_path(name: str) -> tuple[str | int, ...] | None:
    """The JSON path an indexed fallback variable sets, or None if ``name`` is not one."""
    m = FALLBACK_ENV.fullmatch(name)
    if m is None:
        return None
    return (m.group(1).lower(), "fallbacks", int(m.group(2)), *_FALLBACK_FIELDS[m.group(3)])


def env_name(path: tuple[str | int, ...], env: Mapping[str, str]) -> str | None:
    """The variable in ``env`` that sets ``path``, if one does."""
    for name, (p, _kind) in ENV_OVERRIDES.items():
        if p == path and name in env:
            return name
    return next((n for n in env if fallback_env_path(n) == path), None)


def unknown_env(env: Mapping[str, str]) -> list[str]:
    """``MYCLAW_*`` variables myclaw does not read, each with the closest
    one it does ("MYCLAW_TELEGRAM_TOKN (did you mean MYCLAW_TELEGRAM_TOKEN?)"):
    a misspelt secret is otherwise silently absent."""
    import difflib

    known = [*ENV_OVERRIDES, *sorted(OTHER_ENV)]
    out = []
    for name in sorted(env):
        if name.startswith("MYCLAW_") and name not in ENV_OVERRIDES and name not in OTHER_ENV:
            if fallback_env_path(name) is not None:
                continue
            # The fallback names with this name's index, so FALLBACK_0 finds FALLBACKS_0.
            index = re.search(r"\d+", name)
            n = index.group() if index else "0"
            indexed = [f"MYCLAW_{s}_FALLBACKS_{n}_{f}" for s in ("AGENT", "MEMORY") for f in _FALLBACK_FIELDS]
            close = difflib.get_close_matches(name, [*known, *indexed], n=1, cutoff=0.8)
            out.append(f"{name} (did you mean {close[0]}?)" if close else name)
    return out


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _env_value(name: str, raw: str, kind: str) -> Any:
    if kind == "bool":
        low = raw.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise ConfigError(f"{name}: invalid boolean {raw!r} (use true or false)")
    if kind == "int":
        try:
            return int(raw)
        except ValueError:
            raise ConfigError(f"{name}: invalid integer {raw!r}") from None
    return raw


def apply_env(doc: dict[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """Return a copy of ``doc`` with the ``MYCLAW_*`` overrides applied."""
    out: dict[str, Any] = json.loads(json.dumps(doc))
    for name, (path, kind) in ENV_OVERRIDES.items():
        if name not in env:
            continue
        node = out
        for key in path[:-1]:
            child = node.get(key)
            if not isinstance(child, dict):
                child = {}
                node[key] = child
            node = child
        node[path[-1]] = _env_value(name, env[name], kind)
    indexed = sorted((p, n) for n in env if (p := fallback_env_path(n)) is not None)
    for fpath, name in indexed:
        _set_fallback(out, fpath, name, env[name])
    return out


def _set_fallback(doc: dict[str, Any], path: tuple[str | int, ...], name: str, value: str) -> None:
    """Set one indexed fallback variable; the entry at its index must exist
    in the file, or be the next one (a whole fallback may come from the
    environment, its entries in order)."""
    section, _, index, *rest = path
    assert isinstance(section, str) and isinstance(index, int)
    parent = doc.get(section)
    if not isinstance(parent, dict):
        parent = doc[section] = {}
    items = parent.get("fallbacks")
    if items is None:
        items = parent["fallbacks"] = []
    if not isinstance(items, list):
        raise ConfigError(f"{name}: {section}.fallbacks in the config file is not a list")
    if index > len(items):
        raise ConfigError(
            f"{name}: {section}.fallbacks has {len(items)} entries, so the next index is {len(items)} "
            "(indexes count from 0)"
        )
    if index == len(items):
        items.append({})
    node = items[index]
    if not isinstance(node, dict):
        raise ConfigError(f"{name}: {section}.fallbacks[{index}] in the config file is not an object")
    for key in rest[:-1]:
        assert isinstance(key, str)
        child = node.get(key)
        if not isinstance(child, dict):
            child = node[key] = {}
        node = child
    node[str(rest[-1])] = value


def _fields_at(loc: Sequence[int | str]) -> list[str]:
    """The names (as written in the file) the config accepts beside the
    last step of ``loc``; [] when that is not a model's field."""
    model: type[BaseModel] | None = Config
    for step in loc[:-1]:
        if isinstance(step, int) or model is None:
            continue  # a list index: the item's model is the list's
        field = next((f for n, f in model.model_fields.items() if step in (n, f.alias)), None)
        if field is None:
            return []
        model = _model_in(field.annotation)
    if model is None:
        return []
    return [f.alias or n for n, f in model.model_fields.items()]


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The config model an annotation holds (``X``, ``X | None``, ``list[X]``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((m for a in typing.get_args(annotation) if (m := _model_in(a)) is not None), None)


def _resembling(loc: Sequence[int | str]) -> str | None:
    """The field a misspelt key most resembles ("timeZone" -> "timezone")."""
    import difflib

    name = loc[-1] if loc else None
    if not isinstance(name, str):
        return None
    known = {k.lower(): k for k in _fields_at(loc)}
    close = difflib.get_close_matches(name.lower(), list(known), n=1, cutoff=0.75)
    return known[close[0]] if close else None


def _source(loc: tuple[int | str, ...], doc: Mapping[str, Any], env: Mapping[str, str]) -> str:
    """`` (from MYCLAW_...)`` when the environment set the value at ``loc``
    (or made the fallback entry it is in): the file may not even have it."""
    name = env_name(loc, env)
    if name is not None:
        return f" (from {name})"
    if len(loc) > 3 and loc[1] == "fallbacks" and isinstance(loc[2], int):
        in_file = doc.get(str(loc[0]), {}) if isinstance(doc.get(str(loc[0])), dict) else {}
        listed = in_file.get("fallbacks")
        if not (isinstance(listed, list) and loc[2] < len(listed)):
            return f" (from the MYCLAW_{str(loc[0]).upper()}_FALLBACKS_{loc[2]}_* variables)"
    return ""


def _describe(err: ValidationError, doc: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None) -> str:
    lines = []
    for e in err.errors():
        # agent.fallbacks[1].provider.baseUrl: an index in brackets, as written in JSON paths
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in e["loc"]).lstrip(".") or "(root)"
        path += _source(tuple(e["loc"]), doc or {}, env or {})
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = "unknown field"
            close = _resembling(e["loc"])
            if close:
                msg += f" (did you mean {close}?)"
        elif msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        value = e.get("input")
        shown = "" if e["type"] in ("extra_forbidden", "missing") else f" (got {value!r})"
        if shown and repr(value) in msg:
            shown = ""  # the message names the value already
        if any(s in path.lower() for s in ("key", "token", "secret")) and shown:
            shown = " (value hidden)"
        lines.append(f"{path}: {msg}{shown}")
    return "invalid configuration:\n  " + "\n  ".join(lines)


def validate(doc: Mapping[str, Any], *, file_doc: Mapping[str, Any] | None = None,
             env: Mapping[str, str] | None = None) -> Config:
    """``file_doc`` and ``env``: what the file said and the variables applied
    over it, so an error can name the variable that set a bad value."""
    try:
        return Config.model_validate(doc)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, file_doc, env)) from None


def _first_comment(text: str) -> tuple[str, int] | None:
    """The first ``//`` or ``/* */`` outside a string, and its line: editors
    and examples write JSONC, and the decode error alone does not say why."""
    in_string = escaped = False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == "/" and text[i + 1 : i + 2] in ("/", "*"):
            kind = "//" if text[i + 1] == "/" else "/* */"
            return kind, text.count("\n", 0, i) + 1
    return None


def _trailing_comma(text: str, exc: json.JSONDecodeError) -> int | None:
    """The line of a comma right before the ``}`` or ``]`` the decoder
    stopped at: JavaScript and JSONC allow one there, JSON does not. The
    decoder took the comma as a separator, so it is not inside a string."""
    if text[exc.pos : exc.pos + 1] not in ("}", "]"):
        return None
    before = text[: exc.pos].rstrip()
    return before.count("\n") + 1 if before.endswith(",") else None


def _wrong_literal(text: str, exc: json.JSONDecodeError) -> str:
    """What a Python dict or a JavaScript object pasted as JSON has where
    the decoder stopped: a single quote, or True / False / None."""
    line = text.count("\n", 0, exc.pos) + 1
    if text[exc.pos : exc.pos + 1] == "'":
        return f": JSON strings take double quotes: write \"...\", not '...', on line {line}"
    for literal, fix in (("True", "true"), ("False", "false"), ("None", "null")):
        if text.startswith(literal, exc.pos):
            return f": JSON writes {literal} as {fix}, in lower case, on line {line}"
    return ""


def load_config(
    path: Path | None = None,
    env: Mapping[str, str] | None = None,
    *,
    require: bool = False,
) -> Config:
    """Read, override from the environment, validate.

    ``require=False`` lets a missing file mean "all defaults" (CLI memory
    commands work without a config); the gateway asks for ``require=True``.
    """
    env = os.environ if env is None else env
    path = path or Paths.from_env(env).config_file
    doc: dict[str, Any] = {}
    if path.exists():
        try:
            text = path.read_text(encoding="utf-8-sig")  # -sig: Notepad and PowerShell write a BOM
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"{path}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at position {exc.start}): "
                "save it as UTF-8"
            ) from None
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read it ({exc.strerror or exc})") from None
        if not text.strip():
            raise ConfigError(f"{path}: the file is empty: copy config.example.json there and fill it in")
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            found = _first_comment(text)
            hint = f": JSON has no comments: remove the {found[0]} on line {found[1]}" if found else ""
            if not hint and (comma := _trailing_comma(text, exc)) is not None:
                hint = f": JSON allows no comma before }} or ]: remove the one at the end of line {comma}"
            hint = hint or _wrong_literal(text, exc)
            raise ConfigError(
                f"{path}: not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}{hint}"
            ) from None
        if not isinstance(doc, dict):
            raise ConfigError(f"{path}: the top level must be a JSON object")
    elif require:
        raise ConfigError(f"no config file at {path}: copy config.example.json there and fill it in")
    return validate(apply_env(doc, env), file_doc=doc, env=env)
