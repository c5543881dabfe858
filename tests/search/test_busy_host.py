"""A trial measured on a busy machine is measured again, the quieter measurement is kept, and
one still busy is marked unreliable; the report says how quiet the machine was. (An injected
measure function stands in for the child; the real outside load is in
tests/measure/test_hostload.py.)"""

from __future__ import annotations

import dataclasses

import optuna
import pytest
from helpers.studies import HOST, quick_settings

from loadersearch.measure import OK, MeasureResult, Window
from loadersearch.report import machine_load, summarize
from loadersearch.search._space import SearchSpace
from loadersearch.search._study import run_study


@pytest.fixture(autouse=True)
def own_lock_dir(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LOADERSEARCH_LOCK_DIR", str(tmp_path / "locks"))


def _measurements(*outcomes: tuple[float, float]):
    """A measure function whose n-th call measures ``outcomes[n]``: (images/s, outside share
    of the CPUs); a share of 0.25 or more is a busy machine."""
    calls: list[tuple[float, float]] = []

    def measure(workload, config, plan, *, on_window=None, on_ready=None) -> MeasureResult:
        rate, share = outcomes[len(calls)]
        calls.append((rate, share))
        window = Window(index=0, epoch=0, images=16, seconds=16 / rate, wait_s=0.0,
                        compute_s=16 / rate, h2d_s=0.0)  # fmt: skip
        if on_window is not None:
            on_window(window)
        # a measurement of 1000 / rate seconds, all of it planned epochs
        return MeasureResult(config=config, status=OK, windows=[window], objective=rate,
                             steady_rate=rate, outside_load=2 * share, outside_share=share,
                             steal_share=0.0, busy_host=share >= 0.25, wall_s=1000 / rate,
                             phases={"planned": 1000 / rate})  # fmt: skip

    measure.calls = calls
    return measure


def _one_config(tmp_path, trials: int):
    return dataclasses.replace(
        quick_settings(tmp_path, trials=trials),
        space=SearchSpace(num_workers=(0, 0), batch_size=(8, 16), pin_memory=(False,)),
        baselines=False,
    )


def test_a_busy_trial_is_measured_again_and_the_quieter_measurement_kept(tmp_path):
    measure = _measurements((50.0, 0.8), (150.0, 0.05))
    settings = _one_config(tmp_path, trials=1)
    run_study(settings, measure_fn=measure, hardware=HOST)

    assert len(measure.calls) == 2
    [trial] = optuna.load_study(study_name="t", storage=settings.storage).trials
    assert trial.value == 150.0
    ua = trial.user_attrs
    assert ua["busy_host"] is False and ua["unreliable"] is False
    assert ua["outside_share"] == 0.05
    assert ua["remeasured"] == {"first_outside_share": 0.8, "first_objective": 50.0,
                                "again_outside_share": 0.05, "again_objective": 150.0,
                                "kept": "again", "dropped_wall_s": 20.0}  # fmt: skip


def test_a_trial_still_busy_the_second_time_is_unreliable_and_the_report_says_so(tmp_path):
    # trial 0 quiet; trial 1 busy twice (the less busy of the two kept)
    measure = _measurements((100.0, 0.05), (40.0, 0.9), (60.0, 0.6))
    settings = _one_config(tmp_path, trials=2)
    run_study(settings, measure_fn=measure, hardware=HOST)

    study = optuna.load_study(study_name="t", storage=settings.storage)
    quiet, busy = study.trials
    assert "remeasured" not in quiet.user_attrs and quiet.user_attrs["busy_host"] is False
    assert busy.value == 60.0 and busy.user_attrs["unreliable"] is True
    assert busy.user_attrs["remeasured"]["kept"] == "again"
    text = machine_load(summarize(study))
    assert "median over 2 trials" in text and "worst 60%, trial 1" in text
    assert "1 measured on a busy machine were measured again" in text
    assert "unreliable: trial 1" in text
    # the trial's note in optuna-dashboard says it too
    from loadersearch.report import NoteContext, trial_note

    note = trial_note(busy, NoteContext.of(study))
    assert "**Unreliable**: other processes used 60% of the CPUs" in note
    assert "measured twice (first 90% busy)" in note
    assert "Unreliable" not in trial_note(quiet, NoteContext.of(study))


def test_the_phase_table_counts_the_measurement_not_kept_apart_from_storage(tmp_path):
    from loadersearch.report import phase_rows

    settings = _one_config(tmp_path, trials=1)
    run_study(settings, measure_fn=_measurements((50.0, 0.8), (100.0, 0.05)), hardware=HOST)
    summary = summarize(optuna.load_study(study_name="t", storage=settings.storage))
    assert summary.phases["planned"] == 10.0  # the kept one: 1000 / 100 s
    assert summary.phases["busy"] == 20.0  # the busy first one: 1000 / 50 s
    rows = {row[0]: row for row in phase_rows(summary)}
    assert rows["measured again, not kept (busy machine)"][1] == "20.0 s"


def test_a_quiet_study_has_no_busy_phase(tmp_path):
    from loadersearch.report import phase_rows

    settings = _one_config(tmp_path, trials=1)
    run_study(settings, measure_fn=_measurements((100.0, 0.05)), hardware=HOST)
    summary = summarize(optuna.load_study(study_name="t", storage=settings.storage))
    assert summary.phases["busy"] == 0.0
    assert "measured again, not kept (busy machine)" not in [r[0] for r in phase_rows(summary)]


def test_a_quiet_study_says_no_trial_was_flagged(tmp_path):
    settings = _one_config(tmp_path, trials=2)
    run_study(settings, measure_fn=_measurements((100.0, 0.05), (90.0, 0.1)), hardware=HOST)
    study = optuna.load_study(study_name="t", storage=settings.storage)
    assert machine_load(summarize(study)).endswith("quiet enough, no trial flagged")


def test_a_machine_that_stays_busy_is_not_measured_twice_for_ever(tmp_path):
    # every measurement busy: two re-measurements in vain, then the third trial is marked
    # unreliable without a second measurement
    measure = _measurements(*[(100.0, 0.9)] * 5)
    settings = dataclasses.replace(
        _one_config(tmp_path, trials=3),
        space=SearchSpace(num_workers=(0, 0), batch_size=(8, 24), pin_memory=(False,)),
    )
    run_study(settings, measure_fn=measure, hardware=HOST)

    assert len(measure.calls) == 5
    trials = optuna.load_study(study_name="t", storage=settings.storage).trials
    assert [t.user_attrs["unreliable"] for t in trials] == [True, True, True]
    assert ["remeasured" in t.user_attrs for t in trials] == [True, True, False]
    assert "unreliable: trial 0, 1, 2" in machine_load(summarize(optuna.load_study(
        study_name="t", storage=settings.storage)))  # fmt: skip


def _pruned_then(*outcomes: tuple[str, float, float]):
    """A measure function whose n-th call ends as ``outcomes[n]``: (status, images/s, outside
    share); a pruned one reports its window, as the pruner saw it."""
    from loadersearch.measure import PRUNED

    calls: list[tuple[str, float, float]] = []

    def measure(workload, config, plan, *, on_window=None, on_ready=None) -> MeasureResult:
        status, rate, share = outcomes[len(calls)]
        calls.append((status, rate, share))
        window = Window(index=0, epoch=0, images=16, seconds=16 / rate, wait_s=0.0,
                        compute_s=16 / rate, h2d_s=0.0)  # fmt: skip
        return MeasureResult(config=config, status=PRUNED if status == "pruned" else OK,
                             windows=[window], objective=rate if status == "ok" else 0.0,
                             steady_rate=rate, outside_load=2 * share, outside_share=share,
                             steal_share=0.0, busy_host=share >= 0.25)  # fmt: skip

    measure.calls = calls
    return measure


def test_a_trial_pruned_on_a_busy_machine_is_queued_once_more(tmp_path):
    measure = _pruned_then(("ok", 100.0, 0.05), ("pruned", 30.0, 0.9), ("ok", 120.0, 0.05))
    settings = _one_config(tmp_path, trials=3)
    run_study(settings, measure_fn=measure, hardware=HOST)

    trials = optuna.load_study(study_name="t", storage=settings.storage).trials
    assert [t.state.name for t in trials] == ["COMPLETE", "PRUNED", "COMPLETE"]
    assert trials[1].user_attrs["requeued_busy"] is True
    assert trials[2].user_attrs["requeued_from"] == 1
    assert trials[2].params == trials[1].params and trials[2].value == 120.0


def test_a_second_try_pruned_on_a_busy_machine_again_is_not_queued_for_ever(tmp_path):
    measure = _pruned_then(
        ("ok", 100.0, 0.05), ("pruned", 30.0, 0.9), ("pruned", 30.0, 0.9), ("ok", 90.0, 0.05)
    )
    settings = dataclasses.replace(
        _one_config(tmp_path, trials=4),
        space=SearchSpace(num_workers=(0, 0), batch_size=(8, 24), pin_memory=(False,)),
    )
    run_study(settings, measure_fn=measure, hardware=HOST)

    trials = optuna.load_study(study_name="t", storage=settings.storage).trials
    assert [t.user_attrs.get("requeued_from") for t in trials] == [None, None, 1, None]
    assert "requeued_busy" not in trials[2].user_attrs
