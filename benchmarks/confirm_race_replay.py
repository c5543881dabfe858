#!/usr/bin/env python
"""The confirmation's race against its whole budget of rounds, replayed on simulated finalists:
how many measurements the race needs, how often it names another winner than the full rounds
would, and what that costs (the true rate of the race's winner below the full budget's).

Each draw: six finalists as the default CPU study has them (three top configurations within a
few percent of each other, two baselines near them, PyTorch's defaults far below), each
measurement its true rate times lognormal noise of ``sigma``; the trial value of a complete
trial is one more such measurement, biased upward (the best of several). Both procedures see
the same measurements (the race the first ones). Run from the repository root:

    .venv/bin/python benchmarks/confirm_race_replay.py [--draws 4000] [--seed 0]
"""

from __future__ import annotations

import argparse
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
CONFIGS = [LoaderConfig(num_workers=w, batch_size=16) for w in range(len(SHAPE))]


def _draw(rng: random.Random, sigma: float) -> tuple[dict, dict, dict]:
    truth = {c: 50.0 * s for c, s in zip(CONFIGS, SHAPE, strict=True)}
    measured = {
        c: [r * math.exp(rng.gauss(0, sigma)) for _ in range(ROUNDS)] for c, r in truth.items()
    }
    # a trial value: the best of two measurements (the top trials were chosen for being high)
    trial = {
        c: r * math.exp(max(rng.gauss(0, sigma), rng.gauss(0, sigma))) for c, r in truth.items()
    }
    return truth, measured, trial


def _replayer(measured: dict):
    seen: dict = {}

    def measure(config: LoaderConfig) -> MeasureResult:
        n = seen[config] = seen.get(config, -1) + 1
        return MeasureResult(config=config, status=OK, objective=measured[config][n])

    return measure


def _raced(measured: dict, trial: dict, rounds: int = ROUNDS) -> dict:
    def survivors(done: int, values: dict, active: list) -> list:
        noise = race_noise(values, trial, floor=2 * PRECISION)
        kept = race_survivors(values, active, done=done, rounds=rounds, noise=noise)
        return [] if len(kept) == 1 and done >= MIN_ROUNDS else kept

    return remeasure_interleaved(CONFIGS, _replayer(measured), rounds=rounds, survivors=survivors)


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
    args = parser.parse_args(argv)
    print(f"{len(CONFIGS)} finalists (true rates {', '.join(f'{s:.2f}' for s in SHAPE)} of the "
          f"best); the race in {args.rounds} rounds against the full {ROUNDS} rounds = "
          f"{ROUNDS * len(CONFIGS)} measurements; {args.draws} draws")  # fmt: skip
    print(f"{'noise':>6} {'measured':>9} {'other winner':>13} {'loss, mean':>11} "
          f"{'loss, worst':>12} {'full: loss, mean':>17}")  # fmt: skip
    rng = random.Random(args.seed)
    for sigma in (0.02, 0.05, 0.10, 0.20):
        counts, differ, losses, full_losses = [], 0, [], []
        for _ in range(args.draws):
            truth, measured, trial = _draw(rng, sigma)
            full = _winner(remeasure_interleaved(CONFIGS, _replayer(measured), rounds=ROUNDS))
            raced_values = _raced(measured, trial, args.rounds)
            raced = _winner(raced_values)
            counts.append(sum(len(v) for v in raced_values.values()))
            differ += raced != full
            losses.append(1 - truth[raced] / truth[full])
            full_losses.append(1 - truth[full] / max(truth.values()))
        print(f"{sigma:>6.0%} {statistics.fmean(counts):>9.1f} {differ / args.draws:>13.2%} "
              f"{statistics.fmean(losses):>11.2%} {max(losses):>12.1%} "
              f"{statistics.fmean(full_losses):>17.2%}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
