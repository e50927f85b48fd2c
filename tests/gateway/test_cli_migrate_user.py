"""``myclaw memory migrate`` of a workspace's top-level MEMORY.md: the
seed's layout files it under ``_global``, which every user's prompt gets.
Said, with the count, and ``--user`` files a one-person workspace under
its person instead (its files moved into their folder, so the file sync
keeps them theirs)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from click.testing import CliRunner, Result

from gateway.cli import main
from memory import MemoryEngine
from memory.filestore import OWNER_FILE, read_owner


def cli(*args: str) -> Result:
    return CliRunner().invoke(main, ["memory", *args])


def owners(home: Path) -> dict[str, list[str]]:
    async def read() -> dict[str, list[str]]:
        async with await MemoryEngine.open(home / "data" / "memory.db") as e:
            out: dict[str, list[str]] = {}
            for m in await e.list_memories():
                out.setdefault(m.owner, []).append(m.content)
            return out

    return asyncio.run(read())


def _workspace(home: Path) -> Path:
    mem = home / "workspace" / "memory"
    mem.mkdir(parents=True)
    (mem / "MEMORY.md").write_text("- My name is Yang\n- I live in Hangzhou\n", encoding="utf-8")
    (mem / "2026-03-01.md").write_text("- talked about the garden\n", encoding="utf-8")
    return mem


def test_migrating_a_top_level_memory_md_warns_that_every_user_gets_it(home: Path) -> None:
    _workspace(home)
    r = cli("migrate")
    assert r.exit_code == 0, r.output
    assert "2 facts from" in r.stderr and "are filed under _global: every user's prompt gets them" in r.stderr
    assert "--user" in r.stderr
    assert sorted(owners(home)["_global"]) == ["I live in Hangzhou", "My name is Yang"]
    again = cli("migrate")  # nothing new, but they still reach everyone: still said
    assert "2 facts from" in again.stderr
    # Once imported under _global, --user would leave a copy there: refused, nothing moved.
    moved = cli("migrate", "--user", "yang")
    assert moved.exit_code != 0 and "already imported under _global" in moved.output
    assert (home / "workspace" / "memory" / "MEMORY.md").exists()


def test_migrate_user_files_a_one_person_workspace_under_that_user(home: Path) -> None:
    mem = _workspace(home)
    r = cli("migrate", "--user", "yang")
    assert r.exit_code == 0, r.output
    assert "_global" not in r.stderr
    got = owners(home)
    assert sorted(got["yang"]) == ["I live in Hangzhou", "My name is Yang"] and "_global" not in got
    [folder] = (mem / "users").iterdir()
    assert read_owner((folder / OWNER_FILE).read_text(encoding="utf-8")) == "yang"
    assert (folder / "MEMORY.md").is_file() and (folder / "2026-03-01.md").is_file()
    assert not (mem / "MEMORY.md").exists() and not (mem / "2026-03-01.md").exists()
    assert "moved" in r.output and "yang" in r.output
    assert cli("migrate").exit_code == 0 and sorted(owners(home)["yang"]) == sorted(got["yang"])  # no copies


def test_a_top_level_file_skipped_for_a_problem_is_not_imported_and_can_still_be_filed_under_its_user(
    home: Path,
) -> None:
    """A migrate that skipped the top-level MEMORY.md (an unclosed <!--)
    imported nothing under _global: its record of the skip (for doctor) is
    no import, so --user still files the workspace under its person."""
    mem = home / "workspace" / "memory"
    mem.mkdir(parents=True)
    (mem / "MEMORY.md").write_text("- My name is Yang\n<!-- unclosed\n- I live in Hangzhou\n", encoding="utf-8")
    r = cli("migrate")
    assert r.exit_code == 0 and "unclosed <!-- comment" in r.output, r.output
    assert "_global" not in owners(home)
    (mem / "MEMORY.md").write_text("- My name is Yang\n<!-- a note -->\n- I live in Hangzhou\n", encoding="utf-8")
    moved = cli("migrate", "--user", "yang")
    assert moved.exit_code == 0, moved.output
    assert sorted(owners(home)["yang"]) == ["I live in Hangzhou", "My name is Yang"]
