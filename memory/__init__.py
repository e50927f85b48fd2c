"""myclaw's memory: four tiers over SQLite, with a file-based fallback."""

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
