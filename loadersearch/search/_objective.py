"""One Optuna trial: sample a configuration, measure it in a child process, report every window
to the pruner, and record the outcome so that the sampler learns from it.

Outcomes (Optuna's samplers skip FAIL trials: a failure recorded as FAIL teaches them nothing,
and they would propose the same region again):

- OK: COMPLETE with the projected full-epoch images/s, constraint ``feasible`` = 0.
- INFEASIBLE (over the VRAM cap, worker killed, timeout, ...): COMPLETE with value 0 and
  constraint ``feasible`` = 1, so TPE ranks the region below every feasible trial; the reason is
  mirrored in the user attributes "status"/"infeasible_reason", which optuna-dashboard shows.
- PRUNED: PRUNED (the child was killed at the window the pruner said so).
- ERROR that is the dataset's fault (bad sample, bad dataset), or a CUDA study whose measuring
  process sees no GPU: the whole run stops with the message, since every other trial would
  fail the same way.
- ERROR of the tool itself (a crash): FAIL; three in a row stop the run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from loadersearch import _hostlock as hostlock
from loadersearch.errors import (
    DatasetError,
    DeviceError,
    LoaderSearchError,
    PipelineError,
    ResourceLimitError,
    StudyError,
)
from loadersearch.measure import (
    BAD_DATASET,
    BAD_PIPELINE,
    BAD_SAMPLE,
    ERROR,
    INFEASIBLE,
    INTERRUPTED,
    INVALID_CONFIG,
    NO_DEVICE,
    OK,
    PRUNED,
    RESOURCE_LIMIT,
    MeasureResult,
    Window,
)
from loadersearch.search._progress import Progress
from loadersearch.search._trial_values import result_attrs, window_start_weight, window_value
from loadersearch.workload import workload_for

if TYPE_CHECKING:
    import optuna

    from loadersearch._loader_config import LoaderConfig
    from loadersearch.measure import MeasurePlan
    from loadersearch.search._space import SearchSpace
    from loadersearch.workload import WorkloadSpec

_logger = logging.getLogger(__name__)

MeasureFn = Callable[..., MeasureResult]
# Called with the running trial and its measurement (one with windows) before the trial ends,
# the last moment it takes artifacts, while this host's measurement lock is still held.
MeasuredHook = Callable[["optuna.Trial", MeasureResult], None]
CONSTRAINT = "feasible"  # trial.set_constraint key: <= 0 feasible
# What the objective returns, as the study's metric name (optuna-dashboard shows it).
METRIC_NAME = "images/s (projected full epoch)"
MAX_CONSECUTIVE_CRASHES = 3
# Re-measurements of busy trials that were busy again, in a row, after which the machine is
# taken to stay busy: later busy trials are marked unreliable without measuring them again.
MAX_FUTILE_REMEASURES = 2


class TrialCrash(RuntimeError):
    """The tool itself crashed in one trial (recorded as FAIL; the study goes on)."""


def default_measure() -> MeasureFn:
    from loadersearch.measure import measure

    return measure


def unusable_input(
    result: MeasureResult, workload: WorkloadSpec, *, resume: bool = True
) -> LoaderSearchError | None:
    """The error that stops a study (``resume``: it resumes from its trials) or a diagnosis
    when ``result`` failed because of the user's data or pipeline (every other configuration
    would fail the same way), else None."""
    if result.status != ERROR or result.reason not in (BAD_SAMPLE, BAD_DATASET, BAD_PIPELINE):
        return None
    every = "trial" if resume else "measurement"
    again = "and run the same command again" + (" to resume" if resume else "")
    if workload.pipeline is not None:
        part = "dataset" if result.reason == BAD_SAMPLE else "pipeline"
        return PipelineError(
            f"your {part} cannot be used ({result.reason}): {result.message.rstrip('. ')}. "
            f"Every {every} would fail the same way; fix it {again}."
        )
    return DatasetError(
        f"the dataset cannot be loaded ({result.reason}): {result.message.rstrip('. ')}. Every "
        f"{every} would fail the same way; fix the dataset, or add --skip-bad-samples, {again}"
        + (" (this configuration is measured again)." if resume else ".")
    )


def record_skipped(study: optuna.Study, decoded: list[str]) -> None:
    """Add the images a measurement skipped when decoding them (``skip_bad_samples``) to the
    study's ``skipped_samples``, which the report and the dashboard note show."""
    from loadersearch.workload import merge_into

    record = merge_into(study.user_attrs.get("skipped_samples"), decoded)
    if record is not None:
        study.set_user_attr("skipped_samples", record)


def measured_before(trial: optuna.Trial) -> optuna.trial.FrozenTrial | None:
    """A COMPLETE trial of the same study measured with exactly ``trial``'s parameters."""
    from optuna.trial import TrialState

    for t in trial.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        if t.number != trial.number and t.params == trial.params and t.value is not None:
            return t
    return None


def record_pruned_against(trial: optuna.Trial) -> None:
    """Record which trial the clearly-slower test compared this one with (the best feasible
    trial now), so that the trial's note can say what it lost against."""
    from loadersearch.search._pruner import ClearlySlowerPruner

    if not isinstance(trial.study.pruner, ClearlySlowerPruner):
        return  # other pruners compare with no single trial
    try:
        best = trial.study.best_trial
    except ValueError:
        return
    trial.set_user_attr("pruned_against", best.number)


class Objective:
    """The objective ``study.optimize`` calls. Holds no state a resume would need: everything
    comes from the space, workload and plan stored in the study."""

    def __init__(
        self,
        space: SearchSpace,
        workload: WorkloadSpec,
        plan: MeasurePlan,
        *,
        measure_fn: MeasureFn | None = None,
        progress: Progress | None = None,
        on_measured: MeasuredHook | None = None,
    ) -> None:
        self.space = space
        self.workload = workload
        self.plan = plan
        self.measure_fn = measure_fn or default_measure()
        self.progress = progress or Progress()
        self.on_measured = on_measured
        from loadersearch._hardware import host_name

        self.host = host_name()
        self._crashes = 0
        self._futile_remeasures = 0

    def __call__(self, trial: optuna.Trial) -> float:
        import optuna

        config = self.space.suggest(trial)
        baseline = trial.user_attrs.get("baseline")
        trial.set_user_attr("host", self.host)
        self.progress.trial_start(trial.number, config, baseline)
        previous = measured_before(trial)
        if previous is not None:
            return self.repeat(trial, previous)

        full = [0]

        def on_ready(result: MeasureResult) -> None:
            full[0] = result.dataset_images

        def on_window(window: Window) -> bool:
            weight = window_start_weight(window, self.plan, config.batch_size, full[0])
            value = window_value(window, weight)
            trial.report(value, window.index)
            self.progress.window(trial.number, window, value)
            if trial.should_prune():
                record_pruned_against(trial)
                return False
            return True

        def after(result: MeasureResult) -> None:
            if self.on_measured is not None and result.windows:
                self.on_measured(trial, result)

        result = self.measure(config, on_window, on_ready, after=after, trial=trial.number)
        if result.skipped_samples:
            record_skipped(trial.study, result.skipped_samples)
        for key, value in result_attrs(result).items():
            trial.set_user_attr(key, value)
        for key, value in busy_attrs(result).items():
            trial.set_user_attr(key, value)

        if result.status == OK:
            self._crashes = 0
            trial.set_constraint(CONSTRAINT, 0.0)
            return float(result.objective)
        if result.status == PRUNED:
            self._crashes = 0
            if result.busy_host:
                self.requeue_busy_pruned(trial, config)
            raise optuna.TrialPruned(f"pruned after {len(result.windows)} windows")
        if result.status == INFEASIBLE or (
            result.status == ERROR and result.reason == INVALID_CONFIG
        ):
            self._crashes = 0
            trial.set_user_attr("status", INFEASIBLE)
            trial.set_user_attr("infeasible_reason", result.reason)
            trial.set_user_attr("feasible", False)
            trial.set_constraint(CONSTRAINT, 1.0)
            return 0.0
        if result.status == INTERRUPTED:
            raise KeyboardInterrupt
        if result.reason == NO_DEVICE:
            raise DeviceError(f"{result.message} Every trial would fail the same way.")
        if result.reason == RESOURCE_LIMIT:  # every configuration would fail alike
            raise ResourceLimitError(f"{result.message.rstrip('. ')}.")
        unusable = unusable_input(result, self.workload)
        if unusable is not None:
            raise unusable
        self._crashes += 1
        if self._crashes >= MAX_CONSECUTIVE_CRASHES:
            raise StudyError(
                f"{self._crashes} trials in a row crashed; the last one: {result.reason}: "
                f"{result.message}. Run with --debug and report the problem."
            )
        raise TrialCrash(f"measurement crashed ({result.reason}): {result.message}")

    def repeat(self, trial: optuna.Trial, previous: optuna.trial.FrozenTrial) -> float:
        """Record ``previous``'s measurement for a trial with the same parameters, without
        measuring again. The study's sampler never proposes a configuration the study holds
        while others remain (:mod:`loadersearch.search._sampler`), so this is a safety net:
        every configuration measured, or two workers that picked the same one at the same
        moment. A repeat measurement would spend a trial's time on what the study already
        knows, and the interleaved confirmation re-measures the finalists anyway.
        Intermediate values are copied too, so the pruner can compare with it."""
        for step, value in previous.intermediate_values.items():
            trial.report(value, step)
        for key, value in previous.user_attrs.items():
            if key not in ("host", "baseline"):
                trial.set_user_attr(key, value)
        trial.set_user_attr("repeat_of", previous.number)
        trial.set_user_attr("wall_s", 0.0)  # nothing was measured: no time spent
        feasible = previous.user_attrs.get("feasible", True)
        trial.set_constraint(CONSTRAINT, 0.0 if feasible else 1.0)
        _logger.info("trial %d repeats trial %d: its measurement reused", trial.number,
                     previous.number)  # fmt: skip
        return float(previous.value)

    def measure(
        self,
        config: LoaderConfig,
        on_window: Callable[[Window], bool] | None = None,
        on_ready: Callable[[MeasureResult], None] | None = None,
        *,
        after: Callable[[MeasureResult], None] | None = None,
        trial: int | None = None,
    ) -> MeasureResult:
        """Measure ``config`` holding this host's measurement lock. ``after`` runs with the
        result before the lock is released, so that its CPU time (drawing a picture)
        disturbs no other process's measurement on this host.

        A measurement flagged as taken on a busy machine (``busy_host``: other processes used
        a significant share of the CPUs, measure.hostload) is measured once more (``trial``
        names it in the notice), and the quieter of the two is kept (:func:`quieter`); its
        windows are not reported again (the pruner saw the first's)."""
        with hostlock.measurement_lock(wait=True):
            result = self.measure_fn(
                workload_for(self.workload, config),
                config,
                self.plan,
                on_window=on_window,
                on_ready=on_ready,
            )
            if trial is not None and result.status == OK and result.busy_host:
                result = self.remeasure_busy(trial, config, result)
            if after is not None:
                after(result)
            return result

    def requeue_busy_pruned(self, trial: optuna.Trial, config: LoaderConfig) -> None:
        """A trial pruned while the machine was busy lost against rates measured at quieter
        moments: that is no verdict on its configuration. Queue it once more (its baseline
        name too), unless it is itself such a second try or the machine stays busy (then the
        second try would be busy as well). The new trial counts against the budget."""
        if trial.user_attrs.get("requeued_from") is not None:
            return
        if self._futile_remeasures >= MAX_FUTILE_REMEASURES:
            return
        attrs: dict[str, Any] = {"requeued_from": trial.number}
        if trial.user_attrs.get("baseline"):
            attrs["baseline"] = trial.user_attrs["baseline"]
        trial.study.enqueue_trial(dict(trial.params), user_attrs=attrs)
        trial.set_user_attr("requeued_busy", True)
        self.progress.notice(
            f"trial {trial.number} ({config.label()}) was pruned while the machine was busy: "
            "that is no verdict on it, so it is queued to be measured again"
        )

    def remeasure_busy(self, trial: int, config: LoaderConfig, first: MeasureResult
                       ) -> MeasureResult:  # fmt: skip
        """Measure a busy trial once more and keep the quieter result; once
        :data:`MAX_FUTILE_REMEASURES` re-measurements in a row were busy too, the machine
        stays busy: keep ``first``, marked unreliable (``remeasured`` None)."""
        share = f"{100 * (first.outside_share or 0):.0f} %"
        if self._futile_remeasures >= MAX_FUTILE_REMEASURES:
            self.progress.notice(
                f"trial {trial} ({config.label()}) was measured on a busy machine (other "
                f"processes used {share} of the CPUs); the machine stays busy, so it is marked "
                "unreliable rather than measured again"
            )
            return first
        self.progress.notice(
            f"trial {trial} ({config.label()}) was measured on a busy machine (other processes "
            f"used {share} of the CPUs): measuring it again"
        )
        again = self.measure_fn(self.workload, config, self.plan)
        kept = quieter(first, again)
        self._futile_remeasures = self._futile_remeasures + 1 if kept.busy_host else 0
        return kept


def quieter(first: MeasureResult, again: MeasureResult) -> MeasureResult:
    """Of a busy measurement and its re-measurement, the one to keep: the re-measurement
    when it is fine and less busy, else the first. The kept one records ``remeasured`` and the
    first's outside share (``busy_first``), so the report can say what happened."""
    keep = first
    if again.status == OK and (again.outside_share or 0.0) < (first.outside_share or 0.0):
        keep = again

    def r(x: float | None) -> float | None:
        return None if x is None else round(float(x), 3)

    dropped = again if keep is first else first
    keep.remeasured = {
        "first_outside_share": r(first.outside_share),
        "first_objective": r(first.objective),
        "again_outside_share": r(again.outside_share),
        "again_objective": r(again.objective) if again.status == OK else None,
        "kept": "again" if keep is again else "first",
        # the measurement not kept: its time is the trial's too (the report's phase "busy")
        "dropped_wall_s": r(dropped.wall_s),
    }
    return keep


def busy_attrs(result: MeasureResult) -> dict[str, Any]:
    """A busy trial's outcome, as user attributes: ``remeasured`` (both measurements' outside
    share and value, which was kept) when it was measured again, and ``unreliable`` when the
    measurement kept was taken on a busy machine."""
    attrs: dict[str, Any] = {}
    if result.remeasured:
        attrs["remeasured"] = result.remeasured
    if result.remeasured or (result.status == OK and result.busy_host):
        attrs["unreliable"] = bool(result.busy_host)
    return attrs
