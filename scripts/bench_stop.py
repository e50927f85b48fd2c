"""How long an ordinary stop of ``myclaw gateway`` takes (docs/BENCHMARKS.md, "Stop").

``myclaw gateway`` runs as a subprocess against the loopback fakes run in
this process (Telegram with the default 30 s long poll, Feishu by webhook,
a fake OpenAI-compatible model) and gets a SIGTERM; the figure is the time
from the signal to the process's exit. Scenarios:

* ``idle``: one message answered, then a quiet second (a long poll waiting);
* ``turn``: the model takes ``--answer`` seconds to answer the message the
  stop finds under way (the stop waits for it and sends the reply);
* ``held``: Telegram and Feishu each take a reply and never answer (their
  sends are under way at the stop): the stop waits for the queued replies
  (5 s at most, within its 10 s timeout), then for the sends under way, up
  to the send grace (5 s), and keeps them in the outbox;
* ``late``: as ``held``, but the stop comes while the model still takes
  ``--late`` seconds over both answers: the wait for the queued replies
  gets what is left of the timeout;
* ``withdraw``: as ``held`` on Telegram, while Feishu is withdrawing the
  reply to a recalled message and never answers the DELETE: the channel's
  stop waits for it only in what is left of the timeout plus the grace.

Also counted from the gateway's log: "channel intake cut at shutdown"
(a channel's intake cut rather than ended in its share of the stop).

    .venv/bin/python scripts/bench_stop.py                      # every scenario, 3 runs each
    .venv/bin/python scripts/bench_stop.py --runs 5 --only idle
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakes.feishu_server import FakeFeishu  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, Reply, said  # noqa: E402
from tests.fakes.telegram_server import FakeTelegram  # noqa: E402

API_KEY = "sk-bench-stop-0123456789abcdef"
ENCRYPT_KEY = "bench-stop-encrypt-key"
CUT = "channel intake cut at shutdown"  # its share of the stop ran out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_config(home: Path, tg: FakeTelegram, fs: FakeFeishu | None, llm: FakeOpenAI, port: int) -> None:
    channels: dict[str, Any] = {"telegram": {"enabled": True, "token": tg.token, "baseUrl": tg.base_url}}
    if fs is not None:
        channels["feishu"] = {"enabled": True, "appId": fs.app_id, "appSecret": fs.app_secret, "domain": fs.url,
                              "mode": "webhook", "verificationToken": fs.verification_token,
                              "encryptKey": ENCRYPT_KEY}
    doc = {
        "provider": {"baseUrl": llm.url, "apiKey": API_KEY, "maxRetries": 0, "timeout": "30s"},
        "agent": {"model": "fake-model", "streaming": {"enabled": False}},
        "channels": channels,
        "gateway": {"host": "127.0.0.1", "port": port},
    }
    (home / "config.json").write_text(json.dumps(doc), encoding="utf-8")


async def one_stop(scenario: str, answer: float, late: float) -> tuple[float, int, int]:
    """Seconds from SIGTERM to exit, the exit code, and how many intakes were cut."""
    delay = {"turn": answer, "late": late}.get(scenario, 0.0)
    asked = asyncio.Event()

    async def respond(body: dict[str, Any]) -> Reply:
        asked.set()
        await asyncio.sleep(delay)
        return Reply(content="re: " + said(body))

    with tempfile.TemporaryDirectory(prefix="bench-stop-") as tmp:
        home = Path(tmp)
        port = free_port()
        async with FakeOpenAI(api_key=API_KEY, responder=respond) as llm, FakeTelegram() as tg, FakeFeishu() as fs:
            write_config(home, tg, fs if scenario in ("held", "late", "withdraw") else None, llm, port)
            env = {k: v for k, v in os.environ.items() if not k.startswith("MYCLAW_")}
            env.update(MYCLAW_HOME=str(home), PYTHONPATH=str(ROOT))
            log = (home / "gateway.log").open("wb")
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-c", "import sys; from gateway.cli import main; sys.exit(main())", "gateway",
                cwd=str(ROOT), env=env, stdout=log, stderr=log)
            try:
                await wait_running(home / "gateway.log")
                if scenario == "withdraw":
                    url = f"http://127.0.0.1:{port}/feishu/events"
                    event = fs.message_event("hello from feishu", chat_id="oc_bench", open_id="ou_bench")
                    asked_id = event["event"]["message"]["message_id"]
                    assert (await fs.push_event(url, event, encrypt_key=ENCRYPT_KEY)).status_code == 200
                    await wait_until(lambda: len(fs.sent) == 1)
                    fs.hold_delete(fs.sent[0]["message_id"])  # withdrawn, its answer never comes
                    recall = fs.recall_event(asked_id, chat_id="oc_bench")
                    assert (await fs.push_event(url, recall, encrypt_key=ENCRYPT_KEY)).status_code == 200
                    await wait_until(lambda: any(m == "DELETE" for m, _ in fs.requests))
                    tg.slow_next("sendMessage")
                    tg.push_text(42, 42, "hello from telegram")
                    await tg.wait_sent(1, timeout=30)
                elif scenario in ("held", "late"):
                    tg.slow_next("sendMessage")  # taken, its answer never comes (until the fake stops)
                    feishu_took = fs.cut_next(accepted=True)
                    event = fs.message_event("hello from feishu", chat_id="oc_bench", open_id="ou_bench")
                    url = f"http://127.0.0.1:{port}/feishu/events"
                    assert (await fs.push_event(url, event, encrypt_key=ENCRYPT_KEY)).status_code == 200
                    tg.push_text(42, 42, "hello from telegram")
                    if scenario == "late":
                        await asyncio.wait_for(asked.wait(), 30)
                        await asyncio.sleep(0.5)  # both turns under way
                    else:
                        await tg.wait_sent(1, timeout=30)
                        await asyncio.wait_for(feishu_took.wait(), 30)
                elif scenario == "turn":
                    tg.push_text(42, 42, "hello")
                    await asyncio.wait_for(asked.wait(), 30)
                else:
                    tg.push_text(42, 42, "hello")
                    await tg.wait_sent(1, timeout=30)
                    await asyncio.sleep(1.0)  # a long poll waiting
                began = time.monotonic()
                proc.send_signal(signal.SIGTERM)
                code = await asyncio.wait_for(proc.wait(), 120)
                took = time.monotonic() - began
                if scenario == "turn":
                    assert tg.texts() == ["re: hello"], tg.texts()  # answered before the exit
            finally:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
                log.close()
        text = (home / "gateway.log").read_text(encoding="utf-8", errors="replace")
        return took, code, text.count(CUT)


async def wait_until(done: Any) -> None:
    async with asyncio.timeout(30):
        while not done():
            await asyncio.sleep(0.05)


async def wait_running(path: Path) -> None:
    async with asyncio.timeout(60):
        while b'"gateway running"' not in path.read_bytes():
            await asyncio.sleep(0.05)


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", choices=["idle", "turn", "held", "late", "withdraw"], action="append")
    ap.add_argument("--answer", type=float, default=2.0, help="seconds the model takes in the 'turn' scenario")
    ap.add_argument("--late", type=float, default=8.0, help="seconds the model takes in the 'late' scenario")
    args = ap.parse_args()
    for scenario in args.only or ["idle", "turn", "held", "late", "withdraw"]:
        times: list[float] = []
        cut = 0
        for _ in range(args.runs):
            took, code, cuts = await one_stop(scenario, args.answer, args.late)
            if code != 0:
                print(f"{scenario}: exit code {code}", file=sys.stderr)
                return 1
            times.append(took)
            cut += cuts
        print(f"{scenario:8}  runs {args.runs}  median {statistics.median(times):6.2f} s  "
              f"max {max(times):6.2f} s  intake cut {cut}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
