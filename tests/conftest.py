from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import structlog

from memory import ManualClock, MemoryEngine


@pytest.fixture(autouse=True)
def _reset_structlog() -> None:
    # Tests that configure logging must not leak it into the next test.
    yield
    structlog.reset_defaults()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock("2026-03-01T12:00:00Z")


@pytest.fixture
async def engine(tmp_path: Path, clock: ManualClock) -> AsyncIterator[MemoryEngine]:
    eng = await MemoryEngine.open(tmp_path / "memory.db", clock)
    try:
        yield eng
    finally:
        await eng.close()
