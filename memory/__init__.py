"""myclaw's memory: four tiers over SQLite, with a file-based fallback."""

import os

# Hybrid recall's vector scan (memory/vectors.py) is one matrix-vector
# product per message, bound by memory bandwidth: BLAS threads only spin
# beside SQLite's threads and the event loop (a loaded 2-core box: 17 ms CPU
# per hybrid query at 10k memories with them, 5 ms without). Set before
# numpy is first imported, which is here or later; a value the user set wins.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from .clock import Clock, ManualClock, SystemClock
from .engine import MemoryEngine, MemoryNotFound
from .identity import IdentityMap
from .types import GLOBAL_OWNER, Category, Event, Hit, Memory, NewMemory, Provenance, Source, Status

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
