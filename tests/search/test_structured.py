"""The structured search: where it starts, how it moves, and that it finds the optimum of
landscapes of the usual shape in few trials (a pure function of the observations)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from loadersearch import LoaderConfig
from loadersearch.search._observations import COMPLETE, INFEASIBLE, PRUNED, Observation
from loadersearch.search._space import SearchSpace
from loadersearch.search._structured import StructuredStrategy, ladder

SPACE = SearchSpace(num_workers=(0, 32), batch_size=(8, 64), batch_step=0)


def HOST(space: SearchSpace, *, prefer_pin: bool = False) -> StructuredStrategy:  # noqa: N802
    """The host-aware search of issue 23 (``--sampler structured-host`` in the benchmarks)."""
    return StructuredStrategy(space, prefer_pin=prefer_pin, host_aware=True)


def peaked(peak: int, *, best_batch: int = 64) -> Callable[[LoaderConfig], float]:
    """Throughput that rises with workers to ``peak`` and falls after it; ``best_batch`` best;
    persistent workers and a deeper prefetch help a little."""

    def f(c: LoaderConfig) -> float:
        w = c.num_workers
        rate = 100.0 * min(w, peak) / peak + 10.0 - 1.5 * max(0, w - peak)
        rate *= 1.0 - 0.03 * abs(SPACE.batch_choices().index(c.batch_size)
                                 - SPACE.batch_choices().index(best_batch))  # fmt: skip
        if w:
            rate *= 1.02 if c.persistent_workers else 1.0
            rate *= 1.0 + 0.005 * min(c.prefetch_factor, 4)
        return rate

    return f


def search(strategy: StructuredStrategy, f: Callable[[LoaderConfig], float], n: int,
           observed: list[Observation] | None = None) -> list[Observation]:  # fmt: skip
    observed = list(observed or [])
    for _ in range(n):
        config = strategy.next_config(observed)
        observed.append(Observation(len(observed), config, COMPLETE, f(config), False))
    return observed


def test_ladder_is_the_ends_and_the_powers_of_two() -> None:
    assert ladder(list(range(0, 33))) == [0, 1, 2, 4, 8, 16, 32]
    assert ladder(list(range(2, 13))) == [2, 4, 8, 12]
    assert ladder([8, 16, 24, 32, 40]) == [8, 16, 32, 40]


def test_the_default_search_starts_mid_ladder_at_the_largest_batch() -> None:
    assert StructuredStrategy(SPACE).next_config([]) == LoaderConfig(4, 64, False, 2, True)
    two_cores = SearchSpace(num_workers=(0, 4), batch_size=(8, 32), batch_step=8)
    assert StructuredStrategy(two_cores, prefer_pin=True).next_config([]) == LoaderConfig(
        2, 32, True, 2, True
    )


def test_the_host_aware_search_starts_at_the_best_baselines_workers_mid_batch() -> None:
    # Without a measured baseline: half the worker range (its bound is 2x the CPUs).
    assert HOST(SPACE).next_config([]) == LoaderConfig(16, 32, False, 2, True)
    two_cores = SearchSpace(num_workers=(0, 4), batch_size=(8, 32), batch_step=8)
    assert HOST(two_cores, prefer_pin=True).next_config([]) == LoaderConfig(2, 16, True, 2, True)
    baselines = [
        Observation(0, LoaderConfig(0, 16), COMPLETE, 80.0, True),
        Observation(1, LoaderConfig(32, 16, True, 2, False), COMPLETE, 285.0, True),
        Observation(2, LoaderConfig(8, 16, True, 4, False), COMPLETE, 385.0, True),
    ]  # the H200 study's: PyTorch's defaults, the article's 2 x cores, Ultralytics' 8
    start = HOST(SPACE, prefer_pin=True).next_config(baselines)
    assert start == LoaderConfig(8, 32, True, 2, True)


def test_a_baseline_that_beats_the_search_lends_it_its_workers_and_batch() -> None:
    strategy = HOST(SPACE)
    observed = [
        Observation(0, LoaderConfig(0, 16), COMPLETE, 10.0, True),
        Observation(1, LoaderConfig(16, 32, False, 2, True), COMPLETE, 100.0, False),
        Observation(2, LoaderConfig(32, 16, True, 2, False), COMPLETE, 200.0, True),
    ]
    # The baseline's workers and batch with the search's own persistence, prefetch, pinning.
    assert strategy.next_config(observed) == LoaderConfig(32, 16, False, 2, True)


def test_the_host_aware_search_moves_the_batch_then_the_workers() -> None:
    seen = [o.config for o in search(HOST(SPACE), peaked(16, best_batch=32), 4)]
    assert [(c.num_workers, c.batch_size) for c in seen] == [(16, 32), (16, 64), (16, 16),
                                                             (32, 32)]  # fmt: skip


def test_the_default_search_walks_the_workers_first_up_the_ladder() -> None:
    strategy = StructuredStrategy(SPACE)
    seen = [o.config.num_workers for o in search(strategy, peaked(16), 4)]
    assert seen == [4, 8, 16, 32]


def test_without_cuda_pinned_memory_is_not_a_host_aware_move() -> None:
    observed = search(HOST(SPACE), peaked(6), 40)
    assert not any(o.config.pin_memory for o in observed[:30])


@pytest.mark.parametrize("peak", [1, 3, 6, 12, 24])
@pytest.mark.parametrize("best_batch", [64, 32])
def test_the_optimum_of_a_peaked_landscape_is_found_in_14_trials(peak: int, best_batch: int
                                                                 ) -> None:  # fmt: skip
    f = peaked(peak, best_batch=best_batch)
    optimum = max(f(c) for c in SPACE.configs())
    found = max(o.value for o in search(StructuredStrategy(SPACE), f, 14))
    assert found >= 0.97 * optimum


@pytest.mark.parametrize("peak", [1, 3, 5, 6, 7, 12, 14, 20, 24, 32])
@pytest.mark.parametrize("best_batch", [64, 32, 8])
def test_the_host_aware_search_finds_a_peak_in_11_trials_after_the_baselines(
    peak: int, best_batch: int
) -> None:
    f = peaked(peak, best_batch=best_batch)
    optimum = max(f(c) for c in SPACE.configs())
    found = max(o.value for o in search(HOST(SPACE), f, 11))  # + 3 baselines
    assert found >= 0.97 * optimum


def test_it_is_a_pure_function_of_the_observations() -> None:
    observed = search(StructuredStrategy(SPACE), peaked(6), 7)
    again = StructuredStrategy(SPACE)
    assert again.next_config(observed) == StructuredStrategy(SPACE).next_config(observed)
    assert again.next_config(observed) not in {o.config for o in observed}


def test_pruned_and_infeasible_trials_are_never_the_incumbent() -> None:
    strategy = StructuredStrategy(SPACE)
    start = strategy.next_config([])
    observed = [
        Observation(0, start, PRUNED, 500.0, False),
        Observation(1, LoaderConfig(8, 64, False, 2, True), INFEASIBLE, None, False),
        Observation(2, LoaderConfig(0, 16), COMPLETE, 50.0, True),  # a baseline
    ]
    # The baseline is the only measured configuration: the moves are around it.
    following = strategy.next_config(observed)
    assert following.batch_size == 16 or following.num_workers in (1, 0)


def test_every_configuration_is_proposed_before_any_repeats() -> None:
    small = SearchSpace(num_workers=(0, 2), batch_size=(8, 16), batch_step=8,
                        prefetch_factor=(1, 2), pin_memory=(False,))  # fmt: skip
    observed = search(StructuredStrategy(small), peaked(2, best_batch=16), len(small.configs()))
    assert len({o.config for o in observed}) == len(small.configs())
