"""The summary of a study: the winner, its speedup over each baseline, every trial ranked, and
what the tuning cost. :func:`summarize` reads the storage only and is cut into one step per
question it answers.

The winner is the confirmed one (study user attribute "confirmation", the interleaved
re-measurement of the finalists) when present, else the best trial, marked unconfirmed.
Speedups over the baseline in the confirmation use its confirmation median (the same
measurement conditions as the winner's); the other baselines' use their trial values.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from loadersearch._loader_config import LoaderConfig
from loadersearch.report._reading import space_fixed
from loadersearch.report._trials import (
    COMPLETE,
    INFEASIBLE,
    KINDS,
    PRUNED,
    confirm_seconds,
    n_windows,
    phase_seconds,
    pruning_savings,
    trial_kind,
    trial_rows,
)
from loadersearch.search import stored_spec

if TYPE_CHECKING:
    import optuna


@dataclass
class Winner:
    config: LoaderConfig
    trial: int
    rate: float  # images/s: the confirmation median, else the trial value
    confirmed: bool
    low: float | None = None  # confirmation min and max
    high: float | None = None
    spread: float | None = None  # (max - min) / median
    rounds: int = 0  # its re-measurements (the median's count)
    rounds_done: int = 0  # the confirmation's rounds (the race may stop before its budget)
    epoch_time_s: float | None = None  # projected seconds of one full epoch
    trial_value: float | None = None  # the single trial measurement (Optuna's "best" value)
    # confirmation rounds kept although the machine was busy (no quiet moment came in time):
    # the winner is then the best-supported configuration, not a settled answer
    busy_rounds: int = 0
    waited_quiet_s: float = 0.0

    @property
    def inconclusive(self) -> bool:
        return self.busy_rounds > 0


@dataclass
class Finalist:
    """One configuration the confirmation re-measured."""

    trial: int
    label: str
    trial_value: float | None  # its value as a trial: one measurement, biased upward if best
    median: float
    low: float
    high: float
    spread: float | None
    baseline: str | None
    n: int = 0  # its re-measurements
    out_after: int | None = None  # the round after which the race dropped it (it could not win)
    config: dict[str, Any] | None = None  # its LoaderConfig, as stored


@dataclass
class BaselineResult:
    name: str
    rule: str
    label: str
    rate: float | None  # images/s (None when it could not be measured)
    source: str  # "confirmation" | "trial" | "pruned trial (mean of its windows)" | why not
    speedup: float | None = None  # winner rate / baseline rate
    epoch_time_s: float | None = None
    saved_s: float | None = None  # over epochs_planned epochs
    trial: int | None = None  # the baseline's trial number, once enqueued


@dataclass
class CacheAnswer:
    """The winner's image cache (ram or memmap): its one-time cost next to what it saves."""

    mode: str  # ram | memmap; none when the study searched the cache and none won
    build_s: float | None  # memmap: seconds its one build took (once per dataset and size)
    bytes: int | None  # on disk (memmap) or in memory (ram)
    without: str | None = None  # the best configuration without a cache, its label
    without_rate: float | None = None  # ... and its images/s (confirmation median, else trial)
    saved_per_epoch_s: float | None = None  # epoch time without the cache less with it


@dataclass
class Summary:
    study: str
    description: str
    emulated: bool
    epochs_planned: int
    dataset_images: int
    winner: Winner | None
    baselines: list[BaselineResult]
    counts: dict[str, int]
    rows: list[dict[str, Any]]  # every trial, best first
    pruning: dict[str, float]  # measured seconds saved by pruning, and spent measuring
    probe: dict[str, Any] | None
    hardware: dict[str, Any] = field(default_factory=dict)
    cpu_budget: str | None = None  # the creator's CPU budget, in one line (CpuBudget.describe)
    # the creator's memory bound on the search's prefetch queue, in one line (None: none)
    memory_bound: str | None = None
    finalists: list[Finalist] = field(default_factory=list)  # empty until confirmed
    confirm_s: float = 0.0  # seconds the confirmation measured
    # its measurements, and those of its budget (rounds x finalists) its race did not need
    confirm_measured: int = 0
    confirm_skipped: int = 0
    # the trials' values over the confirmation's round 1, the median over its finalists (None:
    # not stored, or fewer than three): above 1, the machine measured slower than in the search
    trial_drift: float | None = None
    drift_said: bool = False  # beyond the race's noise floor: the run said it, so does the report
    confirmed_after: int | None = None  # finished trials the confirmation covered
    finished: int = 0  # finished (complete, infeasible or pruned) trials now
    budget: int | None = None  # the study's total (--trials, user attribute ``trials``)
    gpus: int = 1  # ranks of the measured DDP job; the answer is per rank
    cache: CacheAnswer | None = None  # the winner reads its images from a cache
    # what --skip-bad-samples left out or replaced (study attribute skipped_samples)
    skipped: dict[str, Any] = field(default_factory=dict)
    settled: dict[str, Any] | None = None  # when the study stopped before its cap (settle)
    # seconds by phase over every trial that recorded them (measure.result.PHASES), plus
    # "storage": a trial's time outside its measurement (the study's reads and writes)
    phases: dict[str, float] = field(default_factory=dict)

    @property
    def confirmation_current(self) -> bool:
        """Whether the confirmation covers every finished trial (a worker may have added
        trials since; the next ``loadersearch run`` confirms again)."""
        return self.confirmed_after is not None and self.confirmed_after >= self.finished

    @property
    def tuning_s(self) -> float:
        """What the answer cost: every trial's measuring time plus the confirmation."""
        return self.pruning["spent_s"] + self.confirm_s


def summarize(study: optuna.Study) -> Summary:
    """Everything the end-of-run summary, ``loadersearch report`` and the notes show."""
    from loadersearch.search import feasible_complete

    fixed = space_fixed(study)
    trials = study.get_trials(deepcopy=False)
    attrs = study.user_attrs
    confirmation = attrs.get("confirmation")
    ranked = feasible_complete(study)
    dataset_images = _dataset_images(ranked)
    winner = _winner(confirmation, ranked, fixed, dataset_images)
    finalists = _finalists(confirmation)
    epochs = int(attrs.get("epochs_planned", 300))
    by_baseline = _confirmed_baselines(finalists)
    baselines = [
        _baseline_result(b, trials, by_baseline.get(b["name"]), winner, dataset_images, epochs)
        for b in attrs.get("baselines") or []
    ]
    rows = trial_rows(trials, fixed)
    counts = {kind: 0 for kind in KINDS}
    for row in rows:
        counts[row["state"]] += 1
    return Summary(
        study=study.study_name,
        description=attrs.get("workload_description", ""),
        emulated=bool(attrs.get("emulated")),
        epochs_planned=epochs,
        dataset_images=dataset_images,
        winner=winner,
        baselines=baselines,
        counts=counts,
        rows=rows,
        pruning=pruning_savings(trials, n_windows(attrs)),
        probe=attrs.get("probe"),
        hardware=attrs.get("hardware") or {},
        cpu_budget=(attrs.get("cpu_budget") or {}).get("line"),
        memory_bound=attrs.get("memory_bound"),
        gpus=int(stored_spec(attrs, "workload").get("gpus") or 1),
        finalists=finalists,
        confirm_s=confirm_seconds(confirmation),
        confirm_measured=len(confirmation["measurements"]) if confirmation else 0,
        confirm_skipped=int(confirmation.get("skipped") or 0) if confirmation else 0,
        trial_drift=confirmation.get("trial_drift") if confirmation else None,
        drift_said=bool(confirmation.get("drift_said")) if confirmation else False,
        confirmed_after=confirmation.get("finished_trials") if confirmation else None,
        finished=counts[COMPLETE] + counts[INFEASIBLE] + counts[PRUNED],
        budget=_int_or_none(attrs.get("trials")),
        cache=_cache_answer(attrs, winner, ranked, fixed, dataset_images),
        skipped=attrs.get("skipped_samples") or {},
        settled=attrs.get("settled") or None,
        phases=phase_seconds(trials),
    )


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _dataset_images(ranked: list[optuna.trial.FrozenTrial]) -> int:
    """Images in one full epoch of the user's dataset, as the measurements counted them."""
    for t in ranked:
        if t.user_attrs.get("dataset_images"):
            return int(t.user_attrs["dataset_images"])
    return 0


def _winner(
    confirmation: dict[str, Any] | None,
    ranked: list[optuna.trial.FrozenTrial],
    fixed: dict[str, Any],
    dataset_images: int,
) -> Winner | None:
    """The confirmed winner (median of the re-measurements), else the best trial."""
    from loadersearch.search import trial_config

    if confirmation:
        best = next(c for c in confirmation["candidates"] if c["trial"] == confirmation["winner"])
        winner = Winner(
            config=LoaderConfig.from_dict(best["config"]),
            trial=best["trial"],
            rate=best["median"],
            confirmed=True,
            low=best["min"],
            high=best["max"],
            spread=best["spread"],
            rounds=int(best.get("n") or confirmation["rounds"]),
            rounds_done=int(confirmation.get("rounds_done") or confirmation["rounds"]),
            trial_value=best.get("trial_value"),
            busy_rounds=int(confirmation.get("busy_rounds") or 0),
            waited_quiet_s=float(confirmation.get("waited_quiet_s") or 0.0),
        )
    elif ranked:
        t = ranked[0]
        winner = Winner(
            config=trial_config(t, fixed),
            trial=t.number,
            rate=float(t.value),
            confirmed=False,
            trial_value=float(t.value),
        )
    else:
        return None
    if dataset_images and winner.rate > 0:
        winner.epoch_time_s = dataset_images / winner.rate
    return winner


def winner_cache(attrs: dict[str, Any], config: LoaderConfig) -> str:
    """The cache a configuration was measured with: its own when the study searched the
    cache, else the study's workload's."""
    if config.cache is not None:
        return config.cache
    return stored_spec(attrs, "workload").get("cache") or "none"


def _cache_answer(
    attrs: dict[str, Any],
    winner: Winner | None,
    ranked: list[optuna.trial.FrozenTrial],
    fixed: dict[str, Any],
    dataset_images: int,
) -> CacheAnswer | None:
    """The winner's cache, its cost (study attribute ``caches``) and, when the study measured
    configurations without a cache (``--search-cache``), the time it saves per epoch over the
    best of them: the best finalist without a cache (its confirmation median, measured with
    the winner's), else the best such trial."""
    from loadersearch.search import trial_config

    if winner is None:
        return None
    mode = winner_cache(attrs, winner.config)
    searched = stored_spec(attrs, "space").get("cache") or []
    if mode == "none":
        # a study that searched the cache says that its winner reads the files as they are
        return CacheAnswer(mode="none", build_s=None, bytes=None) if searched else None
    record = (attrs.get("caches") or {}).get(mode) or {}
    answer = CacheAnswer(mode=mode, build_s=record.get("build_s"), bytes=record.get("bytes"))
    # Without a cache: the best finalist (re-measured with the winner), else the best trial.
    confirmed = [
        (c["median"], LoaderConfig.from_dict(c["config"]))
        for c in (attrs.get("confirmation") or {}).get("candidates", [])
        if c.get("median") and c.get("config", {}).get("cache") == "none"
    ]
    if confirmed:
        rate, config = max(confirmed, key=lambda pair: pair[0])
    else:
        uncached = [t for t in ranked if trial_config(t, fixed).cache == "none"]
        if not uncached:
            return answer
        rate, config = float(uncached[0].value), trial_config(uncached[0], fixed)
    answer.without, answer.without_rate = config.label(), rate
    if dataset_images and rate > 0 and winner.rate > 0:
        answer.saved_per_epoch_s = dataset_images / rate - dataset_images / winner.rate
    return answer


def _finalists(confirmation: dict[str, Any] | None) -> list[Finalist]:
    if not confirmation:
        return []
    finalists = [
        Finalist(
            trial=c["trial"],
            label=c["label"],
            trial_value=c.get("trial_value"),
            median=c["median"],
            low=c["min"],
            high=c["max"],
            spread=c.get("spread"),
            baseline=c.get("baseline"),
            n=int(c.get("n") or confirmation["rounds"]),
            out_after=c.get("out_after"),
            config=c.get("config"),
        )
        for c in confirmation["candidates"]
    ]
    return sorted(finalists, key=lambda f: f.median, reverse=True)


def _confirmed_baselines(finalists: list[Finalist]) -> dict[str, Finalist]:
    """Baseline name -> its confirmation re-measurement (merged baselines count for each)."""
    from loadersearch.search import baseline_names

    return {name: f for f in finalists for name in baseline_names(f.baseline)}


def _baseline_result(
    b: dict[str, Any],
    trials: list[optuna.trial.FrozenTrial],
    confirmed: Finalist | None,
    winner: Winner | None,
    dataset_images: int,
    epochs: int,
) -> BaselineResult:
    """A baseline's rate (its confirmation median, else its trial), speedup and time saved."""
    from optuna.trial import TrialState

    label = LoaderConfig.from_dict(b["config"]).label()
    named = [t for t in trials if t.user_attrs.get("baseline") == b["name"]]
    # A baseline stopped by Ctrl-C or a bad sample is queued again: the re-run is its result.
    trial = next((t for t in reversed(named) if t.state != TrialState.FAIL), None)
    trial = trial or (named[-1] if named else None)
    rate: float | None = None
    if confirmed:
        rate, source = confirmed.median, "confirmation"
    elif trial is None or trial.state in (TrialState.RUNNING, TrialState.WAITING):
        source = "not measured yet"
    elif trial_kind(trial) == COMPLETE:
        rate, source = float(trial.value), "trial"
    elif trial.state == TrialState.PRUNED and trial.intermediate_values:
        rate = statistics.fmean(trial.intermediate_values.values())
        source = "pruned trial (mean of its windows)"
    elif trial.state == TrialState.COMPLETE:
        source = f"infeasible ({trial.user_attrs.get('infeasible_reason')})"
    else:
        source = "failed"
    result = BaselineResult(
        name=b["name"],
        rule=b["rule"],
        label=label,
        rate=rate,
        source=source,
        trial=trial.number if trial is not None else None,
    )
    if rate and winner and winner.rate:
        result.speedup = winner.rate / rate
        if dataset_images:
            result.epoch_time_s = dataset_images / rate
            if winner.epoch_time_s is not None:
                result.saved_s = (result.epoch_time_s - winner.epoch_time_s) * epochs
    return result
