"""The batch-size probe's search: grow by doubling, then bisect, on the space's own grid."""

from __future__ import annotations

import pytest

from loadersearch.config import LoaderConfig, MeasurePlan, WorkloadSpec
from loadersearch.errors import DatasetError, StudyError
from loadersearch.measure.result import BAD_SAMPLE, ERROR, INFEASIBLE, OK, VRAM_CAP, MeasureResult
from loadersearch.search.batchprobe import ProbeResult, probe_max_batch

WORKLOAD = WorkloadSpec(kind="emulated")


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
