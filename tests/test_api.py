"""The Python API on a user pipeline defined in a test module (tests/helpers/pipelines.py),
with real measuring processes: tune runs the whole study and records the factories; bad
factories are refused before anything runs; a failing sample stops the study naming its
index."""

from __future__ import annotations

import functools
import os

import pytest
from helpers import pipelines

import loadersearch
from loadersearch.errors import PipelineError, StudyError
from loadersearch.measure.result import BAD_SAMPLE, ERROR, OK
from loadersearch.search.study import join_study

# Tiny measurements: the emulated device takes 20 ms a batch, the data are 8 px tensors.
PLAN = {"epochs": 2, "steps": 2, "windows_per_epoch": 2, "warmup_steps": 1, "timeout_s": 120}
SMALL = functools.partial(pipelines.make_dataset, n=32, size=8)


def _tune(storage: str, **kwargs):
    options = {
        "dataset": SMALL,
        "workload": "emulated",
        "emulated_ms": (20.0, 0.0),
        "storage": storage,
        "study": "mine",
        "space": {"num_workers": (0, 1)},
        "fix": {"batch_size": 8},
        "plan": PLAN,
        "trials": 2,
        "confirm_rounds": 1,
        "seed": 1,
    }
    return loadersearch.tune(**{**options, **kwargs})


def test_tune_runs_the_study_on_a_user_pipeline_and_records_its_factories(tmp_path) -> None:
    storage = f"sqlite:///{tmp_path / 'api.db'}"
    result = _tune(storage)

    assert result.best is not None and result.images_per_s and result.images_per_s > 0
    assert result.confirmed and result.emulated and result.ran == 2
    attrs = result.study.user_attrs
    assert attrs["pipeline"] == {"dataset": "helpers.pipelines:make_dataset"}
    stored = attrs["spec"]["workload"]["pipeline"]
    assert stored["dataset_kwargs"] == {"n": 32, "size": 8}
    assert attrs["workload_description"].startswith(
        "your pipeline (emulated workload): dataset helpers.pipelines:make_dataset(n=32, size=8)"
    )
    trials = [t for t in result.study.get_trials() if t.state.is_finished()]
    assert {t.user_attrs["baseline"] for t in trials} == {"pytorch", "article"}  # 2 of 3
    assert all(t.user_attrs["dataset_images"] == 32 for t in trials)
    assert all(t.user_attrs["emulated"] for t in trials)
    # the paste-ready answer, and the way a training script reads it back
    assert result.snippet() in result.report() and "EMULATED" in result.report()
    assert loadersearch.load_best(storage, "mine") == result.best
    assert result.dataloader_kwargs() == result.best.dataloader_kwargs()

    # A worker on another machine rebuilds the same pipeline from the study.
    joined, _ = join_study("mine", storage, trials=None, allow_mixed_hardware=False)
    assert joined.workload.pipeline is not None
    assert joined.workload.pipeline.to_dict() == stored
    # Resume: the same call finds the study complete and confirmed, and measures nothing.
    again = _tune(storage)
    assert again.ran == 0 and again.best == result.best
    # Another pipeline cannot join the study under the same name.
    with pytest.raises(StudyError, match="different spec.*dataset_kwargs"):
        _tune(storage, dataset=functools.partial(pipelines.make_dataset, n=16, size=8))


def test_a_lambda_factory_is_refused_before_anything_runs(tmp_path) -> None:
    storage = tmp_path / "never.db"
    with pytest.raises(PipelineError) as e:
        loadersearch.tune(dataset=lambda: pipelines.make_dataset(), storage=f"sqlite:///{storage}")
    assert str(e.value).startswith(
        "the dataset is a lambda, which the measuring process (a new Python process) cannot "
        "import by name: define it with def (or class) at the top level of a module"
    )
    assert not storage.exists()


def test_tune_and_bench_refuse_to_run_inside_the_measuring_process(monkeypatch) -> None:
    monkeypatch.setenv("LOADERSEARCH_MEASURING", "1")  # the measuring process imported a script
    for call in (loadersearch.tune, loadersearch.bench):
        with pytest.raises(PipelineError, match='under `if __name__ == "__main__":`'):
            call(dataset=SMALL)


def test_a_sample_failing_in_a_worker_stops_the_study_naming_its_index(tmp_path) -> None:
    failing = functools.partial(pipelines.make_dataset, n=8, size=8, fail_at=5)
    with pytest.raises(PipelineError) as e:
        _tune(f"sqlite:///{tmp_path / 'bad.db'}", dataset=failing, fix={"num_workers": 1,
              "batch_size": 8}, trials=1)  # fmt: skip
    text = str(e.value)
    assert text.startswith(
        "your dataset cannot be used (bad_sample): bad sample index 5 of "
        "helpers.pipelines:make_dataset: ValueError: record 5 is corrupt (in DataLoader worker "
    )
    assert "Every trial would fail the same way" in text


def test_bench_measures_the_default_step_and_reports_a_failing_sample() -> None:
    result = loadersearch.bench(
        dataset=SMALL,
        model=pipelines.make_model,
        loss="torch.nn:CrossEntropyLoss",
        device="cpu",
        config={"num_workers": 0, "batch_size": 4},
        plan=PLAN,
    )
    assert result.status == OK, result.message
    assert result.img_size is None and result.dataset_images == 32
    assert len(result.windows) == 4 and all(w.compute_s > 0 for w in result.windows)

    failing = loadersearch.bench(
        dataset=functools.partial(pipelines.make_dataset, n=8, size=8, fail_at=5),
        workload="loader",
        config=loadersearch.LoaderConfig(batch_size=8),
        plan=PLAN,
    )
    assert (failing.status, failing.reason) == (ERROR, BAD_SAMPLE)
    assert failing.message == (
        "bad sample index 5 of helpers.pipelines:make_dataset: ValueError: record 5 is corrupt"
    )


def test_the_api_is_imported_on_first_use() -> None:
    import subprocess
    import sys

    code = (
        "import sys, loadersearch; assert 'loadersearch.api' not in sys.modules; loadersearch.tune"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def test_dir_lists_the_lazy_names_without_importing_them() -> None:
    import subprocess
    import sys

    code = (
        "import sys, loadersearch; names = dir(loadersearch); "
        "assert {'tune', 'bench', 'TuneResult', 'AutoLoader', 'autoloader'} <= set(names), names; "
        "assert set(loadersearch.__all__) <= set(names); "
        "assert 'loadersearch.api' not in sys.modules and 'loadersearch.online' not in sys.modules"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
