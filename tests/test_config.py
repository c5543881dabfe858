"""The contract between layers: the five knobs, the workload, the plan, sizes."""

from __future__ import annotations

import json

import pytest

from loadersearch._loader_config import DEFAULT_START_METHOD, PLATFORM_START_METHOD, LoaderConfig
from loadersearch._options import parse_size
from loadersearch.measure import MeasurePlan
from loadersearch.workload import FORMATS, WorkloadSpec


def test_sizes_read_binary_and_decimal_units() -> None:
    assert parse_size("6GiB") == 6 * 2**30
    assert parse_size("512 MiB") == 512 * 2**20
    assert parse_size("6G") == 6 * 10**9
    assert parse_size("4GB") == 4 * 10**9
    assert parse_size("6000MiB") == 6000 * 2**20
    assert parse_size("1.5 gib") == 3 * 2**29
    assert parse_size("1024B") == 1024
    with pytest.raises(ValueError, match="cannot read the size"):
        parse_size("six gigs")


@pytest.mark.parametrize(
    ("size", "guess"),
    [("12", "12GiB?"), (" 12 ", "12GiB?"), (12, '"12GiB"?'), (1.5, '"1.5GiB"?'),
     ("6442450944", "6442450944B?")],
)  # fmt: skip
def test_a_size_without_a_unit_is_refused_with_a_guess(size, guess) -> None:
    # --vram-cap 12 was read as 12 bytes: a study created so could only fail.
    with pytest.raises(ValueError) as e:
        parse_size(size)
    assert f"has no unit: {guess} Write the unit" in str(e.value)


def test_configs_that_build_the_same_dataloader_compare_equal() -> None:
    implicit = LoaderConfig(num_workers=2, batch_size=16)
    explicit = LoaderConfig(num_workers=2, batch_size=16, prefetch_factor=2)
    assert implicit == explicit and hash(implicit) == hash(explicit)
    assert implicit.dataloader_kwargs()["prefetch_factor"] == 2
    assert implicit.label() == "w2 b16 pf2"
    assert LoaderConfig(num_workers=0).prefetch_factor is None  # no workers, no prefetch


def test_a_config_survives_the_trip_to_the_measuring_child() -> None:
    config = LoaderConfig(num_workers=3, batch_size=8, pin_memory=True, persistent_workers=True)
    assert LoaderConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    spec = WorkloadSpec(kind="emulated", emulated_ms=(1, 2))
    assert WorkloadSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    plan = MeasurePlan(epochs=2, steps=4)
    assert MeasurePlan.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"num_workers": 0, "prefetch_factor": 4}, "prefetch_factor=4 needs num_workers > 0"),
        ({"num_workers": 0, "persistent_workers": True}, "persistent_workers=True needs"),
        ({"num_workers": -1}, "cannot be negative"),
        ({"batch_size": 0}, "at least 1"),
    ],
)
def test_impossible_configs_are_refused_naming_the_knob(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        LoaderConfig(**kwargs)


def test_an_unknown_dataset_format_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="choose one of " + ", ".join(FORMATS)):
        WorkloadSpec(data_format="pascal")


def test_workers_start_the_default_way_explicitly_and_a_config_without_it_loads_as_default():
    config = LoaderConfig(num_workers=2, batch_size=16)
    assert config.start_method == DEFAULT_START_METHOD
    assert config.dataloader_kwargs()["multiprocessing_context"] == DEFAULT_START_METHOD
    assert LoaderConfig(num_workers=0, start_method="spawn").start_method is None  # no workers
    assert "multiprocessing_context" not in LoaderConfig(num_workers=0).dataloader_kwargs()
    stored = {"num_workers": 2, "batch_size": 16, "pin_memory": False, "prefetch_factor": 2}
    assert LoaderConfig.from_dict(stored) == config  # a result stored before the field existed
    with pytest.raises(ValueError, match="Unknown start method 'threads'"):
        LoaderConfig(num_workers=1, start_method="threads")


def test_the_snippet_names_the_start_method_only_when_python_would_start_workers_otherwise():
    assert (
        "multiprocessing_context"
        not in LoaderConfig(num_workers=2, start_method=PLATFORM_START_METHOD).snippet()
    )
    other = next(m for m in ("spawn", "forkserver", "fork") if m != PLATFORM_START_METHOD)
    config = LoaderConfig(num_workers=2, start_method=other)
    assert f"multiprocessing_context={other!r}" in config.snippet()
    if other != DEFAULT_START_METHOD:
        assert config.label().endswith(f" {other}")
    assert LoaderConfig(num_workers=2).label() == "w2 b16 pf2"  # the default goes unsaid
def test_a_pipeline_survives_the_trip_to_the_child_and_refuses_what_json_cannot_hold() -> None:
    from loadersearch.workload import PipelineSpec

    pipeline = PipelineSpec(dataset="mypkg.data:make", dataset_kwargs={"crop": (224, 224)})
    spec = WorkloadSpec(kind="loader", pipeline=pipeline)
    again = WorkloadSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
    assert again == spec and again.pipeline.dataset_kwargs == {"crop": [224, 224]}
    with pytest.raises(ValueError, match="cannot be stored in the study"):
        PipelineSpec(dataset="mypkg.data:make", dataset_kwargs={"transform": object()})
    with pytest.raises(ValueError, match="model_kwargs .* are given but no model"):
        PipelineSpec(dataset="mypkg.data:make", model_kwargs={"depth": 18})
    with pytest.raises(ValueError, match="a loss needs a model"):
        PipelineSpec(dataset="mypkg.data:make", loss="torch.nn:L1Loss")


@pytest.mark.parametrize("value", [-1, float("nan"), float("inf"), "slow", True])
def test_an_impossible_storage_latency_is_refused(value) -> None:
    with pytest.raises(ValueError, match="emulated_io_ms must be a finite number"):
        WorkloadSpec(emulated_io_ms=value)


def test_the_storage_latency_survives_the_trip_and_is_labelled_only_when_set() -> None:
    spec = WorkloadSpec(kind="loader", emulated_io_ms=20)
    assert WorkloadSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    assert spec.emulated_io_ms == 20.0
    assert spec.storage_label() == "EMULATED storage latency 20 ms/sample"
    assert WorkloadSpec().storage_label() is None
    spread = WorkloadSpec(kind="loader", emulated_io_ms=20, emulated_io_cv=2)
    assert WorkloadSpec.from_dict(json.loads(json.dumps(spread.to_dict()))) == spread
    assert spread.storage_label() == "EMULATED storage latency 20 ms/sample, CV 2 per file"
    with pytest.raises(ValueError, match="emulated_io_cv must be a finite number"):
        WorkloadSpec(emulated_io_cv=-1)


def test_a_measured_epoch_is_sized_to_the_batches_in_flight() -> None:
    plan = MeasurePlan(steps=8, in_flight_rounds=2)
    assert plan.sized_steps(LoaderConfig(num_workers=0)) == 8
    assert plan.sized_steps(LoaderConfig(num_workers=1)) == 8  # 2 x 1 x 2 + 1 = 5 < 8
    assert plan.sized_steps(LoaderConfig(num_workers=16)) == 2 * 16 * 2 + 16
    assert plan.sized_steps(LoaderConfig(num_workers=8, prefetch_factor=8)) == 2 * 64 + 8
    # never beyond one full epoch of the dataset, never below steps
    assert plan.sized_steps(LoaderConfig(num_workers=16), full_steps=40) == 40
    assert plan.sized_steps(LoaderConfig(num_workers=16), full_steps=3) == 8
    assert MeasurePlan(steps=8, in_flight_rounds=0).sized_steps(LoaderConfig(num_workers=16)) == 8
    # the warm-up: two batches per worker; the time limit at its rate, never below steps
    assert plan.warmup_steps_for(LoaderConfig(num_workers=16), 80) == 32
    assert plan.warmup_steps_for(LoaderConfig(num_workers=0), 8) == 4
    limited = MeasurePlan(steps=8, epoch_limit_s=10.0)
    assert limited.limited_steps(80, warmup_steps=32, warmup_s=8.0) == 40  # 4 steps/s x 10 s
    assert limited.limited_steps(80, warmup_steps=32, warmup_s=1.0) == 80
    assert limited.limited_steps(80, warmup_steps=32, warmup_s=100.0) == 8
    assert limited.limited_steps(80, warmup_steps=32, warmup_s=0.0) == 80  # no warm-up
    # a cut keeps whole rounds of the workers' batches (45 steps fit: 3 rounds of 12)
    assert limited.limited_steps(80, warmup_steps=36, warmup_s=8.0, num_workers=12) == 36
    with pytest.raises(ValueError, match="in_flight_rounds cannot be negative"):
        MeasurePlan(in_flight_rounds=-1)
