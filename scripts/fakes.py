"""Run the fake Telegram, Feishu and OpenAI-compatible servers by hand, to
try or demo myclaw without any real account:

    .venv/bin/python scripts/fakes.py --telegram 8081 --feishu 8082 --openai 8083

(no option: all three, on those ports). It prints the base URLs and a
config snippet to put in ``$MYCLAW_HOME/config.json``; then start
``myclaw gateway`` in another terminal and type here:

    t: hello            a Telegram message from the demo user
    f: 我之前说过什么？   a Feishu message (over the long connection;
                         by webhook with --feishu-webhook URL)

and so on for a second user, a group with both, a file, an edit and a
Feishu recall (:data:`HELP`, printed at the start, lists the lines;
:class:`Demo` runs them). The printed config has the memory learn half
a minute after the user stops talking, not three minutes.

The bot's replies are printed as they arrive. The OpenAI fake answers with
a readable echo of the last user line, and with valid JSON (facts taken
from the user's lines) when asked for ``response_format`` -- the memory
extraction, merge and profile calls -- so the write path runs too. A line
starting with "forget" or 忘记 (``t: forget that I live in Berlin``) makes it call
the ``memory_forget`` tool on the memory recalled first for that line, as a
real model would, so erasing by asking can be tried too.

With ``--gateway DIR`` the gateway runs here too (DIR is its
MYCLAW_HOME, a scratch one: the printed config is written there), on a
clock this terminal moves: ``clock: +1d`` ends the demo user's day, so
what they said is learnt and the daily compression runs, as the night
would do (``+7d`` reaches the weekly one; decay shows in days too), and
a scheduled message it passes is sent at its own time on that clock. The
clock only moves on: the data's times are ahead of the real ones, which a
gateway started on DIR later with the real clock would take for the future.

With ``--pace 0.4`` the echo is streamed a word every 0.4 s, as a slow
model writes: replies that take longer than ``agent.streaming.delay`` (1 s)
show while they are written, and the drafts are printed here as
"(writing)" lines: Telegram's ``sendMessageDraft`` in the private chat,
Feishu's message edited as it grows.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import re
import signal
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gateway.app import App, config_secrets  # noqa: E402
from gateway.config import Paths, load_config, parse_duration  # noqa: E402
from gateway.cron import INTERNAL_DAILY, INTERNAL_WEEKLY, CronScheduler  # noqa: E402
from gateway.logging import configure_logging  # noqa: E402
from memory.clock import Clock, parse_ts  # noqa: E402
from memory.extraction import ExtractionService  # noqa: E402
from tests.fakes.feishu_server import FakeFeishu  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, Reply, extraction_lines, split_user_content  # noqa: E402
from tests.fakes.telegram_server import DEFAULT_TOKEN, FakeTelegram, SentDocument, SentMessage  # noqa: E402

__all__ = ["Demo", "DemoClock", "echo_reply", "forget_reply", "json_reply", "responder"]

API_KEY = "sk-fake-0123456789"
DEMO_TELEGRAM_USER = 1001
DEMO_FEISHU_USER = "ou_demo0000000000000000000000001"
DEMO_FEISHU_CHAT = "oc_demo0001"
DEMO_TELEGRAM_USER_2 = 1002  # Bob, the group's other member
DEMO_TELEGRAM_GROUP = -1001000000001
DEMO_FEISHU_USER_2 = "ou_demo0000000000000000000000002"
DEMO_FEISHU_GROUP = "oc_demogroup01"

_NUMBERED = re.compile(r"^(\d+)\. (?:\[[^\]]*\] )?(.*)$", re.M)


_FORGET = re.compile(r"^(?:please\s+)?forget\b|^请?忘(?:记|掉)", re.I)
_CITED = re.compile(r"^- \[(m\d+) · [^\]]*\] (.*)$", re.M)
_WORD = re.compile(r"\w{3,}")
_NOT_A_TOPIC = {"forget", "please", "that", "about", "the", "and", "you", "what", "said"}


_CJK_RUN = re.compile(r"[\u3400-\u9fff]+")


def _topic(text: str) -> set[str]:
    """Words of three letters or more, and the two-character pieces of
    Chinese (written without spaces), minus the request's own words."""
    low = text.lower()
    words = {w for w in _WORD.findall(_CJK_RUN.sub(" ", low)) if w not in _NOT_A_TOPIC}
    for run in _CJK_RUN.findall(low):
        words |= {run[i : i + 2] for i in range(len(run) - 1)}
    return words - {"忘记", "忘掉"}


def echo_reply(body: dict[str, Any]) -> str:
    """"You said: <the user's line>" (the memory block, if any, is left out)."""
    block, last = split_user_content(str(body["messages"][-1].get("content") or ""))
    hits = block.count("\n- [")
    line = " ".join(last.split())
    note = f" (I was reminded of {hits} memor{'y' if hits == 1 else 'ies'})" if hits else ""
    return f"You said: {line}{note}"


def forget_reply(body: dict[str, Any]) -> Reply | None:
    """For "forget ...": a ``memory_forget`` call on the first memory
    recalled for the line that shares a word with it (recall may bring
    unrelated ones: a model would not erase those, nor does this), then,
    given the tool's answer, a reply quoting it. None when the line asks
    nothing of the kind."""
    last = body["messages"][-1]
    offered = {t.get("function", {}).get("name") for t in body.get("tools") or []}
    if last.get("role") == "tool":
        return Reply(content="Done. " + str(last.get("content") or "").split("\n", 1)[0])
    block, line = split_user_content(str(last.get("content") or ""))
    if last.get("role") != "user" or not _FORGET.match(line.strip()) or "memory_forget" not in offered:
        return None
    wanted = _topic(line)
    ids = [ref for ref, content in _CITED.findall(block) if wanted & _topic(content)][:1]
    if not ids:
        return Reply(content="I found nothing stored about that, so there is nothing to forget.")
    return Reply(content=None, tool_calls=[{"name": "memory_forget", "arguments": {"ids": ids}}])


def json_reply(body: dict[str, Any]) -> str:
    """A valid answer to the memory write path's JSON requests."""
    system = str(body["messages"][0].get("content") or "")
    user = str(body["messages"][-1].get("content") or "")
    numbered = _NUMBERED.findall(user)
    if system.startswith("You maintain"):  # Tier 1 profile refresh: keep the facts given
        entries = [{"content": c[:100], "category": "identity", "facts": [int(n)]} for n, c in numbered[:20]]
        return json.dumps({"entries": entries})
    # By the prompt's opening words: the extraction prompt names "from" too
    # (project renames), so a key test would take it for the merge.
    if system.startswith("You consolidate"):  # weekly merge: keep every fact as it is
        facts = [{"content": c, "category": "event", "importance": 0.5, "from": [int(n)]} for n, c in numbered]
        return json.dumps({"facts": facts, "drop": []}, ensure_ascii=False)
    users = extraction_lines(body)  # extraction: one fact per user line, citing it
    facts = [{"content": u[:200], "category": "event", "importance": 0.5, "lines": [int(n)]} for n, u in users[:5]]
    summary = users[0][1] if users else "conversation"
    return json.dumps({"facts": facts, "summary": summary[:150]}, ensure_ascii=False)


def responder(body: dict[str, Any], pace: float = 0.0) -> Reply:
    """``pace``: seconds between the words of a streamed echo (0: at once)."""
    if body.get("response_format"):
        return Reply(content=json_reply(body))
    return forget_reply(body) or Reply(content=echo_reply(body), piece_delay=pace)


def config_snippet(tg: FakeTelegram | None, fs: FakeFeishu | None, llm: FakeOpenAI | None, webhook: str | None) -> str:
    """The config that points myclaw at the fakes. With ``webhook`` (the URL
    events are pushed to), the gateway must listen there: its host, port
    and path go into the snippet too, or the pushes find nobody."""
    doc: dict[str, Any] = {}
    if llm is not None:
        doc["provider"] = {"baseUrl": llm.url, "apiKey": API_KEY}
        doc["agent"] = {"model": "fake-model"}
        # Learnt half a minute after the demo user stops (3 min by default): /memory shows it while they watch.
        doc["memory"] = {"extraction": {"quietGap": "30s"}}
    channels: dict[str, Any] = {}
    if tg is not None:
        channels["telegram"] = {"enabled": True, "token": tg.token, "baseUrl": tg.base_url}
    if fs is not None:
        section: dict[str, Any] = {"enabled": True, "appId": fs.app_id, "appSecret": fs.app_secret, "domain": fs.url}
        if webhook:
            url = urlsplit(webhook)
            section.update(mode="webhook", verificationToken=fs.verification_token, webhookPath=url.path or "/feishu/events")
            doc["gateway"] = {"host": url.hostname or "127.0.0.1", "port": url.port or 80}
        else:
            section["mode"] = "websocket"
        channels["feishu"] = section
    if channels:
        doc["channels"] = channels
    return json.dumps(doc, indent=2, ensure_ascii=False)


async def _watch_feishu(fs: FakeFeishu) -> None:
    shown = edited = 0
    while True:
        await asyncio.sleep(0.2)
        for m in fs.sent[shown:]:
            if m["msg_type"] == "file":  # /export: the file's name and size, its words stay in the fake
                print(f"[feishu {m['chat_id']}] bot sent a file: {m['file_name']} ({len(m['data'])} bytes)", flush=True)
            else:
                print(f"[feishu {m['chat_id']}] bot: {m['text']}", flush=True)
        shown = len(fs.sent)
        for e in fs.edits[edited:]:  # a streamed reply: its message grows, then becomes the reply
            print(f"[feishu {e['message_id']}] bot (edited): {e['text']}", flush=True)
        edited = len(fs.edits)


async def _watch_telegram_drafts(tg: FakeTelegram) -> None:
    shown = 0
    while True:
        await asyncio.sleep(0.2)
        for d in tg.drafts[shown:]:
            print(f"[telegram {d.chat_id}] bot (writing): {d.text or '…'}", flush=True)
        shown = len(tg.drafts)


_MIMES = {"txt": "text/plain", "md": "text/markdown", "csv": "text/csv", "pdf": "application/pdf",
          "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
          "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"}
HELP = """type a line for a fake user (the bot answers below):
  t: <text>                   Demo, in a private Telegram chat      t2: <text>  Bob, in his own
  tg: <text>, tg2: <text>     Demo or Bob in a Telegram group (@myclaw_bot, or a command: /help)
  tfile: <path> [caption]     Demo sends a file on Telegram         tedit: <text>  Demo edits their last message
  f: <text>                   Demo in a private Feishu chat         fg: / fg2:  a Feishu group (@bot, or a command: /help)
  ffile: <path>               Demo sends a file on Feishu           frecall:  Demo recalls their last Feishu message
  clock: +1d                  moves the demo's clock a day on (with --gateway): the day's memory jobs run"""


class DemoClock(Clock):
    """The real time plus how far the demo moved it on (never back: a
    stored time in the future would hold jobs back)."""

    def __init__(self, real: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self._real = real
        self.ahead = timedelta(0)

    def now(self) -> datetime:
        return self._real() + self.ahead

    def advance(self, delta: timedelta) -> datetime:
        self.ahead += delta
        return self.now()


_JOB_NAMES = {INTERNAL_DAILY: "daily compression", INTERNAL_WEEKLY: "weekly compression"}
# Job runs one clock move steps through at most (a job every 10 minutes
# over +30d would be 4,320 replies): past it, the rest catch up at the end.
_MAX_STEPS = 500


class Demo:
    """What a line typed in the fakes' terminal does: two fake users (Demo
    and Bob), each in a private chat and in one group, on either platform;
    a file, an edit and a recall. Returns a note to print (None: nothing
    to say, the bot's answer shows when it comes)."""

    def __init__(self, tg: FakeTelegram | None, fs: FakeFeishu | None, webhook: str | None, *,
                 clock: DemoClock | None = None, app: App | None = None) -> None:
        self.tg, self.fs, self.webhook = tg, fs, webhook
        self.clock, self.app = clock, app  # the gateway run here (--gateway), on a clock this terminal moves
        self._last_telegram: int | None = None  # Demo's last Telegram message in their private chat (tedit)
        self._last_feishu: str | None = None  # and on Feishu (frecall)

    async def handle(self, line: str) -> str | None:
        kind, _, text = line.strip().partition(":")
        kind, text = kind.strip(), text.strip()
        if kind in ("t", "t2", "tg", "tg2", "tfile", "tedit"):
            return self._telegram(kind, text) if self.tg is not None else "the Telegram fake is not running"
        if kind in ("f", "fg", "fg2", "ffile", "frecall"):
            return await self._feishu(kind, text) if self.fs is not None else "the Feishu fake is not running"
        if kind == "clock":
            return await self._move_clock(text)
        return HELP if line.strip() else None

    async def _move_clock(self, text: str) -> str:
        """``clock: +1d``: what was said is learnt, then the clock goes on
        from one job's time to the next, each run there rather than at the
        gateway's next poll (up to 15 s), and on to where it was asked."""
        if self.clock is None or self.app is None:
            return ("clock: the gateway runs in another process, on the real time; start the fakes with "
                    "--gateway DIR to run it here, on a clock this terminal moves")
        if not text:
            return self._clock_line()
        try:
            delta = parse_duration(text.removeprefix("+"))
        except ValueError:
            return "clock: +1d, +6h or +1h30m moves the demo's clock on (never back); clock: alone shows it"
        ahead, target = self.clock.ahead + delta, self.clock.now() + delta
        said: list[str] = []
        if self.app.loop is not None:
            await self.app.loop.drain(10)  # the last messages buffered for memory
        ex = self.app.extraction
        if isinstance(ex, ExtractionService):  # learnt first, as the night's flush comes before compression
            before = (await ex.engine.backlog()).lines
            for owner in await ex.due_owners(target):  # quiet by then
                await ex.flush_now(owner)  # waits for a flush of theirs the gateway's loop already runs
            learnt = before - (await ex.engine.backlog()).lines
            if learnt > 0:
                said.append(f"learnt from {learnt} line{'s' if learnt != 1 else ''} of chat")  # the user's and the bot's
        if isinstance(self.app.cron, CronScheduler):
            said += await self._run_jobs_until(self.app.cron, target)
        self.clock.ahead = max(self.clock.ahead, ahead)  # a whole day on, however long the jobs took
        return "; ".join([self._clock_line(), *said])

    def _move_to(self, at: datetime) -> None:
        assert self.clock is not None
        if at > self.clock.now():  # never back
            self.clock.advance(at - self.clock.now())

    async def _run_jobs_until(self, cron: CronScheduler, target: datetime) -> list[str]:
        """The clock on to each scheduled message's time up to ``target``, in
        order, and the job run there, as a gateway left running would: a
        reminder runs at its 09:00, not at the jump's end with a note that it
        is late. Then, at ``target``, the memory jobs: ``+1d`` ends the day,
        so its daily compression runs (at 03:00 it would take the day before)."""
        runs: dict[str, list[str]] = {}
        for _ in range(_MAX_STEPS):
            due = [job for job in await cron.store.due(target) if not job.internal]
            if not due:
                break
            self._move_to(parse_ts(due[0].next_run_at))
            now = self.clock.now()  # type: ignore[union-attr]
            ran = await cron.run_due(only={job.id for job in due if parse_ts(job.next_run_at) <= now})
            if not ran:
                break  # due but already running (the gateway's own poll took it): it ends on its own
            for run in ran:
                runs.setdefault(run.job_id, []).append(run.status)
        self._move_to(target)
        ran = await cron.run_due()
        for _ in range(3):
            # Due together (+7d), one compression finds the other's lease
            # held and looks again a minute later: that minute, now.
            if not any(run.status == "busy" for run in ran):
                break
            self._move_to(self.clock.now() + cron.busy_retry)  # type: ignore[union-attr]
            ran = [run for run in ran if run.status != "busy"] + await cron.run_due()
        for run in ran:
            runs.setdefault(run.job_id, []).append(run.status)
        said = []
        for job_id, statuses in runs.items():
            times = f" {len(statuses)} times" if len(statuses) > 1 else ""
            failed = sorted({st for st in statuses if st != "ok"})
            said.append(f"{_JOB_NAMES.get(job_id, job_id)} ran{times}" + (f": {', '.join(failed)}" if failed else ""))
        return said

    def _clock_line(self) -> str:
        assert self.clock is not None
        ahead = self.clock.ahead
        return (f"demo clock: {self.clock.now():%Y-%m-%d %H:%M} UTC, "
                + (f"{_span(ahead)} ahead of the real time" if ahead else "the real time"))

    def _telegram(self, kind: str, text: str) -> str | None:
        tg = self.tg
        assert tg is not None
        user, name, first = ((DEMO_TELEGRAM_USER_2, "bob", "Bob") if kind.endswith("2")
                             else (DEMO_TELEGRAM_USER, "demo_user", "Demo"))
        if kind == "tedit":
            if self._last_telegram is None or not text:
                return "tedit: <text> edits Demo's last Telegram message: send one first (t: ...)"
            tg.push_edit(DEMO_TELEGRAM_USER, self._last_telegram, text)
            return None
        if kind == "tfile":
            path, _, caption = text.partition(" ")
            file = Path(path).expanduser()
            if not path or not file.is_file():
                return f"tfile: no file at {path!r} (tfile: <path> [caption])"
            sent = tg.push_document(DEMO_TELEGRAM_USER, DEMO_TELEGRAM_USER, file.read_bytes(), file_name=file.name,
                                    mime_type=_MIMES.get(file.suffix.lstrip(".").lower(), "application/octet-stream"),
                                    caption=caption.strip() or None)
        elif not text:
            return HELP
        elif kind.startswith("tg"):
            tg.push_text(DEMO_TELEGRAM_GROUP, user, text, username=name, first_name=first, chat_type="supergroup")
            return None
        else:
            sent = tg.push_text(user, user, text, username=name, first_name=first)
        if user == DEMO_TELEGRAM_USER:
            self._last_telegram = int(sent["message_id"])
        return None

    async def _feishu(self, kind: str, text: str) -> str | None:
        fs = self.fs
        assert fs is not None
        if kind == "frecall":
            if self._last_feishu is None:
                return "frecall: Demo has sent no Feishu message yet (f: ...)"
            return await self._push(fs.recall_event(self._last_feishu))
        if kind == "ffile":
            file = Path(text).expanduser()
            if not text or not file.is_file():
                return f"ffile: no file at {text!r} (ffile: <path>)"
            event = fs.message_event(message_type="file", content={"file_key": fs.add_file(file.read_bytes()),
                                                                     "file_name": file.name},
                                     chat_id=DEMO_FEISHU_CHAT, open_id=DEMO_FEISHU_USER)
        elif not text:
            return HELP
        elif kind.startswith("fg"):
            user = DEMO_FEISHU_USER_2 if kind == "fg2" else DEMO_FEISHU_USER
            mentions = [fs.mention()] if "@bot" in text else None  # Feishu writes a mention as its key
            event = fs.message_event(text.replace("@bot", "@_user_1"), chat_id=DEMO_FEISHU_GROUP, chat_type="group",
                                     open_id=user, mentions=mentions)
            return await self._push(event)
        else:
            event = fs.message_event(text, chat_id=DEMO_FEISHU_CHAT, open_id=DEMO_FEISHU_USER)
        self._last_feishu = event["event"]["message"]["message_id"]
        return await self._push(event)

    async def _push(self, event: dict[str, Any]) -> str | None:
        fs = self.fs
        assert fs is not None
        try:
            if self.webhook:
                r = await fs.push_event(self.webhook, event)
                return None if r.status_code == 200 else f"webhook answered {r.status_code}: {r.text}"
            await fs.push_ws_event(event)
        except Exception as exc:  # a demo: say what went wrong and go on
            return f"could not deliver the Feishu event: {exc!r} (is the gateway running?)"
        return None


def _span(delta: timedelta) -> str:
    days, hours = delta.days, delta.seconds // 3600
    minutes = delta.seconds % 3600 // 60
    parts = [(days, "day"), (hours, "hour"), (minutes, "minute")]
    return " ".join(f"{n} {word}{'s' if n != 1 else ''}" for n, word in parts if n) or "under a minute"


async def _read_lines(demo: Demo) -> None:
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[str] = asyncio.Queue()

    def read() -> None:
        for line in iter(sys.stdin.readline, ""):
            loop.call_soon_threadsafe(lines.put_nowait, line)
        loop.call_soon_threadsafe(lines.put_nowait, "")

    # A daemon thread of its own, not the loop's executor: asyncio.run joins
    # that at exit, and a readline waiting for Enter held Ctrl-C's exit.
    threading.Thread(target=read, name="fakes-stdin", daemon=True).start()
    while True:
        line = await lines.get()
        if not line:
            return
        note = await demo.handle(line)
        if note:
            print(note, flush=True)


async def start_gateway(home: Path, snippet: str, clock: Clock, *, log_level: str | None = None) -> App:
    """myclaw's gateway on ``home`` (its MYCLAW_HOME), in this process and
    on ``clock``: the printed config is written there, unless one is (then
    that one runs). Only the config's values count, not the environment's.
    ``log_level``: set up logging (its secrets named), as ``myclaw gateway`` does."""
    home.mkdir(parents=True, exist_ok=True)
    config = home / "config.json"
    if not config.exists():
        config.write_text(snippet, encoding="utf-8")
    cfg = load_config(config, env={"MYCLAW_HOME": str(home)}, require=True)
    if log_level is not None:
        configure_logging(level=log_level, secrets=config_secrets(cfg))
    app = App(cfg, Paths(home), clock=clock)
    try:
        await app.open()
        await app.start()
    except BaseException:
        await app.close()
        raise
    return app


def _stop_on_signals() -> asyncio.Event:
    """Set by SIGINT (Ctrl-C) or SIGTERM, as ``myclaw gateway`` stops. Our
    own handlers, not Python's: started with SIGINT ignored (a script's
    background job, some supervisors), Python keeps it ignored and Ctrl-C
    did nothing; SIGTERM killed it without closing the gateway's data."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # not POSIX / not the main thread: Python's own handling
            pass
    return stop


async def serve(args: argparse.Namespace) -> None:
    tg = fs = llm = None
    app: App | None = None
    stop = _stop_on_signals()
    try:
        if args.telegram is not None:
            # Ids go on from the last run's (by the clock), as Telegram's do.
            first_id = int(time.time() * 10) % 2_000_000_000
            tg = await FakeTelegram(args.token, strict_chats=False, first_id=first_id).start(args.telegram)

            def show(m: SentMessage) -> None:
                print(f"[telegram {m.chat_id}] bot: {m.text}", flush=True)

            def show_document(d: SentDocument) -> None:
                print(f"[telegram {d.chat_id}] bot sent a file: {d.filename} ({len(d.data)} bytes)"
                      + (f" with: {d.caption}" if d.caption else ""), flush=True)

            tg.on_send = show
            tg.on_document = show_document
        if args.feishu is not None:
            fs = await FakeFeishu().start(args.feishu)
        if args.openai is not None:
            llm = await FakeOpenAI(api_key=API_KEY, responder=functools.partial(responder, pace=args.pace)).start(args.openai)
        for name, url in (("Telegram Bot API", tg and tg.base_url), ("Feishu Open API", fs and fs.url), ("OpenAI", llm and llm.url)):
            if url:
                print(f"fake {name}: {url}")
        snippet = config_snippet(tg, fs, llm, webhook=args.feishu_webhook)
        clock: DemoClock | None = None
        if args.gateway is not None:
            clock = DemoClock()
            home = Path(args.gateway).expanduser()
            # Its warnings and errors only: the replies are what the terminal shows.
            app = await start_gateway(home, snippet, clock, log_level="WARNING")
            print(f"\nmyclaw's gateway runs here on {home / 'config.json'}, on the demo's clock (clock: +1d moves it); "
                  f"Ctrl-C stops.\n{HELP}", flush=True)
        else:
            print("\nconfig.json for myclaw (or merge into yours):")
            print(snippet)
            print("\nsave it as config.json in a scratch folder and run `MYCLAW_HOME=<that folder> myclaw gateway`"
                  f" (or start the fakes with --gateway DIR); Ctrl-C stops.\n{HELP}", flush=True)
        tasks = [asyncio.create_task(_read_lines(Demo(tg, fs, args.feishu_webhook, clock=clock, app=app)))]
        if fs is not None:
            tasks.append(asyncio.create_task(_watch_feishu(fs)))
        if tg is not None:
            tasks.append(asyncio.create_task(_watch_telegram_drafts(tg)))
        await stop.wait()
    finally:
        if app is not None:
            await app.close()
        for fake in (tg, fs, llm):
            if fake is not None:
                await fake.stop()


def main() -> None:
    # The docstring's opening ends in a colon before its example: show both, and the default.
    intro, example = __doc__.split("\n\n")[:2]
    ap = argparse.ArgumentParser(description=f"{intro}\n\n{example}\n\n(no port option: all three, on those ports)",
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--telegram", type=int, metavar="PORT", help="fake Telegram Bot API port")
    ap.add_argument("--feishu", type=int, metavar="PORT", help="fake Feishu Open API port")
    ap.add_argument("--openai", type=int, metavar="PORT", help="fake OpenAI-compatible API port")
    ap.add_argument("--token", default=DEFAULT_TOKEN, help="the Telegram bot token the fake accepts")
    ap.add_argument("--feishu-webhook", metavar="URL",
                    help="push Feishu events to this webhook (e.g. http://127.0.0.1:18790/feishu/events) "
                         "instead of over the long connection")
    ap.add_argument("--pace", type=float, default=0.0, metavar="SECONDS",
                    help="stream the fake model's echo a word every SECONDS (e.g. 0.4), to see replies shown "
                         "while they are written; 0 (default): at once")
    ap.add_argument("--gateway", metavar="DIR",
                    help="also run myclaw's gateway here, with DIR (a scratch one) as its MYCLAW_HOME, on a clock "
                         "this terminal moves (clock: +1d) to see the nightly memory jobs")
    args = ap.parse_args()
    if args.telegram is None and args.feishu is None and args.openai is None:
        args.telegram, args.feishu, args.openai = 8081, 8082, 8083
    try:
        asyncio.run(serve(args))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
