"""``/memory`` and ``/forget``: a user sees and erases what the bot keeps
about them without going through the model.

Asking the bot in words works too (the ``memory_*`` tools), but it depends
on the model calling the right tool with the right ids. These commands are
exact: ``/memory`` lists the user's own rows (``/memory words`` searches
as the ``memory_search`` tool does, shared rows included; never another
user's), ``/forget m12`` erases with the same machinery as the
``memory_forget`` tool, and both work only in a private chat, where nobody
else reads the answer. Neither the command nor its answer is kept in the
chat's history or learnt from (``ProcessLoop`` answers commands directly),
so a listing does not become something to remember again.

Credentials are listed by id only: ``/memory`` is a glance, often over a
shoulder; the bot tells them when asked.

``/export`` (``/导出``) answers with a file: everything kept about the
user, rendered by gateway/export.py (credentials by id only). The file is
made for the asker alone and never stored by the gateway: it is not kept
in the outbox when it cannot go out (gateway/delivery.py), and one a
minute is enough (each gathers their whole memory).

``/share m12`` lets one of the user's facts be read in groups: sent in
the private chat, in every group where they ask; sent in a group, in
that group only (the answer there names ids, never words). ``/unshare
m12`` takes it back (from every group, or from the group it is sent in);
``/share`` lists what is shared (memory/sharing.py).

``/forget all`` erases everything kept about the user (gateway/userdata.py).
It first answers with what that is and a code; only ``/forget all <code>``,
within five minutes, erases. A code rather than "yes": the user must have
read this answer, not a stale or autocompleted one, and a forwarded or
pasted command cannot do it.
"""

from __future__ import annotations

import contextlib
import math
import re
import secrets
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import TYPE_CHECKING

import structlog

from memory.backend import MemoryBackend
from memory.clock import Clock, SystemClock, parse_ts
from memory.engine import MemoryEngine
from memory.format import truncate
from memory.scope import Chat
from memory.sharing import EVERY_GROUP, place_key, share, shared, unshare
from memory.types import Hit

from .bus import Attachment, words_in_chinese
from .chattitles import ChatTitles, group_name
from .datalock import ChatRunning
from .export import MIME, Spool, chinese_enough, export_filename, mostly_chinese, write_user_export
from .inbox import MessageKey
from .incognito import Incognito
from .logging import error_fields
from .projectnames import ZH_REMOVE, project_command
from .timezones import Choice, TimezoneError, UserTimezones, parse_timezone, zone_name
from .userdata import Census, UserData

if TYPE_CHECKING:  # the scheduler is imported where it is used
    from .cron import CronJob

__all__ = ["BARE", "COMMANDS", "IN_GROUPS", "MENU", "MENU_ZH", "Answer", "UserCommands", "is_own_command", "is_start_link",
           "runs_itself"]

log = structlog.get_logger(component="gateway")

COMMANDS = ("memory", "forget", "export", "导出", "timezone", "tz", "incognito", "无痕", "project", "share",
            "unshare", "jobs")
# Of those, the ones a group may send: about that group, naming ids only.
IN_GROUPS = ("share", "unshare")
# The loop's own, answered only as they are: "/help me with this" is words for the model.
BARE = ("new", "help", "start", "帮助")
# What a platform's command menu offers (Telegram's "/" list): command,
# description, private chats only. /new and /help are the loop's own.
MENU = (
    ("new", "Start a fresh conversation (what I remember stays)", False),
    ("memory", "What I remember about you; /memory words searches it", True),
    ("forget", "Erase a memory for good: /forget m12 (/forget all: everything)", True),
    ("export", "A file of everything I keep about you", True),
    ("timezone", "Your time zone, for dates and schedules: /timezone Asia/Shanghai", True),
    ("incognito", "Stop learning from what you say (/incognito off: learn again)", True),
    ("project", "A project was renamed: /project atlas orion", True),
    ("jobs", "Your scheduled messages (/jobs remove <id> cancels one)", True),
    ("share", "Let a memory be used in groups: /share m12 (/unshare m12 takes it back)", False),
    ("help", "What I can do", False),
)
# The same menu for clients set to Chinese (Telegram picks it by the user's language).
MENU_ZH = {
    "new": "开始新的对话（记得的事仍然保留）",
    "memory": "看看我记得你哪些事；/memory 关键词 可以搜索",
    "forget": "永久删除一条记忆：/forget m12（/forget all：全部）",
    "export": "把我保存的关于你的一切导出成文件",
    "timezone": "设置你的时区，日期和定时任务都按它计算：/timezone 上海",
    "incognito": "无痕模式：不从你说的话中学习（/incognito off 关闭）",
    "project": "项目改名了：/project 旧名 新名",
    "jobs": "你的定时消息（/jobs remove 编号 取消一个）",
    "share": "允许在群聊中使用一条记忆：/share m12（/unshare m12 收回）",
    "help": "我能做什么",
}


# A Telegram deep link (t.me/bot?start=PAYLOAD) opens the chat with "/start
# PAYLOAD": the link's token (up to 64 of A-Z a-z 0-9 _ -), not the user's words.
_START_PAYLOAD = re.compile(r"[A-Za-z0-9_-]{1,64}")


def runs_itself(command: str, args: str) -> bool:
    """Is ``/command args`` one the gateway answers itself, not the model?"""
    return command in COMMANDS or (command in BARE and (not args or is_start_link(command, args)))


def is_start_link(command: str, args: str) -> bool:
    """Is it a deep link's ``/start PAYLOAD``? Answered as a bare /start."""
    return command == "start" and _START_PAYLOAD.fullmatch(args) is not None


# A whole message that is one slash command, without @bot.
_BARE_COMMAND = re.compile(r"^/([a-z_]+|[\u4e00-\u9fff]+)(?:\s+(.*))?$", re.IGNORECASE | re.DOTALL)


def is_own_command(text: str) -> bool:
    """Is ``text``, sent in a group without naming the bot, one of our
    commands? A channel takes it as addressed to the bot (Telegram's menu
    sends them bare; Feishu has no /cmd@bot at all)."""
    bare = _BARE_COMMAND.match(text.strip())
    return bare is not None and runs_itself(bare.group(1).lower(), (bare.group(2) or "").strip())


# Why a command is refused in a group: what it does only in a private chat.
_ONLY_THERE = {
    "memory": ("I show and erase your memories only there.", "记忆只在那里查看或删除。"),
    "timezone": ("I set your time zone only there.", "时区只在那里设置。"),
    "tz": ("I set your time zone only there.", "时区只在那里设置。"),
    "incognito": ("I turn incognito on or off only there.", "无痕模式只在那里开启或关闭。"),
    "无痕": ("I turn incognito on or off only there.", "无痕模式只在那里开启或关闭。"),
    "project": ("I rename your projects only there.", "项目只在那里改名。"),
    "jobs": ("I list and cancel your scheduled messages only there.", "定时消息只在那里查看或取消。"),
}
_FORGET_MAX = 20  # as the memory_forget tool
_LIST = 10  # newest facts shown by /memory
# Profile entries /memory shows, most important first: a profile at its cap
# (100) filled six Telegram messages; /export lists them all.
_PROFILE_SHOWN = 10
_SEARCH = 10
_SHOWN_CHARS = 200
_CONFIRM_WITHIN = timedelta(minutes=5)
_EXPORT_EVERY = timedelta(minutes=1)  # one /export per user
SPOOL_BYTES = 1 << 20  # an /export past this leaves memory for a temporary file
_ALL = ("all", "全部")
_RESET = ("reset", "default", "clear", "重置", "默认", "恢复")
_OFF = ("off", "stop", "end", "no", "0", "关", "关闭", "退出", "结束")
_ON = ("", "on", "start", "yes", "1", "开", "开启", "打开")
_REF = re.compile(r"^\[?([me]\d+)\]?[,.;，。、；]?$", re.IGNORECASE)

ForgetHistory = Callable[[str, Sequence[str]], Awaitable[int]]
# Held while /forget all erases (the App's ChatLock.erasing): refuses with
# ChatRunning while a `myclaw chat` (or `myclaw memory forget`) runs on the home.
Erasing = Callable[[], contextlib.AbstractContextManager[None]]


def _line(h: Hit, zh: bool) -> str:
    """``- [m12 · 2026-11-20 · from a chat on Telegram] words``: the id
    /forget takes, and when and where it was said, as citations say it."""
    if h.category == "credential":
        text = "（凭据，此处不显示）" if zh else "(a credential, not shown here)"
    else:
        text = truncate(h.content, _SHOWN_CHARS)
    return f"- {h.citation(zh=zh)} {text}"


def _example_ref(shown: Sequence[Hit]) -> str:
    """The id a hint under a list shows /forget with: the first listed. A
    fixed example ("m12") names a memory of its own in a user's store, one
    the list may not show: copied, it would erase what they never saw."""
    return shown[0].ref if shown else "m12"


_chinese = mostly_chinese  # answer in Chinese when most of what is shown is Chinese


def _project_zh(args: str, chat_zh: bool | None, app_zh: bool) -> bool:
    """/project's language: its names (星图, "orion") are names, not the
    user's words, so the chat's language decides; a Chinese command word
    (删除) is theirs; with neither, the names' language, then the app's."""
    words = args.split()
    if words and words[0] in ZH_REMOVE:
        return True
    return chat_zh if chat_zh is not None else _chinese([args]) or app_zh


@dataclass(frozen=True)
class Answer:
    """What a command answers: a text, and for ``/export`` a file (the text
    is its caption). ``erased``: the text quotes what was just erased
    (``/forget``), so it is not written to the outbox ahead of its send: it
    would put the words back on disk (gateway.db's WAL) after the erasure."""

    text: str
    attachment: Attachment | None = None
    erased: bool = False


class UserCommands:
    """Runs ``/memory [words]``, ``/forget <ids>`` and ``/export`` for the sender.
    ``forget_history(user, texts)`` erases the Tier 0 lines that said an
    erased fact (the App passes its own, as for the ``memory_forget`` tool)."""

    def __init__(
        self,
        backend: MemoryBackend,
        *,
        forget_history: ForgetHistory | None = None,
        everything: UserData | None = None,
        clock: Clock | None = None,
        timezones: UserTimezones | None = None,
        default_tz: tzinfo = UTC,
        incognito: Incognito | None = None,
        spool_bytes: int = SPOOL_BYTES,
        projects: MemoryEngine | None = None,
        titles: ChatTitles | None = None,
        erasing: Erasing | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.backend = backend
        self.erasing = erasing or contextlib.nullcontext
        self.titles = titles  # groups named by title in the /share listing (gateway/chattitles.py)
        self.projects = projects  # /project: the SQLite store's engine (None: the file store keeps no aliases)
        self.spool_bytes = spool_bytes  # an export larger than this is written to a temporary file
        self.incognito = incognito
        self.forget_history = forget_history
        self.everything = everything or UserData(backend, None)
        self.clock = clock or SystemClock()
        self.timezones = timezones
        self.default_tz = default_tz
        # A /forget all code's minutes are counted on this too: a clock stepped
        # back (NTP) would keep it good for the step as well.
        self.monotonic = monotonic
        self._codes: dict[str, tuple[str, datetime, float]] = {}  # user -> /forget all code, valid until, given
        self._exported: dict[str, datetime] = {}  # user -> when their last /export was made

    def footprint(self) -> dict[str, Collection[object]]:
        """Its per-user state, by name, read-only: for measuring (scripts/bench_soak.py), not to change."""
        return {"codes": self._codes, "exported": self._exported}

    async def run(self, name: str, args: str, *, user: str, private: bool, chat_zh: bool | None = None,
                  app_zh: bool = False, chat: Chat | None = None, asking: MessageKey | None = None) -> str:
        """The answer's text (what the text-only commands answer)."""
        return (await self.answer(name, args, user=user, private=private, chat_zh=chat_zh, app_zh=app_zh,
                                  chat=chat, asking=asking)).text

    async def answer(self, name: str, args: str, *, user: str, private: bool, chat_zh: bool | None = None,
                     app_zh: bool = False, chat: Chat | None = None, asking: MessageKey | None = None) -> Answer:
        """``chat_zh``: whether the sender's recent messages in the chat are
        mostly Chinese (None: none yet). A command's answer speaks as the
        chat does, unless its own words say otherwise (``/导出``, ``/memory
        咖啡``; a ``/timezone`` zone's name is a place, a ``/project``'s names are names, not words); with nothing to tell by, in the language of what it shows,
        and with nothing shown either (a new user), as the sender's app is
        set (``app_zh``). ``chat``: (channel, chat id) of a group, for the
        commands a group may send (:data:`IN_GROUPS`). ``asking``: the
        command's own message (channel, chat id, message id), waiting in the
        inbox while it runs: not counted among those waiting to be answered."""
        if name in IN_GROUPS:
            zh = _chinese([args]) or bool(app_zh if chat_zh is None else chat_zh)
            if not private and (chat is None or not all(chat)):
                raise ValueError(f"/{name} in a group needs the group's chat")
            return Answer(await self._share(user, args, on=name == "share", chat=None if private else chat, zh=zh))
        if not private:
            zh = name in ("导出", "无痕") or (app_zh if chat_zh is None else chat_zh)
            why = _ONLY_THERE.get(name, _ONLY_THERE["memory"])
            return Answer("这个命令只能在和我的私聊中使用：" + why[1] if zh
                          else "This command works only in a private chat with me: " + why[0])
        said = app_zh if chat_zh is None else chat_zh  # for answers whose words tell nothing
        if name == "memory":
            return Answer(await (self._search(user, args, said) if args.strip() else self._overview(user, chat_zh, app_zh)))
        if name == "forget":
            return Answer(await self._forget(user, args, chat_zh, app_zh, asking=asking), erased=True)
        if name in ("export", "导出"):
            return await self._export(user, zh=True if name == "导出" else chat_zh, app_zh=app_zh, asking=asking)
        if name in ("timezone", "tz"):
            return Answer(await self._timezone(user, args.strip(), chat_zh, app_zh))
        if name in ("incognito", "无痕"):
            return Answer(await self._incognito(user, args.strip().lower(), zh=True if name == "无痕" else said))
        if name == "project":
            return Answer(await project_command(self.projects, user, args, zh=_project_zh(args, chat_zh, app_zh)))
        if name == "jobs":
            return Answer(await self._jobs(user, args.strip(), zh=said))
        raise ValueError(f"unknown command {name!r}")

    async def _jobs(self, user: str, args: str, *, zh: bool) -> str:
        """``/jobs``: the sender's scheduled messages, where they could only
        ask the model; ``/jobs remove <id>`` cancels one of theirs."""
        from .cron import CronError  # here: the scheduler is not needed for the other commands

        cron = self.everything.cron
        word, _, rest = args.partition(" ")
        zh = zh or word in ("取消", "删除")  # a command word of theirs, as /project 删除 is
        if word.lower() in ("remove", "cancel", "delete", "rm", "取消", "删除"):
            job_id = rest.strip()
            if not job_id:  # how, with theirs to pick from: not "no message <id>"
                usage = ("用法：/jobs remove 编号 取消一个定时消息" if zh
                         else "Usage: /jobs remove <id> cancels one of your scheduled messages")
                if lines := await self._job_lines(user, zh=zh):
                    return "\n".join([usage + ("：" if zh else ":"), *lines])
                return usage + ("。你还没有定时消息。" if zh else ". You have none.")
            job = await cron.get(job_id) if cron is not None else None
            if cron is None or job is None or job.user != user or job.internal:
                return (f"你没有编号为 {job_id} 的定时消息：/jobs 列出你的定时消息。" if zh
                        else f"You have no scheduled message {job_id}: /jobs lists yours.")
            try:
                await cron.remove(job_id, user=user)
            except CronError:  # gone meanwhile (it ran once, or another remove)
                return f"定时消息 {job_id} 已经没有了。" if zh else f"{job_id} is gone already."
            what = truncate(job.message, 60)
            return f"已取消 {job_id}（{what}）：它不会再运行。" if zh else f"Cancelled {job_id} ({what}): it will not run."
        lines = await self._job_lines(user, zh=zh)
        if args or not lines:
            none = ("你还没有定时消息。直接跟我说就行：“每个工作日 9 点帮我总结计划”“明天 9 点提醒我打电话”。" if zh
                    else "You have no scheduled messages. Ask me for one: “every weekday at 9, summarise my plans”, "
                    "“remind me tomorrow at 9 to call mom”.")
            usage = "用法：/jobs 列出你的定时消息，/jobs remove 编号 取消一个。" if zh else \
                "Usage: /jobs lists your scheduled messages, /jobs remove <id> cancels one."
            return usage if args else none
        head, tail = (("你的定时消息：", "/jobs remove 编号 取消一个。") if zh
                      else ("Your scheduled messages:", "/jobs remove <id> cancels one."))
        return "\n".join([head, *lines, "", tail])

    async def _job_lines(self, user: str, *, zh: bool) -> list[str]:
        """One line a scheduled message of theirs: id, when (on their clock), words."""
        cron = self.everything.cron
        jobs = [j for j in await cron.list(user) if not j.internal] if cron is not None else []
        lines = []
        tz = await self._zone(user) if jobs else self.default_tz
        for j in jobs:
            if j.once:
                when = f"一次，{_once_shown(j, tz, zh=zh)}" if zh else f"once, {_once_shown(j, tz, zh=zh)}"
            else:
                when = f"{j.schedule} ({j.timezone or zone_name(self.default_tz)})"
            lines.append(f"- [{j.id}] {when}: {truncate(j.message, _SHOWN_CHARS)}")
        return lines

    async def _export(self, user: str, *, zh: bool | None, app_zh: bool = False,
                      asking: MessageKey | None = None) -> Answer:
        now = self.clock.now()
        # One made "after" now: the clock was stepped back since; forgotten, not waited out.
        self._exported = {u: t for u, t in self._exported.items() if timedelta(0) <= now - t < _EXPORT_EVERY}
        last = self._exported.get(user)
        if last is not None:
            wait = max(1, math.ceil((last + _EXPORT_EVERY - now).total_seconds()))
            return Answer(f"每分钟只能导出一次；请 {wait} 秒后再试。" if (app_zh if zh is None else zh)
                          else f"One export a minute: please ask again in {wait} s.")
        self._exported[user] = now
        kept, index = await self.everything.export(user, asking=asking)
        if zh is None:
            every = [index, *(i for _, i in kept.earlier)]
            shown = sum(len(i.memory_ids) + len(i.event_ids) for i in every)
            zh = chinese_enough(sum(i.chinese for i in every), shown) if shown else app_zh
        if not (index.memory_ids or index.event_ids or index.waiting or index.set_aside or kept.earlier or kept.jobs
                or kept.history or kept.timezone or kept.zones or kept.incognito_since or kept.files or kept.projects or kept.unanswered):
            return Answer("我没有保存任何关于你的内容，没有可导出的。" if zh
                          else "I keep nothing about you, so there is nothing to export.")
        # Dated in their own zone (/timezone), as the prompt's date is.
        tz = await self._zone(user)
        local = now.astimezone(tz)
        # Written as the rows are read, a page at a time; a large file
        # leaves memory for a temporary file (closed once sent: delivery.py).
        spool = Spool(self.spool_bytes)
        try:
            backend = self.everything.backend
            rows = backend.owner_rows(user, index)
            # What their handles stored before they were mapped: theirs too, each under its heading.
            earlier = [backend.owner_rows(handle, i) for handle, i in kept.earlier]
            # A memory's day where it was said (memory/zonehistory.py), as the prompt dates it.
            said_tz = await self.projects.lived(user, tz) if self.projects is not None else tz
            await write_user_export(spool.write, kept, index, rows, at=f"{local:%Y-%m-%d %H:%M} {zone_name(tz)}",
                                    zh=zh, tz=tz, earlier=earlier, said_tz=said_tz)
            file = spool.attachment(export_filename(local), MIME)
        finally:
            spool.close()
        return Answer(
            "这是我保存的关于你的一切（Markdown 文件）。凭据只列出编号。/forget 可删除其中任何一条。"
            if zh
            else "Everything I keep about you, as a Markdown file. Credentials are listed by id only; "
            "/forget erases any of it.",
            file,
        )

    async def _zone(self, user: str) -> tzinfo:
        """The user's own zone (/timezone), else the gateway's."""
        return (await self.timezones.get(user) if self.timezones is not None else None) or self.default_tz

    async def _overview(self, user: str, chat_zh: bool | None, app_zh: bool = False) -> str:
        # Dated on their calendar, as their prompt's citations are.
        o = await self.backend.overview(user, limit=_LIST, tz=await self._zone(user))
        shown = [h.content for h in (*o.profile, *o.recent)]
        zh = (_chinese(shown) if shown else app_zh) if chat_zh is None else chat_zh
        quiet = self.incognito is not None and await self.incognito.since(user) is not None
        note = ("无痕模式开着：我现在不从对话中学习（/incognito off 关闭）。" if zh
                else "Incognito is on: I am not learning from our conversations (/incognito off ends it).")
        if not o.profile and not o.recent:
            # Said minutes ago, learnt after the quiet gap: not lost, waiting.
            if o.waiting:
                empty = (f"我还没有记住关于你的任何事：你的 {o.waiting} 条消息正在等待学习，对话停下一会儿后就会学到。" if zh
                         else f"I don't remember anything about you yet: {_n(o.waiting, 'message of yours is', 'of your messages are')}"
                         " waiting to be learnt, after a pause in our conversation.")
            else:
                empty = "我还没有记住关于你的任何事。" if zh else "I don't remember anything about you yet."
            return f"{empty}\n\n{note}" if quiet else empty
        out = [*([note, ""] if quiet else []),
            f"我记得的关于你的事：{o.facts} 条记忆，{o.events} 条对话摘要。"
            if zh
            else f"What I remember about you: {_n(o.facts, 'memory', 'memories')} and "
            f"{_n(o.events, 'conversation summary', 'conversation summaries')}."
        ]
        if o.profile:
            out += ["", "始终记在心里：" if zh else "Always in mind:", *(_line(h, zh) for h in o.profile[:_PROFILE_SHOWN])]
            if len(o.profile) > _PROFILE_SHOWN:
                rest = len(o.profile) - _PROFILE_SHOWN
                # Apart from the list: a line right under its last item is read as
                # that item's (Markdown's lazy continuation; Telegram indents it so).
                out += ["", f"……还有 {rest} 条始终记在心里：/export 列出全部。" if zh
                        else f"…and {rest} more always in mind: /export lists them all."]
        if o.recent:
            out += ["", "最新的记忆：" if zh else "Newest:", *(_line(h, zh) for h in o.recent)]
        more = o.facts - len(o.profile) - len(o.recent)
        if more > 0 and o.recent and o.recent[0].kind == "memory":
            out += ["", f"……还有 {more} 条。" if zh else f"…and {more} more."]  # apart, as above
        if o.waiting:
            out += ["", f"你最新的 {o.waiting} 条消息还在等待学习。" if zh
                    else f"{_n(o.waiting, 'message of yours is', 'of your newest messages are')} still waiting to be learnt."]
        ref = _example_ref([*o.profile[:_PROFILE_SHOWN], *o.recent])
        out += [
            "",
            f"/memory 关键词 搜索；/forget {ref} 永久删除一条。"
            if zh
            else f"/memory <words> searches them; /forget {ref} erases one for good.",
        ]
        return "\n".join(out)

    async def _search(self, user: str, words: str, chat_zh: bool | None) -> str:
        # The same search the memory_search tool runs: the user's memories and
        # the shared ones the bot uses for everyone (/forget says which is which).
        hits = await self.backend.search(user, words.strip(), limit=_SEARCH, private=True, tz=await self._zone(user))
        zh = _chinese([words]) or bool(chat_zh)
        if not hits:
            none = f"没有找到与“{words.strip()}”有关的记忆。" if zh else f"No memories match “{words.strip()}”."
            # Said a minute ago, learnt after the quiet gap: not unheard, waiting (as /memory says).
            waiting = (await self.backend.overview(user, limit=1)).waiting
            if not waiting:
                return none
            return none + (f"你的 {waiting} 条消息还在等待学习，对话停下一会儿后就会学到：刚说的事暂时还搜不到。" if zh
                           else f" {_n(waiting, 'message of yours is', 'of your messages are')} still waiting to be "
                           "learnt, after a pause in our conversation: what you said just now is not searchable yet.")
        head = f"与“{words.strip()}”有关的记忆：" if zh else f"Memories matching “{words.strip()}”:"
        # A neighbour holds none of the words: listed apart, as the context it is.
        matched, near = [h for h in hits if not h.neighbour], [h for h in hits if h.neighbour]
        ref = _example_ref([*matched, *near])
        tail = f"/forget {ref} 永久删除一条。" if zh else f"/forget {ref} erases one for good."
        out = [head, *(_line(h, zh) for h in matched)]
        if near:
            out += ["", "同一对话中紧挨着它们说的（上下文，并非匹配）：" if zh
                    else "Said next to them in the same conversation (context, not matches):",
                    *(_line(h, zh) for h in near)]
        return "\n".join([*out, "", tail])

    async def _forget(self, user: str, args: str, chat_zh: bool | None, app_zh: bool = False,
                      asking: MessageKey | None = None) -> str:
        # 、 and ； are what a Chinese input method types between ids.
        tokens = [t for t in re.split(r"[\s,，、;；]+", args.strip()) if t]
        if tokens and tokens[0].lower() in _ALL:
            zh = tokens[0] == "全部" or await self._speaks_chinese(user, [], chat_zh, app_zh)
            # The confirmation names the word they typed: "/forget 全部" is not told "/forget all".
            return await self._forget_all(user, tokens[1:], zh=zh, word="全部" if tokens[0] == "全部" else "all",
                                          asking=asking)
        refs: list[str] = []
        bad: list[str] = []
        for t in tokens:
            m = _REF.match(t)
            if m:
                refs.append(m.group(1).lower())
            else:
                bad.append(t)
        if not refs or bad:
            zh = _chinese(bad) or await self._speaks_chinese(
                user, [b for b in bad if words_in_chinese(b) is not None], chat_zh, app_zh)  # "12" says nothing
            usage = ("用法：/forget m12 [e3 …]，编号见 /memory；/forget all 删除全部。" if zh
                     else "Usage: /forget m12 [e3 …], with the ids /memory shows; /forget all erases everything.")
            if bad:
                # "/forget 12": the number of an id, its letter left out.
                named = [(f"{b}（是 m{b} 吗？）" if zh else f"{b} (did you mean m{b}?)") if b.isdigit() else b
                         for b in bad[:5]]
                usage += f" 不是编号：{'、'.join(named)}。" if zh else f" Not an id: {', '.join(named)}."
            return usage
        if len(refs) > _FORGET_MAX:
            zh = await self._speaks_chinese(user, [], chat_zh, app_zh)
            return f"一次最多删除 {_FORGET_MAX} 条。" if zh else f"At most {_FORGET_MAX} ids at a time."
        done = await self.backend.forget(user, list(dict.fromkeys(refs)))
        # As /memory: in Chinese when what is shown is mostly Chinese.
        zh = await self._speaks_chinese(user, [h.content for h in (*done.erased, *done.entries, *done.kept)], chat_zh, app_zh)
        out: list[str] = []
        if done.erased:
            out.append("已永久删除：" if zh else "Erased for good:")
            out += [_line(h, zh) for h in done.erased]
        if done.entries:
            out.append("一并删除了基于它的资料条目：" if zh else "Also erased, profile entries built on it:")
            out += [_line(h, zh) for h in done.entries]
        if done.versions:
            out.append(f"一并删除了它的 {done.versions} 个旧版本。" if zh
                       else f"Also erased: {_n(done.versions, 'older version', 'older versions')} of it.")
        if done.erased and self.forget_history is not None:
            gone = await self.forget_history(user, done.texts)
            if gone:
                out.append(f"一并删除了我们对话中说过它的 {gone} 条消息。" if zh
                           else f"Also erased: {_n(gone, 'message', 'messages')} of our conversation that said it.")
        if done.kept:
            out.append("仍然保留、与它相关的记录（它的来源，或由它得出的）；如果内容相同，也请用 /forget 删除："
                       if zh else "Still kept, linked to it (what it was drawn from, or drawn from it); "
                       "if they say the same, /forget them too:")
            out += [_line(h, zh) for h in done.kept]
        if done.shared:
            out.append(f"这些是大家共享的，不能由你删除：{'、'.join(done.shared)}。" if zh
                       else f"Shared by everyone, not yours to erase: {', '.join(done.shared)}.")
        if done.unknown:
            out.append(f"你没有编号为 {'、'.join(done.unknown)} 的记忆。" if zh
                       else f"You have no memory with {'id' if len(done.unknown) == 1 else 'ids'} {', '.join(done.unknown)}.")
        return "\n".join(out)

    async def _speaks_chinese(self, user: str, shown: Sequence[str], chat_zh: bool | None, app_zh: bool = False) -> bool:
        """Whether to answer in Chinese: as the chat is held, else what the
        answer shows, or with nothing to tell by (ids only), what /memory
        would show, and with nothing to show, as the sender's app is set."""
        if chat_zh is not None:
            return chat_zh
        if shown:
            return _chinese(list(shown))
        o = await self.backend.overview(user, limit=_LIST)
        known = [h.content for h in (*o.profile, *o.recent)]
        return _chinese(known) if known else app_zh

    async def _forget_all(self, user: str, rest: Sequence[str], *, zh: bool, word: str = "all",
                          asking: MessageKey | None = None) -> str:
        now, ticks = self.clock.now(), self.monotonic()
        self._codes = {u: c for u, c in self._codes.items()
                       if c[1] > now and ticks - c[2] < _CONFIRM_WITHIN.total_seconds()}
        if rest:
            code = self._codes[user][0] if user in self._codes else ""
            if len(rest) != 1 or not code or not secrets.compare_digest(rest[0], code):
                return (
                    f"这个确认码不对或已过期；先发送 /forget {word} 获取新的确认码。"
                    if zh
                    else f"That code is wrong or has expired; send /forget {word} for a new one."
                )
            try:
                with self.erasing():
                    del self._codes[user]
                    gone = await self.everything.erase(user, asking=asking)
            except ChatRunning:
                # A chat holds what it has of them and would write it back
                # after the erasure: nothing erased, the code kept for a retry.
                return (f"现在无法删除：本机上正在运行终端对话（myclaw chat）或另一项删除，删除后它会把内容写回。"
                        f"什么也没有删除。等它结束后，在确认码过期（发出后 5 分钟）前再次发送 /forget {word} {rest[0]}，"
                        f"或发送 /forget {word} 获取新的确认码。" if zh
                        else "I cannot erase now: a terminal chat (myclaw chat) or another erasure is running "
                        "where I run, and it would write back what it holds after the erasure. Nothing was "
                        f"erased. Once it has ended, send /forget {word} {rest[0]} again before the code "
                        "expires (5 minutes after I gave it), or "
                        f"/forget {word} for a new code.")
            return ("已永久删除：" if zh else "Erased for good: ") + _counts(gone, zh) + (
                "。从现在起我们重新认识。" if zh else ". From here on we start afresh."
            )
        kept = await self.everything.census(user, asking=asking)
        if kept.empty:
            return "我没有保存任何关于你的内容。" if zh else "I keep nothing about you."
        code = f"{secrets.randbelow(10_000):04d}"
        self._codes[user] = (code, now + _CONFIRM_WITHIN, ticks)
        if zh:
            return (f"这会永久删除我保存的关于你的一切：{_counts(kept, zh)}。无法撤销。\n"
                    f"确认请在 5 分钟内发送：/forget {word} {code}")
        return (f"This erases everything I keep about you, for good: {_counts(kept, zh)}. It cannot be undone.\n"
                f"To confirm, send within 5 minutes: /forget {word} {code}")


    async def _timezone(self, user: str, args: str, chat_zh: bool | None, app_zh: bool = False) -> str:
        # A zone's name (东八区, "Berlin") is a place, not the user's words: the
        # chat's language decides; only with none yet does a Chinese name.
        zh = chat_zh if chat_zh is not None else _chinese([args]) or app_zh
        if args in _RESET and _chinese([args]):  # 重置 is a word of theirs, not a place
            zh = True
        if self.timezones is None:
            return "这里不能设置时区。" if zh else "Time zones cannot be set here."
        gateway = zone_name(self.default_tz)
        if not args:
            mine = await self.timezones.get(user)
            now = self.clock.now().astimezone(mine or self.default_tz)
            if mine is None:
                if zh:
                    return (f"我用网关的时区 {gateway}（现在是 {now:%Y-%m-%d %H:%M}）来计算日期和定时任务。"
                            "告诉我你的时区：/timezone Asia/Shanghai、/timezone 上海 或 /timezone UTC+8。")
                return (f"I use the gateway's time zone, {gateway} (now {now:%Y-%m-%d %H:%M}), for dates and "
                        "schedules. Tell me yours: /timezone Asia/Shanghai, /timezone Berlin or /timezone UTC+8.")
            if zh:
                return (f"你的时区：{zone_name(mine)}（现在是 {now:%Y-%m-%d %H:%M}）。/timezone 时区 可以更改；"
                        f"/timezone reset 恢复为网关的时区（{gateway}）。")
            return (f"Your time zone: {zone_name(mine)} (now {now:%Y-%m-%d %H:%M}). "
                    f"/timezone <zone> changes it; /timezone reset goes back to the gateway's ({gateway}).")
        old = await self.timezones.get(user)
        if args.lower() in _RESET:
            since = await self.timezones.since(user)
            had = await self.timezones.clear(user)
            await self._zone_left(user, old, None, since)
            jobs = await self._jobs_follow(user, old, None, zh=zh)
            if zh:
                return (f"已恢复为网关的时区 {gateway}。" if had else f"你本来就在使用网关的时区 {gateway}。") + jobs
            return (f"Back to the gateway's time zone, {gateway}." if had else
                    f"You already use the gateway's, {gateway}.") + jobs
        try:
            tz = parse_timezone(args)
        except TimezoneError as exc:
            return _unknown_zone(args, exc.nearest, zh=zh, choices=exc.choices)
        since = await self.timezones.since(user)
        await self.timezones.set(user, tz, at=self.clock.now())
        await self._zone_left(user, old, tz, since)
        now = self.clock.now().astimezone(tz)
        jobs = await self._jobs_follow(user, old, tz, zh=zh)
        if zh:
            return f"好的，你的时区是 {zone_name(tz)}（现在是 {now:%Y-%m-%d %H:%M}）。日期和新建的定时任务都按这个时区。" + jobs
        return f"Your time zone is now {zone_name(tz)} (it is {now:%Y-%m-%d %H:%M} there). Dates and new schedules use it." + jobs

    async def _zone_left(self, user: str, old: tzinfo | None, new: tzinfo | None, since: str) -> None:
        """Memory keeps the zone the user left (``old``, in force since
        ``since``), so what they said there stays dated on the day they
        lived it (memory/zonehistory.py). Not the gateway's, on their first
        /timezone: that was a guess, not where they were; what they said
        before is read in the zone they name, as it was before this. After
        a reset it was the zone they chose: a reset is always kept (its end
        marks where the gap starts), and naming a zone again keeps the gap
        as the gateway's."""
        if self.projects is None or (old is None and new is None):
            return
        if old is not None and new is not None and zone_name(old) == zone_name(new):
            return
        try:
            if old is None:  # named after a reset (a first /timezone records nothing there)
                await self.projects.zone_named(user, self.default_tz, at=self.clock.now())
            else:
                await self.projects.zone_changed(user, old, since=since, at=self.clock.now())
        except Exception as exc:  # memory.db trouble costs the old days' zone (today's dates them), not the change
            log.error("zone change not kept in memory", user=user, **error_fields(exc))

    async def _jobs_follow(self, user: str, old: tzinfo | None, new: tzinfo | None, *, zh: bool) -> str:
        """Moves the user's own schedules to their new zone (CronStore.follow_user_zone)
        and says, on their new clock, what moved and what stayed."""
        cron = self.everything.cron
        if cron is None or (zone_name(old) if old else "") == (zone_name(new) if new else ""):
            return ""  # the same zone again: nothing moves
        moved = await cron.follow_user_zone(user, old, new)
        tz = new or self.default_tz
        name, ids = zone_name(tz), {j.id for j in moved}
        rest = [j for j in await cron.list(user) if not j.internal and j.id not in ids]
        once = [j for j in rest if j.once][:3]
        others = len([j for j in rest if not j.once])
        out = []
        if moved:
            nxt = f"{parse_ts(moved[0].next_run_at).astimezone(tz):%Y-%m-%d %H:%M}"
            if len(moved) == 1:
                out.append(f"你的定时任务 {moved[0].schedule} 跟着你改为按 {name} 时间运行（下次 {nxt}）。" if zh else
                           f" Your schedule {moved[0].schedule} follows you: it now runs on {name} time (next {nxt}).")
            else:
                out.append(f"你的 {len(moved)} 个定时任务跟着你改为按 {name} 时间运行。" if zh else
                           f" Your {len(moved)} schedules follow you: they now run on {name} time.")
        for j in once:
            at = f"{parse_ts(j.next_run_at).astimezone(tz):%Y-%m-%d %H:%M}"
            out.append(f"一次性提醒“{truncate(j.message, 30)}”时刻不变：这里的 {at}。" if zh else
                       f" Your one-time reminder \"{truncate(j.message, 30)}\" keeps its moment: {at} here.")
        if others:
            if zh:
                out.append(f"{'另外' if out else '已有的'} {others} 个定时任务（在群里或按指定时区设置的）保持原来的时区。")
            else:
                other = "other " if out else ""
                out.append(f" {others} {other}scheduled job (made in a group, or in a zone of its own) keeps its zone."
                           if others == 1 else f" {others} {other}scheduled jobs (made in a group, or in zones of "
                           "their own) keep their zones.")
        return "".join(out)


    async def _incognito(self, user: str, args: str, *, zh: bool | None) -> str:
        zh = _chinese([args]) or bool(zh)
        if self.incognito is None:
            return "这里不能开启无痕模式。" if zh else "Incognito is not available here."
        if args not in _ON and args not in _OFF:
            return ("用法：/incognito 开启无痕模式，/incognito off 关闭。" if zh
                    else "Use /incognito to turn it on and /incognito off to turn it off.")
        if args in _OFF:
            if not await self.incognito.end(user):
                return "无痕模式本来就是关闭的：我会记住对话中重要的事。" if zh else \
                    "Incognito was not on: I remember what matters from our conversations."
            return ("无痕模式已关闭：从现在起我会重新记住对话中重要的事。无痕期间说的话不会被记住。" if zh
                    else "Incognito is off: from now on I learn from our conversations again. "
                         "What you said while it was on stays unlearnt.")
        started = await self.incognito.start(user, at=self.clock.now())
        since = await self.incognito.since(user)
        tz = (await self.timezones.get(user) if self.timezones is not None else None) or self.default_tz
        when = f"{since.astimezone(tz):%Y-%m-%d %H:%M}" if since is not None else ""
        if zh:
            head = "无痕模式已开启。" if started else f"无痕模式从 {when} 起一直开着。"
            return (head + "从现在起，我在所有对话里都不会从你说的话中学习，但仍会用已经记得的事来回答；"
                    "你明确让我记住的事仍会保存。关闭请发送 /incognito off。")
        head = "Incognito is on." if started else f"Incognito has been on since {when}."
        return (head + " I won't learn anything from what you say now (in every chat), but I still use what I "
                "already remember, and save what you ask me in so many words to remember. "
                "Send /incognito off to end it.")


    async def _share(self, user: str, args: str, *, on: bool, chat: Chat | None, zh: bool) -> str:
        """``chat`` None: said in the private chat (every group)."""
        if self.projects is None:
            return "这里不能共享记忆。" if zh else "Memories cannot be shared here."
        tokens = [t for t in re.split(r"[\s,，、;；]+", args.strip()) if t]
        ids = [int(m.group(1)[1:]) for m in map(_REF.match, tokens) if m and m.group(1)[0].lower() == "m"]
        if not tokens and on:
            return await self._shared_list(user, chat, zh)
        if not ids or len(ids) != len(tokens):
            return ("用法：/share m12 允许在群聊中使用这条记忆，/unshare m12 收回；编号见私聊中的 /memory。" if zh
                    else "Usage: /share m12 lets a memory be used in groups, /unshare m12 takes it back; "
                    "/memory in our private chat shows the ids.")
        if len(ids) > _FORGET_MAX:
            return f"一次最多 {_FORGET_MAX} 条。" if zh else f"At most {_FORGET_MAX} ids at a time."
        done = await (share if on else unshare)(self.projects, user, ids, chat)
        where_zh, where = ("这个群" if chat is not None else "你提问的每个群"), (
            "this group" if chat is not None else "every group where you ask me")
        out: list[str] = []
        if done.changed or done.unchanged:
            ok = named([*done.changed, *done.unchanged])
            if on:
                out.append(f"{ok} 现在可以在{where_zh}中使用（只在你提问时）。/unshare {ok.split(',')[0]} 收回。" if zh
                           else f"{ok} may now be used in {where} (only when you ask). "
                           f"/unshare {ok.split(',')[0]} takes it back.")
            else:
                out.append(f"{ok} 不再在{where_zh}中使用。" if zh else f"{ok} is no longer used in {where}.")
        if done.elsewhere:
            out.append(f"{named(done.elsewhere)} 仍在你提问的每个群中共享；在私聊中发送 /unshare 收回。" if zh
                       else f"{named(done.elsewhere)} is still shared with every group where you ask; "
                       "send /unshare in our private chat to take it back.")
        if done.refused:
            out.append(f"{named(done.refused)} 是凭据或始终记在心里的资料，不能共享。" if zh
                       else f"{named(done.refused)}: credentials and profile entries are never shared.")
        if done.unknown:
            out.append(f"你没有编号为 {named(done.unknown)} 的记忆。" if zh
                       else f"You have no memory with id {named(done.unknown)}.")
        return "\n".join(out)

    async def _shared_list(self, user: str, chat: Chat | None, zh: bool) -> str:
        assert self.projects is not None
        rows = await shared(self.projects, user)
        if chat is not None:
            # In a group: ids only, never the words.
            here = [m for m in rows if {EVERY_GROUP, place_key(chat)} & set(m.provenance.shared)]
            if not here:
                return "这个群里没有共享你的记忆。" if zh else "None of your memories is shared in this group."
            ids = ", ".join(f"m{m.id}" for m in here)
            return f"在这个群中共享：{ids}。" if zh else f"Shared in this group: {ids}."
        if not rows:
            return ("你没有共享任何记忆：群聊只读到你在那个群里说过的事。/share m12 共享一条。" if zh
                    else "Nothing is shared: a group reads only what you said in it. /share m12 shares one.")
        out = ["在群聊中共享的记忆：" if zh else "Memories shared with groups:"]
        places = {p for m in rows for p in (*m.provenance.shared, *(g for g, _ in m.provenance.replaced_in))}
        names = await self.titles.names(places) if self.titles else {}
        # A group's newer fact stands for a shared one there while it exists (memory/scope.py).
        alive = await self.projects.get_many([i for m in rows for _, i in m.provenance.replaced_in])
        for m in rows:
            groups = [group_name(s, names) for s in m.provenance.shared if s != EVERY_GROUP]
            every = EVERY_GROUP in m.provenance.shared
            where = (("你提问的每个群" if zh else "every group where you ask") if every
                     else ("、" if zh else ", ").join(groups))
            for g, i in m.provenance.replaced_in:
                if i in alive:
                    where += (f"；在“{group_name(g, names)}”中改用 m{i}" if zh
                              else f"; in {group_name(g, names)} m{i} is used instead")
            out.append(f"- [m{m.id} · {where}] {truncate(m.content, _SHOWN_CHARS)}")
        out += ["", "/unshare m12 收回。" if zh else "/unshare m12 takes one back."]
        return "\n".join(out)


def named(ids: Sequence[int]) -> str:
    return ", ".join(f"m{i}" for i in ids)


def _unknown_zone(args: str, nearest: str | None, *, zh: bool, choices: tuple[Choice, ...] = ()) -> str:
    """/timezone's answer to a name it does not know: an example to copy, and
    the zone it is a near miss of, if any (no parser's wording); for an
    abbreviation of several zones, each to copy."""
    shown = args if len(args) <= 40 else args[:40] + "…"
    if choices:
        if zh:
            return f"“{shown}”可以指不止一个时区：请发送 " + "或 ".join(f"/timezone {z}（{w}）" for z, _, w in choices) + "。"
        return (f"\"{shown}\" names more than one time zone: send "
                + " or ".join(f"/timezone {z} ({w})" for z, w, _ in choices) + ".")
    if zh:
        return (f"我不认识时区“{shown}”。请发送城市或时区名，例如 /timezone 上海、/timezone Asia/Shanghai 或 "
                "/timezone UTC+8。" + (f"你是不是想说 /timezone {nearest}？" if nearest else ""))
    return (f"I don't know the time zone \"{shown}\". Send a city or a zone name, for example /timezone Berlin, "
            "/timezone Asia/Shanghai or /timezone UTC+8." + (f" Did you mean /timezone {nearest}?" if nearest else ""))


def _counts(c: Census, zh: bool) -> str:
    if zh:
        parts = [f"{c.memories} 条记忆", f"{c.events} 条对话摘要", f"{c.messages} 条聊天记录（所有对话中）"]
        if c.jobs:
            parts.append(f"{c.jobs} 个定时任务")
        if c.files:
            parts.append(f"你最近发来的 {c.files} 个文件")
        if c.waiting:
            parts.append(f"{c.waiting} 条等待回复的消息")
        if c.group_notes:
            parts.append(f"{c.group_notes} 条根据你在群里说的话记下的群组笔记")
        if c.incognito:
            parts.append("你开启的无痕模式设置")
        if c.timezone:
            parts.append("你设置的时区")
        if c.zones:
            parts.append(f"你之前所在的 {c.zones} 个时区的记录（用来确定你说话那天的日期）")
        return "、".join(parts)
    parts = [_n(c.memories, "memory", "memories"), _n(c.events, "conversation summary", "conversation summaries"),
             _n(c.messages, "message", "messages") + " of our conversations (every chat)"]
    if c.jobs:
        parts.append(_n(c.jobs, "scheduled job", "scheduled jobs"))
    if c.files:
        parts.append(_n(c.files, "file", "files") + " you sent lately")
    if c.waiting:
        parts.append(_n(c.waiting, "message", "messages") + " waiting to be answered")
    if c.group_notes:
        parts.append(_n(c.group_notes, "group note", "group notes") + " drawn from what you said in groups")
    if c.incognito:
        parts.append("your incognito setting (it goes off)")
    if c.timezone:
        parts.append("your time zone setting")
    if c.zones:
        parts.append(("the time zone" if c.zones == 1 else f"the {c.zones} time zones")
                     + " you were in before (kept to date your days)")
    return ", ".join(parts)


def _n(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _once_shown(job: CronJob, tz: tzinfo, *, zh: bool) -> str:
    """A one-time job's moment on the user's clock now (``tz``), with the
    time it was asked in when that was another zone (they moved since, or
    named one): "2026-11-12 23:00 (Asia/Shanghai), set as 2026-11-12 10:00
    (America/New_York)"."""
    from .cron import once_local

    assert job.at is not None
    shown = f"{parse_ts(job.at).astimezone(tz):%Y-%m-%d %H:%M} ({zone_name(tz)})"
    asked = once_local(job)
    if asked == shown:
        return shown
    return f"{shown}，设定时为 {asked}" if zh else f"{shown}, set as {asked}"
