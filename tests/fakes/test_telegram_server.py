"""The fake Bot API speaks the protocol the way Telegram does; checked with
plain httpx so the fake's behaviour does not depend on python-telegram-bot."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from tests.fakes.telegram_server import FakeTelegram


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=10) as c:
        yield c


def api(fake: FakeTelegram, method: str) -> str:
    return f"{fake.base_url}{fake.token}/{method}"


async def _until(predicate: Callable[[], bool]) -> None:
    while not predicate():
        await asyncio.sleep(0.01)


async def test_tokens_and_methods(fake: FakeTelegram, client: httpx.AsyncClient) -> None:
    ok = await client.get(api(fake, "getMe"))
    assert ok.json()["result"]["username"] == "myclaw_bot"
    wrong = await client.get(f"{fake.base_url}123:not-the-right-one/getMe")
    assert (wrong.status_code, wrong.json()) == (401, {"ok": False, "error_code": 401, "description": "Unauthorized"})
    assert (await client.get(f"{fake.base_url}garbage/getMe")).status_code == 404
    assert (await client.get(api(fake, "noSuchMethod"))).status_code == 404


async def test_offset_confirms_and_long_poll_wakes(fake: FakeTelegram, client: httpx.AsyncClient) -> None:
    fake.push_text(1, 1, "one")
    fake.push_text(1, 1, "two")
    first = (await client.post(api(fake, "getUpdates"), data={"timeout": "0"})).json()["result"]
    assert [u["message"]["text"] for u in first] == ["one", "two"]
    again = (await client.post(api(fake, "getUpdates"), json={"offset": first[0]["update_id"] + 1})).json()["result"]
    assert [u["message"]["text"] for u in again] == ["two"]  # "one" confirmed, "two" kept

    # A 60 s long poll, waiting in the fake before the push: answered with
    # the push, long before its own timeout (which would answer []).
    poll = asyncio.create_task(client.post(
        api(fake, "getUpdates"), data={"timeout": "60", "offset": str(again[0]["update_id"] + 1)}, timeout=90))
    await asyncio.wait_for(_until(lambda: fake.counts["getupdates"] == 3), 30)
    fake.push_text(1, 1, "three")
    woke = (await asyncio.wait_for(poll, 30)).json()["result"]
    assert [u["message"]["text"] for u in woke] == ["three"]
    assert fake.pending_updates == 1

    started = time.monotonic()
    empty = await client.post(api(fake, "getUpdates"), data={"timeout": "1", "offset": str(woke[0]["update_id"] + 1)})
    assert empty.json() == {"ok": True, "result": []} and time.monotonic() - started >= 0.9


async def test_a_fake_started_by_hand_goes_on_from_the_ids_it_is_given(client: httpx.AsyncClient) -> None:
    async with FakeTelegram(first_id=7000) as fake:
        fake.push_text(1, 1, "after a restart")
        [update] = (await client.post(api(fake, "getUpdates"), data={"timeout": "0"})).json()["result"]
    assert (update["update_id"], update["message"]["message_id"]) == (7000, 7000)


async def test_newer_poller_terminates_older(fake: FakeTelegram, client: httpx.AsyncClient) -> None:
    older = asyncio.create_task(client.post(api(fake, "getUpdates"), data={"timeout": "5"}))
    await asyncio.sleep(0.1)
    await client.post(api(fake, "getUpdates"), data={"timeout": "0"})
    assert (await asyncio.wait_for(older, 5)).status_code == 409


async def test_allowed_updates_filters(fake: FakeTelegram, client: httpx.AsyncClient) -> None:
    fake.push_text(1, 1, "text")
    r = await client.post(api(fake, "getUpdates"), data={"allowed_updates": json.dumps(["callback_query"])})
    assert r.json()["result"] == []
    r = await client.post(api(fake, "getUpdates"), data={"allowed_updates": "[]"})
    assert len(r.json()["result"]) == 1


async def test_send_message_rules(fake: FakeTelegram, client: httpx.AsyncClient) -> None:
    msg = fake.push_text(5, 5, "hi")
    too_long = await client.post(api(fake, "sendMessage"), data={"chat_id": "5", "text": "x" * 4097})
    assert too_long.status_code == 400 and too_long.json()["description"] == "Bad Request: message is too long"
    unknown = await client.post(api(fake, "sendMessage"), data={"chat_id": "6", "text": "hi"})
    assert unknown.json()["description"] == "Bad Request: chat not found"
    missing_reply = await client.post(
        api(fake, "sendMessage"), data={"chat_id": "5", "text": "re", "reply_parameters": json.dumps({"message_id": 999})}
    )
    assert missing_reply.json()["description"] == "Bad Request: message to be replied not found"
    ok = await client.post(
        api(fake, "sendMessage"),
        json={"chat_id": 5, "text": "re", "reply_parameters": {"message_id": msg["message_id"]}},
    )
    result = ok.json()["result"]
    assert result["chat"]["id"] == 5 and result["from"]["is_bot"] and result["text"] == "re"
    assert [(s.chat_id, s.text, s.reply_to) for s in fake.sent] == [(5, "re", msg["message_id"])]


async def test_scripted_failures(fake: FakeTelegram, client: httpx.AsyncClient) -> None:
    fake.fail_next("sendMessage", 429, retry_after=3)
    fake.fail_next("getMe", 500, times=2)
    r = await client.post(api(fake, "sendMessage"), data={"chat_id": "1", "text": "x"})
    assert r.status_code == 429 and r.json()["parameters"] == {"retry_after": 3}
    assert [(await client.get(api(fake, "getMe"))).status_code for _ in range(3)] == [500, 500, 200]


async def test_offline_refuses_and_cuts_long_polls(fake: FakeTelegram, client: httpx.AsyncClient) -> None:
    poll = asyncio.create_task(client.post(api(fake, "getUpdates"), data={"timeout": "5"}))
    await asyncio.sleep(0.1)
    await fake.go_offline()
    with pytest.raises(httpx.TransportError):
        await asyncio.wait_for(poll, 5)
    with pytest.raises(httpx.ConnectError):
        await client.get(api(fake, "getMe"))
    fake.push_text(1, 1, "queued while offline")
    await fake.go_online()
    r = await client.post(api(fake, "getUpdates"))
    assert r.json()["result"][0]["message"]["text"] == "queued while offline"


async def test_ten_thousand_updates_drain_in_full_batches_each_once(fake: FakeTelegram, client: httpx.AsyncClient) -> None:
    # The gateway benchmark pushes 1,000 chats x 10 messages through here
    # (scripts/bench_gateway.py times it): each poll is a full batch from the
    # head, and what an offset confirms is forgotten, so no poll rescans it.
    for i in range(10_000):
        fake.push_text(i % 1000 + 1, i % 1000 + 1, f"message {i}")
    offset, texts, polls = 0, [], 0
    while len(texts) < 10_000:
        batch = (await client.post(api(fake, "getUpdates"), data={"offset": str(offset)})).json()["result"]
        polls += 1
        assert len(batch) == 100 and fake.pending_updates == 10_000 - len(texts)
        texts += [u["message"]["text"] for u in batch]
        offset = batch[-1]["update_id"] + 1
    assert polls == 100 and texts == [f"message {i}" for i in range(10_000)]
    assert (await client.post(api(fake, "getUpdates"), data={"offset": str(offset)})).json()["result"] == []
    assert fake.pending_updates == 0


async def test_record_false_keeps_counts_only(client: httpx.AsyncClient) -> None:
    seen: list[str] = []
    async with FakeTelegram(record=False) as fake:
        fake.on_send = lambda m: seen.append(m.text)
        fake.push_text(1, 1, "hi")
        await client.post(api(fake, "sendMessage"), data={"chat_id": "1", "text": "one"})
        await client.post(api(fake, "sendMessage"), data={"chat_id": "1", "text": "two"})
        await fake.wait_sent(2)
        assert (fake.sent_count, fake.sent, fake.calls, seen) == (2, [], [], ["one", "two"])


async def test_get_file_and_the_file_download_path(fake: FakeTelegram, client: httpx.AsyncClient) -> None:
    data = b"\xff\xd8\xff" + bytes(100)
    message = fake.push_photo(7, 7, [data], caption="hi")
    assert message["caption"] == "hi" and "text" not in message
    file_id = message["photo"][0]["file_id"]
    got = (await client.post(api(fake, "getFile"), json={"file_id": file_id})).json()["result"]
    assert got["file_size"] == len(data) and got["file_path"].startswith("photos/")
    base = fake.base_url.replace("/bot", "/file/bot")
    download = await client.get(f"{base}{fake.token}/{got['file_path']}")
    assert (download.status_code, download.content) == (200, data)
    assert (await client.get(f"{base}{fake.token}/photos/nope.jpg")).status_code == 404
    assert (await client.get(f"{base}123:wrong-token-abc/{got['file_path']}")).status_code == 401
    bad = await client.post(api(fake, "getFile"), json={"file_id": "nope"})
    assert bad.json() == {"ok": False, "error_code": 400, "description": "Bad Request: invalid file_id"}
    huge = fake.add_file(bytes(20 * 1024 * 1024 + 1))
    too_big = await client.post(api(fake, "getFile"), json={"file_id": huge["file_id"]})
    assert too_big.json()["description"] == "Bad Request: file is too big"


async def test_a_cut_aimed_at_but_never_reached_is_called_off(fake: FakeTelegram, client: httpx.AsyncClient) -> None:
    """``uncut``: a walk's last run must not have its first send held by a
    cut the killed run never reached."""
    fake.push_text(5, 5, "hi")
    fake.cut_next("sendMessage")
    fake.cut_next("getMe")
    assert fake.uncut("sendMessage") == 1
    r = await client.post(api(fake, "sendMessage"), json={"chat_id": 5, "text": "answered"})
    assert r.status_code == 200 and fake.sent[-1].text == "answered"
    assert fake.uncut() == 1 and fake.uncut() == 0
    assert (await client.get(api(fake, "getMe"))).status_code == 200
