"""The study's sampler: every trial measures something new, the baselines are free, and the
proposals come from the strategy the tabular benchmark chose (``benchmarks/tabular/``).

:class:`CandidateSampler` is what the study gets. For each new trial it takes a whole
configuration from its strategy and checks it against every configuration the study already
holds (measured, pruned, running, or queued like the baselines): a configuration already
there is never a new trial while the space has others. It asks the strategy again (up to
:data:`REDRAWS` times: its next candidate), then draws a random unmeasured one, and records
what happened in the trial's user attributes (``proposed_by``, ``repeat_avoided``). Only when
every configuration has been measured does a repeat get through; the objective then reuses the
earlier measurement (its ``repeat`` path, kept as a safety net). Re-measuring on purpose is the
confirmation's job.

Start-up: the first ``n_startup`` trials that are not baselines are drawn at random from the
unmeasured configurations (for the model-based strategies, which need a spread of points to
fit); the baselines are measured too and every strategy learns from them, but they do not use
up these start-up trials (Optuna's own samplers count every finished trial, baselines included).

Strategies (:data:`SAMPLERS`):

* ``structured`` (default): a search that knows the shape of the problem and takes the host
  from the baselines (:mod:`loadersearch.search._structured`; ``structured-classic``, the
  search before issue 23, is kept for the benchmarks);
* ``tpe``: Optuna's multivariate TPE with grouped conditional parameters;
* ``gp``: Optuna's ``GPSampler`` (its search space is the intersection of the trials'
  parameters, so with 0-worker trials in the study it draws prefetch_factor and
  persistent_workers at random);
* ``random``: uniform over the space.

What the model-based samplers learn from each trial state (Optuna 5.0, read from its source):
TPE (``samplers/_tpe/sampler.py``, ``_split_trials``) uses COMPLETE and PRUNED trials: the
feasible COMPLETE ones ranked by value, then the PRUNED ones ranked by (more windows reported,
then higher last window value), then the infeasible ones (constraint > 0, our over-the-cap
trials); the best ``gamma(n)`` of that order model "good" configurations, all others "bad". A
pruned trial can therefore be "good" only when fewer complete trials than ``gamma(n)`` exist:
in practice TPE learns that pruned regions are bad, which is what the pruner established
(clearly slower than the best). TPE's start-up count includes PRUNED trials. ``GPSampler``
fits its model on COMPLETE trials only: pruned trials teach it nothing beyond not being
proposed again (ensured here). The structured strategy treats a pruned configuration as
measured and slower than the best, never as a candidate to build on.
"""

from __future__ import annotations

import logging
import random
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.trial import FrozenTrial, TrialState

from loadersearch._loader_config import LoaderConfig
from loadersearch.search._observations import Observation, observations
from loadersearch.search._settings import SAMPLERS
from loadersearch.search._space import SearchSpace
from loadersearch.search._structured import StructuredStrategy

if TYPE_CHECKING:
    from optuna import Study

_logger = logging.getLogger(__name__)

DEFAULT_SAMPLER = SAMPLERS[0]
REDRAWS = 3  # the strategy's own next candidates before a random unmeasured one
# The structured search before issue 23 (mid-ladder workers at the largest batch, whatever the
# host): not a --sampler choice, kept for the benchmarks' comparison (docs/benchmarks).
CLASSIC = "structured-classic"
N_STARTUP = {"structured": 0, CLASSIC: 0, "tpe": 5, "gp": 5, "random": 0}  # baselines apart


class Strategy(Protocol):
    """Proposes the next configuration to measure, from what the study holds."""

    name: str

    def propose(
        self, study: Study, trial: FrozenTrial, observed: Sequence[Observation]
    ) -> LoaderConfig: ...


class RandomStrategy:
    """Uniform over the space's configurations."""

    name = "random"

    def __init__(self, space: SearchSpace, seed: int | None) -> None:
        self.configs = space.configs()
        self.rng = random.Random(seed)

    def propose(
        self, study: Study, trial: FrozenTrial, observed: Sequence[Observation]
    ) -> LoaderConfig:
        return self.rng.choice(self.configs)


class _ProposalTrial:
    """Stands in for a trial in :meth:`SearchSpace.suggest`, so that an Optuna sampler's whole
    proposal (relative and independent parameters, conditional ones included) is known before
    the real trial suggests anything."""

    def __init__(self, pick: Any) -> None:
        self._pick = pick

    def suggest_int(
        self, name: str, low: int, high: int, *, step: int = 1, log: bool = False
    ) -> int:
        return self._pick(name, IntDistribution(low, high, log=log, step=step))

    def suggest_categorical(self, name: str, choices: Sequence[Any]) -> Any:
        return self._pick(name, CategoricalDistribution(list(choices)))


class OptunaStrategy:
    """An Optuna sampler's proposal for the whole configuration."""

    def __init__(
        self, name: str, sampler: optuna.samplers.BaseSampler, space: SearchSpace
    ) -> None:
        self.name = name
        self.sampler = sampler
        self.space = space

    def propose(
        self, study: Study, trial: FrozenTrial, observed: Sequence[Observation]
    ) -> LoaderConfig:
        relative_space = self.sampler.infer_relative_search_space(study, trial)
        relative = self.sampler.sample_relative(study, trial, relative_space)

        def pick(name: str, distribution: BaseDistribution) -> Any:
            if name in relative and name in relative_space:
                return relative[name]
            return self.sampler.sample_independent(study, trial, name, distribution)

        return self.space.suggest(_ProposalTrial(pick))


class CandidateSampler(optuna.samplers.BaseSampler):
    """The study's sampler (module docstring): whole configurations from ``strategy``, never
    one the study already holds while others remain, ``n_startup`` random start-up trials
    that the baselines do not use up."""

    def __init__(
        self,
        space: SearchSpace,
        strategy: Strategy,
        *,
        n_startup: int = 0,
        seed: int | None = None,
    ) -> None:
        self.space = space
        self.strategy = strategy
        self.n_startup = n_startup
        self._rng = random.Random(seed)
        self._configs: list[LoaderConfig] | None = None
        self._independent = optuna.samplers.RandomSampler(seed=seed)

    def infer_relative_search_space(
        self, study: Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        return self.space.distributions()

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        if "fixed_params" in trial.system_attrs:  # enqueued (a baseline): its own parameters
            return {}
        config, attrs = self.choose(study, trial)
        for key, value in attrs.items():
            study._storage.set_trial_user_attr(trial._trial_id, key, value)
        return {k: v for k, v in self.space.params_of(config).items() if k in search_space}

    def choose(self, study: Study, trial: FrozenTrial) -> tuple[LoaderConfig, dict[str, Any]]:
        """The configuration for ``trial`` and the user attributes that say how it was chosen."""
        observed = observations(study, self.space, exclude=trial.number)
        held = {o.config for o in observed}
        searched = sum(not o.baseline for o in observed)
        if searched < self.n_startup:
            config = self._unmeasured(held)
            if config is not None:
                return config, {"proposed_by": "start-up (random)"}
        proposal = None
        for _ in range(1 + REDRAWS):
            proposal = self.strategy.propose(study, trial, observed)
            if proposal not in held:
                return proposal, {"proposed_by": self.strategy.name}
        assert proposal is not None
        config = self._unmeasured(held)
        if config is None:  # every configuration measured: the objective reuses the old one
            return proposal, {"proposed_by": self.strategy.name}
        note = (
            f"{self.strategy.name} proposed {proposal.label()}, already in the study, "
            f"{1 + REDRAWS} times; measured a random unmeasured configuration instead"
        )
        _logger.info("trial %d: %s", trial.number, note)
        return config, {"proposed_by": "random (repeat avoided)", "repeat_avoided": note}

    def _unmeasured(self, held: set[LoaderConfig]) -> LoaderConfig | None:
        if self._configs is None:
            self._configs = self.space.configs()
        left = [c for c in self._configs if c not in held]
        return self._rng.choice(left) if left else None

    def sample_independent(
        self,
        study: Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        # Only for a parameter outside the relative proposal (a partly enqueued trial).
        return self._independent.sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        inner = getattr(self.strategy, "sampler", None)
        if inner is not None:
            inner.before_trial(study, trial)

    def after_trial(
        self,
        study: Study,
        trial: FrozenTrial,
        state: TrialState,
        values: Sequence[float] | None,
    ) -> None:
        inner = getattr(self.strategy, "sampler", None)
        if inner is not None:
            inner.after_trial(study, trial, state, values)


def make_sampler(
    name: str,
    space: SearchSpace,
    *,
    seed: int | None = None,
    prefer_pin: bool = False,
    n_startup: int | None = None,
    inflight_images: float | None = None,
) -> CandidateSampler:
    """The study's sampler: strategy ``name`` (one of :data:`SAMPLERS`) over ``space``.
    ``prefer_pin``: start the structured search with pinned memory (a CUDA device is used).
    ``inflight_images``: the images the host's memory holds in flight
    (:func:`~loadersearch.measure._shm.host_inflight_budget`), which bounds the structured
    search's default prefetch; None: unbounded."""
    if name in ("structured", CLASSIC):
        strategy: Strategy = StructuredStrategy(
            space,
            prefer_pin=prefer_pin,
            host_aware=name != CLASSIC,
            inflight_images=inflight_images if name != CLASSIC else None,
        )
    elif name == "tpe":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            tpe = optuna.samplers.TPESampler(
                seed=seed,
                multivariate=True,
                group=True,
                n_startup_trials=0,  # the start-up is ours (baselines apart)
            )
        strategy = OptunaStrategy("tpe", tpe, space)
    elif name == "gp":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            gp = optuna.samplers.GPSampler(
                seed=seed, n_startup_trials=0, warn_independent_sampling=False
            )
        strategy = OptunaStrategy("gp", gp, space)
    elif name == "random":
        strategy = RandomStrategy(space, seed)
    else:
        raise ValueError(f"Unknown sampler {name!r}; choose one of {', '.join(SAMPLERS)}.")
    startup = N_STARTUP[name] if n_startup is None else n_startup
    return CandidateSampler(space, strategy, n_startup=startup, seed=seed)
