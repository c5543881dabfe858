"""The study's sampler: no configuration measured twice while others remain, the baselines
outside the start-up, every strategy through real Optuna studies."""

from __future__ import annotations

import optuna
import pytest

from loadersearch import LoaderConfig
from loadersearch.search._sampler import SAMPLERS, CandidateSampler, make_sampler
from loadersearch.search._space import SearchSpace

optuna.logging.set_verbosity(optuna.logging.WARNING)

# 4 configurations: w0/w1 x batch 8/16 (prefetch, pinning and persistence fixed).
SMALL = SearchSpace(
    num_workers=(0, 1),
    batch_size=(8, 16),
    batch_step=8,
    prefetch_factor=(2, 2),
    pin_memory=(False,),
    persistent_workers=(True,),
)
# The default space on 2 CPUs, conditional knobs included.
FULL = SearchSpace(num_workers=(0, 4), batch_size=(8, 32), batch_step=8)


def throughput(config: LoaderConfig) -> float:
    """A landscape of the usual shape: rises with workers then falls, larger batches better."""
    w = config.num_workers
    rate = min(40.0 + 45.0 * w, 160.0) - 6.0 * max(0, w - 3)
    rate *= 1.0 + 0.002 * config.batch_size
    if config.num_workers and not config.persistent_workers:
        rate *= 0.97
    return rate


def run(study: optuna.Study, space: SearchSpace, n: int) -> list[LoaderConfig]:
    configs = []

    def objective(trial: optuna.Trial) -> float:
        config = space.suggest(trial)
        configs.append(config)
        return throughput(config)

    study.optimize(objective, n_trials=n)
    return configs


def new_study(sampler: optuna.samplers.BaseSampler) -> optuna.Study:
    return optuna.create_study(direction="maximize", sampler=sampler)


@pytest.mark.parametrize("name", SAMPLERS)
def test_no_configuration_is_measured_twice_while_others_remain(name: str) -> None:
    study = new_study(make_sampler(name, SMALL, seed=1, n_startup=1))
    configs = run(study, SMALL, 4)
    assert sorted(configs, key=lambda c: (c.num_workers, c.batch_size)) == sorted(
        SMALL.configs(), key=lambda c: (c.num_workers, c.batch_size)
    )
    # Once all four are measured, a fifth trial can only repeat one: it is allowed through.
    assert run(study, SMALL, 1)[0] in SMALL.configs()


class Always:
    """A strategy that insists on one configuration."""

    name = "always"

    def propose(self, study, trial, observed) -> LoaderConfig:  # noqa: ANN001
        return LoaderConfig(1, 16, False, 2, True)


def test_a_repeat_the_strategy_insists_on_is_replaced_and_recorded() -> None:
    study = new_study(CandidateSampler(SMALL, Always(), seed=0))
    configs = run(study, SMALL, 3)
    assert configs[0] == LoaderConfig(1, 16, False, 2, True)
    assert len(set(configs)) == 3
    first, *replaced = study.trials
    assert first.user_attrs["proposed_by"] == "always"
    for trial in replaced:
        assert trial.user_attrs["proposed_by"] == "random (repeat avoided)"
        assert trial.user_attrs["repeat_avoided"] == (
            "always proposed w1 b16 pf2 persist, already in the study, 4 times; measured a "
            "random unmeasured configuration instead"
        )


def test_an_online_result_does_not_count_as_a_measurement_of_its_configuration() -> None:
    # AutoLoader writes its result back as a COMPLETE trial labelled online; its value is a
    # real loop's images/s, so the search still measures that configuration itself.
    study = new_study(CandidateSampler(SMALL, Always(), seed=0))
    params = {"num_workers": 1, "batch_size": 16}
    study.add_trial(
        optuna.trial.create_trial(
            state=optuna.trial.TrialState.COMPLETE,
            value=1e6,
            params=params,
            distributions={k: v for k, v in SMALL.distributions().items() if k in params},
            user_attrs={"online": True},
        )
    )
    assert run(study, SMALL, 1) == [LoaderConfig(1, 16, False, 2, True)]
    assert study.trials[-1].user_attrs["proposed_by"] == "always"


@pytest.mark.parametrize("name", ["tpe", "gp"])
def test_baselines_do_not_use_up_the_start_up_trials(name: str) -> None:
    study = new_study(make_sampler(name, FULL, seed=0, n_startup=3))
    baselines = [LoaderConfig(0, 16), LoaderConfig(4, 16, True, 2), LoaderConfig(2, 16, False, 4)]
    for i, config in enumerate(baselines):
        study.enqueue_trial(FULL.params_of(config), user_attrs={"baseline": f"b{i}"})
    configs = run(study, FULL, 8)
    assert configs[:3] == baselines  # enqueued trials keep their own parameters
    proposed = [t.user_attrs.get("proposed_by") for t in study.trials]
    assert proposed[:3] == [None, None, None]
    assert proposed[3:6] == ["start-up (random)"] * 3
    assert proposed[6:] == [name, name]
    assert len(set(configs)) == len(configs)


@pytest.mark.slow
@pytest.mark.parametrize("name", SAMPLERS)
def test_every_sampler_searches_the_conditional_space_without_repeats(name: str) -> None:
    study = new_study(make_sampler(name, FULL, seed=2))
    configs = run(study, FULL, 12)
    assert len(set(configs)) == 12
    for trial, config in zip(study.trials, configs, strict=True):
        assert FULL.config_of(trial.params) == config
        assert ("prefetch_factor" in trial.params) == (config.num_workers > 0)


def test_the_space_distributions_are_those_suggest_builds() -> None:
    for space in (FULL, SMALL, SearchSpace(batch_size=(8, 64), batch_step=0)):
        study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
        for _ in range(20):
            trial = study.ask()
            space.suggest(trial)
            expected = space.distributions()
            for name, distribution in trial.distributions.items():
                assert distribution == expected[name], name


def test_configs_lists_each_distinct_configuration_once() -> None:
    configs = FULL.configs()
    assert len(configs) == len(set(configs))
    # 0 workers: batch x pin; 1-4 workers: batch x pin x prefetch 1..8 x persistent.
    assert len(configs) == 4 * 2 + 4 * 4 * 2 * 8 * 2


def test_unknown_sampler_is_refused_listing_the_choices() -> None:
    with pytest.raises(ValueError, match="structured, tpe, gp, random"):
        make_sampler("bayes", FULL)
