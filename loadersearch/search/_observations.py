"""What the study holds about each trial, as the search strategies read it: its configuration,
its state (complete, pruned, infeasible, or pending: running or queued), its value and whether
it is a baseline (:mod:`loadersearch.search._sampler` gathers them for every proposal)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from optuna.trial import TrialState

from loadersearch._loader_config import LoaderConfig
from loadersearch.search._space import SearchSpace, config_from_params

if TYPE_CHECKING:
    from optuna import Study

COMPLETE, PRUNED, INFEASIBLE, PENDING = "complete", "pruned", "infeasible", "pending"


@dataclass(frozen=True)
class Observation:
    """What the study holds about one trial, as the strategies read it."""

    number: int
    config: LoaderConfig
    state: str  # complete | pruned | infeasible | pending (running or queued)
    value: float | None  # the objective (complete); the last window value (pruned); else None
    baseline: bool


def observations(
    study: Study, space: SearchSpace, *, exclude: int | None = None
) -> list[Observation]:
    """Every trial of ``study`` that holds or will hold a measurement, as observations (FAIL
    trials, crashes of the tool, are left out: their configuration may be tried again; so are
    AutoLoader's online results, whose value is another measure: the search measures that
    configuration itself)."""
    fixed = space.fixed()
    out = []
    states = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING, TrialState.WAITING)
    for t in study.get_trials(deepcopy=False, states=states):
        if t.number == exclude or t.user_attrs.get("online"):
            continue  # an AutoLoader result measures a real loop, not this objective
        params = t.params if t.params else t.system_attrs.get("fixed_params") or {}
        if not params and not fixed:
            continue  # a trial that has not suggested anything yet
        try:
            config = config_from_params(params, fixed)
        except (TypeError, ValueError):
            continue
        baseline = bool(t.user_attrs.get("baseline"))
        if t.state == TrialState.COMPLETE:
            feasible = t.user_attrs.get("feasible", True) and not any(
                v > 0 for v in t.constraints.values()
            )
            state = COMPLETE if feasible and t.value is not None else INFEASIBLE
            value = float(t.value) if state == COMPLETE else None
        elif t.state == TrialState.PRUNED:
            state = PRUNED
            steps = t.intermediate_values
            value = float(steps[max(steps)]) if steps else None
        else:
            state, value = PENDING, None
        out.append(Observation(t.number, config, state, value, baseline))
    return out


def measured_values(
    observed: Sequence[Observation], *, pruned: bool = False
) -> dict[LoaderConfig, float]:
    """The measured value of every configuration with a complete, feasible trial (the median
    when it was measured more than once); ``pruned``: a pruned trial's last window too, where
    its configuration has no complete trial (the shape of a curve, not a candidate)."""
    by_config: dict[LoaderConfig, list[float]] = {}
    if pruned:
        complete = measured_values(observed)
        for o in observed:
            if o.state == PRUNED and o.value and o.value > 0 and o.config not in complete:
                by_config.setdefault(o.config, []).append(o.value)
        return {**{c: statistics.median(v) for c, v in by_config.items()}, **complete}
    for o in observed:
        if o.state == COMPLETE and o.value is not None and o.value > 0:
            by_config.setdefault(o.config, []).append(o.value)
    return {c: statistics.median(v) for c, v in by_config.items()}
