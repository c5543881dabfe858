"""What the source article claims for slow storage, measured on the emulated storage latency
(a sleep per sample read, no CPU): more workers overlap the waits, and a RAM or memmap cache
removes the fetch stall (the latency is paid once per file when the cache fills). Ratios of
two measurements with a wide margin, since the sleeps dominate: no wall-clock bound."""

from __future__ import annotations

import pytest

from loadersearch import LoaderConfig
from loadersearch.measure import MeasurePlan, measure
from loadersearch.workload._spec import WorkloadSpec

IO_MS = 40.0  # per sample: 1 worker fetches at most 25 img/s, 4 workers 100
PLAN = MeasurePlan(epochs=2, steps=12, windows_per_epoch=2, warmup_steps=4, in_flight_rounds=0)


def _rate(data: str, workers: int, cache: str = "none", prefetch: int = 2) -> float:
    spec = WorkloadSpec(kind="loader", data=data, img_size=64, device="cpu", cache=cache,
                        emulated_io_ms=IO_MS)  # fmt: skip
    result = measure(spec, LoaderConfig(workers, 4, False, prefetch, True), PLAN)
    assert result.ok, result.message
    assert any("EMULATED storage latency" in n for n in result.notes)
    return result.steady_rate


@pytest.fixture
def caches(tmp_path, monkeypatch):
    monkeypatch.setenv("LOADERSEARCH_CACHE_DIR", str(tmp_path))


def test_on_slow_storage_more_workers_overlap_the_fetches(tiny_dataset, caches):
    one, four = _rate(tiny_dataset, 1), _rate(tiny_dataset, 4)
    assert one <= 1000 / IO_MS * 1.1  # the latency bounds one worker
    assert four > 1.8 * one, (one, four)


@pytest.mark.parametrize("cache", ["ram", "memmap"])
def test_a_cache_removes_the_fetch_stall(tiny_dataset, caches, cache):
    plain, cached = _rate(tiny_dataset, 1), _rate(tiny_dataset, 1, cache)
    assert cached > 2 * plain, (plain, cached)
