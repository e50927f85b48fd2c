from __future__ import annotations

import io
import json
import logging

import structlog

from gateway.logging import configure_logging, get_logger


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
