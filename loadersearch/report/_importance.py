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
"""

from __future__ import annotations

import logging
import statistics
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from loadersearch.report._study import space_fixed
from loadersearch.report._summary import COMPLETE, INFEASIBLE, PRUNED, trial_kind

if TYPE_CHECKING:
    import optuna

_logger = logging.getLogger(__name__)

EVALUATOR = "PED-ANOVA"
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


def importance_study(study: optuna.Study) -> tuple[optuna.Study, list[int], dict[str, list[int]]]:
    """An in-memory study holding one trial per distinct feasible finished configuration (the
    mean of its measurements), the trial numbers behind them and the trials left out."""
    import optuna

    from loadersearch.search.confirm import trial_config

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
    memory = optuna.create_study(direction="maximize")
    used = []
    for group in groups.values():
        first = group[0]
        used.append(first.number)
        left_out[REPEAT].extend(t.number for t in group[1:])
        memory.add_trial(
            optuna.trial.create_trial(
                params=first.params,
                distributions=first.distributions,
                value=statistics.fmean(float(t.value) for t in group),
                user_attrs={"trials": [t.number for t in group]},
            )
        )
    left_out[REPEAT].sort()
    return memory, sorted(used), left_out


def importances(study: optuna.Study) -> Importance:
    """Parameter importance on the study's distinct finished configurations (empty when too
    few to tell)."""
    import optuna

    memory, used, left_out = importance_study(study)
    values: dict[str, float] = {}
    if len(used) >= 2:
        try:
            with warnings.catch_warnings():
                # PED-ANOVA warns about conditional knobs seen in few trials; the report
                # names the trials, which says enough.
                warnings.simplefilter("ignore", UserWarning)
                values = optuna.importance.get_param_importances(
                    memory, evaluator=optuna.importance.PedAnovaImportanceEvaluator()
                )
        except (ValueError, RuntimeError) as e:
            _logger.info("no parameter importance: %s", e)
    return Importance(values=dict(values), trials=used, left_out=left_out)


def _numbers(numbers: list[int]) -> str:
    """``0-3, 5, 7-9``: trial numbers, runs collapsed."""
    runs: list[list[int]] = []
    for n in sorted(numbers):
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)
