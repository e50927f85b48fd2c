from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import structlog

from memory import ManualClock, MemoryEngine


def pytest_configure(config: pytest.Config) -> None:
    """Bytecode for the ``myclaw`` processes the tests start. With
    ``PYTHONDONTWRITEBYTECODE`` set (as in this project's dev shells) and no
    ``__pycache__`` in the checkout, every one compiled the project again
    (~0.6 s of CPU a start). They write it instead under the venv (never in
    the checkout), where the next one finds it; a prefix the caller chose
    is kept. Only the children see this: Python reads both at start."""
    if os.environ.get("PYTHONDONTWRITEBYTECODE") and "PYTHONPYCACHEPREFIX" not in os.environ:
        cache = Path(sys.prefix) / "pycache"
        if sys.prefix != sys.base_prefix and os.access(sys.prefix, os.W_OK):  # a venv of ours, not the system's
            os.environ["PYTHONPYCACHEPREFIX"] = str(cache)
            del os.environ["PYTHONDONTWRITEBYTECODE"]


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
