"""``--trials N`` is a cap: the study stops once its answer is settled (nothing measured above the
best over the last QUIET_FOR trials, after MIN_TRIALS trials that cover the space, the deepest
prefetch included on a host of 4+ CPUs), stores why, and says so; --no-settle spends the budget;
a larger --trials goes on."""

from __future__ import annotations

import dataclasses

import optuna
from helpers.studies import HOST, quick_settings

from loadersearch import LoaderConfig
from loadersearch.measure import OK, MeasureResult, Window
from loadersearch.report import settled_line, summarize
from loadersearch.search._settle import MIN_TRIALS, PREFETCH_CPUS, QUIET_FOR, settled
from loadersearch.search._space import SearchSpace
from loadersearch.search._study import run_study

SPACE = SearchSpace(num_workers=(0, 4), batch_size=(8, 32))
# The fewest finished trials that can settle: the minimum, and a best before the quiet run.
EARLIEST = max(MIN_TRIALS, QUIET_FOR + 1)
DISTS = SPACE.distributions()


def _add(study: optuna.Study, workers: int, batch: int, value: float, *, prefetch: int = 2,
         dists=DISTS, **attrs) -> None:  # fmt: skip
    params = {"num_workers": workers, "batch_size": batch, "pin_memory": False}
    if workers:
        params.update(prefetch_factor=prefetch, persistent_workers=False)
    study.add_trial(
        optuna.trial.create_trial(
            params=params,
            distributions={k: dists[k] for k in params},
            value=value,
            user_attrs={"feasible": True, "precision": 0.03, "wall_s": 30.0, **attrs},
        )
    )


def _flat_study(n: int, *, late_gain: float | None = None) -> optuna.Study:
    """``n`` trials over workers 0-4 and batches 8-32, all within 1% of 101 img/s, the first
    the best; with ``late_gain`` the last trial beats them by that share."""
    study = optuna.create_study(direction="maximize")
    for i in range(n):
        value = 101.0 - (i % 3) * 0.5
        if late_gain is not None and i == n - 1:
            value = 101.0 * (1.0 + late_gain)
        _add(study, i % 5, 8 * (1 + i % 4), value)
    return study


def test_a_flat_landscape_settles_once_it_is_covered_and_the_last_trials_gained_nothing():
    s = settled(_flat_study(EARLIEST), total=40, space=SPACE)
    assert s is not None and s.after == EARLIEST and s.total == 40
    assert s.saved_s == 30.0 * (40 - EARLIEST)


def test_too_few_trials_never_settle():
    assert settled(_flat_study(MIN_TRIALS - 1), total=40, space=SPACE) is None


def test_any_measurement_above_the_best_in_the_last_trials_keeps_it_going():
    assert settled(_flat_study(EARLIEST, late_gain=0.10), total=40, space=SPACE) is None
    # within the best's 3% precision too: the best is the largest of many noisy measurements,
    # so a real gain of a few percent looks like noise against it (the zoo's replay)
    assert settled(_flat_study(EARLIEST, late_gain=0.01), total=40, space=SPACE) is None
    # a last trial that ties the best is quiet
    assert settled(_flat_study(EARLIEST, late_gain=0.0), total=40, space=SPACE) is not None


WIDE = SearchSpace(num_workers=(0, 16), batch_size=(8, 32))


def _wide_study(cpus: int | None, *, deepest: bool) -> optuna.Study:
    """EARLIEST quiet trials over workers 0-16 on a host of ``cpus`` CPUs (None: not
    recorded), at prefetch 2 and 4, and with ``deepest`` one at the largest prefetch."""
    study = optuna.create_study(direction="maximize")
    if cpus is not None:
        study.set_user_attr("hardware", {"cpu_count": cpus})
    for i in range(EARLIEST):
        _add(study, (0, 4, 8, 16)[i % 4], 8 * (1 + i % 4), 101.0 - (i % 3) * 0.5,
             prefetch=4 if i % 2 else 2, dists=WIDE.distributions())  # fmt: skip
    if deepest:
        _add(study, 8, 16, 100.0, prefetch=WIDE.prefetch_factor[1], dists=WIDE.distributions())
    return study


def test_on_a_host_of_several_cpus_the_deepest_prefetch_is_measured_before_it_settles():
    assert settled(_wide_study(PREFETCH_CPUS, deepest=False), total=40, space=WIDE) is None
    assert settled(_wide_study(PREFETCH_CPUS, deepest=True), total=40, space=WIDE) is not None
    # on fewer CPUs prefetch is not a dimension that must be seen
    assert settled(_wide_study(PREFETCH_CPUS - 1, deepest=False), total=40, space=WIDE)


def test_where_a_memory_bound_keeps_the_queue_shallow_one_deeper_queue_counts_as_the_deepest():
    """A host of 8 CPUs whose study holds a memory bound of 600 images in flight: the search
    starts 8 workers x batch 16 at prefetch 4 and 16 x 32 at 1 (4 and 8 would not fit). Trials
    only at the bound's own prefetch have not shown what a deeper queue does; one deeper
    queue (prefetch 2 at 16 x 32, here one that failed: shm_full) has, though the deepest of
    the range (8) fits nowhere the search went. Without a bound the deepest is needed."""
    study = optuna.create_study(direction="maximize")
    study.set_user_attr("hardware", {"cpu_count": 8})
    study.set_user_attr("inflight_images", 600.0)
    shapes = [(0, 8, None), (8, 16, 4), (16, 32, 1), (16, 8, 4)]  # workers, batch, prefetch
    for i in range(EARLIEST):
        workers, batch, prefetch = shapes[i % 4]
        _add(study, workers, batch, 101.0 - (i % 3) * 0.5, prefetch=prefetch or 2,
             dists=WIDE.distributions())  # fmt: skip
    assert settled(study, total=40, space=WIDE) is None
    _add(study, 16, 32, 0.0, prefetch=2, dists=WIDE.distributions(), feasible=False)
    assert settled(study, total=40, space=WIDE) is not None
    study.set_user_attr("inflight_images", None)
    assert settled(study, total=40, space=WIDE) is None


def test_without_a_recorded_host_the_worker_range_stands_for_its_cpus():
    # workers 0-16: loadersearch's bound for 8 CPUs (2x): the deepest prefetch is needed
    assert settled(_wide_study(None, deepest=False), total=40, space=WIDE) is None
    assert settled(_wide_study(None, deepest=True), total=40, space=WIDE) is not None


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
