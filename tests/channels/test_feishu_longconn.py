"""Long connection mode: lark-oapi's real websocket client against the fake's
``/callback/ws/endpoint`` and protobuf frame protocol."""

from __future__ import annotations

import asyncio
import gc
import logging
import subprocess
import sys
import textwrap
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from channels.base import ChannelFatalError
from channels.feishu import FeishuChannel
from gateway.bus import BOT_LEFT, LEFT, RECALL, MessageBus, OutboundMessage
from gateway.config import FeishuConfig
from tests.fakes.feishu_server import FakeFeishu, Frame, decode_frame, encode_frame
from tests.logjson import all_lines, debug_json_log, lines

# Generous for a loaded CI machine; the connection normally takes well under a second.
CONNECT_TIMEOUT = 60.0
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def fake() -> AsyncIterator[FakeFeishu]:
    async with FakeFeishu() as f:
        yield f


def ws_config(fake: FakeFeishu) -> FeishuConfig:
    return FeishuConfig(enabled=True, app_id=fake.app_id, app_secret=fake.app_secret, mode="websocket", domain=fake.url)


def test_frame_codec_round_trip() -> None:
    f = Frame(SeqID=3, LogID=2**40, service=7, method=1, headers={"type": "event", "sum": "1"}, payload=b"{}", LogIDNew="x")
    assert decode_frame(encode_frame(f)) == f


async def test_long_connection_event_end_to_end(fake: FakeFeishu, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    ch = FeishuChannel(ws_config(fake), MessageBus())
    await ch.start()
    try:
        await fake.wait_ws_connected(CONNECT_TIMEOUT)
        event = fake.message_event("via websocket", chat_id="oc_ws", open_id="ou_ws")
        ack = await fake.push_ws_event(event)
        assert ack["code"] == 200 and "biz_rt" in ack["headers"]  # the SDK's ACK frame
        msg = await asyncio.wait_for(ch.bus.consume_inbound(), 5)
        assert (msg.chat_id, msg.sender_id, msg.text) == ("oc_ws", "ou_ws", "via websocket")
        assert msg.metadata["event_id"] == event["header"]["event_id"]

        # Redelivery of the same event: ACKed, not published again.
        assert (await fake.push_ws_event(event))["code"] == 200
        await asyncio.sleep(0.1)
        assert ch.bus.inbound.empty()

        # A recall comes the same way, subscribed beside the message event,
        # and takes the bot's reply (both parts of it) out of the chat.
        await ch.send(OutboundMessage.answering(msg, "x" * 3000 + "\n\n" + "y" * 3000))
        reply = [m["message_id"] for m in fake.sent]
        ack = await fake.push_ws_event(fake.recall_event(msg.message_id))
        assert ack["code"] == 200
        recall = await asyncio.wait_for(ch.bus.consume_inbound(), 5)
        assert (recall.kind, recall.chat_id, recall.message_id) == (RECALL, "oc_ws", msg.message_id)
        assert await ch.withdrawals_done(5)
        assert len(reply) == 2 and fake.deleted == reply

        # The bot removed from a group, subscribed the same way: a LEFT of the bot itself.
        assert (await fake.push_ws_event(fake.bot_removed_event("oc_ws")))["code"] == 200
        gone = await asyncio.wait_for(ch.bus.consume_inbound(), 5)
        assert (gone.kind, gone.chat_id, gone.sender_id) == (LEFT, "oc_ws", BOT_LEFT)

        await ch.send(OutboundMessage("feishu", msg.chat_id, "pong", reply_to=msg.message_id))
        assert fake.sent[-1]["kind"] == "reply" and fake.sent[-1]["chat_id"] == "oc_ws"
        assert fake.ws_pings >= 1
    finally:
        await asyncio.wait_for(ch.stop(), 20)
        await ch.stop()
    assert not any(t.name == "feishu-longconn" for t in threading.enumerate())
    for secret in (fake.app_secret, *fake.issued_tokens, "ticket="):  # SDK and httpx log lines included
        assert secret not in caplog.text
    # Stopped for good: the SDK does not reconnect behind our back.
    connects = fake.ws_connects
    await asyncio.sleep(1.5)
    assert fake.ws_connects == connects

    # The module-level guard is released: a second channel may run afterwards,
    # while a concurrent one is refused.
    again = FeishuChannel(ws_config(fake), MessageBus())
    await again.start()
    try:
        third = FeishuChannel(ws_config(fake), MessageBus())
        with pytest.raises(ChannelFatalError, match="already runs"):
            await third.start()
        await third.stop()
        await fake.wait_ws_connected(CONNECT_TIMEOUT)
    finally:
        await asyncio.wait_for(again.stop(), 20)


def test_the_sdk_is_imported_on_the_starting_thread_not_the_sdk_thread() -> None:
    # Importing lark-oapi (11,000 modules) in the SDK thread while the
    # gateway's loop was busy took minutes: the GIL handed over once per
    # switch interval at every file read. A fresh interpreter, so the import
    # is really the first.
    script = textwrap.dedent(
        """
        import asyncio, sys, threading
        from channels.feishu.longconn import LongConnection

        async def main():
            async def on_event(payload):
                pass
            conn = LongConnection("cli_x", "secret", "http://127.0.0.1:9", on_event)
            assert "lark_oapi.ws.client" not in sys.modules
            conn.start()
            # start() returned: the import is done, on this thread.
            assert "lark_oapi.ws.client" in sys.modules, "not imported by start()"
            await conn.stop(timeout=20)
            print("ok")

        asyncio.run(main())
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=900, cwd=ROOT)  # a hang bound: a loaded box takes minutes
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-2000:]


def test_preload_before_the_loop_leaves_no_loop_behind() -> None:
    # `myclaw gateway` imports the SDK before asyncio.run(): no warning, no
    # loop left set or unclosed, and the connection still starts on its own.
    script = textwrap.dedent(
        """
        import asyncio, gc, sys, warnings
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", category=DeprecationWarning, module="jieba.*")
        from channels.feishu.longconn import LongConnection, preload_sdk

        preload_sdk()
        assert "lark_oapi.ws.client" in sys.modules
        from lark_oapi.ws import client
        assert client.loop.is_closed(), "the SDK's import-time loop left open"
        policy = asyncio.get_event_loop_policy()
        assert policy._local._loop is None, "a loop left set on the main thread"

        async def main():
            async def on_event(payload):
                pass
            conn = LongConnection("cli_x", "secret", "http://127.0.0.1:9", on_event)
            conn.start()
            await conn.stop(timeout=20)
            print("ok")

        asyncio.run(main())
        gc.collect()
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=900, cwd=ROOT)  # a hang bound: a loaded box takes minutes
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-2000:]


async def test_stop_right_after_start_ends_the_sdk_thread(fake: FakeFeishu) -> None:
    ch = FeishuChannel(ws_config(fake), MessageBus())
    await ch.start()
    await asyncio.wait_for(ch.stop(), 20)
    assert not any(t.name == "feishu-longconn" for t in threading.enumerate())


async def test_a_long_connection_that_gives_up_is_reported_not_silent(fake: FakeFeishu) -> None:
    # The API accepts the app (so start() succeeds), the long-connection
    # endpoint refuses it: the SDK stops for good, and the gateway must hear of it.
    fake.ws_refusal = (514, "auth failed: long connection not enabled for this app")
    ch = FeishuChannel(ws_config(fake), MessageBus())
    await ch.start()
    try:
        failure = await asyncio.wait_for(ch.wait_failed(), CONNECT_TIMEOUT)
        assert isinstance(failure, ChannelFatalError)
        assert "long connection stopped for good" in str(failure) and "514" in str(failure)
    finally:
        await asyncio.wait_for(ch.stop(), 20)
    assert not any(t.name == "feishu-longconn" for t in threading.enumerate())


async def test_a_normal_stop_is_not_a_failure(fake: FakeFeishu) -> None:
    ch = FeishuChannel(ws_config(fake), MessageBus())
    await ch.start()
    watcher = asyncio.create_task(ch.wait_failed())
    try:
        await fake.wait_ws_connected(CONNECT_TIMEOUT)
    finally:
        await asyncio.wait_for(ch.stop(), 20)
    await asyncio.sleep(0.2)
    assert not watcher.done()
    watcher.cancel()


async def test_a_held_download_is_acked_at_once_and_stalls_no_other_chat(fake: FakeFeishu) -> None:
    """The SDK thread takes events one at a time: a picture's download
    runs in its chat's lane, so the ACK goes out at once (no "redeliver"
    after 5 s) and the next chat's message reaches the bus meanwhile."""
    ch = FeishuChannel(ws_config(fake), MessageBus(), max_image_bytes=2048)
    await ch.start()
    try:
        await fake.wait_ws_connected(CONNECT_TIMEOUT)
        picture = b"\x89PNG\r\n\x1a\n" + bytes(600)
        key = fake.add_image(picture, "image/png")
        gate = fake.hold_resource(key)
        event = fake.message_event(message_type="image", content={"image_key": key}, chat_id="oc_a")
        assert (await fake.push_ws_event(event))["code"] == 200
        assert (await fake.push_ws_event(fake.message_event("from B", chat_id="oc_b")))["code"] == 200
        assert (await asyncio.wait_for(ch.bus.consume_inbound(), 5)).text == "from B"
        assert fake.resource_downloads == [] and ch.bus.inbound.empty()
        gate.set()
        msg = await asyncio.wait_for(ch.bus.consume_inbound(), 5)
        assert (msg.chat_id, [i.data for i in msg.images]) == ("oc_a", [picture])
    finally:
        await asyncio.wait_for(ch.stop(), 20)


class _Broken(FeishuChannel):
    """A channel whose intake fails with the message's words in the error."""

    async def handle_event(self, payload: dict[str, object]) -> None:
        event = payload.get("event")
        raise ValueError(f"could not take {event!r}")


async def test_an_event_whose_handling_fails_is_logged_by_type_not_its_words(
    fake: FakeFeishu, caplog: pytest.LogCaptureFixture
) -> None:
    """The SDK logs what our handler raises, text and all: an event's
    handling that fails with the message's words in its error (a bug) put
    them in the log. The SDK is handed the type alone; Feishu still gets no
    ACK, so it redelivers."""
    caplog.set_level(logging.DEBUG)
    ch = _Broken(ws_config(fake), MessageBus())
    await ch.start()
    try:
        await fake.wait_ws_connected(CONNECT_TIMEOUT)
        ack = await fake.push_ws_event(fake.message_event("my pin is 8806 QUOKKA", chat_id="oc_ws", open_id="ou_ws"))
        assert ack["code"] != 200  # not taken: Feishu sends it again
    finally:
        await asyncio.wait_for(ch.stop(), 20)
    assert "QUOKKA" not in caplog.text and "pin is 8806" not in caplog.text
    assert "ValueError" in caplog.text  # what failed is still told


async def test_a_refused_long_connection_logs_its_code_not_feishu_text(fake: FakeFeishu) -> None:
    """The SDK formats the platform's error text into its own log line
    ("connect failed, err: 514: ..."), and so did ours (repr): text that
    may echo what a chat holds. The log keeps the type and the code."""
    fake.ws_refusal = (514, "auth failed near QUOKKA-TITLE")
    with debug_json_log() as stream:
        ch = FeishuChannel(ws_config(fake), MessageBus())
        await ch.start()
        try:
            failure = await asyncio.wait_for(ch.wait_failed(), CONNECT_TIMEOUT)
        finally:
            await asyncio.wait_for(ch.stop(), 20)
    assert "QUOKKA" not in stream.getvalue() and "QUOKKA" not in str(failure)
    assert "514" in str(failure)  # the operator is still told which refusal
    [ours] = lines(stream, "feishu long connection failed")
    assert ours["error"] == "lark_oapi.ws.exception.ClientException" and ours["code"] == 514
    sdk = [p for p in all_lines(stream) if p.get("logger") == "Lark" and "connect failed" in p["event"]]
    assert sdk and all(p["error"] == "lark_oapi.ws.exception.ClientException" and p["code"] == 514 for p in sdk)


def test_the_sdk_logger_keeps_the_error_type_not_its_text() -> None:
    """lark-oapi's receive loop logs "receive message loop exit, err: {e}"
    with the websocket's close reason or a frame's text in ``e``; its
    debug line quotes an event's payload. What it logs arrives with the
    error's type and place, and the words withheld."""
    from channels.feishu.longconn import _route_sdk_logs_through_root

    sdk = logging.getLogger("Lark")
    with debug_json_log() as stream:
        _route_sdk_logs_through_root()
        saved = sdk.level
        sdk.setLevel(logging.DEBUG)
        try:
            try:
                raise ConnectionError("closed: the chat 'QUOKKA plans' is gone")
            except ConnectionError as e:
                sdk.error("receive message loop exit, err: {} [conn_id=c1]".format(e))
            sdk.debug("receive message, message_type: event, message_id: m1, trace_id: t1, payload: {\"text\": \"QUOKKA\"}")
            sdk.info("trying to reconnect for the 2nd time")
        finally:
            sdk.setLevel(saved)
    assert "QUOKKA" not in stream.getvalue()
    parsed = [p for p in all_lines(stream) if p.get("logger") == "Lark"]
    assert [p["event"] for p in parsed] == [
        "receive message loop exit, err: (withheld) [conn_id=c1]",
        "receive message, message_type: event, message_id: m1, trace_id: t1, payload: (withheld)",
        "trying to reconnect for the 2nd time",
    ]
    assert parsed[0]["error"] == "ConnectionError" and parsed[0]["at"].startswith("tests/channels/test_feishu_longconn.py")


async def test_a_stop_during_the_connect_logs_no_error(fake: FakeFeishu) -> None:
    """A stop that lands while the SDK is connecting cuts its connect short:
    it logged "connect failed" and, closing the socket that came up after,
    "receive message loop exit" at error level, and asyncio "Task exception
    was never retrieved". Our own stop logs no error."""
    fake.ws_gate = asyncio.Event()
    with debug_json_log() as stream:
        ch = FeishuChannel(ws_config(fake), MessageBus())
        await ch.start()
        try:
            await fake.wait_ws_asked(CONNECT_TIMEOUT)  # the SDK is inside its connect
        finally:
            stopping = asyncio.create_task(asyncio.wait_for(ch.stop(), 20))
            await asyncio.sleep(0.5)  # the stop reached the SDK's loop
            fake.ws_gate.set()
            await stopping
        gc.collect()  # a task's unretrieved exception is said when it is collected
    said = all_lines(stream)
    assert [p for p in said if p.get("level") in ("warning", "error", "critical")] == []
    assert any(p.get("logger") == "Lark" and "connect failed" in p["event"] for p in said)  # at debug
    assert not any(t.name == "feishu-longconn" for t in threading.enumerate())


async def test_a_dropped_connection_is_still_an_error(fake: FakeFeishu) -> None:
    """Feishu closing the connection is not our stop: the SDK's line stays
    at error level (and it reconnects)."""
    with debug_json_log() as stream:
        ch = FeishuChannel(ws_config(fake), MessageBus())
        await ch.start()
        try:
            await fake.wait_ws_connected(CONNECT_TIMEOUT)
            connects = fake.ws_connects
            await fake.drop_ws()
            async with asyncio.timeout(CONNECT_TIMEOUT):
                while fake.ws_connects == connects:
                    await asyncio.sleep(0.05)
        finally:
            await asyncio.wait_for(ch.stop(), 20)
    dropped = [p for p in all_lines(stream) if p.get("logger") == "Lark" and "receive message loop exit" in p["event"]]
    assert dropped and dropped[0]["level"] == "error"


async def test_the_fake_says_whether_a_long_connection_is_open(fake: FakeFeishu) -> None:
    """``FakeFeishu.connected``: what a walk waits on before it pushes an event."""
    assert not fake.connected
    ch = FeishuChannel(ws_config(fake), MessageBus())
    await ch.start()
    try:
        await fake.wait_ws_connected(CONNECT_TIMEOUT)
        assert fake.connected
    finally:
        await asyncio.wait_for(ch.stop(), 20)
    async with asyncio.timeout(CONNECT_TIMEOUT):
        while fake.connected:
            await asyncio.sleep(0.05)
