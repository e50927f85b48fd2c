from __future__ import annotations

import gc

from gateway.runtime import GC_THRESHOLDS, tune_runtime


def test_tune_runtime_freezes_and_raises_gc_thresholds() -> None:
    before = gc.get_threshold()
    try:
        tune_runtime()
        assert gc.get_threshold() == GC_THRESHOLDS
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
