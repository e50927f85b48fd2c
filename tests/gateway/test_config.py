from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from gateway.config import ENV_OVERRIDES, ConfigError, Paths, TelegramConfig, load_config, parse_duration, unknown_env

EXAMPLE = Path(__file__).resolve().parents[2] / "config.example.json"


def write(tmp_path: Path, doc: object) -> Path:
    p = tmp_path / "config.json"
    p.write_text(json.dumps(doc), encoding="utf-8")
    return p


def test_example_config_is_valid_and_shows_every_section() -> None:
    doc = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    assert {"provider", "agent", "channels", "gateway", "memory"} <= doc.keys()
    assert {"quietGap", "tokenBudget", "dailyFlush"} <= doc["memory"]["extraction"].keys()
    cfg = load_config(EXAMPLE, env={})
    assert cfg.memory.extraction.quiet_gap == timedelta(minutes=3)
    assert cfg.memory.embedding.enabled is False  # hybrid recall is opt-in
    assert cfg.memory.embedding.query_timeout == timedelta(milliseconds=500)
    assert (cfg.gateway.rate_limit.per_minute, cfg.gateway.rate_limit.per_hour) == (10, 200)


def test_the_example_asks_for_one_model_key_and_keeps_the_default_zone() -> None:
    # Copied as it is, the example's memory model uses the chat provider (no
    # second placeholder key to find), and its time zone is the one a config
    # without it gets: the example and the defaults tell one story.
    cfg = load_config(EXAMPLE, env={})
    assert cfg.memory.provider is None
    assert cfg.gateway.timezone == load_config(tmp_missing(), env={}).gateway.timezone == "UTC"


def tmp_missing() -> Path:
    return EXAMPLE.parent / "no-such-config.json"


def test_example_config_names_every_setting_the_schema_takes() -> None:
    """An operator learns the settings from config.example.json: each field of
    each section is written out at least once (an optional section, such as a
    fallback's own provider, where it appears in full)."""
    from pydantic import BaseModel

    from gateway.config import Config, _model_in

    seen: dict[type[BaseModel], set[str]] = {}

    def walk(model: type[BaseModel], node: object) -> None:
        if not isinstance(node, dict):
            return
        seen.setdefault(model, set()).update(node)
        for name, field in model.model_fields.items():
            sub, value = _model_in(field.annotation), node.get(field.alias or name)
            for item in value if isinstance(value, list) else [value]:
                if sub is not None:
                    walk(sub, item)

    walk(Config, json.loads(EXAMPLE.read_text(encoding="utf-8")))
    missing = [f"{m.__name__}.{f.alias or n}" for m, keys in seen.items()
               for n, f in m.model_fields.items() if (f.alias or n) not in keys]

    def reachable(model: type[BaseModel]) -> set[type[BaseModel]]:
        subs = {s for f in model.model_fields.values() if (s := _model_in(f.annotation)) is not None}
        return {model}.union(*(reachable(s) for s in subs))

    assert missing == []
    assert reachable(Config) == set(seen)  # no section left out


def test_readme_lists_every_environment_override_with_its_setting() -> None:
    """README's table of MYCLAW_* variables is the operator's list: each one
    myclaw reads, with the setting it replaces."""
    from gateway.config import ENV_OVERRIDES, OTHER_ENV

    readme = (EXAMPLE.parent / "README.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip(" `"): line.split("|")[2].strip(" `")
            for line in readme.splitlines() if line.startswith("| `MYCLAW_") and "<i>" not in line}
    assert {n: ".".join(p) for n, (p, _kind) in ENV_OVERRIDES.items()} == {
        n: v for n, v in rows.items() if n not in OTHER_ENV}
    assert OTHER_ENV <= rows.keys()


def test_a_config_file_saved_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    # Windows Notepad and PowerShell save UTF-8 with a BOM.
    p = tmp_path / "config.json"
    p.write_bytes(b"\xef\xbb\xbf" + json.dumps({"gateway": {"port": 18791}}).encode())
    assert load_config(p, env={}).gateway.port == 18791


def test_a_config_file_that_cannot_be_read_is_named_with_what_to_do(tmp_path: Path) -> None:
    p = tmp_path / "config.json"
    p.write_bytes(b"\xff\xfe" + '{"gateway": {}}'.encode("utf-16-le"))  # PowerShell 5's `>`
    with pytest.raises(ConfigError, match=rf"{p}: not UTF-8 text \(byte 0xff at position 0\): save it as UTF-8"):
        load_config(p, env={})
    p.unlink()
    p.mkdir()
    with pytest.raises(ConfigError, match=rf"{p}: cannot read it \(Is a directory\)"):
        load_config(p, env={})
    p.rmdir()
    p.write_text("", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"{p}: the file is empty: copy config.example.json there and fill it in"):
        load_config(p, env={})


def test_a_bad_value_from_the_environment_names_the_variable_not_only_the_setting(tmp_path: Path) -> None:
    # The file may not even have the setting: the operator must look at the variable.
    p = write(tmp_path, {"gateway": {"port": 18790}})
    with pytest.raises(ConfigError) as err:
        load_config(p, env={"MYCLAW_GATEWAY_PORT": "99999", "MYCLAW_TIMEZONE": "Mars/Base"})
    assert "gateway.port (from MYCLAW_GATEWAY_PORT): Input should be less than or equal to 65535" in str(err.value)
    assert "gateway.timezone (from MYCLAW_TIMEZONE): unknown timezone 'Mars/Base'" in str(err.value)
    with pytest.raises(ConfigError) as err:
        load_config(p, env={"MYCLAW_AGENT_FALLBACKS_0_BASE_URL": "api.example.com"})
    assert "agent.fallbacks[0].model (from the MYCLAW_AGENT_FALLBACKS_0_* variables): Field required" in str(err.value)
    assert ("agent.fallbacks[0].provider.baseUrl (from MYCLAW_AGENT_FALLBACKS_0_BASE_URL): invalid URL"
            in str(err.value))
    with pytest.raises(ConfigError) as err:  # from the file: no variable named
        load_config(write(tmp_path, {"gateway": {"port": 99999}}), env={})
    assert "gateway.port: Input should be" in str(err.value)


def test_embedding_env_overrides_and_provider_fallback(tmp_path: Path) -> None:
    doc = {"memory": {"provider": {"baseUrl": "http://mem.example/v1"}}}
    cfg = load_config(write(tmp_path, doc), env={"MYCLAW_EMBEDDING_ENABLED": "true", "MYCLAW_EMBEDDING_MODEL": "bge-m3"})
    assert cfg.memory.embedding.enabled and cfg.memory.embedding.model == "bge-m3"
    assert cfg.embedding_provider().base_url == "http://mem.example/v1"  # the memory provider, unless its own
    cfg = load_config(write(tmp_path, doc), env={"MYCLAW_EMBEDDING_BASE_URL": "http://127.0.0.1:9/v1",
                                                 "MYCLAW_EMBEDDING_API_KEY": "sk-e"})
    assert cfg.embedding_provider().base_url == "http://127.0.0.1:9/v1"
    assert cfg.embedding_provider().api_key.get_secret_value() == "sk-e"


def test_missing_file_means_defaults_unless_required(tmp_path: Path) -> None:
    cfg = load_config(tmp_path / "none.json", env={})
    assert cfg.memory.enabled is True
    with pytest.raises(ConfigError, match="no config file"):
        load_config(tmp_path / "none.json", env={}, require=True)


@pytest.mark.parametrize(
    ("doc", "field", "shown"),
    [
        ({"memory": {"enabled": "maybe"}}, "memory.enabled", "'maybe'"),
        ({"memory": {"extraction": {"quietGap": "soon"}}}, "memory.extraction.quietGap", "soon"),
        ({"channels": {"feishu": {"mode": "carrier-pigeon"}}}, "channels.feishu.mode", "carrier-pigeon"),
        ({"gateway": {"port": "eighty"}}, "gateway.port", "eighty"),
        ({"gateway": {"timezone": "Mars/Olympus"}}, "gateway.timezone", "Mars/Olympus"),
        ({"gateway": {"rateLimit": {"perMinute": -1}}}, "gateway.rateLimit.perMinute", "-1"),
        ({"memory": {"extraction": {"dailyFlush": "25:00"}}}, "memory.extraction.dailyFlush", "25:00"),
        ({"memory": {"quietgap": "3m"}}, "memory.quietgap", "unknown field"),
        ({"provider": {"baseUrl": "ftp://x"}}, "provider.baseUrl", "ftp://x"),
        ({"memory": {"embedding": {"lexicalShare": 2}}}, "memory.embedding.lexicalShare", "2"),
        ({"memory": {"embedding": {"fusion": "max"}}}, "memory.embedding.fusion", "max"),
        ({"memory": {"embedding": {"queryTimeout": "soon"}}}, "memory.embedding.queryTimeout", "soon"),
        ({"memory": {"embedding": {"provider": {"baseUrl": "localhost"}}}}, "memory.embedding.provider.baseUrl", "localhost"),
        ({"channels": {"feishu": {"maxUploadBytes": 40000000}}}, "channels.feishu.maxUploadBytes", "40000000"),
        ({"channels": {"telegram": {"maxUploadBytes": 3000000000}}}, "channels.telegram.maxUploadBytes", "3000000000"),
        ({"gateway": {"trustedProxies": ["127.0.0.1", "localhost"]}}, "gateway.trustedProxies", "localhost"),
        ({"gateway": {"trustedProxies": ["10.0.0.1/8"]}}, "gateway.trustedProxies", "10.0.0.1/8"),
    ],
)
def test_bad_values_name_the_field_and_value(tmp_path: Path, doc: dict, field: str, shown: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, doc), env={})
    assert field in str(err.value)
    assert shown in str(err.value)


@pytest.mark.parametrize(
    ("doc", "line"),
    [
        ({"agent": {"maxToken": 100}}, "agent.maxToken: unknown field (did you mean maxTokens?)"),
        ({"gateway": {"timeZone": "UTC"}}, "gateway.timeZone: unknown field (did you mean timezone?)"),
        ({"channels": {"telegram": {"alowFrom": []}}}, "channels.telegram.alowFrom: unknown field (did you mean allowFrom?)"),
        ({"agent": {"fallbacks": [{"modle": "x"}]}}, "agent.fallbacks[0].modle: unknown field (did you mean model?)"),
        ({"memory": {"embedding": {"provider": {"apikey": "k"}}}},
         "memory.embedding.provider.apikey: unknown field (did you mean apiKey?)"),
        ({"chanels": {}}, "chanels: unknown field (did you mean channels?)"),
        ({"agent": {"colour": "blue"}}, "agent.colour: unknown field\n"),
    ],
)
def test_a_misspelt_field_is_named_with_the_one_it_resembles(tmp_path: Path, doc: dict, line: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, doc), env={})
    assert line in str(err.value) + "\n"


@pytest.mark.parametrize(
    ("zone", "line"),
    [
        # What /timezone takes from a user, the operator may type too: name the IANA zone.
        ("Beijing", "gateway.timezone: unknown timezone 'Beijing' (did you mean Asia/Shanghai?)"),
        ("上海", "gateway.timezone: unknown timezone '上海' (did you mean Asia/Shanghai?)"),
        ("Asia/Shangai", "gateway.timezone: unknown timezone 'Asia/Shangai' (did you mean Asia/Shanghai?)"),
        ("UTC+8", "gateway.timezone: unknown timezone 'UTC+8' (an offset is not a zone name: write the place's, "
                  "such as Asia/Shanghai or Europe/Berlin)"),
        ("Mars/Olympus", "gateway.timezone: unknown timezone 'Mars/Olympus' (an IANA name such as Asia/Shanghai)"),
        ("CST", "gateway.timezone: unknown timezone 'CST' (did you mean Asia/Shanghai or America/Chicago?)"),
    ],
)
def test_an_unknown_gateway_timezone_says_which_name_to_write(tmp_path: Path, zone: str, line: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, {"gateway": {"timezone": zone}}), env={})
    assert line in str(err.value)


def test_secret_values_are_not_echoed_in_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, {"channels": {"telegram": {"token": 12345678901}}}), env={})
    assert "channels.telegram.token" in str(err.value)
    assert "12345678901" not in str(err.value)


def test_invalid_json_names_line(tmp_path: Path) -> None:
    p = tmp_path / "config.json"
    p.write_text('{"memory": {"enabled": true,}}', encoding="utf-8")
    with pytest.raises(ConfigError, match="line 1"):
        load_config(p, env={})


def test_env_overrides(tmp_path: Path) -> None:
    p = write(tmp_path, {"memory": {"enabled": True, "model": "big"}, "provider": {"apiKey": "file-key"}})
    env = {
        "MYCLAW_MEMORY_ENABLED": "false",
        "MYCLAW_MEMORY_MODEL": "small",
        "MYCLAW_MEMORY_API_KEY": "mem-key",
        "MYCLAW_MEMORY_BASE_URL": "http://127.0.0.1:9/v1",
        "MYCLAW_PROVIDER_API_KEY": "env-key",
        "MYCLAW_TELEGRAM_TOKEN": "123:abc",
        "MYCLAW_FEISHU_APP_SECRET": "fs",
    }
    cfg = load_config(p, env=env)
    assert cfg.memory.enabled is False
    assert cfg.memory_model() == "small"
    assert cfg.memory_provider().api_key.get_secret_value() == "mem-key"
    assert cfg.memory_provider().base_url == "http://127.0.0.1:9/v1"
    assert cfg.provider.api_key.get_secret_value() == "env-key"
    assert cfg.channels.telegram.token.get_secret_value() == "123:abc"
    assert cfg.channels.feishu.app_secret.get_secret_value() == "fs"


def test_file_sync_interval_default_env_and_bounds(tmp_path: Path) -> None:
    assert load_config(tmp_path / "none.json", env={}).memory.file_sync == timedelta(seconds=10)
    cfg = load_config(tmp_path / "none.json", env={"MYCLAW_MEMORY_FILE_SYNC": "0s"})
    assert cfg.memory.file_sync == timedelta(0)  # off
    assert load_config(write(tmp_path, {"memory": {"fileSync": "1m"}}), env={}).memory.file_sync == timedelta(minutes=1)
    with pytest.raises(ConfigError, match="MYCLAW_MEMORY_FILE_SYNC"):
        load_config(tmp_path / "none.json", env={"MYCLAW_MEMORY_FILE_SYNC": "10ms"})


def test_bad_env_value_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="MYCLAW_MEMORY_ENABLED"):
        load_config(tmp_path / "none.json", env={"MYCLAW_MEMORY_ENABLED": "perhaps"})


def test_memory_model_falls_back_to_agent() -> None:
    cfg = load_config(Path("/nonexistent/config.json"), env={})
    assert cfg.memory_model() == cfg.agent.model
    assert cfg.memory_provider() is cfg.provider
    assert cfg.memory_max_tokens() == cfg.agent.max_tokens


def test_token_budget_ratio_is_read_as_the_seed_meant(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, {"memory": {"extraction": {"tokenBudget": 0.6}}}), env={})
    assert cfg.memory.extraction.token_budget == pytest.approx(6000)


def test_identity_handle_mapped_twice_is_an_error(tmp_path: Path) -> None:
    doc = {"memory": {"identities": {"alice": ["telegram:1"], "bob": ["telegram:1"]}}}
    with pytest.raises(ConfigError, match="memory.identities"):
        load_config(write(tmp_path, doc), env={})


def test_identity_named_as_another_users_handle_is_an_error(tmp_path: Path) -> None:
    """A person named "telegram:8" while telegram:8 is alice's handle would
    be handed what telegram:8 stored before it was mapped (alice's words)."""
    doc = {"memory": {"identities": {"alice": ["telegram:8"], "telegram:8": ["feishu:ou_x"]}}}
    with pytest.raises(ConfigError, match="telegram:8"):
        load_config(write(tmp_path, doc), env={})
    # Naming a person after their own handle is fine.
    cfg = load_config(write(tmp_path, {"memory": {"identities": {"telegram:8": ["telegram:8", "feishu:ou_x"]}}}), env={})
    assert cfg.memory.identities == {"telegram:8": ["telegram:8", "feishu:ou_x"]}


def test_identity_named_as_a_handle_it_does_not_list_is_an_error(tmp_path: Path) -> None:
    """Named "telegram:9" with only a Feishu handle: whoever writes from
    Telegram as 9, not in the map, is their own user "telegram:9" (memory
    /identity.py), the very name, so a stranger would share the person's
    memory. The name must be one of their handles, or no handle's shape."""
    doc = {"memory": {"identities": {"telegram:9": ["feishu:ou_x"]}}}
    with pytest.raises(ConfigError, match="telegram:9"):
        load_config(write(tmp_path, doc), env={})
    for ok in ({"telegram:9": ["telegram:9", "feishu:ou_x"]}, {"Alice": ["feishu:ou_x"]}):
        assert load_config(write(tmp_path, {"memory": {"identities": ok}}), env={}).memory.identities == ok


def test_identity_named_as_a_groups_own_memory_is_an_error(tmp_path: Path) -> None:
    """A group's notes are owned by "group:<channel>:<chat>" (memory/groupowner.py):
    a person named so, or a handle shaped so, would read and erase them as theirs."""
    for doc in ({"group:telegram:-100900": ["telegram:9"]}, {"dad": ["group:telegram:-100900"]}):
        with pytest.raises(ConfigError, match="group:telegram:-100900"):
            load_config(write(tmp_path, {"memory": {"identities": doc}}), env={})


def test_paths_follow_myclaw_home(tmp_path: Path) -> None:
    paths = Paths.from_env({"MYCLAW_HOME": str(tmp_path)})
    cfg = load_config(paths.config_file, env={})
    assert paths.memory_db(cfg) == tmp_path / "data" / "memory.db"
    assert paths.workspace(cfg) == tmp_path / "workspace"


@pytest.mark.parametrize(("text", "seconds"), [("30s", 30), ("3m", 180), ("1h30m", 5400), ("2h", 7200), (45, 45)])
def test_parse_duration(text: str | int, seconds: float) -> None:
    assert parse_duration(text).total_seconds() == seconds


@pytest.mark.parametrize("text", ["", "3", "m", "3 minutes", "-3m", "3m!"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_a_misspelt_env_variable_is_named_with_the_one_meant() -> None:
    env = {"MYCLAW_TELEGRAM_TOKN": "1:abc", "MYCLAW_HOME": "/h", "MYCLAW_LOG_LEVEL": "INFO",
           "MYCLAW_TELEGRAM_TOKEN": "1:abc", "MYCLAW_FROBNICATE": "1", "PATH": "/bin"}
    assert unknown_env(env) == ["MYCLAW_FROBNICATE", "MYCLAW_TELEGRAM_TOKN (did you mean MYCLAW_TELEGRAM_TOKEN?)"]
    assert unknown_env({name: "x" for name in ENV_OVERRIDES}) == []


def test_a_value_the_message_already_names_is_not_repeated(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, {"provider": {"timeout": "abc"}}), env={})
    assert str(err.value).count("'abc'") == 1


# -- fallbacks (agent.fallbacks, memory.fallbacks) ------------------------------------


def test_fallback_errors_name_the_field_with_its_index(tmp_path: Path) -> None:
    doc = {"agent": {"fallbacks": [
        {"model": "small"},
        {"model": "elsewhere", "provider": {"baseUrl": "api.example.com/v1", "apiKey": "sk-fallback-secret-123"}},
        {"model": " ", "provider": {"timeout": "soon"}},
    ]}}
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, doc), env={})
    text = str(err.value)
    assert "agent.fallbacks[1].provider.baseUrl: invalid URL 'api.example.com/v1'" in text
    assert "agent.fallbacks[2].model: must name the fallback model" in text
    assert "agent.fallbacks[2].provider.timeout: invalid duration 'soon'" in text
    assert "sk-fallback-secret-123" not in text
    with pytest.raises(ConfigError, match=r"memory\.fallbacks\[0\]\.model: Field required"):
        load_config(write(tmp_path, {"memory": {"fallbacks": [{"provider": {}}]}}), env={})
    with pytest.raises(ConfigError, match=r"agent\.fallbacks\[0\]\.modle: unknown field"):
        load_config(write(tmp_path, {"agent": {"fallbacks": [{"modle": "x"}]}}), env={})


def test_a_fallback_key_comes_from_the_environment_by_index(tmp_path: Path) -> None:
    doc = {"agent": {"fallbacks": [
        {"model": "small"},
        {"model": "elsewhere", "provider": {"baseUrl": "https://api.example.com/v1"}},
    ]}}
    env = {
        "MYCLAW_AGENT_FALLBACKS_1_API_KEY": "sk-from-env-0123456789",
        "MYCLAW_AGENT_FALLBACKS_2_MODEL": "third",  # the next index: a whole fallback from the environment
        "MYCLAW_AGENT_FALLBACKS_2_BASE_URL": "http://127.0.0.1:9/v1",
        "MYCLAW_MEMORY_FALLBACKS_0_MODEL": "mem-backup",
    }
    cfg = load_config(write(tmp_path, doc), env=env)
    fb = cfg.agent.fallbacks
    assert [f.model for f in fb] == ["small", "elsewhere", "third"]
    assert fb[0].provider is None
    assert fb[1].provider is not None and fb[1].provider.api_key.get_secret_value() == "sk-from-env-0123456789"
    assert fb[1].provider.base_url == "https://api.example.com/v1"
    assert fb[2].provider is not None and fb[2].provider.base_url == "http://127.0.0.1:9/v1"
    assert [f.model for f in cfg.memory_fallbacks()] == ["mem-backup"]
    assert unknown_env(env) == []
    # An index past the end is a mistake, not a silently ignored variable.
    with pytest.raises(ConfigError, match=r"MYCLAW_AGENT_FALLBACKS_5_API_KEY: agent.fallbacks has 2 entries"):
        load_config(write(tmp_path, doc), env={"MYCLAW_AGENT_FALLBACKS_5_API_KEY": "sk-x"})
    # A key for a fallback that names no model: the error says which field is missing.
    with pytest.raises(ConfigError, match=r"agent\.fallbacks\[0\]\.model \(from the MYCLAW_AGENT_FALLBACKS_0_\* "
                       r"variables\): Field required"):
        load_config(write(tmp_path, {}), env={"MYCLAW_AGENT_FALLBACKS_0_API_KEY": "sk-x"})


def test_a_misspelt_fallback_variable_is_reported_with_the_right_name() -> None:
    env = {"MYCLAW_AGENT_FALLBACK_1_API_KEY": "x", "MYCLAW_MEMORY_FALLBACKS_0_APIKEY": "y"}
    assert unknown_env(env) == [
        "MYCLAW_AGENT_FALLBACK_1_API_KEY (did you mean MYCLAW_AGENT_FALLBACKS_1_API_KEY?)",
        "MYCLAW_MEMORY_FALLBACKS_0_APIKEY (did you mean MYCLAW_MEMORY_FALLBACKS_0_API_KEY?)",
    ]


def test_fallback_keys_are_redacted_secrets(tmp_path: Path) -> None:
    from gateway.app import config_secrets

    doc = {"agent": {"fallbacks": [{"model": "a", "provider": {"apiKey": "sk-agent-fb-0123456789"}}]},
           "memory": {"fallbacks": [{"model": "b", "provider": {"apiKey": "sk-memory-fb-0123456789"}}]}}
    cfg = load_config(write(tmp_path, doc), env={})
    assert {"sk-agent-fb-0123456789", "sk-memory-fb-0123456789"} <= set(config_secrets(cfg))


def test_vision_is_off_by_default_and_its_limit_is_checked(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, {}), env={})
    assert (cfg.agent.vision, cfg.agent.max_image_bytes) == (False, 5 * 1024 * 1024)
    cfg = load_config(write(tmp_path, {"agent": {"maxImageBytes": 1_000_000}}), env={"MYCLAW_AGENT_VISION": "true"})
    assert (cfg.agent.vision, cfg.agent.max_image_bytes) == (True, 1_000_000)
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, {"agent": {"maxImageBytes": 50 * 1024 * 1024}}), env={})
    assert "agent.maxImageBytes" in str(err.value)


def test_transcription_has_its_own_model_and_provider(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, {}), env={"MYCLAW_TRANSCRIPTION_ENABLED": "1"})
    t = cfg.agent.transcription
    assert (t.enabled, t.model, t.provider, t.max_audio_bytes) == (True, "whisper-1", None, 20 * 1024 * 1024)
    doc = {"agent": {"transcription": {"provider": {"baseUrl": "http://127.0.0.1:9/v1"}, "model": "whisper-large-v3"}}}
    t = load_config(write(tmp_path, doc), env={}).agent.transcription
    assert t.provider is not None and (t.provider.base_url, t.model) == ("http://127.0.0.1:9/v1", "whisper-large-v3")
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, {"agent": {"transcription": {"model": " "}}}), env={})
    assert "agent.transcription.model" in str(err.value)


def test_telegram_files_come_from_the_file_url_of_the_api() -> None:
    assert TelegramConfig().file_url == "https://api.telegram.org/file/bot"
    assert TelegramConfig(base_url="http://127.0.0.1:8081/bot").file_url == "http://127.0.0.1:8081/file/bot"
    assert TelegramConfig(base_file_url="http://files.local/f/bot").file_url == "http://files.local/f/bot"


def test_trusted_proxies_are_off_unless_listed(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, {}), env={}).gateway.trusted_proxies == []
    cfg = load_config(write(tmp_path, {"gateway": {"trustedProxies": ["127.0.0.1", "::1", "10.0.0.0/8"]}}), env={})
    assert cfg.gateway.trusted_proxies == ["127.0.0.1", "::1", "10.0.0.0/8"]


def test_a_config_file_with_comments_is_named_with_the_line_to_remove(tmp_path: Path) -> None:
    # Operators copy JSONC from editors and blog posts; the bare decode error does not say why.
    p = tmp_path / "config.json"
    p.write_text('{\n  "gateway": {\n    // the port\n    "port": 18791\n  }\n}\n', encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(p, env={})
    assert str(err.value).startswith(f"{p}: not valid JSON at line 3 column 5")
    assert str(err.value).endswith("JSON has no comments: remove the // on line 3")
    # A block comment; and '//' inside a string (a URL) before it is not a comment.
    p.write_text('{"provider": {"baseUrl": "http://x/v1"},\n\n  /* old:\n "port": 1 */ "gateway": {}}',
                 encoding="utf-8")
    with pytest.raises(ConfigError, match=r"JSON has no comments: remove the /\* \*/ on line 3$"):
        load_config(p, env={})
    # Valid JSON with '//' only inside strings loads; a plain syntax error gets no comment hint.
    p.write_text('{"provider": {"baseUrl": "http://x/v1"}}', encoding="utf-8")
    assert load_config(p, env={}).provider.base_url == "http://x/v1"
    p.write_text('{"gateway": {"port": 1,}}', encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(p, env={})
    assert "comments" not in str(err.value)


def test_single_quotes_and_python_literals_are_named_with_the_fix(tmp_path: Path) -> None:
    # Written as a Python dict or a JavaScript object: the bare "Expecting value" does not say why.
    p = tmp_path / "config.json"
    p.write_text("{\n  \"agent\": {\"model\": 'gpt-4o-mini'}\n}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(p, env={})
    assert str(err.value).startswith(f"{p}: not valid JSON at line 2 column 22")
    assert str(err.value).endswith("JSON strings take double quotes: write \"...\", not '...', on line 2")
    p.write_text("{'agent': {}}", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"JSON strings take double quotes: write \"\.\.\.\", not '\.\.\.', on line 1$"):
        load_config(p, env={})
    for literal, fix in (("True", "true"), ("False", "false"), ("None", "null")):
        p.write_text(f'{{"memory": {{"enabled": {literal}}}}}', encoding="utf-8")
        with pytest.raises(ConfigError) as err:
            load_config(p, env={})
        assert str(err.value).endswith(f"JSON writes {literal} as {fix}, in lower case, on line 1"), str(err.value)
    # An apostrophe inside a string is no quote mark, and loads.
    p.write_text('{"agent": {"model": "alice\'s-model"}}', encoding="utf-8")
    assert load_config(p, env={}).agent.model == "alice's-model"


def test_a_trailing_comma_is_named_with_its_line(tmp_path: Path) -> None:
    # JavaScript and JSONC allow them, and the decode error points at the bracket after.
    p = tmp_path / "config.json"
    p.write_text('{\n  "gateway": {\n    "port": 18791,\n  },\n  "agent": {}\n}\n', encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(p, env={})
    assert str(err.value).startswith(f"{p}: not valid JSON at line 4 column 3")
    assert str(err.value).endswith("JSON allows no comma before } or ]: remove the one at the end of line 3")
    # In a list, and with blank lines between the comma and the bracket.
    p.write_text('{"channels": {"telegram": {"allowFrom": [\n  "alice",\n  "bob",\n\n]}}}', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"remove the one at the end of line 3$"):
        load_config(p, env={})
    # A comma inside a string before a bracket is no trailing comma; a missing value gets no hint.
    p.write_text('{"agent": {"model": "a,}"}, "gateway": {"port": }}', encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(p, env={})
    assert str(err.value).endswith("Expecting value")
