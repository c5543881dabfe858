"""The Optuna study over DataLoader configurations: settings (study specs), space, objective,
sampler, pruner, baselines, batch-size probe, confirmation, and the shared-budget loop.
:func:`run_study` runs one from start to answer; :func:`join_study` joins an existing one."""

from __future__ import annotations

from loadersearch.search._opening import settings_from_study
from loadersearch.search._settings import StudySettings, resolve_settings
from loadersearch.search._space import SearchSpace
from loadersearch.search._study import RunOutcome, join_study, run_study

__all__ = [
    "RunOutcome",
    "SearchSpace",
    "StudySettings",
    "join_study",
    "resolve_settings",
    "run_study",
    "settings_from_study",
]
