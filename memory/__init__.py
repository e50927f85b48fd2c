"""myclaw's memory: four tiers over SQLite, with a file-based fallback."""

import os

# Hybrid recall's vector scan (memory/vectors.py) is one matrix-vector
# product per message, bound by memory bandwidth: BLAS threads only spin
# beside SQLite's threads and the event loop (a loaded 2-core box: 17 ms CPU
# per hybrid query at 10k memories with them, 5 ms without). Set before
# numpy is first imported, which is here or later; a value the user set wins.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .clock import Clock, ManualClock, SystemClock
    from .engine import MemoryEngine, MemoryNotFound
    from .identity import IdentityMap
    from .types import GLOBAL_OWNER, Category, Event, Hit, Memory, NewMemory, Provenance, Source, Status

# The names below are imported on first use: importing any submodule
# (memory.clock, memory.db) imports this package first, and the engine
# with its tokenizers, httpx and the redaction patterns cost every command
# that needs none of them: `import gateway.config` 0.40 -> 0.27 s of CPU
# without (docs/BENCHMARKS.md, "Importing gateway.config").
_LAZY = {
    "Clock": "clock", "ManualClock": "clock", "SystemClock": "clock",
    "MemoryEngine": "engine", "MemoryNotFound": "engine",
    "IdentityMap": "identity",
    **{n: "types" for n in ("GLOBAL_OWNER", "Category", "Event", "Hit", "Memory", "NewMemory", "Provenance",
                            "Source", "Status")},
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # asked once
    return value

__all__ = [
    "GLOBAL_OWNER",
    "Category",
    "Clock",
    "Event",
    "Hit",
    "IdentityMap",
    "ManualClock",
    "Memory",
    "MemoryEngine",
    "MemoryNotFound",
    "NewMemory",
    "Provenance",
    "Source",
    "Status",
    "SystemClock",
]
