"""Fixtures of the report tests: the hand-built study of :mod:`hand_study`."""

from __future__ import annotations

import optuna
import pytest
from hand_study import make_study


@pytest.fixture
def hand_study() -> optuna.Study:
    return make_study()
