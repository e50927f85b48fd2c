"""Chaos: SIGKILL the real gateway at random moments (docs/BENCHMARKS.md, "Chaos").

``myclaw gateway`` runs as a subprocess against the loopback fakes, run in
this process: the fake Telegram Bot API (several private chats), the fake
Feishu Open API over its long connection (two users; an event not
acknowledged is pushed again under the same ``event_id``, as Feishu
retries), and a fake OpenAI-compatible model (an echo that carries each
message's tag, after a random delay, so kills land mid-turn; extraction
answers one fact per user line, citing it). Extraction runs after a 1 s
quiet gap and a cron job runs every minute. Traffic flows the whole time;
each round starts the gateway, waits a seeded random time, SIGKILLs it
and checks, with the gateway dead:

* ``PRAGMA integrity_check`` and ``quick_check`` of every database;
* FTS5 ``integrity-check`` of every FTS table, and every active memory
  (every event) with its FTS row and no FTS row without one;
* the extraction buffer lost nothing: every message whose user row left
  Tier 0's buffer flag set is still buffered or became a fact;
* no fact twice (a re-run extraction of lines already extracted);
* both lock files free (a dead holder's ``flock`` is dropped).

After the last round the gateway runs until every message is answered (or
``--drain`` seconds pass) and stops with SIGTERM. Then each message must
have exactly one answer; one without is told apart by what Tier 0 holds
(the reply's row written but its send cut was the documented window until
the reply went to the outbox first, gateway/delivery.py; now it is a
violation). A Telegram message answered twice with a kill within 2 s of
its first answer is the documented at-least-once window (Telegram took
the reply, the kill came before its outbox row went); anything else
twice is a violation. Cron: at most one run per job and minute slot.

    .venv/bin/python scripts/chaos_kill.py                 # 30 rounds, seed 1
    .venv/bin/python scripts/chaos_kill.py --rounds 10 --seed 7 --keep /tmp/chaos

Exit 0 when no invariant broke, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import json
import logging
import os
import random
import resource
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakes.feishu_server import FakeFeishu  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, Reply, extraction_lines, split_user_content  # noqa: E402
from tests.fakes.telegram_server import FakeTelegram, SentMessage  # noqa: E402

API_KEY = "sk-chaos-0123456789abcdef"
TELEGRAM_USERS = [2001, 2002, 2003, 2004, 2005, 2006]
FEISHU_USERS = ["ou_chaos000000000000000000000001", "ou_chaos000000000000000000000002"]
CRON_CHAT = TELEGRAM_USERS[0]
CRON_TEXT = "chaos tick"
_TAG = re.compile(r"\[([tf]\d+-\d+)\]")
WORDS = ["coffee", "garden", "train", "bicycle", "piano", "novel", "harbour", "lantern", "meadow", "violin"]


@dataclass
class World:
    """What the fakes saw, across every gateway process."""

    rng: random.Random
    pushed: dict[str, str] = field(default_factory=dict)  # tag -> channel
    answers: Counter[str] = field(default_factory=Counter)
    answered_at: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))  # tag -> when each answer came
    cron_runs: list[float] = field(default_factory=list)  # when each cron reply was sent
    strays: int = 0
    feishu_waiting: list[dict[str, Any]] = field(default_factory=list)  # events not acknowledged yet
    seq: Counter[str] = field(default_factory=Counter)


def message_text(world: World, who: str) -> str:
    world.seq[who] += 1
    tag = f"{who}-{world.seq[who]}"
    w = world.rng.sample(WORDS, 2)
    return f"I like my {w[0]} and the {w[1]} [{tag}]"


def make_responder(world: World) -> Any:
    def respond(body: dict[str, Any]) -> Reply:
        delay = world.rng.uniform(0.0, 0.4)
        if body.get("response_format"):
            system = str(body["messages"][0].get("content") or "")
            user = str(body["messages"][-1].get("content") or "")
            merge = system.startswith("You consolidate")  # the weekly merge (the extraction's rules name "from" too)
            if system.startswith("You maintain") or merge:  # profile / weekly merge: keep as is
                numbered = re.findall(r"^(\d+)\. (?:\[[^\]]*\] )?(.*)$", user, re.M)
                if merge:
                    facts = [{"content": c, "category": "event", "importance": 0.5, "from": [int(n)]} for n, c in numbered]
                    return Reply(content=json.dumps({"facts": facts, "drop": []}), delay=delay)
                entries = [{"content": c[:100], "category": "identity", "facts": [int(n)]} for n, c in numbered[:20]]
                return Reply(content=json.dumps({"entries": entries}), delay=delay)
            lines = extraction_lines(body)  # extraction: every user line one fact, citing it
            facts = [{"content": text[:200], "category": "event", "importance": 0.5, "lines": [int(n)]}
                     for n, text in lines]
            summary = lines[0][1][:150] if lines else "conversation"
            return Reply(content=json.dumps({"facts": facts, "summary": summary}, ensure_ascii=False), delay=delay)
        _, last = split_user_content(str(body["messages"][-1].get("content") or ""))
        return Reply(content=f"You said: {' '.join(last.split())}", delay=delay)

    return respond


def count_reply(world: World, text: str, now: float) -> None:
    tags = _TAG.findall(text)
    if CRON_TEXT in text:
        world.cron_runs.append(now)
    elif len(tags) == 1:
        world.answers[tags[0]] += 1
        world.answered_at[tags[0]].append(now)
    else:
        world.strays += 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_config(home: Path, tg: FakeTelegram, fs: FakeFeishu, llm: FakeOpenAI) -> None:
    doc = {
        "provider": {"baseUrl": llm.url, "apiKey": API_KEY, "maxRetries": 0, "timeout": "10s"},
        "agent": {"model": "fake-model", "streaming": {"enabled": False}},
        "channels": {
            "telegram": {"enabled": True, "token": tg.token, "baseUrl": tg.base_url, "pollTimeout": 1},
            "feishu": {"enabled": True, "appId": fs.app_id, "appSecret": fs.app_secret, "domain": fs.url,
                       "mode": "websocket"},
        },
        "gateway": {"port": free_port(), "rateLimit": {"perMinute": 10_000, "perHour": 100_000}},
        "memory": {"extraction": {"quietGap": "1s"}},
        "cron": {"minIntervalMinutes": 1},
    }
    (home / "config.json").write_text(json.dumps(doc), encoding="utf-8")


def env_for(home: Path) -> dict[str, str]:
    env = dict(os.environ, MYCLAW_HOME=str(home), PYTHONPATH=str(ROOT))
    env.pop("MYCLAW_LOG_LEVEL", None)
    return env


def myclaw(*args: str) -> list[str]:
    return [sys.executable, "-c", "import sys; from gateway.cli import main; sys.exit(main())", *args]


# -- the invariants, read with the gateway dead ---------------------------------------------
def check(home: Path, *, final: bool = False) -> list[str]:
    data = home / "data"
    bad: list[str] = []
    for db in sorted(data.glob("*.db")):
        with contextlib.closing(sqlite3.connect(db)) as conn:
            for pragma in ("integrity_check", "quick_check"):
                rows = [r[0] for r in conn.execute(f"PRAGMA {pragma}")]
                if rows != ["ok"]:
                    bad.append(f"{db.name}: {pragma}: {rows[:3]}")
            fts = [r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE '%USING fts5(%'")]
            for table in fts:
                try:
                    conn.execute(f"INSERT INTO {table}({table}) VALUES('integrity-check')")
                except sqlite3.DatabaseError as exc:
                    bad.append(f"{db.name}: {table} integrity-check: {exc}")
    memdb = data / "memory.db"
    if memdb.exists():
        bad += _memory_checks(memdb, data / "memory.buffer.db", data / "gateway.db")
    for lock in ("gateway.lock", "myclaw.lock"):
        path = data / lock
        if path.exists():
            with open(path, "rb") as f:
                try:
                    fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    fcntl.flock(f.fileno(), fcntl.LOCK_UN)
                except BlockingIOError:
                    bad.append(f"{lock} still held with the gateway dead")
    return bad


def _memory_checks(memdb: Path, bufdb: Path, gwdb: Path) -> list[str]:
    bad: list[str] = []
    with contextlib.closing(sqlite3.connect(memdb)) as conn:
        if bufdb.exists():
            conn.execute("ATTACH DATABASE ? AS buffer", (str(bufdb),))
        for table, fts, where in (("memories", "memories_fts", "status = 'active'"), ("daily_events", "events_fts", "1")):
            missing = conn.execute(
                f"SELECT count(*) FROM {table} WHERE {where} AND id NOT IN (SELECT rowid FROM {fts})").fetchone()[0]
            orphans = conn.execute(
                f"SELECT count(*) FROM {fts} WHERE rowid NOT IN (SELECT id FROM {table} WHERE {where})").fetchone()[0]
            if missing or orphans:
                bad.append(f"{table}: {missing} rows without their FTS row, {orphans} FTS rows without theirs")
        twice = conn.execute(
            "SELECT owner, content, count(*) FROM memories WHERE status = 'active' "
            "GROUP BY owner, content HAVING count(*) > 1").fetchall()
        if twice:
            bad.append(f"{len(twice)} facts stored twice, e.g. {twice[0][1]!r} x{twice[0][2]}")
        facts = "\n".join(r[0] for r in conn.execute("SELECT content FROM memories"))
        buffered = "\n".join(r[0] for r in conn.execute("SELECT content FROM buffer.extraction_buffer")) \
            if bufdb.exists() else ""
    if gwdb.exists():
        with contextlib.closing(sqlite3.connect(gwdb)) as gw:
            rows = gw.execute("SELECT content FROM session_messages WHERE role = 'user' AND buffered = 1").fetchall()
        lost = [t for (content,) in rows for t in _TAG.findall(content) if f"[{t}]" not in buffered
                and f"[{t}]" not in facts]
        if lost:
            bad.append(f"{len(lost)} buffered messages neither buffered nor extracted, e.g. {lost[:3]}")
    return bad


def why_unanswered(home: Path, tags: list[str]) -> dict[str, str]:
    """What Tier 0 holds for each message that got no answer."""
    out: dict[str, str] = {}
    with contextlib.closing(sqlite3.connect(home / "data" / "gateway.db")) as gw:
        rows = gw.execute("SELECT role, content FROM session_messages ORDER BY id").fetchall()
    for tag in tags:
        mark = f"[{tag}]"
        roles = {role for role, content in rows if mark in content}
        # A reply's row is written after its outbox row (gateway/delivery.py,
        # "A reply on its way"): the next start sends it, so this is a bug now.
        out[tag] = ("reply row written, send cut" if "assistant" in roles
                    else "user row only" if "user" in roles else "not in Tier 0")
    return out


# -- traffic and the gateway ------------------------------------------------------------
async def traffic(world: World, tg: FakeTelegram, fs: FakeFeishu, stop: asyncio.Event) -> None:
    while not stop.is_set():
        if world.rng.random() < 0.8:
            user = world.rng.choice(TELEGRAM_USERS)
            text = message_text(world, f"t{user}")
            world.pushed[_TAG.findall(text)[0]] = "telegram"
            tg.push_text(user, user, text, username=f"user{user}")
        else:
            i = world.rng.randrange(len(FEISHU_USERS))
            text = message_text(world, f"f{i}")
            world.pushed[_TAG.findall(text)[0]] = "feishu"
            world.feishu_waiting.append(fs.message_event(text, chat_id=f"oc_chaos{i}", open_id=FEISHU_USERS[i],
                                                         union_id=f"on_chaos{i}", user_id=f"u_chaos{i}"))
        await asyncio.sleep(world.rng.uniform(0.05, 0.5))


async def feishu_pusher(world: World, fs: FakeFeishu, stop: asyncio.Event) -> None:
    """Push every event until it is acknowledged (same event_id each time)."""
    while not stop.is_set() or world.feishu_waiting:
        if not world.feishu_waiting or not fs.connected:
            await asyncio.sleep(0.05)
            if stop.is_set() and not fs.connected:
                await asyncio.sleep(0.2)
            continue
        event = world.feishu_waiting[0]
        try:
            ack = await fs.push_ws_event(event, timeout=2.0)
        except (TimeoutError, RuntimeError, ConnectionError, OSError):
            await asyncio.sleep(0.1)
            continue
        if ack.get("code") == 200:
            world.feishu_waiting.pop(0)


async def stop_gateway(proc: asyncio.subprocess.Process) -> tuple[int, bool]:
    """SIGTERM, then SIGKILL after 60 s: the exit code, and whether SIGTERM did it."""
    proc.send_signal(signal.SIGTERM)
    try:
        return await asyncio.wait_for(proc.wait(), 60), True
    except TimeoutError:
        proc.kill()
        return await proc.wait(), False


async def start_gateway(home: Path, log: Any, fsize: int | None = None) -> asyncio.subprocess.Process:
    """``fsize``: no file the gateway writes may grow past it (RLIMIT_FSIZE:
    a write past it fails with EFBIG, as on a full disk; Python ignores
    SIGXFSZ, so the process lives on)."""
    def limit() -> None:
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    return await asyncio.create_subprocess_exec(
        *myclaw("gateway", "--log-level", "INFO"), cwd=str(ROOT), env=env_for(home),
        stdout=log, stderr=log, start_new_session=True, preexec_fn=limit)


async def disk_full(home: Path, tg: FakeTelegram, seconds: float, margin: int) -> dict[str, Any]:
    """The gateway on a "full disk": every file may grow ``margin`` bytes
    past the largest data file (so memory.db, gateway.db, the buffer and
    their WALs soon cannot grow), with traffic, for ``seconds``; then
    SIGTERM. What it logged about the writes that failed is counted."""
    data = home / "data"
    largest = max(f.stat().st_size for f in data.iterdir() if f.is_file())
    with open(home / "gateway-diskfull.log", "wb") as log:
        before = tg.counts["sendmessage"]
        proc = await start_gateway(home, log, fsize=largest + margin)
        await asyncio.sleep(seconds)
        code, _ = await stop_gateway(proc)
    events: Counter[str] = Counter()
    for line in (home / "gateway-diskfull.log").read_text(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            doc = json.loads(line)
            if doc.get("level") in ("warning", "error", "critical"):
                events[str(doc.get("event"))[:90]] += 1
    return {"limit_bytes": largest + margin, "exit": code, "replies_sent": tg.counts["sendmessage"] - before,
            "warnings": dict(events.most_common(8))}


async def first_poll(tg: FakeTelegram, before: int, proc: asyncio.subprocess.Process) -> None:
    while tg.counts["getupdates"] == before and proc.returncode is None:
        await asyncio.sleep(0.02)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    world = World(rng=random.Random(args.seed))
    kill_rng = random.Random(args.seed * 7919 + 1)  # kill times apart from traffic, so both replay
    home = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="myclaw-chaos-"))
    home.mkdir(parents=True, exist_ok=True)
    tg = await FakeTelegram(strict_chats=False, record=False, first_id=1000).start()
    fs = await FakeFeishu().start()
    llm = await FakeOpenAI(api_key=API_KEY, responder=make_responder(world)).start()
    loop_time = time.monotonic

    def on_tg(m: SentMessage) -> None:
        count_reply(world, m.text, loop_time())

    tg.on_send = on_tg
    feishu_seen = 0
    write_config(home, tg, fs, llm)
    subprocess.run(myclaw("cron", "add", "--schedule", "* * * * *", "--message", CRON_TEXT, "--channel", "telegram",
                          "--chat-id", str(CRON_CHAT), "--user", f"telegram:{CRON_CHAT}", "--id", "chaos-tick"),
                   cwd=ROOT, env=env_for(home), check=True, capture_output=True)
    violations: list[str] = []
    kills: list[float] = []
    exits: Counter[str] = Counter()
    stop = asyncio.Event()
    tasks = [asyncio.create_task(traffic(world, tg, fs, stop)), asyncio.create_task(feishu_pusher(world, fs, stop))]
    started = time.monotonic()
    proc: asyncio.subprocess.Process | None = None
    full: dict[str, Any] | None = None
    with open(home / "gateway.log", "ab") as log, contextlib.ExitStack() as cleanup:
        # the script itself failing leaves no gateway running
        def kill_left() -> None:
            if proc is not None and proc.returncode is None:
                os.kill(proc.pid, signal.SIGKILL)

        cleanup.callback(kill_left)
        for rnd in range(args.rounds):
            polls = tg.counts["getupdates"]
            proc = await start_gateway(home, log)
            early = kill_rng.random() < args.early
            wait = kill_rng.uniform(0.5, 3.0) if early else kill_rng.uniform(args.min_up, args.max_up)
            try:
                if not early:  # the kill's moment counts from the first poll: start-up takes seconds of imports
                    await asyncio.wait_for(first_poll(tg, polls, proc), 60)
                code = await asyncio.wait_for(proc.wait(), wait)
                exits[f"exited {code} by itself"] += 1  # died before the kill: a start-up failure
                violations.append(f"round {rnd}: the gateway exited {code} by itself")
            except TimeoutError:
                os.kill(proc.pid, signal.SIGKILL)
                await proc.wait()
                kills.append(time.monotonic())
                exits["killed"] += 1
            for sent in fs.sent[feishu_seen:]:
                count_reply(world, str(sent.get("text") or ""), loop_time())
            feishu_seen = len(fs.sent)
            for v in await asyncio.to_thread(check, home):
                violations.append(f"round {rnd}: {v}")
        if args.disk_full:
            full = await disk_full(home, tg, args.disk_full, args.disk_margin)
            for v in await asyncio.to_thread(check, home):
                violations.append(f"disk full: {v}")
        # the last run: no kill; traffic stops, everything pushed is answered
        stop.set()
        proc = await start_gateway(home, log)
        deadline = time.monotonic() + args.drain
        while time.monotonic() < deadline:
            for sent in fs.sent[feishu_seen:]:
                count_reply(world, str(sent.get("text") or ""), loop_time())
            feishu_seen = len(fs.sent)
            if all(world.answers[t] for t in world.pushed) and not world.feishu_waiting:
                break
            await asyncio.sleep(0.2)
        await asyncio.sleep(args.settle)  # a late duplicate, and extraction of the last lines
        for sent in fs.sent[feishu_seen:]:
            count_reply(world, str(sent.get("text") or ""), loop_time())
        code, stopped = await stop_gateway(proc)
        if not stopped:
            violations.append("the last run did not stop within 60 s of SIGTERM")
        if code != 0:
            violations.append(f"the last run exited {code} on SIGTERM")
    for task in tasks:
        task.cancel()
    for v in await asyncio.to_thread(check, home, final=True):
        violations.append(f"final: {v}")
    twice = sorted(t for t, n in world.answers.items() if n > 1)
    never = sorted(t for t in world.pushed if not world.answers[t])
    reasons = why_unanswered(home, never)
    undocumented = [t for t in never if not reasons[t].endswith("(documented)")]
    # (with every update confirmed and every Feishu event acknowledged, "not in Tier 0" means the message
    # was on the gateway's in-memory bus, queued behind its chat's turn, when the process died)
    # A Telegram reply twice is the documented at-least-once window
    # (gateway/delivery.py, "A reply on its way") when a kill followed its
    # first send within 2 s: Telegram took it, the outbox row was not yet
    # removed, and Telegram has no idempotency key. Feishu drops the repeat (uuid).
    twice_why = {t: "telegram, a kill right after its send (documented)"
                 if world.pushed.get(t) == "telegram" and any(first <= k <= first + 2.0 for k in kills)
                 else "undocumented" for t in twice for first in [min(world.answered_at[t])]}
    twice_undocumented = [t for t in twice if twice_why[t] == "undocumented"]
    if twice_undocumented:
        violations.append(f"{len(twice_undocumented)} messages answered more than once: {twice_undocumented[:5]}")
    if undocumented:
        violations.append(f"{len(undocumented)} messages never answered: "
                          + ", ".join(f"{t} ({reasons[t]})" for t in undocumented[:5]))
    # cron: one run per job and minute slot (a catch-up at start counts for the slot it makes up)
    # A second reply in one minute is the documented at-least-once window
    # (gateway/cron.py) when a kill followed the first within 2 s: the run
    # was sent but not yet recorded.
    by_minute: dict[int, list[float]] = defaultdict(list)
    for t in world.cron_runs:
        by_minute[int((t - started) // 60)].append(t)
    cron_twice = {"documented": 0, "undocumented": 0}
    for runs in by_minute.values():
        for first in sorted(runs)[:-1]:
            window = any(first <= k <= first + 2.0 for k in kills)
            cron_twice["documented" if window else "undocumented"] += 1
    if cron_twice["undocumented"]:
        violations.append(f"cron ran twice in one minute with no kill after the first run: {cron_twice['undocumented']}")
    await tg.stop()
    await fs.stop()
    await llm.stop()
    by_channel = Counter(world.pushed.values())
    with contextlib.closing(sqlite3.connect(home / "data" / "memory.db")) as conn:
        conn.execute("ATTACH DATABASE ? AS buffer", (str(home / "data" / "memory.buffer.db"),))
        facts = conn.execute("SELECT count(*) FROM memories WHERE status = 'active'").fetchone()[0]
        buffered = conn.execute("SELECT count(*) FROM buffer.extraction_buffer").fetchone()[0]
    result = {
        "seed": args.seed,
        "rounds": args.rounds,
        "kills": exits["killed"],
        "exits": dict(exits),
        "messages": {"telegram": by_channel["telegram"], "feishu": by_channel["feishu"]},
        "answered_once": sum(1 for t in world.pushed if world.answers[t] == 1),
        "answered_twice": len(twice),
        "answered_twice_why": dict(Counter(twice_why.values())),
        "never_answered": len(never),
        "never_answered_why": dict(Counter(reasons.values())),
        "strays": world.strays,
        "telegram_updates_pending": tg.pending_updates,
        "feishu_events_unacknowledged": len(world.feishu_waiting),
        "cron_runs": len(world.cron_runs),
        "cron_second_runs_in_a_minute": cron_twice,
        "facts": facts,
        "still_buffered": buffered,
        "extraction_calls": sum(1 for r in llm.requests if r.get("response_format")),
        "seconds": round(time.monotonic() - started, 1),
        "disk_full": full,
        "violations": violations,
        "home": str(home) if args.keep else None,
    }
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description="SIGKILL the gateway at random moments and check the invariants.")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--min-up", type=float, default=0.0, help="shortest run after the first poll before a kill, seconds")
    ap.add_argument("--max-up", type=float, default=3.0, help="longest run after the first poll before a kill, seconds")
    ap.add_argument("--early", type=float, default=0.15, help="share of kills during start-up (0.5-3 s after spawn)")
    ap.add_argument("--drain", type=float, default=120.0, help="seconds the last run may take to answer everything")
    ap.add_argument("--settle", type=float, default=3.0, help="seconds the last run goes on after that")
    ap.add_argument("--disk-full", type=float, default=0.0, metavar="SECONDS",
                    help="before the last run, run the gateway this long with its files unable to grow (RLIMIT_FSIZE)")
    ap.add_argument("--disk-margin", type=int, default=16384, help="bytes a file may grow past the largest data file")
    ap.add_argument("--keep", metavar="DIR", help="the gateway's home (kept, with gateway.log) instead of a temp dir")
    ap.add_argument("--json", type=Path, help="also write the result to this file")
    args = ap.parse_args()
    # a kill cuts the fakes' requests short: aiohttp logs each as an error, which is the point here
    logging.getLogger("aiohttp").setLevel(logging.CRITICAL)
    result = asyncio.run(run(args))
    text = json.dumps(result, indent=2, ensure_ascii=False)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    sys.exit(1 if result["violations"] else 0)


if __name__ == "__main__":
    main()
