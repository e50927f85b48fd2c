"""scripts/walk_chaos.py, short: the real gateway SIGKILLed while a reply's
send is held, while an extraction call is at the model and while a hand-run
daily compression runs beside it, with a /forget all under way and MEMORY.md
edited by hand; then every
invariant of the walk holds (docs/BENCHMARKS.md, "A chaos walk")."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from tests.procs import START
from tests.scripts._load import load_script


async def test_a_short_chaos_walk_breaks_no_invariant(tmp_path: Path) -> None:
    walk = load_script("walk_chaos")
    logging.getLogger("aiohttp").setLevel(logging.CRITICAL)  # the kills cut the fakes' requests short
    args = walk.parser().parse_args([
        "--rounds", "3", "--modes", "send,extraction,compress", "--seed", "5",
        "--min-up", "0.2", "--max-up", "0.8", "--aim", "3", "--erase-after", "6",
        "--drain", str(START), "--settle", "0.5", "--keep", str(tmp_path / "home"),
        "--file-edits", "1", "--paste", "300",  # hand edits of MEMORY.md, imported by the file sync
    ])
    result = await asyncio.wait_for(walk.run(args), 4 * START)
    assert result["violations"] == [], result
    assert result["kills"] == 3
    assert result["erasure"]["confirmed"] == 1 and result["erasure"]["words"] > 0
    assert result["answered_once"] > 0 and result["never_answered"] == 0
    assert result["messages"]["group_chatter"] > 0 and result["messages"]["edits"] > 0
    assert result["hand_edited"]["lines"] > 0  # each imported exactly once (a violation otherwise)
    assert result["hand_edited"]["imported"] == result["hand_edited"]["lines"]


def test_the_walks_read_the_fakes_and_each_other_by_their_public_names() -> None:
    """The chaos scripts drive the loopback fakes (and walk_chaos the
    kill script's helpers) by their public accessors only: a fake's
    private field renamed would break a walk nobody runs in CI."""
    import ast

    scripts = Path(__file__).resolve().parents[2] / "scripts"
    found: list[str] = []
    for name in ("walk_chaos.py", "chaos_kill.py"):
        tree = ast.parse((scripts / name).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
                found.append(f"{name}:{node.lineno} .{node.attr}")
    assert found == []
