from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import aiosqlite
import pytest
import structlog

from gateway.logging import configure_logging, error_fields, get_logger


def lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(x) for x in stream.getvalue().splitlines() if x.strip()]


def test_json_lines_when_not_a_tty_with_component() -> None:
    out = io.StringIO()
    configure_logging(stream=out)
    get_logger("memory").info("extracted", facts=3)
    rec = lines(out)[-1]
    assert rec["event"] == "extracted" and rec["component"] == "memory" and rec["facts"] == 3
    assert rec["level"] == "info" and "timestamp" in rec


def test_secret_keys_values_and_shapes_are_redacted() -> None:
    out = io.StringIO()
    configure_logging(stream=out, secrets=["super-secret-app-key"])
    log = structlog.get_logger()
    log.warning(
        "calling provider",
        api_key="sk-abcdefghijklmnop",
        headers={"Authorization": "Bearer abcdefghijk"},
        note="the key is super-secret-app-key, header Bearer zzzzzzzzzz, key sk-live-123456789",
        url="https://api.telegram.org/bot123456:ABCDEFGHIJKLMNOPQRSTUV/getUpdates",
        ws="wss://open.feishu.cn/ws?access_key=abc&ticket=xyz",
        token_count=42,
    )
    text = out.getvalue()
    for secret in ("sk-abcdefghijklmnop", "abcdefghijk", "super-secret-app-key", "zzzzzzzzzz",
                   "sk-live-123456789", "ABCDEFGHIJKLMNOPQRSTUV", "access_key=abc", "ticket=xyz"):
        assert secret not in text
    rec = lines(out)[-1]
    assert rec["api_key"] == "***" and rec["token_count"] == 42  # counts are not secrets


def test_a_group_owner_id_is_logged_by_its_tag_never_its_chat_id() -> None:
    # A chat id is personal data (a private group's, a Feishu oc_ id): any
    # line naming a group's own memory (an extraction's, a compression's
    # owner) names it by channel and tag, as memory/groupowner.py logged_owner.
    from memory.groupowner import logged_owner

    out = io.StringIO()
    configure_logging(stream=out)
    log = get_logger("memory")
    log.error("extraction flush failed; buffer kept", owner="group:telegram:-1001234567", user="telegram:42")
    log.info("owners", owners=["group:feishu:oc_5ad11d72b830411d72b836c20", "alice"], note="for group:telegram:-100777.")
    first, second = lines(out)[-2:]
    assert first["owner"] == logged_owner("group:telegram:-1001234567") and first["owner"].startswith("group:telegram:#")
    assert first["user"] == "telegram:42"  # a person's id as before
    assert second["owners"] == [logged_owner("group:feishu:oc_5ad11d72b830411d72b836c20"), "alice"]
    assert second["note"] == f"for {logged_owner('group:telegram:-100777')}."
    assert "1001234567" not in out.getvalue() and "oc_5ad11d" not in out.getvalue() and "-100777" not in out.getvalue()


def test_stdlib_library_lines_are_redacted_too() -> None:
    out = io.StringIO()
    configure_logging(stream=out, level="DEBUG")
    logging.getLogger("httpx").warning(
        "HTTP Request: POST https://api.telegram.org/bot987654:ZYXWVUTSRQPONMLKJIHGFE/sendMessage \"HTTP/1.1 429\""
    )
    text = out.getvalue()
    assert "ZYXWVUTSRQPONMLKJIHGFE" not in text and "/bot***" in text


def test_logger_created_before_configuration_is_still_redacted() -> None:
    early = get_logger("memory")  # module-level loggers are created at import time
    out = io.StringIO()
    configure_logging(stream=out, secrets=["late-registered-secret"])
    early.info("x", detail="late-registered-secret")
    assert "late-registered-secret" not in out.getvalue()
    assert lines(out)[-1]["component"] == "memory"


def test_no_module_binds_a_logger_eagerly() -> None:
    # `structlog.get_logger().bind(...)` at import time freezes the default
    # processors (no redaction); `structlog.get_logger(key=value)` stays lazy.
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    offenders = [
        str(p.relative_to(root))
        for pkg in ("gateway", "channels", "memory")
        for p in (root / pkg).rglob("*.py")
        if "get_logger().bind(" in p.read_text(encoding="utf-8")
    ]
    assert offenders == []


def test_a_secret_that_contains_another_is_redacted_whole() -> None:
    from gateway.logging import Redactor

    app_id, secret = "cli_a1b2c3", "cli_a1b2c3-and-the-secret-part"  # one value inside the other
    assert Redactor([app_id, secret]).scrub(f"id {app_id}, key {secret}") == "id ***, key ***"


# -- a provider's words in the log -------------------------------------------------------

# Keys not shaped like "sk-...": only knowing them keeps them out of a line.
PRIMARY_KEY = "gw-primary-7c1f0e9a2b4d6f8e"
BACKUP_KEY = "gw-backup-3a5c7e9b1d2f4a6c"


def test_provider_text_is_scrubbed_masked_and_cut() -> None:
    from gateway.logging import provider_text
    from memory.redact import PROVIDER_TEXT_MAX, scrub_provider_text

    said = (f"Incorrect API key provided: {PRIMARY_KEY}. Header was Authorization: Bearer {BACKUP_KEY}; "
            "OpenAI shows sk-proj-abc1***************wxyz, Groq gsk_0123456789abcdefABCDEF\n" + "your prompt " * 200)
    out = scrub_provider_text(said, [PRIMARY_KEY])
    for leaked in (PRIMARY_KEY, BACKUP_KEY, "abc1", "wxyz", "0123456789abcdef", "\n"):
        assert leaked not in out
    assert out.startswith("Incorrect API key provided: ***. Header was Authorization: Bearer ***; OpenAI shows sk-***")
    assert len(out) == PROVIDER_TEXT_MAX and out.endswith("…")
    configure_logging(stream=io.StringIO(), secrets=[BACKUP_KEY])
    assert BACKUP_KEY not in provider_text(f"echo {BACKUP_KEY}")  # the keys logging knows, too


async def test_a_provider_echoing_the_keys_never_puts_them_in_the_log() -> None:
    """The primary echoes its own key and the fallback's (a proxy's error
    page), and the prompt at length; the log of the failed turn names the
    error, without either key, cut short. Logging was not told the keys:
    the clients drop them themselves."""
    from gateway.agent import Agent
    from gateway.config import FallbackConfig, ProviderConfig
    from gateway.failover import FailoverLLM
    from gateway.tools import ToolContext
    from memory import ManualClock
    from tests.fakes.openai_server import FakeOpenAI, Reply

    out = io.StringIO()
    configure_logging(stream=out)
    echo = f"Incorrect API key provided: {PRIMARY_KEY} (also tried {BACKUP_KEY}). Request: " + "Miso " * 400
    ctx = ToolContext(user="alice", channel="telegram", chat_id="42", private=True, message_id="7", sender_id="1")
    async with FakeOpenAI(api_key=PRIMARY_KEY) as a, FakeOpenAI(api_key=BACKUP_KEY) as b:
        a.down = b.down = Reply(status=400, error_body=echo)

        def prov(fake: FakeOpenAI) -> ProviderConfig:
            return ProviderConfig.model_validate({"baseUrl": fake.url, "apiKey": fake.api_key, "maxRetries": 0})

        llm = FailoverLLM.from_config(prov(a), "main", [FallbackConfig(model="backup", provider=prov(b))],
                                      ManualClock("2026-03-01T12:00:00Z"))
        async with llm:
            reply = await Agent(llm).run([{"role": "user", "content": "hi"}], ctx, user_text="hi")
    assert not reply.ok
    text = out.getvalue()
    assert PRIMARY_KEY not in text and BACKUP_KEY not in text
    [failed] = [r for r in lines(out) if r["event"] == "LLM call failed"]
    assert failed["error"].startswith("LLM provider answered 400: server_error - Incorrect API key provided: *** (also tried ***)")
    assert len(failed["error"]) <= 300 and text.count("Miso") < 100


async def test_a_refused_key_is_logged_in_the_providers_own_words() -> None:
    """OpenAI's 401 (code ``invalid_api_key``, "Incorrect API key
    provided"), the first error a newcomer sees: the log keeps its words.
    The code and the message are joined so that the log's redaction of
    ``api_key: <value>`` lines does not take the message's first word
    for a key."""
    from gateway.agent import Agent
    from gateway.config import ProviderConfig
    from gateway.failover import FailoverLLM
    from gateway.tools import ToolContext
    from memory import ManualClock
    from tests.fakes.openai_server import FakeOpenAI

    out = io.StringIO()
    configure_logging(stream=out)
    ctx = ToolContext(user="alice", channel="telegram", chat_id="42", private=True, message_id="7", sender_id="1")
    async with FakeOpenAI(api_key=PRIMARY_KEY) as fake:
        prov = ProviderConfig.model_validate({"baseUrl": fake.url, "apiKey": "sk-wrong-0123456789", "maxRetries": 0})
        async with FailoverLLM.from_config(prov, "main", [], ManualClock("2026-03-01T12:00:00Z")) as llm:
            reply = await Agent(llm).run([{"role": "user", "content": "hi"}], ctx, user_text="hi")
    assert not reply.ok
    [failed] = [r for r in lines(out) if r["event"] == "LLM call failed"]
    assert "Incorrect API key provided" in failed["error"], failed["error"]
    assert "invalid_api_key" in failed["error"] and "[redacted]" not in failed["error"]
    assert "sk-wrong-0123456789" not in out.getvalue()


async def test_memory_and_transcription_errors_drop_the_key_they_were_sent() -> None:
    import pytest

    from gateway.bus import Audio
    from gateway.transcription import Transcriber, TranscriptionError
    from memory.llm import LLMUnavailable, MemoryLLM
    from tests.fakes.openai_server import FakeOpenAI, Reply

    out = io.StringIO()
    configure_logging(stream=out)
    async with FakeOpenAI(api_key=PRIMARY_KEY) as fake:
        fake.down = Reply(status=503, error_body=f"upstream refused key {PRIMARY_KEY}")
        async with MemoryLLM(base_url=fake.url, api_key=PRIMARY_KEY, model="m", retries=1, retry_delay=0) as mem:
            with pytest.raises(LLMUnavailable) as err:
                await mem.extract("alice: hi")
        assert PRIMARY_KEY not in str(err.value) and PRIMARY_KEY not in err.value.text
        fake.queue_transcription_error(500, body=f"bad key {PRIMARY_KEY}")
        t = Transcriber(base_url=fake.url, api_key=PRIMARY_KEY, model="whisper-1")
        with pytest.raises(TranscriptionError) as terr:
            await t.transcribe(Audio(data=b"OggS" + bytes(100), mime="audio/ogg", filename="v.ogg"))
        await t.aclose()
    assert str(terr.value).startswith("transcription refused: HTTP 500 bad key *** (")  # its length and digest after
    assert "memory llm: retrying" in out.getvalue() and PRIMARY_KEY not in out.getvalue()


def test_credentials_a_user_typed_are_redacted_from_any_line() -> None:
    """A message's words reaching a log line (an exception's text, a
    library's debug line) lose what memory would not keep either."""
    out = io.StringIO()
    configure_logging(stream=out)
    structlog.get_logger().warning(
        "could not parse", error="ValueError('password: hunter2 and card 4111-1111-1111-1111')",
        text="-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1L7VLPHCgcB\n-----END RSA PRIVATE KEY-----",
        when="2026-11-23 09:30, phone 13812345678",
    )
    text = out.getvalue()
    for secret in ("hunter2", "4111-1111-1111-1111", "MIIEowIBAAKCAQEAu1SU1L7VLPHCgcB"):
        assert secret not in text, text
    assert "2026-11-23 09:30, phone 13812345678" in text


async def test_debug_logs_no_sql_with_what_users_said(tmp_path: Path) -> None:
    """`--log-level DEBUG` is for timings: aiosqlite's per-statement debug
    lines carry the parameters (message words, memories) and would bury them."""
    out = io.StringIO()
    configure_logging(stream=out, level="DEBUG")
    async with aiosqlite.connect(tmp_path / "x.db") as conn:
        await conn.execute("CREATE TABLE t (words TEXT)")
        await conn.execute("INSERT INTO t VALUES (?)", ("my bank PIN is 4711",))
    get_logger("gateway").debug("turn timed", total_ms=12)
    assert "4711" not in out.getvalue() and "INSERT" not in out.getvalue()
    assert [r["event"] for r in lines(out) if r.get("logger") != "asyncio"] == ["turn timed"]


def test_an_error_logged_by_type_and_place_renders_on_a_terminal_too(capsys: pytest.CaptureFixture[str]) -> None:
    """error_fields' frames went under ``stack``, which the console
    renderer (a gateway run in a terminal) joins to a string: every such
    line failed to render ("--- Logging error ---"), and where structlog
    was not set up, the log call itself raised."""
    out = io.StringIO()
    configure_logging(stream=out, json_output=False)
    try:
        raise ValueError("my pin is 8806")
    except ValueError as exc:
        get_logger("gateway").error("handling failed", **error_fields(exc))
    assert "Logging error" not in capsys.readouterr().err
    assert "handling failed" in out.getvalue() and "ValueError" in out.getvalue() and "pin is 8806" not in out.getvalue()
    structlog.reset_defaults()
    try:
        raise ValueError("again")
    except ValueError as exc:
        structlog.get_logger().error("unconfigured", **error_fields(exc))  # structlog's own default: no TypeError


def test_a_traceback_logged_with_exc_info_is_its_type_and_frames_not_its_text() -> None:
    """A library's ``logger.exception`` (aiohttp's "Error handling request",
    PTB's handlers) or our own ``exc_info``: the rendered traceback would
    end with the exception's text, which may quote a message."""
    out = io.StringIO()
    configure_logging(stream=out)
    try:
        raise OSError(28, "No space left on device: 'notes about wombat7731.txt'")
    except OSError:
        logging.getLogger("aiohttp.server").exception("Error handling request")
        get_logger("gateway").error("handling failed", exc_info=True)
    text = out.getvalue()
    assert "wombat" not in text and "Traceback" not in text
    library, ours = lines(out)[-2:]
    for rec in (library, ours):
        assert rec["error"] == "OSError" and rec["errno_name"] == "ENOSPC" and "exception" not in rec
        assert rec["at"].startswith("tests/gateway/test_logging.py:")
    assert library["event"] == "Error handling request" and ours["event"] == "handling failed"


def test_an_exception_logged_as_a_value_is_its_kind_and_codes() -> None:
    out = io.StringIO()
    configure_logging(stream=out)
    get_logger("gateway").warning("odd", error=OSError(28, "No space left: wombat7731.txt"))
    assert lines(out)[-1]["error"] == "OSError (ENOSPC)" and "wombat" not in out.getvalue()


async def test_a_task_exception_never_retrieved_is_logged_by_type_not_its_text() -> None:
    """asyncio's default handler logs "Task exception was never retrieved"
    with the task's repr, which ends with the exception's: text and all.
    The gateway's handler logs asyncio's own phrase, the task's name and
    coroutine, and the error's type and place."""
    import asyncio
    import gc

    from gateway.logging import loop_exception_handler
    from tests.logjson import debug_json_log, lines as named

    async def doomed() -> None:
        raise ValueError("my pin is 8806 QUOKKA")

    loop = asyncio.get_running_loop()
    saved = loop.get_exception_handler()
    loop.set_exception_handler(loop_exception_handler)
    try:
        with debug_json_log() as stream:
            task = asyncio.create_task(doomed(), name="chat:telegram:42")
            await asyncio.wait([task])
            del task  # never awaited, its exception never read
            gc.collect()
            loop.call_soon(lambda: 1 / 0)  # a callback's error: the handle's repr quotes its arguments
            await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(saved)
    assert "QUOKKA" not in stream.getvalue() and "pin is 8806" not in stream.getvalue()
    [line] = named(stream, "Task exception was never retrieved")
    assert (line["task"], line["coroutine"], line["error"]) == (
        "chat:telegram:42", "test_a_task_exception_never_retrieved_is_logged_by_type_not_its_text.<locals>.doomed",
        "ValueError")
    assert line["at"].startswith("tests/gateway/test_logging.py") and line["level"] == "error"
    [callback] = named(stream, "Exception in callback")
    assert callback["error"] == "ZeroDivisionError"
