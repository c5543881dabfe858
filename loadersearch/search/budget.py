"""The shared-budget optimize loop: ``--trials N`` is the study's total over every machine.

:func:`optimize_to_total` runs trials until the study holds its total, counting every worker's
trials, and never overshoots (Optuna's ``MaxTrialsCallback`` alone overshoots by up to one trial
per extra worker). It uses ``study.optimize`` because heartbeats only work there.
"""

from __future__ import annotations

import logging
import time
import warnings
from typing import Any

import optuna
from optuna.trial import TrialState

from loadersearch.hardware import check_compatible, fingerprint

_logger = logging.getLogger(__name__)


class _BudgetReached(Exception):
    """Another worker claimed the last trial of the budget between our check and our ask."""

    def __init__(self) -> None:
        super().__init__(
            "not measured: other workers took the rest of the study's budget at the same moment"
        )


def _heartbeat_interval(study: optuna.Study) -> int | None:
    get = getattr(study._storage, "get_heartbeat_interval", None)
    return get() if get is not None else None


def optimize_to_total(
    study: optuna.Study,
    objective: Any,
    total: int,
    *,
    states: tuple | None = None,
    catch: tuple[type[Exception], ...] = (),
    callbacks: list | None = None,
    poll_seconds: float | None = None,
    trial_attrs: dict[str, Any] | None = None,
) -> int:
    """Run ``objective`` until the study holds ``total`` trials in ``states`` (default COMPLETE
    and PRUNED), counting every worker's trials: ``total`` is the study's budget, shared by
    all machines, and is not exceeded (``MaxTrialsCallback`` alone overshoots by up to one
    trial per extra worker). Returns the number of trials this process ran.

    While the remaining budget is taken by trials running elsewhere, this waits (polling every
    ``poll_seconds``, default 2) instead of stopping, because one of those workers may have
    died: once its heartbeat is stale its trial is failed and re-queued, and this worker runs
    it.

    The total is recorded in the study (user attribute ``trials``), so a worker started
    without ``--trials`` works towards it. Every trial this process runs gets the user
    attributes ``trial_attrs`` and, when this host's fingerprint differs from the one the
    study stored (user attribute ``hardware``; a machine that joined with
    ``--allow-mixed-hardware``), ``hardware_differences``.
    """
    counted = tuple(states or (TrialState.COMPLETE, TrialState.PRUNED))
    if study.user_attrs.get("trials") != total:
        study.set_user_attr("trials", total)
    attrs = dict(trial_attrs or {})
    stored = study.user_attrs.get("hardware")
    if stored:
        # The refusal happened when the study was opened; here the differences are recorded.
        differences = check_compatible(stored, fingerprint(), allow_mixed=True)
        if differences:
            attrs["hardware_differences"] = differences
    interval = _heartbeat_interval(study)
    # Waiting workers notice the end (or a stale trial) quickly; a count query is cheap.
    poll = poll_seconds or min(float(interval or 2), 2.0)
    ran = 0
    waiting_logged = False

    def ahead_of(number: int) -> int:
        trials = study.get_trials(deepcopy=False)
        return sum(
            t.state in counted or (t.state == TrialState.RUNNING and t.number < number)
            for t in trials
        )

    def guarded(trial: optuna.Trial) -> Any:
        # Close the race between two workers that both saw one trial left and both asked.
        if ahead_of(trial.number) >= total:
            trial.set_user_attr("surplus", "budget reached by other workers; not measured")
            raise _BudgetReached
        for key, value in attrs.items():
            trial.set_user_attr(key, value)
        return objective(trial)

    while True:
        if interval:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                optuna.storages.fail_stale_trials(study)
        trials = study.get_trials(deepcopy=False)
        finished = sum(t.state in counted for t in trials)
        running = sum(t.state == TrialState.RUNNING for t in trials)
        if finished >= total:
            return ran
        if finished + running >= total:
            if not interval:  # without heartbeats a dead trial would be waited on forever
                return ran
            if not waiting_logged:
                _logger.warning(
                    "The rest of the budget (%d of %d trials) is running on other workers; "
                    "waiting in case one of them dies.",
                    total - finished,
                    total,
                )
                waiting_logged = True
            time.sleep(poll)
            continue
        waiting_logged = False
        study.optimize(
            guarded, n_trials=1, catch=(*catch, _BudgetReached), callbacks=callbacks or []
        )
        ran += 1
