"""``/project``: the user says a project of theirs was renamed.

``/project atlas orion`` makes ``atlas`` an alias of ``orion``: what memory
holds under ``atlas`` is filed under ``orion``, and a message naming either
name recalls it (memory/projects.py).
``/project`` lists the user's aliases, ``/project remove atlas`` drops one.
The extraction model learns a rename said in so many words; this is the
user's way when it did not. Logged as ``alias`` / ``unalias`` (job ``chat``).
"""

from __future__ import annotations

from memory.changelog import write_log
from memory.engine import MemoryEngine
from memory.llm import slug
from memory.projects import BadProjectName

__all__ = ["ZH_REMOVE", "project_command"]

ZH_REMOVE = ("删除", "移除")  # a Chinese command word: the answer is Chinese (gateway/commands.py)
_REMOVE = ("remove", "delete", "rm", *ZH_REMOVE)
_JOB = "chat"


def _usage(zh: bool) -> str:
    if zh:
        return "项目改名后告诉我：/project 旧名 新名（如 /project atlas orion），旧名下记得的事就归到新名下。"
    return ("When a project is renamed, tell me: /project atlas orion (old name, new name); "
            "what I know of the old name is then filed under the new one.")


async def project_command(engine: MemoryEngine | None, user: str, args: str, *, zh: bool) -> str:
    """The answer to ``/project args`` from ``user``."""
    if engine is None:
        return "这里的记忆不支持项目改名。" if zh else "Project renames are not kept by this memory store."
    words = args.split()
    if not words:
        mine = await engine.owned_project_aliases(user)  # _global's are the operator's to list
        if not mine:
            return ("还没有改过名的项目。" if zh else "No renamed projects yet. ") + _usage(zh)
        listed = "\n".join(f"- {a} → {p}" for a, p in mine)
        head = "改过名的项目（旧名 → 新名）：" if zh else "Renamed projects (old name → new name):"
        # A blank line: Markdown would take the next line for the last entry's continuation.
        return f"{head}\n{listed}\n\n" + ("/project remove 旧名 可以取消。" if zh else "/project remove <old> undoes one.")
    if words[0].lower() in _REMOVE and len(words) == 2:
        async with engine.db.transaction() as conn:
            gone = await engine.remove_project_alias(user, words[1], conn=conn)
            if gone is not None:
                await write_log(conn, at=engine.now(), job=_JOB, owner=user, action="unalias",
                                detail={"alias": words[1], "moved": gone.moved})
        if gone is None:
            return f"{words[1]} 不是改过名的项目。" if zh else f"No renamed project is called {words[1]}."
        name = slug(words[1], "") or words[1]
        if zh:
            back = f"改名时移过去的 {gone.moved} 条记忆归回 {name} 名下。" if gone.moved else ""
            return f"好的，{words[1]} 不再是别的项目的旧名。{back}"
        back = (f" The {gone.moved} {'memory' if gone.moved == 1 else 'memories'} the rename moved "
                f"{'is' if gone.moved == 1 else 'are'} filed under {name} again." if gone.moved else "")
        return f"Done: {words[1]} is no longer another project's old name.{back}"
    if len(words) != 2:
        return _usage(zh)
    try:
        async with engine.db.transaction() as conn:
            done = await engine.set_project_alias(user, words[0], words[1], source="user", conn=conn)
            await write_log(conn, at=engine.now(), job=_JOB, owner=user, action="alias",
                            detail={"from": done.old, "to": done.new})
    except BadProjectName as exc:
        return _refused(exc, zh=zh)[:300]
    old, new, n = done.old, done.new, done.moved
    # Says what moved: a rename before anything was filed under the old name moves nothing.
    if zh:
        if not n:
            return f"记下了：{old} 现在叫 {new}。{old} 名下还没有记得的事；以后关于 {old} 的事都记在 {new} 名下。"
        return f"记下了：{old} 现在叫 {new}；{old} 名下的 {n} 条记忆都归到 {new}。"
    if not n:
        return (f"Noted: {old} is now called {new}. Nothing was filed under {old} yet; "
                f"what I learn of {old} from now on goes under {new}.")
    return (f"Noted: {old} is now called {new}; the {n} {'memory' if n == 1 else 'memories'} I had under {old} "
            f"{'is' if n == 1 else 'are'} filed under {new}.")


def _refused(exc: BadProjectName, *, zh: bool) -> str:
    if not zh:
        return f"Nothing renamed: {exc}"
    if exc.same:
        return f"没有改名：{exc.name} 本来就叫这个名字。"
    return f"没有改名：“{exc.name}”不能用作项目名（要有字母、数字或汉字，比如 猎户座）。"
