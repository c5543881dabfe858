"""A pruner for noisy, paired measurement windows: stop a trial only when it is *clearly*
slower than the best trial, window for window.

Optuna's ``WilcoxonPruner`` tests "worse than the best at all"; with loader throughput the
best trial's windows are themselves a lucky draw (machine load drifts between trials), so it
also prunes near-ties. This one runs the same paired, one-sided Wilcoxon signed-rank test on
``value - (1 - margin) * best_value`` per window id: a trial is pruned when it is, with
p < ``p_threshold``, more than ``margin`` slower than the best trial at the same windows.
Pairing by window id compares like with like (epoch starts fall in the same windows); ranks make
one wild window unable to decide. Only for maximised objectives.

The margin widens with the noise of the machine: ``max(margin, noise_factor * cv)``, where
``cv`` is the best trial's ``window_cv`` user attribute (the spread of its windows across
epochs). A best trial measured in a lucky moment is then not a bar every later trial fails:
on this 2-core machine, CPU training (window CV ~9%) with a fixed 5% margin pruned all of the
last 20 of 40 trials against one lucky best (77 img/s, re-measured at 49-69), while the
emulated workload (CV 1-4%) keeps the 5% margin.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import optuna

if TYPE_CHECKING:
    from optuna.trial import FrozenTrial


class ClearlySlowerPruner(optuna.pruners.BasePruner):
    """Prune when a paired Wilcoxon test says the trial is over ``margin`` slower than the
    best trial (p < ``p_threshold``), after at least ``n_startup_steps`` shared windows."""

    def __init__(
        self,
        *,
        p_threshold: float = 0.1,
        margin: float = 0.05,
        n_startup_steps: int = 4,
        noise_factor: float = 1.5,
    ) -> None:
        if not 0.0 < p_threshold < 1.0:
            raise ValueError(f"p_threshold must be between 0 and 1 but got {p_threshold}.")
        if not 0.0 <= margin < 1.0:
            raise ValueError(f"margin must be in [0, 1) but got {margin}.")
        if n_startup_steps < 2:
            raise ValueError(f"n_startup_steps must be at least 2 but got {n_startup_steps}.")
        self._p_threshold = p_threshold
        self._margin = margin
        if noise_factor < 0:
            raise ValueError(f"noise_factor cannot be negative but got {noise_factor}.")
        self._n_startup_steps = n_startup_steps
        self._noise_factor = noise_factor

    def prune(self, study: optuna.Study, trial: FrozenTrial) -> bool:
        if study.direction != optuna.study.StudyDirection.MAXIMIZE:
            raise ValueError("ClearlySlowerPruner is for maximised objectives (images/s).")
        values = trial.intermediate_values
        if len(values) < self._n_startup_steps:
            return False
        try:
            best = study.best_trial  # feasible trials only (set_constraint)
        except ValueError:
            return False
        shared = sorted(set(values) & set(best.intermediate_values))
        if len(shared) < self._n_startup_steps:
            return False
        margin = self.margin_against(best)
        return clearly_slower(
            [values[s] for s in shared],
            [best.intermediate_values[s] for s in shared],
            margin=margin,
            p_threshold=self._p_threshold,
        )

    def margin_against(self, best: FrozenTrial) -> float:
        """The margin used against ``best``: the fixed one, widened by the best trial's noise."""
        return noise_margin(self._margin, best.user_attrs.get("window_cv"), self._noise_factor)


def noise_margin(margin: float, cv: object, noise_factor: float = 1.5) -> float:
    """``max(margin, noise_factor * cv)``, at most 0.5: the margin a comparison against a
    best measured with window spread ``cv`` uses (``margin`` when ``cv`` is unknown)."""
    if not isinstance(cv, (int, float)) or not math.isfinite(cv) or cv <= 0:
        return margin
    return min(0.5, max(margin, noise_factor * float(cv)))


def clearly_slower(
    values: list[float], best: list[float], *, margin: float, p_threshold: float = 0.1
) -> bool:
    """The test behind the pruner, on paired windows (``values[i]`` and ``best[i]`` measured
    at the same position): True when a one-sided Wilcoxon signed-rank test says ``values`` are
    more than ``margin`` below ``best`` with p < ``p_threshold``. The online tuner
    (:mod:`loadersearch.online`) drops its candidates with it."""
    if len(values) != len(best):
        raise ValueError(f"paired windows needed but got {len(values)} and {len(best)}.")
    diffs = [v - (1.0 - margin) * b for v, b in zip(values, best, strict=True)]
    if not diffs or not all(math.isfinite(d) for d in diffs) or not any(diffs):
        return False
    from scipy.stats import wilcoxon

    p = wilcoxon(diffs, alternative="less", zero_method="zsplit").pvalue
    return bool(p < p_threshold)
