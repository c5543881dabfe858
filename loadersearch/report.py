"""What a study found, read from the storage only: the winner, its speedup over each baseline,
the ranked trials, parameter importance and plots. Knows nothing of how a trial ran.

The winner is the confirmed one (study user attribute "confirmation", the interleaved
re-measurement of the finalists) when present, else the best trial, marked unconfirmed.
Speedups over the baseline in the confirmation use its confirmation median (the same
measurement conditions as the winner's); the other baselines' use their trial values.
"""

from __future__ import annotations

import logging
import os
import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from loadersearch.config import LoaderConfig
from loadersearch.errors import StudyError

if TYPE_CHECKING:
    import optuna

_logger = logging.getLogger(__name__)


@dataclass
class Winner:
    config: LoaderConfig
    trial: int
    rate: float  # images/s: the confirmation median, else the trial value
    confirmed: bool
    low: float | None = None  # confirmation min and max
    high: float | None = None
    spread: float | None = None  # (max - min) / median
    rounds: int = 0
    epoch_time_s: float | None = None  # projected seconds of one full epoch


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
    pruning: dict[str, float]  # measured seconds saved by pruning
    probe: dict[str, Any] | None
    hardware: dict[str, Any] = field(default_factory=dict)
    gpus: int = 1  # ranks of the measured DDP job; the answer is per rank


def open_study(storage: str | None = None, study: str | None = None) -> optuna.Study:
    """Load a study (``study`` may be omitted when the storage holds exactly one)."""
    import optuna

    from loadersearch.storage import open_existing_storage, redact_url, resolve_storage_url

    url = resolve_storage_url(storage)
    rdb = open_existing_storage(url)
    names = [s.study_name for s in rdb.get_all_studies()]
    if study is None:
        if len(names) != 1:
            listing = ", ".join(names) if names else "none"
            raise StudyError(
                f"{redact_url(url)} holds {len(names)} studies ({listing}); name one with --study."
            )
        study = names[0]
    if study not in names:
        raise StudyError(
            f"no study {study!r} in {redact_url(url)}; studies there: "
            f"{', '.join(names) or 'none'}."
        )
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.load_study(study_name=study, storage=rdb)


def _space_fixed(study: optuna.Study) -> dict[str, Any]:
    from loadersearch.search.space import SearchSpace

    spec = study.user_attrs.get("spec") or {}
    return SearchSpace.from_dict(spec["space"]).fixed() if "space" in spec else {}


def summarize(study: optuna.Study) -> Summary:
    """Everything the end-of-run summary and ``loadersearch report`` show."""
    from optuna.trial import TrialState

    from loadersearch.search.confirm import feasible_complete, trial_config

    fixed = _space_fixed(study)
    trials = study.get_trials(deepcopy=False)
    attrs = study.user_attrs
    confirmation = attrs.get("confirmation")
    ranked = feasible_complete(study)
    dataset_images = next(
        (
            int(t.user_attrs.get("dataset_images") or 0)
            for t in ranked
            if t.user_attrs.get("dataset_images")
        ),
        0,
    )

    winner = None
    confirmed: dict[str, dict[str, Any]] = {}  # baseline name -> its confirmation candidate
    if confirmation:
        cands = confirmation["candidates"]
        best = next(c for c in cands if c["trial"] == confirmation["winner"])
        winner = Winner(
            config=LoaderConfig.from_dict(best["config"]),
            trial=best["trial"],
            rate=best["median"],
            confirmed=True,
            low=best["min"],
            high=best["max"],
            spread=best["spread"],
            rounds=confirmation["rounds"],
        )
        for cand in cands:
            for name in (cand.get("baseline") or "").split("+"):
                if name:
                    confirmed[name] = cand
    elif ranked:
        t = ranked[0]
        winner = Winner(
            config=trial_config(t, fixed), trial=t.number, rate=float(t.value), confirmed=False
        )
    if winner and dataset_images and winner.rate > 0:
        winner.epoch_time_s = dataset_images / winner.rate

    epochs = int(attrs.get("epochs_planned", 300))
    results = []
    for b in attrs.get("baselines") or []:
        results.append(
            _baseline_result(b, trials, confirmed.get(b["name"]), winner, dataset_images, epochs)
        )

    counts = {"complete": 0, "pruned": 0, "infeasible": 0, "failed": 0, "running": 0}
    rows = []
    saved = spent = 0.0
    n_windows = (attrs.get("spec") or {}).get("plan", {})
    n_windows = n_windows.get("epochs", 0) * n_windows.get("windows_per_epoch", 0)
    for t in trials:
        ua = t.user_attrs
        if t.state == TrialState.COMPLETE:
            key = "complete" if ua.get("feasible", True) else "infeasible"
        elif t.state == TrialState.PRUNED:
            key = "pruned"
        elif t.state == TrialState.FAIL:
            key = "failed"
        else:
            key = "running"
        counts[key] += 1
        spent += float(ua.get("wall_s") or 0.0)
        done = int(ua.get("windows_done") or 0)
        if key == "pruned" and done and n_windows > done:
            saved += (n_windows - done) * float(ua.get("measured_s") or 0.0) / done
        config = trial_config(t, fixed) if t.params or fixed else None
        rows.append(
            {
                "trial": t.number,
                "state": key,
                "value": t.value if key == "complete" else None,
                "config": config.label() if config else "",
                "baseline": ua.get("baseline"),
                "reason": ua.get("infeasible_reason") or ua.get("reason"),
                "steady_rate": ua.get("steady_rate"),
                # A pruned measurement stops before its figures are computed.
                "wait_fraction": ua.get("wait_fraction") if key != "pruned" else None,
                "window_cv": ua.get("window_cv") if key != "pruned" else None,
                "peak_vram_bytes": ua.get("peak_vram_bytes"),
                "host": ua.get("host"),
            }
        )
    order = {"complete": 0, "pruned": 1, "infeasible": 2, "failed": 3, "running": 4}
    rows.sort(key=lambda r: (order[r["state"]], -(r["value"] or 0.0), r["trial"]))
    return Summary(
        study=study.study_name,
        description=attrs.get("workload_description", ""),
        emulated=bool(attrs.get("emulated")),
        epochs_planned=epochs,
        dataset_images=dataset_images,
        winner=winner,
        baselines=results,
        counts=counts,
        rows=rows,
        pruning={
            "saved_s": round(saved, 1),
            "spent_s": round(spent, 1),
            "fraction": round(saved / (saved + spent), 3) if saved + spent > 0 else 0.0,
        },
        probe=attrs.get("probe"),
        hardware=attrs.get("hardware") or {},
        gpus=int((attrs.get("spec") or {}).get("workload", {}).get("gpus") or 1),
    )


def _baseline_result(
    b: dict[str, Any],
    trials: list[optuna.trial.FrozenTrial],
    confirmed: dict[str, Any] | None,
    winner: Winner | None,
    dataset_images: int,
    epochs: int,
) -> BaselineResult:
    from optuna.trial import TrialState

    label = LoaderConfig.from_dict(b["config"]).label()
    trial = next((t for t in trials if t.user_attrs.get("baseline") == b["name"]), None)
    rate: float | None = None
    if confirmed:
        rate, source = confirmed["median"], "confirmation"
    elif trial is None or trial.state in (TrialState.RUNNING, TrialState.WAITING):
        source = "not measured yet"
    elif trial.state == TrialState.COMPLETE and trial.user_attrs.get("feasible", True):
        rate, source = float(trial.value), "trial"
    elif trial.state == TrialState.PRUNED and trial.intermediate_values:
        rate = statistics.fmean(trial.intermediate_values.values())
        source = "pruned trial (mean of its windows)"
    elif trial.state == TrialState.COMPLETE:
        source = f"infeasible ({trial.user_attrs.get('infeasible_reason')})"
    else:
        source = "failed"
    result = BaselineResult(name=b["name"], rule=b["rule"], label=label, rate=rate, source=source)
    if rate and winner and winner.rate:
        result.speedup = winner.rate / rate
        if dataset_images:
            result.epoch_time_s = dataset_images / rate
            if winner.epoch_time_s is not None:
                result.saved_s = (result.epoch_time_s - winner.epoch_time_s) * epochs
    return result


def load_best(storage: str | None = None, study: str | None = None) -> LoaderConfig:
    """The confirmed winner of a study (else its best trial) as a :class:`LoaderConfig`."""
    summary = summarize(open_study(storage, study))
    if summary.winner is None:
        raise StudyError(
            f"study {summary.study!r} has no finished feasible trial yet; run "
            "`loadersearch run` until it has."
        )
    return summary.winner.config


def importances(study: optuna.Study) -> tuple[dict[str, float], str]:
    """Parameter importance and the evaluator's name (fANOVA with scikit-learn, else
    Optuna's default PED-ANOVA)."""
    import optuna

    evaluator = None
    name = "PED-ANOVA"
    try:
        import sklearn  # noqa: F401

        evaluator = optuna.importance.FanovaImportanceEvaluator(seed=0)
        name = "fANOVA"
    except ImportError:
        pass
    import warnings

    try:
        with warnings.catch_warnings():
            # PED-ANOVA warns about conditional knobs seen in few trials; the table says enough.
            warnings.simplefilter("ignore", UserWarning)
            return optuna.importance.get_param_importances(study, evaluator=evaluator), name
    except (ValueError, RuntimeError) as e:
        _logger.info("no parameter importance: %s", e)
        return {}, name


def write_plots(study: optuna.Study, out_dir: str) -> list[str]:
    """History, importance, slice and the num_workers x batch_size contour, as HTML (plotly)
    and PNG (matplotlib). Returns the files written; a plot that cannot be drawn (too few
    trials) is skipped and logged."""
    import warnings

    import optuna
    import optuna.visualization as pv

    os.makedirs(out_dir, exist_ok=True)
    params = set()
    for t in study.get_trials(deepcopy=False):
        params.update(t.params)
    contour = [p for p in ("num_workers", "batch_size") if p in params]
    plots = {
        "history": (pv.plot_optimization_history, {}),
        "importance": (pv.plot_param_importances, {}),
        "slice": (pv.plot_slice, {}),
    }
    if len(contour) == 2:
        plots["contour_workers_batch"] = (pv.plot_contour, {"params": contour})
    written = []
    for name, (fn, kwargs) in plots.items():
        try:
            fig = fn(study, **kwargs)
            path = os.path.join(out_dir, f"{name}.html")
            fig.write_html(path, include_plotlyjs="cdn")
            written.append(path)
        except Exception as e:  # a plot of too few trials must not stop the report
            _logger.warning("cannot draw %s: %s", name, e)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import optuna.visualization.matplotlib as pm
    except ImportError:
        _logger.warning("matplotlib is not installed: no PNG plots")
        return written
    mplots = {
        "history": (pm.plot_optimization_history, {}),
        "importance": (pm.plot_param_importances, {}),
        "slice": (pm.plot_slice, {}),
    }
    if len(contour) == 2:
        mplots["contour_workers_batch"] = (pm.plot_contour, {"params": contour})
    for name, (fn, kwargs) in mplots.items():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                ax = fn(study, **kwargs)
            fig = ax.flat[0].figure if hasattr(ax, "flat") else ax.figure
            path = os.path.join(out_dir, f"{name}.png")
            fig.savefig(path, dpi=100, bbox_inches="tight")
            plt.close(fig)
            written.append(path)
        except Exception as e:
            _logger.warning("cannot draw %s as PNG: %s", name, e)
    return written


def env_lines(config: LoaderConfig) -> list[str]:
    """``LOADERSEARCH_NUM_WORKERS=4`` ... lines (for shell scripts)."""
    out = []
    for key, value in config.to_dict().items():
        if value is None:
            continue
        text = str(value).lower() if isinstance(value, bool) else str(value)
        out.append(f"LOADERSEARCH_{key.upper()}={text}")
    return out
