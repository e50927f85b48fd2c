"""A year of a traveller's daily 8:00 reminder through the real App
(tests/gateway/test_time_walk_e2e.py, longer): she flies between New York,
London, Shanghai, Sydney and back, says ``/timezone`` on landing, and the
clock passes every DST change of those zones (north and south). The
scheduler is polled every 15 minutes, as the gateway's loop does.

Prints when each leg began and, over the year, on the calendar of the zone
she was in at each run: the days with no run, the days with two (a date
lived twice, west over the date line, has one in each zone: right), the
runs not at 08:00 local (a day she landed east after 08:00: the run she
had pending) and the wall time. Exit status 1 if a day had none or two.

    .venv/bin/python scripts/walk_time.py [--step-minutes 15]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import structlog  # noqa: E402

from memory import ManualClock  # noqa: E402

# Imported by name: the walk lives with the tests, which mypy does not check
# ([tool.mypy] files), and a plain import would have it follow them.
_walk: Any = importlib.import_module("tests.gateway.test_time_walk_e2e")
_say: Any = importlib.import_module("tests.gateway.test_remembering_e2e").say
ALICE, gateway, local, walk_jobs = _walk.ALICE, _walk.gateway, _walk.local, _walk.walk_jobs

# (landing day, zone, local time she says /timezone): the year's legs.
LEGS = (
    ("2026-01-05", "America/New_York", "12:00"),
    ("2026-02-10", "Europe/London", "12:00"),  # east, landing after 08:00 there
    ("2026-04-01", "Asia/Shanghai", "18:00"),
    ("2026-06-15", "Australia/Sydney", "07:00"),  # east, landing before 08:00 there
    ("2026-09-01", "America/New_York", "22:00"),  # west, across the date line
    ("2026-11-20", "Asia/Shanghai", "10:00"),
)
END = "2027-01-05"


async def main(step: timedelta) -> int:
    clock = ManualClock(local(LEGS[0][0], "09:00", ZoneInfo(LEGS[0][1])))
    started = time.perf_counter()
    zones: list[tuple[datetime, ZoneInfo]] = []  # (from this instant, her zone)
    ran: list[tuple[str, datetime]] = []
    with tempfile.TemporaryDirectory(prefix="walk-time-") as tmp:
        async with gateway(Path(tmp), clock) as (app, _):
            for i, (day, name, hm) in enumerate(LEGS):
                tz = ZoneInfo(name)
                landing = local(day, hm, tz)
                if i:
                    ran += await walk_jobs(app, clock, clock.now() + step, landing - step, step)
                clock.set(landing)
                await _say(app, clock, f"/timezone {name}", ALICE)
                zones.append((landing, tz))
                if i == 0:
                    await _say(app, clock, "remind me every day at 8 to take my pills", ALICE)
            ran += await walk_jobs(app, clock, clock.now() + step, local(END, "00:00", zones[-1][1]), step)
    took = time.perf_counter() - started

    def zone_at(at: datetime) -> ZoneInfo:
        return [tz for since, tz in zones if since <= at][-1]

    pills = [at for words, at in ran if words == "take your pills"]
    per_day = Counter((at.astimezone(zone_at(at)).date(), zone_at(at).key) for at in pills)
    first = pills[0].astimezone(zone_at(pills[0])).date()
    last = pills[-1].astimezone(zone_at(pills[-1])).date()
    days = [first + timedelta(days=n) for n in range((last - first).days + 1)]
    seen = Counter(d for d, _ in per_day)
    none = [d for d in days if seen[d] == 0]
    twice = sorted(f"{d} ({z})" for (d, z), n in per_day.items() if n > 1)  # on one calendar
    # Flying west over the date line she lives a date twice, once in each zone: a run on each is right.
    lived_twice = sorted(f"{d} ({', '.join(z for dd, z in per_day if dd == d)})" for d, n in seen.items() if n > 1)
    off = [at.astimezone(zone_at(at)) for at in pills if f"{at.astimezone(zone_at(at)):%H:%M}" != "08:00"]
    for since, tz in zones:
        print(f"from {since.astimezone(tz):%Y-%m-%d %H:%M} in {tz.key}")
    print(f"runs: {len(pills)} over {len(days)} local days ({first} .. {last}); wall time {took:.1f} s "
          f"(poll every {step.total_seconds() / 60:g} min)")
    print(f"days with no run: {[str(d) for d in none] or 'none'}")
    print(f"days with two runs on one calendar: {twice or 'none'}")
    print(f"dates lived twice (west over the date line), a run in each zone: {lived_twice or 'none'}")
    print("runs not at 08:00 local: " + (", ".join(f"{t:%Y-%m-%d %H:%M %Z}" for t in off) or "none"))
    return 1 if none or twice else 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--step-minutes", type=float, default=15.0)
    args = ap.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))  # errors only
    sys.exit(asyncio.run(main(timedelta(minutes=args.step_minutes))))
