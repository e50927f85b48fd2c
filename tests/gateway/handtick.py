"""For an e2e test that drives extraction (or cron) by hand: the background loop off.

Such a test steps the clock past the quiet gap and calls
``app.extraction.tick()``, then asserts on its reports or reads what it
wrote. The App's own extraction loop ticks too (every few seconds, and a
second after each buffered line), and a user is flushed by one tick at a
time: when the loop's tick came first, the test's found that user taken
and returned ``[]`` (or part of what was due) while the loop's flush was
still asking the model. Under load that failed the group walk in 1 of 3
runs (session 36); the disk-full test stopped the loop by hand before.

The cron scheduler's poll (every 15 s) races ``app.cron.run_due()`` the
same way: a job the poll started is skipped by the test's call as still
running, which returns without it while the job is still writing. A
month or a year of nights outlasts many polls (session 36).
"""

from __future__ import annotations

from gateway.app import App

__all__ = ["by_hand", "cron_by_hand"]


async def by_hand(app: App) -> App:
    """Stop ``app``'s background extraction loop (the service stays: its
    ``tick()`` and ``flush_now()`` still work) and return ``app``. Call it
    right after ``app.start()``, before any clock step makes a user due."""
    assert app.extraction is not None
    await app.extraction.stop()
    return app


async def cron_by_hand(app: App) -> App:
    """Stop ``app``'s cron poll (the scheduler stays: its ``run_due()``
    still runs what is due) and return ``app``. Call it right after
    ``app.start()``: the start's catch-up of the jobs missed while down has
    then run (it is awaited), and no job of the poll's can be running."""
    assert app.cron is not None
    await app.cron.stop()
    return app
