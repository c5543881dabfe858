"""How each measurement outcome is recorded (an injected measure function stands in for the
child process, so each outcome is exact and instant; the real one is in test_study.py)."""

from __future__ import annotations

import dataclasses

import pytest
from helpers.studies import HOST, quick_settings, steady_measure
from optuna.trial import TrialState

from loadersearch import Hardware
from loadersearch.errors import DatasetError, DeviceError, StudyError
from loadersearch.measure import (
    BAD_DATASET,
    CRASH,
    ERROR,
    NO_DEVICE,
    MeasurePlan,
    MeasureResult,
    Window,
)
from loadersearch.search._space import SearchSpace
from loadersearch.search._study import run_study
from loadersearch.search._trial_values import start_weight, window_start_weight, window_value
from loadersearch.workload import WorkloadSpec


@pytest.fixture(autouse=True)
def own_lock_dir(tmp_path, monkeypatch) -> None:
    # Nothing is measured here: do not wait for real measurements elsewhere on this host.
    monkeypatch.setenv("LOADERSEARCH_LOCK_DIR", str(tmp_path / "locks"))


def _failing(reason: str):
    def measure(workload, config, plan, *, on_window=None, on_ready=None) -> MeasureResult:
        return MeasureResult(config=config, status=ERROR, reason=reason, message="it broke")

    return measure


def test_a_dataset_error_stops_the_whole_run_with_its_message(tmp_path) -> None:
    with pytest.raises(DatasetError, match="every trial would fail|Every trial would fail"):
        run_study(quick_settings(tmp_path), measure_fn=_failing(BAD_DATASET), hardware=HOST)


def test_tool_crashes_are_failed_trials_and_three_in_a_row_stop_the_run(tmp_path) -> None:
    with pytest.raises(StudyError, match="3 trials in a row crashed"):
        run_study(quick_settings(tmp_path, 10), measure_fn=_failing(CRASH), hardware=HOST)
    import optuna

    study = optuna.load_study(study_name="t", storage=f"sqlite:///{tmp_path / 't.db'}")
    assert [t.state for t in study.trials] == [TrialState.FAIL] * 3


def test_the_pruner_counts_the_epoch_start_as_the_full_epoch_objective_does() -> None:
    window = Window(index=0, epoch=0, images=32, seconds=2.0, wait_s=1.0, compute_s=1.0,
                    h2d_s=0.0, start_s=1.0)  # fmt: skip
    assert window.rate == 16.0
    assert window_value(window) == 32.0  # the start left out
    # 8 steps of 16 images in a short epoch, 512 in a full one: a quarter of the start.
    weight = start_weight(8 * 16, 512)
    assert weight == 0.25
    assert window_value(window, weight) == 32 / 1.25
    assert start_weight(8 * 16, 0) == 0.0  # unknown full epoch
    assert start_weight(8 * 64, 256) == 1.0  # at most one start
    # A window carries its epoch's length (sized to the configuration); one that does not
    # had plan.steps batches.
    assert window_start_weight(window, MeasurePlan(steps=8), 16, 512) == 0.25
    sized = dataclasses.replace(window, epoch_images=24 * 16)
    assert window_start_weight(sized, MeasurePlan(steps=8), 16, 512) == 0.75


def test_a_repeated_configuration_reuses_the_measurement_instead_of_measuring_again(
    tmp_path,
) -> None:
    import optuna

    calls = []

    def measure(workload, config, plan, *, on_window=None, on_ready=None) -> MeasureResult:
        calls.append(config)
        window = Window(index=0, epoch=0, images=16, seconds=0.1, wait_s=0.0, compute_s=0.1,
                        h2d_s=0.0)  # fmt: skip
        on_window(window)
        return MeasureResult(config=config, status="ok", windows=[window], objective=160.0,
                             steady_rate=160.0)  # fmt: skip

    import dataclasses

    settings = dataclasses.replace(
        quick_settings(tmp_path, trials=3),
        space=SearchSpace(num_workers=(0, 0), batch_size=(8, 8), pin_memory=(False,)),
        baselines=False,
    )
    run_study(settings, measure_fn=measure, hardware=HOST)

    study = optuna.load_study(study_name="t", storage=settings.storage)
    assert len(calls) == 1
    first, *repeats = study.trials
    assert all(t.state == TrialState.COMPLETE and t.value == 160.0 for t in study.trials)
    assert [t.user_attrs.get("repeat_of") for t in repeats] == [first.number] * 2
    assert all(t.intermediate_values == first.intermediate_values for t in repeats)


GPU_HOST = Hardware(host="gpu", cpu_count=16, physical_cores=8, gpu_model="NVIDIA H200",
                    gpu_count=1)  # fmt: skip


def test_a_cuda_study_measures_on_cuda_explicitly_and_stops_when_the_child_sees_no_gpu(
    tmp_path,
) -> None:
    import dataclasses

    seen = []

    def measure(workload, config, plan, *, on_window=None, on_ready=None) -> MeasureResult:
        seen.append(workload.device)
        return MeasureResult(
            config=config, status=ERROR, reason=NO_DEVICE,
            message="this measurement must run on CUDA but torch sees no CUDA device: "
            "CUDA_VISIBLE_DEVICES='' hides every GPU from this process.",
        )  # fmt: skip

    settings = dataclasses.replace(
        quick_settings(tmp_path),
        workload=WorkloadSpec(kind="train", device="auto"),
        space=SearchSpace(num_workers=(0, 2), batch_size=(8, 16)).with_fixed("batch_size", 8),
    )
    with pytest.raises(DeviceError, match="CUDA_VISIBLE_DEVICES=''.*Every trial would fail"):
        run_study(settings, measure_fn=measure, hardware=GPU_HOST)
    assert seen == ["cuda"]  # resolved by the parent, not left to the child's guess
    import optuna

    study = optuna.load_study(study_name="t", storage=settings.storage)
    assert study.user_attrs["spec"]["workload"]["device"] == "auto"  # the spec is unchanged


def test_the_measured_hook_sees_each_measured_trial_while_it_runs_and_wait_is_kept(
    tmp_path,
) -> None:
    import optuna

    seen = []

    def hook(trial: optuna.Trial, result: MeasureResult) -> None:
        trial.set_user_attr("hooked", True)  # raises once a trial has finished
        seen.append((trial.number, result.config.label()))

    settings = quick_settings(tmp_path, trials=4)
    run_study(settings, measure_fn=steady_measure(wait=0.25), hardware=HOST, on_measured=hook)

    study = optuna.load_study(study_name="t", storage=settings.storage)
    measured = [t for t in study.trials if "repeat_of" not in t.user_attrs]
    assert seen and [n for n, _ in seen] == [t.number for t in measured]
    assert all(t.user_attrs["hooked"] and t.user_attrs["window_wait"] == [0.25] for t in measured)
    assert [label for _, label in seen] == [t.user_attrs["config"] for t in measured]


def test_a_clearly_slower_prune_records_the_best_trial_it_lost_to() -> None:
    import optuna

    from loadersearch.search._objective import record_pruned_against
    from loadersearch.search._pruner import ClearlySlowerPruner

    for pruner, expected in ((ClearlySlowerPruner(), 1), (optuna.pruners.MedianPruner(), None)):
        study = optuna.create_study(direction="maximize", pruner=pruner)
        study.add_trial(optuna.trial.create_trial(value=50.0))
        study.add_trial(optuna.trial.create_trial(value=90.0))
        trial = study.ask()
        record_pruned_against(trial)
        # Other pruners compare with no single trial: nothing to record.
        assert trial.user_attrs.get("pruned_against") == expected


def test_an_unusable_pipeline_s_message_ends_its_sentence_once() -> None:
    # Issue 22, 7: "check the name after the colon.. Every trial would fail".
    from loadersearch import LoaderConfig
    from loadersearch.measure import BAD_PIPELINE, ERROR, MeasureResult
    from loadersearch.search._objective import unusable_input
    from loadersearch.workload import PipelineSpec

    spec = WorkloadSpec(kind="loader", pipeline=PipelineSpec("helpers.pipelines:make_dataset"))
    message = "module m has no 'f' (the dataset m:f); check the name after the colon."
    result = MeasureResult(LoaderConfig(), status=ERROR, reason=BAD_PIPELINE, message=message)
    text = str(unusable_input(result, spec))
    assert "check the name after the colon. Every trial would fail" in text and ".." not in text
