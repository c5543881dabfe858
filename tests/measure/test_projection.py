"""The projection from short measured epochs to one full epoch, and the spread of windows."""

from __future__ import annotations

import pytest

from loadersearch.measure.projection import (
    coefficient_of_variation,
    full_epoch_images,
    project,
    steady_span,
    window_cv,
)


def _epoch(arrivals: list[float], end: float) -> dict:
    return {"arrivals": arrivals, "seconds": end}


def test_full_epoch_drops_the_last_partial_batch():
    assert full_epoch_images(16551, 16) == 16544
    assert full_epoch_images(10, 16) == 0


def test_steady_span_covers_whole_groups_of_workers_after_the_first():
    assert steady_span(6, 0) == 5  # no workers: every interval
    assert steady_span(8, 2) == 4  # skip the first group of 2, then 2 whole groups
    assert steady_span(6, 2) == 2
    assert steady_span(8, 8) == 0  # one group: nothing steady to measure
    assert steady_span(1, 0) == 0


def test_serial_loader_projects_its_own_rate_and_start_cost():
    # 0 workers: batch k arrives at 0.5 + 0.1*k, epoch ends 0.05 s after the last arrival.
    epochs = [_epoch([0.5 + 0.1 * k for k in range(6)], 0.5 + 0.5 + 0.1)] * 2
    p = project(epochs, batch_size=4, num_workers=0, full_images=400)
    assert p.steady_rate == pytest.approx(40.0)
    # 6 batches at the steady rate take 0.6 s; the epoch took 1.1 s: 0.5 s start cost.
    assert p.start_cost_s == pytest.approx(0.5)
    assert p.epoch_time_s == pytest.approx(400 / 40 + 0.5)
    assert p.objective == pytest.approx(400 / 10.5)
    assert p.objective < p.steady_rate


def test_worker_bursts_do_not_inflate_the_steady_rate():
    # 2 workers, loader-bound: pairs of batches arrive together every 0.2 s (10 batches/s).
    arrivals = [0.3, 0.3, 0.5, 0.5, 0.7, 0.7, 0.9, 0.9]
    p = project([_epoch(arrivals, 1.0)], batch_size=1, num_workers=2, full_images=1000)
    assert p.steady_rate == pytest.approx(10.0)


def test_short_epochs_fall_back_to_the_whole_epoch_rate():
    p = project([_epoch([0.4, 0.4], 0.5)], batch_size=2, num_workers=4, full_images=100)
    assert p.steady_rate == pytest.approx(8.0)
    assert p.start_cost_s == 0.0


def test_larger_dataset_dilutes_the_start_cost():
    epochs = [_epoch([1.0 + 0.1 * k for k in range(8)], 1.8)]
    small = project(epochs, 8, 0, full_images=64)
    large = project(epochs, 8, 0, full_images=64_000)
    assert small.objective < large.objective < large.steady_rate


def test_window_cv_ignores_the_planned_slow_first_window_of_each_epoch():
    steady = [50.0, 100.0, 50.0, 100.0, 50.0, 100.0]
    assert window_cv(steady, windows_per_epoch=2) == pytest.approx(0.0)
    assert coefficient_of_variation(steady) > 0.3
    noisy = [50.0, 90.0, 50.0, 110.0]
    assert window_cv(noisy, 2) == pytest.approx(coefficient_of_variation([90, 110]) / 2)
