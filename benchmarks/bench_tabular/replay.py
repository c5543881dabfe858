"""Replay search methods against the table: the real study machinery (sampler, pruner,
objective, baselines, confirmation), with every measurement drawn from the table.

A replayed loadersearch run is what ``loadersearch run`` does after its batch-size probe
(the space bounded to the batches under the cap): the baselines enqueued first, the sampler
under test, the Wilcoxon pruner acting on the drawn measurement's windows one by one, the
objective's bookkeeping, and at the end the interleaved confirmation of the finalists. Random
search is what a user would run instead: Optuna's RandomSampler over the same space, no
pruning, no baselines, its best trial as the answer. Budgets count trials, the baselines
included (``--trials N``).

Each seed runs one study up to the largest budget; the answer at a smaller budget is the
confirmation of the study as it stood after that many trials (samplers do not know the
budget, so the trials are those a run with that budget makes). A method's cost is the time
its measurements took on this machine, as the table recorded it: a pruned trial costs its
fixed cost, warm-up and the windows it ran.
"""

from __future__ import annotations

import logging
import random
import statistics
import time
import warnings
import zlib
from dataclasses import dataclass, fields
from typing import Any

import optuna
from optuna.trial import TrialState

from bench_tabular.table import Repeat, Table, as_result
from loadersearch import Hardware, LoaderConfig
from loadersearch.measure import OK, MeasurePlan
from loadersearch.search import SearchSpace, StudySettings
from loadersearch.workload import WorkloadSpec

log = logging.getLogger(__name__)

RANDOM_SEARCH = "random search"
# The confirmation's rounds of ``loadersearch run`` (``--confirm-rounds``'s default): a
# replayed run confirms as a user's run does.
CONFIRM_ROUNDS: int = next(f.default for f in fields(StudySettings) if f.name == "confirm_rounds")


def setup(table_path: Any) -> dict[str, Any]:
    """What a replay against the table at ``table_path`` needs: the table, the space the
    batch-size probe leaves (batches under the cap), workload, plan, hardware, and whether it
    replays as a CUDA host (a table whose meta says ``gpu``: the baselines and the sampler's
    pinned memory as ``study.py`` sets them on CUDA)."""
    from bench_tabular.grid import read_table

    table = Table.from_data(read_table(table_path))
    meta = table.meta
    cap = table.cap_batch()
    batches = [b for b in table.batches if cap is None or b < cap]  # what the probe leaves
    space = SearchSpace(
        num_workers=(table.workers[0], table.workers[-1]),
        batch_size=(batches[0], batches[-1]),
        batch_step=0,
        prefetch_factor=(table.prefetch[0], table.prefetch[-1]),
    )
    return {
        "table": table,
        "space": space,
        "workload": WorkloadSpec.from_dict(meta.get("workload", {"kind": "emulated"})),
        "plan": MeasurePlan.from_dict(meta["plan"]),
        "hardware": Hardware.from_dict(meta.get("hardware")),
        "gpu": bool(meta.get("gpu")),
    }


@dataclass(frozen=True)
class Method:
    name: str
    sampler: str | None  # a loadersearch sampler (search.sampler.SAMPLERS), "tpe-before", None
    pruner: str = "wilcoxon"
    baselines: bool = True
    confirm_rounds: int = CONFIRM_ROUNDS


def loadersearch_methods(samplers: list[str], *, confirm_rounds: int = CONFIRM_ROUNDS
                         ) -> list[Method]:  # fmt: skip
    return [Method(f"loadersearch ({s})", s, confirm_rounds=confirm_rounds) for s in samplers]


RANDOM = Method(RANDOM_SEARCH, None, pruner="none", baselines=False, confirm_rounds=0)


@dataclass
class Accounting:
    """The table time a replayed run spent, split into search and confirmation."""

    search_s: float = 0.0
    confirm_s: float = 0.0
    confirming: bool = False

    def add(self, seconds: float) -> None:
        if self.confirming:
            self.confirm_s += seconds
        else:
            self.search_s += seconds


def _before_sampler(seed: int) -> optuna.samplers.BaseSampler:
    """The sampler loadersearch used before issue 12 (for comparison): multivariate TPE,
    grouped, 8 start-up trials that the baselines use up, no check for repeats."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.TPESampler(
            seed=seed, multivariate=True, group=True, n_startup_trials=8
        )


def _sampler(method: Method, space: SearchSpace, seed: int, gpu: bool,
             inflight_images: float | None = None) -> optuna.samplers.BaseSampler:  # fmt: skip
    from loadersearch.search import make_sampler

    if method.sampler is None:
        return optuna.samplers.RandomSampler(seed=seed)
    if method.sampler == "tpe-before":
        return _before_sampler(seed)
    return make_sampler(method.sampler, space, seed=seed, prefer_pin=gpu,
                        inflight_images=inflight_images)  # fmt: skip


def _finished(study: optuna.Study) -> int:
    states = (TrialState.COMPLETE, TrialState.PRUNED)
    return len(study.get_trials(deepcopy=False, states=states))


def _answer(study: optuna.Study, objective: Any, method: Method, account: Accounting
            ) -> LoaderConfig | None:  # fmt: skip
    from loadersearch.search import confirm_study, feasible_complete, trial_config

    if method.confirm_rounds:
        account.confirming = True
        try:
            confirmation = confirm_study(study, objective, rounds=method.confirm_rounds)
        finally:
            account.confirming = False
        if confirmation:
            winner = next(c for c in confirmation["candidates"]
                          if c["trial"] == confirmation["winner"])  # fmt: skip
            return LoaderConfig.from_dict(winner["config"])
    ranked = feasible_complete(study)
    return trial_config(ranked[0], objective.space.fixed()) if ranked else None


# The fair replay's noise, scaled (benchmarks/miss_replay.py --trial-noise, --confirm-noise):
# 1 is each point's own noise, 0 its truth; the trials' and the confirmation's apart, so that
# a miss can be told to be the walk's design (it misses without noise) or the noise's.
TRIALS, CONFIRMATION = "trials", "confirmation"
NOISE_SCALE = {TRIALS: 1.0, CONFIRMATION: 1.0}


def replay_seed(
    method: Method,
    table: Table,
    space: SearchSpace,
    *,
    workload: WorkloadSpec,
    plan: MeasurePlan,
    hardware: Hardware,
    seed: int,
    budgets: list[int],
    gpu: bool = False,
    fair: bool = False,
    settle: bool = False,
) -> list[dict[str, Any]]:
    """One seed of one method: a row per budget (answer, its true value, costs, trials).
    ``fair``: every measurement (the confirmation's too) is a fresh draw from the point's
    truth and noise (:meth:`Table.fresh`), not one of its stored repeats. ``gpu``: replayed as
    a CUDA host. ``settle``: one row only, at the largest budget as a cap, the study stopped
    once settled as ``loadersearch run`` stops it (:mod:`loadersearch.search._settle`); its
    ``trials`` say how many it used."""
    from loadersearch.measure import host_inflight_budget
    from loadersearch.search import Objective, TrialCrash, enqueue_baselines, make_pruner, settled

    rng = random.Random(zlib.crc32(f"{method.name}:{seed}".encode()))
    account = Accounting()

    def measure_fn(workload_: Any, config: LoaderConfig, plan_: Any, *, on_window=None,
                   on_ready=None) -> Any:  # fmt: skip
        drawn = table.fresh(config, rng) if fair else table.draw(config, rng)
        scale = NOISE_SCALE[CONFIRMATION if account.confirming else TRIALS]
        if fair and scale != 1.0 and drawn.status == OK:
            # the same point drawn with its noise scaled (from a stream of its own, so that
            # the trials' stream moves on as it would)
            value, noise = table.model_point(config)
            drawn = Repeat.synthetic(value, noise * scale, config.batch_size,
                                     random.Random(drawn.objective))
        result = as_result(config, drawn, dataset_len=table.dataset_len,
                           on_window=on_window, on_ready=on_ready)  # fmt: skip
        account.add(result.wall_s)
        return result

    inflight = host_inflight_budget(hardware, workload, "cuda" if gpu else "cpu")
    study = optuna.create_study(
        storage=optuna.storages.InMemoryStorage(),
        # the host's memory as study.py bounds the default prefetch with it (the table's
        # hardware: a model's /dev/shm and RAM, where it models them)
        sampler=_sampler(method, space, seed, gpu, inflight),
        pruner=make_pruner(method.pruner, plan.n_windows),
        direction="maximize",
    )
    study.set_user_attr("hardware", hardware.to_dict())  # as a run's study holds it
    study.set_user_attr("inflight_images", inflight)  # and its memory bound (the settle rule's)
    if method.baselines:
        enqueue_baselines(study, space, hardware, gpu=gpu)
    objective = Objective(space, workload, plan, measure_fn=measure_fn)
    _, optimum = table.optimum()
    rows = []
    t0 = time.perf_counter()
    for budget in [max(budgets)] if settle else sorted(budgets):
        while _finished(study) < budget:
            if settle and settled(study, budget, space) is not None:
                break
            study.optimize(objective, n_trials=1, catch=(TrialCrash,))
        search_s = account.search_s
        answer = _answer(study, objective, method, account)
        trials = study.get_trials(deepcopy=False)[:budget]
        rows.append({
            "method": method.name,
            "seed": seed,
            "budget": budget,
            "answer": answer.label() if answer else None,
            "quality": table.true_value(answer) / optimum if answer else 0.0,
            "search_s": search_s,
            "confirm_s": account.confirm_s,
            "pruned": sum(t.state == TrialState.PRUNED for t in trials),
            "repeats": sum("repeat_of" in t.user_attrs for t in trials),
            "repeats_avoided": sum("repeat_avoided" in t.user_attrs for t in trials),
            "sampler_s": time.perf_counter() - t0,
            "trials": _finished(study),
        })  # fmt: skip
        account.confirm_s = 0.0  # each budget's confirmation is its own
    return rows


def summarise(rows: list[dict[str, Any]], *, order: list[str] | None = None,
              target: float = 0.97) -> dict[str, Any]:  # fmt: skip
    """Per method (in ``order``) and budget: median and 10th percentile of the quality, share
    of seeds at or above ``target``, mean costs; per method: the smallest budget at which 90%
    of the seeds reach ``target``."""
    table: dict[str, dict[int, dict[str, Any]]] = {}
    names = order or list(dict.fromkeys(r["method"] for r in rows))
    for method in names:
        by_budget: dict[int, dict[str, Any]] = {}
        for budget in sorted({r["budget"] for r in rows if r["method"] == method}):
            sel = [r for r in rows if r["method"] == method and r["budget"] == budget]
            q = sorted(r["quality"] for r in sel)
            by_budget[budget] = {
                "seeds": len(sel),
                "median": statistics.median(q),
                "p10": percentile(q, 10),
                "worst": q[0],
                "reach": sum(x >= target for x in q) / len(q),
                "search_s": statistics.mean(r["search_s"] for r in sel),
                "confirm_s": statistics.mean(r["confirm_s"] for r in sel),
                "pruned": statistics.mean(r["pruned"] for r in sel),
                "repeats": statistics.mean(r["repeats"] for r in sel),
                "repeats_avoided": statistics.mean(r["repeats_avoided"] for r in sel),
            }
        reach90 = next((b for b, s in by_budget.items() if s["reach"] >= 0.9), None)
        table[method] = {"budgets": by_budget, "budget_for_90pct": reach90}
    return table


def percentile(sorted_values: list[float], pct: float) -> float:
    """The ``pct`` percentile of sorted values, linearly interpolated (numpy's default)."""
    if not sorted_values:
        return float("nan")
    k = (len(sorted_values) - 1) * pct / 100.0
    lo = int(k)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (k - lo)
