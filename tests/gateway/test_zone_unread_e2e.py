"""A gateway.db whose zones cannot be read, through the real App (the
fake model, real SQLite files): every reply still comes, on the gateway's
zone, and the log says so once with the file's path, not once a message
(each recall asked, and each asking logged), and never with the user's
words. Readable again, then failing another way: said again."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from memory import ManualClock
from tests.gateway.test_remembering_e2e import Model, running, say
from tests.logjson import all_lines, debug_json_log


def zone_lines(out: object) -> list[dict[str, object]]:
    return [x for x in all_lines(out) if "time zone" in str(x.get("event", ""))]  # type: ignore[arg-type]


async def test_a_broken_zone_table_is_said_once_and_every_message_still_answered(
    tmp_path: Path, clock: ManualClock
) -> None:
    async with running(tmp_path, Model(), clock, by_hand=True) as (app, _):
        gateway_db = app.paths.gateway_db()
        with sqlite3.connect(gateway_db) as conn:  # another process's damage: the table gone
            conn.execute("ALTER TABLE user_timezones RENAME TO user_timezones_gone")
        with debug_json_log() as out:
            for said in ("my locker code is 4411", "the dentist is on Friday", "what day is it?"):
                assert await say(app, clock, said, "bob")
                clock.advance(30)
            clock.advance(3600)
            assert app.extraction is not None
            await app.extraction.tick()  # type: ignore[attr-defined]
        [line] = zone_lines(out)
        assert line["level"] == "warning" and line["path"] == str(gateway_db), line
        assert line["sqlite_error"] == "SQLITE_ERROR", line
        for words in ("4411", "dentist", "locker"):
            assert words not in out.getvalue()

        # Read again: said so; then a new failure: said again, once.
        with sqlite3.connect(gateway_db) as conn:
            conn.execute("ALTER TABLE user_timezones_gone RENAME TO user_timezones")
        with debug_json_log() as out:
            assert await say(app, clock, "hello again", "carol")
            assert await say(app, clock, "and again", "erin")
        assert [(x["event"], x["level"]) for x in zone_lines(out)] == [("user time zones read again", "info")]
        with sqlite3.connect(gateway_db) as conn:
            conn.execute("ALTER TABLE user_timezones RENAME TO user_timezones_gone")
        with debug_json_log() as out:
            for said in ("one", "two"):
                assert await say(app, clock, said, "dave")
        assert len(zone_lines(out)) == 1, zone_lines(out)
