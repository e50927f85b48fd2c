from __future__ import annotations

import pytest

from memory.decay import decay_factor, decayed_importance


@pytest.mark.parametrize("cat", ["identity", "config", "credential"])
def test_identity_config_credential_never_decay(cat: str) -> None:
    assert decay_factor(cat, 0) == decay_factor(cat, 10_000) == 1.0


@pytest.mark.parametrize(("cat", "half_life", "floor"), [("decision", 173, 0.3), ("event", 30, 0.1), ("temp", 7, 0.0)])
def test_half_lives_and_floors_of_seed_8_2(cat: str, half_life: float, floor: float) -> None:
    # exp(-rate * t) halves at ln 2 / rate days: 173 d, 30 d, 7 d.
    assert decay_factor(cat, half_life) == pytest.approx(floor + (1 - floor) * 0.5, abs=0.01)
    assert decay_factor(cat, 100_000) == pytest.approx(floor, abs=1e-6)


def test_decay_is_monotonic_and_ignores_negative_age() -> None:
    xs = [decay_factor("conversation", d) for d in range(0, 365, 5)]
    assert xs == sorted(xs, reverse=True)
    assert decay_factor("debug", -5) == 1.0


def test_decayed_importance_scales_importance() -> None:
    assert decayed_importance(0.8, "temp", 60) < 0.01 < decayed_importance(0.8, "solution", 60)
