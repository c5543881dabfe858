"""The search space: ranges, fixed knobs, conditional parameters, clamping."""

from __future__ import annotations

import optuna
import pytest

from loadersearch.config import LoaderConfig
from loadersearch.search.space import SearchSpace, SpaceError, parse_assignment


def test_space_range_accepts_low_high_and_a_batch_step() -> None:
    space = SearchSpace().with_range("num_workers", "2:12").with_range("batch_size", "8:32:8")
    assert space.num_workers == (2, 12)
    assert space.batch_choices() == [8, 16, 24, 32]


def test_space_powers_of_two_list_only_powers_inside_the_range() -> None:
    space = SearchSpace().with_range("batch_size", "pow2:6:100")
    assert space.batch_choices() == [8, 16, 32, 64]


def test_inverted_range_is_refused_with_the_fix() -> None:
    with pytest.raises(SpaceError, match="inverted.*2:12"):
        SearchSpace().with_range("num_workers", "12:2")


def test_unknown_knob_is_refused_listing_the_knobs() -> None:
    with pytest.raises(SpaceError, match="unknown knob 'workers'.*num_workers"):
        parse_assignment("workers=4")


def test_impossible_values_are_refused() -> None:
    with pytest.raises(SpaceError, match="more than 32"):
        SearchSpace().with_range("num_workers", "0:64")
    with pytest.raises(SpaceError, match="true or false"):
        SearchSpace().with_fixed("pin_memory", "maybe")
    with pytest.raises(SpaceError, match="whole numbers"):
        SearchSpace().with_fixed("batch_size", "big")


def test_fixed_knob_is_not_suggested_but_is_in_the_config() -> None:
    space = SearchSpace().with_fixed("batch_size", "16").with_fixed("pin_memory", "true")
    study = optuna.create_study(direction="maximize")
    trial = study.ask()
    config = space.suggest(trial)
    assert config.batch_size == 16 and config.pin_memory is True
    assert "batch_size" not in trial.params and "pin_memory" not in trial.params


def test_prefetch_and_persistent_are_suggested_only_with_workers() -> None:
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(0))
    seen_with, seen_without = False, False
    space = SearchSpace(num_workers=(0, 2))
    for _ in range(30):
        trial = study.ask()
        config = space.suggest(trial)
        if config.num_workers == 0:
            assert "prefetch_factor" not in trial.params
            assert "persistent_workers" not in trial.params
            seen_without = True
        else:
            assert {"prefetch_factor", "persistent_workers"} <= set(trial.params)
            seen_with = True
        study.tell(trial, 1.0)
    assert seen_with and seen_without


def test_clamp_moves_a_baseline_inside_the_space() -> None:
    space = SearchSpace(num_workers=(0, 4), batch_size=(8, 24), batch_step=8).with_fixed(
        "persistent_workers", True
    )
    config = space.clamp(LoaderConfig(num_workers=16, batch_size=100, prefetch_factor=2))
    assert config == LoaderConfig(
        num_workers=4, batch_size=24, prefetch_factor=2, persistent_workers=True
    )


def test_clamp_gives_a_0_worker_baseline_workers_when_workers_are_fixed() -> None:
    space = SearchSpace(num_workers=(0, 4)).with_fixed("num_workers", 2)
    config = space.clamp(LoaderConfig(num_workers=0, batch_size=16))  # PyTorch's defaults
    assert config.num_workers == 2 and config.prefetch_factor == 2


def test_batch_bound_from_the_probe_narrows_the_batch_range() -> None:
    space = SearchSpace(batch_size=(8, 128)).with_batch_bound(40)
    assert space.batch_choices()[-1] == 40
    with pytest.raises(SpaceError, match="largest batch that fits is 4"):
        space.with_batch_bound(4)


def test_space_survives_a_json_round_trip_unchanged() -> None:
    space = SearchSpace().with_range("batch_size", "pow2:8:64").with_fixed("pin_memory", "no")
    assert SearchSpace.from_dict(space.to_dict()) == space
