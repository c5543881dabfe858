"""The Optuna study over DataLoader configurations: settings (study specs), space, objective,
sampler, pruner, baselines, batch-size probe, confirmation, and the shared-budget loop.
:func:`run_study` runs one from start to answer; :func:`join_study` joins an existing one."""

from __future__ import annotations

from typing import Any

from loadersearch._lazy import lazy_attribute
from loadersearch.search._baselines import baseline_names, baselines
from loadersearch.search._batchprobe import ProbeResult
from loadersearch.search._confirm import (
    MIN_ROUNDS,
    confirm_study,
    drift_sentence,
    feasible_complete,
    race_noise,
    race_survivors,
    remeasure_interleaved,
    trial_config,
)
from loadersearch.search._defaults import cpu_bound, default_plan, study_plan_with
from loadersearch.search._objective import (
    CONSTRAINT,
    METRIC_NAME,
    Objective,
    TrialCrash,
    unusable_input,
)
from loadersearch.search._opening import (
    create_or_resume_study,
    describe_spec,
    make_pruner,
    settings_from_study,
    stored_spec,
)
from loadersearch.search._progress import Progress
from loadersearch.search._settings import (
    SPEC_SECTIONS,
    Overrides,
    StudySettings,
    load_spec_file,
    parse_size,
    resolve_pipeline,
    resolve_settings,
)
from loadersearch.search._settle import QUIET_FOR, Z90, settled, trial_noise
from loadersearch.search._space import SearchSpace, config_from_params, default_worker_bound
from loadersearch.search._space_text import KNOBS, SpaceError, parse_assignment
from loadersearch.search._study import RunOutcome, enqueue_baselines, join_study, run_study
from loadersearch.search._study_identity import (
    NOT_IDENTITY,
    foreign_study_problems,
    require_loadersearch_study,
)
from loadersearch.search._trial_values import result_attrs, window_value, window_wait

# Imported on first use: their modules import torch, numpy or optuna (loadersearch._lazy).
_LAZY = {
    "optimize_to_total": "_budget",
    "requeue": "_budget",
    "clearly_slower": "_pruner",
    "noise_margin": "_pruner",
    "DEFAULT_SAMPLER": "_sampler",
    "make_sampler": "_sampler",
}


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _LAZY, name)


__all__ = [
    "CONSTRAINT",
    "DEFAULT_SAMPLER",
    "KNOBS",
    "METRIC_NAME",
    "MIN_ROUNDS",
    "NOT_IDENTITY",
    "Objective",
    "Overrides",
    "ProbeResult",
    "Progress",
    "QUIET_FOR",
    "RunOutcome",
    "SPEC_SECTIONS",
    "SearchSpace",
    "SpaceError",
    "StudySettings",
    "TrialCrash",
    "Z90",
    "baseline_names",
    "baselines",
    "clearly_slower",
    "config_from_params",
    "confirm_study",
    "cpu_bound",
    "create_or_resume_study",
    "default_plan",
    "default_worker_bound",
    "describe_spec",
    "drift_sentence",
    "enqueue_baselines",
    "feasible_complete",
    "foreign_study_problems",
    "join_study",
    "load_spec_file",
    "make_pruner",
    "make_sampler",
    "noise_margin",
    "optimize_to_total",
    "parse_assignment",
    "parse_size",
    "race_noise",
    "race_survivors",
    "remeasure_interleaved",
    "requeue",
    "require_loadersearch_study",
    "resolve_pipeline",
    "resolve_settings",
    "result_attrs",
    "run_study",
    "settings_from_study",
    "settled",
    "stored_spec",
    "study_plan_with",
    "trial_config",
    "trial_noise",
    "unusable_input",
    "window_value",
    "window_wait",
]
