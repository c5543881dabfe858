"""The study's plots: optimization history, parameter importance (on distinct configurations,
see :mod:`._importance`), slice and the num_workers x batch_size contour, as plotly figures
(for ``index.html``, the standalone HTML files and the dashboard) and as PNG (matplotlib, for
terminals and papers); and one trial's windows (images/s and data-wait per window).
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from loadersearch.report._importance import Importance, importances
from loadersearch.search import METRIC_NAME as METRIC

if TYPE_CHECKING:
    import optuna
    import plotly.graph_objects as go

_logger = logging.getLogger(__name__)

CONTOUR = ("num_workers", "batch_size")


def _contour_params(study: optuna.Study) -> list[str] | None:
    params: set[str] = set()
    for t in study.get_trials(deepcopy=False):
        params.update(t.params)
    return list(CONTOUR) if set(CONTOUR) <= params else None


def importance_title(importance: Importance) -> str:
    return f"Parameter importance on {len(importance.trials)} distinct configurations"


def importance_figure(importance: Importance) -> go.Figure:
    """A horizontal bar per knob, the most important on top (as Optuna draws it)."""
    import plotly.graph_objects as go

    names = list(importance.values)[::-1]
    values = [importance.values[n] for n in names]
    low = [importance.intervals.get(n, (v, v))[0] for n, v in zip(names, values, strict=True)]
    high = [importance.intervals.get(n, (v, v))[1] for n, v in zip(names, values, strict=True)]
    fig = go.Figure(
        go.Bar(
            x=values,
            y=names,
            orientation="h",
            text=[f"{v:.2f}" for v in values],
            textposition="outside",
            customdata=list(zip(low, high, strict=True)),
            hovertemplate="%{y}: %{x:.3f} (90%: %{customdata[0]:.2f}-%{customdata[1]:.2f})"
            "<extra></extra>",
            error_x={
                "type": "data",
                "symmetric": False,
                "array": [max(0.0, h - v) for h, v in zip(high, values, strict=True)],
                "arrayminus": [max(0.0, v - lo) for lo, v in zip(low, values, strict=True)],
            }
            if importance.intervals
            else None,
        )
    )
    verdict = importance.verdict()
    fig.update_layout(
        title=f"{importance_title(importance)} ({importance.evaluator}, 90% intervals)"
        + (f"<br><sup>{verdict}</sup>" if verdict else ""),
        xaxis_title=f"importance for {METRIC}",
        margin={"l": 140},
    )
    return fig


def figures(study: optuna.Study, importance: Importance | None = None) -> dict[str, go.Figure]:
    """The plotly figures by name; a plot that cannot be drawn (too few trials) is left out
    and logged."""
    import optuna.visualization as pv

    importance = importance or importances(study)
    return _draw(_makers(study, importance, pv, importance_figure), "")


def _makers(
    study: optuna.Study,
    importance: Importance,
    plots: Any,
    draw_importance: Callable[[Importance], Any],
) -> dict[str, Callable[[], Any]]:
    """The study's plots by name, each drawn when called: ``plots`` is
    ``optuna.visualization`` (plotly) or ``optuna.visualization.matplotlib`` (the same
    functions); the importance chart only when there are importances."""
    makers: dict[str, Callable[[], Any]] = {
        "history": lambda: plots.plot_optimization_history(study, target_name=METRIC),
        "importance": lambda: draw_importance(importance),
        "slice": lambda: plots.plot_slice(study, target_name=METRIC),
    }
    contour = _contour_params(study)
    if contour:
        makers["contour_workers_batch"] = lambda: plots.plot_contour(
            study, params=contour, target_name=METRIC
        )
    if not importance.values:
        del makers["importance"]
    return makers


def _draw(makers: dict[str, Callable[[], Any]], kind: str) -> dict[str, Any]:
    import optuna

    drawn = {}
    for name, make in makers.items():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                # Few trials make degenerate axes (one batch size); the plot is still right.
                warnings.simplefilter("ignore", UserWarning)
                drawn[name] = make()
        except Exception as e:  # a plot of too few trials must not stop the report
            _logger.warning("cannot draw %s%s: %s", name, kind, e)
    return drawn


def write_plots(
    study: optuna.Study, out_dir: str, importance: Importance | None = None
) -> list[str]:
    """Each plot as HTML (plotly) and PNG (matplotlib). Returns the files written."""
    importance = importance or importances(study)
    os.makedirs(out_dir, exist_ok=True)
    figs = figures(study, importance)
    return write_figures_html(figs, out_dir) + write_pngs(study, out_dir, importance)


def write_figures_html(figs: dict[str, go.Figure], out_dir: str) -> list[str]:
    """``NAME.html`` per figure; plotly.js is written once beside them, as ``plotly.min.js``,
    so that they open offline (no CDN)."""
    written = []
    for name, fig in figs.items():
        path = os.path.join(out_dir, f"{name}.html")
        fig.write_html(path, include_plotlyjs="directory")
        written.append(path)
    return written


def write_pngs(study: optuna.Study, out_dir: str, importance: Importance) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import optuna.visualization.matplotlib as pm

    written = []
    for name, ax in _draw(_makers(study, importance, pm, _importance_axes), " as PNG").items():
        fig = ax.flat[0].figure if hasattr(ax, "flat") else ax.figure
        path = os.path.join(out_dir, f"{name}.png")
        fig.savefig(path, dpi=100, bbox_inches="tight")
        plt.close(fig)
        written.append(path)
    return written


def _importance_axes(importance: Importance) -> Any:
    import matplotlib.pyplot as plt

    names = list(importance.values)[::-1]
    fig, ax = plt.subplots(figsize=(7, 0.5 * len(names) + 1.5))
    ax.barh(names, [importance.values[n] for n in names])
    ax.set_title(f"{importance_title(importance)} ({importance.evaluator})")
    ax.set_xlabel(f"importance for {METRIC}")
    return ax


def window_figure_png(label: str, rates: list[float], waits: list[float], path: str) -> bool:
    """One trial's windows as a PNG: the images/s the pruner saw per window (``rates``), and
    the share of each window the training loop waited for data (``waits``). False when the
    trial has no windows."""
    if not rates:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(6, 5), sharex=True)
    top.plot(range(len(rates)), rates, marker="o")
    top.set_ylabel("images/s")
    top.set_ylim(bottom=0)
    top.set_title(f"{label}: window rates and data-wait")
    bottom.bar(range(len(waits)), [100 * w for w in waits], color="tab:orange")
    bottom.set_ylabel("data-wait %")
    bottom.set_ylim(0, 100)
    bottom.set_xlabel("window (the same position in every trial)")
    fig.savefig(path, dpi=80, bbox_inches="tight")
    plt.close(fig)
    return True
