"""Markdown of what memory keeps: one renderer for the operator's ``myclaw
memory export --format markdown`` (every user, credentials included) and a
user's own ``/export`` in a private chat (gateway/commands.py), which adds
their scheduled jobs and how much still waits, and lists credentials by id
only, as ``/memory`` does.

Per user: Tier 1 (profile), Tier 2 by project, every status (an older
version says what replaced it), then Tier 3 events by date. A user's
headings say so in their words ("What I know about you"); the operator's
add the tier (``Knowledge (tier 2)``), as ``myclaw memory list --tier`` takes it.
Nothing reads the headings back (the JSON export is the machine-read one). The layout is
plain Markdown lists, so the file reads as well in a text editor as in a
Markdown viewer, and every line starts with the id ``/forget`` takes.
"""

from __future__ import annotations

import contextlib
import re
import tempfile
from collections import defaultdict
from collections.abc import AsyncIterable, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, BinaryIO

from memory.clock import local_day, parse_ts
from memory.origin import origin, place
from memory.types import GLOBAL_OWNER, Category, Event, Memory, OwnerData, OwnerIndex, Provenance, Source, Status

from .bus import Attachment
from .chattitles import group_name
from .timezones import TimezoneError, parse_timezone, zone_name

if TYPE_CHECKING:
    from memory.backend import MemoryBackend

    from .cron import CronJob

__all__ = ["MIME", "Spool", "UserExport", "chinese_enough", "erase_exports", "export_filename", "exports_folder",
           "mostly_chinese", "render_markdown", "render_user_export", "write_markdown", "write_user_export"]

MIME = "text/markdown"


def exports_folder(exports: Path, owner: str) -> Path:
    """Where ``owner``'s exports go in ``exports`` (``myclaw chat`` writes
    them to disk): a folder of theirs, so erasing them finds their files."""
    from memory.filestore import user_slug  # not at the top: it loads the SQLite store (numpy)

    return exports / user_slug(owner)


def erase_exports(exports: Path, owner: str) -> int:
    """Remove ``owner``'s export files (bytes zeroed) and their folder; how
    many files. A file written before exports had a folder per user names
    no one and stays (README)."""
    from memory.filestore import erase_file

    folder = exports_folder(exports, owner)
    if not folder.is_dir():
        return 0
    files = [p for p in folder.iterdir() if p.is_file()]
    for p in files:
        erase_file(p)
    with contextlib.suppress(OSError):  # something else put there is the operator's
        folder.rmdir()
    return len(files)
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")


_NO_NAMES: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True)
class UserExport:
    """What a user's ``/export`` holds (gateway/userdata.py gathers it)."""

    data: OwnerData
    jobs: Sequence[CronJob] = ()
    history: int = 0  # messages of their conversations kept as recent history (counted, not included)
    timezone: str = ""  # the zone they set with /timezone ("" when they set none)
    # The zones they set and left, each (zone, since, until: stamps, since "" unknown), oldest
    # first: what they said there keeps its day (memory/zonehistory.py).
    zones: Sequence[tuple[str, str, str]] = ()
    incognito_since: datetime | None = None  # when they turned /incognito on; None: off
    files: Sequence[tuple[str, datetime]] = ()  # files they sent lately (name, when), kept a day for file_read
    projects: Sequence[tuple[str, str]] = ()  # their renamed projects (old name, new name), /project
    groups: Mapping[str, str] = field(default_factory=dict)  # channel:chat_id -> title, for /share (gateway/chattitles.py)
    unanswered: int = 0  # messages they sent still waiting to be answered (the inbox's rows; counted, not included)
    edits: int = 0  # edits of their messages waiting to be applied (the inbox's; counted, not included)
    # Their memory.identities handles that stored rows before they were
    # mapped (merge-identities not run yet), each with its rows' index: theirs too.
    earlier: Sequence[tuple[str, OwnerIndex]] = ()

    @property
    def beside_memory(self) -> bool:
        """Whether the gateway keeps anything of theirs beside memory (an
        export of someone memory holds nothing of is not empty then)."""
        return bool(self.timezone or self.incognito_since or self.history or self.files or self.jobs
                    or self.unanswered or self.edits)


@dataclass(frozen=True)
class _Labels:
    title: str
    profile: str
    knowledge: str
    project: str
    events: str
    jobs: str
    once: str
    waiting: str
    set_aside: str
    hidden: str
    drawn_from: str
    found_by: str
    replaced_by: str
    updated: str
    topic: str
    importance: str
    built_on: str
    next_run: str
    shared_every: str
    shared_some: str  # {n}: how many groups
    earlier: str  # {handle}: a heading over what a handle stored before it was linked to them
    earlier_note: str  # {handle}: under it
    categories: dict[str, str]
    statuses: dict[str, str]


_EN = _Labels(
    title="myclaw memory export",
    profile="Who you are",
    knowledge="What I know about you",
    project="project",
    events="What happened, by day",
    jobs="Scheduled jobs",
    once="once at",
    waiting="Waiting to be learnt",
    set_aside="Not learnt",
    hidden="(a credential, not shown here)",
    drawn_from="drawn from",
    found_by="found by",
    replaced_by="replaced by",
    updated="updated",
    topic="topic",
    importance="importance",
    built_on="built on",
    next_run="next",
    shared_every="shared with every group where you ask",
    shared_some="shared with {groups}",
    earlier="Stored under {handle}, before it was linked to you",
    earlier_note="What you said as {handle} before that account was linked to you is kept apart until the "
                 "operator merges it; /forget takes these ids after that, /forget all erases them now.",
    categories={},  # the values are English words already
    statuses={},
)
_ZH = _Labels(
    title="myclaw 记忆导出",
    profile="关于你",
    knowledge="我对你的了解",
    project="项目",
    events="每天发生的事",
    jobs="定时任务",
    once="一次性",
    waiting="等待学习",
    set_aside="未能学习",
    hidden="（凭据，此处不显示）",
    drawn_from="出自",
    found_by="检索词",
    replaced_by="已被替换为",
    updated="更新于",
    topic="主题",
    importance="重要性",
    built_on="基于",
    next_run="下次",
    shared_every="可在你提问的每个群中使用",
    shared_some="可在群{groups}中使用",
    earlier="存于 {handle} 名下（关联到你之前）",
    earlier_note="你用 {handle} 在关联到你之前说的内容单独保存，直到管理员合并；合并后 /forget 可按编号删除，/forget all 现在就能全部删除。",
    categories={
        "identity": "身份", "config": "配置", "credential": "凭据", "decision": "决定", "solution": "解决办法",
        "event": "事件", "conversation": "对话", "temp": "临时", "debug": "调试",
    },
    statuses={"superseded": "旧版本", "archived": "已归档"},
)
# The operator's file (every user, or one from the memory page): the tiers
# its reader filters by, after words anyone reads.
_OP = replace(_EN, profile="Profile (tier 1)", knowledge="Knowledge (tier 2)", events="Daily events (tier 3)")


class Spool:
    """Where an export is written: in memory up to ``limit`` bytes, then in
    an anonymous temporary file (0600, no name on disk: it goes when the
    attachment is closed, or with the process), so a large memory's export
    is not held in memory whole, neither while written nor while sent."""

    _CHUNK = 1 << 16  # bytes gathered before a write to the file

    def __init__(self, limit: int, folder: Path | None = None) -> None:
        self.limit = limit
        self.folder = folder
        self._buf: list[bytes] = []
        self._held = 0
        self._file: BinaryIO | None = None

    def write(self, text: str) -> None:
        data = text.encode("utf-8")
        self._buf.append(data)
        self._held += len(data)
        if self._held > (self._CHUNK if self._file is not None else self.limit):
            self._flush()

    def _flush(self) -> None:
        if self._file is None:
            self._file = tempfile.TemporaryFile(dir=self.folder)  # O_TMPFILE where the system has it
        self._file.write(b"".join(self._buf))
        self._buf, self._held = [], 0

    def attachment(self, filename: str, mime: str) -> Attachment:
        """What was written, as a file to send: its bytes when small."""
        if self._file is None:
            data, self._buf, self._held = b"".join(self._buf), [], 0
            return Attachment(filename, data, mime)
        self._flush()
        self._file.flush()
        file, self._file = self._file, None
        return Attachment(filename, mime=mime, file=file)

    def close(self) -> None:
        """Drop what was written (an export that failed half way)."""
        self._buf, self._held = [], 0
        if self._file is not None:
            self._file.close()
            self._file = None


def mostly_chinese(texts: Sequence[str]) -> bool:
    """Label the file in Chinese when most of what it shows is Chinese."""
    return chinese_enough(sum(1 for t in texts if _CJK.search(t)), len(texts))


def chinese_enough(chinese: int, rows: int) -> bool:
    """:func:`mostly_chinese` from counts (:attr:`OwnerIndex.chinese`)."""
    return chinese > 0 and chinese * 2 >= rows


def export_filename(now: datetime) -> str:
    """``myclaw-memory-2026-11-22.md``"""
    return f"myclaw-memory-{now.date().isoformat()}.md"


def render_markdown(owners: Sequence[OwnerData], *, at: str, mapped: Mapping[str, str] = _NO_NAMES) -> str:
    """The operator's export: every owner given, grouped by owner, nothing
    hidden (the file is theirs to keep safe: written 0600). All in memory:
    :func:`write_markdown` writes the same text from rows read page by page.
    ``mapped``: as :func:`write_markdown`'s."""
    out = [f"# {_OP.title} ({at})"]
    for data in sorted(owners, key=lambda d: (d.owner in mapped, d.owner)):
        if not (data.memories or data.events or data.waiting or data.set_aside):
            continue
        out.append(f"\n## {data.owner}")
        if data.owner in mapped:
            out.append(_mapped_note(data.owner, mapped[data.owner]))
        out += _sections(data, _OP, hide_credentials=False, level="###")
        if data.waiting:
            out.append(f"\n### {_OP.waiting}\n")
            out.append(f"- {_n(data.waiting, 'line', 'lines')} waiting for extraction")
        if data.set_aside:
            out.append(f"\n### {_OP.set_aside}\n")
            out.append(f"- {_n(data.set_aside, 'line', 'lines')} set aside: too long for the memory model "
                       f"(myclaw memory retry-set-aside tries {'it' if data.set_aside == 1 else 'them'} again)")
    return "\n".join(out)


async def write_markdown(
    write: Callable[[str], None], backend: MemoryBackend, owners: Sequence[str], *, at: str, page: int = 500,
    renamed: Callable[[str], Awaitable[Sequence[tuple[str, str]]]] | None = None,
    titles: Mapping[str, str] = _NO_NAMES,
    unanswered: Callable[[str], Awaitable[int]] | None = None,
    mapped: Mapping[str, str] = _NO_NAMES,
    kept: Callable[[str], Awaitable[UserExport]] | None = None,
) -> tuple[int, int]:
    """:func:`render_markdown`'s text and a newline (the file the CLI
    wrote), handed to ``write`` a line at a time: each owner's index first
    (:meth:`~memory.backend.MemoryBackend.owner_index`), then their rows
    ``page`` at a time (``owner_rows``), so only a page is in memory
    however large the store. Returns how many memories and events it wrote.
    ``renamed``: an owner's renamed projects (old name, new name), said
    under their name (``MemoryEngine.owned_project_aliases``; the file
    store keeps none). ``titles``: groups' titles (``channel:chat_id`` ->
    title, gateway/chattitles.py) for where a memory is shared.
    ``unanswered``: how many of an owner's messages wait in gateway.db's
    inbox to be answered (``Inbox.owned``), said with what waits to be learnt.
    ``mapped``: handles among ``owners`` that stored rows before
    memory.identities mapped them to a user (handle -> user), written after
    the others, each under its own name and saying so. ``kept``: what the
    gateway keeps of an owner beside memory, as their ``/export`` gathers
    it (gateway/userdata.py: settings, kept history, recent files, scheduled
    jobs), said under their name; not asked of ``mapped`` handles (the
    person's includes theirs)."""
    first = True

    def line(text: str) -> None:
        nonlocal first
        write(text if first else "\n" + text)
        first = False

    line(f"# {_OP.title} ({at})")
    memories = events = 0
    for owner in sorted(owners, key=lambda o: (o in mapped, o)):
        index = await backend.owner_index(owner)
        waiting = await unanswered(owner) if unanswered is not None else 0
        besides = await kept(owner) if kept is not None and owner not in mapped else None
        settings = _settings(besides) if besides is not None else []
        jobs = list(besides.jobs) if besides is not None else []
        if not (index.memory_ids or index.event_ids or index.waiting or index.set_aside or waiting or settings
                or jobs):
            continue
        line(f"\n## {owner}")
        if owner in mapped:
            line(_mapped_note(owner, mapped[owner]))
        if renamed is not None and (projects := await renamed(owner)):
            line(f"\n{_EN_RENAMED}: {_renamed(projects)}")
        for text in settings:
            line(text)
        shown = {f"m:{i}" for i in index.memory_ids} | {f"event:{i}" for i in index.event_ids}
        group: tuple[int, str] | None = None
        dated = False
        async for row in backend.owner_rows(owner, index, page=page):
            if isinstance(row, Memory):
                memories += 1
                if (row.tier, row.project) != group:
                    group = (row.tier, row.project)
                    line(_group_title(row.tier, row.project, _OP, "###"))
                for text in _memory(row, _OP, False, shown, set(), None, titles):
                    line(text)
            else:
                events += 1
                if not dated:
                    dated = True
                    line(f"\n### {_OP.events}\n")
                line(_event(row, _OP))
        if index.waiting or waiting:
            line(f"\n### {_OP.waiting}\n")
        if index.waiting:
            line(f"- {_n(index.waiting, 'line', 'lines')} waiting for extraction")
        if waiting:
            line(f"- {_n(waiting, 'message', 'messages')} waiting to be answered (gateway.db's inbox; not listed)")
        if index.set_aside:
            line(f"\n### {_OP.set_aside}\n")
            line(f"- {_n(index.set_aside, 'line', 'lines')} set aside: too long for the memory model "
                 f"(myclaw memory retry-set-aside tries {'it' if index.set_aside == 1 else 'them'} again)")
        if jobs:
            line(f"\n### {_OP.jobs}\n")
            for job in jobs:
                line(_job(job, _OP))
    write("\n")
    return memories, events


def _settings(export: UserExport) -> list[str]:
    """What their ``/export`` says at its head beside memory (gateway.db),
    for the operator's file: only what is set or kept (UTC times)."""
    out: list[str] = []
    if export.timezone:
        out.append(f"- time zone: {export.timezone} (/timezone)")
    if export.zones:
        out.append("- zones they left (memory.db): " + "; ".join(
            f"{z} until {parse_ts(u):%Y-%m-%d %H:%M} UTC" for z, _, u in export.zones))
    if export.incognito_since is not None:
        out.append(f"- incognito: on since {export.incognito_since.astimezone(UTC):%Y-%m-%d %H:%M} UTC")
    if export.history:
        out.append(f"- {_n(export.history, 'message', 'messages')} of their conversations kept as recent history "
                   "(gateway.db; not listed)")
    if export.files:
        out.append(f"- files they sent lately, kept a day (names only): {_files(export.files, UTC)}")
    if export.edits:
        out.append(f"- {_n(export.edits, 'edit', 'edits')} of their messages waiting to be applied "
                   "(gateway.db's inbox; not listed)")
    return [f"\n### {_OP_SETTINGS}\n", *out] if out else []


_OP_SETTINGS = "Settings and what the gateway keeps"


def render_user_export(export: UserExport, *, at: str, zh: bool, tz: tzinfo = UTC,
                       earlier: Sequence[OwnerData] = ()) -> str:
    """A user's own export: only ``export.data.owner``'s rows (the caller
    reads them for that user alone), credentials by id only; times of the
    user's settings in ``tz``, theirs. ``earlier``: the rows of each of
    ``export.earlier``'s handles, in its order, after theirs under a heading
    naming the handle. All in memory: :func:`write_user_export` writes the
    same text from rows read page by page."""
    data, lab = export.data, (_ZH if zh else _EN)
    every = [data, *earlier]
    memories, events = sum(len(d.memories) for d in every), sum(len(d.events) for d in every)
    out = _user_head(export, memories, events, at=at, zh=zh, tz=tz)
    if not (memories or events):
        out.append("\n" + _nothing(zh))
    # One person: a row of theirs may cite, or repeat the words of a
    # credential of, a row kept under one of their handles.
    shown = {f"m:{m.id}" for d in every for m in d.memories} | {f"event:{e.id}" for d in every for e in d.events}
    secret_words = {ln for d in every for m in d.memories if m.category is Category.CREDENTIAL
                    for ln in m.source_text.splitlines() if ln.strip()}
    out += _sections(data, lab, hide_credentials=True, level="##", tz=tz, titles=export.groups, shown=shown,
                     secret_words=secret_words)
    for (handle, _), rows in zip(export.earlier, earlier, strict=True):
        if rows.memories or rows.events:
            out += [f"\n## {lab.earlier.format(handle=handle)}\n", lab.earlier_note.format(handle=handle)]
            out += _sections(rows, lab, hide_credentials=True, level="###", tz=tz, titles=export.groups, shown=shown,
                             secret_words=secret_words)
    out += _user_tail(export, sum(d.waiting for d in every), lab, zh=zh, set_aside=sum(d.set_aside for d in every))
    return "\n".join(out) + "\n"


async def write_user_export(
    write: Callable[[str], None],
    export: UserExport,
    index: OwnerIndex,
    rows: AsyncIterable[Memory | Event],
    *,
    at: str,
    zh: bool,
    tz: tzinfo = UTC,
    earlier: Sequence[AsyncIterable[Memory | Event]] = (),
    said_tz: tzinfo | None = None,
) -> None:
    """:func:`render_user_export`'s text, handed to ``write`` a line at a
    time, from ``index`` (what must be known first: the ids the file shows,
    the credentials' words) and ``rows`` (its rows in its order, as
    :meth:`~memory.backend.MemoryBackend.owner_rows` reads them), so only a
    page of rows is in memory at once. ``export.data``'s rows are not read.
    ``earlier``: the rows of each of ``export.earlier``'s handles, in its
    order, written after theirs under a heading naming the handle.
    ``said_tz``: the calendar a memory's days are read on (``tz`` with the
    zones they were in before, memory/zonehistory.py; ``tz`` when None)."""
    lab = _ZH if zh else _EN
    first = True

    def line(text: str) -> None:
        nonlocal first
        write(text if first else "\n" + text)
        first = False

    every = [index, *(i for _, i in export.earlier)]
    memories, events = sum(len(i.memory_ids) for i in every), sum(len(i.event_ids) for i in every)
    for text in _user_head(export, memories, events, at=at, zh=zh, tz=tz):
        line(text)
    if not (memories or events):
        line("\n" + _nothing(zh))
    shown = {f"m:{i}" for x in every for i in x.memory_ids} | {f"event:{i}" for x in every for i in x.event_ids}
    secret_words = {ln for x in every for said in x.credential_sources for ln in said.splitlines() if ln.strip()}

    async def section(rows: AsyncIterable[Memory | Event], level: str) -> None:
        group: tuple[int, str] | None = None
        dated = False
        async for row in rows:
            if isinstance(row, Memory):
                if (row.tier, row.project) != group:
                    group = (row.tier, row.project)
                    line(_group_title(row.tier, row.project, lab, level))
                for text in _memory(row, lab, True, shown, secret_words, said_tz or tz, export.groups):
                    line(text)
            else:
                if not dated:
                    dated = True
                    line(f"\n{level} {lab.events}\n")
                line(_event(row, lab))

    await section(rows, "##")
    for (handle, i), handle_rows in zip(export.earlier, earlier, strict=True):
        if i.memory_ids or i.event_ids:
            line(f"\n## {lab.earlier.format(handle=handle)}\n")
            line(lab.earlier_note.format(handle=handle))
            await section(handle_rows, "###")
    for text in _user_tail(export, sum(i.waiting for i in every), lab, zh=zh,
                           set_aside=sum(i.set_aside for i in every)):
        line(text)
    write("\n")


def _mapped_note(handle: str, person: str) -> str:
    """Under a handle's rows in the operator's file: whose they are now."""
    return (f"\nstored under {handle} before memory.identities mapped it to {person} "
            f"(`myclaw memory merge-identities` moves it to {person})")


def _nothing(zh: bool) -> str:
    return "我还没有记住关于你的任何事。" if zh else "I don't remember anything about you yet."


def _user_head(export: UserExport, memories: int, events: int, *, at: str, zh: bool, tz: tzinfo) -> list[str]:
    """The title and what the file holds, before the rows."""
    lab = _ZH if zh else _EN
    since = export.incognito_since
    when = f"{since.astimezone(tz):%Y-%m-%d %H:%M}" if since is not None else ""
    out = [f"# {lab.title} ({at})", ""]
    counts = (memories, events, len(export.jobs))
    if zh:
        out += [
            f"我保存的关于你的一切：{counts[0]} 条记忆、{counts[1]} 条每日事件、{counts[2]} 个定时任务。",
            "每行开头的编号（如 m12、e3）可用于 /forget 永久删除。凭据只列出编号，不显示内容；想看请在私聊中问我。",
        ]
        if export.history:
            out.append(f"另有 {export.history} 条最近的聊天记录作为对话上下文保存（此处未列出）。")
        if export.files:
            out.append(f"你最近发来的文件（保存一天，供我再次阅读；此处只列文件名）：{_files(export.files, tz)}。")
        if export.timezone:
            out.append(f"你设置的时区：{export.timezone}（/timezone）。")
        if export.zones:
            out.append("你之前所在的时区（那时说的话按那里的日期记）：" + "、".join(
                f"{z}（至 {parse_ts(u).astimezone(tz):%Y-%m-%d %H:%M}）" for z, _, u in export.zones) + "。")
        if export.projects:
            out.append(f"改过名的项目：{_renamed(export.projects)}（/project）。")
        out.append(f"无痕模式：自 {when} 起开启（/incognito off 关闭）。" if since is not None
                   else "无痕模式：关闭（/incognito 开启）。")
    else:
        out += [
            f"Everything I keep about you: {_n(counts[0], 'memory', 'memories')}, "
            f"{_n(counts[1], 'daily event', 'daily events')}, {_n(counts[2], 'scheduled job', 'scheduled jobs')}.",
            "The id at the start of a line (m12, e3) is what /forget takes to erase it for good. "
            "Credentials are listed by id only, not their content; ask me in our private chat to see one.",
        ]
        if export.history:
            out.append(f"Also kept: {_n(export.history, 'message', 'messages')} of our recent conversations, "
                       "as context for the next replies (not listed here).")
        if export.files:
            out.append(f"Files you sent lately, kept a day for me to read again (names only here): "
                       f"{_files(export.files, tz)}.")
        if export.timezone:
            out.append(f"Your time zone: {export.timezone} (/timezone).")
        if export.zones:
            out.append("The zones you were in before, so what you said there keeps its day: " + "; ".join(
                f"{z} until {parse_ts(u).astimezone(tz):%Y-%m-%d %H:%M}" for z, _, u in export.zones) + ".")
        if export.projects:
            out.append(f"Your renamed projects: {_renamed(export.projects)} (/project).")
        out.append(f"Incognito: on since {when} (/incognito off ends it)." if since is not None
                   else "Incognito: off (/incognito turns it on).")
    return out


_EN_RENAMED = "Renamed projects"  # old name → new name


def _renamed(projects: Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"{old} → {new}" for old, new in projects)


def _user_tail(export: UserExport, waiting: int, lab: _Labels, *, zh: bool, set_aside: int = 0) -> list[str]:
    """Their scheduled jobs, what waits to be learnt (and their messages
    still to be answered, which are learnt from after) and what could not
    be (lines set aside: kept, theirs, but not waiting), after the rows."""
    out: list[str] = []
    if export.jobs:
        out.append(f"\n## {lab.jobs}\n")
        out += [_job(job, lab) for job in export.jobs]
    if waiting or export.unanswered or export.edits:
        out.append(f"\n## {lab.waiting}\n")
    if waiting:
        out.append(
            f"- {waiting} 条聊天内容还在等待提取为记忆。"
            if zh
            else f"- {_n(waiting, 'line', 'lines')} of our conversations still waiting to be learnt from."
        )
    if export.unanswered:
        out.append(
            f"- 你发来的 {export.unanswered} 条消息还在等待回复（此处未列出）。"
            if zh
            else f"- {_n(export.unanswered, 'message', 'messages')} you sent, still waiting to be answered "
                 "(not listed here)."
        )
    if export.edits:
        out.append(
            f"- 你对消息的 {export.edits} 处修改还在等待生效（此处未列出）。"
            if zh
            else f"- {_n(export.edits, 'edit', 'edits')} of your messages, still waiting to be applied (not listed here)."
        )
    if set_aside:
        out.append(f"\n## {lab.set_aside}\n")
        out.append(
            f"- {set_aside} 条内容我没能学习：对记忆模型来说太长了。"
            if zh
            else f"- {_n(set_aside, 'line', 'lines')} I could not learn from: too long for the memory model."
        )
    return out


def _group_title(tier: int, project: str, lab: _Labels, level: str) -> str:
    title = lab.profile if tier == 1 else lab.knowledge
    return f"\n{level} {title}" + ("" if project == GLOBAL_OWNER else f" — {lab.project} {project}") + "\n"


def _sections(
    data: OwnerData, lab: _Labels, *, hide_credentials: bool, level: str, tz: tzinfo | None = None,
    titles: Mapping[str, str] = _NO_NAMES, shown: set[str] | None = None, secret_words: set[str] | None = None,
) -> list[str]:
    """``tz``: the owner's zone, for the days memories were said (their
    events are dated in it already); None: UTC's, as the operator's export.
    ``shown``, ``secret_words``: the file's (a person's handles' rows too);
    by default ``data``'s."""
    out: list[str] = []
    groups: dict[tuple[int, str], list[Memory]] = defaultdict(list)
    for m in data.memories:
        groups[(m.tier, m.project)].append(m)
    if shown is None:
        shown = {f"m:{m.id}" for m in data.memories} | {f"event:{e.id}" for e in data.events}
    # The words a credential was drawn from hold it, also when another fact
    # came from the same message: those lines are not shown either.
    if secret_words is None:
        secret_words = {line for m in data.memories if m.category is Category.CREDENTIAL
                        for line in m.source_text.splitlines() if line.strip()}
    if not hide_credentials:
        secret_words = set()
    for (tier, project), items in sorted(groups.items()):
        out.append(_group_title(tier, project, lab, level))
        for m in sorted(items, key=lambda m: m.id):
            out += _memory(m, lab, hide_credentials, shown, secret_words, tz, titles)
    if data.events:
        out.append(f"\n{level} {lab.events}\n")
        for e in sorted(data.events, key=lambda e: (e.event_date, e.id)):
            out.append(_event(e, lab))
    return out


def _where(source: str, p: Provenance, lab: _Labels) -> str:
    """Where a row came from in the words citations use (memory/origin.py),
    never ``telegram chat 100`` or ``weekly,m:1``."""
    if not p.channel and p.refs and all(r.endswith(".md") for r in p.refs) and source != Source.MIGRATION:
        source = "file"  # the file store's own MEMORY.md and daily files
    return origin(source, p, zh=lab is _ZH)


def _built_on(p: Provenance, shown: set[str], lab: _Labels) -> str:
    """"built on m1, m2, e3": the rows of this file a summary or a profile
    entry was made from, by the ids the file shows (the raw refs mean
    nothing to a reader, and a row erased since is not named)."""
    ids = [("m" + r[2:]) if r.startswith("m:") else ("e" + r[6:]) for r in p.refs if r in shown]
    if not ids:
        return ""
    return f"{lab.built_on} " + ("、" if lab is _ZH else ", ").join(ids)


def _memory(
    m: Memory, lab: _Labels, hide: bool, shown: set[str], secret_words: set[str], tz: tzinfo | None,
    groups: Mapping[str, str] = _NO_NAMES,
) -> list[str]:
    secret = hide and m.category is Category.CREDENTIAL
    said, updated = local_day(m.created_at, tz), local_day(m.updated_at, tz)
    flags = [lab.categories.get(m.category.value, m.category.value), f"{lab.importance} {m.importance:.2f}", said]
    if m.status is not Status.ACTIVE:
        flags.append(lab.statuses.get(m.status.value, m.status.value))
    flags += [x for x in (_where(m.source.value, m.provenance, lab), _built_on(m.provenance, shown, lab)) if x]
    if m.topic not in ("_general", "_profile", ""):
        flags.append(f"{lab.topic} {m.topic}")
    if updated > said:
        flags.append(f"{lab.updated} {updated}")
    if m.superseded_by is not None:
        flags.append(f"{lab.replaced_by} m{m.superseded_by}")
    if m.provenance.shared:  # /share (memory/sharing.py), each group by its title when known
        named = [group_name(p, groups) for p in m.provenance.shared]
        flags.append(lab.shared_every if "*" in m.provenance.shared else lab.shared_some.format(
            groups="、".join(f"“{x}”" for x in named) if lab is _ZH else " and ".join(named)))
    body = lab.hidden if secret else m.content.replace("\n", "\n  ")
    lines = [f"- [m{m.id}] {body} _({('，' if lab is _ZH else ', ').join(flags)})_"]
    said = m.source_text
    if said and not secret and not any(line in secret_words for line in said.splitlines()):
        lines.append(f"  > {lab.drawn_from}: " + said.replace("\n", "\n  > "))
    if m.search_terms and not secret:  # memory/cues.py: the words it is found by, not the fact
        lines.append(f"  > {lab.found_by}: " + ("、" if lab is _ZH else ", ").join(m.search_terms))
    return lines


def _event(e: Event, lab: _Labels) -> str:
    body = e.summary.replace("\n", "\n  ")
    p = e.provenance if e.provenance.channel or not e.channel else replace(e.provenance, channel=e.channel)
    where = _where("event", p, lab)
    return f"- [e{e.id}] {e.event_date}: {body}" + (f" _({where})_" if where else "")


def _job(job: CronJob, lab: _Labels) -> str:
    """A scheduled job with where its reply goes in words (not a chat's
    numeric id) and its next run in the zone it runs by."""
    from .cron import once_local  # here: the scheduler is not needed for the operator's export

    zh = lab is _ZH
    where = ""
    if job.channel:
        pl = place(job.channel, zh=zh)
        if zh:
            where = f"回复发到{' ' if pl[0].isascii() else ''}{pl}的{'私聊' if job.private else '对话'}"
        else:
            where = f"replies in {'our private chat' if job.private else 'a chat'} {pl}"
    nxt = f"{lab.next_run} {_next_local(job)}" if job.next_run_at and not job.once else ""
    extra = ("，" if zh else ", ").join(x for x in (where, nxt) if x)
    when = f"{lab.once} {once_local(job)}" if job.once else f"`{job.schedule}`"
    return f"- [{job.id}] {when} {_one_line(job.message)}" + (f" _({extra})_" if extra else "")


def _next_local(job: CronJob) -> str:
    """"2026-11-23 09:00 (Asia/Shanghai)": the next run in the zone the job
    runs by (its own, else UTC, as the scheduler stores it)."""
    try:
        tz = parse_timezone(job.timezone or "UTC")
        at = parse_ts(job.next_run_at)
    except (TimezoneError, ValueError):
        return job.next_run_at
    return f"{at.astimezone(tz):%Y-%m-%d %H:%M} ({zone_name(tz)})"


def _files(files: Sequence[tuple[str, datetime]], tz: tzinfo) -> str:
    return ", ".join(f"{_one_line(name)} ({when.astimezone(tz):%Y-%m-%d %H:%M})" for name, when in files)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _n(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"
