"""Category decay of seed 8.2: how much a memory's importance still counts
after ``days`` without being accessed."""

from __future__ import annotations

import math

__all__ = ["decay_factor", "decayed_importance"]

# category -> (rate per day, floor). Half-lives: 180 d, 30 d, 7 d.
_CURVES: dict[str, tuple[float, float]] = {
    "decision": (0.004, 0.3),
    "solution": (0.004, 0.3),
    "event": (0.023, 0.1),
    "conversation": (0.023, 0.1),
    "temp": (0.099, 0.0),
    "debug": (0.099, 0.0),
}
# identity, config, credential (and anything unknown) never decay.


def decay_factor(category: str, days: float) -> float:
    curve = _CURVES.get(category)
    if curve is None:
        return 1.0
    rate, floor = curve
    return floor + (1.0 - floor) * math.exp(-rate * max(0.0, days))


def decayed_importance(importance: float, category: str, days: float) -> float:
    return importance * decay_factor(category, days)
