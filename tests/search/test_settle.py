"""``--trials N`` is a cap: the study stops once its answer is settled (no gain beyond the best's
measured noise over the last 8 trials, after 10 trials that cover the space), stores why, and
says so; --no-settle spends the budget; a larger --trials goes on."""

from __future__ import annotations

import dataclasses

import optuna
from helpers.studies import HOST, quick_settings

from loadersearch.config import LoaderConfig
from loadersearch.measure.result import OK, MeasureResult, Window
from loadersearch.report import settled_line, summarize
from loadersearch.search.settle import MIN_TRIALS, QUIET_FOR, settled
from loadersearch.search.space import SearchSpace
from loadersearch.search.study import run_study

SPACE = SearchSpace(num_workers=(0, 4), batch_size=(8, 32))
DISTS = SPACE.distributions()


def _add(study: optuna.Study, workers: int, batch: int, value: float, **attrs) -> None:
    params = {"num_workers": workers, "batch_size": batch, "pin_memory": False}
    if workers:
        params.update(prefetch_factor=2, persistent_workers=False)
    study.add_trial(
        optuna.trial.create_trial(
            params=params,
            distributions={k: DISTS[k] for k in params},
            value=value,
            user_attrs={"feasible": True, "precision": 0.03, "wall_s": 30.0, **attrs},
        )
    )


def _flat_study(n: int, *, late_gain: float | None = None) -> optuna.Study:
    """``n`` trials over workers 0-4 and batches 8-32, all within 1% of 100 img/s; with
    ``late_gain`` the last trial beats them by that share."""
    study = optuna.create_study(direction="maximize")
    for i in range(n):
        value = 100.0 + (i % 3) * 0.5
        if late_gain is not None and i == n - 1:
            value = 101.0 * (1.0 + late_gain)
        _add(study, i % 5, 8 * (1 + i % 4), value)
    return study


def test_a_flat_landscape_settles_once_it_is_covered_and_the_last_trials_gained_nothing():
    s = settled(_flat_study(MIN_TRIALS), total=40, space=SPACE)
    assert s is not None and s.after == MIN_TRIALS and s.total == 40
    assert s.saved_s == 30.0 * (40 - MIN_TRIALS)


def test_too_few_trials_never_settle():
    assert settled(_flat_study(MIN_TRIALS - 1), total=40, space=SPACE) is None


def test_a_gain_beyond_the_best_s_noise_in_the_last_trials_keeps_it_going():
    assert settled(_flat_study(14, late_gain=0.10), total=40, space=SPACE) is None
    # a gain within the best's 3% precision is noise: settled
    assert settled(_flat_study(14, late_gain=0.01), total=40, space=SPACE) is not None


def test_a_study_that_saw_one_worker_count_is_not_covered():
    study = optuna.create_study(direction="maximize")
    for i in range(14):
        _add(study, 2, 8 * (1 + i % 4), 100.0)
    assert settled(study, total=40, space=SPACE) is None


def test_a_queued_trial_is_measured_before_the_study_settles():
    study = _flat_study(14)
    study.enqueue_trial({"num_workers": 1, "batch_size": 16, "pin_memory": False})
    assert settled(study, total=40, space=SPACE) is None


def _plateau(rate: float = 100.0):
    """Every configuration measures ``rate`` (+-0.5%), at once."""
    calls: list[LoaderConfig] = []

    def measure(workload, config, plan, *, on_window=None, on_ready=None) -> MeasureResult:
        calls.append(config)
        value = rate * (1.0 + 0.005 * ((len(calls) % 3) - 1))
        window = Window(index=0, epoch=0, images=16, seconds=16 / value, wait_s=0.0,
                        compute_s=16 / value, h2d_s=0.0)  # fmt: skip
        if on_window is not None:
            on_window(window)
        return MeasureResult(config=config, status=OK, windows=[window], objective=value,
                             steady_rate=value, precision=0.02, wall_s=20.0)  # fmt: skip

    measure.calls = calls
    return measure


def _settings(tmp_path, trials: int, **changes):
    return dataclasses.replace(
        quick_settings(tmp_path, trials=trials),
        space=SearchSpace(num_workers=(0, 4), batch_size=(8, 32)),
        pruner="none",
        **changes,
    )


def test_a_study_on_a_plateau_stops_before_its_cap_and_says_so(tmp_path):
    settings = _settings(tmp_path, trials=30)
    run_study(settings, measure_fn=_plateau(), hardware=HOST)

    study = optuna.load_study(study_name="t", storage=settings.storage)
    finished = len(study.trials)
    assert MIN_TRIALS <= finished < 30
    stored = study.user_attrs["settled"]
    assert stored["after"] == finished and stored["total"] == 30
    line = settled_line(summarize(study))
    assert line.startswith(f"settled after {finished} trials: {30 - finished} not needed")

    # the same command again stays settled: no trial is spent
    run_study(settings, measure_fn=_plateau(), hardware=HOST)
    assert len(optuna.load_study(study_name="t", storage=settings.storage).trials) == finished

    # a larger cap than the one it settled under goes on to it
    run_study(dataclasses.replace(settings, trials=32), measure_fn=_plateau(), hardware=HOST)
    again = optuna.load_study(study_name="t", storage=settings.storage)
    assert len(again.trials) == 32 and again.user_attrs["settled"] is None


def test_no_settle_spends_the_whole_budget(tmp_path):
    settings = _settings(tmp_path, trials=MIN_TRIALS + QUIET_FOR, settle=False)
    run_study(settings, measure_fn=_plateau(), hardware=HOST)
    study = optuna.load_study(study_name="t", storage=settings.storage)
    assert len(study.trials) == MIN_TRIALS + QUIET_FOR
    assert study.user_attrs["settle"] is False and "settled" not in study.user_attrs
