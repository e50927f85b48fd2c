"""The Feishu webhook as an attacker probes it: real HTTP against the
gateway's server on 127.0.0.1, events from the fake Feishu."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

import httpx
import pytest
from structlog.testing import capture_logs

from channels.feishu import FeishuChannel
from channels.feishu.webhook import sign
from gateway.bus import MessageBus
from gateway.http import HttpServer
from tests.channels.test_feishu import ENCRYPT_KEY, config, hook
from tests.fakes.feishu_server import FakeFeishu, _encrypt


@pytest.fixture
async def fake() -> AsyncIterator[FakeFeishu]:
    async with FakeFeishu() as f:
        yield f


@pytest.fixture
async def http() -> AsyncIterator[HttpServer]:
    async with HttpServer("127.0.0.1", 0) as server:
        yield server


@pytest.fixture
async def encrypted(fake: FakeFeishu, http: HttpServer) -> AsyncIterator[FeishuChannel]:
    ch = FeishuChannel(config(fake, encrypt_key=ENCRYPT_KEY), MessageBus(), http)
    await ch.start()
    yield ch
    await ch.stop()


async def test_a_signed_event_older_than_the_dedup_window_is_refused(
    fake: FakeFeishu, http: HttpServer, encrypted: FeishuChannel
) -> None:
    """A captured delivery replayed once its event id has left the dedup
    window (7 h) would be taken as new: answered, and its words stored
    again. Its ``create_time`` sits inside the signed body, so an event
    older than the window is refused; Feishu's own retries (the last about
    6 h on) still pass."""
    stale = fake.message_event("transfer the money again", event_id="ev_replayed")
    stale["header"]["create_time"] = str(int((time.time() - 8 * 3600) * 1000))
    with capture_logs() as logs:
        r = await fake.push_event(hook(http, encrypted), stale, encrypt_key=ENCRYPT_KEY)
    assert r.status_code == 401
    await asyncio.sleep(0.05)
    assert encrypted.bus.inbound.empty()
    [rejected] = [e for e in logs if e["event"] == "feishu webhook request rejected"]
    assert "older than" in rejected["reason"] and rejected["log_level"] == "warning"

    retry = fake.message_event("a late retry from Feishu")
    retry["header"]["create_time"] = str(int((time.time() - 6 * 3600) * 1000))
    assert (await fake.push_event(hook(http, encrypted), retry, encrypt_key=ENCRYPT_KEY)).status_code == 200
    assert (await asyncio.wait_for(encrypted.bus.consume_inbound(), 5)).text == "a late retry from Feishu"


async def test_a_replay_of_an_event_dedup_dropped_for_room_is_refused(fake: FakeFeishu, http: HttpServer) -> None:
    """A bot busier than the dedup holds (``maxsize`` ids within its 7 h)
    drops the oldest ids early: a captured delivery replayed after its id
    left must not pass as new just because it is younger than 7 h. Events
    created before the oldest id still held are refused; new ones pass."""
    from channels.feishu import RecentIds

    ch = FeishuChannel(config(fake, encrypt_key=ENCRYPT_KEY), MessageBus(), http, dedup=RecentIds(maxsize=3))
    await ch.start()
    try:
        first = fake.message_event("transfer the money", event_id="ev_first")
        first["header"]["create_time"] = str(int((time.time() - 60) * 1000))
        assert (await fake.push_event(hook(http, ch), first, encrypt_key=ENCRYPT_KEY)).status_code == 200
        await asyncio.sleep(0.01)  # the next are seen after it
        for i in range(3):  # "ev_first" leaves the dedup for room
            event = fake.message_event(f"busy {i}", event_id=f"ev_busy{i}")
            assert (await fake.push_event(hook(http, ch), event, encrypt_key=ENCRYPT_KEY)).status_code == 200
        for _ in range(4):
            await asyncio.wait_for(ch.bus.consume_inbound(), 5)
        r = await fake.push_event(hook(http, ch), first, encrypt_key=ENCRYPT_KEY)
        assert r.status_code == 401 and "older than" in r.json()["error"]
        fresh = fake.message_event("a new one", event_id="ev_new")
        assert (await fake.push_event(hook(http, ch), fresh, encrypt_key=ENCRYPT_KEY)).status_code == 200
        assert (await asyncio.wait_for(ch.bus.consume_inbound(), 5)).text == "a new one"
        assert ch.bus.inbound.empty()
    finally:
        await ch.stop()


async def test_a_signature_header_that_is_not_ascii_is_refused_not_a_crash(
    fake: FakeFeishu, http: HttpServer, encrypted: FeishuChannel
) -> None:
    """A forged ``X-Lark-Signature`` with non-ASCII bytes is a 401 like any
    wrong signature, not a 500 from the comparison."""
    body = json.dumps({"encrypt": _encrypt(ENCRYPT_KEY, json.dumps(fake.message_event("forged")))}).encode()
    ts, nonce = str(int(time.time())), "n0nce"
    for forged in ["é" * 64, "签" + sign(ts, nonce, ENCRYPT_KEY, body)[1:]]:
        headers = {"Content-Type": "application/json", "X-Lark-Request-Timestamp": ts,
                   "X-Lark-Request-Nonce": nonce, "X-Lark-Signature": forged.encode()}
        async with httpx.AsyncClient(timeout=10) as c:
            r = await c.post(hook(http, encrypted), content=body, headers=headers)  # type: ignore[arg-type]
        assert r.status_code == 401, r.text
        assert r.json() == {"error": "bad X-Lark-Signature"}
    assert encrypted.bus.inbound.empty()


@pytest.mark.parametrize("encrypt", [False, True], ids=["plain", "encrypted"])
async def test_json_nested_too_deep_is_a_400_not_a_500(fake: FakeFeishu, http: HttpServer, encrypt: bool) -> None:
    """``[[[[...`` a few thousand deep makes json.loads raise RecursionError,
    which is no ValueError: anyone who found the URL got a 500 and a
    traceback in the log per request."""
    ch = FeishuChannel(config(fake, encrypt_key=ENCRYPT_KEY if encrypt else ""), MessageBus(), http)
    await ch.start()
    try:
        deep = "[" * 100_000 + "]" * 100_000
        body = json.dumps({"encrypt": _encrypt(ENCRYPT_KEY, deep)}).encode() if encrypt else deep.encode()
        headers = {"Content-Type": "application/json"}
        if encrypt:
            ts = str(int(time.time()))
            headers |= {"X-Lark-Request-Timestamp": ts, "X-Lark-Request-Nonce": "n",
                        "X-Lark-Signature": sign(ts, "n", ENCRYPT_KEY, body)}
        async with httpx.AsyncClient(timeout=10) as c:
            r = await c.post(hook(http, ch), content=body, headers=headers)
        assert r.status_code == 400, r.text
        assert "JSON" in r.json()["error"]
        assert ch.bus.inbound.empty()
    finally:
        await ch.stop()


async def test_tampered_ciphertext_gets_one_answer_whatever_it_decrypts_to(
    fake: FakeFeishu, http: HttpServer, encrypted: FeishuChannel
) -> None:
    """A padding oracle: "invalid padding" and "not JSON" were different
    answers to ciphertext nobody had signed, which is enough to decrypt a
    captured delivery (the message and the verification token) byte by byte
    without the key. Signed requests are now checked before decrypting, and
    an unsigned one (only the URL check is sent unsigned) gets one answer
    for every failure."""
    import base64

    good = _encrypt(ENCRYPT_KEY, json.dumps(fake.message_event("captured words")))
    raw = bytearray(base64.b64decode(good))
    raw[-1] ^= 0x01  # breaks the padding
    bad_padding = base64.b64encode(bytes(raw)).decode()
    not_json = _encrypt(ENCRYPT_KEY, "{{{ valid padding, not JSON")
    not_utf8 = _encrypt(ENCRYPT_KEY, "x") [:-24] + _encrypt(ENCRYPT_KEY, "y")[-24:]  # garbage, padding may hold
    event = _encrypt(ENCRYPT_KEY, json.dumps(fake.message_event("an event, unsigned")))
    answers = set()
    for blob in (bad_padding, not_json, not_utf8, event):
        body = json.dumps({"encrypt": blob}).encode()
        for headers in ({}, {"X-Lark-Request-Timestamp": "1", "X-Lark-Request-Nonce": "n", "X-Lark-Signature": "0" * 64}):
            async with httpx.AsyncClient(timeout=10) as c:
                r = await c.post(hook(http, encrypted), content=body, headers={"Content-Type": "application/json", **headers})
            answers.add((r.status_code, r.text))
    assert answers == {(401, json.dumps({"error": "bad X-Lark-Signature"}))}
    assert encrypted.bus.inbound.empty()
    # The URL check, encrypted and unsigned as Feishu sends it, still works.
    r = await fake.push_challenge(hook(http, encrypted), "chal-1", encrypt_key=ENCRYPT_KEY)
    assert r.json() == {"challenge": "chal-1"}
