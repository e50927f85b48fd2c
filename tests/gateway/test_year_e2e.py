"""Seven months of one user, judged by what the model is given: Alice
chats three evenings a week about her job, a project that ends (its
database decision changed on the way) and one that starts, a move from Berlin to Munich, a diet and an editor theme that
change; Bob, the privacy control, chats beside her. The daily and weekly
compression, decay and the profile refresh run every night as in
production (tests/gateway/yearwalk.py). The whole year, measured, is
scripts/walk_year.py (docs/BENCHMARKS.md "A year of one user")."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from memory.engine import PROFILE_TOKEN_BUDGET
from memory.tokens import estimate_tokens
from tests.gateway.yearwalk import BOB_WORDS, QUESTIONS, Checkpoint, core_memory, memories_block, walk

_DATED = re.compile(r"^- \[m\d+ · \d{4}-\d{2}-\d{2}\] ")


def _current(body: dict[str, Any]) -> list[str]:
    """What the request presents as true now: Core Memory's entries and the
    block's facts, not the indented lines saying what they replaced."""
    lines = core_memory(body).splitlines() + memories_block(body).splitlines()
    return [line for line in lines if line.startswith("- [")]


def _check_core(cp: Checkpoint) -> list[str]:
    core = core_memory(cp.asked[QUESTIONS[0]])
    entries = [line for line in core.splitlines() if line.startswith("- [")]
    assert estimate_tokens(core) <= PROFILE_TOKEN_BUDGET, cp.label
    assert all(_DATED.match(line) for line in entries), core  # each entry with the day it was said
    words = [_DATED.sub("", line) for line in entries]
    assert len(words) == len(set(words)), core  # no entry twice
    return words


async def test_seven_months_keep_core_memory_current_recall_dated_and_users_apart(tmp_path: Path) -> None:
    year = await walk(tmp_path, days=214, checkpoints={27: "month 1", 86: "month 3", 157: "the day after the move",
                                                       178: "month 6", 213: "month 7"})
    at = {cp.label: cp for cp in year.checkpoints}

    # Core Memory: within its budget, dated, no duplicates, current.
    one = _check_core(at["month 1"])
    assert "Alice lives in Berlin" in one and "Alice is vegetarian: no meat in recipes" in one
    three = _check_core(at["month 3"])
    assert "Alice prefers light mode in editors" in three and "Alice prefers dark mode in editors" not in three
    _check_core(at["the day after the move"])
    moved = "\n".join(_current(at["the day after the move"].asked[QUESTIONS[0]]))
    assert "Alice lives in Munich" in moved and "Alice lives in Berlin" not in moved, moved  # before any refresh
    six = _check_core(at["month 6"])
    now = "\n".join(_current(at["month 6"].asked[QUESTIONS[3]]))
    for gone in ("Alice lives in Berlin", "Alice is vegetarian", "Atlas is Alice's current project"):
        assert gone not in now, now
    for held in ("Alice lives in Munich", "Alice is vegan", "Borealis is Alice's current project"):
        assert any(held in e for e in six), six
    # Its deadline two months past (memory/pastplan.py): out of Core Memory, without the model.
    assert "Atlas is due to ship by 2026-04-30" in three and not any("due to ship" in e for e in six), six
    seven = "\n".join(_current(at["month 7"].asked[QUESTIONS[0]]))
    # Back to dark mode in the words of January: current again, the light mode it replaced gone.
    assert "Alice prefers dark mode in editors" in seven and "light mode" not in seven, seven

    # A February decision, replaced in March, asked about in months 6 and 7: the current one recalled,
    # the February one right under it, dated and marked as no longer true; not in Core Memory.
    # Asked "back in February": February's decision, under the March one that replaced it, first.
    for label in ("month 6", "month 7"):
        feb = [line for line in memories_block(at[label].asked[QUESTIONS[1]]).splitlines() if line.startswith(("- [", "  ("))]
        assert "switched from Postgres to MySQL" in feb[0], feb
        assert "2026-02-11" in feb[1] and "no longer true: For Atlas the team chose Postgres" in feb[1], feb
        body = at[label].asked[QUESTIONS[5]]
        lines = memories_block(body).splitlines()
        first = next(i for i, line in enumerate(lines) if line.startswith("- [") and "MySQL" in line)
        assert "switched from Postgres to MySQL" in lines[first] and "2026-03-18" in lines[first], lines
        assert "2026-02-11" in lines[first + 1] and "no longer true" in lines[first + 1], lines
        assert "chose Postgres over MySQL" in lines[first + 1], lines
        assert "chose Postgres" not in "\n".join(_current(body)), _current(body)
        # "What did we talk about in March?": March's chat summaries, and only March's.
        march = [line for line in memories_block(at[label].asked[QUESTIONS[2]]).splitlines()
                 if re.match(r"- \[e\d+ ", line)]
        assert march and all(" · 2026-03-" in line for line in march), march

    # Tier 3 holds one summary a chat day: 92 evenings, and the days she was asked the questions.
    sizes = at["month 7"].sizes
    assert sizes["alice daily_events"] <= 92 + 5, sizes
    # Decay: small talk from more than five weeks ago is archived, identity stays.
    assert sizes["alice archived"] >= 40 and sizes["alice tier1 active"] <= 12, sizes

    # Bob's words never in a request made for Alice.
    assert len(year.alice_requests) > 300
    for body in year.alice_requests:
        text = json.dumps(body, ensure_ascii=False)
        assert not any(w in text for w in BOB_WORDS), text[:500]
