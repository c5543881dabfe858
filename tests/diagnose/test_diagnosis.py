"""``loadersearch.diagnose`` on the emulated accelerator and the emulated storage latency: each
kind of bottleneck is named as such, every remedy it suggests is measured, and the cold-cache
step says whether the eviction worked."""

from __future__ import annotations

import dataclasses

import pytest

from loadersearch import LoaderConfig
from loadersearch.diagnose import COMPUTE, FETCH, PREP, Diagnosis, Measurement, diagnose
from loadersearch.diagnose._findings import knee, scaling_ladder, stall_shares
from loadersearch.diagnose._verdict import _verdict
from loadersearch.measure import MeasurePlan
from loadersearch.workload import WorkloadSpec

PLAN = MeasurePlan(epochs=2, steps=3, windows_per_epoch=1, warmup_steps=1, timeout_s=120)


def _spec(data: str, **kw) -> WorkloadSpec:
    return WorkloadSpec(kind="emulated", data=data, device="cpu", **{"img_size": 64, **kw})


def test_a_fast_device_with_costly_augmentation_is_prep_bound_and_each_remedy_is_measured(
    tiny_dataset, tmp_path
):
    spec = _spec(
        tiny_dataset, img_size=256, mosaic=True, emulated_ms=(1, 0), cache_dir=str(tmp_path)
    )
    d = diagnose(spec, LoaderConfig(batch_size=2), PLAN, max_workers=1)
    assert d.verdict == PREP, d.summary
    assert d.summary.startswith("prep-bound: ")
    assert d.shares["prep"] > 0.5
    names = {r.name for r in d.remedies}
    assert {"1 worker", "no mosaic", "memmap cache"} <= names, d.summary
    for r in d.remedies:  # measured, warm, against the warm pipeline's own rate
        m = d.measurements[r.measurement]
        assert m.ok and r.rate == m.rate and r.condition == "warm"
        assert r.base_rate == d.measurements["warm"].rate
        assert f"{r.name} (" in d.summary
    memmap = next(r for r in d.remedies if r.name == "memmap cache")
    assert "on disk" in memmap.cost
    # every figure is stored with its timeline, and the diagnosis survives JSON
    warm = d.measurements["warm"].timeline
    assert len(warm.step_t) == PLAN.epochs * PLAN.steps and warm.epoch_t[0] == 0.0
    again = Diagnosis.from_dict(d.to_dict())
    assert again.summary == d.summary and again.measurements["warm"].timeline == warm


def test_a_slow_device_is_compute_bound_and_no_remedy_is_offered(tiny_dataset):
    # 300 ms a batch: under load a cold read of the tiny dataset cost 13% of a 150 ms step and
    # the verdict became fetch-bound. 8 steps an epoch: an epoch's first batch, which waits
    # for its worker (~60 ms under load), is then under 3% of the epoch, not 7%.
    spec = _spec(tiny_dataset, emulated_ms=(300, 0))
    config = LoaderConfig(num_workers=1, batch_size=2, persistent_workers=True)
    d = diagnose(spec, config, dataclasses.replace(PLAN, steps=8), max_workers=1)
    assert d.verdict == COMPUTE, d.summary
    assert "no loader setting can help" in d.summary
    assert d.remedies == []
    ceiling = d.rate("ceiling")
    assert ceiling is not None and ceiling < 2 / 0.300 * 1.05  # 2 images per 300 ms at most
    assert d.whatif["cores_for_ceiling"] >= 1


def test_a_latency_bound_dataset_is_fetch_bound(tiny_dataset):
    # 100 ms a read, 200 a batch: the decode of two images would have to take as long before
    # the fetch share fell under one half (40 ms a read did not leave that margin under load)
    spec = _spec(tiny_dataset, emulated_ms=(1, 0), emulated_io_ms=100)
    d = diagnose(spec, LoaderConfig(batch_size=2), PLAN, max_workers=1, remedies=False)
    assert d.verdict == FETCH, d.summary
    assert d.shares["fetch"] > 0.5
    assert d.rate("cold") < d.rate("warm")
    assert any("applies to the cold measurement only" in n for n in d.notes)


def test_the_cold_step_says_whether_the_eviction_worked(tiny_dataset):
    spec = _spec(tiny_dataset, emulated_ms=(1, 0))
    d = diagnose(spec, LoaderConfig(batch_size=2), PLAN, max_workers=1, remedies=False)
    info = d.measurements["cold"].page_cache
    assert info["checked"] and info["evictions"] == PLAN.epochs
    left = info["resident_after_evict"]
    assert d.evicted is (left <= 0.05)
    if d.evicted:
        assert any("mincore found" in line for line in d.details)
    else:
        assert any("could not evict" in n for n in d.notes)


def test_scaling_ladder_knee_and_shares():
    assert scaling_ladder(1) == [1]
    assert scaling_ladder(4) == [1, 2, 3, 4]
    assert scaling_ladder(32) == [1, 2, 3, 4, 6, 8, 12, 16, 24, 32]
    assert knee([(1, 100), (2, 190), (3, 200), (4, 195)]) == 2
    assert knee([(1, 0.0)]) is None
    shares = stall_shares(ceiling=100, warm=50, cold=25)
    assert shares == pytest.approx({"compute": 0.25, "prep": 0.25, "fetch": 0.5})
    # noise: a pipeline "faster" than its ceiling has no stall, not a negative one
    assert stall_shares(100, 110, None) == pytest.approx({"compute": 1, "prep": 0, "fetch": 0})
    with pytest.raises(ValueError, match="max_workers must be at least 1 but got 0"):
        scaling_ladder(0)


def _hand(name: str, rate: float, wait: float, cv: float = 0.01) -> Measurement:
    return Measurement(
        name=name, what="", config=LoaderConfig(), status="ok", message="", rate=rate,
        steady_rate=rate, wait_fraction=wait, window_cv=cv, device="cpu", windows=8,
    )  # fmt: skip


def _hand_diagnosis(*ms: Measurement) -> Diagnosis:
    return Diagnosis(
        workload={}, config=LoaderConfig(), plan={}, img_size=64, device="cpu", cpu_count=2,
        load_before=0.0, load_after=0.0, dataset_files=1, dataset_bytes=1, dataset_images=1,
        measurements={m.name: m for m in ms}, evicted=True,
    )  # fmt: skip


def test_a_slower_run_without_waiting_for_data_is_the_machine_not_a_stall():
    # warm is 40% slower than the ceiling, but its loop hardly waited: load, not the loader
    d = _hand_diagnosis(_hand("ceiling", 100, 0.0), _hand("warm", 60, 0.03))
    _verdict(d)
    assert d.verdict == COMPUTE
    assert any("machine's load changing between the measurements" in n for n in d.notes)
    # the same rates with the loop waiting 40% of the warm run: prep-bound
    d = _hand_diagnosis(_hand("ceiling", 100, 0.0), _hand("warm", 60, 0.4))
    _verdict(d)
    assert d.verdict == PREP


def test_a_noisy_difference_is_not_called_a_stall():
    d = _hand_diagnosis(_hand("ceiling", 100, 0.0, cv=0.5), _hand("warm", 80, 0.3, cv=0.5))
    _verdict(d)
    assert d.verdict == COMPUTE
    assert any("within the noise" in n for n in d.notes)


def test_a_noisy_ceiling_far_above_the_pipeline_does_not_hide_its_prep_stall():
    # CI, a prep-bound case: ceiling 1,018 img/s from windows of a few milliseconds (CV 50%),
    # warm 71, cold 47. The ceiling's noise moves the prep share (61% of the cold time per
    # image) by under 2 points; as a plain relative difference it was +/-71% and hid it.
    ceiling = dataclasses.replace(_hand("ceiling", 1018, 0.0, cv=0.5), windows=2)
    d = _hand_diagnosis(ceiling, _hand("warm", 71, 0.9), _hand("cold", 47, 0.93))
    _verdict(d)
    assert d.verdict == PREP and d.shares["prep"] > d.shares["fetch"] > 0.3
    assert d.noise["prep"] < 0.15


def test_fetch_needs_more_waiting_per_image_cold_than_warm():
    ceiling, warm = _hand("ceiling", 1000, 0.0), _hand("warm", 100, 0.95)
    d = _hand_diagnosis(ceiling, warm, _hand("cold", 20, 0.99))
    _verdict(d)
    assert d.verdict == FETCH and d.shares["fetch"] == pytest.approx(0.8)
