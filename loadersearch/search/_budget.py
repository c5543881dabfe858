"""The shared-budget optimize loop: ``--trials N`` is the study's total over every machine.

:func:`optimize_to_total` runs trials until the study holds its total, counting every worker's
trials, and never overshoots (Optuna's ``MaxTrialsCallback`` alone overshoots by up to one trial
per extra worker). It uses ``study.optimize`` because heartbeats only work there.

Nothing measured is lost to an interruption: a trial stopped by Ctrl-C or SIGTERM, or by a bad
sample found while measuring, is failed and queued again with the same parameters (and its
baseline name), as Optuna's ``RetryHeartbeatStaleTrialCallback`` does for a trial whose
heartbeat went stale; a trial left RUNNING by a process of this host that is gone (``kill -9``,
power, a full disk) is reclaimed the same way at once, since this host can see that its
process no longer exists, instead of after the heartbeat's grace period.
"""

from __future__ import annotations

import logging
import os
import time
import warnings
from collections.abc import Callable
from typing import Any

import optuna
from optuna.trial import TrialState

from loadersearch._hardware import check_compatible, fingerprint, host_name
from loadersearch.errors import DatasetError, Interrupted, ResourceLimitError, StorageError

_logger = logging.getLogger(__name__)

PROCESS_ATTR = "process"  # trial system attribute: where its process runs (see _process_key)
MAX_RETRIES = 3  # as many re-runs as the heartbeat's retry callback allows
# A trial records its host and pid within milliseconds of its start; one that has not after
# this long was left by a process that stopped in between (see _orphan).
ORPHAN_AFTER_S = 120.0


def _process_key() -> str:
    """Which pid namespace a pid is valid in: the boot and this process's pid namespace.
    Containers on one machine may share a host name but never this key."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return ""  # cannot tell: dead trials are left to the heartbeat
    return f"{boot}/{namespace}"


def requeue(study: optuna.Study, trial: optuna.trial.FrozenTrial, reason: str) -> int | None:
    """Queue ``trial``'s configuration again (WAITING, same parameters, same baseline name),
    linked to it as ``RetryHeartbeatStaleTrialCallback`` links its retries (system attributes
    ``failed_trial`` and ``retry_history``); returns the new trial's number, or None when the
    configuration was not chosen yet or has been retried ``MAX_RETRIES`` times."""
    from optuna.trial import create_trial

    params = {**trial.system_attrs.get("fixed_params", {}), **trial.params}
    history = [*trial.system_attrs.get("retry_history", []), trial.number]
    if not params or len(history) > MAX_RETRIES:
        return None
    user_attrs: dict[str, Any] = {"retry_of": trial.number, "retry_reason": reason}
    if trial.user_attrs.get("baseline"):
        user_attrs["baseline"] = trial.user_attrs["baseline"]
    system_attrs = {
        "fixed_params": params,  # what enqueue_trial stores: suggest_* returns these
        "failed_trial": trial.system_attrs.get("failed_trial", trial.number),
        "retry_history": history,
    }
    study.add_trial(
        create_trial(state=TrialState.WAITING, user_attrs=user_attrs, system_attrs=system_attrs)
    )
    retry = study.get_trials(deepcopy=False)[-1]
    _logger.info("trial %d (%s) queued again as trial %d", trial.number, reason, retry.number)
    return retry.number


def _dead(trial: optuna.trial.FrozenTrial, here: str, key: str) -> bool:
    """Whether a RUNNING trial's process ran on this host, in this pid space, and is gone."""
    import psutil

    pid = trial.user_attrs.get("pid")
    if not key or trial.user_attrs.get("host") != here or not isinstance(pid, int):
        return False
    if trial.system_attrs.get(PROCESS_ATTR) != key or pid == os.getpid():
        return False
    try:
        started = psutil.Process(pid).create_time()
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:
        return False
    # The pid was reused by a process started after the trial: the trial's process is gone.
    begun = trial.datetime_start.timestamp() if trial.datetime_start else None
    return begun is not None and started > begun + 1.0


def _orphan(trial: optuna.trial.FrozenTrial) -> bool:
    """Whether a RUNNING trial never said who runs it, long after it began: its process
    stopped between Optuna's creating it and its first attribute (a disk that filled at that
    moment, a kill), so neither this check nor the heartbeat (it has none) would ever end it."""
    if "host" in trial.user_attrs or "pid" in trial.user_attrs or not trial.datetime_start:
        return False
    return time.time() - trial.datetime_start.timestamp() > ORPHAN_AFTER_S


def reclaim_dead_trials(study: optuna.Study) -> list[int]:
    """Fail this host's RUNNING trials whose process is gone, and any trial left RUNNING
    without saying where (:func:`_orphan`), and queue them again; returns their numbers. Two
    processes reclaiming at once: only one fails a trial (Optuna refuses to finish a trial
    twice), so it is queued once."""
    here, key = host_name(), _process_key()
    reclaimed = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if _orphan(t):
            reason = "its process stopped before it recorded where it ran"
        elif _dead(t, here, key):
            reason = f"its process {t.user_attrs['pid']} on {here} is gone"
        else:
            continue
        try:
            study._storage.set_trial_user_attr(t._trial_id, "status", "interrupted")
            study._storage.set_trial_user_attr(t._trial_id, "reason", reason)
            if not study._storage.set_trial_state_values(t._trial_id, state=TrialState.FAIL):
                continue
        except optuna.exceptions.UpdateFinishedTrialError:
            continue  # another process reclaimed it first
        _logger.warning("Trial %d was left running by a process that is gone; re-running it.",
                        t.number)  # fmt: skip
        requeue(study, study._storage.get_trial(t._trial_id), reason)
        reclaimed.append(t.number)
    return reclaimed


class _StorageLost(BaseException):
    """Carries a :class:`StorageError` raised inside a trial past Optuna's ``_run_trial``,
    which would otherwise try to write FAIL to the same unwritable storage (waiting out the
    retries again) and then fail with an ``AssertionError``. The trial stays RUNNING and is
    reclaimed by the next run on this host, or by the heartbeat elsewhere."""

    def __init__(self, error: StorageError) -> None:
        super().__init__(str(error))
        self.error = error


def _storage_error_in(e: BaseException) -> StorageError | None:
    seen = 0
    while e is not None and seen < 10:
        if isinstance(e, StorageError):
            return e
        e = e.__context__
        seen += 1
    return None


def _mark_for_rerun(trial: optuna.Trial, reason: str) -> int | None:
    """Mark a stopped trial and queue its configuration again (before Optuna fails it);
    returns the retry's number. Never raises: the interruption itself must get through."""
    try:
        trial.set_user_attr("status", "interrupted")
        trial.set_user_attr("reason", reason)
        return requeue(trial.study, trial.study._storage.get_trial(trial._trial_id), reason)
    except Exception:
        _logger.warning("could not queue trial %d again", trial.number, exc_info=True)
        return None


class _BudgetReached(Exception):
    """Another worker claimed the last trial of the budget between our check and our ask."""

    def __init__(self) -> None:
        super().__init__(
            "not measured: other workers took the rest of the study's budget at the same moment"
        )


def _failed_elsewhere(study: optuna.Study, trial_id: int | None, e: BaseException) -> bool:
    """Whether ``e`` is Optuna refusing to finish this process's trial because another worker
    failed it meanwhile: its heartbeat came later than the grace period (a host so busy that
    the heartbeat thread did not run), so that worker took it for dead and queued it again.
    The measurement is dropped (its retry measures the configuration again) and the run goes
    on, instead of stopping with ``Cannot tell a FAIL trial``."""
    seen = 0
    while e is not None and seen < 10 and "Cannot tell a FAIL trial" not in str(e):
        e = e.__context__
        seen += 1
    if e is None or seen >= 10 or trial_id is None:
        return False
    trial = study._storage.get_trial(trial_id)
    if trial.state != TrialState.FAIL:
        return False
    _logger.warning(
        "Trial %d was failed by another worker while this one measured it (its heartbeat was "
        "late: a busy host?); its configuration is queued again and measured anew.",
        trial.number,
    )
    return True


def _heartbeat_interval(study: optuna.Study) -> int | None:
    get = getattr(study._storage, "get_heartbeat_interval", None)
    return get() if get is not None else None


# Over 80 lines with its docstring: the loop and the closures it hands Optuna (the trial this
# process runs, the budget check before it) share one run's state; what each trial does is in
# _measure_trial, one optimize call in _optimize_one.
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
    settle: Callable[[optuna.Study], object] | None = None,
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

    ``settle`` (see :mod:`loadersearch.search._settle`) is asked before each trial; when it
    answers something, the study is settled and this process stops before the total.
    """
    counted = tuple(states or (TrialState.COMPLETE, TrialState.PRUNED))
    if study.user_attrs.get("trials") != total:
        study.set_user_attr("trials", total)
    attrs = _trial_attrs(study, trial_attrs)
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

    here, process_key = host_name(), _process_key()
    # The trial this process is running (its storage id) and what its objective raised.
    current: dict[str, Any] = {}

    def guarded(trial: optuna.Trial) -> Any:
        current.clear()
        current["id"] = trial._trial_id
        try:
            return measure(trial)
        except optuna.TrialPruned:
            raise
        except BaseException as e:
            current["raised"] = e
            raise

    def measure(trial: optuna.Trial) -> Any:
        # Close the race between two workers that both saw one trial left and both asked.
        if ahead_of(trial.number) >= total:
            trial.set_user_attr("surplus", "budget reached by other workers; not measured")
            raise _BudgetReached
        return _measure_trial(trial, objective, attrs, here, process_key)

    while True:
        swallowed = Interrupted.pending()  # a signal Python swallowed in a GC callback
        if swallowed is not None:
            raise swallowed
        finished, running = _sweep(study, counted, stale=bool(interval))
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
        if settle is not None and settle(study):
            return ran
        _optimize_one(study, guarded, catch, callbacks, current)
        ran += 1


def _trial_attrs(study: optuna.Study, trial_attrs: dict[str, Any] | None) -> dict[str, Any]:
    """The user attributes every trial this process runs gets: ``trial_attrs``, and
    ``hardware_differences`` when this host differs from the study's stored fingerprint."""
    attrs = dict(trial_attrs or {})
    stored = study.user_attrs.get("hardware")
    if stored:
        # The refusal happened when the study was opened; here the differences are recorded.
        differences = check_compatible(stored, fingerprint(), allow_mixed=True)
        if differences:
            attrs["hardware_differences"] = differences
    return attrs


def _measure_trial(
    trial: optuna.Trial, objective: Any, attrs: dict[str, Any], here: str, process_key: str
) -> Any:
    """``objective(trial)``, the trial marked with ``attrs`` and who runs it first; a trial
    stopped by an interruption, the dataset or a limit is marked to be measured again."""
    for key, value in attrs.items():
        trial.set_user_attr(key, value)
    # Who runs it: a later run on this host can tell when this process is gone.
    trial.set_user_attr("host", here)
    trial.set_user_attr("pid", os.getpid())
    trial.storage.set_trial_system_attr(trial._trial_id, PROCESS_ATTR, process_key)
    try:
        return objective(trial)
    except KeyboardInterrupt as e:
        interrupt = e if isinstance(e, Interrupted) else Interrupted()
        if _mark_for_rerun(trial, f"interrupted by {interrupt.name}") is not None:
            interrupt.requeued.append(trial.number)
        raise interrupt from None
    except (DatasetError, ResourceLimitError) as e:
        # The dataset or a limit, not this configuration, failed: measure it again once
        # that is fixed.
        _mark_for_rerun(trial, f"stopped: {e}"[:500])
        raise
    except StorageError as e:
        raise _StorageLost(e) from e


def _optimize_one(
    study: optuna.Study,
    guarded: Callable[[optuna.Trial], Any],
    catch: tuple[type[Exception], ...],
    callbacks: list | None,
    current: dict[str, Any],
) -> None:
    """One trial of ``study.optimize``; the storage's error, not Optuna's, when the trial's
    end could not be written (``current``: the trial's id and what its objective raised)."""
    try:
        study.optimize(
            guarded, n_trials=1, catch=(*catch, _BudgetReached), callbacks=callbacks or []
        )
    except _StorageLost as e:
        raise e.error from None
    except (AssertionError, UnboundLocalError, ValueError) as e:
        if _failed_elsewhere(study, current.get("id"), e):
            raised = current.get("raised")
            if raised is not None and not isinstance(raised, (*catch, _BudgetReached)):
                raise raised from None  # an interruption or a stop still gets through
            return
        # Optuna's _run_trial fails this way when it cannot write the trial's end (a full
        # disk, a lost server); the cause is the storage error in the chain.
        error = _storage_error_in(e)
        if error is None:
            raise
        raise error from None


def _sweep(study: optuna.Study, counted: tuple, *, stale: bool) -> tuple[int, int]:
    """Reclaim the trials of dead processes on this host (and, with heartbeats, ``stale``,
    fail the stale ones anywhere); then ``(finished, running)``: the trials in ``counted``
    states and those running."""
    reclaim_dead_trials(study)
    if stale:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            optuna.storages.fail_stale_trials(study)
    trials = study.get_trials(deepcopy=False)
    finished = sum(t.state in counted for t in trials)
    running = sum(t.state == TrialState.RUNNING for t in trials)
    return finished, running
