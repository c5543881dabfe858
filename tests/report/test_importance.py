"""Importance on distinct finished configurations: which trials, and why the others not."""

from __future__ import annotations

import optuna
from hand_study import BEST_SINGLE, add_trial, cfg, make_study

from loadersearch.report import importances
from loadersearch.report._importance import importance_study
from loadersearch.search.space import KNOBS


def test_importance_uses_one_trial_per_feasible_finished_configuration(hand_study):
    imp = importances(hand_study)
    assert imp.trials == [0, 1, 2, 3]
    assert imp.left_out == {"repeats": [4], "infeasible": [6], "pruned": [5], "failed": [7]}
    assert imp.values and set(imp.values) <= set(KNOBS)
    assert abs(sum(imp.values.values()) - 1.0) < 1e-9
    assert imp.evaluator == "PED-ANOVA"


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
