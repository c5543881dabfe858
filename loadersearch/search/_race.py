"""The confirmation's rounds as a race: after each round, a rival the rounds left cannot make
the winner any more is measured no further (:func:`race_survivors`), exactly where no noise
model is needed and beyond the measured noise (:func:`race_noise`, never below the plans'
precision, :func:`noise_floor`) before that."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from loadersearch._loader_config import LoaderConfig
from loadersearch.measure import DEFAULT_PRECISION

MIN_ROUNDS = 2  # the winner's re-measurements at least: its confirmed rate has a spread


def race_survivors(
    values: dict[LoaderConfig, list[float]],
    active: Sequence[LoaderConfig],
    *,
    done: int,
    rounds: int,
    noise: float | None = None,
) -> list[LoaderConfig]:
    """Those of ``active`` still in the race for the highest median after ``done`` of
    ``rounds`` rounds, the leader (highest median now) first; none when no round is left.
    With only the leader left the race is decided (:func:`confirm_study` then measures the
    leader until it has :data:`MIN_ROUNDS` values, for its spread).

    A rival is out when even its best case, every round left measuring it above its best so
    far by the relative ``noise``, gives a median below the leader's worst case, every round
    left measuring the leader below its worst by ``noise``. Without ``noise`` (None) the best
    case is unbounded and the worst a failed measurement (0): a rival is then out only when no
    measurement at all could make it the winner (with 3 rounds: its best of 2 below the
    leader's worst of 2), and the winner is the one the whole budget of rounds would name. A
    rival whose every measurement failed has no bound either."""
    left = rounds - done
    if left <= 0 or not active:
        return []
    leader = max(active, key=lambda c: statistics.median(values[c]))
    floor = min(values[leader]) * (1 - noise) if noise is not None else 0.0
    worst = statistics.median([*values[leader], *[floor] * left])
    kept = [leader]
    for config in active:
        if config == leader:
            continue
        best = max(values[config])
        # A failed measurement (0) is no rate the noise could bound: without a good one, the
        # rival's next measurement could be anything.
        cap = best * (1 + noise) if noise is not None and best > 0 else math.inf
        if statistics.median([*values[config], *[cap] * left]) >= worst:
            kept.append(config)
    return kept


def race_noise(
    values: dict[LoaderConfig, list[float]],
    trial_values: dict[LoaderConfig, float | None],
    *,
    floor: float,
    common_drift: bool = True,
) -> float | None:
    """The relative noise the race allows each measurement still to come: the largest ratio
    between two measurements of one configuration seen so far, less 1, and at least ``floor``.
    A configuration's measurements are its confirmation values (failed ones, 0, left out) and
    its trial's value (the same plan on the same host at another moment, and biased upward
    for the best trials: it widens the noise). None before any configuration has two
    measurements: the race then has no noise bound.

    The trials ran minutes earlier, and the machine may have changed since for every
    configuration alike (a fresh clone's confirmation measured each of six finalists 4-17%
    below its trial). A change common to all says nothing of the noise between two
    configurations measured in the same rounds: with ``common_drift`` and at least
    :data:`DRIFT_CONFIGS` configurations that have both a trial value and a rate in the rounds,
    the trial values are first divided by the median ratio of trial value to the rounds' median
    (:func:`common_drift_of`); what each configuration differs from that drift still widens
    the noise. ``trial_values`` holds complete trials' values only: a pruned trial's value is
    the rate of its last window, stopped for being low, not a measurement of the plan."""
    drift = (common_drift_of(values, trial_values) if common_drift else None) or 1.0
    ratios = []
    for config, vals in values.items():
        seen = [v for v in vals if v > 0]
        trial_value = trial_values.get(config)
        if trial_value:
            seen.append(float(trial_value) / drift)
        if len(seen) >= 2:
            ratios.append(max(seen) / min(seen) - 1.0)
    if not ratios:
        return None
    return max(floor, *ratios)


DRIFT_CONFIGS = 3  # configurations with a trial value and a rate in the rounds, at the least


def common_drift_of(
    values: dict[LoaderConfig, list[float]], trial_values: dict[LoaderConfig, float | None]
) -> float | None:
    """The median over the configurations of trial value / the median of their rates in the
    rounds so far (failed ones, 0, left out); None with fewer than :data:`DRIFT_CONFIGS` such
    configurations: one or two ratios cannot tell a drift of the machine from the noise of a
    measurement. It holds the top trials' luck too (they were picked for measuring high), so
    on an unchanged machine it is somewhat above 1."""
    ratios = []
    for config, vals in values.items():
        rates = [v for v in vals if v > 0]
        trial_value = trial_values.get(config)
        if trial_value and rates:
            ratios.append(float(trial_value) / statistics.median(rates))
    return statistics.median(ratios) if len(ratios) >= DRIFT_CONFIGS else None


def noise_floor(plan: Any) -> float:
    """The relative noise one measurement is planned to: its plan's ``precision`` (the
    projected epoch time's 90% half-width), or the study default when the plan states none."""
    precision = getattr(plan, "precision", 0.0) or 0.0
    return precision if precision > 0 else DEFAULT_PRECISION
