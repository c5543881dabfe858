"""The tuner's decisions on given window rates: it climbs the worker ladder, stops climbing at a
clearly slower rung, drops only what the paired test calls clearly slower, settles within its
budget, and proposes an abandoned segment again."""

from __future__ import annotations

import pytest

from loadersearch import LoaderConfig
from loadersearch.online import SegmentShape, Tuner

SHAPE = SegmentShape(warmup=3, windows=4, window_steps=2)  # 11 steps a segment


def _w(n: int, pf: int | None = None) -> LoaderConfig:
    return LoaderConfig(num_workers=n, batch_size=4, prefetch_factor=pf)


LADDER = [_w(0), _w(1), _w(2), _w(4), _w(8)]


def _drive(tuner: Tuner, speed: dict[int, float]) -> list[LoaderConfig]:
    """Run the tuner on a machine where workers (and prefetch) set the rate, with a little
    window noise; returns the configurations in the order they were measured."""
    ran = []
    while (config := tuner.next()) is not None:
        rate = speed[config.num_workers] * (1.1 if config.prefetch_factor == 4 else 1.0)
        tuner.spend(SHAPE.steps)
        tuner.record(config, [rate * f for f in (1.0, 1.01, 0.99, 1.0)], 0.1, 1.0)
        ran.append(config)
    return ran


def test_the_ladder_stops_climbing_at_a_clearly_slower_rung_and_the_best_variant_wins() -> None:
    tuner = Tuner(
        LADDER,
        shape=SHAPE,
        budget=1000,
        variants=[
            lambda best: [_w(best.num_workers, 4), _w(best.num_workers, 8)],
            lambda best: [LoaderConfig(num_workers=best.num_workers, batch_size=4,
                                       prefetch_factor=best.prefetch_factor, pin_memory=True)],
        ],
    )  # fmt: skip
    ran = _drive(tuner, {0: 10.0, 1: 20.0, 2: 40.0, 4: 30.0, 8: 50.0})

    assert [c.num_workers for c in ran[:4]] == [0, 1, 2, 4]  # 8 never tried: 4 was slower
    assert _w(2, 4) in ran and tuner.settled == _w(2, 4)
    # the next knob is tried on the best after the first, even though pf 8 lost
    pinned = [c for c in ran if c.pin_memory]
    assert pinned and pinned[0].num_workers == 2 and pinned[0].prefetch_factor == 4
    # pf 8 (no faster than pf 4 here) was tried after pf 4 won, then lost
    assert tuner.candidates[_w(0)].dropped and tuner.candidates[_w(4)].dropped
    assert tuner.spent <= 1000


def test_near_ties_are_raced_not_dropped_and_the_budget_ends_the_race() -> None:
    tuner = Tuner(LADDER[:3], shape=SHAPE, budget=SHAPE.steps * 5, race_rounds=3)
    ran = _drive(tuner, {0: 10.0, 1: 39.0, 2: 40.0})

    assert len(ran) == 5 and tuner.spent <= SHAPE.steps * 5
    assert tuner.candidates[_w(1)].dropped is None  # within 5%: never clearly slower
    assert ran[3:] == [_w(2), _w(1)]  # the race: best first
    assert tuner.settled == _w(2)


def test_a_budget_smaller_than_one_segment_keeps_the_first_configuration() -> None:
    tuner = Tuner(LADDER, shape=SHAPE, budget=SHAPE.steps - 1)
    assert tuner.next() is None and tuner.settled == _w(0)


def test_an_abandoned_segment_is_proposed_again() -> None:
    tuner = Tuner(LADDER, shape=SHAPE, budget=1000)
    first = tuner.next()
    assert tuner.next() == first  # never recorded: the same one again
    tuner.record(first, [1.0, 1.0, 1.0, 1.0], 0.1, 1.0)
    assert tuner.next() == _w(1)


def test_bad_shapes_and_budgets_are_refused_naming_the_argument() -> None:
    with pytest.raises(ValueError, match="windows must be at least 4"):
        SegmentShape(warmup=2, windows=3)
    with pytest.raises(ValueError, match="budget cannot be negative"):
        Tuner(LADDER, shape=SHAPE, budget=-1)
    with pytest.raises(ValueError, match="at least one configuration"):
        Tuner([], shape=SHAPE, budget=10)
