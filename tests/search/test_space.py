"""The search space: ranges, fixed knobs, conditional parameters, clamping."""

from __future__ import annotations

import optuna
import pytest

from loadersearch import DEFAULT_START_METHOD, LoaderConfig
from loadersearch.search._confirm import trial_config
from loadersearch.search._space import SearchSpace
from loadersearch.search._space_text import SpaceError, parse_assignment


def test_space_range_accepts_low_high_and_a_batch_step() -> None:
    space = SearchSpace().with_range("num_workers", "2:12").with_range("batch_size", "8:32:8")
    assert space.num_workers == (2, 12)
    assert space.batch_choices() == [8, 16, 24, 32]


def test_space_powers_of_two_list_only_powers_inside_the_range() -> None:
    space = SearchSpace().with_range("batch_size", "pow2:6:100")
    assert space.batch_choices() == [8, 16, 32, 64]


def test_a_batch_step_of_zero_is_refused_pointing_at_pow2() -> None:
    # 0 marks the powers of two inside; written by a user it searched them without a word
    with pytest.raises(SpaceError, match="step must be 1 or more but got 0.*pow2:8:64"):
        SearchSpace().with_range("batch_size", "8:64:0")


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


def test_the_start_method_is_fixed_by_default_and_never_suggested() -> None:
    space = SearchSpace(num_workers=(1, 2))
    assert space.start_method == (DEFAULT_START_METHOD,)
    assert space.fixed()["start_method"] == DEFAULT_START_METHOD
    study = optuna.create_study(direction="maximize")
    trial = study.ask()
    config = space.suggest(trial)
    assert config.start_method == DEFAULT_START_METHOD and "start_method" not in trial.params
    fixed = space.with_fixed(*parse_assignment("start_method=spawn"))
    assert fixed.suggest(study.ask()).start_method == "spawn"
    with pytest.raises(SpaceError, match="takes one value.*--space start_method=fork,spawn"):
        space.with_fixed("start_method", "fork,spawn")
    with pytest.raises(SpaceError, match="Unknown start method 'thread'"):
        space.with_fixed("start_method", "thread")


def test_the_start_method_is_searched_only_when_asked_and_only_with_workers() -> None:
    space = SearchSpace(num_workers=(0, 2)).with_range("start_method", "spawn,fork")
    assert space.start_method == ("fork", "spawn") and "start_method" not in space.fixed()
    assert SearchSpace().with_range("start_method", "fork:spawn") == space.with_range(
        "num_workers", "0:4"
    )  # a TOML list arrives as "fork:spawn"
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(1))
    seen = set()
    for _ in range(20):
        trial = study.ask()
        config = space.suggest(trial)
        assert ("start_method" in trial.params) == (config.num_workers > 0)
        seen.add(config.start_method)
        study.tell(trial, 1.0)
    assert seen == {None, "fork", "spawn"}
    assert space.params_of(LoaderConfig(num_workers=1, start_method="spawn"))["start_method"] == (
        "spawn"
    )
    assert space.clamp(LoaderConfig(num_workers=1)).start_method == "fork"


def test_a_space_and_trials_stored_before_the_start_method_existed_still_load() -> None:
    old = SearchSpace().to_dict()
    del old["start_method"]
    assert SearchSpace.from_dict(old) == SearchSpace()
    study = optuna.create_study(direction="maximize")
    study.add_trial(
        optuna.trial.create_trial(
            params={
                "num_workers": 2,
                "batch_size": 16,
                "pin_memory": True,
                "prefetch_factor": 4,
                "persistent_workers": False,
            },  # fmt: skip
            distributions={
                "num_workers": optuna.distributions.IntDistribution(0, 4),
                "batch_size": optuna.distributions.IntDistribution(8, 64, step=8),
                "pin_memory": optuna.distributions.CategoricalDistribution([False, True]),
                "prefetch_factor": optuna.distributions.IntDistribution(1, 8),
                "persistent_workers": optuna.distributions.CategoricalDistribution([False, True]),
            },
            value=10.0,
        )
    )
    (trial,) = study.trials
    config = trial_config(trial, SearchSpace.from_dict(old).fixed())
    assert config == LoaderConfig(num_workers=2, batch_size=16, pin_memory=True, prefetch_factor=4)
    assert config.start_method == DEFAULT_START_METHOD
