"""Fixtures of the measurement tests."""

from __future__ import annotations

import pytest

from loadersearch.measure._plan import MeasurePlan


@pytest.fixture
def quick_plan() -> MeasurePlan:
    """Two short measured epochs of 4 steps, two windows each, after one warm-up epoch; not
    sized to the configuration (every configuration has the same windows: the tests check
    them; sizing has tests of its own)."""
    return MeasurePlan(
        epochs=2, steps=4, windows_per_epoch=2, warmup_epochs=1, timeout_s=120, in_flight_rounds=0
    )
