"""The Optuna study over DataLoader configurations: space, objective, baselines, batch-size
probe, confirmation. :func:`run_study` runs one from start to answer."""

from __future__ import annotations

from loadersearch.search.space import SearchSpace
from loadersearch.search.study import RunOutcome, run_study, settings_from_study

__all__ = ["RunOutcome", "SearchSpace", "run_study", "settings_from_study"]
