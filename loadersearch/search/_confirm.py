"""Against the winner's curse: the best of N noisy trials is biased upward, so re-measure the
finalists (the top 3 configurations, the best of another batch size where those 3 share one,
and every measured baseline) interleaved, A B C D A B C D ..., so that slow drifts of the
machine hit every finalist alike, and name the winner by median.

The rounds are a race (:func:`race_survivors`): after each round, a rival that the rounds
left cannot make the winner any more is measured no further, and the rounds stop once only
the leader is left. "Cannot" is exact where no noise model is needed (with 3 rounds, a rival
whose best of 2 is below the leader's worst of 2 loses the median whatever round 3 measures),
and beyond the measured noise before that (see :func:`race_noise`).

The measurements are stored in the study user attribute "confirmation" (see
:func:`confirm_study`); the report reads them from there.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from loadersearch._loader_config import LoaderConfig
from loadersearch.measure import OK, MeasureResult
from loadersearch.search._baselines import baseline_names
from loadersearch.search._objective import Objective
from loadersearch.search._progress import Progress
from loadersearch.search._quiet_wait import QuietWait, quiet_wait_limit
from loadersearch.search._race import (
    MIN_ROUNDS,
    common_drift_of,
    noise_floor,
    race_noise,
    race_survivors,
)
from loadersearch.search._space import config_from_params
from loadersearch.search._trial_values import result_attrs

if TYPE_CHECKING:
    import optuna

CONFIRMATION_ATTR = "confirmation"
# What each confirmation measurement keeps of its result (study user attribute).
_MEASUREMENT_KEYS = (
    "status",
    "reason",
    "objective",
    "steady_rate",
    "start_cost_s",
    "epoch_time_s",
    "dataset_images",
    "wait_fraction",
    "window_cv",
    "wall_s",
    "emulated",
    "outside_share",
    "busy_host",
)
TOP_K = 3
# Where the top 3 share one batch size, the best configuration of another batch size measured
# within this of the best is a finalist too. The search walks the workers at one batch, so
# that batch holds most measurements, and the largest of many noisy measurements sits high in
# its noise: its near-duplicates can fill the top 3 while a better batch measured two or three
# times is left out (fresh-cpu-8-noisy, 9% noise: batch 64 at 91% of the optimum measured 9
# times, best 51.2 img/s; batch 32 at 100% measured twice, best 48.3). Two single
# measurements at 5-9% noise differ by up to ~2 of their difference's standard deviations
# (~15%); at 10% the zoo's gains were smaller (docs/benchmarks/landscape-zoo.md).
OTHER_BATCH_WITHIN = 0.15


def feasible_complete(
    study: optuna.Study, *, include_online: bool = False
) -> list[optuna.trial.FrozenTrial]:
    """COMPLETE trials that ran (not infeasible), best first. A trial AutoLoader wrote back
    (user attribute ``online``) holds the images/s of a real training loop, not the study's
    projected full epoch: it is ranked with the study's own trials only when
    ``include_online`` (AutoLoader's candidates), never for the study's answer."""
    from optuna.trial import TrialState

    trials = [
        t
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if t.user_attrs.get("feasible", True)
        and t.value is not None
        and t.value > 0
        and (include_online or not t.user_attrs.get("online"))
    ]
    return sorted(trials, key=lambda t: t.value, reverse=True)


def trial_config(trial: optuna.trial.FrozenTrial, space_fixed: dict[str, Any]) -> LoaderConfig:
    """The configuration a trial measured: its parameters plus the space's fixed knobs."""
    return config_from_params(trial.params, space_fixed)


def finalists(
    study: optuna.Study, space_fixed: dict[str, Any], k: int = TOP_K
) -> list[dict[str, Any]]:
    """The top ``k`` distinct configurations, the best of another batch size where those
    share one (:data:`OTHER_BATCH_WITHIN`) and every baseline the answer quotes (each
    measured one: complete, or pruned), as dicts with trial number, label, config and
    baseline name. A baseline is re-measured beside the finalists rather than quoted from its
    trial: a pruned trial's window mean, or a trial measured at a busier moment, is not a rate
    to compare the winner's confirmation with."""
    chosen: dict[LoaderConfig, dict[str, Any]] = {}
    ranked = [(t, trial_config(t, space_fixed)) for t in feasible_complete(study)]
    for t, config in ranked:
        if config not in chosen and len(chosen) < k:
            chosen[config] = _candidate(t, config)
    batches = {config.batch_size for config in chosen}
    if len(batches) == 1:
        bar = ranked[0][0].value * (1 - OTHER_BATCH_WITHIN)
        for t, config in ranked:
            if config.batch_size not in batches and t.value >= bar:
                chosen[config] = _candidate(t, config)
                break
    for t in quoted_baselines(study):
        config = trial_config(t, space_fixed)
        if config in chosen:
            names = baseline_names(chosen[config]["baseline"])
            names += [n for n in baseline_names(t.user_attrs["baseline"]) if n not in names]
            chosen[config]["baseline"] = "+".join(names)
        else:
            chosen[config] = _candidate(t, config)
    return list(chosen.values())


def quoted_baselines(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """Each baseline's trial that measured it, best first: its last trial that did not fail
    (a baseline stopped by Ctrl-C or a bad sample is queued again), when that one finished
    feasible or was pruned after some windows. Infeasible and failed baselines have no rate."""
    from optuna.trial import TrialState

    last: dict[str, optuna.trial.FrozenTrial] = {}
    for t in study.get_trials(deepcopy=False):
        name = t.user_attrs.get("baseline")
        if name and (t.state != TrialState.FAIL or name not in last):
            last[name] = t
    quoted = [
        t
        for t in last.values()
        if (
            t.state == TrialState.COMPLETE
            and t.user_attrs.get("feasible", True)
            and t.value is not None
            and t.value > 0
        )
        or (t.state == TrialState.PRUNED and t.intermediate_values)
    ]
    return sorted(quoted, key=lambda t: t.value if t.value is not None else 0.0, reverse=True)


def _candidate(trial: optuna.trial.FrozenTrial, config: LoaderConfig) -> dict[str, Any]:
    from optuna.trial import TrialState

    return {
        "trial": trial.number,
        "label": config.label(),
        "config": config.to_dict(),
        "baseline": trial.user_attrs.get("baseline"),
        "trial_value": trial.value,
        # a pruned baseline's value is its last window's rate, not a measurement of the plan
        "trial_complete": trial.state == TrialState.COMPLETE,
    }


def drift_sentence(drift: float) -> str:
    """What a common drift of the finalists since their trials (trial values over the
    rounds') says, in one sentence."""
    way = "below" if drift > 1 else "above"
    return (
        f"the rounds measured the finalists {abs(1 - 1 / drift):.0%} {way} their trials (the "
        "median over them): the machine is not as it was during the search"
        + (", or the top trials were lucky (they were picked for measuring high)" if drift > 1
           else "")
        + "; the answer compares rates of the same rounds"
    )


# After each round: the rounds done, the values so far, the configurations measured in it ->
# those to measure in the next round (none: the rounds end).
Survivors = Callable[
    [int, dict[LoaderConfig, list[float]], list[LoaderConfig]], list[LoaderConfig]
]


def remeasure_interleaved(
    configs: Sequence[LoaderConfig],
    measure_one: Callable[[LoaderConfig], MeasureResult],
    *,
    rounds: int,
    on_result: Callable[[int, LoaderConfig, MeasureResult], None] | None = None,
    quiet: QuietWait | None = None,
    survivors: Survivors | None = None,
) -> dict[LoaderConfig, list[float]]:
    """Measure every configuration ``rounds`` times, A B C A B C ..., so that a slow drift of
    the machine hits each alike; the value of a failed measurement is 0.

    With ``quiet``, a round in which any measurement was busy (others' CPU use above the busy
    share) is measured again once the machine is quiet, as long as ``quiet`` may still wait;
    the busy round's values are dropped then (``on_result`` saw them, marked busy).

    With ``survivors`` (e.g. :func:`race_survivors`), only the configurations it returns after
    a round are measured in the next one, and none ends the rounds early."""
    values: dict[LoaderConfig, list[float]] = {c: [] for c in configs}
    active = list(configs)
    for round_ in range(rounds):
        if not active:
            break
        while True:
            results = [(config, measure_one(config)) for config in active]
            for config, result in results:
                if on_result:
                    on_result(round_, config, result)
            busy = any(result.busy_host for _, result in results)
            if not busy or quiet is None or not quiet.wait():
                break
        if busy and quiet is not None:
            quiet.busy_rounds += 1
        for config, result in results:
            values[config].append(float(result.objective) if result.status == OK else 0.0)
        if survivors is not None and round_ + 1 < rounds:
            active = survivors(round_ + 1, values, active)
    return values


def confirm_study(
    study: optuna.Study,
    objective: Objective,
    *,
    rounds: int,
    progress: Progress | None = None,
) -> dict[str, Any] | None:
    """Re-measure the finalists ``rounds`` times, interleaved; store and return the
    confirmation (None when there is nothing feasible to confirm)."""
    progress = progress or Progress()
    candidates = finalists(study, objective.space.fixed())
    if not candidates or rounds < 1:
        return None
    progress.confirm_start([c["label"] for c in candidates], rounds)
    by_config = {LoaderConfig.from_dict(c["config"]): c for c in candidates}
    measurements: list[dict[str, Any]] = []

    def record(round_: int, config: LoaderConfig, result: MeasureResult) -> None:
        cand = by_config[config]
        attrs = result_attrs(result)
        measurements.append(
            {
                "trial": cand["trial"],
                "label": cand["label"],
                "round": round_,
                "host": objective.host,
                **{k: attrs[k] for k in _MEASUREMENT_KEYS},
            }
        )
        progress.confirm_step(cand["label"], round_, result)

    quiet = QuietWait(quiet_wait_limit(), progress.notice)
    floor = 2 * noise_floor(getattr(objective, "plan", None))
    race = _Race(by_config, rounds=rounds, floor=floor, quiet=quiet, progress=progress)
    values = remeasure_interleaved(
        list(by_config),
        objective.measure,
        rounds=rounds,
        on_result=record,
        quiet=quiet,
        survivors=race,
    )
    for config, cand in by_config.items():
        cand.update(_spread(values[config]))
        cand.setdefault("out_after", None)
    confirmation = _confirmation(study, candidates, measurements, rounds, race, quiet)
    study.set_user_attr(CONFIRMATION_ATTR, confirmation)
    return confirmation


class _Race:
    """The race's :data:`Survivors`: after each round, the finalists to measure in the next (a
    rival that the rounds left cannot make the winner is out: told to ``progress``, marked
    ``out_after`` in ``by_config``), none once only the leader is left. ``noise``: the relative
    noise it allowed after round 1 (None: a busy round, or none measured yet); ``drift``: the
    trials' values over round 1's, common to the finalists (:func:`common_drift_of`; None:
    fewer than three finalists with both, or none measured yet)."""

    def __init__(
        self,
        by_config: dict[LoaderConfig, dict[str, Any]],
        *,
        rounds: int,
        floor: float,
        quiet: QuietWait,
        progress: Progress,
    ) -> None:
        self.by_config = by_config
        # complete trials' values: a pruned one's is its last window's rate (Optuna keeps
        # it), stopped for being low, no measurement of the plan to set the noise by
        self.trial_values = {
            config: cand["trial_value"] if cand["trial_complete"] else None
            for config, cand in by_config.items()
        }
        self.rounds, self.floor, self.quiet, self.progress = rounds, floor, quiet, progress
        self.noise: float | None = None
        self.drift: float | None = None
        self.drift_said = False

    def __call__(
        self, done: int, values: dict[LoaderConfig, list[float]], active: list[LoaderConfig]
    ) -> list[LoaderConfig]:
        by_config, progress, rounds = self.by_config, self.progress, self.rounds
        # A round kept although the machine was busy says nothing about the noise of a quiet
        # one: from then on the race drops only rivals that no measurement could save.
        noise = (
            None
            if self.quiet.busy_rounds
            else race_noise(values, self.trial_values, floor=self.floor)
        )
        if done == 1:
            self.noise = noise
            self._tell_drift(values)
        kept = race_survivors(values, active, done=done, rounds=rounds, noise=noise)
        for config in active:
            if config not in kept:
                by_config[config]["out_after"] = done
                progress.confirm_out(by_config[config]["label"], rounds - done)
                progress.notice(_out_notice(by_config, config, kept[0], values, done))
        if len(kept) == 1 and done >= MIN_ROUNDS:
            leader = by_config[kept[0]]["label"]
            progress.confirm_out(leader, rounds - done)
            progress.notice(
                f"confirmation: decided after round {done} of {rounds}: no rival is left "
                f"that the rounds to come could make faster than {leader}"
            )
            return []
        return kept

    def _tell_drift(self, values: dict[LoaderConfig, list[float]]) -> None:
        """Keep the finalists' common drift since their trials, and say it where it is
        beyond the race's floor: the machine is not what it was during the search."""
        # A busy round 1 is kept only when the machine never quieted: its rates say that
        # already (the answer is inconclusive), not how the machine changed.
        drift = None if self.quiet.busy_rounds else common_drift_of(values, self.trial_values)
        if drift is None:  # busy, or fewer than three finalists with a trial value and a rate
            return
        self.drift = drift
        self.drift_said = abs(1 - 1 / drift) >= self.floor
        if self.drift_said:
            self.progress.notice(f"confirmation: {drift_sentence(drift)}")


def _confirmation(
    study: optuna.Study,
    candidates: list[dict[str, Any]],
    measurements: list[dict[str, Any]],
    rounds: int,
    race: _Race,
    quiet: QuietWait,
) -> dict[str, Any]:
    """The confirmation stored in the study (:data:`CONFIRMATION_ATTR`), of ``candidates``
    with their values' spread, the race's noise and drift, and how long ``quiet`` waited."""
    noise = race.noise
    winner = max(candidates, key=lambda c: c["median"])
    finished = len(_finished(study))
    done = max(c["n"] for c in candidates)
    return {
        "rounds": rounds,
        "rounds_done": done,
        # the relative noise the race allowed after round 1 (None: none measured yet, or a
        # busy round), and the measurements it did not need of rounds x finalists
        "race_noise": None if noise is None else round(noise, 4),
        # the trials' values over round 1's, the median over the finalists with both (None:
        # fewer than three): above 1, the machine measured slower than during the search
        "trial_drift": None if race.drift is None else round(race.drift, 4),
        # beyond the race's noise floor: the run said it after round 1, the report says it
        "drift_said": race.drift_said,
        "skipped": rounds * len(candidates) - sum(c["n"] for c in candidates),
        "finished_trials": finished,
        "time": time.time(),
        "candidates": candidates,
        "measurements": measurements,
        "winner": winner["trial"],
        "waited_quiet_s": round(quiet.waited_s, 1),
        # rounds kept although the machine was busy: the answer is then the best-supported
        # configuration, not a settled one
        "busy_rounds": quiet.busy_rounds,
        "inconclusive": quiet.busy_rounds > 0,
    }


def _out_notice(
    by_config: dict[LoaderConfig, dict[str, Any]],
    config: LoaderConfig,
    leader: LoaderConfig,
    values: dict[LoaderConfig, list[float]],
    done: int,
) -> str:
    return (
        f"confirmation: {by_config[config]['label']} is out after round {done} (best "
        f"{max(values[config]):.1f} img/s; {by_config[leader]['label']} at least "
        f"{min(values[leader]):.1f}): the rounds left cannot make it the winner"
    )


def _spread(values: list[float]) -> dict[str, Any]:
    median = statistics.median(values)
    return {
        "median": round(median, 2),
        "min": round(min(values), 2),
        "max": round(max(values), 2),
        # Relative spread: (max - min) / median, the honest noise of a handful of repeats.
        "spread": (
            round((max(values) - min(values)) / median, 4)
            if median > 0 and len(values) > 1
            else None
        ),
        "n": len(values),
    }


def _finished(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    from optuna.trial import TrialState

    return study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))


def confirmation_is_current(study: optuna.Study, rounds: int) -> bool:
    """Whether the stored confirmation already covers every finished trial of the study. An
    inconclusive one (measured on a machine that never quieted) is never current: the next
    run confirms again."""
    stored = study.user_attrs.get(CONFIRMATION_ATTR)
    return bool(
        stored
        and not stored.get("inconclusive")
        and stored.get("rounds") == rounds
        and stored.get("finished_trials") == len(_finished(study))
    )
