"""Where a memory came from, in words for a person (the "where" of a
citation, :meth:`memory.types.Hit.citation`).

The model reads a citation and may repeat it to the user, so it names a
place and a kind of record the user knows ("from a chat on Telegram",
"weekly summary of 3 notes", "imported from MEMORY.md"), never our
internal refs (``buf:12``, ``event:3``, ``m:7``) or a chat's numeric id.
English, or Chinese for a chat held in Chinese.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # types.py imports this module
    from .types import Provenance

__all__ = ["FILE", "FORWARDED", "carried", "origin", "place"]

# channel -> (English place, Chinese place): "on Telegram", "Telegram 上"
_PLACES: dict[str, tuple[str, str]] = {
    "telegram": ("on Telegram", "Telegram 上"),
    "feishu": ("on Feishu", "飞书上"),
    "terminal": ("in the terminal", "终端里"),
}


# A saved memory's ``refs`` (source "manual"): the message it was saved
# from carried others' words, so they may be whose it is, not the user's.
FORWARDED = "forwarded"
FILE = "file"
# ... and "file:NAME" for each file of the user's its words were found in
# (one sent in that turn or earlier in the conversation): cited by name.
_NAMED = "file:"


def carried(*, forwards: bool, files: bool, names: Sequence[str] = ()) -> tuple[str, ...]:
    """The ``refs`` of a memory saved in a turn whose message forwards
    messages and/or sends a file, or whose words come from the user's files
    ``names``."""
    return (*((FORWARDED,) if forwards else ()), *((FILE,) if files or names else ()),
            *(_NAMED + n for n in names))


def _file_name(name: str) -> str:
    # The sender's text, inside a citation: one line, nothing that closes or splits it.
    flat = " ".join(name.split()).replace("[", "(").replace("]", ")").replace("·", "-")
    return flat[:80] or "file"


def place(channel: str, *, zh: bool = False) -> str:
    """Where a chat is held, as the user names it: "on Telegram", "飞书上"."""
    en, cn = _PLACES.get(channel, (f"on {channel}", f"{channel} 上"))
    return cn if zh else en


def _place(channel: str, zh: bool) -> str:
    return place(channel, zh=zh)


def _in_group(p: Provenance) -> bool:
    """Said in a group chat, as far as the record tells: its kind when
    kept, else a Telegram group's negative id (a Feishu chat's id does not
    tell, and a private chat is not to be called a group)."""
    if p.group is not None:
        return p.group
    return p.channel == "telegram" and p.chat_id.startswith("-")


def _zh(*parts: str) -> str:
    """Chinese words joined, with a space where they meet Latin letters or
    digits ("来自 Telegram 上的对话")."""
    out = ""
    for p in parts:
        if out and p and (out[-1].isascii() != p[0].isascii()) and (out[-1].isalnum() and p[0].isalnum()):
            out += " "
        out += p
    return out


def _span(p: Provenance, zh: bool) -> str:
    """", 2026-11-02 to 2026-11-15" (or one day) when the provenance says
    when the summarised records were written: a summary's own date is the
    day the job ran."""
    a, b = p.date_from[:10], p.date_to[:10]
    if not a:
        return ""
    if not b or b == a:
        return f"，{a}" if zh else f", {a}"
    return f"，{a} 至 {b}" if zh else f", {a} to {b}"


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _titled(title: str) -> str:
    # A group's title is its members' words, inside a citation: one line, nothing that closes or splits it.
    flat = " ".join(title.split())
    for a, b in (("[", "("), ("]", ")"), ("·", "-"), ("<", "‹"), (">", "›"), ('"', "'")):
        flat = flat.replace(a, b)
    return flat[:60]


def origin(source: str, p: Provenance, *, zh: bool = False, title: str = "") -> str:
    """``source`` (a :class:`~memory.types.Source` value, ``"event"`` for a
    daily event, ``"file"`` for the file store) and provenance ``p`` as
    words: '' when nothing is known. ``title``: the group's title, when it
    was said in a group whose title is known (read in a private chat)."""
    ch = p.channel
    title = _titled(title)
    if p.speakers and source == "event":  # a group's own day (memory/groupnotes.py)
        return _zh("本群的聊天摘要", _span(p, zh)) if zh else f"summary of this group's chat{_span(p, zh)}"
    if p.speakers:  # a group's own note (memory/groupnotes.py): the group's, said by its members
        names = ", ".join(_file_name(n) for n in p.said_by[:3]) + (" …" if len(p.said_by) > 3 else "")
        if zh:
            return _zh("本群的记录，", names, "说的") if names else "本群的记录"
        return f"the group's note, said by {names}" if names else "the group's note"
    if source == "manual":
        if ch == "web":
            return "在记忆管理页保存" if zh else "saved on the memory page"
        if ch == "cli":
            return "由管理员添加" if zh else "added by the operator"
        forwarded, filed = FORWARDED in p.refs, FILE in p.refs
        named = [_file_name(r[len(_NAMED):]) for r in p.refs if r.startswith(_NAMED)]
        names = ", ".join(named)
        if forwarded or filed:  # someone else's words, passed on by the user
            if zh:
                sent = f"发来的文件 {names}" if names else "发来的文件"
                what = f"转发的消息和{sent}" if forwarded and filed else "转发的消息" if forwarded else sent
                return _zh("来自你在", _place(ch, zh), what) if ch else _zh("来自你", what)
            sent = f"your file{'s' if len(named) > 1 else ''} {names}" if names else "a file you sent"
            what = (f"messages you forwarded and {sent}" if forwarded and filed
                    else "a message you forwarded" if forwarded else sent)
            return f"from {what} {_place(ch, zh)}" if ch else f"from {what}"
        if ch and _in_group(p):  # "when and where did we agree": in the group, not in private
            if title:
                return (_zh("你在", _place(ch, zh), f"的群聊“{title}”中告诉我的") if zh
                        else f'told by you in the group chat "{title}" {_place(ch, zh)}')
            return _zh("你在", _place(ch, zh), "的群聊中告诉我的") if zh else f"told by you in a group chat {_place(ch, zh)}"
        if ch:
            return _zh("你在", _place(ch, zh), "告诉我的") if zh else f"told by you {_place(ch, zh)}"
        return "你告诉我的" if zh else "told by you"
    if source == "event":
        if ch and _in_group(p):
            if title:
                return _zh(_place(ch, zh), f"群聊“{title}”的摘要") if zh else f'summary of the group chat "{title}" {_place(ch, zh)}'
            return _zh(_place(ch, zh), "群聊的摘要") if zh else f"summary of a group chat {_place(ch, zh)}"
        if ch:
            return _zh(_place(ch, zh), "的对话摘要") if zh else f"summary of a chat {_place(ch, zh)}"
        return "对话摘要" if zh else "summary of a conversation"
    if source in ("migration", "file"):
        files = [r for r in p.refs if r]
        # The file is the user's own notes: its name says where to look.
        name = PurePosixPath(files[0].removeprefix("shared ")).name if len(files) == 1 else ""
        if source == "file":
            if name and files[0].startswith("shared "):  # the file store's shared MEMORY.md
                return _zh("记在共享的", name) if zh else f"noted in the shared {name}"
            if name:
                return _zh("记在", name) if zh else f"noted in {name}"
            return "记在笔记里" if zh else "noted in files"
        if name:
            return _zh("从", name, "导入") if zh else f"imported from {name}"
        return "从文件导入" if zh else "imported from files"
    if source == "compression":  # a summary names what it summarised, whether or not of one chat
        notes = sum(1 for r in p.refs if r.startswith("m:"))
        days = sum(1 for r in p.refs if r.startswith("event:"))
        if notes or "weekly" in p.refs:
            if zh:
                return f"每周汇总（{notes} 条记忆{_span(p, zh)}）" if notes else "每周汇总"
            return f"weekly summary of {_count(notes, 'note', 'notes')}{_span(p, zh)}" if notes else "weekly summary"
        if zh:
            return f"每日汇总（{days} 段对话{_span(p, zh)}）" if days else f"每日汇总{_span(p, zh)}"
        what = f" of {_count(days, 'conversation', 'conversations')}" if days else ""
        return f"daily summary{what}{_span(p, zh)}"
    if ch and _in_group(p):
        if title:
            return _zh("来自", _place(ch, zh), f"的群聊“{title}”") if zh else f'from the group chat "{title}" {_place(ch, zh)}'
        return _zh("来自", _place(ch, zh), "的群聊") if zh else f"from a group chat {_place(ch, zh)}"
    if ch:  # extraction, or anything else said in a chat
        return _zh("来自", _place(ch, zh), "的对话") if zh else f"from a chat {_place(ch, zh)}"
    if source == "extraction":
        return "来自对话" if zh else "from a chat"
    return ""
