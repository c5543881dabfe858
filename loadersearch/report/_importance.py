"""Parameter importance that means something: computed on distinct, finished configurations.

optuna-dashboard's importance chart runs PED-ANOVA over every COMPLETE trial. In a
loadersearch study that counts a configuration once per trial that recorded it (a repeat
copies an earlier measurement), and counts infeasible trials, whose value 0 marks a broken
constraint rather than a throughput. Five copies of one configuration in the top quantile
then make whatever knob they share look decisive. Here each configuration counts once, with
the mean of its own measurements; infeasible, pruned and failed trials are left out (they have
no throughput to explain; the batch-size probe and the infeasible trials' notes say where the
limits are). The evaluator is PED-ANOVA, the dashboard's own, because it is also the one of
Optuna's evaluators that rates conditional knobs (prefetch_factor and persistent_workers exist
only with workers): on the same trials, report and dashboard would agree.

A ranking of noise is worse than none: where the configurations differ by less than their own
measurements' noise, any knob can come out on top. So the importance carries its uncertainty:
a resampling of the distinct configurations (subsamples of 80%, each value drawn within its
measured noise), with a fixed seed so that the report, ``index.html`` and the
dashboard card show the same intervals. It says plainly when every finished configuration is
within the noise of the winner (the loader settings barely matter on this machine) and when no
knob keeps the first rank across the resamples. PED-ANOVA's top share is Optuna's 10% or enough
for 3 configurations, whichever is larger (see :func:`target_quantile`).
"""

from __future__ import annotations

import contextlib
import logging
import math
import random
import statistics
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from loadersearch.report._reading import space_fixed
from loadersearch.report._trials import COMPLETE, INFEASIBLE, PRUNED, trial_kind
from loadersearch.search import Z90, trial_noise

if TYPE_CHECKING:
    import optuna

_logger = logging.getLogger(__name__)

EVALUATOR = "PED-ANOVA"
MIN_TOP = 3  # configurations in PED-ANOVA's top set, at least (see target_quantile)
BOOTSTRAP_ROUNDS = 100
BOOTSTRAP_SEED = 0  # fixed: the report and the dashboard card must show the same intervals
SUBSAMPLE = 0.8  # the share of the configurations in each resample
STANDS_OUT = 0.8  # share of the bootstrap's rounds in which the top knob must rank first
INTERVAL = (0.05, 0.95)  # the importance's interval: the middle 90% of the bootstrap
# A measurement's relative noise when it stored none (no precision, no window CV): the
# repeatability measured on a quiet machine is a few percent (docs/benchmarks/projection.md).
DEFAULT_NOISE = 0.03
# Why a trial is not among the importance's trials (keys of Importance.left_out).
REPEAT = "repeats"
LEFT_OUT_WHY = {
    REPEAT: "an earlier trial of the same configuration already counts",
    INFEASIBLE: "value 0 marks a broken limit, not a throughput",
    PRUNED: "stopped before a full measurement",
    "failed": "no measurement",
}


@dataclass
class Importance:
    values: dict[str, float]  # knob -> importance (sums to 1), largest first
    trials: list[int]  # the trial numbers it was computed on, one per configuration
    left_out: dict[str, list[int]] = field(default_factory=dict)  # why -> trial numbers
    evaluator: str = EVALUATOR
    # knob -> (low, high): the middle 90% of the bootstrap's importances
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    # (worst - best) / best over the finished configurations (a negative share), and whether
    # each of them is within the combined 90% noise of the winner's measurement
    within: float | None = None
    barely_matters: bool = False
    noise: float | None = None  # the median configuration's relative 90% noise
    first_share: dict[str, float] = field(default_factory=dict)  # knob -> rounds ranked first

    def stands_out(self) -> str | None:
        """The top knob, when it ranks first in at least STANDS_OUT of the bootstrap's rounds
        (its interval can still be wide: a few configurations tell a knob's rank before its
        size)."""
        if not self.values or self.barely_matters:
            return None
        top = next(iter(self.values))
        return top if self.first_share.get(top, 0.0) >= STANDS_OUT else None

    def verdict(self) -> str:
        """One sentence a reader can act on: which knob matters, or that none stands out."""
        if not self.values:
            return ""
        if self.barely_matters:
            return (
                "On this machine the loader settings barely matter: every finished "
                f"configuration is within {abs(self.within or 0.0):.0%} of the winner, inside "
                f"the measurements' own noise (median ±{self.noise or 0.0:.0%}); the ranking "
                "below ranks noise."
            )
        top = self.stands_out()
        if top is None:
            return (
                "No knob stands out from the noise: resampling the configurations within "
                "their noise changes which knob ranks first, so the order below is not settled."
            )
        low, high = self.intervals[top]
        return (
            f"{top} matters most: {self.values[top]:.2f} (90% interval {low:.2f}-{high:.2f}); "
            f"it ranked first in {self.first_share[top]:.0%} of the resamples "
            "of the configurations within their noise."
        )

    def interval_text(self, name: str) -> str:
        if name not in self.intervals:
            return ""
        low, high = self.intervals[name]
        return f"{low:.2f}-{high:.2f}"

    def describe(self) -> str:
        """One sentence: which trials, and which were left out and why."""
        if not self.trials:
            text = f"{self.evaluator} on no finished feasible configuration yet"
        else:
            text = (
                f"{self.evaluator} on {len(self.trials)} distinct finished configurations "
                f"(trial{'s' if len(self.trials) > 1 else ''} {_numbers(self.trials)})"
            )
        outs = [
            f"{why} (trial{'s' if len(nums) > 1 else ''} {_numbers(nums)}: {LEFT_OUT_WHY[why]})"
            for why, nums in self.left_out.items()
            if nums
        ]
        if outs:
            text += "; left out: " + "; ".join(outs)
        return text + "."


def _distinct(
    study: optuna.Study,
) -> tuple[list[list[optuna.trial.FrozenTrial]], dict[str, list[int]]]:
    """The finished feasible trials grouped by configuration (first trial first), and the
    trials left out by why."""
    from loadersearch.search import trial_config

    fixed = space_fixed(study)
    left_out: dict[str, list[int]] = {REPEAT: [], INFEASIBLE: [], PRUNED: [], "failed": []}
    groups: dict[object, list[optuna.trial.FrozenTrial]] = {}
    for t in study.get_trials(deepcopy=False):
        kind = trial_kind(t)
        if kind in (INFEASIBLE, PRUNED, "failed"):
            left_out[kind].append(t.number)
        elif kind == COMPLETE and t.value is not None:
            if t.user_attrs.get("repeat_of") is not None:
                left_out[REPEAT].append(t.number)  # its value is a copy of another trial's
            else:
                groups.setdefault(trial_config(t, fixed), []).append(t)
    for group in groups.values():
        left_out[REPEAT].extend(t.number for t in group[1:])
    left_out[REPEAT].sort()
    return list(groups.values()), left_out


def _group_noise(group: list[optuna.trial.FrozenTrial]) -> float:
    """The relative standard deviation of a configuration's mean over its measurements."""
    sds = [trial_noise(t, DEFAULT_NOISE) for t in group]
    return math.sqrt(sum(sd * sd for sd in sds)) / len(sds)


@contextlib.contextmanager
def _quiet_optuna() -> Iterator[None]:
    """Optuna at WARNING for the duration: an in-memory study per bootstrap round would
    otherwise log a line each."""
    import optuna

    level = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        yield
    finally:
        optuna.logging.set_verbosity(level)


def _memory_study(rows: list[tuple[optuna.trial.FrozenTrial, float, list[int]]]) -> optuna.Study:
    import optuna

    memory = optuna.create_study(direction="maximize")
    memory.add_trials(
        [
            optuna.trial.create_trial(
                params=first.params,
                distributions=first.distributions,
                value=value,
                user_attrs={"trials": numbers},
            )
            for first, value, numbers in rows
        ]
    )
    return memory


def importance_study(study: optuna.Study) -> tuple[optuna.Study, list[int], dict[str, list[int]]]:
    """An in-memory study holding one trial per distinct feasible finished configuration (the
    mean of its measurements), the trial numbers behind them and the trials left out."""
    groups, left_out = _distinct(study)
    return _memory_of(groups), sorted(g[0].number for g in groups), left_out


def _memory_of(groups: list[list[optuna.trial.FrozenTrial]]) -> optuna.Study:
    rows = [
        (g[0], statistics.fmean(float(t.value) for t in g), [t.number for t in g]) for g in groups
    ]
    return _memory_study(rows)


def target_quantile(configurations: int) -> float:
    """PED-ANOVA's top share: Optuna's 10%, or enough for 3 configurations. Its default
    assumes hundreds of trials; on 9 configurations the top 10% is one trial, and which knob
    that single trial happens to set unusually decides the ranking."""
    return min(0.5, max(0.1, MIN_TOP / max(1, configurations)))


def _ped_anova(memory: optuna.Study) -> dict[str, float]:
    import optuna

    n = len(memory.get_trials(deepcopy=False))
    evaluator = optuna.importance.PedAnovaImportanceEvaluator(target_quantile=target_quantile(n))

    with warnings.catch_warnings():
        # PED-ANOVA warns about conditional knobs seen in few trials; the report names the
        # trials, which says enough.
        warnings.simplefilter("ignore", UserWarning)
        return dict(optuna.importance.get_param_importances(memory, evaluator=evaluator))


def _bootstrap(
    groups: list[list[optuna.trial.FrozenTrial]], means: list[float], noises: list[float]
) -> tuple[dict[str, tuple[float, float]], dict[str, float]]:
    """Each knob's middle 90% of importances over resampled configurations, each value drawn
    within its noise, and the share of the rounds that ranked it first."""
    with _quiet_optuna():
        return _resample(groups, means, noises)


def _resample(
    groups: list[list[optuna.trial.FrozenTrial]], means: list[float], noises: list[float]
) -> tuple[dict[str, tuple[float, float]], dict[str, float]]:
    rng = random.Random(BOOTSTRAP_SEED)
    draws: dict[str, list[float]] = {}
    firsts: dict[str, int] = {}
    rounds = 0
    for _ in range(BOOTSTRAP_ROUNDS):
        # Subsamples without replacement: a duplicated configuration would fill PED-ANOVA's
        # top set with one value of every knob and make each of them look decisive.
        picks = rng.sample(range(len(groups)), max(2, math.ceil(SUBSAMPLE * len(groups))))
        rows = [
            (groups[i][0], max(0.0, means[i] * (1.0 + rng.gauss(0.0, noises[i]))), [])
            for i in picks
        ]
        try:
            values = _ped_anova(_memory_study(rows))
        except (ValueError, RuntimeError):
            continue
        rounds += 1
        for name in {n for g in groups for n in g[0].params}:
            draws.setdefault(name, []).append(values.get(name, 0.0))
        if values:
            top = max(values, key=values.__getitem__)
            firsts[top] = firsts.get(top, 0) + 1
    if rounds < BOOTSTRAP_ROUNDS // 4:
        return {}, {}
    intervals = {name: _quantiles(sorted(v)) for name, v in draws.items()}
    return intervals, {name: count / rounds for name, count in firsts.items()}


def _quantiles(values: list[float]) -> tuple[float, float]:
    def at(q: float) -> float:
        return values[min(len(values) - 1, max(0, round(q * (len(values) - 1))))]

    return at(INTERVAL[0]), at(INTERVAL[1])


def importances(study: optuna.Study) -> Importance:
    """Parameter importance on the study's distinct finished configurations (empty when too
    few to tell), with its bootstrap intervals and whether the settings matter at all."""
    groups, left_out = _distinct(study)
    result = Importance(
        values={}, trials=sorted(g[0].number for g in groups), left_out=left_out
    )
    if len(groups) < 2:
        return result
    try:
        with _quiet_optuna():
            result.values = _ped_anova(_memory_of(groups))
    except (ValueError, RuntimeError) as e:
        _logger.info("no parameter importance: %s", e)
        return result
    means = [statistics.fmean(float(t.value) for t in g) for g in groups]
    noises = [_group_noise(g) for g in groups]
    best = max(range(len(means)), key=means.__getitem__)
    if means[best] > 0 and len(means) >= 3:
        result.within = min(means) / means[best] - 1.0
        result.noise = Z90 * statistics.median(noises)
        result.barely_matters = all(
            means[best] - m <= Z90 * math.hypot(means[best] * noises[best], m * n)
            for m, n in zip(means, noises, strict=True)
        )
    result.intervals, result.first_share = _bootstrap(groups, means, noises)
    return result


def _numbers(numbers: list[int]) -> str:
    """``0-3, 5, 7-9``: trial numbers, runs collapsed."""
    runs: list[list[int]] = []
    for n in sorted(numbers):
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)
