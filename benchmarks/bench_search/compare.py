"""The methods compared: exhaustive grid, loadersearch (with and without pruning), random search,
the rules of thumb; and the interleaved re-measurement that judges them all on fresh numbers.

Every method measures through the same function (one fresh child process per measurement), on
the same workload and plan, one after another on the same machine. Each method's timeline (the
wall-clock time at which each of its measurements ended, and the value it saw) feeds the
best-so-far plot; its *chosen* configuration is then re-measured side by side with the others.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import statistics
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from loadersearch import LoaderConfig
from loadersearch.measure import OK, MeasureResult

_logger = logging.getLogger(__name__)

MeasureOne = Callable[[LoaderConfig], MeasureResult]


class HostLock:
    """The host's measurement lock (one measurement per host, as the search takes it), with the
    seconds spent waiting for it added up, so that another process's measurements on a shared
    machine are not billed to the method that waited. Re-entrant: a method run holding it
    measures all its trials under it, and the search's own per-trial lock is then a no-op."""

    def __init__(self) -> None:
        self.wait_s = 0.0

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        from loadersearch import measurement_lock

        t0 = time.perf_counter()
        with measurement_lock():
            self.wait_s += time.perf_counter() - t0
            yield


@dataclass(frozen=True)
class GridSpec:
    """The discretised space the exhaustive grid walks (the ground truth)."""

    num_workers: tuple[int, ...] = (0, 1, 2, 4)
    batch_size: tuple[int, ...] = (8, 16, 32)
    pin_memory: tuple[bool, ...] = (False, True)
    prefetch_factor: tuple[int, ...] = (2, 4)
    persistent_workers: tuple[bool, ...] = (False, True)

    def configs(self) -> list[LoaderConfig]:
        """Every distinct configuration: with 0 workers prefetch/persistent do not apply, so
        those combinations collapse into one."""
        seen: dict[LoaderConfig, None] = {}
        for w, b, pin, pf, pers in itertools.product(
            self.num_workers,
            self.batch_size,
            self.pin_memory,
            self.prefetch_factor,
            self.persistent_workers,
        ):
            config = LoaderConfig(
                num_workers=w,
                batch_size=b,
                pin_memory=pin,
                prefetch_factor=pf if w > 0 else None,
                persistent_workers=pers if w > 0 else False,
            )
            seen.setdefault(config, None)
        return list(seen)

    def describe(self) -> str:
        def fmt(values: Iterable[Any]) -> str:
            return (
                "{" + ",".join(str(v)[0] if isinstance(v, bool) else str(v) for v in values) + "}"
            )

        return (
            f"num_workers {fmt(self.num_workers)} x batch_size {fmt(self.batch_size)} x "
            f"pin_memory {fmt(self.pin_memory)} x prefetch_factor {fmt(self.prefetch_factor)} x "
            f"persistent_workers {fmt(self.persistent_workers)} (prefetch/persistent only with "
            f"workers) = {len(self.configs())} distinct configurations"
        )


@dataclass
class TrialRecord:
    """One measurement a method made while searching."""

    t_s: float  # wall-clock seconds from the method's start to the end of this measurement
    label: str
    config: dict[str, Any]
    status: str  # ok | pruned | infeasible | error
    value: float  # the objective the method saw (0 unless ok)
    wall_s: float = 0.0  # the measurement's own wall time (parent's view)
    overhead_s: float = 0.0  # its fixed cost: process start, imports, workload build

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class MethodRun:
    """One run of one method (one seed)."""

    method: str  # grid | loadersearch | loadersearch-nopruning | random | rule:<name>
    seed: int | None
    wall_s: float = 0.0  # total wall time, everything included (study, probe, confirmation)
    trials: list[TrialRecord] = field(default_factory=list)
    chosen: LoaderConfig | None = None
    chosen_seen: float | None = None  # the value the method believed its choice has
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.method if self.seed is None else f"{self.method} (seed {self.seed})"

    def counts(self) -> dict[str, int]:
        out = {"measurements": len(self.trials)}
        for status in ("ok", "pruned", "infeasible", "error"):
            out[status] = sum(t.status == status for t in self.trials)
        return out

    def best_so_far(self) -> list[tuple[float, float]]:
        """(seconds since start, best value seen so far) after each measurement."""
        best, out = 0.0, []
        for t in sorted(self.trials, key=lambda r: r.t_s):
            best = max(best, t.value)
            out.append((t.t_s, best))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "seed": self.seed,
            "wall_s": self.wall_s,
            "chosen": self.chosen.to_dict() if self.chosen else None,
            "chosen_label": self.chosen.label() if self.chosen else None,
            "chosen_seen": self.chosen_seen,
            "counts": self.counts(),
            "trials": [t.to_dict() for t in self.trials],
            "extra": self.extra,
        }


def record(result: MeasureResult, t_s: float) -> TrialRecord:
    """A :class:`TrialRecord` from a measurement that ended ``t_s`` after its method began."""
    status = result.status if result.status in ("ok", "pruned", "infeasible") else "error"
    return TrialRecord(
        t_s=t_s,
        label=result.config.label(),
        config=result.config.to_dict(),
        status=status,
        value=float(result.objective) if result.status == OK else 0.0,
        wall_s=float(result.wall_s),
        overhead_s=float(result.overhead_s),
    )


def run_grid(
    configs: Sequence[LoaderConfig], measure_one: MeasureOne, lock: HostLock | None = None
) -> MethodRun:
    """Measure every configuration once, in order; choose the best value seen. Time spent
    waiting for ``lock`` (another process measuring) is not counted."""
    run = MethodRun("grid", None)
    waited0 = lock.wait_s if lock else 0.0
    t0 = time.perf_counter()

    def now() -> float:
        return time.perf_counter() - t0 - ((lock.wait_s if lock else 0.0) - waited0)

    for i, config in enumerate(configs):
        result = measure_one(config)
        run.trials.append(record(result, now()))
        _logger.info(
            "grid %d/%d %s: %.1f img/s (%s)",
            i + 1, len(configs), config.label(), run.trials[-1].value, result.status,
        )  # fmt: skip
    run.wall_s = now()
    best = max(run.trials, key=lambda t: t.value)
    run.chosen, run.chosen_seen = LoaderConfig.from_dict(best.config), best.value
    return run


def run_rules(
    rules: Sequence[tuple[str, LoaderConfig]], measure_one: MeasureOne
) -> list[MethodRun]:
    """Each rule of thumb 'searches' by measuring its one configuration (to know its value)."""
    runs = []
    for name, config in rules:
        run = MethodRun(f"rule:{name}", None)
        t0 = time.perf_counter()
        result = measure_one(config)
        run.trials.append(record(result, time.perf_counter() - t0))
        run.wall_s = time.perf_counter() - t0
        run.chosen, run.chosen_seen = config, run.trials[-1].value
        runs.append(run)
    return runs


def trials_timeline(study: Any, t0_wall: float) -> list[TrialRecord]:
    """The finished trials of an Optuna study (as the search's objective records them) as a
    timeline relative to ``t0_wall`` (a ``time.time()``)."""
    from optuna.trial import TrialState

    out = []
    for t in study.get_trials(deepcopy=False):
        if t.datetime_complete is None:
            continue
        attrs = t.user_attrs
        if t.state == TrialState.PRUNED:
            status = "pruned"
        elif t.state == TrialState.COMPLETE and attrs.get("feasible", True) and (t.value or 0) > 0:
            status = "ok"
        elif t.state == TrialState.COMPLETE:
            status = "infeasible"
        else:
            status = "error"
        params = dict(t.params)
        label = attrs.get("config") or ", ".join(f"{k}={v}" for k, v in params.items())
        out.append(
            TrialRecord(
                t_s=t.datetime_complete.timestamp() - t0_wall,
                label=label,
                config=params,
                status=status,
                value=float(t.value) if status == "ok" else 0.0,
                wall_s=float(attrs.get("wall_s") or 0.0),
                overhead_s=float(attrs.get("overhead_s") or 0.0),
            )
        )
    return sorted(out, key=lambda r: r.t_s)


def spread(values: Sequence[float]) -> dict[str, float]:
    """Median, min, max and the relative spread (max - min) / median of repeated values."""
    med = statistics.median(values)
    return {
        "median": med,
        "min": min(values),
        "max": max(values),
        "spread": (max(values) - min(values)) / med if med > 0 else float("nan"),
        "cv": (statistics.stdev(values) / statistics.mean(values))
        if len(values) > 1 and statistics.mean(values) > 0
        else 0.0,
        "n": len(values),
    }


def _log_progress() -> Any:
    """The search's progress hooks, as log lines (the benchmark runs unattended)."""
    from loadersearch.search import Progress

    class LogProgress(Progress):
        def trial_end(self, trial: Any, summary: dict[str, Any]) -> None:
            _logger.info(
                "  trial %d %s: %s %s", trial.number, trial.user_attrs.get("config"),
                trial.state.name, f"{trial.value:.1f}" if trial.value is not None else "",
            )  # fmt: skip

        def confirm_step(self, label: str, round_: int, result: MeasureResult) -> None:
            _logger.info("  confirm round %d %s: %.1f", round_, label, result.objective)

    return LogProgress()


def run_loadersearch(settings: Any, method: str, *, hardware: Any) -> MethodRun:
    """loadersearch as users run it: :func:`loadersearch.search._study.run_study`, the function
    ``loadersearch run`` calls (study creation, batch probe, baselines enqueued first, the
    sampler and pruner of ``settings``, the interleaved confirmation of the finalists)."""
    from loadersearch.search import feasible_complete, run_study, trial_config

    run = MethodRun(method, settings.seed)
    t0_wall, t0 = time.time(), time.perf_counter()
    outcome = run_study(settings, hardware=hardware, progress=_log_progress())
    run.wall_s = time.perf_counter() - t0
    run.trials = trials_timeline(outcome.study, t0_wall)
    fixed = outcome.space.fixed()
    confirmation = outcome.confirmation
    if confirmation:
        winner = next(
            c for c in confirmation["candidates"] if c["trial"] == confirmation["winner"]
        )
        run.chosen = LoaderConfig.from_dict(winner["config"])
        run.chosen_seen = float(winner["median"])
        run.extra["confirmation"] = {
            "rounds": confirmation["rounds"],
            "candidates": [
                {k: c.get(k) for k in ("label", "trial_value", "median", "spread", "baseline")}
                for c in confirmation["candidates"]
            ],
            "measurements": len(confirmation["measurements"]),
        }
    else:
        ranked = feasible_complete(outcome.study)
        if ranked:
            run.chosen = trial_config(ranked[0], fixed)
            run.chosen_seen = float(ranked[0].value)
    last_trial = max((t.t_s for t in run.trials), default=0.0)
    run.extra["trials_s"] = last_trial
    run.extra["confirm_s"] = run.wall_s - last_trial
    run.extra["baselines"] = outcome.study.user_attrs.get("baselines")
    _logger.info(
        "%s seed %s: %.0f s, chose %s", method, settings.seed, run.wall_s,
        run.chosen.label() if run.chosen else None,
    )  # fmt: skip
    return run


def run_random(
    space: Any,
    workload: Any,
    plan: Any,
    *,
    budget: int,
    seed: int,
    storage: str,
    study_name: str,
) -> MethodRun:
    """Random search with the same budget and the same objective (the search's
    :class:`~loadersearch.search._objective.Objective`), no pruning, no baselines, no
    confirmation: it names its best trial, as random search usually does."""
    import optuna

    from loadersearch.search import Objective, TrialCrash, feasible_complete, trial_config
    from loadersearch.storage import open_storage

    run = MethodRun("random", seed)
    t0_wall, t0 = time.time(), time.perf_counter()
    study = optuna.create_study(
        study_name=study_name,
        storage=open_storage(storage),
        sampler=optuna.samplers.RandomSampler(seed=seed),
        pruner=optuna.pruners.NopPruner(),
        direction="maximize",
    )
    study.optimize(Objective(space, workload, plan), n_trials=budget, catch=(TrialCrash,))
    run.wall_s = time.perf_counter() - t0
    run.trials = trials_timeline(study, t0_wall)
    ranked = feasible_complete(study)
    if ranked:
        run.chosen = trial_config(ranked[0], space.fixed())
        run.chosen_seen = float(ranked[0].value)
    _logger.info(
        "random seed %s: %.0f s, chose %s", seed, run.wall_s,
        run.chosen.label() if run.chosen else None,
    )  # fmt: skip
    return run
