"""``myclaw memory forget --user`` run beside a running gateway reaches what
that process holds of the user, as ``/forget all`` in chat does. Before,
the CLI erased the files only: her message queued behind her turn at the
model was answered after the erasure and stored again, and the gateway
went on using her time zone until it restarted. Now it asks the gateway,
which erases through its own components (gateway/erasure_requests.py);
with none running it erases the files itself, as before. Real ``App``,
the CLI as its own process, the fake Telegram and OpenAI servers."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from gateway.app import App
from memory import ManualClock
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.procs import finished

from .killed import quiet
from .test_cli_gateway import REPO, _env
from .test_e2e_feishu import _app
from .test_e2e_feishu_outbox import until
from .test_erasure_e2e import files_holding
from .test_resume_e2e import KEY, _echo
from .test_vision_e2e import _telegram

SECRET = "QUOKKA7731"  # in her message queued when she is erased
TIDE = "TIDE4412"  # in her message at the model when she is erased
GROUP, ALICE, BOB = -100, 1001, 1002


def _gateway(home: Path, clock: ManualClock, llm: FakeOpenAI, tg: FakeTelegram) -> App:
    """A model call may be held for longer than the erasure takes."""
    return _app(home, clock, llm, {"telegram": _telegram(tg)},
                provider={"baseUrl": llm.url, "apiKey": llm.api_key, "maxRetries": 0, "timeout": "60s"})


async def _forget(home: Path, user: str) -> tuple[int, str, str]:
    """``myclaw memory forget --user <user> --yes``, a process of its own."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "from gateway.cli import main; main()", "memory", "forget", "--user", user, "--yes",
        cwd=REPO, env=_env(home), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await finished(proc)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def _said(tg: FakeTelegram, chat: int, text: str) -> str:
    before = len(tg.sent)
    tg.push_text(chat, chat, text)
    return (await tg.wait_sent(before + 1, timeout=15))[-1].text


async def test_forget_beside_a_running_gateway_reaches_her_queued_messages_and_cached_settings(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Alice set her time zone; her group turn is at the model and her next
    message waits behind it when the operator runs ``memory forget``. The
    CLI says the gateway erased her (counting both waiting messages and the
    setting); neither message is answered, stored or learnt; the gateway no
    longer knows her time zone; Bob, and what she says afterwards, are answered."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        app = _gateway(tmp_path, clock, llm, tg)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            assert "Asia/Tokyo" in await _said(tg, ALICE, "/timezone Asia/Tokyo")
            slow = llm.queue_hold(f"high tide {TIDE} noted")
            tg.push_text(GROUP, ALICE, f"the high tide mark is {TIDE}", chat_type="supergroup", mention=True)
            await until(lambda: len(llm.requests) == 1, timeout=15)
            tg.push_text(GROUP, ALICE, f"my locker code is {SECRET}", chat_type="supergroup", mention=True)
            await until(lambda: app.loop is not None and app.loop.stats.received == 3, timeout=15)
            code, out, err = await asyncio.wait_for(_forget(tmp_path, f"telegram:{ALICE}"), 150)
            assert code == 0, err
            assert f"the gateway running on this home (pid {os.getpid()}) forgot telegram:{ALICE}: " in out, out
            assert "2 messages waiting to be answered" in out and "1 time zone setting" in out, out
            assert "until it restarts" not in out, out  # nothing left for a restart to drop
            slow.set()
            assert app.loop is not None and await app.loop.drain(15)
            assert "Asia/Tokyo" not in await _said(tg, ALICE, "/timezone")  # its cache erased too
            tg.push_text(GROUP, BOB, "what's new on the island?", chat_type="supergroup", mention=True)
            await until(lambda: any("new on the island" in m.text for m in tg.sent), timeout=15)
            await asyncio.wait_for(quiet(app), 30)
        finally:
            await asyncio.wait_for(app.close(), 30)
    later = "\n".join(str(r) for r in llm.requests[1:])
    assert "new on the island" in later and SECRET not in later and TIDE not in later
    assert not any(SECRET in m.text or TIDE in m.text for m in tg.sent)
    assert files_holding(tmp_path, SECRET) == [] and files_holding(tmp_path, TIDE) == []


async def test_forget_with_the_gateway_stopped_erases_the_files_itself(tmp_path: Path, clock: ManualClock) -> None:
    """No gateway runs (it stopped since): the CLI erases what is stored,
    says nothing of a gateway, and no request is left for the next start."""
    async with FakeOpenAI(api_key=KEY, responder=_echo) as llm, FakeTelegram() as tg:
        app = _gateway(tmp_path, clock, llm, tg)
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            assert "Asia/Tokyo" in await _said(tg, ALICE, "/timezone Asia/Tokyo")
            await asyncio.wait_for(quiet(app), 30)
        finally:
            await asyncio.wait_for(app.close(), 30)
    code, out, err = await asyncio.wait_for(_forget(tmp_path, f"telegram:{ALICE}"), 150)
    assert code == 0, err
    assert f"forgot telegram:{ALICE}: " in out and "1 time zone setting" in out and "gateway" not in out, out
    assert files_holding(tmp_path, "Asia/Tokyo") == []
