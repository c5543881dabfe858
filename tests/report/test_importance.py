"""Importance on distinct finished configurations: which trials, and why the others not."""

from __future__ import annotations

import optuna
import pytest
from hand_study import BEST_SINGLE, add_trial, cfg, make_study

from loadersearch import LoaderConfig
from loadersearch.report import importances
from loadersearch.report._importance import importance_study
from loadersearch.search import KNOBS


@pytest.mark.slow
def test_importance_uses_one_trial_per_feasible_finished_configuration(hand_study):
    imp = importances(hand_study)
    assert imp.trials == [0, 1, 2, 3]
    assert imp.left_out == {"repeats": [4], "infeasible": [6], "pruned": [5], "failed": [7]}
    assert imp.values and set(imp.values) <= set(KNOBS)
    assert abs(sum(imp.values.values()) - 1.0) < 1e-9
    assert imp.evaluator == "PED-ANOVA"


@pytest.mark.slow
def test_describe_names_the_trials_used_and_why_the_others_are_left_out(hand_study):
    text = importances(hand_study).describe()
    assert text.startswith("PED-ANOVA on 4 distinct finished configurations (trials 0-3)")
    assert "repeats (trial 4: an earlier trial of the same configuration already counts)" in text
    assert "infeasible (trial 6: value 0 marks a broken limit" in text


def test_two_measurements_of_one_configuration_count_once_with_their_mean(hand_study):
    add_trial(hand_study, BEST_SINGLE, 80.0)  # measured again, not a repeat: a new value
    memory, used, left_out = importance_study(hand_study)
    assert 8 not in used and 8 in left_out["repeats"]
    values = sorted(t.value for t in memory.get_trials())
    assert values == [50.0, 70.0, 85.0, 88.0]  # trial 2 and 8: (90 + 80) / 2


@pytest.mark.slow
def test_copies_of_the_best_configuration_do_not_change_the_importance():
    # The case: five identical trials in the top quantile made prefetch_factor look
    # decisive in the dashboard. Copies of a configuration must not move the importance.
    plain = make_study()
    copied = make_study()
    for _ in range(5):
        add_trial(copied, BEST_SINGLE, 90.0, repeat_of=2)
    assert importances(copied).values == importances(plain).values


def test_fewer_than_two_configurations_give_no_importance():
    study = optuna.create_study(direction="maximize")
    add_trial(study, cfg(2, 16, True, 2), 60.0)
    imp = importances(study)
    assert imp.values == {} and imp.trials == [0]


def _study_of(rows: list[tuple[LoaderConfig, float, float]]) -> optuna.Study:
    """A study of distinct configurations, each (config, value, its stated 90% precision)."""
    study = optuna.create_study(direction="maximize")
    for config, value, precision in rows:
        add_trial(study, config, value, precision=precision)
    return study


# The case: CPU-bound training where every configuration is within its own noise.
FLAT = [
    (cfg(0, 16), 26.0, 0.08),
    (cfg(2, 16, True, 2), 27.5, 0.08),
    (cfg(2, 32, False, 4), 27.0, 0.08),
    (cfg(4, 24, True, 8), 28.0, 0.08),
    (cfg(1, 8, False, 2), 26.5, 0.08),
    (cfg(3, 32, True, 2), 27.2, 0.08),
]
# Workers decide it (1 to 4 of them); the other knobs vary across them and move little.
WORKERS = [
    (cfg(1, 16, False, 2), 20.0, 0.02),
    (cfg(1, 32, True, 4), 21.0, 0.02),
    (cfg(1, 8, True, 8), 20.5, 0.02),
    (cfg(2, 16, True, 8), 40.0, 0.02),
    (cfg(2, 32, False, 2), 41.0, 0.02),
    (cfg(2, 8, False, 4), 39.5, 0.02),
    (cfg(4, 16, True, 4), 60.0, 0.02),
    (cfg(4, 32, False, 8), 62.0, 0.02),
    (cfg(4, 8, True, 2), 61.0, 0.02),
    (cfg(3, 16, False, 8), 50.0, 0.02),
    (cfg(3, 32, True, 2), 51.0, 0.02),
    (cfg(3, 8, False, 4), 49.0, 0.02),
]


@pytest.mark.slow
def test_importance_says_the_settings_barely_matter_when_all_are_within_their_noise():
    imp = importances(_study_of(FLAT))
    assert imp.values, "PED-ANOVA still ranks them"
    assert imp.barely_matters
    assert imp.stands_out() is None
    text = imp.verdict()
    assert text.startswith("On this machine the loader settings barely matter")
    assert "within 7% of the winner" in text  # 26.0 / 28.0


@pytest.mark.slow
def test_importance_names_the_knob_that_stands_clear_of_the_noise():
    imp = importances(_study_of(WORKERS))
    assert not imp.barely_matters
    assert imp.stands_out() == "num_workers"
    low, high = imp.intervals["num_workers"]
    assert low <= imp.values["num_workers"] <= high
    assert imp.verdict().startswith("num_workers matters most")


@pytest.mark.slow
def test_a_single_noisy_outlier_is_not_a_knob_that_matters():
    # Same configurations as FLAT, but measured on a busy machine: ±40% each.
    noisy = [(c, v, 0.4) for c, v, _ in FLAT[:-1]] + [(FLAT[-1][0], 40.0, 0.4)]
    imp = importances(_study_of(noisy))
    assert imp.stands_out() is None


@pytest.mark.slow
def test_the_importance_intervals_are_the_same_on_every_read():
    # The report and the dashboard card are computed in different processes: same intervals.
    study = _study_of(WORKERS)
    assert importances(study).intervals == importances(study).intervals


@pytest.mark.slow
def test_the_importance_card_draws_the_intervals_and_the_verdict():
    from loadersearch.report._plots import importance_figure

    imp = importances(_study_of(FLAT))
    fig = importance_figure(imp)
    bar = fig.data[0]
    assert bar.error_x.array is not None and len(bar.error_x.array) == len(imp.values)
    assert "barely matter" in fig.layout.title.text


@pytest.mark.slow
def test_the_terminal_report_and_the_dashboard_note_tell_the_same_verdict():
    from loadersearch.report import summarize
    from loadersearch.report._notes import study_note

    study = _study_of(FLAT)
    imp = importances(study)
    assert imp.verdict() in study_note(summarize(study), imp)
