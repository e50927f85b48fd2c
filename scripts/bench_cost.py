"""What memory costs in model tokens (docs/BENCHMARKS.md, "Model tokens").

Three users chat through the real App (echo channel, real SQLite files) on
the fake OpenAI-compatible server for some weeks: ~30 messages a day each,
in three sittings, Chinese and English, facts mixed with small talk and a
question now and then about what was said. The clock moves through the
nights, so the extraction service, the daily compression and the weekly
merge/refresh run as in production. Every request the fake received is
then counted with the project's token estimate (memory/tokens.py), by kind:

- chat: system (workspace files, Core Memory, rules, date line), tool
  schemas, history, the latest message (its <memories> block, its time,
  the user's words);
- extract / compress / merge / profile: system prompt and user content.

Deterministic (seeded): before/after runs compare.

    .venv/bin/python scripts/bench_cost.py [--days 21] [--json out.json] [--dump DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import sys
import tempfile
from collections import Counter, defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import structlog  # noqa: E402

from channels.base import BaseChannel  # noqa: E402
from gateway.app import App, ChannelSpec  # noqa: E402
from gateway.bus import InboundMessage, MessageBus, OutboundMessage  # noqa: E402
from gateway.config import Paths, load_config  # noqa: E402
from memory import ManualClock  # noqa: E402
from memory.clock import parse_ts  # noqa: E402
from memory.tokens import estimate_tokens  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, Reply, split_user_content, text_of  # noqa: E402

BERLIN = ZoneInfo("Europe/Berlin")
USERS = ("alice", "bob", "chen")

# Fact-bearing messages: (text, the fact the fake extraction model takes from it, category, importance).
FACTS_EN = [
    ("I moved to {city} last month", "The user lives in {city}", "identity", 1.0),
    ("our {proj} service now runs on Postgres {n}", "{proj} runs on Postgres {n}", "decision", 0.8),
    ("we deploy {proj} with pnpm and GitHub Actions", "{proj} is deployed with pnpm and GitHub Actions", "config", 0.8),
    ("I prefer short answers without emoji", "The user prefers short answers without emoji", "identity", 1.0),
    ("my sister {name} has her birthday on May {n}", "The user's sister {name} has her birthday on May {n}", "event", 0.5),
    ("we picked Redis for the {proj} cache", "{proj} uses Redis as its cache", "decision", 0.8),
    ("the {proj} release is due on April {n}", "The {proj} release is due on 2026-04-{n:02d}", "event", 0.5),
]
FACTS_ZH = [
    ("我上个月搬到了{city}", "用户住在{city}", "identity", 1.0),
    ("{proj} 项目的数据库换成了 Postgres {n}", "{proj} 项目使用 Postgres {n}", "decision", 0.8),
    ("{proj} 用 pnpm 部署", "{proj} 用 pnpm 部署", "config", 0.8),
    ("我喜欢简短的回答", "用户喜欢简短的回答", "identity", 1.0),
    ("我妹妹{name}的生日是五月{n}号", "用户的妹妹{name}生日是五月{n}日", "event", 0.5),
    ("{proj} 的缓存决定用 Redis", "{proj} 的缓存用 Redis", "decision", 0.8),
]
TALK_EN = ["good morning", "thanks, that helps", "can you explain how {proj} handles retries?",
           "what's a good name for a cat?", "the weather is awful today", "ok, let's continue with {proj}",
           "write me a short haiku about coffee", "how do I reverse a list in Python?"]
TALK_ZH = ["早上好", "谢谢，有帮助", "{proj} 的重试是怎么处理的？", "今天天气真差", "帮我写一首关于咖啡的短诗",
           "Python 里怎么反转列表？", "继续说 {proj} 吧"]
ASK_EN = ["which database does {proj} use?", "where do I live now?", "what did we talk about yesterday?",
          "how do we deploy {proj}?", "when is my sister's birthday?"]
ASK_ZH = ["{proj} 用的什么数据库？", "我现在住在哪里？", "昨天我们聊了什么？", "{proj} 怎么部署的？", "上周我们聊了什么？"]
CITIES = ["Berlin", "Shanghai", "Lisbon", "Hangzhou", "Oslo"]
NAMES = ["Mia", "Lena", "小红", "Zoe"]
PROJECTS = ["atlas", "orion", "kiwi"]

# A chat reply: one to eight of these sentences, by the message (chat models answer at length: the
# history and the extraction batches carry the replies).
REPLY_EN = ["Sure, here is what I would do.", "The main point is to keep the change small and easy to undo.",
            "First check the current setup, then try the change on a copy.", "If that works, roll it out.",
            "Tell me if you want the exact commands.", "Watch the logs for a day after the change.",
            "Most problems show up in the first hour.", "A short note in the project's docs helps later."]
REPLY_ZH = ["好的，我的建议如下。", "最重要的是让改动小一些，方便回退。", "先看一下现在的配置，再在副本上试。",
            "没问题的话再上线。", "需要具体命令的话告诉我。", "改完之后留意一天的日志。", "大部分问题在第一个小时就会出现。",
            "在项目文档里记一笔，以后查起来方便。"]


class EchoChannel(BaseChannel):
    """The users' channel: what they say is published on the bus, the
    replies kept (the tests' echo channel, without the test module)."""

    name = "echo"

    def __init__(self, config: Any, bus: MessageBus, **kw: Any) -> None:
        super().__init__(bus, config.allow_from)
        self.got = asyncio.Event()

    async def start(self) -> None:
        pass

    async def stop(self, timeout: float | None = None) -> None:
        pass

    async def send(self, msg: OutboundMessage) -> None:
        self.got.set()


# Configured as Telegram (enabled, any token): the registry builds this module's channel instead.
ECHO = ChannelSpec("echo", __name__, "EchoChannel", lambda c: c.channels.telegram)


def _config(home: Path, fake: FakeOpenAI) -> tuple[Any, Paths]:
    doc = {
        "provider": {"baseUrl": fake.url, "apiKey": fake.api_key, "maxRetries": 0, "timeout": "5s"},
        "agent": {"model": "test-model"},
        "channels": {"telegram": {"enabled": True, "token": "123:abcdefghijklmnop"}},
        "gateway": {"timezone": "Europe/Berlin"},
    }
    (home / "config.json").write_text(json.dumps(doc), encoding="utf-8")
    return load_config(home / "config.json", env={"MYCLAW_HOME": str(home)}, require=True), Paths(home)


class CostModel:
    """The fake's answers: a fixed short chat reply; extraction takes one fact
    from each fact-bearing user line (the ``facts`` table built with the
    load), compression keeps nothing new, merges keep every fact, the profile
    refresh keeps its entries and adds the important facts it is shown."""

    def __init__(self) -> None:
        self.facts: dict[str, tuple[str, str, float]] = {}
        # A fact's subject (its template and project): a later fact of the same one replaces it.
        self.keys: dict[str, str] = {}

    def __call__(self, body: dict[str, Any]) -> Reply:
        if body.get("response_format", {}).get("type") != "json_object":
            words = split_user_content(text_of(body["messages"][-1].get("content")))[1]
            pool = REPLY_ZH if re.search(r"[\u4e00-\u9fff]", words) else REPLY_EN
            n = 1 + sum(map(ord, words)) % len(pool)  # deterministic: by the words, not by a run's order
            return Reply(content=("" if pool is REPLY_ZH else " ").join(pool[:n]))
        system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
        if system.startswith("You are a memory extraction"):
            if "Event log:" in user:
                return Reply(content=json.dumps({"facts": [], "summary": "week"}))
            known = {t: int(n) for n, t in re.findall(r"^(\d+)\. \[[^\]]*\] (.*)$", user, re.M)}
            out = []
            for line in user.split("Conversation:", 1)[-1].splitlines():
                m = re.match(r"^L(\d+) .*? user: (.*)$", line)
                if m and m.group(2).strip() in self.facts:
                    content, cat, imp = self.facts[m.group(2).strip()]
                    out.append({"content": content, "project": "_global", "topic": cat, "category": cat,
                                "importance": imp, "lines": [int(m.group(1))], "terms": content.split()[:4],
                                "same_as": known.get(content),
                                "updates": None if content in known else next(
                                    (n for t, n in known.items() if self.keys.get(t) == self.keys[content]), None)})
            return Reply(content=json.dumps({"facts": out, "summary": "a chat"}, ensure_ascii=False))
        if system.startswith("You consolidate"):
            nums = re.findall(r"^(\d+)\. \[(\w+), ([\d.]+)[^\]]*\] (.*)$", user, re.M)
            return Reply(content=json.dumps({"facts": [
                {"content": t, "category": c, "importance": float(i), "from": [int(n)]} for n, c, i, t in nums
            ], "drop": []}, ensure_ascii=False))
        if system.startswith("You maintain"):
            head, _, tail = user.partition("Important facts:")
            cur = re.findall(r"^- (.*)$", head, re.M)
            new = {n: t for n, t in re.findall(r"^(\d+)\. \[[^\]]*\] (.*)$", tail, re.M)}
            # The latest fact of a subject holds: older entries and facts of it are left out.
            latest = {self.keys.get(t, t): n for n, t in sorted(new.items(), key=lambda x: int(x[0]))}
            keep = [{"content": t, "category": "identity", "facts": [int(n)]} for n, t in new.items()
                    if latest[self.keys.get(t, t)] == n]
            subjects = {self.keys.get(e["content"], e["content"]) for e in keep}
            keep += [{"content": c, "category": "identity", "facts": []} for c in cur
                     if self.keys.get(c, c) not in subjects and c not in new.values()]
            return Reply(content=json.dumps({"entries": keep[:30]},
                ensure_ascii=False))
        raise AssertionError(f"unexpected memory-model call: {system[:60]}")


def day_script(rng: random.Random, user: int, day: int, per_day: int, model: CostModel) -> list[str]:
    """One user's messages for one day, in order."""
    zh = user == 1 or (user == 2 and day % 2 == 0)  # bob in Chinese, chen in both
    facts, talk, ask = (FACTS_ZH, TALK_ZH, ASK_ZH) if zh else (FACTS_EN, TALK_EN, ASK_EN)
    out = []
    for i in range(per_day):
        fill = {"city": rng.choice(CITIES), "proj": PROJECTS[(user + day // 7) % 3], "name": rng.choice(NAMES),
                "n": rng.randint(1, 28)}
        r = rng.random()
        if r < 0.2:
            k = rng.randrange(len(facts))
            text, fact, cat, imp = facts[k]
            text, fact = text.format(**fill), fact.format(**fill)
            model.facts[text] = (fact, cat, imp)
            # One subject in both languages: the template's row, and its project when it names one.
            model.keys[fact] = f"{k}:{fill['proj'] if '{proj}' in facts[k][0] else ''}:{'name' if k == 4 else ''}"
        elif r < 0.35:
            text = rng.choice(ask).format(**fill)
        else:
            text = rng.choice(talk).format(**fill)
        out.append(text)
    return out


async def say(app: App, clock: ManualClock, text: str, sender: str) -> None:
    echo = app.channels["echo"]
    assert isinstance(echo, EchoChannel) and app.loop is not None
    echo.got.clear()
    await echo.publish(InboundMessage(channel="echo", chat_id=f"c-{sender}", sender_id=sender, text=text,
                                      timestamp=clock.now()))
    await asyncio.wait_for(echo.got.wait(), 10)
    assert await app.loop.drain(10)
    # Recall's access counts rank the next recall: written now, not when the flusher's wall-clock interval ends.
    await app.backend.engine.flush_access()  # type: ignore[union-attr]


async def tick(app: App) -> None:
    assert app.extraction is not None and app.cron is not None
    await app.extraction.tick()  # type: ignore[attr-defined]
    await app.cron.run_due()  # type: ignore[attr-defined]


@asynccontextmanager
async def gateway(tmp: Path, fake: FakeOpenAI, clock: ManualClock) -> AsyncIterator[App]:
    cfg, paths = _config(tmp, fake)
    app = App(cfg, paths, clock=clock, channel_specs=(ECHO,))
    try:
        await app.open()
        await app.start()
        # The bench moves the clock and runs the jobs itself (tick): the services' own
        # loops wake on wall time and would flush a user's lines at a moment that varies.
        assert app.extraction is not None and app.cron is not None
        await app.extraction.stop()
        await app.cron.stop()
        yield app
    finally:
        await app.close()


def kind_of(body: dict[str, Any]) -> str:
    if body.get("response_format", {}).get("type") != "json_object":
        return "chat"
    system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
    if system.startswith("You are a memory extraction"):
        return "compress" if "Event log:" in user else "extract"
    if system.startswith("You consolidate"):
        return "merge"
    if system.startswith("You maintain"):
        return "profile"
    return "other"


_CORE = re.compile(r"^# Core Memory\n.*?(?=\n\n(?:# |- |Current date:)|\Z)", re.S | re.M)


def chat_parts(body: dict[str, Any]) -> dict[str, int]:
    """A chat request's tokens by part."""
    msgs = body["messages"]
    system = text_of(msgs[0]["content"])
    core = _CORE.search(system)
    core_text = core.group(0) if core else ""
    date = system[system.rfind("Current date:"):] if "Current date:" in system else ""
    rest = system.replace(core_text, "").replace(date, "")
    # The memory rules (gateway/prompt.py _MEMORY_RULES and _TOOL_RULES): from their heading to the next part.
    rules = rest[rest.find("# Using memory"):].split("\n\n# ", 1)[0] if "# Using memory" in rest else ""
    tools = body.get("tools") or []
    mine = [t for t in tools if t.get("function", {}).get("name", "").startswith("memory_")]
    latest = text_of(msgs[-1]["content"])
    block, words = split_user_content(latest)
    return {
        "system.core": estimate_tokens(core_text),
        "system.memory_rules": estimate_tokens(rules),
        "system.other": estimate_tokens(rest) - estimate_tokens(rules),
        "system.date": estimate_tokens(date),
        # As sent (compact JSON); a provider renders them in its own words, near this.
        "tools.memory": estimate_tokens(json.dumps(mine, ensure_ascii=False, separators=(",", ":"))),
        "tools.other": estimate_tokens(json.dumps([t for t in tools if t not in mine], ensure_ascii=False,
                                                  separators=(",", ":"))),
        "history": sum(estimate_tokens(text_of(m.get("content"))) for m in msgs[1:-1]),
        "message.recalled": estimate_tokens(block + "</memories>\n\n" if block else ""),
        "message.words": estimate_tokens(words),
        "message.other": estimate_tokens(latest) - estimate_tokens(block) - estimate_tokens(words),
    }


def json_parts(body: dict[str, Any]) -> dict[str, int]:
    return {"system": estimate_tokens(body["messages"][0]["content"]),
            "user": estimate_tokens(body["messages"][-1]["content"])}


def report(requests: list[dict[str, Any]], user_days: int) -> dict[str, Any]:
    by_kind: dict[str, Counter[str]] = defaultdict(Counter)
    calls: Counter[str] = Counter()
    for body in requests:
        kind = kind_of(body)
        calls[kind] += 1
        by_kind[kind].update(chat_parts(body) if kind == "chat" else json_parts(body))
    turns = calls["chat"]
    chat = by_kind["chat"]
    chat_total = sum(chat.values())
    memory_part = chat["system.core"] + chat["message.recalled"]
    # With what memory adds besides its content: its rules and its tools.
    memory_all = memory_part + chat["system.memory_rules"] + chat["tools.memory"]
    write = {k: sum(by_kind[k].values()) for k in ("extract", "compress", "merge", "profile")}
    return {
        "user_days": user_days,
        "calls": dict(calls),
        "tokens": {k: dict(v) for k, v in sorted(by_kind.items())},
        "chat_tokens_per_turn": round(chat_total / max(turns, 1), 1),
        "chat_parts_per_turn": {k: round(v / max(turns, 1), 1) for k, v in sorted(chat.items())},
        "memory_share_of_chat_prompt": round(memory_part / max(chat_total, 1), 3),
        "memory_read_tokens_per_turn": round(memory_part / max(turns, 1), 1),
        "memory_share_with_rules_and_tools": round(memory_all / max(chat_total, 1), 3),
        "memory_tokens_per_turn_with_rules_and_tools": round(memory_all / max(turns, 1), 1),
        "write_tokens_per_user_day": {k: round(v / user_days, 1) for k, v in write.items()},
        "write_tokens_per_user_day_total": round(sum(write.values()) / user_days, 1),
        "write_tokens_per_turn": round(sum(write.values()) / max(turns, 1), 1),
        "chat_tokens_per_user_day": round(chat_total / user_days, 1),
    }


async def run(tmp: Path, days: int, per_day: int, seed: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    rng = random.Random(seed)
    model = CostModel()
    clock = ManualClock("2026-03-02T06:00:00Z")  # a Monday, 07:00 in Berlin
    async with FakeOpenAI(api_key="sk-cost-key-0123456789", responder=model) as fake:
        async with gateway(tmp, fake, clock) as app:
            for day in range(days):
                start = clock.now().astimezone(BERLIN).date()
                scripts = {u: day_script(rng, i, day, per_day, model) for i, u in enumerate(USERS)}
                sittings = (9, 13, 20)
                for s, hour in enumerate(sittings):
                    clock.set(parse_ts(f"{start}T{hour:02d}:00:00").replace(tzinfo=BERLIN))
                    for u in USERS:
                        part = scripts[u][s * per_day // 3:(s + 1) * per_day // 3]
                        for text in part:
                            await say(app, clock, text, u)
                            clock.advance(20)
                    clock.advance(600)  # past the quiet gap
                    assert app.extraction is not None
                    for u in USERS:  # what tick() would flush now, one user after another (a fixed order)
                        await app.extraction.flush_now(f"echo:{u}")  # type: ignore[attr-defined]
                    await tick(app)
                while clock.now().astimezone(BERLIN).date() == start or clock.now().astimezone(BERLIN).hour < 8:
                    clock.advance(3600)
                    await tick(app)
        requests = list(fake.requests)
    return report(requests, days * len(USERS)), requests


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--days", type=int, default=21)
    ap.add_argument("--per-day", type=int, default=30, help="messages a user sends a day")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", type=Path, help="write the report here too")
    ap.add_argument("--dump", type=Path, help="write every request the fake received here (one JSON a line)")
    args = ap.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))  # errors only
    with tempfile.TemporaryDirectory() as d:
        out, requests = await run(Path(d), args.days, args.per_day, args.seed)
    if args.dump:
        with args.dump.open("w", encoding="utf-8") as f:
            for body in requests:
                f.write(json.dumps(body, ensure_ascii=False) + "\n")
    text = json.dumps(out, indent=2, ensure_ascii=False)
    if args.json:
        args.json.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    asyncio.run(main())
