"""Feishu replies through the outbox, end to end: ``App`` from a config
(webhook mode, signed and encrypted events on the gateway's HTTP server),
the fake Feishu Open API failing on cue, the fake LLM, real gateway.db;
a restart is a new ``App`` on the same home. A ManualClock drives the
outbox's backoff.

* whose reply a kept row is, also for the note on a photo (never in Tier 0);
* a recall drops the recalled message's reply still waiting, for good;
* a part that reached Feishu before a cut is not shown twice (uuid);
* the bot still withdraws its reply after a restart (the reply log)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from channels.base import UNREADABLE_REPLY
from channels.feishu import FeishuChannel
from gateway.app import App, ChannelSpec
from gateway.bus import Attachment, MessageBus, OutboundMessage
from gateway.config import Paths, load_config
from gateway.userdata import UserData
from memory import ManualClock
from tests.fakes.feishu_server import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.test_e2e_feishu import echo_llm, feishu  # noqa: F401  (fixtures)

ENCRYPT_KEY = "e2e-encrypt-key-Qw81zP"
ALICE = "ou_alice0000000000000000000000000"


class FastFeishu(FeishuChannel):
    """The config's Feishu channel, giving up on a send at once: the outbox
    does the retrying."""

    def __init__(self, config: Any, bus: MessageBus, **kw: Any) -> None:
        super().__init__(config, bus, max_attempts=1, **kw)


FEISHU = ChannelSpec("feishu", __name__, "FastFeishu", lambda c: c.channels.feishu,
                     needs_http=lambda c: True, keeps_replies=True)


class Gateway:
    """One gateway process on ``home``: start, push events, stop."""

    def __init__(self, home: Path, clock: ManualClock, feishu: FakeFeishu, llm: FakeOpenAI) -> None:
        self.home, self.clock, self.feishu, self.llm = home, clock, feishu, llm
        self.app: App | None = None

    async def start(self) -> App:
        doc = {
            "provider": {"baseUrl": self.llm.url, "apiKey": self.llm.api_key, "maxRetries": 0, "timeout": "5s"},
            "agent": {"model": "test-model"},
            "gateway": {"host": "127.0.0.1", "port": 0},
            "channels": {"feishu": {"enabled": True, "appId": self.feishu.app_id, "appSecret": self.feishu.app_secret,
                                    "mode": "webhook", "domain": self.feishu.url,
                                    "verificationToken": self.feishu.verification_token, "encryptKey": ENCRYPT_KEY}},
            "memory": {"enabled": False, "identities": {"alice": [f"feishu:{ALICE}"]}},
            "cron": {"enabled": False},
        }
        (self.home / "config.json").write_text(json.dumps(doc), encoding="utf-8")
        cfg = load_config(self.home / "config.json", env={"MYCLAW_HOME": str(self.home)}, require=True)
        self.app = App(cfg, Paths(self.home), clock=self.clock, channel_specs=[FEISHU])
        await self.app.open()
        await asyncio.wait_for(self.app.start(), 15)
        return self.app

    async def stop(self, timeout: float = 10.0) -> None:
        if self.app is not None:
            await asyncio.wait_for(self.app.close(timeout), 30)
            self.app = None

    async def push(self, event: dict[str, Any]) -> None:
        assert self.app is not None and self.app.http is not None
        url = self.app.http.url + "/feishu/events"
        assert (await self.feishu.push_event(url, event, encrypt_key=ENCRYPT_KEY)).status_code == 200

    async def settled(self) -> None:
        """Every event handled, every reply sent or kept."""
        assert self.app is not None and self.app.loop is not None
        assert await self.app.loop.drain(5)
        await asyncio.wait_for(self.app.bus.outbound_queue("feishu").join(), 5)

    async def later(self, seconds: float) -> None:
        """``seconds`` pass: the outbox's next pass is due."""
        assert self.app is not None and self.app.delivery is not None
        self.clock.advance(seconds)
        await asyncio.wait_for(self.app.delivery.sweep(), 10)

    async def waiting(self) -> list[tuple[str, str]]:
        """(owner, text) of every kept row."""
        assert self.app is not None and self.app.sessions is not None
        rows = await self.app.sessions.db.fetchall("SELECT owner, text FROM outbox ORDER BY id")
        return [(str(r[0]), str(r[1])) for r in rows]


@pytest.fixture
async def gateway(
    tmp_path: Path, clock: ManualClock, feishu: FakeFeishu, echo_llm: FakeOpenAI  # noqa: F811
) -> AsyncIterator[Gateway]:
    g = Gateway(tmp_path, clock, feishu, echo_llm)
    try:
        yield g
    finally:
        await g.stop()


async def until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.02)


def app_reply(text: str) -> OutboundMessage:
    """A reply as the loop publishes it."""
    return OutboundMessage("feishu", "oc_alice", text, answers="om_x", owner="alice")


def photo(feishu: FakeFeishu, chat_id: str = "oc_alice") -> dict[str, Any]:
    return feishu.message_event(message_type="image", content={"image_key": "img_1"}, chat_id=chat_id, open_id=ALICE)


# -- 1. whose reply it is -------------------------------------------------------------------


async def test_the_note_on_a_photo_kept_in_the_outbox_is_erased_with_its_senders_data(
    gateway: Gateway, feishu: FakeFeishu
) -> None:
    """The note answering a photo never enters Tier 0, so the chat's history
    cannot say whose it is; the channel names its owner (``alice``, through
    memory.identities), and /forget all's erasure takes it along."""
    app = await gateway.start()
    feishu.fail_next(1, "internal error", status=500, times=2)  # Feishu down
    await gateway.push(photo(feishu))
    await gateway.push(feishu.message_event("hello there", chat_id="oc_alice", open_id=ALICE))
    await gateway.settled()
    assert await gateway.waiting() == [("alice", UNREADABLE_REPLY), ("alice", "re: hello there")]
    assert app.sessions is not None and app.backend is not None and app.delivery is not None
    everything = UserData(app.backend, app.sessions, outbox=app.delivery.outbox)
    assert (await everything.census("alice")).messages == 4  # the two rows, her message and its reply
    await everything.erase("alice")
    assert await gateway.waiting() == []
    await gateway.later(60)
    assert feishu.sent == []  # erased, so never sent


# -- 2. a recall drops the waiting reply ----------------------------------------------------


async def test_a_recalled_messages_reply_waiting_in_the_outbox_is_never_sent(
    gateway: Gateway, feishu: FakeFeishu
) -> None:
    """Feishu fails, the replies wait; Alice recalls her message and her
    photo: their replies leave the outbox at once (not only this process's
    memory of the recall), so neither the recovered channel nor the next
    gateway sends them. The reply to the message she kept goes out."""
    await gateway.start()
    feishu.fail_next(1, "internal error", status=500)
    recalled = feishu.message_event("my card number is 4111-2222", chat_id="oc_alice", open_id=ALICE)
    pic = photo(feishu)
    await gateway.push(recalled)
    await gateway.push(pic)
    await gateway.push(feishu.message_event("what is the weather", chat_id="oc_alice", open_id=ALICE))
    await gateway.settled()
    assert sorted(text for _, text in await gateway.waiting()) == sorted(  # the note goes as the photo comes in
        [UNREADABLE_REPLY, "re: my card number is 4111-2222", "re: what is the weather"])
    for event in (recalled, pic):
        await gateway.push(feishu.recall_event(event["event"]["message"]["message_id"]))
    await gateway.settled()
    assert [text for _, text in await gateway.waiting()] == ["re: what is the weather"]
    await gateway.stop()  # the channel's own note of the recall goes with the process

    await gateway.start()
    await until(lambda: len(feishu.sent) == 1)
    await asyncio.sleep(0.1)
    assert feishu.texts() == ["re: what is the weather"]
    assert await gateway.waiting() == []
    data = b"".join(p.read_bytes() for p in (gateway.home / "data").glob("gateway.db*"))
    assert b"4111-2222" not in data


# -- 3. no part twice -----------------------------------------------------------------------


async def test_feishu_sends_one_message_per_uuid_within_the_hour(feishu: FakeFeishu) -> None:
    """The fake as Feishu documents it: a send repeating a uuid within one
    hour is answered with the message the first made, and sends nothing."""
    now = [0.0]
    feishu.clock = lambda: now[0]
    async with httpx.AsyncClient() as http:
        token = (await http.post(feishu.url + "/open-apis/auth/v3/tenant_access_token/internal",
                                 json={"app_id": feishu.app_id, "app_secret": feishu.app_secret})).json()

        async def send(text: str, key: str) -> str:
            r = await http.post(
                feishu.url + "/open-apis/im/v1/messages", params={"receive_id_type": "chat_id"},
                headers={"Authorization": "Bearer " + token["tenant_access_token"]},
                json={"receive_id": "oc_a", "msg_type": "text", "content": json.dumps({"text": text}), "uuid": key},
            )
            return str(r.json()["data"]["message_id"])

        first = await send("hi", "u-1")
        now[0] = 3599
        assert await send("hi", "u-1") == first and feishu.texts() == ["hi"]
        assert await send("hi", "u-2") != first  # another uuid: another message
        now[0] = 3600
        assert await send("hi", "u-1") != first  # an hour on: a new message
    assert feishu.texts() == ["hi"] * 3 and feishu.deduplicated == 1


async def test_a_part_feishu_took_before_the_answer_was_lost_is_not_shown_twice(
    gateway: Gateway, feishu: FakeFeishu
) -> None:
    """A three-part reply: the first part goes out, the second reaches
    Feishu but its answer is lost (a timeout), so the rest of the reply is
    kept from the second part on. The resend names that part with the same
    uuid: Feishu answers with the message it has, and the chat shows each
    part once."""
    app = await gateway.start()
    long_text = "\n\n".join(f"段落{i} " + "字" * 1500 for i in range(6))
    feishu.fail_next(-1, "gateway timeout", status=504, after=1, accepted=True)
    assert app.delivery is not None
    await app.bus.publish_outbound(app_reply(long_text))
    await gateway.settled()
    assert len(feishu.sent) == 2 and len(await gateway.waiting()) == 1  # the second part is in the chat already
    await gateway.later(30)
    assert await gateway.waiting() == [] and feishu.deduplicated == 1
    assert "".join(feishu.texts()).replace("\n", "") == long_text.replace("\n", "")  # each part once


async def test_a_part_in_flight_at_shutdown_is_not_shown_twice_after_the_restart(
    gateway: Gateway, feishu: FakeFeishu
) -> None:
    """The gateway stops while Feishu is taking a part: whether it arrived
    cannot be known, so the reply is kept whole; the next gateway sends it
    under the same uuids, and Feishu shows the part once."""
    app = await gateway.start()
    feishu.send_delay = 1.0
    await app.bus.publish_outbound(app_reply("one part, slow to answer"))
    await until(lambda: any(path.endswith("/messages") for _, path in feishu.requests))
    await gateway.stop(timeout=0.2)
    await until(lambda: len(feishu.sent) == 1)  # Feishu took it after all
    feishu.send_delay = 0.0

    await gateway.start()
    await until(lambda: feishu.deduplicated == 1)
    assert gateway.app is not None and gateway.app.delivery is not None
    await gateway.app.delivery.sweep()  # waits for the start's pass, whose send Feishu just answered, to end
    assert await gateway.waiting() == [] and feishu.texts() == ["one part, slow to answer"]


async def test_a_reply_under_way_as_an_ordinary_stop_comes_is_let_finish_not_kept(
    gateway: Gateway, feishu: FakeFeishu
) -> None:
    """The stop's wait for queued replies (its timeout, 2 s here) runs out
    while Feishu is still taking a reply (3 s): the send is let end within
    the stop's grace, so nothing is kept and the next start sends nothing
    (before, it was cut and kept, and only Feishu's uuid kept the chat
    from showing it twice)."""
    app = await gateway.start()
    feishu.send_delay = 3.0
    await app.bus.publish_outbound(app_reply("one part, slow to answer"))
    await until(lambda: any(path.endswith("/messages") for _, path in feishu.requests))
    await gateway.stop(timeout=2.0)
    assert feishu.texts() == ["one part, slow to answer"]
    feishu.send_delay = 0.0
    await gateway.start()
    assert gateway.app is not None and gateway.app.delivery is not None
    await gateway.app.delivery.sweep()
    assert await gateway.waiting() == [] and feishu.deduplicated == 0
    assert feishu.texts() == ["one part, slow to answer"]


async def test_the_note_for_a_file_that_failed_is_not_taken_for_its_caption(gateway: Gateway, feishu: FakeFeishu) -> None:
    """The caption goes out, the file message fails: the chat is told the
    file was not sent. The note is another message with uuids of its own,
    so Feishu does not answer it with the caption it already has."""
    from gateway.delivery import FILE_NOT_SENT

    app = await gateway.start()
    feishu.fail_next(1, "internal error", status=500, after=1)  # the caption passes, the file fails
    file = Attachment("myclaw-memory-2026-11-22.md", b"- [m1] a fact")
    await app.bus.publish_outbound(replace(app_reply("Everything I keep about you"), attachment=file))
    await gateway.settled()
    assert feishu.texts() == ["Everything I keep about you", FILE_NOT_SENT] and feishu.deduplicated == 0


# -- 4. the reply log survives a restart ----------------------------------------------------


async def test_a_recall_after_a_restart_still_withdraws_the_reply(gateway: Gateway, feishu: FakeFeishu) -> None:
    await gateway.start()
    mine = feishu.message_event("my pin is 8812", chat_id="oc_alice", open_id=ALICE)
    await gateway.push(mine)
    await gateway.push(feishu.message_event("and something else", chat_id="oc_alice", open_id=ALICE))
    await until(lambda: len(feishu.sent) == 2)
    await gateway.stop()

    app = await gateway.start()  # a new process: it knows the replies from gateway.db
    await gateway.push(feishu.recall_event(mine["event"]["message"]["message_id"]))
    await until(lambda: len(feishu.deleted) == 1)
    assert feishu.deleted == [m["message_id"] for m in feishu.sent if m["text"] == "re: my pin is 8812"]
    assert [m["text"] for m in feishu.visible()] == ["re: and something else"]
    assert app.sessions is not None
    await gateway.stop()
    # Withdrawn: its row went with it; the other stays until the recall window ends.
    await gateway.start()
    assert gateway.app is not None and gateway.app.sessions is not None
    rows = await gateway.app.sessions.db.fetchall("SELECT message_id FROM sent_replies")
    assert [r[0] for r in rows] == [m["message_id"] for m in feishu.visible()]
