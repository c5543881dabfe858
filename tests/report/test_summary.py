"""summarize, step by step, on a study whose answer is known (see conftest)."""

from __future__ import annotations

import optuna
from hand_study import BEST_SINGLE, WINNER, add_trial, cfg, make_study

from loadersearch.report import summarize
from loadersearch.report._separation import best_trial_differs


def test_the_winner_is_the_confirmed_median_not_the_best_single_measurement(hand_study):
    s = summarize(hand_study)
    w = s.winner
    assert (w.trial, w.config, w.confirmed) == (3, WINNER, True)
    assert (w.rate, w.low, w.high, w.rounds, w.trial_value) == (89.0, 87.0, 90.0, 3, 88.0)
    assert w.epoch_time_s == 1000 / 89.0
    assert [f.trial for f in s.finalists] == [3, 2, 1]  # by median


def test_without_a_confirmation_the_winner_is_the_best_trial_marked_unconfirmed():
    s = summarize(make_study(confirmed=False))
    assert (s.winner.trial, s.winner.config, s.winner.confirmed) == (2, BEST_SINGLE, False)
    assert s.finalists == [] and s.confirmed_after is None


def test_a_baseline_among_the_finalists_uses_its_confirmation_median_the_others_their_trial(
    hand_study,
):
    by_name = {b.name: b for b in summarize(hand_study).baselines}
    article, pytorch = by_name["article"], by_name["pytorch"]
    assert (article.rate, article.source, article.trial) == (72.0, "confirmation", 1)
    assert (pytorch.rate, pytorch.source, pytorch.trial) == (50.0, "trial", 0)
    assert pytorch.speedup == 89.0 / 50.0
    # Time saved over the 100 planned epochs of 1000 images.
    assert abs(pytorch.saved_s - (1000 / 50.0 - 1000 / 89.0) * 100) < 1e-9


def test_every_trial_is_counted_once_by_what_it_came_to(hand_study):
    s = summarize(hand_study)
    assert s.counts == {
        "complete": 5,
        "pruned": 1,
        "infeasible": 1,
        "failed": 1,
        "running": 0,
        "queued": 0,
    }
    assert s.finished == 7
    assert [r["trial"] for r in s.rows] == [2, 4, 3, 1, 0, 5, 6, 7]
    assert s.rows[1]["repeat_of"] == 2


def test_pruning_savings_are_the_pruned_trials_remaining_windows_at_their_own_pace(hand_study):
    s = summarize(hand_study)
    # Trial 5 measured 2 of 4 windows in 1.0 s: the 2 it did not measure would take 1.0 s.
    assert s.pruning["saved_s"] == 1.0
    assert s.pruning["spent_s"] == 4.0 * 7  # the repeat spent nothing
    assert s.confirm_s == 18.0 and s.tuning_s == 28.0 + 18.0


def test_a_trial_finished_after_the_confirmation_makes_it_stale(hand_study):
    assert summarize(hand_study).confirmation_current
    add_trial(hand_study, cfg(1, 16), 60.0)
    assert not summarize(hand_study).confirmation_current


def test_the_dashboard_best_trial_is_explained_when_it_is_not_the_winner(hand_study):
    text = best_trial_differs(summarize(hand_study))
    assert 'optuna-dashboard\'s "Best Trial" is trial 2' in text
    assert "winner, trial 3" in text and "biased upward" in text


def test_a_study_without_trials_has_no_winner():
    s = summarize(optuna.create_study(direction="maximize"))
    assert s.winner is None and s.rows == [] and best_trial_differs(s) is None


def test_an_interrupted_trial_queued_again_is_listed_as_queued_with_its_configuration(hand_study):
    # A SIGTERM'd trial fails and is queued again (WAITING, no params yet): the table must show
    # the configuration that will be measured, not the defaults of an empty parameter set.
    from loadersearch.search import requeue

    failed = next(t for t in hand_study.get_trials() if t.state == optuna.trial.TrialState.FAIL)
    number = requeue(hand_study, failed, "interrupted by SIGTERM")
    s = summarize(hand_study)
    assert s.counts["queued"] == 1 and s.counts["running"] == 0
    row = next(r for r in s.rows if r["trial"] == number)
    assert (row["state"], row["retry_of"], row["config"]) == ("queued", failed.number, "w1 b8 pf2")


def test_queued_trials_past_the_budget_say_what_measures_them(hand_study):
    """A retry queued behind the baselines of a small budget never ran, while the summary said
    "run the same command" (a red team's find, stop 50): past the budget, the count line says
    the --trials that measures them; the source line does not claim every baseline."""
    import dataclasses

    from loadersearch.report._format import baselines_source
    from loadersearch.report._text import _counts_line
    from loadersearch.search import requeue

    failed = next(t for t in hand_study.get_trials() if t.state == optuna.trial.TrialState.FAIL)
    requeue(hand_study, failed, "interrupted by SIGTERM")
    s = summarize(hand_study)
    room = dataclasses.replace(s, budget=s.finished + 1)
    assert "1 queued (run the same command to measure)" in _counts_line(room, None, None)
    full = dataclasses.replace(s, budget=s.finished)
    assert (f"1 queued, not measured: the budget of {s.finished} trials is reached (run again "
            f"with --trials {s.finished + 1} to measure them)") in _counts_line(full, None, None)
    # pytorch's from its trial, the article's from the confirmation: with pytorch's never
    # measured, the one measured was re-measured, not "every baseline"
    assert [b.source for b in s.baselines] == ["trial", "confirmation"]
    unmeasured = dataclasses.replace(s.baselines[0], rate=None, source="not measured yet")
    some = dataclasses.replace(s, baselines=[unmeasured, *s.baselines[1:]])
    assert baselines_source(some).startswith("Every baseline measured was re-measured")
