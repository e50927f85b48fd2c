"""Per-chat intake lanes: order within a key, independence across keys, no
task for a quick job of an idle key, and how they end. Jobs wait on
asyncio Events, so nothing depends on timing."""

from __future__ import annotations

import asyncio

import pytest
from structlog.testing import capture_logs

from channels.lanes import Job, Lanes
from tests.logjson import debug_json_log, lines


def recorder(log: list[str], name: str, gate: asyncio.Event | None = None) -> Job:
    async def job() -> None:
        if gate is not None:
            await gate.wait()
        log.append(name)

    return job


async def test_a_quick_job_of_an_idle_key_runs_inline() -> None:
    lanes, log = Lanes(), []
    await lanes.run("a", recorder(log, "a1"))
    assert log == ["a1"] and not lanes.busy("a") and lanes.pending == 0


async def test_a_key_keeps_its_order_and_other_keys_go_on() -> None:
    lanes, log = Lanes(), []
    slow = asyncio.Event()
    lanes.submit("a", recorder(log, "a1", slow))
    await lanes.run("a", recorder(log, "a2"))  # behind a1, not inline
    await lanes.run("b", recorder(log, "b1"))  # b has nothing pending: at once
    assert log == ["b1"] and lanes.busy("a") and lanes.pending == 2
    slow.set()
    assert await lanes.wait_idle(5)
    assert log == ["b1", "a1", "a2"] and not lanes.busy("a") and lanes.pending == 0


async def test_a_lane_that_emptied_takes_new_jobs() -> None:
    lanes, log = Lanes(), []
    lanes.submit("a", recorder(log, "a1"))
    assert await lanes.wait_idle(5)
    lanes.submit("a", recorder(log, "a2"))
    assert await lanes.wait_idle(5)
    assert log == ["a1", "a2"]


async def test_a_failing_job_is_logged_and_the_lane_goes_on() -> None:
    lanes, log = Lanes(), []

    async def broken() -> None:
        raise ValueError("a bug")

    with capture_logs() as logs:
        lanes.submit("a", broken)
        lanes.submit("a", recorder(log, "a2"))
        assert await lanes.wait_idle(5)
    assert log == ["a2"]
    assert any(e["event"] == "intake job failed; skipped" and e["log_level"] == "error" for e in logs)


async def test_wait_change_returns_when_a_job_finishes() -> None:
    lanes, log = Lanes(), []
    gate = asyncio.Event()
    lanes.submit("a", recorder(log, "a1", gate))
    waiting = asyncio.create_task(lanes.wait_change(30))
    await asyncio.sleep(0)
    assert not waiting.done()
    gate.set()
    await asyncio.wait_for(waiting, 5)
    assert log == ["a1"]


async def test_wait_idle_says_when_jobs_are_still_pending() -> None:
    lanes, log = Lanes(), []
    lanes.submit("a", recorder(log, "a1", asyncio.Event()))
    assert not await lanes.wait_idle(0.01)
    assert lanes.pending == 1


async def test_cancel_drops_what_is_pending_and_close_refuses_more() -> None:
    lanes, log = Lanes(), []
    never = asyncio.Event()
    lanes.submit("a", recorder(log, "a1", never))
    lanes.submit("a", recorder(log, "a2"))
    lanes.submit("b", recorder(log, "b1", never))
    assert lanes.cancel() == 3
    assert await lanes.wait_idle(5)
    assert log == [] and lanes.pending == 0
    await lanes.close()
    await lanes.close()  # safe twice
    with pytest.raises(RuntimeError, match="closed"):
        lanes.submit("a", recorder(log, "a3"))


async def test_a_job_for_a_key_whose_quick_job_is_still_running_inline_waits_behind_it() -> None:
    # Two webhook requests for one idle chat: the first runs inline and is held
    # up (a full bus); the second must not overtake it.
    lanes, log = Lanes(), []
    held = asyncio.Event()
    first = asyncio.create_task(lanes.run("a", recorder(log, "a1", held)))
    await asyncio.sleep(0)
    assert lanes.busy("a")
    await lanes.run("a", recorder(log, "a2"))  # queued, returns at once
    await asyncio.sleep(0.01)
    assert log == []
    held.set()
    await first
    assert await lanes.wait_idle(5)
    assert log == ["a1", "a2"] and not lanes.busy("a")


async def test_an_inline_job_that_fails_or_is_cancelled_lets_the_lane_go_on() -> None:
    lanes, log = Lanes(), []
    held = asyncio.Event()
    first = asyncio.create_task(lanes.run("a", recorder(log, "a1", held)))
    await asyncio.sleep(0)
    await lanes.run("a", recorder(log, "a2"))
    first.cancel()
    assert await lanes.wait_idle(5)
    assert log == ["a2"] and not lanes.busy("a")


async def test_a_failing_jobs_log_line_names_the_error_and_where_not_its_words() -> None:
    """An intake job works on a user's message: its exception may quote it.
    The log line (at DEBUG too) has the type and place, not the text."""
    lanes = Lanes()

    async def broken() -> None:
        raise ValueError("cannot parse 'my oncologist Dr Okonkwo'")

    with debug_json_log() as out:
        lanes.submit("a", broken)
        assert await lanes.wait_idle(5)
    [line] = lines(out, "intake job failed; skipped")
    assert line["level"] == "error" and line["key"] == "a" and line["error"] == "ValueError"
    assert line["at"].startswith("tests/channels/test_lanes.py:") and line["at"].endswith(" in broken"), line
    assert "Okonkwo" not in out.getvalue() and "oncologist" not in out.getvalue()
