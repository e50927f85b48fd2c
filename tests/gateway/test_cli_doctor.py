"""``myclaw doctor`` as an operator runs it: the real click command on a
real config under a temporary MYCLAW_HOME, real SQLite files made by the
real stores, and the loopback fakes of the OpenAI-compatible, Telegram and
Feishu APIs (in a thread of their own, since the command calls
``asyncio.run``)."""

from __future__ import annotations

import asyncio
import json
import socket
import sqlite3
import threading
from collections.abc import Coroutine, Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from gateway.bus import MessageBus
from gateway.cli import main
from gateway.config import ConfigError, load_config
from gateway.cron import CRON_MIGRATIONS, CronStore
from gateway.health import Health
from gateway.http import HttpServer
from gateway.sessions import MIGRATIONS as GATEWAY_MIGRATIONS
from gateway.sessions import SessionStore
from memory import ManualClock, MemoryEngine, NewMemory
from memory.schema import MIGRATIONS
from memory.backend import Turn
from memory.service import SqliteMemory
from tests.fakes.feishu_server import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram

API_KEY = "sk-doctor-test-key-0123456789"


@dataclass
class Fakes:
    llm: FakeOpenAI
    telegram: FakeTelegram
    feishu: FakeFeishu
    loop: asyncio.AbstractEventLoop

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run ``coro`` on the fakes' loop (their thread) and wait for it."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    import os

    for name in [n for n in os.environ if n.startswith("MYCLAW_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("MYCLAW_HOME", str(tmp_path))
    return tmp_path


@pytest.fixture
def fakes() -> Iterator[Fakes]:
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    made: dict[str, Any] = {}

    async def start() -> None:
        made["llm"] = await FakeOpenAI(api_key=API_KEY).start()
        made["telegram"] = await FakeTelegram().start()
        made["feishu"] = await FakeFeishu().start()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        ready.set()
        loop.run_forever()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    assert ready.wait(10)
    f = Fakes(made["llm"], made["telegram"], made["feishu"], loop)
    try:
        yield f
    finally:
        for fake in (f.llm, f.telegram, f.feishu):
            f.run(fake.stop())
        loop.call_soon_threadsafe(loop.stop)
        t.join(10)
        loop.close()


def healthy_config(f: Fakes) -> dict[str, Any]:
    return {
        "provider": {"baseUrl": f.llm.url, "apiKey": API_KEY},
        "agent": {"model": "fake-model"},
        "channels": {
            "telegram": {"enabled": True, "token": f.telegram.token, "baseUrl": f.telegram.base_url, "allowFrom": [42]},
            "feishu": {
                "enabled": True, "appId": f.feishu.app_id, "appSecret": f.feishu.app_secret, "domain": f.feishu.url,
                "allowFrom": ["ou_alice"],
            },
        },
        "gateway": {"timezone": "Asia/Shanghai"},
        "memory": {"embedding": {"enabled": True, "model": "fake-embed"}},
    }


def write_config(home: Path, doc: dict[str, Any], mode: int = 0o600) -> None:
    """Owner-only, as the README says to keep a config holding keys."""
    path = home / "config.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    path.chmod(mode)


def make_data_files(home: Path) -> None:
    """Every data file, as a gateway that ran once leaves them (closed)."""

    async def go() -> None:
        clock = ManualClock("2026-03-01T12:00:00Z")
        data = home / "data"
        engine = await MemoryEngine.open(data / "memory.db", clock)
        await engine.add(NewMemory(content="Alice drives a blue Tesla", owner="alice"))
        await engine.close()
        sessions = await SessionStore.open(data / "gateway.db", clock)
        await sessions.close()
        cron = await CronStore.open(data / "cron.db", clock)
        await cron.close()

    asyncio.run(go())


def doctor(*args: str, **env: str) -> Result:
    return CliRunner().invoke(main, ["doctor", *args], env=env or None, catch_exceptions=False)


def checks(r: Result) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in json.loads(r.stdout)["checks"]}


def line(r: Result, name: str) -> str:
    """The line of the check ``name`` (status, name, message -> fix)."""
    [hit] = [x for x in r.stdout.splitlines() if x[9:].startswith(name + " ")]
    return hit


def snapshot(d: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(d.iterdir())}


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- a healthy setup ---------------------------------------------------------------


def test_a_healthy_setup_is_all_ok_and_exits_0(home: Path, fakes: Fakes) -> None:
    write_config(home, healthy_config(fakes))
    make_data_files(home)
    r = doctor()
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[-1] == "0 error(s), 0 warning(s)"
    assert all(x.startswith("ok ") for x in lines[:-1]), r.stdout
    assert f"{home / 'config.json'} loaded (home {home})" in line(r, "config")
    assert "bot @myclaw_bot (getMe in" in line(r, "telegram")
    assert "bot 'myclaw' (ou_bot" in line(r, "feishu")
    assert "long connection endpoint hands out a websocket URL in" in line(r, "feishu-ws")  # mode websocket
    assert ("POST", "/callback/ws/endpoint") in fakes.feishu.requests
    assert "the app may read group information (group titles)" in line(r, "feishu-groups")
    assert "ticket" not in r.output and "access_key" not in r.output
    assert f"{fakes.llm.url} answers in" in line(r, "llm") and "model fake-model listed" in line(r, "llm")
    assert "embeds with fake-embed (64 dimensions" in line(r, "embedding")
    assert f"quick_check ok, schema v{len(MIGRATIONS)}" in line(r, "memory.db")
    assert f"quick_check ok, schema v{len(GATEWAY_MIGRATIONS)}" in line(r, "gateway.db")
    assert "Asia/Shanghai, now" in line(r, "timezone")
    # Secrets: where from, masked, never printed.
    assert "set (config file): sk-…89, 29 chars" in line(r, "provider.apiKey")
    for secret in (API_KEY, fakes.telegram.token, fakes.feishu.app_secret):
        assert secret not in r.output


def test_json_has_every_check_with_its_figures(home: Path, fakes: Fakes) -> None:
    write_config(home, healthy_config(fakes))
    make_data_files(home)
    r = doctor("--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["ok"] is True and doc["home"] == str(home) and doc["configFile"] == str(home / "config.json")
    c = checks(r)
    assert {c["status"] for c in doc["checks"]} == {"ok"}
    assert c["llm"]["data"]["via"] == "models" and c["llm"]["data"]["latency_ms"] >= 0
    assert c["memory.db"]["data"]["version"] == c["memory.db"]["data"]["expected_version"] == len(MIGRATIONS)
    assert c["memory.db"]["data"]["bytes"] > 0
    assert c["telegram"]["data"]["username"] == "myclaw_bot"
    assert API_KEY not in r.stdout


def test_an_endpoint_without_models_is_asked_for_one_token(home: Path, fakes: Fakes) -> None:
    fakes.llm.models = None
    doc = healthy_config(fakes)
    write_config(home, doc)
    r = doctor("--json")
    assert r.exit_code == 0, r.output
    llm = checks(r)["llm"]
    assert llm["status"] == "ok" and llm["data"]["via"] == "completion"
    assert "answered a 1-token completion with fake-model" in llm["message"]
    assert fakes.llm.requests[-1]["max_tokens"] == 1


def test_a_model_the_provider_does_not_list_is_a_warning(home: Path, fakes: Fakes) -> None:
    doc = healthy_config(fakes)
    doc["agent"]["model"] = "gpt-4o-mnii"
    write_config(home, doc)
    r = doctor()
    assert r.exit_code == 0, r.output  # a warning: some providers serve more than they list
    assert line(r, "llm").startswith("warning ")
    assert "does not list the model gpt-4o-mnii (1 listed) -> check agent.model" in line(r, "llm")


def test_a_fallback_model_the_provider_does_not_list_names_the_fallback_setting(home: Path, fakes: Fakes) -> None:
    """config.example.json's fallback, gpt-4.1-mini, kept with another
    provider: the warning said "check agent.model / memory.model", both
    right, and the operator looked for the wrong thing."""
    doc = healthy_config(fakes)
    doc["agent"]["fallbacks"] = [{"model": "gpt-4.1-mini", "provider": None}]
    write_config(home, doc)
    r = doctor()
    assert r.exit_code == 0, r.output
    assert "does not list the model gpt-4.1-mini (1 listed) -> check agent.fallbacks[0].model" in line(r, "llm")
    assert "agent.model" not in line(r, "llm").split("->")[1].replace("agent.fallbacks[0].model", "")


# -- what goes wrong ------------------------------------------------------------------


def test_a_wrong_api_key_is_named_and_never_printed(home: Path, fakes: Fakes) -> None:
    write_config(home, healthy_config(fakes))
    wrong = "sk-wrong-key-abcdefghijklmnop"
    r = doctor(MYCLAW_PROVIDER_API_KEY=wrong)
    assert r.exit_code == 1, r.output
    assert line(r, "llm").startswith("error    llm ")
    assert line(r, "llm").endswith(
        f" {fakes.llm.url}: the key was refused (HTTP 401: Incorrect API key provided) -> check provider.apiKey"
    )
    assert "set (env MYCLAW_PROVIDER_API_KEY): sk-…op, 29 chars" in line(r, "provider.apiKey")
    # The memory model and the embeddings use the same key: both refused too.
    assert "the key was refused" in line(r, "embedding")
    assert wrong not in r.output
    assert wrong not in doctor("--json", MYCLAW_PROVIDER_API_KEY=wrong).output


def test_a_separate_memory_provider_is_checked_on_its_own(home: Path, fakes: Fakes) -> None:
    doc = healthy_config(fakes)
    doc["memory"]["provider"] = {"baseUrl": fakes.llm.url, "apiKey": "sk-memory-wrong-0123456789"}
    doc["memory"]["model"] = "fake-model"
    write_config(home, doc)
    r = doctor()
    assert r.exit_code == 1, r.output
    assert line(r, "llm").startswith("ok ")
    memory = line(r, "memory llm")
    assert "the key was refused (HTTP 401" in memory and "-> check memory.provider.apiKey" in memory
    assert "-> check memory.provider.apiKey" in line(r, "embedding")  # embeddings go to the memory provider
    assert "set (config file): sk-…89, 26 chars" in line(r, "memory.provider.apiKey")
    assert "sk-memory-wrong-0123456789" not in r.output


def test_wrong_channel_credentials_are_named(home: Path, fakes: Fakes) -> None:
    write_config(home, healthy_config(fakes))
    token = "123456789:AAwrongTokenForDoctor_abcdefghijk"
    r = doctor(MYCLAW_TELEGRAM_TOKEN=token, MYCLAW_FEISHU_APP_SECRET="wrong-secret-0123456789")
    assert r.exit_code == 1, r.output
    tg = line(r, "telegram")
    assert "Telegram refused the bot token (HTTP 401: Unauthorized) -> check channels.telegram.token" in tg
    assert "Feishu refused the app credentials (code 10014: app secret invalid)" in line(r, "feishu")
    assert line(r, "feishu-ws").startswith("skipped ")  # its refusal would only repeat that one
    assert token not in r.output and "wrong-secret-0123456789" not in r.output


def test_an_app_without_long_connection_events_is_named_with_where_to_enable_them(home: Path, fakes: Fakes) -> None:
    fakes.feishu.ws_refusal = (514, "auth failed: long connection not enabled for this app")
    write_config(home, healthy_config(fakes))
    r = doctor()
    assert r.exit_code == 1, r.output
    assert line(r, "feishu").startswith("ok ")  # the credentials themselves work
    ws = line(r, "feishu-ws")
    assert ws.startswith("error ")
    assert "the long connection endpoint refused the app (code 514: auth failed: long connection not enabled" in ws
    assert "-> in the Feishu developer console" in ws and "enable 'Use long connection to receive events'" in ws
    assert "or set channels.feishu.mode to webhook" in ws
    assert checks(doctor("--json"))["feishu-ws"]["data"]["code"] == 514
    assert fakes.feishu.app_secret not in r.output
    # Busy is not the setup's fault: a warning, the SDK retries.
    fakes.feishu.ws_refusal = (1, "system busy")
    r = doctor()
    assert r.exit_code == 0, r.output
    assert line(r, "feishu-ws").startswith("warning ") and "busy (code 1: system busy)" in line(r, "feishu-ws")
    # A webhook needs no long connection: not asked.
    doc = healthy_config(fakes)
    doc["channels"]["feishu"].update(mode="webhook", verificationToken="verify-token-0123456789")
    write_config(home, doc)
    calls = fakes.feishu.requests.count(("POST", "/callback/ws/endpoint"))
    r = doctor()
    assert not any(x[9:].startswith("feishu-ws ") for x in r.stdout.splitlines())
    assert fakes.feishu.requests.count(("POST", "/callback/ws/endpoint")) == calls


def test_an_app_without_the_chat_scope_is_told_which_scope_to_grant(home: Path, fakes: Fakes) -> None:
    """Without im:chat:readonly every group title lookup is refused
    (99991672): a warning, not an error (replies go out), naming the scope."""
    fakes.feishu.chat_permission = False
    write_config(home, healthy_config(fakes))
    r = doctor()
    assert r.exit_code == 0, r.output
    groups = line(r, "feishu-groups")
    assert groups.startswith("warning ") and "may not read group information (code 99991672" in groups
    assert "groups are shown by id" in groups and "-> grant im:chat:readonly" in groups
    assert checks(doctor("--json"))["feishu-groups"]["data"]["code"] == 99991672
    # Credentials refused: not asked (its refusal would say nothing new).
    r = doctor(MYCLAW_FEISHU_APP_SECRET="wrong-secret-0123456789")
    assert line(r, "feishu-groups").startswith("skipped ")


def test_an_unreachable_url_is_named(home: Path, fakes: Fakes) -> None:
    doc = healthy_config(fakes)
    doc["provider"]["baseUrl"] = f"http://127.0.0.1:{closed_port()}/v1"
    doc["channels"]["telegram"]["baseUrl"] = f"http://127.0.0.1:{closed_port()}/bot"
    write_config(home, doc)
    r = doctor("--timeout", "2")
    assert r.exit_code == 1, r.output
    assert f"{doc['provider']['baseUrl']} is unreachable (Connection refused)" in line(r, "llm")
    assert "-> check provider.baseUrl and that the server runs" in line(r, "llm")
    tg = line(r, "telegram")
    assert f"{doc['channels']['telegram']['baseUrl']}<token>/getMe is unreachable" in tg
    assert fakes.telegram.token not in r.output


def test_a_slow_endpoint_is_cut_short_and_named(home: Path, fakes: Fakes) -> None:
    # 1 s, not 0.3: the chat endpoint must answer within it, and on a loaded
    # machine a loopback answer took longer than 0.3 s.
    fakes.llm.embedding_delay = 2.5
    write_config(home, healthy_config(fakes))
    r = doctor("--timeout", "1")
    assert r.exit_code == 1, r.output
    assert f"{fakes.llm.url} did not answer within 1 s" in line(r, "embedding")
    assert line(r, "llm").startswith("ok ")


def test_a_malformed_config_is_named_with_the_gateways_own_words(home: Path, fakes: Fakes) -> None:
    doc = healthy_config(fakes)
    doc["memory"]["extraction"] = {"quietGap": "soon"}
    write_config(home, doc)
    with pytest.raises(ConfigError) as raised:
        load_config(home / "config.json")
    r = doctor()
    assert r.exit_code == 1, r.output
    assert "memory.extraction.quietGap: invalid duration 'soon'" in str(raised.value)
    [config] = [c for c in json.loads(doctor("--json").stdout)["checks"] if c["name"] == "config"]
    assert config["status"] == "error" and config["message"] == str(raised.value)
    assert "memory.extraction.quietGap: invalid duration 'soon'" in r.stdout
    # What does not need the config is still checked; the rest says why not.
    assert "gateway.db" in r.stdout and line(r, "endpoints").startswith("skipped ")
    assert fakes.llm.requests == [] and API_KEY not in r.output


def test_a_bad_secret_settings_error_keeps_its_words_and_hides_only_the_value(home: Path, fakes: Fakes) -> None:
    """The redaction of every line took "gateway.admin.token: must be at
    least 16 characters" for a token written down and showed "token:
    [redacted] be at least 16 characters" (and "apiKey: [redacted] should be
    a valid string"): the field's name is no secret, its words no value."""
    doc = healthy_config(fakes)
    doc["gateway"]["admin"] = {"enabled": True, "token": "short-pw"}
    doc["memory"]["provider"] = {"apiKey": 12345678}
    write_config(home, doc)
    with pytest.raises(ConfigError) as raised:
        load_config(home / "config.json")
    r = doctor()
    assert r.exit_code == 1, r.output
    for said in ("gateway.admin.token: must be at least 16 characters", "memory.provider.apiKey: Input should be"):
        assert said in str(raised.value) and said in r.stdout, r.stdout
    [config] = [c for c in json.loads(doctor("--json").stdout)["checks"] if c["name"] == "config"]
    assert config["message"] == str(raised.value)
    assert "short-pw" not in r.output and "12345678" not in r.output and "[redacted]" not in r.output


def test_a_placeholder_left_from_the_example_is_an_error(home: Path, fakes: Fakes) -> None:
    doc = healthy_config(fakes)
    doc["provider"]["apiKey"] = "sk-your-key"
    write_config(home, doc)
    r = doctor("--offline")
    assert r.exit_code == 1
    assert "still the placeholder from config.example.json (config file)" in line(r, "provider.apiKey")


def test_the_examples_allow_list_left_in_is_an_error(home: Path, fakes: Fakes) -> None:
    doc = healthy_config(fakes)
    doc["channels"]["telegram"]["allowFrom"] = ["your_username", "123456789", "42"]
    write_config(home, doc)
    r = doctor("--offline")
    assert r.exit_code == 1
    got = line(r, "telegram allowFrom")
    assert got.startswith("error ")
    assert got.endswith('still lists config.example.json\'s "your_username", "123456789": whoever has that name '
                        "or id can talk to the bot -> put your users' ids or names in channels.telegram.allowFrom")


def test_the_examples_identities_left_in_are_a_warning(home: Path, fakes: Fakes) -> None:
    # config.example.json maps telegram:123456789 to "alice": a real account
    # with that id would share memory with whoever the operator calls alice.
    doc = healthy_config(fakes)
    doc["memory"] = {"identities": {"alice": ["telegram:123456789", "feishu:ou_xxxxxxxx"], "dana": ["telegram:42"]}}
    write_config(home, doc)
    r = doctor("--offline")
    assert r.exit_code == 0, r.output
    got = line(r, "memory.identities")
    assert got.startswith("warning ") and "telegram:123456789" in got and "feishu:ou_xxxxxxxx" in got, got
    assert "telegram:42" not in got and "remove" in got, got
    doc["memory"] = {"identities": {"dana": ["telegram:42"]}}
    write_config(home, doc)
    assert "memory.identities" not in doctor("--offline").output


def test_risky_settings_are_warnings(home: Path, fakes: Fakes) -> None:
    doc = healthy_config(fakes)
    doc["channels"]["telegram"]["allowFrom"] = []
    doc["channels"]["feishu"]["mode"] = "webhook"
    write_config(home, doc)
    r = doctor("--offline")
    assert r.exit_code == 1, r.output
    assert line(r, "telegram allowFrom").startswith("warning ")
    assert "anyone who finds the bot can talk to it" in line(r, "telegram allowFrom")
    assert "mode=webhook without verificationToken or encryptKey" in line(r, "feishu webhook")



def test_the_memory_pages_token_is_listed_with_the_other_secrets_and_never_printed(home: Path, fakes: Fakes) -> None:
    # The page's token was the one secret the doctor did not mention, enabled or not.
    doc = healthy_config(fakes)
    write_config(home, doc)
    assert not any(x[9:].startswith("gateway.admin.token ") for x in doctor("--offline").stdout.splitlines())
    doc["gateway"]["admin"] = {"enabled": True, "token": "admin-token-0123456789abcdef"}
    write_config(home, doc)
    r = doctor("--offline")
    assert line(r, "gateway.admin.token").startswith("ok ")
    assert "set (config file): adm…ef, 28 chars" in line(r, "gateway.admin.token")
    assert "admin-token-0123456789abcdef" not in r.output
    doc["gateway"]["admin"]["token"] = " admin-token-0123456789abcdef"
    write_config(home, doc)
    assert "with spaces or a newline around it" in line(doctor("--offline"), "gateway.admin.token")


def test_a_webhook_with_a_token_but_no_encrypt_key_is_a_warning(home: Path, fakes: Fakes) -> None:
    """Without an encrypt key Feishu neither signs nor encrypts: the token
    rides in every body, so whoever reads one delivery (a proxy's log) can
    post events as any user, and replay them."""
    doc = healthy_config(fakes)
    doc["channels"]["feishu"].update(mode="webhook", verificationToken="verify-token-0123456789")
    write_config(home, doc)
    r = doctor("--offline")
    warned = line(r, "feishu webhook")
    assert warned.startswith("warning ") and "not signed" in warned and "encryptKey" in warned
    assert "verify-token-0123456789" not in r.output
    doc["channels"]["feishu"]["encryptKey"] = "encrypt-key-0123456789"
    write_config(home, doc)
    assert not any(x[9:].startswith("feishu webhook ") for x in doctor("--offline").stdout.splitlines())

def test_a_corrupt_data_file_is_an_error_and_left_as_it_was(home: Path, fakes: Fakes) -> None:
    write_config(home, healthy_config(fakes))
    make_data_files(home)
    memory_db = home / "data" / "memory.db"
    with sqlite3.connect(memory_db) as conn:  # room for damage past the first pages
        conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", [(f"k{i}", "x" * 500) for i in range(200)])
    conn.close()
    raw = bytearray(memory_db.read_bytes())
    page = 4096
    raw[3 * page : 3 * page + 64] = b"\xff" * 64  # a b-tree page header and cell pointers
    memory_db.write_bytes(bytes(raw))
    (home / "data" / "gateway.db").write_bytes(b"this is not a database, but it may be someone's only copy" * 100)
    before = snapshot(home / "data")
    r = doctor("--offline")
    assert r.exit_code == 1, r.output
    assert line(r, "memory.db").startswith("error ")
    assert "-> stop the gateway" in line(r, "memory.db")
    assert (f"{home / 'data' / 'gateway.db'}: cannot open it as a myclaw database (file is not a database) "
            "-> stop the gateway, then restore it from a backup or move it aside") in line(r, "gateway.db")
    assert line(r, "cron.db").startswith("ok ")
    assert snapshot(home / "data") == before


def test_a_data_file_from_a_newer_myclaw_is_a_downgrade_error(home: Path, fakes: Fakes) -> None:
    write_config(home, healthy_config(fakes))
    make_data_files(home)
    with sqlite3.connect(home / "data" / "cron.db") as conn:
        conn.execute("PRAGMA user_version = 99")
    conn.close()
    r = doctor("--offline", "--json")
    assert r.exit_code == 1
    cron = checks(r)["cron.db"]
    assert cron["status"] == "error"
    assert f"schema version 99 is newer than this myclaw ({len(CRON_MIGRATIONS)})" in cron["message"]
    assert "a downgrade is not supported" in cron["fix"]
    assert cron["data"]["version"] == 99


def test_offline_calls_no_endpoint(home: Path, fakes: Fakes) -> None:
    write_config(home, healthy_config(fakes))
    r = doctor("--offline")
    assert r.exit_code == 0, r.output
    assert line(r, "endpoints").startswith("skipped  endpoints ") and line(r, "endpoints").endswith(" --offline")
    for name in ("llm", "embedding", "telegram", "feishu"):
        assert not any(x[9:].startswith(name + " ") for x in r.stdout.splitlines())
    assert fakes.llm.requests == [] and fakes.llm.embedding_requests == []
    assert fakes.telegram.calls == [] and fakes.feishu.requests == []


def test_offline_doctor_reports_the_scope_the_gateway_was_refused(home: Path, fakes: Fakes) -> None:
    """Offline, Feishu is not asked; the gateway's record of its last
    refusal (gateway.db) says what the live check would."""
    write_config(home, healthy_config(fakes))
    make_data_files(home)
    assert not any(x[9:].startswith("feishu-groups ") for x in doctor("--offline").stdout.splitlines())
    with closing(sqlite3.connect(home / "data" / "gateway.db")) as conn, conn:
        conn.execute("INSERT INTO refused_permissions (channel, scope, refused_at) VALUES (?, ?, ?)",
                     ("feishu", "im:chat:readonly", "2026-03-01T12:00:00Z"))
    r = doctor("--offline")
    assert r.exit_code == 0, r.output
    groups = line(r, "feishu-groups")
    assert groups.startswith("warning ") and "Feishu refused the gateway im:chat:readonly" in groups
    assert "2026-03-01T12:00:00Z" in groups and "-> grant im:chat:readonly" in groups
    assert checks(doctor("--offline", "--json"))["feishu-groups"]["data"] == {
        "scope": "im:chat:readonly", "refused_at": "2026-03-01T12:00:00Z"}
    assert fakes.feishu.requests == []
    doc = healthy_config(fakes)
    doc["channels"]["feishu"]["enabled"] = False  # not run any more: its old refusal says nothing
    write_config(home, doc)
    assert not any(x[9:].startswith("feishu-groups ") for x in doctor("--offline").stdout.splitlines())


# -- changes nothing, safe while the gateway runs ---------------------------------------


def test_doctor_creates_and_changes_no_data_file(home: Path, fakes: Fakes) -> None:
    write_config(home, healthy_config(fakes))
    r = doctor()  # nothing there yet: nothing is made either
    assert r.exit_code == 0, r.output
    assert not (home / "data").exists()
    assert "not created yet" in line(r, "memory.db")
    make_data_files(home)
    before = snapshot(home / "data")
    assert set(before) == {"memory.db", "memory.buffer.db", "gateway.db", "cron.db"}
    assert doctor().exit_code == 0
    assert doctor("--json").exit_code == 0
    assert snapshot(home / "data") == before  # no -wal/-shm, no byte, no mtime


def test_a_gateway_writing_meanwhile_neither_blocks_doctor_nor_is_blocked(home: Path, fakes: Fakes) -> None:
    write_config(home, healthy_config(fakes))
    make_data_files(home)
    writer = sqlite3.connect(home / "data" / "gateway.db", isolation_level=None, timeout=0.5)
    try:
        writer.execute("PRAGMA journal_mode = WAL")
        writer.execute("BEGIN IMMEDIATE")  # the gateway in the middle of a write
        writer.execute("INSERT INTO sessions (key, channel, chat_id, started_at) VALUES ('t:1', 't', '1', 'now')")
        r = doctor("--offline")
        assert r.exit_code == 0, r.output
        assert f"quick_check ok, schema v{len(GATEWAY_MIGRATIONS)}; open in another process" in line(r, "gateway.db")
        writer.execute("COMMIT")  # doctor holds no lock
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("COMMIT")
    finally:
        writer.close()


def test_a_running_gateway_is_seen_by_its_lock_and_its_port(home: Path, fakes: Fakes) -> None:
    import os

    from gateway.datalock import GatewayLock

    write_config(home, healthy_config(fakes))
    r = doctor("--offline")
    assert line(r, "gateway").endswith(" no gateway is running on this home")
    lock = GatewayLock(home / "data")  # what `myclaw gateway` holds while it runs
    lock.acquire()
    server = HttpServer("127.0.0.1", 0)
    fakes.run(server.start())
    try:
        r = doctor("--offline")
        assert r.exit_code == 0, r.output
        assert line(r, "gateway").endswith(f" a gateway is running on this home (pid {os.getpid()})")
        doc = healthy_config(fakes)
        doc["gateway"]["port"] = server.port
        doc["gateway"]["admin"] = {"enabled": True, "token": "admin-token-0123456789abcdef"}
        write_config(home, doc)
        started = (home / "data" / "gateway.lock").stat().st_mtime
        os.utime(home / "config.json", (started - 1, started - 1))  # the config the gateway started with
        r = doctor("--offline")
        assert r.exit_code == 0, r.output
        assert f"(pid {os.getpid()}); http://127.0.0.1:{server.port}/healthz answers in" in line(r, "gateway")
        assert "admin-token-0123456789abcdef" not in r.output
        # Its /healthz reports trouble: the doctor passes it on.
        alive = [True]
        server.health = Health(clock=ManualClock("2026-03-01T12:00:00Z"), bus=MessageBus(10),
                               loop_running=lambda: alive[0], stats=None,
                               channels={"telegram": object()}, failed={"feishu": "token rejected"})
        r = doctor("--offline")
        assert r.exit_code == 0, r.output
        assert "but it is degraded: channel feishu failed (see the log) -> see the gateway's log" in line(r, "gateway")
        alive[0] = False
        r = doctor("--offline")
        assert r.exit_code == 1, r.output
        assert "but it is down: the process loop has stopped: messages are not answered" in line(r, "gateway")
        server.health = None
        lock.release()
        # A gateway of another home on the port: this one could not listen there.
        r = doctor("--offline")
        assert r.exit_code == 1, r.output
        assert (f"no gateway is running on this home, but 127.0.0.1:{server.port} is taken by another myclaw "
                "gateway (another MYCLAW_HOME?)") in line(r, "gateway")
        # Something else on the port.
        doc["gateway"]["port"] = fakes.llm.port
        write_config(home, doc)
        r = doctor("--offline")
        assert r.exit_code == 1, r.output
        assert f"127.0.0.1:{fakes.llm.port} is taken by something else (HTTP 404)" in line(r, "gateway")
    finally:
        lock.release()
        fakes.run(server.stop())


def test_a_config_changed_after_the_gateway_started_asks_for_a_restart(home: Path, fakes: Fakes) -> None:
    # The operator turns the memory page on and runs doctor before restarting:
    # the running gateway serves what the file said when it started.
    import os

    from gateway.datalock import GatewayLock

    write_config(home, healthy_config(fakes))
    lock = GatewayLock(home / "data")
    lock.acquire()
    try:
        started = (home / "data" / "gateway.lock").stat().st_mtime
        os.utime(home / "config.json", (started - 60, started - 60))
        assert line(doctor("--offline"), "gateway").startswith("ok")  # read before the start: nothing to say
        doc = healthy_config(fakes)
        with socket.socket() as probe:  # a port nothing listens on
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        doc["gateway"]["port"] = port
        doc["gateway"]["admin"] = {"enabled": True, "token": "admin-token-0123456789abcdef"}
        write_config(home, doc)
        os.utime(home / "config.json", (started + 60, started + 60))
        r = doctor("--offline")
        assert r.exit_code == 0, r.output
        said = line(r, "gateway")
        assert said.startswith("warning") and f"(pid {os.getpid()})" in said, said
        assert "config.json changed after it started" in said and "restart the gateway to apply it" in said, said
        assert "may have failed" not in said, said
    finally:
        lock.release()


def test_a_port_held_by_something_that_speaks_no_http_is_not_called_free(home: Path, fakes: Fakes) -> None:
    doc = healthy_config(fakes)
    doc["gateway"]["admin"] = {"enabled": True, "token": "admin-token-0123456789abcdef"}
    with socket.socket() as taken:  # a database, an SSH tunnel...: it never answers HTTP
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        doc["gateway"]["port"] = port = taken.getsockname()[1]
        write_config(home, doc)
        r = doctor("--offline", "--timeout", "0.5")
    assert r.exit_code == 1, r.output
    assert (f"no gateway is running on this home, but 127.0.0.1:{port} is taken: `myclaw gateway` could not "
            "listen there") in line(r, "gateway")
    assert "change gateway.port, or stop what uses it" in line(r, "gateway")
    # Free again: said so.
    write_config(home, doc)
    r = doctor("--offline", "--timeout", "0.5")
    assert r.exit_code == 0, r.output
    assert line(r, "gateway").endswith(f"no gateway is running on this home; 127.0.0.1:{port} is free")


def test_a_gateway_host_that_is_not_this_machines_is_an_error(home: Path, fakes: Fakes) -> None:
    doc = healthy_config(fakes)
    doc["gateway"].update(host="192.0.2.7", port=closed_port(),  # TEST-NET-1: no machine's address
                          admin={"enabled": True, "token": "admin-token-0123456789abcdef"})
    write_config(home, doc)
    r = doctor("--offline", "--timeout", "0.5")
    assert r.exit_code == 1, r.output
    assert "192.0.2.7 is not an address of this machine: `myclaw gateway` could not listen there" in line(r, "gateway")
    assert "set gateway.host to one of its addresses (127.0.0.1, or 0.0.0.0 for all)" in line(r, "gateway")


def test_each_fallback_endpoint_is_checked_like_the_primary(home: Path, fakes: Fakes) -> None:
    doc = healthy_config(fakes)
    doc["agent"]["fallbacks"] = [
        {"model": "fake-model-small"},  # on the primary's endpoint: asked there, with its model
        {"model": "fake-model", "provider": {"baseUrl": fakes.llm.url + "/"}},  # its own key, from the environment
    ]
    write_config(home, doc)
    wrong = "sk-fallback-wrong-0123456789"
    r = doctor(MYCLAW_AGENT_FALLBACKS_1_API_KEY=wrong)
    assert r.exit_code == 1, r.output
    assert "does not list the model fake-model-small (1 listed)" in line(r, "llm")
    fb = line(r, "agent.fallbacks[1]")
    assert fb.startswith("error ") and "the key was refused (HTTP 401" in fb
    assert fb.endswith("-> check agent.fallbacks[1].provider.apiKey")
    assert "set (env MYCLAW_AGENT_FALLBACKS_1_API_KEY): sk-…89, 28 chars" in line(
        r, "agent.fallbacks[1].provider.apiKey")
    assert "from the environment: MYCLAW_AGENT_FALLBACKS_1_API_KEY" in line(r, "config")
    assert wrong not in r.output and wrong not in doctor("--json", MYCLAW_AGENT_FALLBACKS_1_API_KEY=wrong).output
    fakes.llm.models = ["fake-model", "fake-model-small"]
    r = doctor(MYCLAW_AGENT_FALLBACKS_1_API_KEY=API_KEY)
    assert line(r, "llm").startswith("ok ") and "model fake-model, fake-model-small listed" in line(r, "llm")
    # Same URL and key as the primary now: one endpoint, asked once for all its models.
    assert not [x for x in r.stdout.splitlines() if x[9:].startswith("agent.fallbacks[1] ")]


def test_an_unreachable_fallback_is_named_as_a_fallback_with_its_model_and_the_fixes(home: Path, fakes: Fakes) -> None:
    doc = healthy_config(fakes)
    url = f"http://127.0.0.1:{closed_port()}/v1"  # a local server (Ollama, say) that is not running
    doc["agent"]["fallbacks"] = [{"model": "qwen2.5:14b", "provider": {"baseUrl": url}}]
    write_config(home, doc)
    r = doctor()
    assert r.exit_code == 1, r.output
    fb = line(r, "agent.fallbacks[0]")
    assert fb.startswith("error ") and f"fallback model qwen2.5:14b: {url} is unreachable (Connection refused)" in fb
    assert "when the chat model fails, replies cannot fall back to it" in fb
    assert fb.endswith(f"-> start the server at {url}, correct agent.fallbacks[0].provider.baseUrl, "
                       "or remove agent.fallbacks[0]")
    assert line(r, "llm").startswith("ok ")  # the primary is fine, and said so apart


def test_the_examples_fallbacks_point_at_no_server_that_is_not_there(home: Path, fakes: Fakes) -> None:
    """config.example.json as copied, with only the provider filled in: no
    fallback of its own endpoint (a local server the operator never set
    up) for doctor to fail on."""
    doc = json.loads((Path(__file__).resolve().parents[2] / "config.example.json").read_text(encoding="utf-8"))
    for fb in doc["agent"]["fallbacks"] or []:
        assert fb.get("provider") is None, fb  # on the provider filled in, nothing else
    doc["provider"].update(baseUrl=fakes.llm.url, apiKey=API_KEY)
    doc["agent"]["model"] = "fake-model"
    fakes.llm.models = ["fake-model", *(fb["model"] for fb in doc["agent"]["fallbacks"] or [])]
    doc["memory"].update(model="fake-model")
    write_config(home, doc)
    r = doctor()
    assert not [x for x in r.stdout.splitlines() if "fallbacks[" in x and not x.startswith("ok ")], r.output
    assert line(r, "llm").startswith("ok "), r.output


def test_transcription_is_checked_without_sending_audio(home: Path, fakes: Fakes) -> None:
    doc = healthy_config(fakes)
    doc["agent"]["transcription"] = {"enabled": True, "model": "whisper-1"}
    write_config(home, doc)
    # Its model unknown there: named, with the setting to fix.
    r = doctor()
    assert r.exit_code == 0, r.output
    t = line(r, "transcription")
    assert t.startswith("warning ") and "does not list the transcription model whisper-1 (1 listed)" in t
    assert t.endswith("-> check agent.transcription.model")
    fakes.llm.models = ["fake-model", "whisper-1"]
    r = doctor()
    assert r.exit_code == 0, r.output
    assert line(r, "transcription").startswith("ok ") and "transcription model whisper-1 listed" in r.stdout
    # A server without /models: a request without a file, which it refuses once it took the key.
    fakes.llm.models = None
    c = checks(doctor("--json"))["transcription"]
    assert c["status"] == "ok" and c["data"]["via"] == "probe" and "checked by the first voice message" in c["message"]
    assert fakes.llm.transcriptions == []  # no audio was ever sent
    # Its own provider: a wrong key, and an unreachable URL, each named with its setting.
    wrong = "sk-voice-wrong-0123456789"
    doc["agent"]["transcription"]["provider"] = {"baseUrl": fakes.llm.url, "apiKey": wrong}
    write_config(home, doc)
    r = doctor()
    assert r.exit_code == 1, r.output
    t = line(r, "transcription")
    assert "the key was refused (HTTP 401" in t and t.endswith("-> check agent.transcription.provider.apiKey")
    assert "set (config file): sk-…89, 25 chars" in line(r, "agent.transcription.provider.apiKey")
    assert wrong not in r.output
    doc["agent"]["transcription"]["provider"]["baseUrl"] = f"http://127.0.0.1:{closed_port()}/v1"
    write_config(home, doc)
    t = line(doctor("--timeout", "2"), "transcription")
    assert t.startswith("error ") and "is unreachable (Connection refused)" in t
    assert t.endswith("-> check agent.transcription.provider.baseUrl and that the server runs")
    # Off: not asked.
    doc["agent"]["transcription"]["enabled"] = False
    write_config(home, doc)
    assert "transcription" not in checks(doctor("--json"))


def test_transcription_on_the_chat_provider_points_there(home: Path, fakes: Fakes) -> None:
    doc = healthy_config(fakes)
    doc["agent"]["transcription"] = {"enabled": True}
    write_config(home, doc)
    r = doctor(MYCLAW_PROVIDER_API_KEY="sk-wrong-key-abcdefghijklmnop")
    t = line(r, "transcription")
    assert "-> check provider.apiKey (agent.transcription has no provider of its own: it uses this one)" in t


# -- permissions of an older install ---------------------------------------------


def test_a_config_holding_keys_that_others_can_read_is_named_with_the_chmod_to_run(home: Path, fakes: Fakes) -> None:
    """`cp config.example.json ~/.myclaw/config.json` under the usual umask
    makes it 0644: every account on the machine can read the bot token and
    the API key in it. Doctor says which keys and how to fix it; it changes
    nothing itself, and the file's words never reach its output."""
    write_config(home, healthy_config(fakes), mode=0o644)
    before = snapshot(home)
    r = doctor("--offline")
    assert r.exit_code == 0, r.output  # a warning: the bot works
    hit = line(r, "config.json permissions")
    assert hit.startswith("warning ")
    assert "holds provider.apiKey, channels.telegram.token, channels.feishu.appSecret" in hit
    assert hit.endswith(f"-> chmod 600 {home / 'config.json'} (or move the keys to their MYCLAW_* variables)")
    assert API_KEY not in r.stdout and fakes.telegram.token not in r.stdout
    assert snapshot(home) == before
    (home / "config.json").chmod(0o600)
    assert line(doctor("--offline"), "config.json permissions").startswith("ok ")


def test_a_readable_config_whose_keys_come_from_the_environment_is_not_warned_about(home: Path, fakes: Fakes) -> None:
    """The keys in MYCLAW_* variables: the file holds nothing secret, so its
    mode is the operator's business."""
    doc = healthy_config(fakes)
    del doc["provider"]["apiKey"]
    doc["channels"]["feishu"]["enabled"] = False
    del doc["channels"]["feishu"]["appSecret"]
    del doc["channels"]["telegram"]["token"]
    doc["memory"]["embedding"]["enabled"] = False
    write_config(home, doc, mode=0o644)
    r = doctor("--offline", MYCLAW_PROVIDER_API_KEY=API_KEY, MYCLAW_TELEGRAM_TOKEN=fakes.telegram.token)
    assert "set (env MYCLAW_PROVIDER_API_KEY)" in line(r, "provider.apiKey")
    assert "config.json permissions" not in r.stdout
    assert r.stdout.splitlines()[-1] == "0 error(s), 0 warning(s)", r.stdout


def test_data_files_others_can_read_are_named_with_the_chmod_to_run(home: Path, fakes: Fakes) -> None:
    """An install from before data files were made owner-only keeps its 0644
    files (myclaw never changes an existing file's mode): doctor names each
    one and the command that fixes them, and changes nothing itself."""
    write_config(home, healthy_config(fakes))
    make_data_files(home)
    data = home / "data"
    assert doctor("--offline").stdout.splitlines()[-1] == "0 error(s), 0 warning(s)"  # new files: owner-only
    old = [data / "memory.db", data / "gateway.db"]
    for p in old:
        p.chmod(0o644)
    (data / "cron.db").chmod(0o660)  # group-readable is readable by others too
    r = doctor("--offline")
    assert r.exit_code == 0, r.output  # a warning, not an error: the bot works
    hit = line(r, "data permissions")
    assert hit.startswith("warning ")
    named = [data / "memory.db", data / "gateway.db", data / "cron.db"]
    for p in named:
        assert str(p) in hit
    assert str(data / "memory.buffer.db") not in hit.split(" -> ")[0]  # still 0600: not named
    assert hit.endswith(f"-> chmod go-rwx {' '.join(str(p) for p in named)}")
    assert {p.name: p.stat().st_mode & 0o777 for p in named} == {"memory.db": 0o644, "gateway.db": 0o644, "cron.db": 0o660}
    doc = checks(doctor("--offline", "--json"))["data permissions"]
    assert doc["status"] == "warning" and doc["data"]["files"] == [str(p) for p in named]


def test_a_wal_file_others_can_read_is_named_too(home: Path, fakes: Fakes) -> None:
    """The -wal file holds the latest writes in clear: its mode counts as the
    database's own."""
    write_config(home, healthy_config(fakes))
    make_data_files(home)
    wal = home / "data" / "memory.db-wal"
    wal.write_bytes(b"")
    wal.chmod(0o644)
    hit = line(doctor("--offline"), "data permissions")
    assert hit.startswith("warning ") and hit.endswith(f"-> chmod go-rwx {wal}")


def test_a_data_file_replaced_by_a_directory_is_named_as_such(home: Path, fakes: Fakes) -> None:
    # The one unwritable data file a test run as root can make: root ignores
    # a file's mode, so a read-only memory.db cannot be tested honestly here.
    write_config(home, healthy_config(fakes))
    make_data_files(home)
    gateway_db = home / "data" / "gateway.db"
    gateway_db.unlink()
    gateway_db.mkdir()
    (gateway_db / "kept.txt").write_text("someone's\n", encoding="utf-8")
    r = doctor("--offline")
    assert r.exit_code == 1, r.output
    assert (f"{gateway_db}: is a directory, not a database file: the gateway cannot open it "
            "-> move it aside (the gateway makes a new one at its next start) or restore a backup") in line(r, "gateway.db")
    assert (gateway_db / "kept.txt").read_text(encoding="utf-8") == "someone's\n"


def test_lines_set_aside_are_a_warning_with_the_retry_to_run(home: Path, fakes: Fakes) -> None:
    write_config(home, healthy_config(fakes))
    make_data_files(home)
    buffer = home / "data" / "memory.buffer.db"
    # A v1 buffer (before set-aside) has none, and is read without error.
    with closing(sqlite3.connect(buffer)) as conn:
        conn.execute("ALTER TABLE extraction_buffer DROP COLUMN set_aside_at")
        conn.execute("PRAGMA user_version = 1")
        conn.commit()
    r = doctor("--offline", "--json")
    assert r.exit_code == 0, r.output
    assert "set aside" not in checks(r) and checks(r)["memory.buffer.db"]["status"] == "ok"

    async def seed() -> None:
        engine = await MemoryEngine.open(home / "data" / "memory.db", ManualClock("2026-03-01T12:00:00Z"))
        try:
            await SqliteMemory(engine).buffer([
                Turn(owner=o, channel="telegram", chat_id="1", role="user", content=f"{o}'s long story", message_id=o)
                for o in ("alice", "bob", "carol")
            ])
            await engine.db.write("UPDATE extraction_buffer SET set_aside_at = '2026-03-01T12:05:00Z' "
                                  "WHERE owner != 'carol'")  # as extraction leaves a line it cannot take
        finally:
            await engine.close()

    asyncio.run(seed())
    r = doctor("--offline")
    assert r.exit_code == 0 and "0 error(s), 1 warning(s)" in r.stdout, r.output
    assert "2 lines set aside" in line(r, "set aside") and line(r, "set aside").startswith("warning ")
    assert "myclaw memory retry-set-aside" in line(r, "set aside") and "long story" not in r.output
    c = checks(doctor("--offline", "--json"))["set aside"]
    assert c["data"] == {"lines": 2, "users": 2}

    async def group_line() -> None:  # a group's own line (memory/groupnotes.py): a group, not a third user
        engine = await MemoryEngine.open(home / "data" / "memory.db", ManualClock("2026-03-01T12:00:00Z"))
        try:
            await engine.db.write("UPDATE extraction_buffer SET owner = 'group:telegram:-100900', "
                                  "set_aside_at = '2026-03-01T12:05:00Z' WHERE owner = 'carol'")
        finally:
            await engine.close()

    asyncio.run(group_line())
    assert "3 lines set aside (2 users, 1 group)" in line(doctor("--offline"), "set aside")
    assert checks(doctor("--offline", "--json"))["set aside"]["data"] == {"lines": 3, "users": 2, "groups": 1}


def test_a_held_memory_md_save_is_a_warning_with_what_to_do(home: Path, fakes: Fakes) -> None:
    """A MEMORY.md cut to a fraction in one save is held (memory/migrate.py);
    the operator learns it here: which file, how many facts, never their words."""
    from memory.migrate import migrate_files

    write_config(home, healthy_config(fakes))
    make_data_files(home)
    mem = home / "ws" / "memory" / "MEMORY.md"
    mem.parent.mkdir(parents=True)

    async def run_migrate(text: str) -> None:
        mem.write_text(text)
        engine = await MemoryEngine.open(home / "data" / "memory.db", ManualClock("2026-03-01T12:00:00Z"))
        try:
            await migrate_files(home / "ws", engine)
        finally:
            await engine.close()

    asyncio.run(run_migrate("".join(f"- secret fact {i}\n" for i in range(10))))
    assert "memory files" not in checks(doctor("--offline", "--json"))
    asyncio.run(run_migrate("- secret fact 0\n- secret fact 1\n"))
    r = doctor("--offline")
    assert r.exit_code == 0 and line(r, "memory files").startswith("warning "), r.output
    assert "MEMORY.md lost 8 of 10 facts in one save at 2026-03-01T12:00:00Z" in line(r, "memory files")
    assert "put its lines back" in r.output and "secret" not in r.output
    c = checks(doctor("--offline", "--json"))["memory files"]
    assert c["data"] == {"held": [{"file": "MEMORY.md", "removed": 8, "facts": 10, "since": "2026-03-01T12:00:00Z"}]}


def test_a_memory_file_whose_save_was_skipped_is_a_warning_with_the_fix(home: Path, fakes: Fakes) -> None:
    """A MEMORY.md save with an unclosed ``<!--`` and a daily file that is
    not UTF-8 are skipped as their files' problems (memory/migrate.py); the
    operator learns it here, by kind and path with the fix, never the
    lines; once a save fixes the file, the warning goes."""
    from memory.migrate import migrate_files

    write_config(home, healthy_config(fakes))
    make_data_files(home)
    mem = home / "workspace" / "memory" / "MEMORY.md"
    day = mem.parent / "2026-02-20.md"
    mem.parent.mkdir(parents=True)

    async def run_migrate() -> None:
        engine = await MemoryEngine.open(home / "data" / "memory.db", ManualClock("2026-03-01T12:00:00Z"))
        try:
            await migrate_files(home / "workspace", engine)  # the one the config names (its default)
        finally:
            await engine.close()

    mem.write_text("- secret fact 0\n")
    asyncio.run(run_migrate())
    assert "skipped memory files" not in checks(doctor("--offline", "--json"))
    mem.write_text("- secret fact 0\n<!-- secret note\n- secret fact 1\n")
    day.write_bytes("- secret day\n".encode() + "caf\u00e9".encode("latin-1"))
    asyncio.run(run_migrate())
    r = doctor("--offline")
    said = line(r, "skipped memory files")
    assert r.exit_code == 0 and said.startswith("warning "), r.output
    assert "MEMORY.md: an unclosed <!-- comment at line 2" in said and "2026-02-20.md: not UTF-8 at line 2" in said
    assert "end the comment with -->" in r.output and "save it as UTF-8" in r.output and "secret" not in r.output
    c = checks(doctor("--offline", "--json"))["skipped memory files"]
    assert c["data"] == {"skipped": [
        {"file": "2026-02-20.md", "kind": "not_utf8", "line": 2, "since": "2026-03-01T12:00:00Z"},
        {"file": "MEMORY.md", "kind": "unclosed_comment", "line": 2, "since": "2026-03-01T12:00:00Z"},
    ]}
    # A file deleted since is not listed, though no import ran to drop its record.
    day.unlink()
    c = checks(doctor("--offline", "--json"))["skipped memory files"]
    assert [s["file"] for s in c["data"]["skipped"]] == ["MEMORY.md"]
    mem.write_text("- secret fact 0\n<!-- secret note -->\n- secret fact 1\n")
    asyncio.run(run_migrate())
    assert "skipped memory files" not in checks(doctor("--offline", "--json"))


def test_memory_vectors_say_how_far_the_embedding_got(home: Path, fakes: Fakes) -> None:
    """An operator who turns hybrid recall on for a gateway with thousands
    of memories sees how many are embedded yet, with which model."""
    import numpy as np

    from memory.vectors import VectorIndex

    doc = healthy_config(fakes)
    write_config(home, doc)
    make_data_files(home)

    async def embed(model: str) -> None:
        engine = await MemoryEngine.open(home / "data" / "memory.db", ManualClock("2026-03-01T12:00:00Z"))
        try:
            index = VectorIndex(engine.db, model)
            await index.store([(p, np.ones(8, dtype=np.float32) / np.sqrt(8)) for p in await index.pending()])
        finally:
            await engine.close()

    r = doctor("--offline")
    assert r.exit_code == 0, r.output
    assert line(r, "memory vectors").startswith("ok ")
    assert "0 of 1 active memories embedded with fake-embed; 1 still to embed" in line(r, "memory vectors")
    asyncio.run(embed("old-model"))  # embedded before, with another model
    r = doctor("--offline")
    assert "0 of 1 active memories embedded with fake-embed; 1 still to embed" in line(r, "memory vectors")
    assert "1 vector of another model or size (unused; each replaced" in line(r, "memory vectors")
    asyncio.run(embed("fake-embed"))
    r = doctor("--offline")
    assert line(r, "memory vectors").endswith("1 of 1 active memories embedded with fake-embed")
    c = checks(doctor("--offline", "--json"))["memory vectors"]
    assert c["data"] == {"model": "fake-embed", "active": 1, "embedded": 1, "other": 0}

    doc["memory"]["embedding"] = {"enabled": False}  # turned off again: nothing lost, nothing breaks
    write_config(home, doc)
    r = doctor("--offline")
    assert r.exit_code == 0, r.output
    assert "1 vector kept while memory.embedding is off" in line(r, "memory vectors")


def test_a_fresh_home_says_it_has_no_data_files_yet_not_that_they_are_private(home: Path, fakes: Fakes) -> None:
    """Before the first start there is nothing to protect: "data files
    readable by you only" read as a check of files that do not exist."""
    write_config(home, healthy_config(fakes))
    hit = line(doctor("--offline"), "data permissions")
    assert hit.startswith("ok ") and "no data files yet" in hit and "readable by you only" not in hit, hit
    make_data_files(home)
    assert "data files readable by you only" in line(doctor("--offline"), "data permissions")
