"""The batch-size probe: grow by doubling, then bisect, on the space's own grid; under a real
CUDA cap, enough steps and headroom below the cap (an injected measure function stands in for
the device, which this machine does not have)."""

from __future__ import annotations

import pytest

from loadersearch import LoaderConfig
from loadersearch.errors import DatasetError, StudyError
from loadersearch.measure import (
    BAD_SAMPLE,
    ERROR,
    INFEASIBLE,
    OK,
    VRAM_CAP,
    MeasurePlan,
    MeasureResult,
)
from loadersearch.search._batchprobe import (
    HEADROOM,
    PROBE_PLAN,
    ProbeResult,
    allocator_limit,
    has_headroom,
    probe_max_batch,
)
from loadersearch.workload import WorkloadSpec

WORKLOAD = WorkloadSpec(kind="emulated")
GIB = 2**30


def _measure_under(limit: int, calls: list[int]):
    """A measurement whose batch fits when it is at most ``limit`` (the cap in batch units)."""

    def measure(workload: WorkloadSpec, config: LoaderConfig, plan: MeasurePlan, **_):
        calls.append(config.batch_size)
        if config.batch_size <= limit:
            return MeasureResult(config=config, status=OK, peak_vram_bytes=config.batch_size)
        return MeasureResult(config=config, status=INFEASIBLE, reason=VRAM_CAP, message="over")

    return measure


@pytest.fixture(autouse=True)
def _private_lock(tmp_path, monkeypatch):
    monkeypatch.setenv("LOADERSEARCH_LOCK_DIR", str(tmp_path))


@pytest.mark.parametrize("limit, expected", [(8, 8), (40, 40), (47, 40), (128, 128), (200, 128)])
def test_the_probe_finds_the_largest_batch_of_the_grid_that_fits(limit: int, expected: int):
    choices = list(range(8, 129, 8))
    calls: list[int] = []
    result = probe_max_batch(WORKLOAD, choices, measure_fn=_measure_under(limit, calls))
    assert result.max_batch == expected
    assert len(calls) == len(set(calls)), "a batch size was measured twice"
    assert len(calls) <= 8  # doubling then bisecting: logarithmic in the grid
    assert [p["batch"] for p in result.probes] == calls


def test_powers_of_two_grids_are_probed_on_their_own_values():
    calls: list[int] = []
    result = probe_max_batch(WORKLOAD, [8, 16, 32, 64, 128], measure_fn=_measure_under(50, calls))
    assert result.max_batch == 32 and set(calls) <= {8, 16, 32, 64, 128}


def test_not_even_the_smallest_batch_fitting_is_refused_with_the_fix():
    with pytest.raises(StudyError, match="not even batch_size=8 fits.*--vram-cap"):
        probe_max_batch(WORKLOAD, [8, 16], measure_fn=_measure_under(4, []))


def test_a_bad_dataset_stops_the_probe_as_a_dataset_error():
    def measure(workload, config, plan, **_):
        return MeasureResult(config=config, status=ERROR, reason=BAD_SAMPLE, message="x.jpg")

    with pytest.raises(DatasetError, match="x.jpg"):
        probe_max_batch(WORKLOAD, [8, 16], measure_fn=measure)


def test_the_probe_result_survives_the_study_attribute_and_describes_itself():
    result = probe_max_batch(WORKLOAD, [8, 16, 24], measure_fn=_measure_under(16, []))
    again = ProbeResult.from_dict(result.to_dict())
    assert again == result
    assert again.describe().startswith("largest batch under the cap: 16 (probed 8 fits")
    assert ProbeResult(None, skipped="no VRAM cap").describe().endswith("no VRAM cap")



def test_the_probe_runs_six_steps_and_measures_under_the_tightened_cap() -> None:
    steps = PROBE_PLAN.warmup_epochs * PROBE_PLAN.warmup_steps + PROBE_PLAN.epochs * (
        PROBE_PLAN.steps
    )
    assert steps >= 6
    assert PROBE_PLAN.warmup_epochs >= 1  # the overhead is measured after the first step


def test_headroom_is_ninety_percent_of_what_the_allocator_may_use() -> None:
    assert allocator_limit(8 * GIB, GIB) == 7 * GIB
    assert allocator_limit(8 * GIB, None) == 8 * GIB
    assert allocator_limit(None, GIB) is None
    assert has_headroom(int(0.9 * 7 * GIB), 7 * GIB)
    assert not has_headroom(int(0.9 * 7 * GIB) + 1, 7 * GIB)
    assert has_headroom(None, 7 * GIB) and has_headroom(GIB, None)


def test_a_batch_that_runs_but_leaves_no_headroom_does_not_fit() -> None:
    # 1 GiB outside the allocator, 0.1 GiB of tensors per image: 7 GiB for the allocator under
    # an 8 GiB cap, 6.3 GiB with headroom: batch 63 at most; the grid is 16, 32, 48, 64.
    def measure(workload, config, plan, *, on_window=None, on_ready=None) -> MeasureResult:
        assert plan == PROBE_PLAN
        return MeasureResult(
            config=config, status=OK,
            peak_allocated_bytes=int(config.batch_size * 0.1 * GIB),
            peak_vram_bytes=int(config.batch_size * 0.11 * GIB), cuda_overhead_bytes=GIB,
        )  # fmt: skip

    spec = WorkloadSpec(kind="train", device="cuda", vram_cap=8 * GIB)
    result = probe_max_batch(spec, [16, 32, 48, 64], measure_fn=measure)
    assert result.max_batch == 48
    over = next(p for p in result.probes if p["batch"] == 64)
    assert over["fits"] is False and over["status"] == OK
    assert f"{HEADROOM:.0%} of the 7,168 MiB" in over["message"]


def test_a_new_study_is_created_only_once_the_probe_found_a_batch(tmp_path, tiny_dataset):
    # Issue 22, 7: a study created before its probe failed refused the corrected cap as "a
    # different spec". (A device whose memory is not a formula: the measurement says.)
    import dataclasses

    import optuna
    from helpers.studies import HOST, quick_settings, steady_measure

    from loadersearch.search._study import run_study

    base = quick_settings(tmp_path, trials=1)
    settings = dataclasses.replace(
        base,
        workload=dataclasses.replace(base.workload, data=tiny_dataset, vram_cap=GIB),
        baselines=False,
    )
    with pytest.raises(StudyError, match="not even batch_size=8 fits"):
        run_study(settings, measure_fn=_measure_under(4, []), hardware=HOST)
    assert optuna.get_all_study_names(settings.storage) == []

    fits, trial = _measure_under(8, []), steady_measure()

    def measure(workload, config, plan, **kwargs):
        return fits(workload, config, plan) if plan == PROBE_PLAN else trial(
            workload, config, plan, **kwargs
        )

    outcome = run_study(settings, measure_fn=measure, hardware=HOST)
    assert outcome.probe.max_batch == 8 and not outcome.resumed
    assert outcome.study.user_attrs["probe"]["max_batch"] == 8
