"""What a fact is about when that thing holds one value at a time.

Where someone lives, who they work for, their partner, their phone,
laptop or car, a preference that replaces another, a project's date or
state: a new value replaces the old one, often in other words ("User
moved to Berlin" / "User lives in Shanghai", "User switched to a Pixel 8" /
"User's phone is an iPhone 12") and filed under another category or topic,
so neither the words nor the topic find the old fact for the second look
(memory/consolidate.py, ``Consolidator.recheck``). A small lexicon of cue
words (English and Chinese) names the thing; a new fact is shown the
stored facts about the same thing, and the memory model decides whether
it replaces one. Cues are deliberately broad: a wrong cue costs a fact
shown to the model, never a fact replaced behind it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["BY_NAME", "SLOTS", "Slot", "like_patterns", "slots_of"]


@dataclass(frozen=True)
class Slot:
    name: str
    words: tuple[str, ...]
    """English cues, whole words or phrases (every form listed: "live",
    "lives", ...), any case."""
    zh: tuple[str, ...] = ()
    """Chinese cues, matched anywhere."""
    per_project: bool = False
    """A project's own (its deadline, its state): only facts of the same
    project (any of its names) count."""


SLOTS: tuple[Slot, ...] = (
    Slot("home", (
        "live", "lives", "lived", "living in", "moved", "moving to", "move to", "relocated", "relocating",
        "resides", "reside", "address", "apartment", "flat in", "home is", "hometown",
    ), ("住在", "住的", "住址", "居住", "搬到", "搬家", "搬去", "地址", "定居", "老家")),
    # Not "works" alone: "the script works" is no job.
    Slot("work", (
        "work at", "works at", "worked at", "working at", "work for", "works for", "worked for", "working for",
        "work as", "works as", "worked as", "working as", "job", "employer", "employed", "company", "joined",
        "hired", "quit", "resigned", "laid off", "promoted", "promotion", "job title", "new role",
        "new position", "career", "profession", "occupation", "manager", "boss",
    ), ("工作", "上班", "公司", "入职", "跳槽", "离职", "辞职", "职位", "职业", "升职", "经理", "老板", "领导")),
    Slot("partner", (
        "girlfriend", "boyfriend", "partner", "wife", "husband", "spouse", "fiance", "fiancé", "fiancee",
        "fiancée", "married", "marry", "marrying", "engaged", "divorced", "divorce", "dating", "broke up",
        "break up", "relationship", "is single", "am single", "now single", "widowed",
    ), ("女朋友", "男朋友", "处对象", "妻子", "老婆", "丈夫", "老公", "结婚", "离婚", "单身", "订婚", "分手", "恋爱")),
    Slot("phone", (
        "phone", "phones", "smartphone", "iphone", "android", "pixel", "galaxy", "oneplus", "xiaomi", "huawei",
    ), ("手机", "华为", "小米")),
    Slot("computer", (
        "laptop", "laptops", "computer", "pc", "macbook", "thinkpad", "imac", "desktop", "workstation", "xps",
    ), ("电脑", "笔记本", "台式机")),
    Slot("car", (
        "car", "cars", "drives a", "vehicle", "tesla", "toyota", "honda", "bmw", "audi", "volkswagen", "byd",
    ), ("汽车", "座驾", "新车", "提车", "买车", "特斯拉", "比亚迪", "蔚来")),
    Slot("preference", (
        "prefer", "prefers", "preferred", "preference", "favorite", "favourite", "likes", "like to", "loves",
        "enjoys", "fan of", "no longer", "anymore", "switched to",
    ), ("喜欢", "偏好", "最爱", "爱喝", "爱吃", "更爱", "不再", "改喝", "改吃")),
    Slot("project_date", (
        "deadline", "due", "launch", "launches", "launching", "ships", "ship date", "release", "releases",
        "release date", "go-live", "go live", "cutover", "moved to", "postponed", "delayed", "pushed back", "slipped",
        "milestone", "status", "on hold", "paused", "cancelled", "canceled", "shelved", "resumed",
    ), ("截止", "上线", "发布", "交付", "期限", "延期", "推迟", "暂停", "搁置", "状态", "里程碑"), per_project=True),
)


def _pattern(slot: Slot) -> re.Pattern[str]:
    en = "|".join(re.escape(w) for w in sorted(slot.words, key=len, reverse=True))
    zh = "|".join(re.escape(w) for w in slot.zh)
    return re.compile(rf"(?i)(?<![A-Za-z])(?:{en})(?![A-Za-z])" + (f"|{zh}" if zh else ""))


_PATTERNS = {s.name: _pattern(s) for s in SLOTS}
BY_NAME = {s.name: s for s in SLOTS}


def slots_of(text: str) -> frozenset[str]:
    """The names of the slots ``text`` is about."""
    return frozenset(name for name, p in _PATTERNS.items() if p.search(text))


def like_patterns(names: Iterable[str]) -> list[str]:
    """SQL ``LIKE`` patterns a fact about one of the slots ``names`` holds
    one of (a coarse filter: :func:`slots_of` decides)."""
    out: list[str] = []
    for name in sorted(set(names)):
        slot = BY_NAME[name]
        out += [f"%{w}%" for w in (*slot.words, *slot.zh)]
    return list(dict.fromkeys(out))
