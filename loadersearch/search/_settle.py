"""When the answer is settled: ``--trials N`` is a cap, not a quota.

A study stops before its cap once the trials left are unlikely to change the answer: the
search has walked a while without measuring anything above its best, after it has seen the
dimensions that matter. Precisely, the study is settled when

- at least :data:`MIN_TRIALS` trials have finished and no trial is queued (the baselines, a
  configuration to measure again) or running;
- the finished trials cover the space: at least 3 distinct ``num_workers`` values (fewer when
  the range holds fewer) and 2 batch sizes when the batch size is searched; and, where the
  host has :data:`PREFETCH_CPUS` CPUs or more (the study's ``hardware``), the largest
  ``prefetch_factor`` has been measured with workers: a deep queue hides the spread of reads,
  a gain of up to ~10% that one noisy step (2 -> 4) does not show (where the study's memory
  bound keeps the queue shallow, a queue deeper than the bound's, measured or failed);
- none of the last :data:`QUIET_FOR` finished trials (complete or pruned) measured above the
  best of the trials before them (by more than :data:`MIN_GAIN`; 0: any higher measurement).
  The best so far is the largest of many noisy measurements, so it sits high in its own
  noise: a bar of the best *plus* its noise (the rule before) let a real gain of a few
  percent pass as noise and settled too early on 7 of the 12 design landscapes of the zoo
  (docs/benchmarks/settle-replay.md). The default search of issue 23 finds its best sooner
  and then walks its refinements (finer worker steps, persistence, pinning, prefetch), each
  worth a point or two: after 12 quiet trials 7 of the 12 design landscapes lost more than a
  point of 10th percentile against the full budget, after 16 one does (20 seeds).

The decision is stored in the study (user attribute ``settled``: after how many trials, of which
cap, the time the rest would have cost) so that every worker stops and the answer says it. A
resume with a larger ``--trials`` goes on (the user asked for more); ``--no-settle`` (``settle =
false``) spends the whole budget.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import optuna

    from loadersearch.search._space import SearchSpace

SETTLED_ATTR = "settled"
SETTLE_ATTR = "settle"  # the study's choice (True unless --no-settle), read by its workers
MIN_TRIALS = 14
QUIET_FOR = 16  # finished trials in a row that measured nothing above the best before them
MIN_GAIN = 0.0  # the smallest relative gain that counts (0: any measurement above the best)
PREFETCH_CPUS = 4  # on a host of this many CPUs or more the deepest prefetch must be measured
Z90 = 1.645  # a 90% interval's half-width in standard deviations


@dataclass(frozen=True)
class Settled:
    after: int  # finished trials when the study settled
    total: int  # the cap it settled under
    saved_s: float  # what the trials left would have cost, at the study's mean trial time
    best: int  # the best trial's number then

    def to_dict(self) -> dict[str, Any]:
        return {
            "after": self.after,
            "total": self.total,
            "saved_s": round(self.saved_s, 1),
            "best": self.best,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Settled:
        return cls(
            after=int(data["after"]),
            total=int(data["total"]),
            saved_s=float(data.get("saved_s") or 0.0),
            best=int(data.get("best", -1)),
        )


def trial_noise(trial: optuna.trial.FrozenTrial, default: float = 0.0) -> float:
    """A measurement's relative standard deviation, from what its trial stored: its stated
    precision (a 90% interval of the projected epoch time), else its windows' spread over
    their number, else ``default``. The report's importance uses it too."""
    precision = trial.user_attrs.get("precision")
    if precision:
        return float(precision) / Z90
    cv, windows = trial.user_attrs.get("window_cv"), trial.user_attrs.get("windows_done")
    if cv:
        return float(cv) / math.sqrt(max(1, int(windows or 1)))
    return default


def _covered(trials: list[optuna.trial.FrozenTrial], space: SearchSpace, cpus: int | None,
             inflight: float | None = None) -> bool:  # fmt: skip
    workers = {t.params.get("num_workers", space.num_workers[0]) for t in trials}
    lo, hi = space.num_workers
    if len(workers) < min(3, hi - lo + 1):
        return False
    batches = {t.params.get("batch_size", space.batch_size[0]) for t in trials}
    if len(batches) < min(2, len(space.batch_choices())):
        return False
    return _deepest_prefetch_seen(trials, space, cpus, inflight)


def _deepest_prefetch_seen(
    trials: list[optuna.trial.FrozenTrial],
    space: SearchSpace,
    cpus: int | None,
    inflight: float | None = None,
) -> bool:
    """The largest ``prefetch_factor`` measured with workers, where it matters: on a host of
    :data:`PREFETCH_CPUS` CPUs or more (``cpus``; unknown: half the worker range's top, the
    bound loadersearch gives a host). On fewer CPUs few batches are in flight, and the
    measured 2-core host shows no prefetch effect beyond its noise. Where the study's memory
    bound (``inflight``: the images in flight its search starts a configuration within,
    :func:`~loadersearch.measure.host_inflight_budget`) keeps the queue shallow, a queue
    deeper than the bound's at its workers and batch, measured or failed (``shm_full``),
    counts: the deepest one may not fit anywhere the search goes."""
    from loadersearch.search._ladder_steps import fitting_prefetch, ladder

    lo, hi = space.prefetch_factor
    if cpus is None:
        cpus = space.num_workers[1] // 2
    if lo == hi or cpus < PREFETCH_CPUS:
        return True
    rungs = ladder(list(range(lo, hi + 1)))
    for t in trials:
        workers = t.params.get("num_workers", space.num_workers[0])
        prefetch = t.params.get("prefetch_factor", lo)
        if workers <= 0:
            continue
        if prefetch == hi:
            return True
        if inflight is not None:
            batch = t.params.get("batch_size", space.batch_size[0])
            if prefetch > fitting_prefetch(rungs, workers, batch, inflight):
                return True
    return False


def settled(study: optuna.Study, total: int, space: SearchSpace) -> Settled | None:
    """The study's settling, when its answer is settled now (see the module's rule)."""
    hardware = study.user_attrs.get("hardware") or {}
    cpus = hardware.get("usable_cpus") or hardware.get("cpu_count")  # what the loader may use
    inflight = study.user_attrs.get("inflight_images")  # the creator's memory bound
    return settled_trials(study.get_trials(deepcopy=False), total, space, cpus=cpus,
                          inflight=inflight)  # fmt: skip


def settled_trials(
    trials: list[optuna.trial.FrozenTrial],
    total: int,
    space: SearchSpace,
    *,
    cpus: int | None = None,
    inflight: float | None = None,
) -> Settled | None:
    """:func:`settled` on a study's trials (a replay asks it of the trials as they stood) on a
    host of ``cpus`` CPUs (None: unknown) whose memory bound is ``inflight`` (None: none)."""
    from optuna.trial import TrialState

    if any(t.state in (TrialState.WAITING, TrialState.RUNNING) for t in trials):
        return None
    finished = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    if len(finished) < MIN_TRIALS or len(finished) >= total:
        return None
    if not _covered(finished, space, cpus, inflight):
        return None
    finished.sort(key=lambda t: t.number)
    before, recent = finished[:-QUIET_FOR], finished[-QUIET_FOR:]

    def measured(ts: list[optuna.trial.FrozenTrial]) -> list[optuna.trial.FrozenTrial]:
        return [
            t
            for t in ts
            if t.state == TrialState.COMPLETE
            and t.user_attrs.get("feasible", True)
            and t.value is not None
            and t.value > 0
        ]

    best = max(measured(before), key=lambda t: t.value, default=None)
    if best is None:
        return None
    bar = best.value * (1.0 + MIN_GAIN)
    if any(t.value > bar for t in measured(recent)):
        return None
    walls = [float(t.user_attrs.get("wall_s") or 0.0) for t in finished]
    mean_wall = statistics.fmean(walls) if walls else 0.0
    return Settled(
        after=len(finished),
        total=total,
        saved_s=mean_wall * (total - len(finished)),
        best=best.number,
    )


def stored_settled(study: optuna.Study) -> Settled | None:
    data = study.user_attrs.get(SETTLED_ATTR)
    return Settled.from_dict(data) if data else None


def settle_check(study: optuna.Study, total: int, space: SearchSpace, *, enabled: bool):
    """The check :func:`~loadersearch.search._budget.optimize_to_total` runs before each trial
    (None when the study spends its whole budget): it records the settling once and returns
    it. A study that settled under a smaller cap than ``total`` goes on to ``total``."""
    if not enabled or not study.user_attrs.get(SETTLE_ATTR, True):
        return None
    previous = stored_settled(study)
    if previous is not None and previous.total < total:
        study.set_user_attr(SETTLED_ATTR, None)  # asked for more: the old settling no longer
        return None  # says what the study holds

    def check(study_: optuna.Study) -> Settled | None:
        if previous is not None and previous.total == total:
            return previous
        found = settled(study_, total, space)
        if found is not None:
            study_.set_user_attr(SETTLED_ATTR, found.to_dict())
        return found

    return check
