#!/usr/bin/env python
"""The confirmation's race against its whole budget of rounds, replayed on simulated finalists:
how many measurements the race needs, how often it names another winner than the full rounds
would, and what that costs (the true rate of the race's winner below the full budget's).

Each draw: six finalists as the default CPU study has them (three top configurations within a
few percent of each other, two baselines near them, PyTorch's defaults far below), each
measurement its true rate times lognormal noise of ``sigma``; the trial value of a top
configuration is one more such measurement, biased upward (the best of two: it was picked for
measuring high), a baseline's one measurement as it came. Both procedures see
the same measurements (the race the first ones). With ``--drift D`` the machine changed
between the trials and the confirmation: every trial value is ``exp(D)`` times what it would be
(a fresh clone's confirmation measured each of six finalists 4-17% below its trial), and with
``--spread S`` each configuration's own change varies around that by lognormal ``S``. The race
runs twice on the same draws: taking the trials' common drift out of the noise bound (the
default, ``race_noise(common_drift=True)``) and without (``raw``). Run from the repository root:

    .venv/bin/python benchmarks/confirm_race_replay.py [--draws 4000] [--seed 0] \
        [--drift 0 0.12 -0.12] [--spread 0 0.05]
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
import statistics
import sys

from loadersearch import LoaderConfig
from loadersearch.measure import OK, MeasureResult
from loadersearch.search import (
    MIN_ROUNDS,
    race_noise,
    race_survivors,
    remeasure_interleaved,
)

ROUNDS = 3
PRECISION = 0.05  # the study default: the race's noise floor is twice it
# true rates relative to the best: three top configurations, two baselines, PyTorch's defaults
SHAPE = (1.00, 0.98, 0.96, 0.97, 0.90, 0.60)
# the fresh-clone quick starts of stops 40-42: PyTorch's defaults, the article's rule and
# Ultralytics' at 1/1.19-1.22, 1/1.29-1.37 and 1/1.30-1.37 of the winner
FRESH_CLONE = (1.00, 0.98, 0.96, 0.83, 0.76, 0.75)
SHAPES = {"default": SHAPE, "fresh-clone": FRESH_CLONE}
TOP = 3  # the top configurations come first in a shape; the baselines after them


def _configs(shape: tuple[float, ...]) -> list[LoaderConfig]:
    return [LoaderConfig(num_workers=w, batch_size=16) for w in range(len(shape))]


def _draw(
    rng: random.Random,
    sigma: float,
    drift: float = 0.0,
    spread: float = 0.0,
    shape: tuple[float, ...] = SHAPE,
) -> tuple[dict, dict, dict]:
    truth = {c: 50.0 * s for c, s in zip(_configs(shape), shape, strict=True)}
    measured = {
        c: [r * math.exp(rng.gauss(0, sigma)) for _ in range(ROUNDS)] for c, r in truth.items()
    }
    # a trial value: for the three top configurations the best of two measurements (they were
    # chosen for being high), for the baselines one as it came (they are measured anyway)
    trial = {
        c: r
        * math.exp(
            (max(rng.gauss(0, sigma), rng.gauss(0, sigma)) if i < TOP else rng.gauss(0, sigma))
            + drift
            + rng.gauss(0, spread)
        )
        for i, (c, r) in enumerate(truth.items())
    }
    return truth, measured, trial


def _replayer(measured: dict):
    seen: dict = {}

    def measure(config: LoaderConfig) -> MeasureResult:
        n = seen[config] = seen.get(config, -1) + 1
        return MeasureResult(config=config, status=OK, objective=measured[config][n])

    return measure


def _raced(
    measured: dict, trial: dict, rounds: int = ROUNDS, *, common_drift: bool = True
) -> dict:
    def survivors(done: int, values: dict, active: list) -> list:
        noise = race_noise(values, trial, floor=2 * PRECISION, common_drift=common_drift)
        kept = race_survivors(values, active, done=done, rounds=rounds, noise=noise)
        return [] if len(kept) == 1 and done >= MIN_ROUNDS else kept

    configs = list(measured)
    return remeasure_interleaved(configs, _replayer(measured), rounds=rounds, survivors=survivors)


def _winner(values: dict) -> LoaderConfig:
    return max(values, key=lambda c: statistics.median(values[c]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--rounds", type=int, default=ROUNDS,
        help=f"the race's budget of rounds (the full budget it is compared with: {ROUNDS})",
    )  # fmt: skip
    parser.add_argument(
        "--drift", type=float, nargs="+", default=[0.0, 0.12, -0.12],
        help="the machine's common change since the trials, log ratio (0.12: trial values "
             "~13%% above the rounds)",
    )  # fmt: skip
    parser.add_argument(
        "--spread", type=float, nargs="+", default=[0.0, 0.05],
        help="each configuration's own change around the common one, lognormal sigma",
    )  # fmt: skip
    parser.add_argument(
        "--shape", choices=sorted(SHAPES), default="default",
        help="the finalists' true rates: the default study's (three top configurations, two "
             "baselines near them, PyTorch's defaults far below) or the fresh-clone quick "
             "starts' (the three baselines at 0.75-0.83 of the winner)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    shape = SHAPES[args.shape]
    configs = _configs(shape)
    print(f"{len(configs)} finalists (true rates {', '.join(f'{s:.2f}' for s in shape)} of the "
          f"best); the race in {args.rounds} rounds against the full {ROUNDS} rounds = "
          f"{ROUNDS * len(configs)} measurements; {args.draws} draws; each row: the race with "
          "the trials' common drift taken out (drift out) and without (raw)")  # fmt: skip
    print(f"{'noise':>6} {'drift':>6} {'spread':>6} {'race':>9} {'measured':>9} "
          f"{'other winner':>13} {'loss, mean':>11} {'loss, worst':>12} "
          f"{'full: loss, mean':>17}")  # fmt: skip
    noises = (0.02, 0.05, 0.10, 0.20)
    for sigma, drift, spread in itertools.product(noises, args.drift, args.spread):
        # the same draws for each procedure: a seed per cell
        draws = random.Random(f"{args.seed}-{sigma}-{drift}-{spread}")
        cells = {"drift out": [], "raw": []}
        for _ in range(args.draws):
            truth, measured, trial = _draw(draws, sigma, drift, spread, shape)
            full = _winner(remeasure_interleaved(configs, _replayer(measured), rounds=ROUNDS))
            for name, cell in cells.items():
                out = name == "drift out"
                raced_values = _raced(measured, trial, args.rounds, common_drift=out)
                raced = _winner(raced_values)
                cell.append(
                    (
                        sum(len(v) for v in raced_values.values()),
                        raced != full,
                        1 - truth[raced] / truth[full],
                        1 - truth[full] / max(truth.values()),
                    )
                )
        for name, cell in cells.items():
            counts, differ, losses, full_losses = zip(*cell, strict=True)
            print(f"{sigma:>6.0%} {drift:>+6.2f} {spread:>6.2f} {name:>9} "
                  f"{statistics.fmean(counts):>9.2f} {sum(differ) / args.draws:>13.2%} "
                  f"{statistics.fmean(losses):>11.2%} {max(losses):>12.1%} "
                  f"{statistics.fmean(full_losses):>17.2%}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
