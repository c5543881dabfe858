"""From a few short measured epochs to the throughput of one full epoch of the user's dataset.

A short measured epoch of ``S`` steps of ``B`` images takes ``T`` seconds from the creation of
its iterator (``iter(loader)``, which starts the DataLoader workers unless they persist) to the
end of its last step (``StopIteration``, which shuts non-persistent workers down). Two parts are
measured separately:

* the **steady rate** ``r`` (images/s): the slope of the batch arrival times once the pipeline
  is full. With ``w`` workers, batches come in groups of ``w`` (batch ``k`` is made by worker
  ``k % w``; a loader-bound epoch delivers ``w`` batches at about the same time, then nothing),
  so the slope is taken over a whole number of groups, from the arrival of the first group's
  last batch (every worker has started by then) and (with two workers or more) before the
  last group when the epoch is long enough (:func:`steady_interval`):
  ``r = B * sum_e n / sum_e (a_e[hi] - a_e[hi-n])`` over the measured epochs ``e``, where
  ``a_e[k]`` is when batch ``k`` reached the training loop, ``hi = S - 1 - w`` (the last group
  is the loader's drain; ``S - 1`` with 0-1 workers) and ``n`` is the largest multiple of
  ``max(w, 1)`` not above ``hi - min(max(w - 1, 0), S // 2)`` (failing that, without the
  drain's skip, then from the first arrival). An epoch too short for one group gives
  ``r = S * B / T`` and no start cost;
* the **start cost** ``c`` (seconds per epoch): what an epoch costs beyond the steady state,
  ``c = mean_e(T_e) - S * B / r`` (worker start-up, the first batch's latency, the prefetch
  ramp, the drain and the worker shut-down at the end), never below 0.

With ``N = floor(len(dataset) / B) * B`` images in one full epoch (``drop_last=True``)::

    epoch_time = N / r + c
    objective  = N / epoch_time        (images/s of one full epoch)

So the objective is never above the steady rate, and the start cost matters less the larger the
dataset: a configuration without ``persistent_workers`` pays ``c`` once per epoch, not once per
short measuring epoch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Projection:
    """The steady rate, the start cost and the full-epoch figures derived from them."""

    steady_rate: float  # images/s once the pipeline is full
    start_cost_s: float  # seconds each epoch costs beyond the steady state
    epoch_time_s: float  # projected seconds of one full epoch of the user's dataset
    objective: float  # projected images/s of one full epoch


def full_epoch_images(dataset_len: int, batch_size: int) -> int:
    """Images in one full epoch with ``drop_last=True``: ``floor(len / batch) * batch``."""
    return (dataset_len // batch_size) * batch_size


def steady_interval(steps: int, num_workers: int) -> tuple[int, int]:
    """``(lo, hi)``: the steady rate is measured from the arrival of batch ``lo`` to that of
    batch ``hi``, ``n = hi - lo`` intervals, a whole number of groups of ``max(w, 1)``
    (module doc). It starts at the first group's last arrival, ``lo >= w - 1`` (before it:
    the workers' start; from it on, every worker makes batch after batch) and, with two
    workers or more, leaves out the last group: when the epoch's indices run out the loader
    drains, each of its last batches waiting for whichever worker holds it, so a slow read
    there costs the whole drain. Both ends are per-epoch costs, counted once per epoch in the
    start cost; with reads that vary a lot, counting the drain in the rate made short epochs
    look up to 23% slower than full ones. Shorter epochs keep the last group, then the first.
    ``n`` is 0 when an epoch is too short to measure one."""
    group = max(1, num_workers)
    head = min(max(num_workers - 1, 0), steps // 2)
    tail = num_workers if num_workers >= 2 else 0
    for skip_head, skip_tail in ((head, tail), (head, 0), (0, 0)):
        hi = steps - 1 - skip_tail
        n = (hi - skip_head) // group * group
        if n > 0:
            return hi - n, hi
    return steps - 1, steps - 1


def steady_span(steps: int, num_workers: int) -> int:
    """``n``, the number of arrival intervals the steady rate is measured over
    (:func:`steady_interval`); 0 when an epoch is too short to measure one."""
    lo, hi = steady_interval(steps, num_workers)
    return hi - lo


def project(
    epochs: Sequence[dict[str, Any]], batch_size: int, num_workers: int, full_images: int
) -> Projection:
    """Project a full epoch from measured short epochs.

    ``epochs``: one dict per measured epoch with ``seconds`` (iterator creation to the end of
    the epoch) and ``arrivals`` (seconds from iterator creation to each batch's arrival).
    """
    if not epochs:
        raise ValueError("project() needs at least one measured epoch.")
    steps = len(epochs[0]["arrivals"])
    lo, hi = steady_interval(steps, num_workers)
    n = hi - lo
    span = sum(e["arrivals"][hi] - e["arrivals"][lo] for e in epochs) if n else 0.0
    mean_epoch = sum(e["seconds"] for e in epochs) / len(epochs)
    if n and span > 0:
        rate = batch_size * n * len(epochs) / span
    else:  # too short to separate a steady part: the whole epoch is all we have
        rate = steps * batch_size / mean_epoch if mean_epoch > 0 else 0.0
    start_cost = max(0.0, mean_epoch - steps * batch_size / rate) if rate > 0 else 0.0
    images = full_images if full_images > 0 else steps * batch_size
    epoch_time = images / rate + start_cost if rate > 0 else math.inf
    # images / (images / rate) can round one ulp above rate when the start cost is 0.
    objective = min(rate, images / epoch_time) if rate > 0 else 0.0
    return Projection(rate, start_cost, epoch_time, objective)


# Student's t, 95th percentile (a two-sided 90% interval), by degrees of freedom.
_T90 = {
    1: 6.314,
    2: 2.920,
    3: 2.353,
    4: 2.132,
    5: 2.015,
    6: 1.943,
    7: 1.895,
    8: 1.860,
    9: 1.833,
    10: 1.812,
    12: 1.782,
    15: 1.753,
    20: 1.725,
    30: 1.697,
    60: 1.671,
}


def t90(df: int) -> float:
    """Student's t for a two-sided 90% interval with ``df`` degrees of freedom (the next
    tabulated df at or below; 1.645 beyond 60)."""
    if df < 1:
        return math.inf
    if df > 60:
        return 1.645
    return _T90[max(k for k in _T90 if k <= df)]


def epoch_time_precision(
    epochs: Sequence[dict[str, Any]], batch_size: int, num_workers: int, full_images: int
) -> float | None:
    """How well the measured epochs pin the projected epoch time down: the relative half-width
    of its 90% confidence interval, ``t90(E-1) * sd(T_e) / sqrt(E) / mean(T_e)``, where ``T_e``
    is each measured epoch's own projection (:func:`project` of that epoch alone). Each epoch
    reads other files, starts its workers again and meets the machine's noise anew, so their
    spread holds all three. None with fewer than two epochs (or an epoch that projects no
    rate)."""
    if len(epochs) < 2:
        return None
    times = [project([e], batch_size, num_workers, full_images).epoch_time_s for e in epochs]
    if not all(math.isfinite(t) and t > 0 for t in times):
        return None
    mean = sum(times) / len(times)
    sd = math.sqrt(sum((t - mean) ** 2 for t in times) / (len(times) - 1))
    return t90(len(times) - 1) * sd / math.sqrt(len(times)) / mean


def coefficient_of_variation(values: Sequence[float]) -> float:
    """Sample standard deviation over mean (0 for fewer than two values or a zero mean)."""
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    if mean <= 0:
        return 0.0
    var = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return math.sqrt(var) / mean


def window_cv(rates: Sequence[float], windows_per_epoch: int) -> float:
    """Spread of the window rates: the CV across epochs of the windows at the same position,
    averaged over positions, so that the planned slowdown of each epoch's first window is not
    counted as noise. With a single epoch, the CV of all windows."""
    n_epochs = len(rates) // windows_per_epoch if windows_per_epoch else 0
    if n_epochs < 2:
        return coefficient_of_variation(rates)
    per_position = [
        coefficient_of_variation(rates[p : n_epochs * windows_per_epoch : windows_per_epoch])
        for p in range(windows_per_epoch)
    ]
    return sum(per_position) / len(per_position)
