"""The overhead of the search itself as the study grows.

Per trial, the time loadersearch spends outside the measurement: the sampler's ask and the
parameter suggestions (the sampler reads every finished trial), the storage writes of each
window's value and the pruner's decision after it, the user attributes of the measurement, the
final tell, and the start of the measuring child process (a fork of the run's fork server).
The study is pre-filled with realistic finished trials (params over the real search space,
values, per-window intermediate values, user attributes) so that the figures at 10, 100 and
1000 trials come from the same storage and sampler code users run.
"""

from __future__ import annotations

import logging
import math
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

_logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SpaceBounds:
    """The search space the pre-filled trials are drawn from (the same shape as the study's)."""

    max_workers: int = 4  # 2x logical CPUs on this machine
    batch_sizes: tuple[int, ...] = (4, 8, 16, 32, 64)
    prefetch: tuple[int, int] = (1, 8)


def suggest_fallback(trial: Any, bounds: SpaceBounds) -> dict[str, Any]:
    """Suggest the five knobs with the conditional structure of the study's space.

    Used only until/unless the search package's own space function is given; the overhead
    depends on the shape of the space (5 params, 2 conditional), not on its exact bounds.
    """
    params: dict[str, Any] = {
        "num_workers": trial.suggest_int("num_workers", 0, bounds.max_workers),
        "batch_size": trial.suggest_categorical("batch_size", list(bounds.batch_sizes)),
        "pin_memory": trial.suggest_categorical("pin_memory", [False, True]),
    }
    if params["num_workers"] > 0:
        params["prefetch_factor"] = trial.suggest_int("prefetch_factor", *bounds.prefetch)
        params["persistent_workers"] = trial.suggest_categorical(
            "persistent_workers", [False, True]
        )
    return params


def _fake_rate(params: dict[str, Any], rng: np.random.Generator) -> float:
    """A plausible projected images/s for ``params`` (a loader/accelerator min model + noise)."""
    w, b = params["num_workers"], params["batch_size"]
    loader = 60.0 * (1 + min(w, 2) * 0.9) * (1.05 if params.get("pin_memory") else 1.0)
    accel = 1000.0 * b / (20.0 + 2.0 * b)
    start = 0.0 if params.get("persistent_workers") else 0.1 * w
    rate = min(loader, accel)
    rate = 512 / (512 / rate + start)
    return float(rate * rng.normal(1.0, 0.03))


def _user_attrs(params: dict[str, Any], rate: float, rng: np.random.Generator) -> dict[str, Any]:
    """The user attributes a measured trial carries: the search objective's own
    (``result_attrs`` of a plausible measurement) when the search package is there."""
    try:
        from loadersearch import LoaderConfig
        from loadersearch.measure import OK, MeasureResult
        from loadersearch.search import result_attrs
    except ImportError:
        pass
    else:
        result = MeasureResult(
            config=LoaderConfig.from_dict(params),
            status=OK,
            device="emulated",
            workload="emulated",
            emulated=True,
            dataset_images=512,
            steady_rate=rate * 1.02,
            start_cost_s=float(rng.uniform(0.0, 0.4)),
            objective=rate,
            epoch_time_s=512 / rate,
            window_cv=float(rng.uniform(0.01, 0.08)),
            wait_fraction=float(rng.uniform(0, 0.8)),
            overhead_s=float(rng.uniform(2, 4)),
            warmup_s=float(rng.uniform(1, 3)),
            peak_vram_bytes=int((600 + 150 * params["batch_size"]) * 2**20),
            cpu_util_mean=float(rng.uniform(80, 200)),
            peak_rss_bytes=int(rng.uniform(0.5e9, 3e9)),
            shm_peak_bytes=int(rng.uniform(0, 2e8)),
            wall_s=float(rng.uniform(5, 12)),
        )
        return {**result_attrs(result), "host": "bench-host"}
    return {
        "steady_rate": rate * 1.02,
        "start_cost_s": float(rng.uniform(0.0, 0.4)),
        "epoch_time_s": 512 / rate,
        "wait_fraction": float(rng.uniform(0, 0.8)),
        "window_cv": float(rng.uniform(0.01, 0.08)),
        "peak_vram_bytes": int((600 + 150 * params["batch_size"]) * 2**20),
        "gpu_util_mean": None,
        "cpu_util_mean": float(rng.uniform(80, 200)),
        "peak_rss_bytes": int(rng.uniform(0.5e9, 3e9)),
        "shm_peak_bytes": int(rng.uniform(0, 2e8)),
        "overhead_s": float(rng.uniform(3, 5)),
        "warmup_s": float(rng.uniform(1, 3)),
        "host": "bench-host",
        "device": "emulated",
        "emulated": True,
        "config": ", ".join(f"{k}={v}" for k, v in params.items()),
    }


def prefill_trials(
    n: int,
    suggest: Callable[[Any], dict[str, Any]],
    *,
    n_windows: int = 6,
    pruned_share: float = 0.25,
    seed: int = 0,
) -> list[Any]:
    """``n`` finished trials (COMPLETE, and PRUNED with fewer windows) over the real space."""
    import optuna

    rng = np.random.default_rng(seed)
    # Draw params with the real conditional space: a throwaway in-memory study and RandomSampler.
    scratch = optuna.create_study(
        storage=optuna.storages.InMemoryStorage(),
        sampler=optuna.samplers.RandomSampler(seed=seed),
        direction="maximize",
    )
    trials = []
    for _ in range(n):
        t = scratch.ask()
        params = suggest(t)
        frozen_params, dists = dict(t.params), dict(t.distributions)
        scratch.tell(t, 0.0)
        rate = _fake_rate(params, rng)
        pruned = rng.random() < pruned_share
        steps = int(rng.integers(1, n_windows)) if pruned else n_windows
        inter = {k: float(rate * rng.normal(1.0, 0.05)) for k in range(steps)}
        trials.append(
            optuna.trial.create_trial(
                state=optuna.trial.TrialState.PRUNED
                if pruned
                else optuna.trial.TrialState.COMPLETE,
                value=None if pruned else rate,
                params=frozen_params,
                distributions=dists,
                user_attrs=_user_attrs(params, rate, rng),
                intermediate_values=inter,
                constraints=None if pruned else {"feasible": 0.0},
            )
        )
    return trials


def _timed_sampler(inner: Any) -> Any:
    """A sampler delegating to ``inner`` that adds up the seconds spent inside it (its own
    storage reads included) in ``.seconds``."""
    import optuna

    class TimedSampler(optuna.samplers.BaseSampler):
        seconds = 0.0

        def _timed(self, fn: Callable[..., Any], *args: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args)
            finally:
                self.seconds += time.perf_counter() - t0

        def infer_relative_search_space(self, study, trial):
            return self._timed(inner.infer_relative_search_space, study, trial)

        def sample_relative(self, study, trial, search_space):
            return self._timed(inner.sample_relative, study, trial, search_space)

        def sample_independent(self, study, trial, param_name, param_distribution):
            return self._timed(
                inner.sample_independent, study, trial, param_name, param_distribution
            )

        def before_trial(self, study, trial):
            return self._timed(inner.before_trial, study, trial)

        def after_trial(self, study, trial, state, values):
            return self._timed(inner.after_trial, study, trial, state, values)

        def reseed_rng(self):
            return inner.reseed_rng()

    return TimedSampler()


def time_trials(
    study: Any,
    suggest: Callable[[Any], dict[str, Any]],
    *,
    trials: int,
    n_windows: int,
    seed: int = 0,
) -> dict[str, float]:
    """Run ``trials`` ask -> suggest -> (report, should_prune) x windows -> user attrs -> tell
    cycles on ``study`` with no measurement in between; median seconds per part."""
    import optuna

    rng = np.random.default_rng(seed + 1)
    timer = study.sampler
    parts: dict[str, list[float]] = {
        k: [] for k in ("ask_suggest", "sampler", "report_prune", "user_attrs", "tell", "total")
    }
    for _ in range(trials):
        s0 = timer.seconds
        t0 = time.perf_counter()
        trial = study.ask()
        params = suggest(trial)
        t1 = time.perf_counter()
        rate = _fake_rate(params, rng)
        pruned = False
        for k in range(n_windows):
            trial.report(float(rate * rng.normal(1.0, 0.05)), k)
            if trial.should_prune():
                pruned = True
                break
        t2 = time.perf_counter()
        for key, value in _user_attrs(params, rate, rng).items():
            trial.set_user_attr(key, value)
        t3 = time.perf_counter()
        if pruned:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        else:
            trial.set_constraint("feasible", 0.0)  # as the search's objective does
            study.tell(trial, rate)
        t4 = time.perf_counter()
        parts["ask_suggest"].append(t1 - t0)
        parts["sampler"].append(timer.seconds - s0)
        parts["report_prune"].append(t2 - t1)
        parts["user_attrs"].append(t3 - t2)
        parts["tell"].append(t4 - t3)
        parts["total"].append(t4 - t0)
    return {k: statistics.median(v) for k, v in parts.items()}


SQLITE_WAL = "sqlite-wal"


def _sqlite_wal(storage: Any) -> None:
    """Put every connection of ``storage``'s engine in WAL mode with ``synchronous=NORMAL``:
    a commit appends to the log instead of syncing the database file twice."""
    from sqlalchemy import event

    @event.listens_for(storage.engine, "connect")
    def _pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    storage.engine.dispose()  # connections opened before the listener reconnect with it


def measure_overhead(
    storage_urls: dict[str, str],
    sizes: tuple[int, ...] = (10, 100, 1000),
    *,
    make_sampler: Callable[[int], Any],
    make_pruner: Callable[[], Any],
    suggest: Callable[[Any], dict[str, Any]],
    trials: int = 5,
    n_windows: int = 6,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """One row per (backend, pre-filled size): median seconds per part of a trial.

    ``storage_urls`` maps a backend label to a URL; a SQLite backend may be ``None`` for a
    fresh temporary file, and the label :data:`SQLITE_WAL` opens it in write-ahead-log mode
    with ``synchronous=NORMAL`` (a candidate tuning of the default storage). Each study gets a
    unique name and is deleted afterwards.
    """
    import optuna

    from loadersearch.storage import open_storage, redact_url

    rows = []
    for backend, url in storage_urls.items():
        tmpdir = None
        if url is None:
            tmpdir = tempfile.mkdtemp(prefix="ls-bench-overhead-")
            url = f"sqlite:///{os.path.join(tmpdir, 'overhead.db')}"
        # One study per backend, grown in place: 10, then 90 more, then 900 more (the timed
        # trials of the smaller sizes count towards the next one).
        storage = open_storage(url)
        if backend == SQLITE_WAL:
            _sqlite_wal(storage)
        name = f"bench-overhead-{uuid.uuid4().hex[:10]}"
        study = optuna.create_study(
            study_name=name,
            storage=storage,
            sampler=_timed_sampler(make_sampler(seed)),
            pruner=make_pruner(),
            direction="maximize",
        )
        try:
            for n in sorted(sizes):
                t0 = time.perf_counter()
                missing = n - len(study.get_trials(deepcopy=False))
                if missing > 0:
                    study.add_trials(
                        prefill_trials(missing, suggest, n_windows=n_windows, seed=seed + n)
                    )
                fill_s = time.perf_counter() - t0
                parts = time_trials(study, suggest, trials=trials, n_windows=n_windows, seed=seed)
                row = {"backend": backend, "url": redact_url(url), "prefilled": n}
                row.update({"fill_s": fill_s, **{f"{k}_s": v for k, v in parts.items()}})
                rows.append(row)
                _logger.info(
                    "overhead %s n=%d: %.1f ms/trial (sampler %.1f ms)",
                    backend, n, 1e3 * parts["total"], 1e3 * parts["sampler"],
                )  # fmt: skip
        finally:
            try:
                optuna.delete_study(study_name=name, storage=storage)
            except Exception as e:  # say so: a leftover study in a shared database
                _logger.warning("could not delete study %s: %s", name, e)
            if hasattr(storage, "engine"):
                storage.engine.dispose()
        if tmpdir:
            import shutil

            shutil.rmtree(tmpdir, ignore_errors=True)
    return rows


def overhead_share(row: dict[str, Any], start_s: float, measure_s: float) -> dict[str, float]:
    """The study's per-trial cost, and it plus the measuring child's start, as shares of a
    typical trial (its measurement's wall time ``measure_s``, ``start_s`` of which is the
    child's start, plus the study's own cost)."""
    study_s = row["total_s"]
    trial_s = measure_s + study_s
    if not trial_s > 0:
        return {"study_pct": math.nan, "with_start_pct": math.nan}
    return {
        "study_pct": 100 * study_s / trial_s,
        "with_start_pct": 100 * (study_s + start_s) / trial_s,
    }
