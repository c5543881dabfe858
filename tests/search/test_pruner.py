"""ClearlySlowerPruner: prunes trials clearly slower than the best, window for window."""

from __future__ import annotations

import optuna
import pytest

from loadersearch.search._pruner import ClearlySlowerPruner


def _study_with_best(values: list[float], window_cv: float | None = None) -> optuna.Study:
    study = optuna.create_study(direction="maximize", pruner=ClearlySlowerPruner())
    trial = study.ask()
    if window_cv is not None:
        trial.set_user_attr("window_cv", window_cv)
    for step, value in enumerate(values):
        trial.report(value, step)
    study.tell(trial, sum(values) / len(values))
    return study


def _pruned_after(study: optuna.Study, values: list[float]) -> int | None:
    trial = study.ask()
    for step, value in enumerate(values):
        trial.report(value, step)
        if trial.should_prune():
            return step + 1
    return None


def test_a_trial_slower_in_every_window_is_pruned_after_four_windows() -> None:
    study = _study_with_best([100, 80, 100, 80, 100, 80])
    assert _pruned_after(study, [70, 55, 70, 55, 70, 55]) == 4


def test_a_near_tie_within_the_margin_is_not_pruned() -> None:
    study = _study_with_best([100, 80, 100, 80, 100, 80])
    assert _pruned_after(study, [97, 78, 98, 77, 97, 79]) is None


def test_one_terrible_window_among_good_ones_does_not_prune() -> None:
    study = _study_with_best([100, 80, 100, 80, 100, 80])
    assert _pruned_after(study, [10, 85, 104, 82, 101, 83]) is None


def test_a_noisy_best_trial_widens_the_margin_so_a_near_tie_survives() -> None:
    slower_by_10_percent = [90, 72, 90, 72, 90, 72]
    assert _pruned_after(_study_with_best([100, 80] * 3), slower_by_10_percent) == 4
    assert (
        _pruned_after(_study_with_best([100, 80] * 3, window_cv=0.09), slower_by_10_percent)
        is None
    )
    slower_by_30_percent = [70, 56, 70, 56, 70, 56]
    assert (
        _pruned_after(_study_with_best([100, 80] * 3, window_cv=0.09), slower_by_30_percent) == 4
    )


def test_arguments_are_checked_when_the_pruner_is_built() -> None:
    with pytest.raises(ValueError, match="margin"):
        ClearlySlowerPruner(margin=1.5)
    with pytest.raises(ValueError, match="n_startup_steps"):
        ClearlySlowerPruner(n_startup_steps=1)
